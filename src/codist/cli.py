"""`codist run CONFIG [--set k=v ...] --out DIR`, `codist check CONFIG [--set k=v ...]`, `codist data check ...`."""
from __future__ import annotations

import argparse
import sys


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="codist", description="codist: distributed training with distillation "
                                "(also: codist data check WORKLOAD DATA_DIR)")
    sub = p.add_subparsers(dest="command", required=True)
    for name, help_ in (("run", "launch every rank of one run and wait"), ("check", "validate a config only")):
        s = sub.add_parser(name, help=help_)
        s.add_argument("config", help="run config (YAML)")
        s.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                       help="override a config key, e.g. --set train.steps=200 (repeatable)")
        s.add_argument("--data-root", metavar="DIR", help="the folder a relative workload.data_dir is joined to "
                       "(sets launch.data_root; default: the config's, else $CODIST_DATA_ROOT); not part of the run id")
        if name == "run":
            s.add_argument("--out", default=None, help="run directory (default: runs/<run-id>)")
            s.add_argument("--fresh", action="store_true",
                           help="train from step 0 even if --out holds this run finished or part-done, "
                                "removing what it holds (another run's files too)")
    return p


def main(argv=None, launched_unix: float | None = None) -> int:
    """`launched_unix`: when `codist run` started (default: this process's start; a warm server's
    supervisor passes its client's)."""
    from .owner import process_start_unix
    launched_unix = launched_unix or process_start_unix()
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["data"]:   # `codist data check WORKLOAD DIR`: its own parser (codist.datacheck)
        from .datacheck import main as data_main
        return data_main(argv[1:])
    args = parser().parse_args(argv)
    if args.command == "run":   # a warm run: all of it in the warm server, which has the imports below
        from .warm_cli import run_in_warm_server
        code = run_in_warm_server(args, argv, launched_unix)
        if code is not None:
            return code
    import yaml

    from . import config as config_mod
    from .config import ConfigError
    from .data_root import with_data_root
    try:
        # made absolute here, so ranks started elsewhere read the same folder
        cfg = with_data_root(config_mod.load(args.config, args.overrides), args.data_root)
        if args.command == "check":   # the config only; whether it fits this machine is a note
            from .inputs import check_inputs
            from .launch import check_fits, resolve_device
            check_inputs(cfg)   # a missing data folder fails here, not on every rank after launch
            print(yaml.safe_dump(config_mod.to_dict(cfg), sort_keys=False), end="")
            try:
                check_fits(cfg, resolve_device(cfg))
                fits = "yes"
            except ConfigError as e:
                fits = f"no: {e}"
            print(f"# run id: {cfg.run_id()}  world size: {cfg.parallel.world_size}  valid\n"
                  f"# fits this machine: {fits}")
            return 0
        from .launch import run
        return run(cfg, args.out or f"runs/{cfg.run_id()}", launched_unix=launched_unix, fresh=args.fresh)
    except ConfigError as e:
        print(f"codist: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
