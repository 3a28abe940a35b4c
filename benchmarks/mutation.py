"""Mutation score of the modules that decide published numbers (`make mutation`; outside CI).

Each module of benchmarks/mutation_targets.py is mutated by cosmic-ray (one mutant at a time,
written into the file on disk, so the ranks and servers the tests start import the mutant too),
and the test files that cover it run against each mutant with a per-mutant timeout (4x the
unmutated run plus 30 s). All of it happens in a private copy of the checkout (a git clone at HEAD,
with its history, by default; the working tree's files over it with --worktree), never in the
checkout itself, which others may be using: the copy's src/ and analysis/ come first on
PYTHONPATH, so nothing imports the checkout's code.

Writes results/bench/mutation.csv (one row per mutant: module, line, operator, the changed line,
status killed / timeout / survived / equivalent / incompetent, and a reason for survivors and
equivalents from benchmarks/mutation_reasons.py) and results/bench/mutation_summary.csv (per
module: counts and score = (killed + timeout) / (mutants - equivalent), the tests and the commit).
A run of some modules (--modules) replaces those modules' rows and keeps the others'.

cosmic-ray lives in its own environment (env/requirements-mutation.txt, installed by the make
target into .venv/cosmic-ray), the tests run with the project's .venv.
"""
from __future__ import annotations

import argparse
import ast
import csv
import datetime
import hashlib
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.mutation_reasons import REASONS  # noqa: E402
from benchmarks.mutation_targets import EXCLUDE_OPERATORS, PRELOAD, TARGETS  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIELDS = ["module", "line", "operator", "occurrence", "change", "status", "reason"]
SUMMARY_FIELDS = ["module", "mutants", "killed", "timeout", "survived", "equivalent", "incompetent", "score",
                  "tests", "baseline_s", "timeout_s", "wall_s", "loadavg", "commit", "module_sha256", "rerun", "date"]
# Run by cosmic-ray's own interpreter: every pending mutant in argv[2] ([operator, occurrence]
# pairs: those already killed) is marked skipped, so `exec` runs only the others (--survivors).
ONLY = """import json, sys
from cosmic_ray.work_db import WorkDB, use_db
from cosmic_ray.work_item import WorkerOutcome, WorkResult
done = {tuple(x) for x in json.loads(sys.argv[2])}
with use_db(sys.argv[1], WorkDB.Mode.open) as db:
    skip = [w.job_id for w in db.pending_work_items
            if (w.mutations[0].operator_name, w.mutations[0].occurrence) in done]
    db.set_multiple_results(skip, WorkResult(worker_outcome=WorkerOutcome.SKIPPED))
"""


def copy_checkout(dest: Path, worktree: bool) -> str:
    """The checkout's HEAD (or its working tree: tracked and untracked, not ignored) in `dest`/tree;
    returns what was copied (the commit, '+worktree' when the working tree).

    The copy is a git clone of the checkout at HEAD, so the tests that read the design history
    (tests/test_preregistration.py: every claim of the real papers, from git) read the same history
    there. It shares the checkout's objects read-only (`--shared`: git never writes into an
    alternate; the copy's own writes go to its own .git) and names no remote, so nothing a mutant
    does in the copy reaches the checkout's repository."""
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.strip()
    tree = dest / "tree"
    quiet = {"check": True, "capture_output": True}
    subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", str(ROOT), str(tree)], **quiet)
    subprocess.run(["git", "-C", str(tree), "remote", "remove", "origin"], **quiet)
    subprocess.run(["git", "-C", str(tree), "checkout", "-q", "--detach", commit], **quiet)
    if worktree:   # the working tree's files over HEAD's: changed, added, untracked; deleted ones removed
        deleted = set(subprocess.run(["git", "ls-files", "-d", "-z"], cwd=ROOT, **quiet).stdout.split(b"\0")) - {b""}
        files = [f for f in subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                                           **quiet).stdout.split(b"\0") if f and f not in deleted]
        subprocess.run(["tar", "--null", "-T", "-", "-cf", str(dest / "tree.tar")], cwd=ROOT,
                       input=b"\0".join(files), check=True)
        subprocess.run(["tar", "-xf", str(dest / "tree.tar"), "-C", str(tree)], check=True)
        (dest / "tree.tar").unlink()
        for f in deleted:
            (tree / os.fsdecode(f)).unlink(missing_ok=True)
    short = subprocess.run(["git", "rev-parse", "--short", commit], cwd=ROOT, **quiet, text=True).stdout.strip()
    return short + ("+worktree" if worktree else "")


def test_command(sock: Path, python: Path, spec: dict) -> list[str]:
    """cosmic-ray's test command: the fork server's client, running the module's test files."""
    marks = (["-m", spec["marks"]] if spec.get("marks") else []) + (["-k", spec["k"]] if spec.get("k") else [])
    return [str(python), str(ROOT / "benchmarks" / "mutation_server.py"), "client", str(sock), "--",
            "-x", "-q", "-p", "no:cacheprovider", *marks, *[f"tests/{t}" for t in spec["tests"]]]


def start_server(work: Path, tree: Path, python: Path) -> tuple[subprocess.Popen, Path]:
    """benchmarks/mutation_server.py serving pytest in `tree`, its imports done; the copy's src/, root
    (the analysis package) and analysis/ first on PYTHONPATH, before the editable install's finder
    that maps codist and analysis to the checkout (the tests' own subprocesses inherit it)."""
    env = {**os.environ, "PYTHONPATH": f"{tree / 'src'}:{tree}:{tree / 'analysis'}", "PYTHONDONTWRITEBYTECODE": "1",
           "PATH": f"{python.parent}:{os.environ['PATH']}"}
    sock = work / "pytest.sock"
    server = subprocess.Popen([str(python), str(ROOT / "benchmarks" / "mutation_server.py"), "serve", str(sock),
                               str(tree), str(work / "last-test.log"), str(ROOT), *PRELOAD], env=env,
                              stdout=subprocess.PIPE, text=True)
    if server.stdout.readline().strip() != "ready":
        raise SystemExit(f"benchmarks/mutation_server.py did not start (exit {server.wait()})")
    return server, sock


def line_ranges(path: Path, functions: list[str]) -> list[str]:
    """'first-last' line ranges of the named top-level functions of `path` (a module's decision code)."""
    found = {n.name: f"{n.lineno}-{n.end_lineno}" for n in ast.parse(path.read_text()).body
             if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    missing = [f for f in functions if f not in found]
    if missing:
        raise SystemExit(f"benchmarks/mutation_targets.py: {path.name} has no function {missing[0]}")
    return [found[f] for f in functions]


def toml_config(module: str, command: list[str], timeout: float, lines: list[str] | None) -> str:
    # cosmic-ray shlex-splits the test command: quoted, so a -m/-k expression with spaces stays one argument
    # (joined with plain spaces, '-m not slow' ran pytest on a path 'slow': exit 4, every mutant "killed")
    cmd = shlex.join(command).replace("\\", "\\\\").replace('"', '\\"')
    excl = ", ".join(f"'{e}'" for e in EXCLUDE_OPERATORS)
    only = (f'\n[cosmic-ray.filters.line-filter.lines]\n"{module}" = [{", ".join(repr(x) for x in lines)}]\n'
            if lines else "")
    return (f'[cosmic-ray]\nmodule-path = "{module}"\ntimeout = {timeout:.0f}\nexcluded-modules = []\n'
            f'test-command = "{cmd}"\n\n[cosmic-ray.distributor]\nname = "local"\n\n'
            f'[cosmic-ray.filters.operators-filter]\nexclude-operators = [{excl}]\n' + only)


def changed_lines(diff: str) -> tuple[str, str]:
    """(old line, new line) of a one-line mutant's unified diff, stripped; blank lines left out (a file's
    last line comes with a removed or added empty one when the mutant drops its final newline)."""
    old = [ln[1:].strip() for ln in diff.splitlines() if ln.startswith("-") and not ln.startswith("---")]
    new = [ln[1:].strip() for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    return " / ".join(x for x in old if x), " / ".join(x for x in new if x)


def reason_for(module: str, operator: str, old: str, new: str) -> tuple[str, str] | None:
    """(status, reason) a reviewer gave this mutant in mutation_reasons.REASONS, matched on the
    module, the operator and the changed line, stripped (not the line number, which moves with edits)."""
    old, new = old.strip(), new.strip()
    for r in REASONS:
        if r[0] == module and r[1] == operator.removeprefix("core/") and r[2].strip() == old and r[3].strip() == new:
            return r[4], r[5]
    return None


def rows_of(module: str, dump: str) -> list[dict]:
    rows = []
    for line in dump.splitlines():
        item, result = json.loads(line)
        if result is None or result["worker_outcome"] == "skipped":
            continue   # operators left out (EXCLUDE_OPERATORS)
        m = item["mutations"][0]
        old, new = changed_lines(result.get("diff") or "")
        if result["test_outcome"] == "killed":
            status = "timeout" if result.get("output") == "timeout" else "killed"
        elif result["test_outcome"] == "survived":
            status = "survived"
        else:
            status = "incompetent"
        reason = ""
        given = reason_for(module, m["operator_name"], old, new)
        if status == "survived" and given:
            status = "equivalent" if given[0] == "equivalent" else "survived"
            reason = given[1]
        elif status == "survived":
            reason = "not reviewed"
        rows.append({"module": module, "line": m["start_pos"][0], "operator": m["operator_name"].removeprefix("core/"),
                     "occurrence": m["occurrence"], "change": f"{old} -> {new}", "status": status, "reason": reason})
    return sorted(rows, key=lambda r: (int(r["line"]), r["operator"], int(r["occurrence"])))


def summarise(module: str, rows: list[dict], spec: dict, baseline: float, timeout: float, wall: float,
              commit: str) -> dict:
    count = {s: sum(r["status"] == s for r in rows) for s in ("killed", "timeout", "survived", "equivalent", "incompetent")}
    judged = len(rows) - count["equivalent"] - count["incompetent"]
    score = (count["killed"] + count["timeout"]) / judged if judged else float("nan")
    return {"module": module, "mutants": len(rows), **count, "score": f"{score:.3f}",
            "tests": " ".join(spec["tests"]) + "".join(f" -{o[0]} '{spec[o]}'" for o in ("marks", "k") if spec.get(o)),
            "baseline_s": f"{baseline:.1f}", "timeout_s": f"{timeout:.0f}", "wall_s": f"{wall:.0f}",
            # beside the timings: they set the per-mutant timeout and say what a run cost, nothing more
            "loadavg": f"{os.getloadavg()[0]:.2f}", "commit": commit, "date": datetime.date.today().isoformat()}


def merge_csv(path: Path, fields: list[str], new: list[dict], modules: set[str]) -> None:
    """Replace `modules`' rows of `path` by `new`, keep the other modules of TARGETS' rows, order by
    TARGETS. A row of a module no longer in TARGETS (a file that moved or left the targets) is dropped
    with a line saying so: its score measured a file that is not the one measured now."""
    old = list(csv.DictReader(path.open())) if path.exists() else []
    gone = sorted({r["module"] for r in old} - set(TARGETS) - set(modules))
    if gone:
        print(f"{path.name}: dropped the rows of {', '.join(gone)} (not in benchmarks/mutation_targets.py)", file=sys.stderr)
    rows = [r for r in old if r["module"] not in modules and r["module"] in TARGETS] + new
    order = {m: i for i, m in enumerate(TARGETS)}
    rows.sort(key=lambda r: (order.get(r["module"], len(order)), int(r.get("line") or 0), r.get("operator", "")))
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", newline="") as f:
        w = csv.DictWriter(f, fields)
        w.writeheader()
        w.writerows(rows)
    tmp.replace(path)


def previous(module: str, out: Path, source: str) -> list[dict] | None:
    """The module's rows of `out` when they were measured on the same mutation sites: the source at
    the recorded commit has the same lines as `source` wherever a row's mutant is (edits elsewhere,
    e.g. import lines, allowed)."""
    summary = out.with_name(out.stem + "_summary.csv")
    if not (out.exists() and summary.exists()):
        return None
    commits = [r["commit"] for r in csv.DictReader(summary.open()) if r["module"] == module]
    if not commits or commits[0].endswith("+worktree"):
        return None
    shown = subprocess.run(["git", "show", f"{commits[0]}:{module}"], cwd=ROOT, capture_output=True, text=True)
    if shown.returncode:
        return None
    rows = [r for r in csv.DictReader(out.open()) if r["module"] == module]
    old, new = shown.stdout.splitlines(), source.splitlines()
    same = len(old) == len(new) and all(old[int(r["line"]) - 1] == new[int(r["line"]) - 1] for r in rows)
    return rows if rows and same else None


def measure(module: str, spec: dict, work: Path, tree: Path, sock: Path, args, commit: str):
    """(rows, summary) of one module, or None when its unmutated tests fail. With --survivors, the
    mutants the last run of the same source killed are not run again (tests are only ever added
    between such runs, so a killed mutant stays killed): its survivors and the mutants it did not
    reach (a partial run) run."""
    sha = hashlib.sha256((tree / module).read_bytes()).hexdigest()
    before = previous(module, args.out, (tree / module).read_text()) if args.survivors else None
    if args.survivors and before is None:
        print(f"{module}: no earlier run of these mutation sites in {args.out}: every mutant runs")
    command = test_command(sock, args.python, spec)
    t0 = time.monotonic()
    base = subprocess.run(command, cwd=tree)
    baseline = time.monotonic() - t0
    if base.returncode != 0:
        log = (work / "last-test.log").read_text()[-3000:]
        print(f"{module}: the unmutated tests fail (exit {base.returncode}), not measured:\n{log}")
        return None
    timeout = 4 * baseline + 30
    name = module.replace("/", "_").removesuffix(".py")
    cfg, session = work / f"{name}.toml", work / f"{name}.sqlite"
    lines = line_ranges(tree / module, spec["functions"]) if spec.get("functions") else None
    cfg.write_text(toml_config(module, command, timeout, lines))
    cr = args.cosmic_ray
    quiet = {"cwd": tree, "check": True, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    subprocess.run([str(cr / "cosmic-ray"), "init", str(cfg), str(session)], **quiet)
    subprocess.run([str(cr / "cr-filter-operators"), str(session), str(cfg)], **quiet)
    if lines:
        subprocess.run([str(cr / "cr-filter-lines"), "--config", str(cfg), str(session)], **quiet)
    planned = None
    if before is not None:
        listed = subprocess.run([str(cr / "cosmic-ray"), "dump", str(session)], cwd=tree, check=True,
                                capture_output=True, text=True).stdout
        planned = sum(1 for line in listed.splitlines() if (json.loads(line)[1] or {}).get("worker_outcome") != "skipped")
        done = [[f"core/{r['operator']}", int(r["occurrence"])] for r in before
                if r["status"] not in ("survived", "equivalent")]
        subprocess.run([str(cr / "python"), "-c", ONLY, str(session), json.dumps(done)], **quiet)
    print(f"{module}: baseline {baseline:.1f} s, timeout {timeout:.0f} s, tests {' '.join(spec['tests'])}"
          + (f", functions {' '.join(spec['functions'])}" if lines else ""), flush=True)
    subprocess.run([str(cr / "cosmic-ray"), "exec", str(cfg), str(session)], **quiet)
    dump = subprocess.run([str(cr / "cosmic-ray"), "dump", str(session)], cwd=tree, check=True,
                          capture_output=True, text=True).stdout
    rows = rows_of(module, dump)
    if before is not None:
        rerun = {(r["operator"], int(r["occurrence"])) for r in rows}
        rows = rows + [{k: r[k] for k in FIELDS} for r in before if (r["operator"], int(r["occurrence"])) not in rerun]
        rows.sort(key=lambda r: (int(r["line"]), r["operator"], int(r["occurrence"])))
    summary = summarise(module, rows, spec, baseline, timeout, time.monotonic() - t0, commit)
    summary.update(module_sha256=sha, rerun="all" if before is None else (
        "survivors of the earlier run" if len(before) >= planned
        else f"survivors and the {planned - len(before)} unreached mutants of an earlier partial run") + (
        "" if len(rows) >= planned else f": {len(rows)} of {planned} measured"))
    return rows, summary


def harvest(work: Path, commit: str, out: Path, survivors: bool = False) -> None:
    """Rows of the mutants an interrupted run (its work folder) has measured so far, per module; the
    summary's `rerun` says 'partial: k of n' (the others not measured). `survivors`: the run was a
    --survivors run, so the earlier rows it skipped (killed before) are kept beside its own."""
    summary_path = out.with_name(out.stem + "_summary.csv")
    for cfg in sorted(work.glob("*.toml")):
        module = re.search(r'module-path = "([^"]+)"', cfg.read_text()).group(1)
        timeout = float(re.search(r"timeout = ([0-9.]+)", cfg.read_text()).group(1))
        dump = subprocess.run(["cosmic-ray",
                               "dump", str(cfg.with_suffix(".sqlite"))], check=True, capture_output=True, text=True).stdout
        planned = sum(1 for line in dump.splitlines()
                      if (json.loads(line)[1] or {}).get("worker_outcome") != "skipped")
        rows = rows_of(module, dump)
        measured = len(rows)
        source = subprocess.run(["git", "show", f"{commit}:{module}"], cwd=ROOT, check=True, capture_output=True).stdout
        before = previous(module, out, source.decode()) if survivors else None
        if survivors and before is None:
            raise SystemExit(f"{module}: no earlier rows of these mutation sites in {out} to keep beside the rerun's")
        if before is not None:
            rerun = {(r["operator"], int(r["occurrence"])) for r in rows}
            rows = sorted(rows + [{k: r[k] for k in FIELDS} for r in before
                                  if (r["operator"], int(r["occurrence"])) not in rerun],
                          key=lambda r: (int(r["line"]), r["operator"], int(r["occurrence"])))
        summary = summarise(module, rows, TARGETS[module], math.nan, timeout, math.nan, commit)
        command = re.search(r'test-command = "(.*)"', cfg.read_text()).group(1)
        summary["tests"] = command.split("no:cacheprovider ", 1)[1].replace("tests/", "").replace('\\"', '"')
        summary.update(module_sha256=hashlib.sha256(source).hexdigest(),
                       rerun=("survivors and unreached mutants of the earlier run: " if before is not None else "")
                       + ("all" if measured == planned else f"partial: {measured} of {planned}"))
        merge_csv(out, FIELDS, rows, {module})
        merge_csv(summary_path, SUMMARY_FIELDS, [summary], {module})
        print(f"{module}: {measured} of {planned} mutants measured ({len(rows)} rows), score {summary['score']}")


def review(out: Path) -> None:
    """Apply mutation_reasons.REASONS to the survivors and equivalents already in `out` (after a
    reviewer adds reasons; nothing reruns) and recount each module's summary."""
    rows = list(csv.DictReader(out.open()))
    for r in rows:
        if r["status"] in ("survived", "equivalent"):
            old, new = r["change"].split(" -> ", 1) if " -> " in r["change"] else (r["change"], "")
            given = next((g for g in (reason_for(r["module"], "core/" + r["operator"], o, n)
                                      for o, n in [(old, new)] + [(r["change"][:i], r["change"][i + 4:])
                                                                  for i in range(len(r["change"]))
                                                                  if r["change"].startswith(" -> ", i)]) if g), None)
            r["status"], r["reason"] = (("equivalent" if given[0] == "equivalent" else "survived"), given[1]) \
                if given else ("survived", "not reviewed")
    merge_csv(out, FIELDS, rows, {r["module"] for r in rows})
    summary_path = out.with_name(out.stem + "_summary.csv")
    summaries = list(csv.DictReader(summary_path.open()))
    for s in summaries:
        mine = [r for r in rows if r["module"] == s["module"]]
        count = {k: sum(r["status"] == k for r in mine) for k in ("killed", "timeout", "survived", "equivalent", "incompetent")}
        judged = len(mine) - count["equivalent"] - count["incompetent"]
        s.update({k: str(v) for k, v in count.items()}, mutants=str(len(mine)),
                 score=f"{(count['killed'] + count['timeout']) / judged:.3f}" if judged else "nan")
    merge_csv(summary_path, SUMMARY_FIELDS, summaries, {s["module"] for s in summaries})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modules", nargs="*", default=list(TARGETS), help="modules of mutation_targets.TARGETS")
    ap.add_argument("--worktree", action="store_true", help="mutate a copy of the working tree, not of HEAD")
    ap.add_argument("--python", type=Path, default=ROOT / ".venv" / "bin" / "python", help="the tests' interpreter")
    ap.add_argument("--cosmic-ray", type=Path, default=ROOT / ".venv" / "cosmic-ray" / "bin",
                    help="folder of the cosmic-ray executables")
    ap.add_argument("--survivors", action="store_true",
                    help="skip the mutants the last run of the same source killed: run its survivors (after adding "
                         "tests) and those it did not reach")
    ap.add_argument("--review", action="store_true", help="apply mutation_reasons.py to the rows of --out, rerun nothing")
    ap.add_argument("--harvest", type=Path, help="the work folder of an interrupted run: write what it measured "
                                                 "(with --survivors: of an interrupted --survivors run)")
    ap.add_argument("--commit", help="with --harvest: the commit that run copied")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "bench" / "mutation.csv")
    args = ap.parse_args(argv)
    args.cosmic_ray, args.out = args.cosmic_ray.resolve(), args.out.resolve()   # cosmic-ray runs in the copy
    unknown = [m for m in args.modules if m not in TARGETS]
    if unknown:
        ap.error(f"benchmarks/mutation_targets.py has no module {unknown[0]} (known: {', '.join(TARGETS)})")
    if args.review:
        review(args.out)
        return 0
    if args.harvest:
        os.environ["PATH"] = f"{args.cosmic_ray}:{os.environ['PATH']}"
        harvest(args.harvest, args.commit, args.out, args.survivors)
        return 0
    summary_path = args.out.with_name(args.out.stem + "_summary.csv")
    work = Path(tempfile.mkdtemp(prefix="codist-mutation-"))
    stop = []
    try:
        commit = copy_checkout(work, args.worktree)
        tree = work / "tree"
        server, sock = start_server(work, tree, args.python)
        stop.append(server)
        for module in args.modules:
            done = measure(module, TARGETS[module], work, tree, sock, args, commit)
            if done is None:
                continue
            rows, summary = done
            merge_csv(args.out, FIELDS, rows, {module})
            merge_csv(summary_path, SUMMARY_FIELDS, [summary], {module})
            print(f"{module}: {summary['mutants']} mutants, {summary['killed']} killed, {summary['timeout']} timeout, "
                  f"{summary['survived']} survived, {summary['equivalent']} equivalent: score {summary['score']}",
                  flush=True)
    finally:
        for server in stop:
            server.kill()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
