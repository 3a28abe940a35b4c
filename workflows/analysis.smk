"""A figure's runs -> its tables -> its plot.

The scripts never look for runs: `{figure}_runs.json` (written here from the plan) names
every (series, seed) and its run directory, and is their only way in.
"""


rule figure_runs:
    """(series, seed) -> run id and run directory, with the figure's title and source."""
    output:
        f"{RESULTS}/{{scale}}/{{paper}}/{{figure}}_runs.json",
    params:
        text=lambda wc: manifest_text(PLAN, wc.paper, wc.figure, RESULTS),
    localrule: True
    shell:
        "printf '%s' {params.text:q} > {output:q}.tmp && mv {output:q}.tmp {output:q}"


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
    localrule: True
    shell:
        "{PYTHON:q} {ANALYSIS}/aggregate.py --runs {input.runs:q} --table {output.table:q}"
        " --markdown {output.markdown:q} --curves {output.curves:q} > {log:q} 2>&1"


rule plot:
    """The figure, drawn by the script for its kind (experiments.KINDS)."""
    input:
        runs=f"{RESULTS}/{{scale}}/{{paper}}/{{figure}}_runs.json",
        table=f"{RESULTS}/{{scale}}/{{paper}}/{{figure}}.csv",
        curves=f"{RESULTS}/{{scale}}/{{paper}}/{{figure}}_curves.csv",
    output:
        f"{RESULTS}/{{scale}}/{{paper}}/{{figure}}.png",
    log:
        f"{RESULTS}/{{scale}}/logs/{{paper}}/{{figure}}_plot.log",
    params:
        script=lambda wc: Path(workflow.basedir) / KINDS[PLAN.figure(wc.paper, wc.figure).kind],
    localrule: True
    shell:
        "{PYTHON:q} {params.script:q} --runs {input.runs:q} --table {input.table:q}"
        " --curves {input.curves:q} --out {output:q} > {log:q} 2>&1"
