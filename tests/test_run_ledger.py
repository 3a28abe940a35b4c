"""The run ledger (workflows/run_ledger.py): the real Snakefile trains a toy paper's two runs with
`ledger=commit` into a real git checkout (one commit a run, nothing else committed), then a second
working folder with no runs (another machine's clone) makes the same figure from the ledger
without training; a damaged entry is not restored, and the default leaves the train command as it
was. Real snakemake, real training, real git."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from test_workflow import BASE, figure, toy_paper
from test_workflow_run import snakemake
from workflows import compare, run_ledger
from workflows.experiments import load_plan
from workflows.workflow_config import WorkflowConfigError, check

BASE_LEDGER = {**BASE, "workload": {"name": "cifar", "train_size": 256, "val_size": 64}}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    """(repo, ledger, reps, first workdir): two runs trained and committed run by run."""
    root = tmp_path_factory.mktemp("ledger")
    repo = root / "checkout"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "t@example.org")
    git(repo, "config", "user.name", "t")
    (repo / "other.txt").write_text("staged, not the ledger's\n")
    git(repo, "add", "other.txt")   # staged before the runs: no ledger commit may take it
    reps = toy_paper(root / "reps", {"figA": figure({"one": {}, "two": {"optimizer.lr": 0.05}}, base=BASE_LEDGER)})
    ledger = repo / "results" / "embedded" / "ledger"
    first = root / "first"
    snakemake(first, reps, "ledger=commit", f"ledger_dir={ledger}", "-c2", "--", "results/embedded/toy/figA.csv")
    return repo, ledger, reps, first


@pytest.mark.slow
def test_each_finished_run_is_committed_alone(kept):
    repo, ledger, _, first = kept
    entries = sorted(p.name for p in ledger.iterdir() if not p.name.startswith("."))
    assert entries == sorted(p.name for p in (first / "results/embedded/runs").iterdir())
    assert len(entries) == 2
    log = git(repo, "log", "--format=%s").splitlines()
    assert len(log) == 2 and all(s.startswith("Ledger: run ") for s in log), log
    for rid in entries:
        files = git(repo, "show", "--name-only", "--format=", *[c for c in git(repo, "log", "--format=%H").split()
                                                               if rid in git(repo, "show", "-s", "--format=%s", c)])
        assert sorted(Path(f).name for f in files.split()) == sorted(run_ledger.KEPT), files
    # kept again unchanged: nothing new to commit, and no error
    head = git(repo, "rev-parse", "HEAD").strip()
    assert run_ledger.commit(entries[0], ledger / entries[0]) == head
    # the file staged before the runs is still staged, uncommitted
    assert git(repo, "diff", "--cached", "--name-only").split() == ["other.txt"]
    # what is kept is the run's results, byte for byte
    for rid in entries:
        for name in run_ledger.KEPT:
            assert (ledger / rid / name).read_bytes() == (first / "results/embedded/runs" / rid / name).read_bytes()


@pytest.mark.slow
def test_another_clone_makes_the_figure_from_the_ledger_without_training(kept, tmp_path):
    _, ledger, reps, first = kept
    out = snakemake(tmp_path, reps, "ledger=keep", f"ledger_dir={ledger}", "-c2", "--", "results/embedded/toy/figA.csv")
    runs = sorted((tmp_path / "results/embedded/runs").iterdir())
    assert len(runs) == 2
    for run in runs:
        log = (tmp_path / "results/embedded/logs/train" / f"{run.name}.log").read_text()
        assert f"run {run.name} restored from" in log, log
        assert not (run / "checkpoint").exists() and not (run / "logs").exists()   # never trained here
    # the same table as the machine that trained them
    assert (tmp_path / "results/embedded/toy/figA.csv").read_bytes() == \
        (first / "results/embedded/toy/figA.csv").read_bytes(), out
    # a comparison of this folder says its runs were restored, not trained; the first folder's were trained
    assert compare.restored_line(tmp_path / "results/embedded").startswith(
        "2 of your 2 runs were restored from the run ledger")
    assert compare.restored_line(first / "results/embedded") == ""
    # a run retrained in the same folder (other metrics bytes) is no longer counted as restored
    with open(runs[0] / "metrics.jsonl", "a") as f:
        f.write("\n")
    assert compare.restored_line(tmp_path / "results/embedded").startswith("1 of your 2 runs")


@pytest.mark.slow
def test_a_damaged_entry_is_not_restored(kept, tmp_path, capsys):
    _, ledger, _, _ = kept
    rid = sorted(p.name for p in ledger.iterdir() if not p.name.startswith("."))[0]
    copy = tmp_path / "ledger"
    run_ledger.copy_all(sorted((ledger / rid).iterdir()), copy / rid)
    with open(copy / rid / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"step": 10**6, "model": "0"}) + "\n")
    out = tmp_path / "run"
    assert run_ledger.main(["restore", "--run", rid, "--out", str(out), "--ledger", str(copy)]) == 2
    assert "not the metrics its run finished with" in capsys.readouterr().err
    assert not out.exists() or not any(out.iterdir())
    # no entry: 1 (train it), nothing written
    assert run_ledger.main(["restore", "--run", "0" * 12, "--out", str(out), "--ledger", str(copy)]) == 1


@pytest.mark.slow
def test_a_teacher_is_not_kept(kept, tmp_path, capsys):
    _, _, _, first = kept
    run = next((first / "results/embedded/runs").iterdir())
    argv = ["save", "--run", run.name, "--out", str(run), "--ledger", str(tmp_path / "L"), "--teacher", "1"]
    assert run_ledger.main(argv) == 0
    assert "not kept" in capsys.readouterr().out and not (tmp_path / "L").exists()


@pytest.mark.slow
def test_a_teacher_the_ledger_holds_trains_again_and_its_student_reads_its_models(kept, tmp_path):
    """Issue 50: a run the ledger holds (kept where nothing read its models) becomes a two-phase teacher in
    another figure (save_model is not in the run id, so it is the same run). The ledger keeps no models,
    so restoring it would leave its student nothing to read: the teacher trains again, with its models,
    and the student trains on them; also where an earlier call of the same folder had restored it."""
    _, ledger, _, _ = kept
    base = {**BASE_LEDGER, "train": {**BASE_LEDGER["train"], "save_model": True}}
    reps = toy_paper(tmp_path / "reps", {"figB": figure(
        {"teacher": {}, "student": {"algorithm.name": "distill", "algorithm.teacher_run": "@teacher",
                                    "algorithm.teacher_models": ["0"], "train.save_model": False}}, base=base)})
    one = load_plan(reps, "embedded").figures[("toy", "figB")].runs[0].run_id   # the teacher: figA's "one"
    assert (ledger / one / "summary.json").exists()
    work = tmp_path / "work"
    # first, in the same folder, a plan where nothing reads its models: restored from the ledger
    alone = toy_paper(tmp_path / "alone", {"figA": figure({"one": {}}, base=BASE_LEDGER)})
    snakemake(work, alone, "ledger=keep", f"ledger_dir={ledger}", "-c2", "--", "results/embedded/toy/figA.csv")
    runs = work / "results" / "embedded" / "runs"
    assert (runs / one / run_ledger.RESTORED).exists() and not (runs / one / "model_0.pt").exists()
    # then the plan where it is a teacher: the job's params changed (teacher 1), so Snakemake trains it again
    snakemake(work, reps, "ledger=keep", f"ledger_dir={ledger}", "-c2", "--", "results/embedded/toy/figB.csv")
    assert one in {p.name for p in runs.iterdir()}   # the same run as the ledger's
    assert (runs / one / "model_0.pt").exists() and not (runs / one / run_ledger.RESTORED).exists()
    student = next(p for p in runs.iterdir() if p.name != one)
    assert json.loads((student / "summary.json").read_text())["steps"] == BASE_LEDGER["train"]["steps"]


@pytest.mark.slow
def test_a_run_directory_held_by_a_live_run_is_not_restored_into(kept, tmp_path, capsys):
    """The run's own lock (codist.launching.rundir): a live `codist run` of the same id (a killed workflow's
    run still stopping) holds its directory, and restoring beside it writes nothing."""
    _, ledger, _, _ = kept
    rid = sorted(p.name for p in ledger.iterdir() if not p.name.startswith("."))[0]
    out = tmp_path / rid
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time; f = open(sys.argv[1], 'a'); "
                               "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)",
                               str(out / ".codist.lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert run_ledger.main(["restore", "--run", rid, "--out", str(out), "--ledger", str(ledger)]) == 2
        assert "in use by another codist run" in capsys.readouterr().err
        assert sorted(p.name for p in out.iterdir()) == [".codist.lock"]
    finally:
        holder.kill()
        holder.wait()


def test_the_ledger_is_in_the_train_command_only_when_asked(tmp_path):
    reps = toy_paper(tmp_path / "reps", {"figA": figure({"one": {}}, base=BASE_LEDGER)})
    dry = ["-n", "-p", "--", "results/embedded/toy/figA.csv"]
    plain = snakemake(tmp_path, reps, *dry)
    assert "codist.cli run" in plain and "run_ledger" not in plain
    asked = snakemake(tmp_path, reps, "ledger=keep", f"ledger_dir={tmp_path / 'L'}", *dry)
    assert f"run_ledger.py restore" in asked and f"--ledger {tmp_path / 'L'}" in asked
    assert "run_ledger.py save" in asked and "--teacher 0" in asked and "--commit" not in asked


def test_bad_ledger_settings_are_one_line():
    with pytest.raises(WorkflowConfigError, match=r"--config ledger='on'"):
        check({"ledger": "on"})
    with pytest.raises(WorkflowConfigError, match="rehearsal's shrunk runs are not kept"):
        check({"ledger": "keep", "rehearsal": True, "scale": "full"})


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
