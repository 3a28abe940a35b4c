"""`codist run` of a warm run without its own imports: the client hands its whole command to the
warm server, whose supervisor runs it (validation, the directory lock, the launch, the hang
watchdog) with the imports the server holds, and only waits and passes signals on.

Importing and validating the config schema (pydantic, every workload and algorithm) is ~0.2 s of
CPU, most of a warm run's start-up (measured: `codist run` start to the first update 0.45 s,
0.25 s of it before the client's request). What the client must know before it can pick the
server it reads from the raw YAML and `--set launch.*` overrides alone: `launch.launcher: warm`,
an explicit `launch.threads_per_rank` and a CPU device (the server's imports depend on the thread
count: codist.warm_server's key). Anything else, or a config it cannot read, takes the ordinary
path, which reports errors itself. The client sends `codist run`'s parsed options (a "run"
request: the server never parses a command line); the supervisor runs them with
`launch.run_command`, as `codist run` does, and checks the key again after validating
(`launch.run`): if the resolved config needs another server it answers RETRY_COLD and the client
runs the ordinary path.

This module is also the warm server's program (`python -m codist.warm_cli --socket PATH`, started
by codist.warm_client): `warm_server.main` given `run_for_client`, so the server itself imports
neither this module nor the launcher.

Every `codist run` property holds: the supervisor owns the run directory (its lock) and the
ranks; SIGTERM/SIGINT/SIGUSR1 to the client reach it; a client that vanishes makes the ranks
checkpoint and stop (the fork launcher's OwnerWatch on the client's connection); the exit code
and the output are the supervisor's.
"""
from __future__ import annotations

import os
from pathlib import Path

from .rank_env import no_gpu_possible, rank_env
from .exits import RETRY_COLD, forwarding_stop_signals
from .warm_server import Supervised


def warm_threads(config: str, overrides: list[str]) -> int | None:
    """The threads per rank of a config that runs warm on this machine's CPU, read without the
    config module; None when it does not, or when that needs the config module to tell."""
    import yaml
    try:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)   # libyaml's, where built: ~10x faster
        raw = yaml.load(Path(config).read_text(), Loader=loader)
        launch = dict((raw or {}).get("launch") or {})
        for item in overrides:
            key, sep, text = item.partition("=")
            key = key.strip()
            if not sep or key == "launch":
                return None
            if key.startswith("launch."):
                launch[key[len("launch."):]] = yaml.load(text, Loader=loader)
    except (OSError, yaml.YAMLError, AttributeError, TypeError, ValueError):
        return None
    threads = launch.get("threads_per_rank")
    device = launch.get("device", "auto")
    if launch.get("launcher") != "warm" or type(threads) is not int or threads < 1:
        return None
    if device not in ("cpu", "auto") or (device == "auto" and not no_gpu_possible()):
        return None
    if os.environ.get("SLURM_JOB_NODELIST"):   # host lists, srun: the ordinary path decides
        return None
    return threads


def run_in_warm_server(options: dict, launched_unix: float) -> int | None:
    """The exit code of `codist run` (its parsed `options`) run by the warm server, or None to run
    it here instead."""
    threads = warm_threads(options["config"], options["overrides"])
    if threads is None:
        return None
    from .warm_client import WarmRun
    request = {"run": options, "env": dict(os.environ), "config": str(Path(options["config"]).resolve()),
               "launched_unix": launched_unix, "pid": os.getpid()}
    try:
        proc = WarmRun(request, rank_env(os.environ, threads, "cpu"))
    except (RuntimeError, OSError):
        return None   # the ordinary path tries the server again and says what failed

    with forwarding_stop_signals(lambda signum, frame: proc.send_signal(signum)):
        code = proc.wait()
    return None if code == RETRY_COLD else code


def run_for_client(request: dict, supervised: Supervised) -> int:
    """In the warm server's supervisor: the client's `codist run`, with the server's imports."""
    from .launch import run_command
    return run_command(request["run"], request["launched_unix"], supervised)


if __name__ == "__main__":
    from . import fork_launcher, warm_server
    fork_launcher.exit_now(warm_server.main(run_command=run_for_client))
