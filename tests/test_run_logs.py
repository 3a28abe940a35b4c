"""A run's live views: the TensorBoard event file (read back with TensorBoard's own
EventAccumulator) holds exactly metrics.jsonl's values, in a TensorBoard run named by the config's
name and seed, with the config as hyperparameters; a resumed run's event file is rewritten with
its rows."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import TENSORS, EventAccumulator
from tensorboard.util import tensor_util

from conftest import launch_run, read_rows

from codist.runlog import MetricsLog


def event_folder(run: Path) -> Path:
    """The one TensorBoard run under run/tensorboard (the folder holding its event file)."""
    files = list((run / "tensorboard").rglob("events.out.tfevents.*"))
    assert len(files) == 1, files   # the lead rank's only
    return files[0].parent


def tensorboard_values(run: Path) -> dict[tuple[str, str, int], float]:
    """(key, model, step) -> value of every scalar in run/tensorboard, as TensorBoard reads it."""
    acc = EventAccumulator(str(event_folder(run)), size_guidance={TENSORS: 0})
    acc.Reload()
    out = {}
    for tag in acc.Tags()["tensors"]:
        if tag.startswith(("_hparams_/", "config/")):
            continue
        key, model = tag.rsplit("/", 1)
        for event in acc.Tensors(tag):
            assert (key, model, event.step) not in out, f"{tag} at step {event.step} written twice"
            out[(key, model, event.step)] = tensor_util.make_ndarray(event.tensor_proto).item()
    return out


def row_values(rows: list[dict]) -> dict[tuple[str, str, int], float]:
    return {(k, r["model"], r["step"]): v for r in rows for k, v in r.items()
            if k not in ("step", "model") and isinstance(v, (int, float)) and not isinstance(v, bool)}


@pytest.mark.slow
def test_event_file_of_a_real_run_equals_its_metrics(tmp_path):
    """2 models x 1 rank codistillation: every metric and the communication counter (comm_bytes)
    of every model (0, 1, ensemble) at every evaluation, exactly (float64)."""
    run = launch_run(tmp_path / "run", {"parallel": {"world_size": 2, "models": 2},
                                        "algorithm": {"name": "codistill", "exchange_every": 2},
                                        "launch": {"launcher": "fork"}})
    rows = read_rows(run)
    expected = row_values(rows)
    assert {m for _, m, _ in expected} >= {"0", "1"} and any(k == "comm_bytes" and v > 0 for (k, _, _), v in
                                                               expected.items())
    assert tensorboard_values(run) == expected
    assert event_folder(run) == run / "tensorboard" / "tiny-seed0"   # the config's name and seed, not the run id


def test_a_resumed_log_rewrites_its_event_file_with_the_checkpoint_rows(tmp_path):
    rows = [{"step": s, "model": "0", "samples": 8 * s, "val_loss": 1.0 / s, "comm_bytes": 2**40 + s,
             "distill_loss": None} for s in (1, 2, 3)]
    log = MetricsLog(tmp_path / "metrics.jsonl")
    log.replace([])
    for r in rows:
        log.append(r)
    assert tensorboard_values(tmp_path) == row_values(rows)
    resumed = MetricsLog(tmp_path / "metrics.jsonl")   # a new process, resuming from update 2
    resumed.replace(rows[:2])
    resumed.append({**rows[2], "val_loss": 0.25})
    again = rows[:2] + [{**rows[2], "val_loss": 0.25}]
    assert tensorboard_values(tmp_path) == row_values(again)
    assert [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()] == again


def test_the_tensorboard_run_is_named_by_series_and_seed_and_carries_the_config(tmp_path):
    from tensorboard.plugins.hparams import plugin_data_pb2
    config = {"name": "cifar-codistill-x2-w2-seed3", "seed": 3, "scale": "embedded",
              "algorithm": {"name": "codistill", "alpha": 0.5, "milestones": [100, 200], "burn_in": None},
              "launch": {"launcher": "warm"}}
    log = MetricsLog(tmp_path / "metrics.jsonl", config)
    log.replace([])
    log.append({"step": 1, "model": "0", "val_loss": 2.0})
    assert event_folder(tmp_path) == tmp_path / "tensorboard" / "cifar-codistill-x2-w2-seed3"
    acc = EventAccumulator(str(event_folder(tmp_path)), size_guidance={TENSORS: 0})
    acc.Reload()
    start = plugin_data_pb2.HParamsPluginData.FromString(
        acc.PluginTagToContent("hparams")["_hparams_/session_start_info"]).session_start_info
    values = {k: v.WhichOneof("kind") and getattr(v, v.WhichOneof("kind")) for k, v in start.hparams.items()}
    assert values == {"seed": 3, "scale": "embedded", "algorithm.name": "codistill", "algorithm.alpha": 0.5,
                      "algorithm.milestones": "[100, 200]", "algorithm.burn_in": "null"}   # no launch, no name
    assert list(acc.PluginTagToContent("hparams")) == ["_hparams_/session_start_info"]   # no per-run experiment
    text = tensor_util.make_ndarray(acc.Tensors("config/text_summary")[0].tensor_proto).item().decode()
    assert "    name: cifar-codistill-x2-w2-seed3" in text and "    algorithm:" in text
    # a config name without its seed gets it appended; no config: "run"
    other = MetricsLog(tmp_path / "b" / "metrics.jsonl", {"name": "codistill-2x1", "seed": 0})
    other.append({"step": 1, "model": "0", "val_loss": 1.0})
    assert event_folder(tmp_path / "b").name == "codistill-2x1-seed0"


@pytest.mark.slow
def test_each_rank_logs_to_its_own_file_and_the_launcher_summarises_a_failure(tmp_path):
    """A real 2-rank fork run: each rank's output in logs/rank<N>.log, rank 0's also on codist
    run's own output. Then rank 1 alone fails (its checkpoint file is corrupt): codist run names
    it and quotes the end of its log, where the traceback is."""
    import subprocess
    import sys

    import yaml

    from conftest import TINY, deep_update
    cfg = deep_update(TINY, {"parallel": {"world_size": 2}, "train": {"checkpoint_every": 3},
                             "launch": {"launcher": "fork"}})
    path, out = tmp_path / "c.yaml", tmp_path / "run"
    path.write_text(yaml.safe_dump(cfg))

    def codist_run():
        return subprocess.run([sys.executable, "-m", "codist.cli", "run", str(path), "--out", str(out)],
                              capture_output=True, text=True, timeout=300)
    first = codist_run()
    assert first.returncode == 0, first.stderr
    logs = {p.name: p.read_text() for p in (out / "logs").iterdir()}
    assert set(logs) == {"rank0.log", "rank1.log"}
    assert "update 6/6" in logs["rank0.log"] and "update 6/6" in first.stderr   # rank 0: its log and the console
    assert "update" not in logs["rank1.log"]

    (out / "summary.json").unlink()                                # unfinished: resumes from update 3
    (out / "checkpoint" / "step-3" / "rank-1.pt").write_bytes(b"not a checkpoint")
    index = json.loads((out / "checkpoint" / "latest.json").read_text())   # rank 0's digest check passes;
    index["checkpoints"][0]["sha256"]["rank-1.pt"] = hashlib.sha256(b"not a checkpoint").hexdigest()   # rank 1 fails
    (out / "checkpoint" / "latest.json").write_text(json.dumps(index))
    second = codist_run()
    assert second.returncode not in (0, 3)
    rank1 = (out / "logs" / "rank1.log").read_text()
    assert "Traceback" in rank1 and "rank-1.pt" in rank1
    summary = second.stderr
    assert "rank 1 failed:" in summary and f"--- rank 1: the end of {out / 'logs' / 'rank1.log'} ---" in summary
    assert rank1.strip().splitlines()[-1] in summary, summary[-3000:]
