"""The communication frontier (issue 16), a target of its own (not in `all`):

    snakemake --profile env/profiles/local --cores 2 results/embedded/frontier/frontier.md

replications/frontier/frontier.yaml (workflows/frontier_plan.py) declares per workload the points
(method x period) and seeds; their configs join the plan, so train.smk's rules train them and a
point equal to a paper's run is that run. Per workload: <w>_runs.json -> <w>.csv (runs),
<w>_points.csv and <w>.md (points, Pareto front, projected wall time) -> <w>.png; frontier.md
joins the workloads' tables. Needs common.smk and train.smk included first.
"""
# the scripts next to this file (also when a wrapper Snakefile elsewhere includes it)
FRONTIER_ANALYSIS = Path(workflow.current_basedir.get_path_or_uri(secret_free=True)).parent / "analysis"
from workflows.frontier_plan import FrontierError, add_to_plan, load_points, runs_manifest_text

FRONTIER_SPEC = Path(REPLICATIONS) / "frontier" / "frontier.yaml"
FRONTIER_DIR = f"{RESULTS}/{SCALE}/frontier"
try:   # a replications folder without the spec (a test's toy paper), or another scale: no frontier
    FRONTIER, FRONTIER_POINTS = (load_points(FRONTIER_SPEC, REPLICATIONS, SCALE) if FRONTIER_SPEC.exists()
                                 else (None, []))
    FRONTIER_SHARED = add_to_plan(PLAN, FRONTIER_POINTS)
except FrontierError as e:
    raise WorkflowError(f"cannot plan the frontier from {FRONTIER_SPEC}:\n{e}") from None
FRONTIER_WORKLOADS = sorted({p.workload for p in FRONTIER_POINTS})


if FRONTIER_WORKLOADS:

    rule frontier_runs:
        """Point, seed -> run id and run directory (the table's only way to the runs)."""
        output:
            f"{FRONTIER_DIR}/{{workload}}_runs.json",
        log:
            f"{RESULTS}/{SCALE}/logs/frontier/{{workload}}_runs.log",
        params:
            text=lambda wc: runs_manifest_text(FRONTIER, FRONTIER_POINTS, wc.workload, RESULTS, FRONTIER_SHARED),
        wildcard_constraints:
            workload=_one_of(FRONTIER_WORKLOADS),
        conda: CONDA_ENV
        localrule: True
        shell:
            "(printf '%s' {params.text:q} > {output:q}.tmp && mv {output:q}.tmp {output:q}) 2> {log:q}"

    rule frontier_table:
        """Runs -> per-run CSV, per-point CSV and Markdown (analysis/frontier_table.py)."""
        input:
            runs=f"{FRONTIER_DIR}/{{workload}}_runs.json",
            summaries=lambda wc: sorted({f"{RESULTS}/{SCALE}/runs/{p.run_id}/summary.json"
                                         for p in FRONTIER_POINTS if p.workload == wc.workload}),
        output:
            csv=f"{FRONTIER_DIR}/{{workload}}.csv",
            points=f"{FRONTIER_DIR}/{{workload}}_points.csv",
            markdown=f"{FRONTIER_DIR}/{{workload}}.md",
        log:
            f"{RESULTS}/{SCALE}/logs/frontier/{{workload}}_table.log",
        params:
            python=PYTHON,
            script=FRONTIER_ANALYSIS / "frontier_table.py",
        wildcard_constraints:
            workload=_one_of(FRONTIER_WORKLOADS),
        conda: CONDA_ENV
        localrule: True
        shell:
            "{params.python:q} {params.script:q} --runs {input.runs:q} --csv {output.csv:q} --points {output.points:q}"
            " --markdown {output.markdown:q} > {log:q} 2>&1"

    rule frontier_plot:
        """Quality vs between-group bytes with the Pareto front; projected run time per bandwidth."""
        input:
            runs=f"{FRONTIER_DIR}/{{workload}}_runs.json",
            points=f"{FRONTIER_DIR}/{{workload}}_points.csv",
        output:
            report(f"{FRONTIER_DIR}/{{workload}}.png", caption="report/frontier.rst", category="frontier",
                   labels={"workload": "{workload}"}),
        log:
            f"{RESULTS}/{SCALE}/logs/frontier/{{workload}}_plot.log",
        params:
            python=PYTHON,
            script=FRONTIER_ANALYSIS / "frontier_plot.py",
        wildcard_constraints:
            workload=_one_of(FRONTIER_WORKLOADS),
        conda: CONDA_ENV
        localrule: True
        shell:
            "{params.python:q} {params.script:q} --runs {input.runs:q} --points {input.points:q} --out {output:q} > {log:q} 2>&1"

    rule frontier:
        """Every workload's figure and tables; frontier.md joins the tables."""
        input:
            pngs=[f"{FRONTIER_DIR}/{w}.png" for w in FRONTIER_WORKLOADS],
            tables=[f"{FRONTIER_DIR}/{w}.md" for w in FRONTIER_WORKLOADS],
        output:
            f"{FRONTIER_DIR}/frontier.md",
        log:
            f"{RESULTS}/{SCALE}/logs/frontier/frontier.log",
        params:
            head=f"# The communication frontier ({SCALE} scale)\n\nFrom {FRONTIER_SPEC.name}"
                 " (replications/frontier/); one section per workload, its figure beside it as <workload>.png.\n\n",
        conda: CONDA_ENV
        localrule: True
        shell:
            "((printf '%s' {params.head:q} && cat {input.tables:q}) > {output:q}.tmp && mv {output:q}.tmp {output:q})"
            " 2> {log:q}"
