"""A finished run's results kept in git, so a tier that outlasts one machine resumes on the next.

`make replicate LEDGER=keep` (`--config ledger=keep`): each train job whose run is in the ledger
restores it instead of training, and each run that finishes is copied there;
`LEDGER=commit` also commits each copy as it lands, one commit a run (only its files:
`git commit -- <paths>`, so nothing else staged goes with it). The ledger is
<results>/<scale>/ledger/<run id>/ (or `--config ledger_dir=...`: the checkout a long run
commits into, when it runs from a worktree of a fixed commit).

What is kept is what the analysis reads of a run: summary.json, metrics.jsonl, manifest.json,
config.yaml (the resolved config it ran with) and val_predictions_*.npy; never its checkpoint,
models, logs or TensorBoard files. A run whose models another run reads (a two-phase teacher)
is therefore not kept: restored, it would have no models to give.

Both directions are checked with the analysis's own reader (analysis.aggregate.read_run): the
summary is this run id's (the config's digest) and metrics.jsonl is the one it finished with.
A ledger entry that fails is not restored: the job says why in its log and trains.

Default off: a replication retrains every run, and `make verify` compares those new runs with
the committed tables; a restored run is the earlier machine's run (its manifest names that CPU
and commit), not a rerun. A restored run's folder also holds restored_from_ledger.json (the metrics' digest),
so workflows/compare.py counts such runs and says so. Why not Snakemake's between-workflow cache (`cache: true`): it keys
outputs by a hash of the rule's code and params in a folder outside the repository
($SNAKEMAKE_OUTPUT_CACHE), so nothing reaches git and a fresh clone elsewhere finds nothing.
"""
from __future__ import annotations

import argparse
import fcntl
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from analysis.aggregate import read_run
from codist.config import ConfigError
from codist.launching.rundir import RunDir
from codist.runlog import atomic_write_json, metrics_record

KEPT = ("summary.json", "metrics.jsonl", "manifest.json", "config.yaml")
KEPT_GLOBS = ("val_predictions_*.npy",)
# written beside a restored run: its metrics' digest, so a later retrain in the same folder (other bytes)
# is never counted as restored (workflows/compare.py says how many runs of a replication were restored)
RESTORED = "restored_from_ledger.json"
COMMIT_LOCK = ".commit.lock"   # in the ledger folder: one ledger commit at a time
GIT_WAIT_S = 120   # how long a commit waits for another git process's index.lock


class LedgerError(RuntimeError):
    """One line: what is wrong with which file."""


def kept_files(run_dir: Path) -> list[Path]:
    files = [run_dir / n for n in KEPT]
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise LedgerError(f"{run_dir}: no {', '.join(missing)}; a finished run has them all")
    return files + sorted(p for g in KEPT_GLOBS for p in run_dir.glob(g))


def checked(run_dir: Path, run_id: str) -> list[Path]:
    """The files to keep of run `run_id` in `run_dir`, after the analysis's check of them."""
    try:
        read_run(run_dir, run_id)
        manifest = json.loads((run_dir / "manifest.json").read_text())
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise LedgerError(f"{run_dir}: not finished run {run_id}'s results ({e})") from None
    if manifest.get("run_id") != run_id:
        raise LedgerError(f"{run_dir}/manifest.json is run {manifest.get('run_id')}, expected {run_id}")
    return kept_files(run_dir)


def copy_all(files: list[Path], dest: Path) -> None:
    """Copy `files` into `dest` as a whole: into a sibling temporary folder, then renamed, so `dest`
    never holds half of them (an existing `dest` is replaced the same way)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        for f in files:
            shutil.copy2(f, tmp / f.name)
        if dest.exists():
            old = dest.with_name(f".{dest.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            dest.rename(old)
            tmp.rename(dest)
            shutil.rmtree(old)
        else:
            tmp.rename(dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def save(run_id: str, out: Path, ledger: Path) -> Path:
    """Copy finished run `run_id` from its directory `out` into the ledger; returns its entry."""
    files = checked(out, run_id)
    entry = ledger / run_id
    copy_all(files, entry)
    return entry


def restore(run_id: str, out: Path, ledger: Path) -> bool:
    """Put the ledger's run `run_id` into `out` (its results only); False when the ledger has no
    entry. A damaged entry is a LedgerError and nothing is written into `out`."""
    entry = ledger / run_id
    if not entry.is_dir():
        return False
    files = checked(entry, run_id)
    try:
        held = RunDir(out)   # the run's own lock: never beside a live run of it
    except ConfigError as e:
        raise LedgerError(str(e)) from None
    try:
        # the marker first, then each file whole (copied beside it, then renamed), summary.json, which
        # marks a run finished, last: a restore cut short never looks like a finished, trained run
        atomic_write_json(out / RESTORED, {"ledger": str(entry.resolve()),
                                           "metrics": metrics_record((entry / "metrics.jsonl").read_bytes())})
        for f in sorted(files, key=lambda f: f.name == "summary.json"):
            tmp = out / f".{f.name}.restore"
            shutil.copy2(f, tmp)
            tmp.rename(out / f.name)
    finally:
        held.close()
    return True


def restored(run_dir: Path) -> bool:
    """Whether `run_dir` holds a run restored from a ledger (not trained there): its marker names the
    metrics the run has now."""
    try:
        mark = json.loads((run_dir / RESTORED).read_text())
        return mark["metrics"] == metrics_record((run_dir / "metrics.jsonl").read_bytes())
    except (OSError, ValueError, KeyError, TypeError):
        return False


def repo_of(path: Path) -> Path:
    top = subprocess.run(["git", "-C", str(path), "rev-parse", "--show-toplevel"],
                         capture_output=True, text=True)
    if top.returncode:
        raise LedgerError(f"{path}: not in a git checkout, so the ledger cannot commit ({top.stderr.strip()})")
    return Path(top.stdout.strip())


def message(run_id: str, entry: Path) -> str:
    s = json.loads((entry / "summary.json").read_text())
    m = json.loads((entry / "manifest.json").read_text())
    cpu = (m.get("hardware") or {}).get("cpu_model", "?")
    commit = str((m.get("git") or {}).get("commit") or "?")[:12]
    return (f"Ledger: run {run_id} ({m.get('name', '?')}, seed {m.get('seed', '?')}) finished: "
            f"{s.get('metric', 'metric')} {s.get('final_metric')} at update "
            f"{(s.get('metrics') or {}).get('last_step', '?')}; trained on {cpu} at {commit}")


def commit(run_id: str, entry: Path) -> str:
    """Commit the ledger entry's files alone; returns the new commit's id (commit_paths)."""
    return commit_paths(sorted(entry.iterdir()), message(run_id, entry), entry.parent / COMMIT_LOCK)


def commit_paths(files: list[Path], text: str, lock_file: Path) -> str:
    """Commit these files alone (other staged changes stay staged, uncommitted), one committer at a
    time through `lock_file`; waits for another git process's index.lock up to GIT_WAIT_S. Returns
    the new commit's id (HEAD as it was when the files were already committed as they are)."""
    repo = repo_of(files[0].parent)
    paths = [str(p.resolve().relative_to(repo)) for p in files]
    with open(lock_file, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        deadline = time.monotonic() + GIT_WAIT_S

        def git(*argv: str) -> subprocess.CompletedProcess:
            while True:
                r = subprocess.run(["git", "-C", str(repo), *argv], capture_output=True, text=True)
                if r.returncode in (0, 1) or "index.lock" not in r.stderr or time.monotonic() > deadline:
                    return r
                time.sleep(2)   # another git process holds the index: wait for it

        for argv in (["add", "--", *paths], ["diff", "--cached", "--quiet", "--", *paths],
                     ["commit", "-q", "-m", text, "--", *paths]):
            r = git(*argv)
            if argv[0] == "diff" and r.returncode == 0:
                break   # these files are committed as they are (an entry kept again unchanged)
            if r.returncode != (1 if argv[0] == "diff" else 0):
                raise LedgerError(f"git {argv[0]} of {', '.join(paths)} in {repo} failed: "
                                  f"{r.stderr.strip() or r.stdout.strip()}")
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("action", choices=["save", "restore"])
    p.add_argument("--run", required=True, help="the run id")
    p.add_argument("--out", required=True, type=Path, help="the run's directory")
    p.add_argument("--ledger", required=True, type=Path, help="the ledger folder (<results>/<scale>/ledger)")
    p.add_argument("--commit", action="store_true", help="save: also commit the entry")
    p.add_argument("--teacher", type=int, default=0, help="save: 1 when another planned run reads this one's models "
                   "(not kept)")
    a = p.parse_args(argv)
    try:
        if a.action == "restore":
            if not restore(a.run, a.out, a.ledger):
                print(f"codist ledger: {a.ledger} has no run {a.run}: training it")
                return 1
            print(f"codist ledger: run {a.run} restored from {a.ledger / a.run} (not retrained; its manifest "
                  f"names the machine and commit that trained it)")
            return 0
        if a.teacher:
            print(f"codist ledger: run {a.run} is read by a later run (its models: a two-phase teacher): not kept")
            return 0
        entry = save(a.run, a.out, a.ledger)
        print(f"codist ledger: run {a.run} kept in {entry}")
        if a.commit:
            print(f"codist ledger: committed as {commit(a.run, entry)[:12]}")
        return 0
    except LedgerError as e:
        print(f"codist ledger: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
