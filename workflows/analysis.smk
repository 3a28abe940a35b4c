"""A figure's runs -> its tables -> its plot.

The scripts never look for runs: `{figure}_runs.json` (written here from the plan) names
every (series, seed) and its run directory, and is their only way in.
"""


rule figure_runs:
    """(series, seed) -> run id and run directory, with the figure's title and source."""
    output:
        f"{RESULTS}/{{scale}}/{{paper}}/{{figure}}_runs.json",
    log:
        f"{RESULTS}/{{scale}}/logs/{{paper}}/{{figure}}_runs.log",
    params:
        text=lambda wc: manifest_text(PLAN, wc.paper, wc.figure, RESULTS),
    conda: CONDA_ENV
    localrule: True
    shell:
        "(printf '%s' {params.text:q} > {output:q}.tmp && mv {output:q}.tmp {output:q}) 2> {log:q}"


rule aggregate:
    """One row per run (.csv, .md) and every evaluation row of every run (_curves.csv)."""
    input:
        runs=f"{RESULTS}/{{scale}}/{{paper}}/{{figure}}_runs.json",
        files=lambda wc: [f"{d}/{name}" for d in PLAN.run_dirs(wc.paper, wc.figure, RESULTS)
                          for name in ("summary.json", "metrics.jsonl")],
    output:
        table=f"{RESULTS}/{{scale}}/{{paper}}/{{figure}}.csv",
        markdown=f"{RESULTS}/{{scale}}/{{paper}}/{{figure}}.md",
        curves=f"{RESULTS}/{{scale}}/{{paper}}/{{figure}}_curves.csv",
    log:
        f"{RESULTS}/{{scale}}/logs/{{paper}}/{{figure}}_aggregate.log",
    params:
        python=PYTHON,
        script=ANALYSIS / "aggregate.py",
    conda: CONDA_ENV
    localrule: True
    shell:
        "{params.python:q} {params.script:q} --runs {input.runs:q} --table {output.table:q}"
        " --markdown {output.markdown:q} --curves {output.curves:q} > {log:q} 2>&1"


rule aggregate_redraw:
    """make figures only (workflows/figures.py allows it, not aggregate): a figure's .md (its mean table:
    'reached' k of n, step_to_target under the claims' censoring) redrawn from its committed per-run
    table, which stays a source (the runs are not committed)."""
    input:
        runs=f"{RESULTS}/{{scale}}/{{paper}}/{{figure}}_runs.json",
        table=f"{RESULTS}/{{scale}}/{{paper}}/{{figure}}.csv",
    output:
        markdown=f"{RESULTS}/{{scale}}/{{paper}}/{{figure}}.md",
    log:
        f"{RESULTS}/{{scale}}/logs/{{paper}}/{{figure}}_aggregate_redraw.log",
    params:
        python=PYTHON,
        script=ANALYSIS / "aggregate.py",
    conda: CONDA_ENV
    localrule: True
    shell:
        "{params.python:q} {params.script:q} --runs {input.runs:q} --from-table {input.table:q}"
        " --markdown {output.markdown:q} > {log:q} 2>&1"


# Whenever the runs can be read, the .md is written with the per-run table (rule aggregate).
ruleorder: aggregate > aggregate_redraw


rule paper_table:
    """A `table` figure's numbers, the paper's beside ours (analysis/paper_table.py)."""
    input:
        runs=f"{RESULTS}/{{scale}}/{{paper}}/{{figure}}_runs.json",
        table=f"{RESULTS}/{{scale}}/{{paper}}/{{figure}}.csv",
        curves=f"{RESULTS}/{{scale}}/{{paper}}/{{figure}}_curves.csv",
    output:
        values=f"{RESULTS}/{{scale}}/{{paper}}/{{figure}}_values.csv",
        paper=report(f"{RESULTS}/{{scale}}/{{paper}}/{{figure}}_paper.csv", caption="report/paper_table.rst",
                     category="{paper}", subcategory="tables", labels={"table": "{figure}"}),
        markdown=f"{RESULTS}/{{scale}}/{{paper}}/{{figure}}_paper.md",
    log:
        f"{RESULTS}/{{scale}}/logs/{{paper}}/{{figure}}_paper_table.log",
    params:
        python=PYTHON,
        script=ANALYSIS / "paper_table.py",
        caption=figure_caption_params,
    conda: CONDA_ENV
    localrule: True
    shell:
        "{params.python:q} {params.script:q} --runs {input.runs:q} --table {input.table:q}"
        " --curves {input.curves:q} --values {output.values:q} --paper {output.paper:q}"
        " --markdown {output.markdown:q} > {log:q} 2>&1"


rule paper_table_redraw:
    """make figures only (workflows/figures.py allows it, not paper_table): a table figure's paper-vs-ours
    tables redrawn from its committed _values.csv, which stays a source (table1's churn needs the runs'
    predictions, which are not committed)."""
    input:
        runs=f"{RESULTS}/{{scale}}/{{paper}}/{{figure}}_runs.json",
        values=f"{RESULTS}/{{scale}}/{{paper}}/{{figure}}_values.csv",
    output:
        paper=f"{RESULTS}/{{scale}}/{{paper}}/{{figure}}_paper.csv",
        markdown=f"{RESULTS}/{{scale}}/{{paper}}/{{figure}}_paper.md",
    log:
        f"{RESULTS}/{{scale}}/logs/{{paper}}/{{figure}}_paper_redraw.log",
    params:
        python=PYTHON,
        script=ANALYSIS / "paper_table.py",
    conda: CONDA_ENV
    localrule: True
    shell:
        "{params.python:q} {params.script:q} --from-values --runs {input.runs:q} --values {input.values:q}"
        " --paper {output.paper:q} --markdown {output.markdown:q} > {log:q} 2>&1"


# Whenever the runs can be read, the _paper tables are computed from them (values included).
ruleorder: paper_table > paper_table_redraw


rule plot:
    """The figure, drawn by the script for its kind (experiments.KINDS)."""
    input:
        unpack(plot_inputs),
    output:
        report(f"{RESULTS}/{{scale}}/{{paper}}/{{figure}}.png", caption="report/figure.rst", category="{paper}",
               subcategory="figures", labels={"figure": "{figure}"}),
    log:
        f"{RESULTS}/{{scale}}/logs/{{paper}}/{{figure}}_plot.log",
    params:
        python=PYTHON,
        script=lambda wc: Path(workflow.basedir) / KINDS[PLAN.figure(wc.paper, wc.figure).kind],
        args=lambda wc, input: " ".join(f"--{k} {shlex.quote(str(v))}" for k, v in input.items()),
        caption=figure_caption_params,
    conda: CONDA_ENV
    localrule: True
    shell:
        "{params.python:q} {params.script:q} {params.args} --out {output:q} > {log:q} 2>&1"


rule dose_response:
    """A dose-response figure's decision, by the rule its notes fixed before the runs
    (analysis/dose_response.py; the figures: its DESIGNS). Reads only the per-seed _values.csv."""
    input:
        values=f"{RESULTS}/{{scale}}/{{paper}}/{{figure}}_values.csv",
        spec=f"{REPLICATIONS}/{{paper}}/experiments.yaml",
    output:
        csv=f"{RESULTS}/{{scale}}/{{paper}}/{{figure}}_decision.csv",
        markdown=f"{RESULTS}/{{scale}}/{{paper}}/{{figure}}_decision.md",
    log:
        f"{RESULTS}/{{scale}}/logs/{{paper}}/{{figure}}_decision.log",
    params:
        python=PYTHON,
        script=ANALYSIS / "dose_response.py",
    conda: CONDA_ENV
    localrule: True
    shell:
        "{params.python:q} {params.script:q} --figure {wildcards.paper}/{wildcards.figure}"
        " --values {input.values:q} --experiments {input.spec:q} --csv {output.csv:q}"
        " --markdown {output.markdown:q} > {log:q} 2>&1"


rule claims:
    """One paper's claims table: effect per seed, spread and verdict (analysis/claims.py)."""
    input:
        spec=f"{REPLICATIONS}/{{paper}}/experiments.yaml",
        figures=lambda wc: paper_targets(wc.paper),
        costs=REGIME_COSTS,   # what each untested claim's regime would cost (benchmarks/regime_cost.py)
    output:
        csv=report(f"{RESULTS}/{{scale}}/{{paper}}/claims.csv", caption="report/claims.rst", category="{paper}",
                   subcategory="claims", labels={"table": "claims"}),
        markdown=f"{RESULTS}/{{scale}}/{{paper}}/claims.md",
    log:
        f"{RESULTS}/{{scale}}/logs/{{paper}}/claims.log",
    params:
        python=PYTHON,
        script=ANALYSIS / "claims.py",
        figures=lambda wc: f"{RESULTS}/{wc.scale}/{wc.paper}",
    conda: CONDA_ENV
    localrule: True
    shell:
        "{params.python:q} {params.script:q} --paper {input.spec:q} --figures {params.figures:q} --scale {wildcards.scale}"
        " --costs {input.costs:q} --csv {output.csv:q} --markdown {output.markdown:q} > {log:q} 2>&1"


rule claims_all:
    """Every paper's claims in one table."""
    input:
        [f"{RESULTS}/{SCALE}/{p}/claims.csv" for p in PAPERS],
    output:
        csv=report(f"{RESULTS}/{{scale}}/claims.csv", caption="report/claims_all.rst", category="all papers",
                   labels={"table": "claims"}),
        markdown=f"{RESULTS}/{{scale}}/claims.md",
    log:
        f"{RESULTS}/{{scale}}/logs/claims.log",
    params:
        python=PYTHON,
        script=ANALYSIS / "claims.py",
    conda: CONDA_ENV
    localrule: True
    shell:
        "{params.python:q} {params.script:q} --combine {input:q} --scale {wildcards.scale}"
        " --csv {output.csv:q} --markdown {output.markdown:q} > {log:q} 2>&1"


rule notebook:
    """A paper's analysis notebook (jupytext .py), executed headless against results/<scale>/."""
    input:
        notebook=f"{ANALYSIS}/notebooks/{{paper}}.py",
        claims=f"{RESULTS}/{{scale}}/{{paper}}/claims.csv",
    output:
        f"{RESULTS}/{{scale}}/{{paper}}/notebook.ipynb",
    log:
        f"{RESULTS}/{{scale}}/logs/{{paper}}/notebook.log",
    params:
        python=PYTHON,
        results=lambda wc: Path(RESULTS).resolve(),
    conda: CONDA_ENV
    localrule: True
    shell:
        "CODIST_SCALE={wildcards.scale} CODIST_RESULTS={params.results:q}"
        " {params.python:q} -m jupytext --to ipynb --execute --output {output:q}.tmp.ipynb {input.notebook:q} > {log:q} 2>&1"
        " && mv {output:q}.tmp.ipynb {output:q}"


rule machine:
    """The machines the figures' runs ran on (CPU, torch's CPU capability, BLAS, threads), from
    their manifests (workflows/machine.py): what workflows/compare.py names beside a difference."""
    input:
        lambda wc: sorted({f"{d}/manifest.json" for p, f in PLAN.figures for d in PLAN.run_dirs(p, f, RESULTS)}),
    output:
        f"{RESULTS}/{{scale}}/machine.json",
    log:
        f"{RESULTS}/{{scale}}/logs/machine.log",
    params:
        python=PYTHON,
        script=Path(workflow.basedir) / "workflows" / "machine.py",
    conda: CONDA_ENV
    localrule: True
    shell:
        "{params.python:q} {params.script:q} --out {output:q} {input:q} > {log:q} 2>&1"
