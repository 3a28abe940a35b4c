"""A plugin algorithm whose set-up (the rank's preparation, before its first update) takes long:
rank `slow_rank` waits `prepare_s` seconds before building its model, the others go on and wait for
it in their first collective, as ranks wait for the one that parses or tokenizes a data set.
`how` is what the preparation looks like to the heartbeat (codist.runtime.heartbeat):
- "progress": a reader that waits on files and reports each chunk (`heartbeat.progress()`);
- "cpu": work on the CPU that reports nothing;
- "hang": a rank blocked for good (no progress, no CPU): the watchdog must kill the run.
Used by test_watchdog_prepare.py through CODIST_PLUGINS."""
from __future__ import annotations

import time
from typing import Literal

import torch
from pydantic import Field

from codist.algorithms import register
from codist.algorithms.base import Algorithm
from codist.algorithms.sections import AlgorithmSection
from codist.runtime import heartbeat


class SlowPrepConfig(AlgorithmSection):
    name: Literal["slow_prep"] = "slow_prep"
    prepare_s: float = Field(6.0, ge=0, description="seconds rank slow_rank prepares")
    slow_rank: int = Field(0, ge=0)
    how: Literal["progress", "cpu", "hang"] = "progress"


class SlowPrep(Algorithm):
    def setup(self) -> None:
        a = self.cfg.algorithm
        if torch.distributed.get_rank() == a.slow_rank:
            end = time.monotonic() + a.prepare_s
            if a.how == "hang":
                time.sleep(3600)
            while time.monotonic() < end:
                if a.how == "progress":
                    time.sleep(0.05)   # waiting on a file system ...
                    heartbeat.progress()   # ... and saying so after each chunk
                else:
                    sum(i * i for i in range(10_000))   # parsing, tokenizing: CPU, no word
        super().setup()


register("slow_prep", SlowPrepConfig, SlowPrep, min_models=2, period=None, extra_models=())
