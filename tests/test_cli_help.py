"""`codist --help` lists every subcommand and the exit codes, the same table as docs/usage.md's
"Exit codes" and the same numbers as the code returns; `codist --version` is the installed package's.
Run as a user would: the installed `codist` entry point, in a subprocess."""
from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from codist.rank import train
from codist import exits
from codist.launching.launchers import Launcher
from codist.cli import EXIT_CODES

ROOT = Path(__file__).resolve().parents[1]
CODIST = [sys.executable, "-m", "codist"]


def codist(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(CODIST + list(args), capture_output=True, text=True, timeout=60, cwd=ROOT)


def test_help_lists_every_subcommand_and_every_exit_code():
    done = codist("--help")
    assert done.returncode == 0, done.stderr
    listed = re.search(r"^\s+\{([a-z,]+)\}$", done.stdout, re.M)
    assert listed and listed.group(1).split(",") == ["run", "check", "data"], done.stdout
    for name in ("run", "check", "data"):
        assert re.search(rf"^\s+{name}\s+\S", done.stdout, re.M), f"{name} has no help line:\n{done.stdout}"
    assert "--version" in done.stdout
    codes = re.findall(r"^  (\d+|128\+N)\s{2,}\S", done.stdout.split("exit codes:", 1)[1], re.M)
    assert codes == ["0", "1", "2", "3", "4", "128+N"], done.stdout


def test_every_listed_subcommand_has_its_own_help():
    for name in ("run", "check", "data"):
        done = codist(name, "--help")
        assert done.returncode == 0 and done.stdout.startswith(f"usage: codist {name}"), (name, done.stderr)


def test_the_exit_codes_are_the_codes_the_code_returns():
    assert exits.EXIT_PREEMPTED == train.EXIT_PREEMPTED == 3
    assert exits.EXIT_DIVERGED == train.EXIT_DIVERGED == 4
    assert train.EXIT_CONFIG == 2
    assert Launcher.exit_code.__doc__ and "128 + N" in Launcher.exit_code.__doc__
    bad = codist("check", str(ROOT / "no-such-config.yaml"))
    assert bad.returncode == 2 and bad.stderr.startswith("codist: "), bad.stderr   # bad input: 2


def test_the_usage_docs_table_is_the_help_table():
    usage = (ROOT / "docs" / "usage.md").read_text()
    section = usage.split("\n## Exit codes\n", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| `?([0-9+N]+)`? \| (.+) \|$", section, re.M)
    assert rows == [(code, meaning) for code, meaning in EXIT_CODES]


def test_version_is_the_package_metadata():
    done = codist("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"codist {metadata.version('codist')}\n"
