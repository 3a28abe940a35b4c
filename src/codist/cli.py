"""The `codist` command: `codist run CONFIG [--set k=v ...] --out DIR`, `codist check CONFIG
[--set k=v ...]`, `codist data ...` (codist.datacheck; `data fake`: codist.fake_data),
`codist --version`; the exit codes in `--help`."""
from __future__ import annotations

import argparse
import sys

from .exits import EXIT_BAD_INPUT, EXIT_CODES


class _Version(argparse.Action):
    """--version from the installed package's metadata, looked up only when asked."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, help="print codist's version and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        from importlib.metadata import PackageNotFoundError, version
        try:
            print(f"codist {version('codist')}")
        except PackageNotFoundError:
            parser.exit(1, "codist: no package metadata: codist is not installed (pip install -e .)\n")
        parser.exit()


def parser() -> argparse.ArgumentParser:
    import textwrap
    codes = "\n".join(textwrap.fill(meaning, 79, initial_indent=f"  {code:<6} ", subsequent_indent=" " * 9)
                      for code, meaning in EXIT_CODES)
    p = argparse.ArgumentParser(prog="codist", description="codist: distributed training with distillation",
                                epilog=f"exit codes:\n{codes}", formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action=_Version)
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
    # listed here for --help; main() hands `codist data ...` to codist.datacheck's own parser
    sub.add_parser("data", help="the real data sets' folders: codist data check WORKLOAD DATA_DIR; "
                   "codist data prepare --config RUN.yaml builds a run's data cache (LM text) before it; "
                   "codist data fake --root DIR writes miniatures in the real formats (codist data --help)",
                   add_help=False)
    return p


def main(argv=None) -> int:
    from .owner import process_start_unix
    launched_unix = process_start_unix()   # the ranks' setup_s counts from this process's start
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:2] == ["data", "fake"]:   # `codist data fake --root DIR`: its own parser (codist.fake_data)
        from .fake_data import main as fake_main
        return fake_main(argv[2:])
    if argv[:1] == ["data"]:   # `codist data check WORKLOAD DIR`: its own parser (codist.datacheck)
        from .datacheck import main as data_main
        return data_main(argv[1:])
    args = parser().parse_args(argv)
    from .config import ConfigError, check_path_text, load, never_fires
    from .data_root import with_data_root
    from .launching.inputs import check_inputs
    from .launching.launch import check_fits, resolve_device, run
    try:
        # the data root made absolute here, so ranks started elsewhere read the same folder
        cfg = with_data_root(load(args.config, args.overrides), args.data_root)
        if note := never_fires(cfg):
            print(f"codist: {note}", file=sys.stderr)
        if args.command == "run":
            if args.out:   # written into the manifest and every rank's files
                check_path_text("--out", args.out)
            return run(cfg, args.out or f"runs/{cfg.run_id()}", launched_unix, args.fresh)
        check_inputs(cfg)   # `codist check`: a missing data folder fails here, not on every rank after launch
    except ConfigError as e:
        print(f"codist: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    import yaml   # `codist check`: the config only; whether it fits this machine is a note

    from .config import to_dict
    print(yaml.safe_dump(to_dict(cfg), sort_keys=False), end="")
    try:
        check_fits(cfg, resolve_device(cfg))
        fits = "yes"
    except ConfigError as e:
        fits = f"no: {e}"
    print(f"# run id: {cfg.run_id()}  world size: {cfg.parallel.world_size}  valid\n"
          f"# fits this machine: {fits}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
