"""`codist run` after its config is validated: the run checked against this machine, its
directory claimed, its process tree picked and started from one `LaunchPlan`, then supervised.

Which tree (`pick`): inside a SLURM job's batch script the ranks of a multi-rank GPU run (or of
deepspeed/torchrun on CPU) are srun tasks (codist.launching.cluster); otherwise the config's
launcher (codist.launching.launchers: deepspeed, the default; torchrun; fork; warm), a one-rank
run of deepspeed or torchrun being the rank alone. Threads per rank = the usable cores / ranks
unless the config says otherwise (the DeepSpeed launcher does not set OMP_NUM_THREADS;
oversubscribed threads cost 3x).
"""
from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path
from typing import Mapping

from ..config import ConfigError, RunConfig, dump
from .cuda_fit import check as check_cuda_fit
from ..exits import EXIT_FAILED
from .inputs import check_inputs
from ..owner import owner_env
from ..rank_env import hostnames, no_gpu_possible, rank_env, usable_cores
from .rundir import RunDir
from ..runlog import RANK_LOG_DIR, cpu_flags, cpu_model
from .cluster import SrunLauncher, in_allocation, ranks_by_srun
from .launchers import Launcher, LaunchPlan, LoneRank, check_launcher, named
from .supervise import supervise


def resolve_device(cfg: RunConfig) -> str:
    if cfg.launch.device != "auto":
        return cfg.launch.device
    if no_gpu_possible():
        return "cpu"   # no GPU can be visible: skip importing torch here (~2 s of every run's start-up)
    import torch
    return "cuda" if torch.cuda.is_available() else "cpu"


def check_hosts(cfg: RunConfig, device: str, env: Mapping[str, str]) -> None:
    """Only srun from a job's batch script starts ranks on several SLURM nodes: every other tree
    starts them on this machine."""
    hosts = hostnames(env.get("SLURM_JOB_NODELIST", ""))
    check_launcher(cfg, device, hosts)   # fork/warm across nodes: name the launcher
    if len(hosts) > 1 and not (in_allocation(env) and ranks_by_srun(cfg, device)):
        raise ConfigError(f"{len(hosts)} SLURM nodes (SLURM_JOB_NODELIST) but not in a job's batch script: "
                          f"multi-node runs start their ranks with srun from the job's batch script "
                          f"(snakemake --profile env/profiles/slurm, or sbatch codist run ...)")


#: The least memory one rank takes: each rank of a 4-rank TINY run (embedded cifar, fork launcher) had a
#: PSS of 123 MB on 2026-12-06 (a real model's rank takes more). More CPU ranks than cores only run slower
#: (launch.oversubscribe), but ranks that cannot get their memory are killed, so memory is what bounds a
#: world on one machine; at this floor the check refuses only worlds that cannot fit (4,000 ranks: 500 GB).
RANK_FLOOR_MB = 128
#: lm_data.EmbeddedStream.CACHE_DOCS: the documents of the embedded language each of a rank's batch rows
#: keeps (int64 tokens), the stream's memory once its rows have crossed two documents (a test pins it)
LM_EMBEDDED_DOCS_PER_ROW = 3


def memory_mb() -> int:
    """This machine's physical memory in MB."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20


def rank_memory_mb(cfg: RunConfig) -> tuple[int, str]:
    """(the least memory one rank of `cfg` takes, in MB, and what it is made of): RANK_FLOOR_MB, plus the
    embedded language model's stream, whose data is endless (no training set to bound the batch by)."""
    w, b = cfg.workload, cfg.train.batch_per_rank
    if getattr(w, "name", None) == "lm" and getattr(w, "dataset", None) == "embedded":
        stream = b * LM_EMBEDDED_DOCS_PER_ROW * w.doc_len * 8 // 2**20
        return RANK_FLOOR_MB + stream, (f"{RANK_FLOOR_MB} MB a rank, plus {stream:,} MB for the embedded language's "
                                        f"stream: train.batch_per_rank={b} rows x {LM_EMBEDDED_DOCS_PER_ROW} documents "
                                        f"of workload.doc_len={w.doc_len} tokens x 8 bytes")
    return RANK_FLOOR_MB, f"at least {RANK_FLOOR_MB} MB a rank"


def check_memory(cfg: RunConfig, memory: int | None = None) -> None:
    """The ranks started on this machine must fit its memory (`memory` MB; default: this machine's)."""
    world, memory = cfg.parallel.world_size, memory or memory_mb()
    per_rank, why = rank_memory_mb(cfg)
    if world * per_rank > memory:
        raise ConfigError(f"parallel.world_size={world} does not fit: {world} rank(s) need at least "
                          f"{world * per_rank:,} MB ({why}) and this machine has {memory:,} MB; allowed: "
                          + (f"parallel.world_size <= {memory // per_rank}" if memory >= per_rank else
                             "a smaller train.batch_per_rank"))


BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")   # oneDNN's bf16 LSTM primitive needs one of them


def check_bf16_lstm(cfg: RunConfig, device: str, flags: set[str] | None = None) -> None:
    """The fused LSTM (nn.LSTM: oneDNN on a CPU) under train.precision bf16 runs only on a CPU with
    AVX512-BF16 or AMX-BF16; elsewhere its first forward fails in every rank (measured on an AMD EPYC,
    issue 50). Refused before launch, naming the keys (`flags`: this CPU's by default)."""
    if device != "cpu" or cfg.train.precision != "bf16" or cfg.workload.name != "lm" or cfg.workload.lstm != "fused":
        return
    flags = cpu_flags() if flags is None else flags
    if not flags & set(BF16_CPU_FLAGS):
        raise ConfigError(f"train.precision=bf16 with workload.lstm=fused needs a CPU with AVX512-BF16 or AMX-BF16 "
                          f"(oneDNN has no bf16 LSTM without them); this CPU ({cpu_model()}) has neither; allowed: "
                          f"train.precision=fp32, or workload.lstm=unrolled (bf16 in software: slow)")


def check_fits(cfg: RunConfig, device: str, cores: int | None = None, memory: int | None = None) -> None:
    """Fail before any process starts if the world does not fit this machine (its GPUs, cores or memory;
    `cores`, `memory` in MB: this machine's by default; its CPU's bf16 kernels), or the launcher cannot
    start it."""
    world = cfg.parallel.world_size
    check_bf16_lstm(cfg, device)
    check_hosts(cfg, device, os.environ)
    check_cuda_fit(cfg.launch.device)   # the driver, the GPUs and torch's CUDA build, on every path (srun too)
    if in_allocation(os.environ) and ranks_by_srun(cfg, device):   # srun places the ranks in the job's allocation
        return
    if device == "cuda":
        import torch
        gpus = torch.cuda.device_count()
        if world > gpus and not (cfg.launch.backend == "gloo" and gpus):   # gloo: the ranks share the GPUs
            raise ConfigError(f"parallel.world_size={world} does not fit: this machine has {gpus} GPU(s); "
                              f"allowed: 1..{gpus} (use the slurm profile for more, or launch.backend=gloo "
                              f"for ranks that share the GPUs: a check of the multi-rank path, slow)")
    else:
        cores = cores or os.cpu_count() or 1
        if world > cores and not cfg.launch.oversubscribe:
            raise ConfigError(f"parallel.world_size={world} does not fit: this machine has {cores} CPU cores; "
                              f"allowed: 1..{cores}, or set launch.oversubscribe=true to run more ranks than cores")
    check_memory(cfg, memory)   # oversubscribed too: more ranks than cores are slow, more than memory are killed


def pick(cfg: RunConfig, device: str, env: Mapping[str, str]) -> Launcher:
    """The process tree of a run (see the module docstring)."""
    if in_allocation(env) and cfg.parallel.world_size > 1 and ranks_by_srun(cfg, device):
        return SrunLauncher()
    launcher = named(cfg)
    return LoneRank() if cfg.parallel.world_size == 1 and not launcher.forks else launcher


def build_command(cfg: RunConfig, config_path: Path, out: Path, port: int,
                  env: dict[str, str] | None = None) -> list[str]:
    """The command of the process tree `pick` gives (the environment: this process's by default)."""
    env = dict(os.environ if env is None else env)
    device = resolve_device(cfg) if in_allocation(env) and cfg.parallel.world_size > 1 else "cpu"
    check_hosts(cfg, device, env)
    return pick(cfg, device, env).command(LaunchPlan(cfg, config_path, out, device, port, env))


def threads_per_rank(cfg: RunConfig, cores: int | None = None) -> int:
    if cfg.launch.threads_per_rank:
        return cfg.launch.threads_per_rank
    return max(1, (cores or usable_cores()) // cfg.parallel.world_size)   # the job's CPUs, not the machine's


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


EXTENSIONS = "TORCH_EXTENSIONS_DIR"   # where torch.utils.cpp_extension builds DeepSpeed's JIT ops


def extensions_dir(environ: Mapping[str, str]) -> tuple[Path, bool]:
    """The folder DeepSpeed's ops are built in, and whether the user chose it: $TORCH_EXTENSIONS_DIR,
    else codist's cache ($XDG_CACHE_HOME/codist/torch_extensions, ~/.cache/codist/torch_extensions)."""
    if environ.get(EXTENSIONS):
        return Path(environ[EXTENSIONS]), True
    cache = environ.get("XDG_CACHE_HOME") or str(Path(environ.get("HOME") or Path.home()) / ".cache")
    return Path(cache) / "codist" / "torch_extensions", False


def check_extensions_dir(environ: Mapping[str, str], device: str) -> None:
    """On a CPU every rank loads DeepSpeed's CPU communication op, built (once) in `extensions_dir`:
    a folder that cannot be written (a read-only HOME) is one line here, not DeepSpeed's traceback
    from every rank. (On a GPU codist builds no op.)"""
    if device != "cpu":
        return
    path, chosen = extensions_dir(environ)
    try:
        path.mkdir(parents=True, exist_ok=True)
        if not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError(f"{path}: this user may not write it")
    except OSError as e:
        whose = f"{EXTENSIONS}" if chosen else f"codist's default {EXTENSIONS} (under XDG_CACHE_HOME or HOME)"
        raise ConfigError(f"{whose} {str(path)!r} cannot be written ({e.strerror or e}): DeepSpeed builds its "
                          f"CPU communication op there; set {EXTENSIONS} to a writable folder") from None


def op_build_env(environ: Mapping[str, str]) -> dict[str, str]:
    """Where and with which ninja a rank builds DeepSpeed's JIT ops: `extensions_dir`, and, in a
    virtual environment that installs its own ninja, PATH with that environment's bin folder first.
    torch's JIT build runs the first `ninja` on PATH, and the environment's own (pip's ninja 1.13) and
    a system one (Debian's 1.11) write .ninja_log versions the other discards: ranks started with
    either PATH rebuilt the op (~50 s) at every switch. A system interpreter's folder (/usr/bin) is
    never moved ahead of the user's PATH (a cluster's module-loaded compiler stays first)."""
    out = {EXTENSIONS: str(extensions_dir(environ)[0])}
    bin_dir = str(Path(sys.executable).parent)
    path = environ.get("PATH", os.defpath)
    if sys.prefix != sys.base_prefix and (Path(bin_dir) / "ninja").exists():
        out["PATH"] = os.pathsep.join([bin_dir, *(p for p in path.split(os.pathsep) if p and p != bin_dir)])
    return out


def launch_env(cfg: RunConfig, device: str, threads: int, launched_unix: float | None = None) -> dict[str, str]:
    """The ranks' environment: threads and device (codist.rank_env), the launcher's name, when the
    launch began, this process as the ranks' owner (they stop without it: codist.owner), and where
    DeepSpeed builds its ops and with which ninja (`op_build_env`: the user's folder kept)."""
    env = rank_env(os.environ, threads, device)
    env.update({"CODIST_LAUNCHER": cfg.launch.launcher, "CODIST_LAUNCH_UNIX": repr(launched_unix or time.time())})
    env.update(owner_env())
    env.update(op_build_env(env))
    return env


def run(cfg: RunConfig, out: str | os.PathLike, launched_unix: float | None = None, fresh: bool = False) -> int:
    """Claim `out` (codist.launching.rundir: one run at a time, never another run's files), write the
    resolved config into it, start every rank, wait; returns the exit code. A run that `out`
    holds finished is not trained again (a no-op that says so) unless `fresh`, which also
    clears whatever `out` held. `launched_unix`: when the launch began (the ranks' `setup_s`
    counts from it; default now; `codist run` passes its own process start).

    SIGTERM, SIGINT or SIGUSR1 (SLURM preemption) sent to this process, or to every process of
    the run at once, make every rank checkpoint and exit with EXIT_PREEMPTED; rerunning resumes.
    If this process dies, the ranks notice (codist.owner) and stop the same way.
    """
    device = resolve_device(cfg)
    check_fits(cfg, device)
    check_inputs(cfg)
    check_extensions_dir(os.environ, device)
    try:
        out = Path(out).resolve()
    except (RuntimeError, OSError) as e:   # a symbolic link loop: Python 3.11 raises RuntimeError
        raise ConfigError(f"--out {out}: cannot be resolved ({e}); expected a run directory or a path "
                          f"where one can be made") from None
    rundir = RunDir(out, os.getpid())
    try:
        if rundir.finished(cfg.run_id()) and not fresh:
            print(f"codist: {out}: run {cfg.run_id()} already finished (summary.json); nothing to do "
                  f"(--fresh trains it again from step 0)", file=sys.stderr)
            return 0
        rundir.prepare(cfg.run_id(), fresh)
        dump(cfg, out / "config.yaml")
        env = launch_env(cfg, device, threads_per_rank(cfg), launched_unix)
        env[RANK_LOG_DIR] = str(out / "logs")   # each rank's output in RUN/logs/rank<N>.log (rank 0's here too)
        plan = LaunchPlan(cfg, out / "config.yaml", out, device, cfg.launch.master_port or free_port(), env)
        launcher = pick(cfg, device, env)
        try:
            proc = launcher.start(plan)
        except (RuntimeError, OSError) as e:
            print(f"codist: {out.name}: cannot start the run: {e}", file=sys.stderr)
            return EXIT_FAILED
        return supervise(launcher, proc, plan)
    finally:
        rundir.close()
