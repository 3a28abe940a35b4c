"""Results at a glance: every claim of every paper in one figure (analysis/plot_claims_summary.py),
from the combined claims table. Its target is in `all` (common.smk's all_targets), and so in
`figures`, which redraws every PNG of `all`."""


rule claims_summary:
    """results/<scale>/claims.png: ours with its interval, the paper's value, the verdict and the
    regime status of every claim."""
    input:
        claims=f"{RESULTS}/{{scale}}/claims.csv",
        specs=[f"{REPLICATIONS}/{p}/experiments.yaml" for p in PAPERS],
    output:
        report(f"{RESULTS}/{{scale}}/claims.png", caption="report/claims_summary.rst", category="all papers",
               labels={"figure": "claims at a glance"}),
    log:
        f"{RESULTS}/{{scale}}/logs/claims_summary.log",
    params:
        python=PYTHON,
        script=ANALYSIS / "plot_claims_summary.py",
        replications=lambda w, input: str(Path(input.specs[0]).parents[1]),   # the specs' folder
    conda: CONDA_ENV
    localrule: True
    shell:
        "{params.python:q} {params.script:q} --claims {input.claims:q} --scale {wildcards.scale}"
        " --replications {params.replications:q} --out {output:q} > {log:q} 2>&1"

