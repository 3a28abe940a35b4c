"""The schema of the workflow's `--config` keys (and of a `--configfile`).

Snakemake accepts any key=value; the Snakefile checks them here before planning, so a misspelt
key or a scale that does not exist (`scale=ful`) fails at once, naming the key and what is
allowed, instead of silently running the default scale.
"""
from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from analysis.schema import TIERS
from codist.config import RunConfig

#: the scales a run config knows (codist.config: RunConfig.scale)
SCALES = get_args(RunConfig.model_fields["scale"].annotation)


class WorkflowConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    scale: Literal[SCALES] = Field("embedded", description="which scale's runs every figure uses")
    results: str = Field("results", min_length=1, description="output root: results/<scale>/...")
    replications: str | None = Field(None, min_length=1,
                                     description="folder of <paper>/experiments.yaml (default: the repository's)")
    data_root: str | None = Field(None, min_length=1, description="the folder every relative workload.data_dir "
                                  "is joined to (each run's launch.data_root, made absolute; not part of the run "
                                  "id; default: $CODIST_DATA_ROOT when the runs start)")
    tier: Literal[TIERS] = Field("default", description="another tier (analysis/schema.py TIERS): its figures too "
                                 "(analysis/schema.py TIERS, Figure.tier; make replicate TIER=<tier>)")
    seed_offset: int = Field(0, ge=0, description="added to every figure's seeds: a rerun with fresh seeds (new run "
                             "ids; make replicate SEEDS=N writes to results-seeds+N); never with results=results")
    ledger: Literal["off", "keep", "commit"] = Field(
        "off", description="keep: a run the ledger holds is restored, not trained, and each finished run is "
        "copied there; commit: also committed, one commit a run (workflows/run_ledger.py; make replicate LEDGER=)")
    ledger_dir: str | None = Field(None, min_length=1, description="the ledger folder (default: this "
                                   "checkout's results/<scale>/ledger, whatever the results root): another "
                                   "checkout's, when the runs go from a worktree of a fixed commit")
    device: Literal["as-declared", "cuda"] = Field(
        "as-declared", description="cuda: every run launched on this machine's GPUs (workflows/on_gpu.py; the "
        "same run ids), into a results root of its own (make gpu-anil)")
    rehearsal: bool = Field(False, description="scale=full only: every planned run shrunk as workflows/rehearsal.py "
                            "allows (a few updates, short periods, 2 ranks per group, CPU), under <results>/rehearsal/")


    @model_validator(mode="after")
    def _fresh_seeds_elsewhere(self):
        # the committed reference holds the declared seeds only
        if self.seed_offset and self.results.rstrip("/") == "results":
            raise ValueError("seed_offset: fresh seeds go to their own results root, never into the committed "
                             "reference 'results' (e.g. results=results-seeds+N)")
        return self

    @model_validator(mode="after")
    def _gpu_runs_elsewhere(self):
        # the committed reference is the CPU's: GPU runs of the same ids go beside it, never into it
        if self.device == "cuda" and self.results.rstrip("/") == "results":
            raise ValueError("device: cuda runs go to their own results root, never into the committed CPU "
                             "reference 'results' (e.g. results=results-gpu)")
        if self.device == "cuda" and (self.ledger != "off" or self.rehearsal):
            raise ValueError("device: cuda with ledger or rehearsal: the ledger holds the CPU reference's runs "
                             "(same ids), and a rehearsal is a CPU check; use ledger=off, rehearsal=false")
        return self

    @model_validator(mode="after")
    def _ledger_keeps_real_runs(self):
        if self.ledger != "off" and self.rehearsal:
            raise ValueError("ledger: a rehearsal's shrunk runs are not kept; use ledger=off with rehearsal=true")
        return self


class WorkflowConfigError(ValueError):
    """A bad --config key or value; the message is one line naming it and what is allowed."""


def check(config: dict) -> WorkflowConfig:
    try:
        return WorkflowConfig.model_validate(dict(config))
    except ValidationError as e:
        allowed_keys = ", ".join(WorkflowConfig.model_fields)
        lines = []
        for err in e.errors():
            key = ".".join(str(p) for p in err["loc"])
            if err["type"] == "extra_forbidden":
                lines.append(f"--config: unknown key {key!r}; allowed keys: {allowed_keys}")
            elif not key:   # a rule across keys (seed_offset with results)
                lines.append(f"--config: {err['msg'].removeprefix('Value error, ')}")
            elif key == "scale":
                lines.append(f"--config scale={err['input']!r}: expected one of {', '.join(SCALES)}")
            else:
                lines.append(f"--config {key}={err['input']!r}: {err['msg']}")
        raise WorkflowConfigError("\n".join(lines)) from None
