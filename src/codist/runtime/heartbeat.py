"""A rank's heartbeat: RUN/.ranks/rank-<r>.json holds its pid, state, last update done and the time
of its last progress, or the error that ended it. The hang watchdog (codist.launching.supervise)
reads these files to kill a run in which no rank made progress for `launch.hang_timeout_s` and to
name a rank that died or hangs.

Progress, not liveness. A background thread writes a beat only when the rank moved on since the
last one:
- training: an update done (`beat(step)` from the loop only records the number);
- preparing (from set-up to its first update: data, tokenizers, engines, a checkpoint's load):
  a reader's `progress()` call (Criteo lines parsed, text tokenized, files listed), or CPU time
  spent by the rank's other threads (at least CPU_SHARE of a core: parsing, SentencePiece's
  training, building engines or compiling). Training uses only updates: a GPU wait can spin.
A rank blocked on a lock, a peer, a collective or a dead file system does neither, so its beats
stop and the watchdog still kills a real hang, while a preparation longer than the watchdog's
timeout keeps the run alive. (A rank spinning on a GPU wait during set-up counts as busy; torch's
collective timeout of the start-up, `launch.start_timeout_s`, ends a hung NCCL collective there.)

Cheap on a shared file system at scale: the training thread never writes; a beat is a small file
renamed into place without fsync (the watchdog needs the write to be visible, which the rename
gives on a local disk, NFS's close-to-open and Lustre; durability is for results, and after a
crash of the node a stale beat is what the watchdog must see anyway); and the interval grows with
the world so that the whole job writes about WRITES_PER_S beats a second (every 2 s for up to 64
ranks, 32 s at 1,024), never more than hang_timeout_s / 5 (five beats before the watchdog's
timeout). The states that end a rank (error, preempted, diverged, done) are written at once and
fsynced: the launcher reads them to say how the run ended.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

from ..runlog import atomic_write_json

WRITES_PER_S = 32.0   # the whole job's beats per second on the run directory's file system
CPU_SHARE = 0.1       # share of a core the other threads must use to count as busy while preparing

_progress = 0   # progress() calls in this process


def progress() -> None:
    """A unit of preparation done (a chunk parsed, a shard tokenized, a folder listed): readers call it
    so that work which waits on files rather than the CPU still counts. Costs an addition."""
    global _progress
    _progress += 1


def interval(world: int, hang_timeout_s: float) -> float:
    """Seconds between a rank's beats: see the module docstring."""
    return min(max(2.0, world / WRITES_PER_S), hang_timeout_s / 5)


class Heartbeat:
    """One rank's heartbeat file (see the module docstring); `write` and `finish` end it."""

    def __init__(self, run: Path, rank: int, world: int = 1, hang_timeout_s: float = 900):
        self.path = Path(run) / ".ranks" / f"rank-{rank}.json"
        self.every_s = interval(world, hang_timeout_s)
        self.pid = os.getpid()   # a forked child (a DataLoader worker) never writes the rank's file
        self.step, self.training = 0, False
        self._lock, self._closed = threading.Lock(), False
        self._written = (0, False, _progress, self._others_cpu())
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._put({"state": "running", "step": 0, "phase": "preparing"})
        previous = sys.excepthook

        def on_error(kind, value, tb):
            self.write({"state": "error", "error": f"{kind.__name__}: {value}"})
            previous(kind, value, tb)
        sys.excepthook = on_error
        self._wake = threading.Event()
        threading.Thread(target=self._beats, name="codist-heartbeat", daemon=True).start()

    def beat(self, step: int) -> None:
        """Update `step` is done (the loop calls this after every update: no file is touched here)."""
        self.step, self.training = step, True

    def write(self, info: dict) -> None:
        """A state that ends the rank (error, preempted, diverged), written now; no beat follows."""
        with self._lock:
            if self._closed or os.getpid() != self.pid:
                return
            self._closed = True
            atomic_write_json(self.path, {"pid": self.pid, "unix": time.time(), **info})

    def finish(self) -> None:
        self.write({"state": "done"})
        self._wake.set()

    def _beats(self) -> None:
        while not self._wake.wait(self.every_s):
            with self._lock:
                if self._closed:
                    return
                if self._moved_on():
                    try:
                        self._put({"state": "running", "step": self.step,
                                   "phase": "training" if self.training else "preparing"})
                    except OSError as e:   # a file system's hiccup must not end the beats for good
                        print(f"codist: heartbeat {self.path}: {e}", file=sys.stderr)

    def _moved_on(self) -> bool:
        step, training, ticks, cpu = self.step, self.training, _progress, self._others_cpu()
        last_step, _, last_ticks, last_cpu = self._written
        self._written = (step, training, ticks, cpu)
        if training:
            return step != last_step
        return ticks != last_ticks or cpu - last_cpu >= CPU_SHARE * self.every_s

    def _others_cpu(self) -> float:
        """CPU seconds of this process's threads other than the heartbeat's own."""
        own = time.thread_time() if threading.current_thread().name == "codist-heartbeat" else 0.0
        return time.process_time() - own

    def _put(self, info: dict) -> None:
        """A beat: a temporary file renamed over the last one, not fsynced (see the module docstring)."""
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        tmp.write_text(json.dumps({"pid": self.pid, "unix": time.time(), **info}) + "\n")
        os.replace(tmp, self.path)
