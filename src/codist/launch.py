"""`codist run`: checks that a run fits this machine, claims its directory, picks how its ranks
start and supervises them: stop signals passed on, the hang watchdog, the end mapped to one exit
code (codist.exits). How each process tree starts lives with it: the srun line in codist.cluster,
the forked ranks in codist.fork_launcher, the warm server's in codist.warm_server/warm_client.

Default: the DeepSpeed launcher (`deepspeed --num_gpus N --module codist.train ...`);
alternatives: torchrun, `fork` (`python -m codist.fork_launcher`: one process imports torch,
deepspeed and codist.train once and forks the ranks; single-node CPU only, it saves every rank's
imports) and `warm` (the same, from a server that keeps the imports between runs:
codist.warm_server). A one-rank run on one node starts `codist.train` itself, without a
launcher process (deepspeed, torchrun: the same environment, one interpreter fewer).
Threads per rank = cores / ranks unless the config says otherwise (the DeepSpeed
launcher does not set OMP_NUM_THREADS; oversubscribed threads cost 3x).
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from .config import ConfigError, RunConfig, check_path_text, dump, load
from .cluster import (in_allocation, job_resources, nodes_needed,  # noqa: F401
                      ranks_by_srun, srun_command)   # (nodes_needed: re-exported)
from .cuda_fit import check as check_cuda_fit
from .inputs import check_inputs
from .owner import owner_env
from .exits import (EXIT_BAD_INPUT, EXIT_DIVERGED, EXIT_FAILED, EXIT_PREEMPTED, RETRY_COLD, forwarding_stop_signals,
                    from_returncode)
from .fork_launcher import ForkedRun
from .warm_server import Supervised, server_key
from .rank_env import expand_nodelist, hostnames, no_gpu_possible, rank_env, usable_cores  # noqa: F401
from .rundir import RunDir
from .runlog import RANK_LOG_DIR


def resolve_device(cfg: RunConfig) -> str:
    if cfg.launch.device != "auto":
        return cfg.launch.device
    if no_gpu_possible():
        return "cpu"   # no GPU can be visible: skip importing torch here (~2 s of every run's start-up)
    import torch
    return "cuda" if torch.cuda.is_available() else "cpu"


def check_launcher(cfg: RunConfig, device: str, hosts: list[str]) -> None:
    """`fork` and `warm` start every rank on this machine by forking one CPU process."""
    name = cfg.launch.launcher
    if not NAMED[name].forks:
        return
    if device == "cuda":
        raise ConfigError(f"launch.launcher={name!r} with device cuda: a forked child cannot use CUDA "
                          f"({name} is for single-node CPU runs); allowed with cuda: deepspeed, torchrun")
    if len(hosts) > 1:
        raise ConfigError(f"launch.launcher={name!r} across {len(hosts)} nodes: {name} starts every rank on "
                          f"this machine; multi-node runs use the DeepSpeed launcher; allowed: deepspeed")


def check_fits(cfg: RunConfig, device: str, cores: int | None = None) -> None:
    """Fail before any process starts if the world does not fit this machine (or the launcher
    cannot start it)."""
    world = cfg.parallel.world_size
    hosts = hostnames(os.environ.get("SLURM_JOB_NODELIST", ""))
    check_launcher(cfg, device, hosts)
    check_cuda_fit(cfg.launch.device)   # the driver, the GPUs and torch's CUDA build, on every path (srun too)
    if in_allocation(os.environ) and ranks_by_srun(cfg, device):   # srun places the ranks in the job's
        return                                                       # allocation (codist.cluster)
    if device == "cuda" and len(hosts) > 1:   # multi-node: the job's nodes, not this one's GPUs
        if world > len(hosts) * cfg.launch.gpus_per_node:
            raise ConfigError(f"parallel.world_size={world} does not fit {len(hosts)} nodes x "
                              f"launch.gpus_per_node={cfg.launch.gpus_per_node}")
        return
    if device == "cuda":
        import torch
        gpus = torch.cuda.device_count()
        if world > gpus:
            raise ConfigError(f"parallel.world_size={world} does not fit: this machine has {gpus} GPU(s); "
                              f"allowed: 1..{gpus} (use the slurm profile for more)")
        return
    cores = cores or os.cpu_count() or 1
    if world > cores and not cfg.launch.oversubscribe:
        raise ConfigError(f"parallel.world_size={world} does not fit: this machine has {cores} CPU cores; "
                          f"allowed: 1..{cores}, or set launch.oversubscribe=true to run more ranks than cores")


def threads_per_rank(cfg: RunConfig, cores: int | None = None) -> int:
    if cfg.launch.threads_per_rank:
        return cfg.launch.threads_per_rank
    return max(1, (cores or usable_cores()) // cfg.parallel.world_size)   # the job's CPUs, not the machine's


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# the job resources of a run under SLURM (workflows/experiments.py reads them by this name)
cluster_resources = job_resources


@dataclass(frozen=True)
class LaunchPlan:
    """One run's launch, what every process tree needs: the config, where its resolved copy and the
    run's files are, the device, the rendezvous port and the ranks' environment (SLURM's variables
    are read from it too); `supervised`: `codist run` runs in a warm server's supervisor."""
    cfg: RunConfig
    config_path: Path
    out: Path
    device: str
    port: int
    env: dict[str, str]
    supervised: Supervised | None = None

    @property
    def world(self) -> int:
        return self.cfg.parallel.world_size

    @property
    def train_args(self) -> list[str]:
        return ["--config", str(self.config_path), "--out", str(self.out)]


class Launcher:
    """One process tree. `command`: its argv; `start`: the running tree (a Popen, or an object with
    its pid, wait, send_signal, returncode), leading its own process group (the hang watchdog's
    killpg); `stop`: ask every rank to checkpoint and exit; `exit_code`: a shell's code for the
    tree's return code. Which one a run gets: `pick`, the one place a launcher's name is read."""
    forks = False   # the ranks are forked from one CPU process on this machine (codist.fork_launcher)

    def command(self, plan: LaunchPlan) -> list[str]:
        raise NotImplementedError

    def start(self, plan: LaunchPlan):
        return subprocess.Popen(self.command(plan), env=plan.env, start_new_session=True)

    def stop(self, proc, plan: LaunchPlan) -> None:
        """SIGTERM to the tree's root, which passes it on (torchrun, the fork launcher, srun's relay)."""
        proc.send_signal(signal.SIGTERM)

    def exit_code(self, rc: int) -> int:
        """128 + N for a tree killed by signal N (Popen gives -N)."""
        return from_returncode(rc)


class DeepSpeedLauncher(Launcher):
    def command(self, plan):
        return [sys.executable, "-m", "deepspeed.launcher.runner", "--num_gpus", str(plan.world),
                "--master_port", str(plan.port), "--module", "codist.train", *plan.train_args]

    def stop(self, proc, plan):
        """The DeepSpeed launcher does not pass SIGTERM on (it exits at once, leaving the ranks to run
        on), so its ranks get it directly."""
        ranks = rank_pids(proc.pid)
        for pid in ranks:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        if not ranks:
            proc.send_signal(signal.SIGTERM)

    def exit_code(self, rc):
        """The DeepSpeed launcher exits with a rank's -N as 256 - N."""
        return 128 + 256 - rc if 256 - 64 <= rc < 256 else super().exit_code(rc)


class TorchrunLauncher(Launcher):
    def command(self, plan):
        return [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(plan.world),
                "--master_port", str(plan.port), "-m", "codist.train", *plan.train_args]


class LoneRank(Launcher):
    """A one-rank run on one node (deepspeed, torchrun): `codist.train` itself, with the env://
    rendezvous torchrun would set (one interpreter fewer)."""

    def command(self, plan):
        return [sys.executable, "-m", "codist.train", *plan.train_args, "--local_rank=0"]

    def start(self, plan):
        env = {**plan.env, "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1",
               "GROUP_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(plan.port)}
        return subprocess.Popen(self.command(plan), env=env, start_new_session=True)


class SrunLauncher(Launcher):
    """Inside a SLURM job's batch script: one srun, one task per rank (codist.cluster)."""

    def command(self, plan):
        return srun_command(plan.cfg, plan.device, ["codist.train", *plan.train_args], plan.port,
                            plan.env["SLURM_JOB_ID"])


class ForkLauncher(Launcher):
    forks = True

    def fork_args(self, plan) -> list[str]:
        return ["--nprocs", str(plan.world), "--master_port", str(plan.port), "--", *plan.train_args]

    def command(self, plan):
        return [sys.executable, "-m", "codist.fork_launcher", *self.fork_args(plan)]


class WarmLauncher(ForkLauncher):
    """The fork launcher's work done by a warm server (codist.warm_client), or by this process when
    it is a warm server's supervisor; a server that cannot be used: the fork launcher, said once."""

    def start(self, plan):
        if plan.supervised is not None:   # `codist run` in the warm server's supervisor: the ranks forked from here
            return ForkedRun(self.fork_args(plan), plan.env, owner=plan.supervised.conn)
        from .warm_client import WarmRun, WarmUnavailable
        try:
            return WarmRun({"argv": self.fork_args(plan), "env": plan.env}, plan.env)
        except WarmUnavailable as e:   # untrusted, stopped or silent: the fork launcher's work, here
            print(f"codist: {plan.out.name}: warm server not used: {e}; starting the ranks here (launcher fork)",
                  file=sys.stderr)
            return super().start(plan)


NAMED = {"deepspeed": DeepSpeedLauncher(), "torchrun": TorchrunLauncher(), "fork": ForkLauncher(),
         "warm": WarmLauncher()}


def pick(cfg: RunConfig, device: str, env: Mapping[str, str]) -> Launcher:
    """The process tree of a run. Inside a SLURM job's batch script (not inside a job step) a run
    whose ranks are srun tasks (codist.cluster.ranks_by_srun: multi-rank GPU runs, and CPU runs of
    deepspeed or torchrun) starts them with one srun; otherwise the named launcher starts them on
    this machine, a one-rank run of deepspeed or torchrun being the rank alone."""
    if in_allocation(env) and cfg.parallel.world_size > 1 and ranks_by_srun(cfg, device):
        return SrunLauncher()
    hosts = hostnames(env.get("SLURM_JOB_NODELIST", ""))
    check_launcher(cfg, "cpu", hosts)   # fork/warm across nodes: name the launcher first
    if len(hosts) > 1:
        raise ConfigError(f"{len(hosts)} SLURM nodes (SLURM_JOB_NODELIST) but not in a job's batch script: "
                          f"multi-node runs start their ranks with srun from the job's batch script "
                          f"(snakemake --profile env/profiles/slurm, or sbatch codist run ...)")
    launcher = NAMED[cfg.launch.launcher]
    return LoneRank() if cfg.parallel.world_size == 1 and not launcher.forks else launcher


def build_command(cfg: RunConfig, config_path: Path, out: Path, port: int,
                  env: dict[str, str] | None = None) -> list[str]:
    """The command of the process tree `pick` gives (the environment: this process's by default)."""
    env = dict(os.environ if env is None else env)
    device = resolve_device(cfg) if in_allocation(env) and cfg.parallel.world_size > 1 else "cpu"
    plan = LaunchPlan(cfg, config_path, out, device, port, env)
    return pick(cfg, device, env).command(plan)


def launch_env(cfg: RunConfig, device: str, threads: int, launched_unix: float | None = None,
               owner_pid: int | None = None) -> dict[str, str]:
    """The ranks' environment; `owner_pid`: the `codist run` they stop without (default this process)."""
    env = rank_env(os.environ, threads, device)
    env.update({
        "CODIST_LAUNCHER": cfg.launch.launcher,
        "CODIST_LAUNCH_UNIX": repr(launched_unix or time.time()),
    })
    env.update(owner_env(owner_pid or os.getpid()))   # a rank whose `codist run` is gone stops (codist.owner)
    return env


def rank_reports(out: Path) -> dict[int, dict]:
    reports = {}
    for path in sorted((out / ".ranks").glob("rank-*.json")):
        try:
            reports[int(path.stem.split("-")[1])] = json.loads(path.read_text())
        except (ValueError, OSError):
            continue
    return reports


def diagnose(out: Path, world: int, returncode: int) -> str:
    """Name the rank(s) that ended the run, from what each rank wrote under RUN/.ranks/.

    A rank still marked running after the launcher exited died without raising (SIGKILL, out of
    memory): it is the cause, and the errors of the others (connection reset) its consequence."""
    reports = rank_reports(out)
    missing = [r for r in range(world) if r not in reports]
    died = sorted((r for r, info in reports.items() if info.get("state") == "running"),
                  key=lambda r: reports[r]["unix"])
    errors = [f"rank {r} failed: {info['error']}" for r, info in reports.items() if info.get("state") == "error"]
    parts = []
    if missing:
        parts.append(f"rank(s) {missing} never started")
    parts += [f"rank {r} died without an error at update {reports[r]['step']} (killed, or out of memory?)"
              for r in died]
    if errors:
        parts.append(("then " if died else "") + "; ".join(errors))
    failed = died + [r for r, info in reports.items() if info.get("state") == "error"]
    text = "; ".join(parts) + f" (launcher exit code {returncode})" if parts else f"launcher exit code {returncode}"
    return text + "".join(log_tail(out, r) for r in failed if r != 0)   # rank 0's output is above already


def log_tail(out: Path, rank: int, lines: int = 8) -> str:
    """The last lines of a rank's own log (RUN/logs/rank<N>.log), for the launcher's failure summary."""
    path = out / "logs" / f"rank{rank}.log"
    try:
        tail = path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return ""
    return f"\n--- rank {rank}: the end of {path} ---\n" + "\n".join(tail)


def _watch(proc: subprocess.Popen, out: Path, hang_s: int, world: int) -> str | None:
    """Wait for the launcher; if no rank has made progress for `hang_s` (codist.heartbeat: updates,
    or a preparation's progress), kill the job and say which rank stopped first (a hung rank blocks
    the others in their next collective). Returns as soon as the launcher exits (a second's polling
    would add half a second to every run). The ranks' files are read every hang_s / 30 s at most
    once a second (30 s at the default 900 s): reading a thousand files every second would load
    a shared file system for nothing."""
    read_every, next_read = max(1.0, hang_s / 30), 0.0
    while True:
        try:
            proc.wait(timeout=1.0)
            return None
        except subprocess.TimeoutExpired:
            pass
        if time.monotonic() < next_read:
            continue
        next_read = time.monotonic() + read_every
        reports = rank_reports(out)
        running = {r: i for r, i in reports.items() if i.get("state") == "running"}
        if len(reports) == world and running and time.time() - max(i["unix"] for i in running.values()) > hang_s:
            first = min(running, key=lambda r: running[r]["unix"])
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            where = ("while preparing (set-up, data, checkpoint load)" if running[first].get("phase") == "preparing"
                     else f"at update {running[first]['step']}")
            return (f"no rank made progress for {hang_s} s (launch.hang_timeout_s); rank {first} was the "
                    f"first to stop, {where}; the job was killed")


def command_config(options: dict) -> RunConfig:
    """The validated config of `codist run`/`check`'s parsed options (config, overrides,
    data_root, out), or ConfigError."""
    from .data_root import with_data_root
    # made absolute here, so ranks started elsewhere read the same folder
    cfg = with_data_root(load(options["config"], options["overrides"]), options.get("data_root"))
    if options.get("out"):   # written into the manifest and every rank's files
        check_path_text("--out", options["out"])
    return cfg


def run_command(options: dict, launched_unix: float, supervised: Supervised | None = None) -> int:
    """`codist run` with its parsed options, from the command line (codist.cli) or in a warm
    server's supervisor for its client (codist.warm_cli, `supervised`); bad input is one line, 2."""
    try:
        cfg = command_config(options)
        return run(cfg, options.get("out") or f"runs/{cfg.run_id()}", launched_unix, options.get("fresh", False),
                   supervised)
    except ConfigError as e:
        print(f"codist: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT


def run(cfg: RunConfig, out: str | os.PathLike, launched_unix: float | None = None, fresh: bool = False,
        supervised: Supervised | None = None) -> int:
    """Claim `out` (codist.rundir: one run at a time, never another run's files), write the
    resolved config into it, start every rank, wait; returns the exit code. A run that `out`
    holds finished is not trained again (a no-op that says so) unless `fresh`, which also
    clears whatever `out` held. `launched_unix`: when the launch began (the ranks' `setup_s`
    counts from it; default now; `codist run` passes its own process start).

    SIGTERM, SIGINT or SIGUSR1 (SLURM preemption) sent to this process reach every rank as
    SIGTERM: they checkpoint and exit with EXIT_PREEMPTED; rerunning resumes. If this process
    dies, the ranks notice (codist.owner) and stop the same way. `supervised`: this runs in a warm
    server's supervisor for its client, who owns the ranks and the directory's lock.
    """
    device = resolve_device(cfg)
    check_fits(cfg, device)
    check_inputs(cfg)
    if supervised is not None and (not isinstance(NAMED[cfg.launch.launcher], WarmLauncher) or
                                   server_key(rank_env(os.environ, threads_per_rank(cfg), device)) != supervised.key):
        return RETRY_COLD   # not for this server's imports: the client's codist run launches itself
    out = Path(out).resolve()
    rundir = RunDir(out, supervised.client_pid if supervised else os.getpid())
    try:
        if rundir.finished(cfg.run_id()) and not fresh:
            print(f"codist: {out}: run {cfg.run_id()} already finished (summary.json); nothing to do "
                  f"(--fresh trains it again from step 0)", file=sys.stderr)
            return 0
        rundir.prepare(cfg.run_id(), fresh)
        return _launch(cfg, out, device, launched_unix, supervised)
    finally:
        rundir.close()


def rank_pids(pgid: int) -> list[int]:
    """The ranks (`python -m codist.train`) among the processes of a launcher's process group."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getpgid(int(entry.name)) != pgid:
                continue
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, ProcessLookupError):
            continue
        if any(a == b"-m" and b == b"codist.train" for a, b in zip(argv, argv[1:])):
            pids.append(int(entry.name))
    return pids


def exit_code(cfg: RunConfig, rc: int) -> int:
    """A shell's exit code for the named launcher's return code: 128 + N for a launcher killed by
    signal N (Popen gives -N); the DeepSpeed launcher exits with a rank's -N as 256 - N."""
    return NAMED[cfg.launch.launcher].exit_code(rc)


def _launch(cfg: RunConfig, out: Path, device: str, launched_unix: float | None, supervised: Supervised | None) -> int:
    config_path = out / "config.yaml"
    dump(cfg, config_path)
    env = launch_env(cfg, device, threads_per_rank(cfg), launched_unix, supervised.client_pid if supervised else None)
    env[RANK_LOG_DIR] = str(out / "logs")   # each rank's output in RUN/logs/rank<N>.log (rank 0's here too)
    plan = LaunchPlan(cfg, config_path, out, device, cfg.launch.master_port or free_port(), env, supervised)
    launcher = pick(cfg, device, env)
    try:
        proc = launcher.start(plan)
    except (RuntimeError, OSError) as e:
        print(f"codist: {out.name}: cannot start the run: {e}", file=sys.stderr)
        return EXIT_FAILED
    return supervise(launcher, proc, plan)


def supervise(launcher: Launcher, proc, plan: LaunchPlan) -> int:
    """Wait for a started tree, every path alike: stop signals passed on (`launcher.stop`), the hang
    watchdog, the end mapped to one exit code and said in one line (per-rank logs: RUN/logs/)."""
    cfg, out = plan.cfg, plan.out
    with forwarding_stop_signals(lambda signum, frame: launcher.stop(proc, plan)):
        hang = _watch(proc, out, cfg.launch.hang_timeout_s, cfg.parallel.world_size)
    rc = launcher.exit_code(proc.returncode)
    reports = rank_reports(out)
    states = {r.get("state") for r in reports.values()} if len(reports) == cfg.parallel.world_size else set()
    if rc != 0 and states == {"preempted"}:
        rc = EXIT_PREEMPTED   # the launcher's own code after a SIGTERM varies (torchrun: 1)
    if rc != 0 and states == {"diverged"}:
        print(f"codist: {out.name}: {reports[0]['error']}", file=sys.stderr)
        return EXIT_DIVERGED
    if hang:
        print(f"codist: {out.name}: {hang}", file=sys.stderr)
        return EXIT_FAILED
    if rc == EXIT_PREEMPTED:
        print(f"codist: {out.name}: preempted; checkpoint written, rerun the same command to resume",
              file=sys.stderr)
        return rc
    if rc != 0:
        print(f"codist: {out.name}: run failed: {diagnose(out, cfg.parallel.world_size, rc)}", file=sys.stderr)
        return rc
    if not (out / "summary.json").exists():
        print(f"codist: launcher exited 0 but {out / 'summary.json'} was not written", file=sys.stderr)
        return EXIT_FAILED
    return 0
