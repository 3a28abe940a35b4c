"""Shared setup: the scale, where results go, and the plan of runs for that scale.

The plan comes from workflows/experiments.py (plain Python, tested on its own). Only the
requested scale is resolved, so `--config scale=full` fails here, naming the paper,
figure and series, while the full-scale configs still do not validate.
"""
import os
import re
import shlex
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.settings.types import DeploymentMethod

from workflows.experiments import KINDS, ExperimentsError, load_plan, manifest_text, unplanned_target
from workflows.workflow_config import WorkflowConfigError, check
from analysis.dose_response import DESIGNS as DOSE_RESPONSE

try:   # --config keys and values (workflows/workflow_config.py): a typo fails here, naming what is allowed
    CONFIG = check(config)
except WorkflowConfigError as e:
    raise WorkflowError(str(e)) from None
SCALE = CONFIG.scale
RESULTS = CONFIG.results
REPLICATIONS = CONFIG.replications or str(Path(workflow.basedir) / "replications")
ANALYSIS = Path(workflow.basedir) / "analysis"
# measured on this machine and committed (results/bench, not a results root): the claims table reads it
REGIME_COSTS = str(Path(workflow.basedir) / "results" / "bench" / "regime_cost.csv")
# Every job runs in the codist environment, which each rule names (`conda` directive, the file
# relative to workflows/): by default the interpreter running Snakemake (installed by
# env/install.sh); with `--software-deployment-method conda`, an env Snakemake creates from
# env/environment.yml (the lock, then env/environment.post-deploy.sh: fairseq), where jobs run
# `python` and import codist from this checkout. Rules get PYTHON as a param.
CONDA_ENV = "../env/environment.yml"
if DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method:
    PYTHON = "python"
    os.environ.update(PYTHONPATH=os.pathsep.join(filter(None, [str(Path(workflow.basedir) / "src"),   # codist,
                                                               str(Path(workflow.basedir)),   # analysis, workflows
                                                               os.environ.get("PYTHONPATH")])))
else:
    PYTHON = sys.executable

try:
    # a relative data_root is taken from the directory snakemake runs in (made absolute in each run's config)
    # the results root's sequential.csv files extend the seeds of sequential claims' figures (analysis/sequential.py)
    PLAN = load_plan(REPLICATIONS, SCALE, CONFIG.data_root, CONFIG.tier, CONFIG.seed_offset, RESULTS)
except ExperimentsError as e:
    raise WorkflowError(f"cannot plan scale {SCALE!r} from {REPLICATIONS}:\n{e}") from None
if CONFIG.rehearsal and SCALE != "full":
    raise WorkflowError(f"--config rehearsal=true rehearses the full scale; got scale={SCALE!r}")
if CONFIG.device == "cuda":   # the same runs launched on this machine's GPUs (workflows/on_gpu.py)
    from workflows.on_gpu import GpuPlanError, on_cuda
    try:
        PLAN = on_cuda(PLAN)
    except GpuPlanError as e:
        raise WorkflowError(f"--config device=cuda: {e}") from None
if CONFIG.rehearsal:   # the same plan, each run shrunk as workflows/rehearsal.py allows (and records)
    from workflows.rehearsal import rehearse
    PLAN, _ = rehearse(PLAN)
    RESULTS = f"{RESULTS}/rehearsal"   # never into a real results tree

# A requested figure that exists at another scale only: one line naming the command that makes it,
# instead of Snakemake's bare MissingRuleException; a mistyped figure or paper: one line with the
# closest known names. The targets are not known while the Snakefile is parsed, so the command line
# is read: only a path of such a figure matches.
_UNPLANNED = list(filter(None, (unplanned_target(PLAN, RESULTS, a) for a in sys.argv[1:] if not a.startswith("-"))))
if _UNPLANNED:
    raise WorkflowError("\n".join(_UNPLANNED))


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


PAPERS = sorted({p for p, _ in PLAN.figures})


def figure_targets(paper, figure):
    """A figure's PNG and tables (a `table` figure also has its paper-vs-ours tables)."""
    exts = [".png", ".csv", ".md", "_curves.csv"]
    if PLAN.figure(paper, figure).kind == "table":
        exts += ["_values.csv", "_paper.csv", "_paper.md"]
    if f"{paper}/{figure}" in DOSE_RESPONSE:
        exts += ["_decision.csv", "_decision.md"]
    return [figure_prefix(paper, figure) + ext for ext in exts]


def paper_targets(paper):
    return [t for p, f in PLAN.figures if p == paper for t in figure_targets(p, f)]


def all_targets():
    """Every figure and table of every paper at SCALE, the claims tables and their summary figure,
    the notebooks and the machines the runs ran on."""
    return ([t for p in PAPERS for t in paper_targets(p)]
            + [f"{RESULTS}/{SCALE}/{p}/{name}" for p in PAPERS for name in ("claims.csv", "claims.md")]
            + [f"{RESULTS}/{SCALE}/{p}/notebook.ipynb" for p in PAPERS if (ANALYSIS / "notebooks" / f"{p}.py").exists()]
            + [f"{RESULTS}/{SCALE}/claims.csv", f"{RESULTS}/{SCALE}/claims.md", f"{RESULTS}/{SCALE}/machine.json"]
            + [f"{RESULTS}/{SCALE}/claims.png"])   # every claim at a glance (workflows/summary.smk)


def plot_inputs(wc):
    """The plot rule's inputs: a table figure draws its per-seed values, the others their curves."""
    prefix = f"{RESULTS}/{wc.scale}/{wc.paper}/{wc.figure}"
    if PLAN.figure(wc.paper, wc.figure).kind == "table":
        return {"runs": f"{prefix}_runs.json", "values": f"{prefix}_values.csv"}
    return {"runs": f"{prefix}_runs.json", "table": f"{prefix}.csv", "curves": f"{prefix}_curves.csv"}


def prepared_data(wc):
    """The lm_data marker of a run whose data a job of its own prepares (LmConfig.prepared_by_job), else
    nothing. ancient: a marker written after a run finished never makes it look out of date (the
    cache it names is what the run read, or would have built itself)."""
    if getattr(PLAN.config(wc.run_id).workload, "prepared_by_job", False):
        return [ancient(f"{RESULTS}/{wc.scale}/lm_data/{wc.run_id}.done")]
    return []


def figure_caption_params(wc):
    """What the report's caption of a figure says (workflows/report/figure.rst)."""
    f = PLAN.figure(wc.paper, wc.figure)
    return {"title": f.title, "source": f.source, "kind": f.kind, "runs": len(f.runs),
            "seeds": len({r.seed for r in f.runs})}


# One workflow at a time on a results root (its lock taken when jobs are about to run, not for a dry
# run, --lint or --report), and this snakemake named as the owner of the runs its jobs start:
# workflows/results_lock.py
from workflows.results_lock import ResultsInUse, hold, job_owner
os.environ.update(job_owner())


onstart:
    if workflow.is_main_process:
        try:
            hold(RESULTS)
        except ResultsInUse as e:
            raise WorkflowError(str(e)) from None
