"""Checkpoints: written atomically every `train.checkpoint_every` updates, loaded on restart.

Layout under RUN/checkpoint/:
  step-<N>/group-<g>.pt   one per model group (its first rank writes it): model, optimizer,
                          scheduler and algorithm state (teachers, ensemble members, rounds)
  step-<N>/rank-<r>.pt    one per rank: RNG state (the GPU's too), the meter's counters, loop timers, the
                          algorithm's per-rank state (PowerSGD's residuals)
  latest.json             written by rank 0 after every rank has written: {"step", "run_id"}

Rank 0 alone reads latest.json and broadcasts the step (`agreed_step`): on a shared filesystem
another node may see an older copy of the index, and ranks resuming from different steps would
train on silently. Every rank then checks that each file it loads holds this run's id and that step.
A checkpoint is used only if latest.json names this run's id; files are loaded with
torch.load(weights_only=True); anything missing, truncated or from another config is a
clear error, never silently reused or skipped, and so is a file whose algorithm state lacks a key
this codist reads (another version wrote it: `reading`).
"""
from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

import torch

from ..runlog import atomic_torch_save, atomic_write_json


class CheckpointError(RuntimeError):
    pass


def _dir(run: Path, step: int) -> Path:
    return run / "checkpoint" / f"step-{step}"


def latest(run: Path, run_id: str) -> int | None:
    """The step of the newest complete checkpoint of this run, or None if there is none."""
    path = run / "checkpoint" / "latest.json"
    if not path.exists():
        return None
    try:
        info = json.loads(path.read_text())
        step, found = int(info["step"]), info["run_id"]
    except (ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"{path}: unreadable checkpoint index ({e}); delete {path.parent} to start over")
    if found != run_id:
        raise CheckpointError(f"{path}: checkpoint of run {found}, but this config is run {run_id}; "
                              f"delete {path.parent} or use another --out directory")
    return step


def rng_state(device: torch.device) -> dict:
    """This rank's random state: the CPU generator, and on a GPU its own (dropout and other random
    operations on the GPU draw from it, so a resumed GPU run is exact only with it)."""
    state = {"rng": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda_rng"] = torch.cuda.get_rng_state(device)
    return state


def restore_rng(state: dict, device: torch.device) -> None:
    """Set what `rng_state` saved (a checkpoint written on the CPU has no GPU generator to set)."""
    torch.set_rng_state(state["rng"])
    if device.type == "cuda" and "cuda_rng" in state:
        torch.cuda.set_rng_state(state["cuda_rng"], device)


NONE, FAILED = -1, -2   # what rank 0 broadcasts when there is no checkpoint, or it could not read the index


def agreed_step(run: Path, run_id: str, rank: int, meter, device) -> int | None:
    """The step every rank resumes from: rank 0 reads latest.json (`latest`) and broadcasts it
    (category control, on the run's `device`); None when there is no checkpoint."""
    error, step = None, NONE
    if rank == 0:
        try:
            found = latest(run, run_id)
            step = NONE if found is None else found
        except CheckpointError as e:
            error, step = e, FAILED
    flag = torch.tensor([step], dtype=torch.int64, device=device)
    meter.broadcast(flag, src=0, category="control")
    step = int(flag.item())
    if error is not None:
        raise error
    if step == FAILED:
        raise CheckpointError(f"{run / 'checkpoint' / 'latest.json'}: rank 0 could not read the checkpoint index "
                              f"(its log says why)")
    return None if step == NONE else step


def save(run: Path, step: int, run_id: str, rank: int, group_state: dict | None, rank_state: dict,
         barrier, check=None) -> None:
    """Every rank calls this at the same step; `barrier()` synchronises the ranks. `check(path)`
    before each file (train: the run's RunGuard) raises when the directory is no longer the run's."""
    check = check or (lambda path: None)
    d = _dir(run, step)
    if group_state is not None:
        check(d / f"group-{group_state['group']}.pt")
        atomic_torch_save({"run_id": run_id, "step": step, **group_state}, d / f"group-{group_state['group']}.pt")
    check(d / f"rank-{rank}.pt")
    atomic_torch_save({"run_id": run_id, "step": step, **rank_state}, d / f"rank-{rank}.pt")
    barrier()
    if rank == 0:
        check(run / "checkpoint" / "latest.json")
        atomic_write_json(run / "checkpoint" / "latest.json", {"step": step, "run_id": run_id})
        for old in (run / "checkpoint").glob("step-*"):   # keep only the newest
            if old.name != d.name:
                shutil.rmtree(old, ignore_errors=True)
    barrier()


def _load(path: Path, run_id: str, step: int) -> dict:
    if not path.exists():
        raise CheckpointError(f"{path}: missing from the checkpoint at step {step}")
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # truncated or not a torch file
        raise CheckpointError(f"{path}: corrupt checkpoint file ({type(e).__name__}: {e}); "
                              f"delete {path.parent.parent} to start over") from None
    if obj.get("run_id") != run_id or obj.get("step") != step:
        raise CheckpointError(f"{path}: holds run {obj.get('run_id')} step {obj.get('step')}, "
                              f"expected run {run_id} step {step}")
    return obj


def load(run: Path, step: int, run_id: str, rank: int, group: int) -> tuple[dict, dict]:
    d = _dir(run, step)
    return _load(d / f"group-{group}.pt", run_id, step), _load(d / f"rank-{rank}.pt", run_id, step)


@contextlib.contextmanager
def reading(run: Path, step: int, name: str):
    """Around restoring one loaded file (`name`: group-<g>.pt or rank-<r>.pt): a key the algorithm reads
    but the file lacks (a checkpoint written by another codist version, e.g. PowerSGD's before it kept
    its DDP bucket layout) is one line naming the file and the key, not a KeyError's traceback."""
    try:
        yield
    except KeyError as e:
        d = _dir(run, step)
        key = e.args[0] if e.args else "key"
        raise CheckpointError(f"{d / name}: its state has no {key!r} (written by another codist "
                              f"version?); delete {d.parent} to start over") from e
