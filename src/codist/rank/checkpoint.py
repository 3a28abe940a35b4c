"""Checkpoints: written atomically every `train.checkpoint_every` updates, loaded on restart.

Layout under RUN/checkpoint/:
  step-<N>/group-<g>.pt   one per model group (its first rank writes it): model, optimizer,
                          scheduler and algorithm state (teachers, ensemble members, rounds)
  step-<N>/rank-<r>.pt    one per rank: RNG state (the GPU's too), the meter's counters, loop timers, the
                          algorithm's per-rank state (PowerSGD's residuals)
  step-<N>/rank-<r>.sha256.json  the sha256 of each file rank r wrote (read back from the disk)
  latest.json             written by rank 0 after every rank has written: {"step", "run_id",
                          "checkpoints": [{"step", "sha256": {file: digest}}, ...]}, newest first;
                          the newest KEEP checkpoints are kept, older step folders are removed

Rank 0 alone reads latest.json, checks every file of the newest checkpoint against its sha256
and broadcasts the step (`agreed_step`): on a shared filesystem another node may see an older
copy of the index, and ranks resuming from different steps would train on silently. A file that
is missing or fails its digest (a flipped byte inside a tensor loads without complaint) makes
rank 0 fall back to the previous checkpoint, saying in one line which file failed and which step
is used; when none is good, that is one clear error. An entry whose digests do not cover every file
the ranks load (`loaded_files`; an empty map `{}` covers none) vouches for nothing and is not used
either. The next save keeps the checkpoint resumed from as the fallback, never one found to fail.
Every rank then checks that each file it loads holds this run's id and that step. A checkpoint is
used only if latest.json names this run's id; files are loaded with torch.load(weights_only=True);
anything missing, truncated or from another config is a clear error, never silently reused or
skipped, and so is a file whose algorithm state lacks a key this codist reads (another version wrote
it: `reading`), an index step below 0 and a latest.json that is not a readable file. An index
written before the digests (no "checkpoints") is used as it was, with one line saying so.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import sys
from pathlib import Path

import torch

from ..runlog import atomic_torch_save, atomic_write_json


class CheckpointError(RuntimeError):
    pass


def _dir(run: Path, step: int) -> Path:
    return run / "checkpoint" / f"step-{step}"


KEEP = 2   # checkpoints kept: the newest, and the one resumed from when the newest fails its digests


def _index(run: Path, run_id: str) -> list[dict] | None:
    """latest.json's checkpoints, newest first ({"step", "sha256": {file: digest} or None for an index
    written before the digests}); None when there is no index."""
    path = run / "checkpoint" / "latest.json"
    if not path.exists():
        return None
    try:
        info = json.loads(path.read_text())
        step, found = int(info["step"]), info["run_id"]
        entries = [{"step": int(e["step"]), "sha256": dict(e["sha256"])} for e in info.get("checkpoints", [])]
    except OSError as e:   # a folder in its place, unreadable
        raise CheckpointError(f"{path}: unreadable checkpoint index ({e.strerror or e}; expected a JSON file); "
                              f"delete {path.parent} to start over") from None
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise CheckpointError(f"{path}: unreadable checkpoint index ({e}); delete {path.parent} to start over")
    lowest = min([step] + [e["step"] for e in entries])
    if lowest < 0:   # -1 would be broadcast as agreed_step's 'no checkpoint': training from update 0 silently
        raise CheckpointError(f"{path}: unreadable checkpoint index (step {lowest}; expected a step >= 0); "
                              f"delete {path.parent} to start over")
    if found != run_id:
        raise CheckpointError(f"{path}: checkpoint of run {found}, but this config is run {run_id}; "
                              f"delete {path.parent} or use another --out directory")
    return entries or [{"step": step, "sha256": None}]


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def loaded_files(world_size: int, models: int) -> set[str]:
    """The files `load` opens in a world: every rank's rank-<r>.pt and every model's group-<g>.pt."""
    return {f"rank-{r}.pt" for r in range(world_size)} | {f"group-{g}.pt" for g in range(models)}


def _damage(run: Path, entry: dict, files: set[str] | None = None) -> str | None:
    """Why the checkpoint `entry` cannot be used (a file `load` opens that it records no digest for,
    its first file that is missing or fails its sha256), or None when every file it lists matches.
    `files`: the names the ranks load (None: only an empty record is refused)."""
    d = _dir(run, entry["step"])
    unvouched = sorted((files or set()) - entry["sha256"].keys())
    if not entry["sha256"] or unvouched:   # a digest map that does not cover a file vouches for nothing in it
        where = d / unvouched[0] if unvouched else d
        return (f"{where}: {run / 'checkpoint' / 'latest.json'} records no sha256 for it (expected one for each "
                f"file the ranks load: {', '.join(sorted(files)) if files else 'at least one'})")
    for name, digest in sorted(entry["sha256"].items()):
        try:
            found = _sha256(d / name)
        except OSError as e:
            return f"{d / name}: unreadable ({e.strerror or e})"
        if found != digest:
            return f"{d / name}: sha256 {found[:12]}... differs from the {digest[:12]}... recorded when it was written"
    return None


#: (run folder, step) of the checkpoints `latest` found damaged in this process: the next `save`
#: (by the same rank 0) keeps the good one it resumed from as the fallback, never these
_FAILED: set[tuple[str, int]] = set()


def latest(run: Path, run_id: str, files: set[str] | None = None) -> int | None:
    """The step of the newest checkpoint of this run whose files all match their recorded sha256
    (one line on stderr for each newer one that does not), or None if there is none. `files`: the
    names every rank will load (`loaded_files`); an entry without a digest for one is not used."""
    entries = _index(run, run_id)
    if entries is None:
        return None
    failed = []
    for entry in entries:
        if entry["sha256"] is None:
            print(f"codist: {run / 'checkpoint' / 'latest.json'}: written without file digests (an older codist); "
                  f"step {entry['step']} resumed unverified", file=sys.stderr, flush=True)
            return entry["step"]
        why = _damage(run, entry, files)
        if why is None:
            if failed:
                print(f"codist: {_failures(failed)}; resuming from the checkpoint at step {entry['step']}",
                      file=sys.stderr, flush=True)
            return entry["step"]
        failed.append((entry["step"], why))
        _FAILED.add((str(run), entry["step"]))
    raise CheckpointError(f"{_failures(failed)}; no good checkpoint is left: delete {run / 'checkpoint'} "
                          f"to start over")


def _failures(failed: list[tuple[int, str]]) -> str:
    return "; ".join(f"checkpoint at step {step} not used: {why}" for step, why in failed)


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


NONE, FAILED = -1, -2   # what rank 0 broadcasts when there is no checkpoint, or none it can use


def agreed_step(run: Path, run_id: str, rank: int, meter, device, files: set[str] | None = None) -> int | None:
    """The step every rank resumes from: rank 0 reads latest.json and checks the files' digests
    (`latest`; `files`: what the ranks will load, `loaded_files`) and broadcasts it
    (category control, on the run's `device`); None when there is no checkpoint."""
    error, step = None, NONE
    if rank == 0:
        try:
            found = latest(run, run_id, files)
            step = NONE if found is None else found
        except CheckpointError as e:
            error, step = e, FAILED
    flag = torch.tensor([step], dtype=torch.int64, device=device)
    meter.broadcast(flag, src=0, category="control")
    step = int(flag.item())
    if error is not None:
        raise error
    if step == FAILED:
        raise CheckpointError(f"{run / 'checkpoint' / 'latest.json'}: rank 0 found no usable checkpoint in its index "
                              f"(its log says why)")
    return None if step == NONE else step


def save(run: Path, step: int, run_id: str, rank: int, group_state: dict | None, rank_state: dict,
         barrier, check=None) -> None:
    """Every rank calls this at the same step; `barrier()` synchronises the ranks. `check(path)`
    before each file (train: the run's RunGuard) raises when the directory is no longer the run's."""
    check = check or (lambda path: None)
    d = _dir(run, step)
    digests = {}
    files = [] if group_state is None else [(f"group-{group_state['group']}.pt", group_state)]
    for name, state in files + [(f"rank-{rank}.pt", rank_state)]:
        check(d / name)
        atomic_torch_save({"run_id": run_id, "step": step, **state}, d / name)
        digests[name] = _sha256(d / name)   # what reached the disk
    check(d / f"rank-{rank}.sha256.json")
    atomic_write_json(d / f"rank-{rank}.sha256.json", digests)
    barrier()
    if rank == 0:
        written = {}
        for part in _digest_files(d):
            try:
                written.update(json.loads(part.read_text()))
            except (OSError, ValueError) as e:
                raise CheckpointError(f"{part}: the digests of a rank's checkpoint files cannot be read ({e}); "
                                      f"latest.json still names the checkpoint before") from None
        try:
            older = [e for e in _index(run, run_id) or [] if e["step"] < step and e["sha256"] is not None
                     and (str(run), e["step"]) not in _FAILED]   # a fallback known to fail is none
        except CheckpointError:
            older = []
        kept = [{"step": step, "sha256": written}] + older[:KEEP - 1]
        _FAILED.discard((str(run), step))   # this step's files are new
        check(run / "checkpoint" / "latest.json")
        atomic_write_json(run / "checkpoint" / "latest.json", {"step": step, "run_id": run_id, "checkpoints": kept})
        for old in (run / "checkpoint").glob("step-*"):   # keep only the indexed ones
            if old.name not in {_dir(run, e["step"]).name for e in kept}:
                shutil.rmtree(old, ignore_errors=True)
    barrier()


def _digest_files(d: Path) -> list[Path]:
    """Every rank's rank-<r>.sha256.json in `d`: named from the world size, since a shared filesystem's
    directory listing may lag behind another node's new file while opening it by name does not."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return [d / f"rank-{r}.sha256.json" for r in range(torch.distributed.get_world_size())]
    return sorted(d.glob("rank-*.sha256.json"))


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
