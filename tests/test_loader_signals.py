"""DataLoader workers outlive the stop signals SLURM sends every process of a step: a real
PrefetchStream with one worker process keeps serving batches after its worker gets SIGTERM and
SIGUSR1 from another process (as slurmstepd sends them); the rank handles stopping."""
import os
import signal
import subprocess

import torch
from torch.utils.data import Dataset

from codist.runtime.data import BatchStream, PrefetchStream


class WorkerPids(Dataset):
    """Each sample is the pid of the process that produced it."""

    def __len__(self):
        return 64

    def __getitem__(self, i):
        return torch.tensor(os.getpid())


def test_loader_worker_survives_stop_signals():
    stream = PrefetchStream(BatchStream(WorkerPids(), batch_per_rank=2, ranks=1, rank=0, seed=0), workers=1)
    worker = int(stream.batch(0)[0])
    assert worker != os.getpid()
    step = 1
    for sig in (signal.SIGTERM, signal.SIGUSR1):
        # sent from another process: torch's own worker handler exits quietly on its parent's SIGTERM only
        subprocess.run(["kill", f"-{sig.name[3:]}", str(worker)], check=True)
        for step in range(step, step + 10):   # past the batches prefetched before the signal
            assert int(stream.batch(step)[0]) == worker
        step += 1
    os.kill(worker, 0)   # still alive
