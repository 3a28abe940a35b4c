"""A tier's measured wall time sizes a budget only when it was timed on a quiet machine
(benchmarks/replicate_time.py): a row whose sampled load reached 2, or was not sampled, is refused."""
from __future__ import annotations

import pandas as pd

from benchmarks import replicate_time


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
