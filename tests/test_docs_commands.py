"""The docs stay true (issue 39): in README.md and docs/*.md, every shell command of a code block
(```bash, sh, shell or console) that starts with `codist`, `make` or `snakemake` parses, every repository path an inline `code`
span names exists, and every relative link (and its #anchor) resolves.

- `codist ...`: the documented arguments go through codist's own argparse parsers (`codist.cli.main`
  with `parse_args` stopped right after parsing, so nothing runs); a bad option or a missing
  argument is argparse's exit 2 and its message.
- `make ...`: `make -n` with `BIN` pointing at stubs, because make runs a recipe line that calls
  $(MAKE) even under -n (`replicate-sequential`'s), and such a line must run nothing real.
- `snakemake ...`: `snakemake -n` with `results=<tmp>` added to its --config and its `results/...`
  targets moved under that tmp, so the dry run plans the documented targets without touching the
  committed results; `--report` is dropped (it reads finished runs, a dry run has none).
- Paths: a code span like `src/codist/config.py` (or a word of one, in `python benchmarks/x.py`)
  is checked when its first part is one of the repository's top-level entries (so `results-local/...`, a data root's `train/` or a run's
  `logs/` are not); `*` globs must match something; spans with `<...>`, `{...}` or `$` are templates.
  "Exists" means tracked by git or untracked and not ignored, i.e. what a clone has once committed;
  the few outputs the docs name that no commit holds are listed in OUTPUTS with what writes them.
"""
from __future__ import annotations

import argparse
import contextlib
import fnmatch
import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TOOLS = ("codist", "make", "snakemake")
FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```", re.M | re.S)
SHELL_LANGS = {"bash", "sh", "shell", "console"}
# Paths the docs name that a command writes and no commit holds: path -> what writes it.
OUTPUTS = {
    "results/rehearsal/data": "make rehearse (codist data fake --root), git-ignored",
    "results/rehearsal/full/runs.local.csv": "a local make rehearse's ledger (rehearsal.py run/ledger), git-ignored",
    "results/bench/codist_check_cuda.csv": "make gpu-check on a GPU machine (none has run yet)",
    "results/bench/gpu_throughput.csv": "make gpu-check on a GPU machine (none has run yet)",
}


# ---------------------------------------------------------------- reading the docs

def code_blocks(text: str) -> list[str]:
    """The bodies of the fenced blocks tagged as shell (bash, sh, shell, console); an untagged block is
    a file layout or a diagram."""
    return [m.group(2) for m in FENCE.finditer(text) if m.group(1).lower() in SHELL_LANGS]


def prose(text: str) -> str:
    """`text` without its fenced blocks."""
    return FENCE.sub("", text)


def commands(text: str) -> list[list[str]]:
    """Every `codist` / `make` / `snakemake` command of the shell blocks, as argv (comments, leading
    VAR=value words and a `.venv/bin/` prefix dropped; `a && b` and `a; b` are two commands)."""
    found = []
    for block in code_blocks(text):
        for line in block.replace("\\\n", " ").splitlines():
            try:
                lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
                lexer.whitespace_split, lexer.commenters = True, "#"
                words = list(lexer)
            except ValueError:   # an unbalanced quote: not a shell line
                continue
            command: list[str] = []
            for word in [*words, ";"]:
                if word and set(word) <= set(";&|"):
                    while command and re.fullmatch(r"[A-Za-z_]\w*=.*", command[0]):
                        command = command[1:]
                    if command and command[0].removeprefix(".venv/bin/") in TOOLS:
                        found.append([command[0].removeprefix(".venv/bin/"), *command[1:]])
                    command = []
                else:
                    command.append(word)
    return found


def span_paths(text: str) -> list[str]:
    """The inline `code` spans of the prose that name a path inside the repository."""
    tops = {p.split("/", 1)[0] for p in repo_files()}
    out = []
    for span in re.findall(r"`([^`\n]+)`", prose(text)):
        for word in span.split():   # a span may be a command: `python benchmarks/startup.py --repeats 5`
            if "/" not in word or re.search(r"[<>{}$=~\"']", word) or word.startswith(("/", "http")):
                continue
            path = word.rstrip("/.,;:)")
            if path.split("/", 1)[0] in tops:
                out.append(path)
    return out


def links(text: str) -> list[str]:
    """The relative link targets of the prose: `[text](target)`, not http(s) or mailto."""
    return [t for t in re.findall(r"\]\(([^)\s]+)\)", prose(text))
            if not re.match(r"[a-z]+:", t)]


# ---------------------------------------------------------------- what exists

_FILES: set[str] | None = None


def repo_files() -> set[str]:
    """Tracked files, and untracked ones git does not ignore: what a clone holds once committed."""
    global _FILES
    if _FILES is None:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                             cwd=ROOT, capture_output=True, text=True, check=True).stdout
        _FILES = {f for f in out.splitlines() if (ROOT / f).exists()}
    return _FILES


def exists(path: str) -> bool:
    """`path` (relative to the repository root) is a file or folder of the repository; a glob matches one."""
    path = os.path.normpath(path)
    if path in OUTPUTS:
        return True
    files = repo_files()
    if any(c in path for c in "*?["):
        return any(fnmatch.fnmatch(f, path) or fnmatch.fnmatch(f, path + "/*") for f in files)
    return path in files or any(f.startswith(path + "/") for f in files)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but - and _ dropped, spaces to -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(md: Path) -> set[str]:
    found, seen = set(), {}
    for heading in re.findall(r"^#{1,6} (.+)$", prose(md.read_text()), re.M):
        s = slug(heading)
        found.add(s if s not in seen else f"{s}-{seen[s]}")
        seen[s] = seen.get(s, 0) + 1
    return found | set(re.findall(r'<a id="([^"]+)"', md.read_text()))


# ---------------------------------------------------------------- the checks

class _Parsed(Exception):
    """Raised right after a parser accepted the arguments: nothing of the command runs."""


def codist_problem(argv: list[str]) -> str | None:
    from codist import cli
    real = argparse.ArgumentParser.parse_args

    def parse_then_stop(self, args=None, namespace=None):
        real(self, args, namespace)
        raise _Parsed

    out, err = io.StringIO(), io.StringIO()
    with mock.patch.object(argparse.ArgumentParser, "parse_args", parse_then_stop), \
            contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            cli.main(argv)
        except _Parsed:
            return None
        except SystemExit as e:   # --help, --version: 0; argparse's errors: 2
            return None if e.code in (0, None) else f"exit {e.code}: {err.getvalue().strip()}"
    return "the command parsed no arguments"


def make_problem(argv: list[str], stubs: Path) -> str | None:
    """`make -n` succeeds and each goal is a rule of the Makefile (`make -p`'s database), not just a
    file or folder that happens to exist (`make tests` would otherwise pass: tests/ is a folder)."""
    done = subprocess.run(["make", "-n", "-p", f"BIN={stubs}", *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    if done.returncode != 0:
        return f"make -n: exit {done.returncode}: {done.stderr.strip()[-600:]}"
    rules = set(re.findall(r"^(?<!# Not a target:\n)([^#\s:][^:=\n]*):(?!=)", done.stdout, re.M))
    goals = [a for a in argv if not a.startswith("-") and "=" not in a]
    unknown = [g for g in goals if g not in rules]
    return f"make: no rule for {', '.join(unknown)} in the Makefile" if unknown else None


def snakemake_argv(argv: list[str], results: Path) -> list[str]:
    """`argv` as a dry run into `results`: results=<tmp> in --config, results/ targets under it."""
    out, skip = [], False
    for i, word in enumerate(argv):
        if skip:
            skip = False
        elif word == "--report":
            skip = True
        elif word.startswith("--report="):
            pass
        elif word.startswith("results="):
            pass
        elif word.startswith("results/"):
            out.append(str(results / word.removeprefix("results/")))
        else:
            out.append(word)
    if "--config" in out:
        out.insert(out.index("--config") + 1, f"results={results}")
    else:
        out += ["--config", f"results={results}"]
    return [*out, "-n", "--nolock"]


def snakemake_problem(argv: list[str], results: Path) -> str | None:
    exe = Path(sys.executable).with_name("snakemake")
    env = {**os.environ, "PATH": f"{exe.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run([str(exe), *snakemake_argv(argv, results)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env=env)
    out = done.stdout + done.stderr
    return None if done.returncode == 0 else f"snakemake -n: exit {done.returncode}: {out.strip()[-800:]}"


@pytest.fixture(scope="module")
def stubs(tmp_path_factory) -> Path:
    """A BIN for `make -n`: every tool a recipe names through $(BIN) exits 0 and does nothing."""
    folder = tmp_path_factory.mktemp("bin")
    for tool in ("python", "pip", "snakemake", "codist", "jupyter"):
        (folder / tool).write_text("#!/bin/sh\nexit 0\n")
        (folder / tool).chmod(0o755)
    return folder


def problems(text: str, stubs: Path, results: Path) -> list[str]:
    """Every command of `text` that does not parse, as 'command: why'."""
    out, seen = [], set()
    for argv in commands(text):
        if tuple(argv) in seen:
            continue
        seen.add(tuple(argv))
        tool, args = argv[0], argv[1:]
        why = (codist_problem(args) if tool == "codist" else make_problem(args, stubs) if tool == "make"
               else snakemake_problem(args, results))
        if why:
            out.append(f"{shlex.join(argv)}: {why}")
    return out


def missing(md: Path, text: str) -> list[str]:
    """The paths and link targets of `text` (as written in `md`) that do not exist."""
    out = [f"`{p}`" for p in span_paths(text) if not exists(p)]
    for target in links(text):
        file, _, anchor = target.partition("#")
        path = (md.parent / file).resolve() if file else md.resolve()
        rel = os.path.relpath(path, ROOT)
        if file and not exists(rel):
            out.append(f"({target}): no {rel}")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            out.append(f"({target}): no heading or anchor '{anchor}' in {rel}")
    return out


# ---------------------------------------------------------------- the tests

@pytest.mark.parametrize("md", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_documented_command_parses(md, stubs, tmp_path):
    bad = problems(md.read_text(), stubs, tmp_path / "results")
    assert not bad, f"{md.relative_to(ROOT)}: commands that do not parse:\n" + "\n".join(bad)


@pytest.mark.parametrize("md", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_named_path_and_link_exists(md):
    bad = missing(md, md.read_text())
    assert not bad, f"{md.relative_to(ROOT)}: named but not in the repository:\n" + "\n".join(bad)


def test_the_docs_hold_commands_of_each_tool_and_paths():
    """The readers above find what they are meant to (else the tests above pass on nothing)."""
    text = "\n".join(md.read_text() for md in DOCS)
    assert {argv[0] for argv in commands(text)} == set(TOOLS)
    assert len(span_paths(text)) > 100 and len(links(text)) > 20


def test_a_bad_command_a_missing_path_and_a_broken_link_are_reported(stubs, tmp_path):
    """Each check fails on what it guards: a misspelt option, an unknown make target, a figure no rule
    makes, a renamed file (benchmarks/loop_overhead.py named with an s), a missing link and anchor."""
    doc = """Run `benchmarks/loop_overheads.py` (see [usage](docs/usage.md#no-such-heading), [gone](docs/gone.md)).

```bash
codist run my.yaml --outt runs/x            # misspelt --out
codist check --set train.steps=2             # its CONFIG missing
make no-such-target
snakemake -c2 results/embedded/anil2018/no_such_figure.png
codist run my.yaml --out runs/x && make test   # both fine
```
"""
    bad = problems(doc, stubs, tmp_path / "results")
    assert [b.split(":", 1)[0] for b in bad] == [
        "codist run my.yaml --outt runs/x", "codist check --set train.steps=2", "make no-such-target",
        "snakemake -c2 results/embedded/anil2018/no_such_figure.png"], bad
    assert "unrecognized arguments: --outt" in bad[0] and "No rule to make target" in bad[2], bad
    assert missing(ROOT / "README.md", doc) == [
        "`benchmarks/loop_overheads.py`", "(docs/usage.md#no-such-heading): no heading or anchor "
        "'no-such-heading' in docs/usage.md", "(docs/gone.md): no docs/gone.md"]
    assert missing(ROOT / "README.md", doc.replace("overheads", "overhead").replace("(docs/gone.md)", "")
                   .replace("#no-such-heading", "#exit-codes")) == []
