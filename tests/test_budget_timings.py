"""A tier's measured wall time sizes a budget only when it was timed on a quiet machine
(benchmarks/replicate_time.py): a row whose sampled load reached 2, or was not sampled, is refused."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from benchmarks import replicate_time
from workflows.run_ledger import RESTORED


def test_a_timing_at_load_2_or_more_is_refused_as_a_budget_figure(tmp_path):
    log = tmp_path / "call.log"
    log.write_text("== start cifar100 2026-12-04T10:00:00Z 1000\n"
                   "snakemake results/embedded/sun2016/cifar100.png\n"
                   "== end cifar100 2026-12-04T11:00:00Z 4600 rc=0\n")
    rows = []
    for load in (1.2, 2.0, 35.0):
        samples = tmp_path / f"load-{load}.log"
        samples.write_text(f"1000 0.3\n2000 {load}\n4600 0.4\n")
        rows.append(replicate_time.row([log], tmp_path, samples, "paper", 2, f"c{load}"))
    rows.append(replicate_time.row([log], tmp_path, None, "paper", 2, "unsampled"))
    table = replicate_time.with_budget_figure(pd.DataFrame(rows))
    assert table.budget_figure.tolist() == [True, False, False, False]
    assert replicate_time.budget_rows(pd.DataFrame(rows)).commit.tolist() == ["c1.2"]


def test_main_writes_the_budget_column(tmp_path):
    log, samples = tmp_path / "call.log", tmp_path / "load.log"
    log.write_text("== start fig 2026-12-04T10:00:00Z 1000\nsnakemake results/embedded/anil2018/fig4.png\n"
                   "== end fig 2026-12-04T10:10:00Z 1600 rc=0\n")
    samples.write_text("1000 2.5\n")
    assert replicate_time.main(["--log", str(log), "--results", str(tmp_path), "--commit", "abc",
                                "--load", str(samples), "--out", str(tmp_path / "out")]) == 0
    written = pd.read_csv(tmp_path / "out" / "replicate_time.csv")
    assert written.budget_figure.tolist() == [False]


def _tier_logs(tmp_path, start_load: float):
    """Two calls of one tier timing (benchmarks/time_tier.py's log format) and their log paths."""
    logs = []
    for name, (t0, t1), target in (("default", (1000, 2000), "anil2018/fig4.png"),
                                   ("sun2016-cifar100", (2000, 4000), "sun2016/cifar100.png")):
        log = tmp_path / f"{name}.log"
        load = f" load={start_load}" if name == "default" else " load=2.10"
        log.write_text(f"== start {name} 2026-12-05T10:00:00Z {t0}{load}\n"
                       f"snakemake results/embedded/{target}\n== end {name} 2026-12-05T11:00:00Z {t1} rc=0\n")
        logs.append(log)
    return logs


def test_a_tier_timing_is_judged_by_the_threads_of_others_not_by_its_own_load(tmp_path):
    """The tier's own ranks keep the load at 2-4 on 2 cores: with foreign samples, the row is a
    budget figure when others ran under FOREIGN_MAX threads beside it, whatever the load."""
    logs = _tier_logs(tmp_path, 0.4)
    rows = []
    for foreign in (0.02, 0.5):
        samples = tmp_path / f"load-{foreign}.log"
        samples.write_text("".join(f"{t} 3.9 {foreign}\n" for t in range(1000, 4001, 30)))
        rows.append(replicate_time.row(logs[1:], tmp_path, samples, "paper", 2, f"f{foreign}"))
    table = replicate_time.with_budget_figure(pd.DataFrame(rows))
    assert table.load_max.tolist() == [3.9, 3.9]
    assert table.budget_figure.tolist() == [True, False]
    assert table.load_at_start.tolist() == [2.1, 2.1]


def test_a_tier_total_needs_a_quiet_start_and_every_call_quiet(tmp_path):
    samples = tmp_path / "load.log"
    samples.write_text("".join(f"{t} 2.5 0.0\n" for t in range(1000, 4001, 30)))
    tables = {}
    for start_load in (1.2, 1.8):
        logs = _tier_logs(tmp_path, start_load)
        rows = [replicate_time.row([log], tmp_path, samples, "paper", 2, f"c{start_load}") for log in logs]
        rows.append(replicate_time.total_row(logs, "paper tier", tmp_path, samples, "paper", 2, f"c{start_load}"))
        tables[start_load] = replicate_time.with_budget_figure(pd.DataFrame(rows))
    quiet, loaded = tables[1.2], tables[1.8]
    assert quiet.wall_s.tolist() == [1000, 2000, 3000]
    assert quiet.budget_figure.tolist() == [True, True, True]
    assert loaded.budget_figure.tolist() == [True, True, False]   # started at load 1.8 > 1.5
    # one call with others beside it: the total does not size the tier either
    noisy = tmp_path / "noisy.log"
    noisy.write_text("".join(f"{t} 2.5 {0.0 if t < 2000 else 0.4}\n" for t in range(1000, 4001, 30)))
    logs = _tier_logs(tmp_path, 1.2)
    rows = [replicate_time.row([log], tmp_path, noisy, "paper", 2, "n") for log in logs]
    rows.append(replicate_time.total_row(logs, "paper tier", tmp_path, noisy, "paper", 2, "n"))
    assert replicate_time.with_budget_figure(pd.DataFrame(rows)).budget_figure.tolist() == [True, False, False]


def test_a_call_naming_no_figure_is_the_rest_of_all(tmp_path):
    log = tmp_path / "rest.log"
    log.write_text("== start rest 2026-12-05T10:00:00Z 1000 load=2.0\nsnakemake --profile x\n"
                   "== end rest 2026-12-05T10:01:00Z 1060 rc=0\n")
    r = replicate_time.row([log], tmp_path, None, "paper", 2, "c")
    assert r["figures"].startswith("rest (no figure named") and r["runs"] == 0 and r["wall_s"] == 60


def test_a_call_shorter_than_the_sampling_period_takes_the_next_sample(tmp_path):
    samples = tmp_path / "load.log"
    samples.write_text("1000 0.5 0.0\n1030 2.4 0.8\n1100 9.0 5.0\n")
    assert replicate_time.load_within(samples, [(1010, 1017)]) == (2.4, 2.4, 0.8)   # 1030 covers it
    assert replicate_time.load_within(samples, [(1040, 1045)]) == (None, None, None)   # 1100 is past a period


def test_runs_restored_from_the_ledger_are_counted_apart_and_the_row_sizes_no_tier(tmp_path):
    """A call with LEDGER=keep trained only some of its figures' runs: the restored ones (their
    restored_from_ledger.json) are in neither the run count nor runs_elapsed_s, and the row, quiet
    or not, times only part of the tier."""
    fig = tmp_path / "embedded" / "anil2018"
    fig.mkdir(parents=True)
    (fig / "fig4_runs.json").write_text(json.dumps({"runs": [{"run_id": r} for r in ("aaa", "bbb", "ccc")]}))
    for rid, elapsed, restored in (("aaa", 100.0, False), ("bbb", 200.0, True), ("ccc", 300.0, False)):
        run = tmp_path / "embedded" / "runs" / rid
        run.mkdir(parents=True)
        (run / "summary.json").write_text(json.dumps({"elapsed_s": elapsed}))
        if restored:
            (run / RESTORED).write_text("{}")
    log, samples = tmp_path / "call.log", tmp_path / "load.log"
    log.write_text("== start fig 2026-12-04T10:00:00Z 1000\nsnakemake results/embedded/anil2018/fig4.png\n"
                   "== end fig 2026-12-04T10:10:00Z 1600 rc=0\n")
    samples.write_text("".join(f"{t} 2.5 0.0\n" for t in range(1000, 1601, 30)))
    got = replicate_time.row([log], tmp_path, samples, "anil", 2, "c")
    assert (got["runs"], got["restored"], got["runs_elapsed_s"]) == (2, 1, 400.0)
    assert "1 run(s) restored from the run ledger" in got["load_note"]
    trained_all = {**got, "restored": 0, "commit": "d"}   # the control: the same timing with nothing restored
    table = replicate_time.with_budget_figure(pd.DataFrame([got, trained_all]))
    assert table.budget_figure.tolist() == [False, True]


def _run(root, rid: str, started: float, elapsed: float, restored: bool) -> None:
    run = root / "embedded" / "runs" / rid
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({"elapsed_s": elapsed}))
    (run / "manifest.json").write_text(json.dumps({"started_unix": started}))
    if restored:
        (run / RESTORED).write_text("{}")


def test_a_timing_stopped_and_resumed_elsewhere_counts_its_calls_not_the_gap_nor_others_runs(tmp_path):
    """A tier longer than a machine's lease: the call stopped (rc -15) on one machine and resumed on
    the next hours later, in the same log. Its wall time is the two calls' (not the gap); a run
    restored from the ledger that trained inside the first call is the timing's own; one trained
    outside every call (another timing's, another machine's) is not, and keeps the row from sizing a
    tier; a call cut off with no end line times nothing."""
    fig = tmp_path / "embedded" / "anil2018"
    fig.mkdir(parents=True)
    (fig / "fig2a_runs.json").write_text(json.dumps({"runs": [{"run_id": r} for r in ("aaa", "bbb", "ccc")]}))
    _run(tmp_path, "aaa", 1010.0, 500.0, restored=True)     # trained inside the first call, then kept by the ledger
    _run(tmp_path, "bbb", 20010.0, 900.0, restored=False)   # trained by the resumption
    log, samples = tmp_path / "fig.log", tmp_path / "load.log"
    log.write_text("== start fig 2026-12-06T10:00:00Z 1000 load=0.50 commit=aaaa1111\n"
                   "snakemake results/embedded/anil2018/fig2a.png\n== end fig 2026-12-06T10:20:00Z 2000 rc=-15\n"
                   "== start fig 2026-12-07T10:00:00Z 20000 load=1.20 commit=bbbb2222\n"
                   "snakemake results/embedded/anil2018/fig2a.png\n== end fig 2026-12-07T10:20:00Z 21000 rc=0\n")
    samples.write_text("".join(f"{t} 2.2 0.01\n" for t in [*range(1000, 2001, 30), *range(20000, 21001, 30)]))
    got = replicate_time.row([log], tmp_path, samples, "anil", 2, "c")
    assert (got["wall_s"], got["runs"], got["restored"], got["runs_elapsed_s"]) == (2000, 2, 0, 1400.0)
    assert got["load_at_start"] == 1.2 and got["foreign_mean"] == 0.01
    assert "in 2 stretches" in got["load_note"] and "calls at commits aaaa1111, bbbb2222" in got["load_note"]
    # ccc: restored, trained at 5000, between the calls: not this timing's
    _run(tmp_path, "ccc", 5000.0, 100.0, restored=True)
    other = replicate_time.row([log], tmp_path, samples, "anil", 2, "d")
    assert (other["runs"], other["restored"]) == (2, 1)
    table = replicate_time.with_budget_figure(pd.DataFrame([got, other]))
    assert table.budget_figure.tolist() == [True, False]
    # the resumption began at load 2.0: as a total, the tier's second stretch did not start quiet
    loaded = tmp_path / "loaded.log"
    loaded.write_text(log.read_text().replace("load=1.20", "load=2.00"))
    rows = [replicate_time.row([loaded], tmp_path, samples, "anil", 2, "e"),
            replicate_time.total_row([loaded], "anil tier", tmp_path, samples, "anil", 2, "e")]
    assert replicate_time.with_budget_figure(pd.DataFrame(rows)).budget_figure.tolist() == [False, False]
    # a call cut off (start, no end): nothing it trained is the timing's, and its time is not counted
    cut = tmp_path / "cut.log"
    cut.write_text("== start fig 2026-12-06T10:00:00Z 4000 load=0.50\nsnakemake results/embedded/anil2018/fig2a.png\n"
                   + log.read_text().split("\n", 3)[3])
    calls = replicate_time.parse_log(cut)
    assert [c["end"] for c in calls] == [None, 21000]
    got_cut = replicate_time.row([cut], tmp_path, samples, "anil", 2, "f")
    assert (got_cut["wall_s"], got_cut["restored"]) == (1000, 2) and "1 call(s) cut off" in got_cut["load_note"]


def test_an_end_line_without_a_start_is_named(tmp_path):
    log = tmp_path / "odd.log"
    log.write_text("== end fig 2026-12-06T10:20:00Z 2000 rc=0\n")
    with pytest.raises(SystemExit, match="odd.log: an '== end' line with no '== start' before it"):
        replicate_time.parse_log(log)
