"""Failures exit non-zero, so a workflow job that fails is not read as done (issue 52, mutants B02 of
benchmarks/benchlib.py and D01 of codist/datacheck.py): a benchmark whose rows were refused under load,
and `codist data prepare` (the workflow's lm_data job) on text it cannot prepare."""
from __future__ import annotations

import pandas as pd
import yaml
from conftest import TINY

from benchmarks import benchlib
from codist.cli import main as codist


def test_a_benchmark_whose_rows_were_all_refused_under_load_exits_1_and_writes_nothing(tmp_path, capsys):
    rows = [{"model": "a", "batch": 1, "loadavg": 3.0}, {"model": "b", "batch": 2, "loadavg": None}]
    assert benchlib.write_quiet(rows, tmp_path, "bench.csv") == 1
    assert not (tmp_path / "bench.csv").exists()
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all("refused, not written" in line for line in err)


def test_some_rows_refused_exits_1_with_the_quiet_ones_written_and_none_refused_exits_0(tmp_path, capsys):
    rows = [{"model": "a", "batch": 1, "loadavg": 0.5}, {"model": "b", "batch": 2, "loadavg": 2.5}]
    assert benchlib.write_quiet(rows, tmp_path, "bench.csv") == 1
    assert list(pd.read_csv(tmp_path / "bench.csv")["model"]) == ["a"]
    assert benchlib.write_quiet(rows[:1], tmp_path, "quiet.csv") == 0
    assert list(pd.read_csv(tmp_path / "quiet.csv")["model"]) == ["a"]
    assert capsys.readouterr().err.count("refused, not written") == 1


def test_codist_data_prepare_exits_1_when_the_text_cannot_be_prepared(tmp_path, capsys):
    """A shard named .wet that is not a WARC file: one line naming it, exit 1 (the lm_data job fails)."""
    (tmp_path / "text").mkdir()
    shard = tmp_path / "text" / "crawl.wet"
    shard.write_text("not a warc record\n")
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({**TINY, "workload": {"name": "lm", "dataset": "text", "tokenizer": "bytes",
                                                         "data_dir": str(tmp_path / "text"),
                                                         "cache_dir": str(tmp_path / "cache")}}))
    assert codist(["data", "prepare", "--config", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"codist data prepare: {shard}: not a WARC/WET file") and err.count("\n") == 1, err
