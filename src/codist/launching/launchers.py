"""The process trees a run can start on this machine, one class each behind one interface, and
`named`, the one place a launcher's name is read (the srun tree: codist.launching.cluster;
which tree a run gets: codist.launching.launch.pick).

A `Launcher` turns a `LaunchPlan` into a running tree that leads its own process group (the
hang watchdog's killpg, and the wait for every rank, reach all of it), stops it (every rank
checkpoints and exits 3) and maps its root's return code to a shell's exit code. Every tree is
then waited for by the one supervisor, codist.launching.supervise.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ..config import ConfigError, RunConfig
from ..exits import from_returncode
from ..rank_env import local_rank_env


@dataclass(frozen=True)
class LaunchPlan:
    """One run's launch: the config, its resolved copy and the run's folder, the device, the
    rendezvous port and the ranks' environment (SLURM's variables are read from it too)."""
    cfg: RunConfig
    config_path: Path
    out: Path
    device: str
    port: int
    env: dict[str, str]

    @property
    def world(self) -> int:
        return self.cfg.parallel.world_size

    @property
    def train_args(self) -> list[str]:
        return ["--config", str(self.config_path), "--out", str(self.out)]


class Launcher:
    """One process tree. `command`: its argv; `start`: the running tree (a Popen, or an object with
    its pid, wait, send_signal, returncode), leading its own process group; `stop`: ask every rank
    to checkpoint and exit; `exit_code`: a shell's code for the root's return code."""
    forks = False   # the ranks are forked from one CPU process on this machine (codist.launching.fork)

    def command(self, plan: LaunchPlan) -> list[str]:
        raise NotImplementedError

    def start(self, plan: LaunchPlan):
        return subprocess.Popen(self.command(plan), env=plan.env, start_new_session=True)

    def stop(self, proc, plan: LaunchPlan) -> None:
        """SIGTERM to the tree's root, which passes it on (torchrun, the fork launcher)."""
        proc.send_signal(signal.SIGTERM)

    def exit_code(self, rc: int) -> int:
        """128 + N for a tree killed by signal N (Popen gives -N)."""
        return from_returncode(rc)


class DeepSpeedLauncher(Launcher):
    def command(self, plan):
        return [sys.executable, "-m", "deepspeed.launcher.runner", "--num_gpus", str(plan.world),
                "--master_port", str(plan.port), "--module", "codist.rank.train", *plan.train_args]

    def stop(self, proc, plan):
        """SIGTERM to the whole group: the DeepSpeed launcher does not pass it on (its runner dies
        of it at once, leaving the ranks to run on), so the ranks get it themselves."""
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass

    def exit_code(self, rc):
        """The DeepSpeed launcher exits with a rank's -N as 256 - N."""
        return 128 + 256 - rc if 256 - 64 <= rc < 256 else super().exit_code(rc)


class TorchrunLauncher(Launcher):
    def command(self, plan):
        return [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(plan.world),
                "--master_port", str(plan.port), "-m", "codist.rank.train", *plan.train_args]


class LoneRank(Launcher):
    """A one-rank run on one node (deepspeed, torchrun): `codist.rank.train` itself, with the env://
    rendezvous torchrun would set (one interpreter fewer)."""

    def command(self, plan):
        return [sys.executable, "-m", "codist.rank.train", *plan.train_args, "--local_rank=0"]

    def start(self, plan):
        return subprocess.Popen(self.command(plan), env={**plan.env, **local_rank_env(0, 1, plan.port)},
                                start_new_session=True)


class ForkLauncher(Launcher):
    forks = True

    def fork_args(self, plan) -> list[str]:
        return ["--nprocs", str(plan.world), "--master_port", str(plan.port), "--workload",
                plan.cfg.workload.name, "--", *plan.train_args]

    def command(self, plan):
        return [sys.executable, "-m", "codist.launching.fork", *self.fork_args(plan)]


class WarmLauncher(ForkLauncher):
    """The fork launcher's work done by a warm server that keeps its imports between runs
    (codist.launching.warm_client); a server that cannot be used: the fork launcher here, said once."""

    def start(self, plan):
        from .warm_client import WarmRun, WarmUnavailable
        try:
            return WarmRun(self.fork_args(plan), plan.env)
        except WarmUnavailable as e:   # untrusted, stopped or silent
            print(f"codist: {plan.out.name}: warm server not used: {e}; starting the ranks here (launcher fork)",
                  file=sys.stderr)
            return super().start(plan)


NAMED = {"deepspeed": DeepSpeedLauncher(), "torchrun": TorchrunLauncher(), "fork": ForkLauncher(),
         "warm": WarmLauncher()}


def named(cfg: RunConfig) -> Launcher:
    """The launcher a config names (launch.launcher)."""
    return NAMED[cfg.launch.launcher]


def check_launcher(cfg: RunConfig, device: str, hosts: list[str]) -> None:
    """`fork` and `warm` start every rank on this machine by forking one CPU process."""
    name = cfg.launch.launcher
    if not named(cfg).forks:
        return
    if device == "cuda":
        raise ConfigError(f"launch.launcher={name!r} with device cuda: a forked child cannot use CUDA "
                          f"({name} is for single-node CPU runs); allowed with cuda: deepspeed, torchrun")
    if len(hosts) > 1:
        raise ConfigError(f"launch.launcher={name!r} across {len(hosts)} nodes: {name} starts every rank on "
                          f"this machine; multi-node runs use the DeepSpeed launcher; allowed: deepspeed")
