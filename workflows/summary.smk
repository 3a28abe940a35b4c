"""Results at a glance: every claim of every paper in one figure (analysis/plot_claims_summary.py),
from the combined claims table. Its target joins `all` (and so `figures`, which redraws every PNG
of `all`): all_targets (common.smk) is extended here, before the Snakefile's `all` reads it."""


rule claims_summary:
    """results/<scale>/claims.png: ours with its interval, the paper's value, the verdict and the
    regime status of every claim."""
    input:
        claims=f"{RESULTS}/{{scale}}/claims.csv",
        specs=[f"{REPLICATIONS}/{p}/experiments.yaml" for p in PAPERS],
    output:
        report(f"{RESULTS}/{{scale}}/claims.png", caption="report/claims_all.rst", category="all papers",
               labels={"figure": "claims at a glance"}),
    log:
        f"{RESULTS}/{{scale}}/logs/claims_summary.log",
    params:
        python=PYTHON,
        script=ANALYSIS / "plot_claims_summary.py",
    conda: CONDA_ENV
    localrule: True
    shell:
        "{params.python:q} {params.script:q} --claims {input.claims:q} --scale {wildcards.scale}"
        " --replications {REPLICATIONS:q} --out {output:q} > {log:q} 2>&1"


_targets_before_summary = all_targets


def all_targets():
    return _targets_before_summary() + [f"{RESULTS}/{SCALE}/claims.png"]
