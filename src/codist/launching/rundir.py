"""A run owns its directory: one `codist run` at a time (an exclusive lock for the run's life),
another run's files are never mixed with this one's, and what a finished run left is not
retrained by accident.

States of `--out` before a launch, by the run ids its files record (summary.json, manifest.json,
checkpoint/latest.json):
- empty or new: train from step 0;
- this run, finished (summary.json of this run id): nothing to do (a no-op that says so),
  unless `fresh`;
- this run, unfinished: resume from its checkpoint if there is one; the files that only a
  finished run may have (summary.json, model_*.pt of an earlier attempt) are removed first,
  so nothing half-finished looks finished;
- another run's files: refused, naming both ids, unless `fresh`, which removes them first;
- inside another run's directory, or holding one in the folders a run clears: refused.
Held by another live run, the lock is refused at once, or waited for up to $CODIST_LOCK_WAIT_S
seconds (a workflow's jobs: the run of a killed workflow stops within 10 updates).
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import sys
import time
from pathlib import Path

from ..config import ConfigError
from ..runlog import LOCK, lock_error

# what a run writes into its directory (beside these: the workflow's log lives elsewhere)
RUN_FILES = ("summary.json", "metrics.jsonl", "manifest.json", "config.yaml", "hostfile")
RUN_DIRS = ("checkpoint", ".ranks", "tensorboard", "logs")   # logs: per-rank stdout/stderr
WAIT_ENV = "CODIST_LOCK_WAIT_S"   # seconds to wait for a run holding the lock (set by the workflow's jobs)


def check_not_nested(out: Path) -> None:
    """A run directory inside another's (`--out A/logs/B`, `A/.ranks/B`) would be deleted with A's
    files by A's next start or --fresh: refused, before anything is created or deleted."""
    for parent in out.resolve().parents:
        if (parent / LOCK).is_file():
            raise ConfigError(f"--out {out}: inside the run directory {parent} (it has {LOCK}), whose runs "
                              f"delete what it holds; put the run beside it, not inside it")


def runs_inside(out: Path) -> list[Path]:
    """Run directories (a .codist.lock) under the folders a run of `out` deletes or clears."""
    return sorted(p.parent for name in RUN_DIRS if (out / name).is_dir() for p in (out / name).rglob(LOCK))


class RunDir:
    """The locked run directory; `close()` releases it (so does the process's exit). `holder`: the
    pid the lock names, the `codist run` a user sees (a warm supervisor's client; default this process)."""

    def __init__(self, out: Path, holder: int | None = None):
        self.out = out
        if out.exists() and not out.is_dir():
            raise ConfigError(f"--out {out}: is a file; expected a run directory (new, or one codist run wrote)")
        check_not_nested(out)
        try:
            out.mkdir(parents=True, exist_ok=True)
            self.lock = open(out / LOCK, "a+")
        except OSError as e:
            raise ConfigError(f"--out {out}: cannot create or write it ({e.strerror})") from None
        try:
            self._take(float(os.environ.get(WAIT_ENV) or 0))
        except BlockingIOError:
            holder = self._holder()
            self.lock.close()
            raise ConfigError(f"--out {out}: in use by another codist run (pid {holder}); wait for it to "
                              f"end or use another --out") from None
        except OSError as e:   # Lustre or NFS without lock support: ENOSYS, EOPNOTSUPP, ENOLCK
            self.lock.close()
            raise ConfigError(f"--out {out}: cannot lock {out / LOCK} ({lock_error(e)}); this file system has "
                              f"no working file locks: put the run directory on one that has (Lustre mounted "
                              f"with -o flock, NFS with lockd)") from None
        self.lock.seek(0)
        self.lock.truncate()
        self.lock.write(f"{holder or os.getpid()}\n")
        self.lock.flush()

    def _holder(self) -> str:
        self.lock.seek(0)
        return self.lock.read().strip() or "?"

    def _take(self, wait_s: float) -> None:
        """flock the lock file; held by another run, wait up to `wait_s` (a workflow's job waiting
        for the run an earlier, killed workflow left running: it stops within 10 updates), saying so."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(self.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise
                if wait_s:
                    print(f"codist: --out {self.out}: in use by another codist run (pid {self._holder()}); waiting "
                          f"up to {wait_s:.0f} s for it to stop ({WAIT_ENV})", file=sys.stderr, flush=True)
                    wait_s = 0   # said once
                time.sleep(0.2)

    def recorded_ids(self) -> dict[str, str]:
        """file name -> the run id it records, for the files that exist and can be read."""
        found = {}
        for name in ("summary.json", "manifest.json", "checkpoint/latest.json"):
            try:
                found[name] = json.loads((self.out / name).read_text())["run_id"]
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return found

    def finished(self, run_id: str) -> bool:
        return self.recorded_ids().get("summary.json") == run_id

    def prepare(self, run_id: str, fresh: bool) -> None:
        """Make the directory this run's alone before anything starts (see the module doc)."""
        foreign = {name: rid for name, rid in self.recorded_ids().items() if rid != run_id}
        if foreign and not fresh:
            name, rid = next(iter(foreign.items()))
            raise ConfigError(f"--out {self.out}: holds another run ({name}: run {rid}; this config is run "
                              f"{run_id}); use another --out, or --fresh to remove what it holds")
        inside = runs_inside(self.out)
        if inside:
            raise ConfigError(f"--out {self.out}: holds another run's directory ({inside[0]}), which this run "
                              f"would delete; use another --out")
        if fresh:
            self.clear()
        else:   # resume or start: only a finished run may have these
            (self.out / "summary.json").unlink(missing_ok=True)
            for model in self.out.glob("model_*.pt"):
                model.unlink()
        shutil.rmtree(self.out / ".ranks", ignore_errors=True)

    def clear(self) -> None:
        """Remove every file a run writes here (its results, models, checkpoint, rank reports)."""
        for name in RUN_FILES:
            (self.out / name).unlink(missing_ok=True)
        for model in self.out.glob("model_*.pt"):
            model.unlink()
        for name in RUN_DIRS:
            shutil.rmtree(self.out / name, ignore_errors=True)

    def close(self) -> None:
        self.lock.close()
