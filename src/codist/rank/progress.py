"""Rank 0's progress: a tqdm bar on a terminal; in a log file (Snakemake's, SLURM's) one plain
line per evaluation instead of a bar's carriage-return redraws."""
from __future__ import annotations

import sys
import time

from ..runlog import terminal


class Progress:
    def __init__(self, total: int, initial: int, desc: str, enabled: bool, stream=None):
        # under `codist run` rank 0's stderr is a pipe into its log: a bar goes to the terminal itself
        self.stream = stream or terminal() or sys.stderr
        self.total, self.desc, self.enabled = total, desc, enabled
        self.t0 = time.monotonic()
        self.bar = None
        if enabled and self.stream.isatty():
            from tqdm import tqdm
            self.bar = tqdm(total=total, initial=initial, desc=desc, unit="step", file=self.stream,
                            dynamic_ncols=True, mininterval=1.0)

    def step(self) -> None:
        if self.bar is not None:
            self.bar.update(1)

    def evaluated(self, done: int, metric: str, value: float) -> None:
        if self.bar is not None:
            self.bar.set_postfix({metric: f"{value:.4f}"}, refresh=False)
        elif self.enabled:
            print(f"{self.desc}: update {done}/{self.total} {metric}={value:.4f} "
                  f"({time.monotonic() - self.t0:.1f} s)", file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
