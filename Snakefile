"""codist: every figure of every paper at one scale.

    snakemake -c2                          # embedded scale (default), on this machine
    snakemake --profile env/profiles/local # the same with the local profile's settings
    snakemake --config scale=full ...      # the papers' own setups (a cluster profile)

Config keys: scale (embedded | full, default embedded), results (output root, default results),
replications (folder of <paper>/experiments.yaml, default the repository's), data_root (the folder
the full-scale data sets' relative paths are joined to; not part of any run id), tier, seed_offset,
ledger, ledger_dir, device (cuda: every run on this machine's GPUs, workflows/on_gpu.py), rehearsal; any
other key or value fails at once (schema and each key's meaning: workflows/workflow_config.py).
The rules live in workflows/*.smk; what runs for which figure is in replications/.
"""

report: "workflows/report/workflow.rst"   # the report's front page; each figure and table has its caption there too


include: "workflows/common.smk"
include: "workflows/train.smk"
include: "workflows/analysis.smk"
include: "workflows/frontier.smk"   # its own target (not in `all`): results/<scale>/frontier/frontier.md
include: "workflows/summary.smk"    # results/<scale>/claims.png: every claim at a glance (in `all`)


rule all:
    """Every figure's plot and tables at the chosen scale."""
    input:
        all_targets(),
    default_target: True


rule figures:
    """Every figure, _paper table and claims table of `all` (and the frontier's figures and page where
    its tables are there) redrawn from the tables, without a run: workflows/figures.py (make figures)
    allows only the rules that draw from tables, so the per-run tables and _values.csv are sources
    (table1's churn needs the runs' predictions, which are not committed)."""
    input:
        [t for t in all_targets() if t.endswith((".png", "_paper.csv", "_paper.md", "_decision.csv", "_decision.md", "claims.csv", "claims.md"))],
        frontier=[f"{FRONTIER_DIR}/{w}.png" for w in FRONTIER_WORKLOADS if Path(FRONTIER_DIR, f"{w}_points.csv").exists()]
        + [f"{FRONTIER_DIR}/frontier.md" for w in FRONTIER_WORKLOADS[:1] if Path(FRONTIER_DIR, f"{w}_points.csv").exists()],
