"""Shared setup: the scale, where results go, and the plan of runs for that scale.

The plan comes from workflows/experiments.py (plain Python, tested on its own). Only the
requested scale is resolved, so `--config scale=full` fails here, naming the paper,
figure and series, while the full-scale configs still do not validate.
"""
import re
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

sys.path.insert(0, str(Path(workflow.basedir) / "workflows"))
from experiments import KINDS, ExperimentsError, load_plan, manifest_text

SCALE = str(config.get("scale", "embedded"))
RESULTS = str(config.get("results", "results"))
REPLICATIONS = str(config.get("replications", Path(workflow.basedir) / "replications"))
PYTHON = sys.executable  # the interpreter running Snakemake: the one codist is installed in
ANALYSIS = Path(workflow.basedir) / "analysis"

try:
    PLAN = load_plan(REPLICATIONS, SCALE)
except ExperimentsError as e:
    raise WorkflowError(f"cannot plan scale {SCALE!r} from {REPLICATIONS}:\n{e}") from None


def _one_of(names):
    return "|".join(re.escape(n) for n in sorted(set(names)))


# Paper and figure ids are matched exactly, so `fig1_curves.csv` is never read as figure "fig1_curves".
wildcard_constraints:
    scale=re.escape(SCALE),
    paper=_one_of(p for p, _ in PLAN.figures),
    figure=_one_of(f for _, f in PLAN.figures),
    run_id="[0-9a-f]{12}",


def figure_prefix(paper, figure):
    return f"{RESULTS}/{SCALE}/{paper}/{figure}"


def all_targets():
    """Every figure's PNG, tables and curves at SCALE."""
    return [figure_prefix(p, f) + ext for p, f in PLAN.figures
            for ext in (".png", ".csv", ".md", "_curves.csv")]
