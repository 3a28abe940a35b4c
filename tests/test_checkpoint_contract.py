"""codist.rank.checkpoint's contract on real files (issue 29): what `save` writes and in which order,
what `load` and `latest` accept and the one line each refusal gives, the RNG round trip, and
`agreed_step` on a real 1-rank gloo world (its 2-rank agreement: tests/test_resume_agreement.py)."""
import datetime
import hashlib
import json
import os
import socket
import traceback
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

from codist.rank import checkpoint
from codist.rank.checkpoint import CheckpointError

RID = "run-a"


def _save(run, step, rank, group_state, calls):
    checkpoint.save(run, step, RID, rank, group_state, {"meter": torch.tensor([rank, step])},
                    barrier=lambda: calls.append("barrier"), check=lambda path: calls.append(path))


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_save_writes_the_files_and_their_digests_then_the_index_and_keeps_the_newest_two(tmp_path):
    run = tmp_path / "run"
    for step in (2, 4):   # two earlier saves: step-2 is the one to drop
        _save(run, step, 0, {"group": 3, "w": torch.zeros(2)}, [])
    (run / "checkpoint" / "step-3").write_text("a stray file: the cleanup cannot rmtree it, the save goes on")
    d = run / "checkpoint" / "step-8"
    calls = []
    _save(run, 8, 1, None, calls)   # a rank that is not its group's first: its own file only, no index
    assert calls == [d / "rank-1.pt", d / "rank-1.sha256.json", "barrier", "barrier"]
    assert sorted(p.name for p in d.iterdir()) == ["rank-1.pt", "rank-1.sha256.json"]
    assert json.loads((d / "rank-1.sha256.json").read_text()) == {"rank-1.pt": sha256(d / "rank-1.pt")}
    assert checkpoint.latest(run, RID) == 4
    calls = []
    _save(run, 8, 0, {"group": 3, "w": torch.arange(4.0)}, calls)
    assert calls == [d / "group-3.pt", d / "rank-0.pt", d / "rank-0.sha256.json", "barrier",
                     run / "checkpoint" / "latest.json", "barrier"]
    index = json.loads((run / "checkpoint" / "latest.json").read_text())
    step4 = run / "checkpoint" / "step-4"
    assert index == {"step": 8, "run_id": RID, "checkpoints": [
        {"step": 8, "sha256": {name: sha256(d / name) for name in ("group-3.pt", "rank-0.pt", "rank-1.pt")}},
        {"step": 4, "sha256": {name: sha256(step4 / name) for name in ("group-3.pt", "rank-0.pt")}}]}
    assert sorted(p.name for p in (run / "checkpoint").iterdir()) == ["latest.json", "step-3", "step-4", "step-8"]
    assert checkpoint.latest(run, RID) == 8
    group, mine = checkpoint.load(run, 8, RID, 0, 3)
    assert group["run_id"] == RID and group["step"] == 8 and group["group"] == 3
    assert torch.equal(group["w"], torch.arange(4.0))
    assert torch.equal(mine["meter"], torch.tensor([0, 8]))
    _, other = checkpoint.load(run, 8, RID, 1, 3)
    assert torch.equal(other["meter"], torch.tensor([1, 8]))


def test_a_file_that_fails_its_digest_falls_back_to_the_previous_checkpoint_in_one_line(tmp_path, capsys):
    for step in (4, 8):
        _save(tmp_path, step, 0, {"group": 0, "w": torch.arange(64.0)}, [])
    capsys.readouterr()
    bad = tmp_path / "checkpoint" / "step-8" / "group-0.pt"
    data = bytearray(bad.read_bytes())
    at = bytes(data).index(torch.arange(64.0).numpy().tobytes()) + 100   # inside the tensor's bytes
    data[at] ^= 0x01
    bad.write_bytes(bytes(data))
    assert checkpoint.load(tmp_path, 8, RID, 0, 0)[0]["w"][25] != 25.0   # it loads, silently wrong
    assert checkpoint.latest(tmp_path, RID) == 4
    line = capsys.readouterr().err
    assert line.startswith(f"codist: checkpoint at step 8 not used: {bad}: sha256 ")
    assert line.endswith("recorded when it was written; resuming from the checkpoint at step 4\n")
    assert line.count("\n") == 1
    # the previous one is bad too (missing): one error naming both, nothing to resume from
    (tmp_path / "checkpoint" / "step-4" / "rank-0.pt").unlink()
    with pytest.raises(CheckpointError) as e:
        checkpoint.latest(tmp_path, RID)
    assert str(e.value).startswith(f"checkpoint at step 8 not used: {bad}: sha256 ")
    assert str(e.value).endswith(f"; checkpoint at step 4 not used: {tmp_path / 'checkpoint' / 'step-4' / 'rank-0.pt'}"
                                 f": unreadable (No such file or directory); no good checkpoint is left: delete "
                                 f"{tmp_path / 'checkpoint'} to start over")


def test_rank_0_reads_every_ranks_digests_by_name_and_a_missing_one_keeps_the_old_index(tmp_path, monkeypatch):
    """In a world of 2, rank 0 opens rank-1.sha256.json by name (a shared filesystem's listing may not
    show it yet); when it is not there the index is not moved to the new step."""
    _save(tmp_path, 4, 0, {"group": 0, "w": torch.zeros(2)}, [])
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda: 2)
    with pytest.raises(CheckpointError) as e:
        _save(tmp_path, 8, 0, {"group": 0, "w": torch.ones(2)}, [])
    missing = tmp_path / "checkpoint" / "step-8" / "rank-1.sha256.json"
    assert str(e.value).startswith(f"{missing}: the digests of a rank's checkpoint files cannot be read (")
    assert json.loads((tmp_path / "checkpoint" / "latest.json").read_text())["step"] == 4
    _save(tmp_path, 8, 1, None, [])   # rank 1's files and digests: now rank 0 indexes both
    _save(tmp_path, 8, 0, {"group": 0, "w": torch.ones(2)}, [])
    index = json.loads((tmp_path / "checkpoint" / "latest.json").read_text())
    assert sorted(index["checkpoints"][0]["sha256"]) == ["group-0.pt", "rank-0.pt", "rank-1.pt"]


def test_an_index_written_before_the_digests_is_used_unverified_saying_so(tmp_path, capsys):
    index = tmp_path / "checkpoint" / "latest.json"
    index.parent.mkdir()
    index.write_text(json.dumps({"step": 6, "run_id": RID}))
    assert checkpoint.latest(tmp_path, RID) == 6
    assert capsys.readouterr().err == (f"codist: {index}: written without file digests (an older codist); "
                                       f"step 6 resumed unverified\n")


def test_a_refused_write_stops_before_the_file(tmp_path):
    def refuse(path):
        raise RuntimeError(f"not the run's: {path.name}")
    with pytest.raises(RuntimeError, match="not the run's: rank-0.pt"):
        checkpoint.save(tmp_path, 2, RID, 0, None, {}, barrier=lambda: None, check=refuse)
    assert not (tmp_path / "checkpoint" / "step-2" / "rank-0.pt").exists()


@pytest.mark.parametrize("text, why", [("[8]", "TypeError"), ('{"run_id": "run-a"}', "KeyError"),
                                       ('{"step": 8, "run_id": "run-a", "checkpoints": [{"step": 8}]}', "KeyError"),
                                       ('{"step": "eight", "run_id": "run-a"}', "ValueError"), ("{", "ValueError")])
def test_an_unreadable_index_is_one_line_naming_it(tmp_path, text, why):
    index = tmp_path / "checkpoint" / "latest.json"
    index.parent.mkdir()
    index.write_text(text)
    with pytest.raises(CheckpointError) as e:
        checkpoint.latest(tmp_path, RID)
    assert str(e.value).startswith(f"{index}: unreadable checkpoint index (")
    assert str(e.value).endswith(f"); delete {index.parent} to start over")
    assert why != "KeyError" or ("'sha256'" if "checkpoints" in text else "'step'") in str(e.value)


def test_the_index_of_another_run_is_refused_and_no_index_is_no_checkpoint(tmp_path):
    assert checkpoint.latest(tmp_path, RID) is None
    index = tmp_path / "checkpoint" / "latest.json"
    index.parent.mkdir()
    index.write_text(json.dumps({"step": 6, "run_id": "run-b"}))
    with pytest.raises(CheckpointError) as e:
        checkpoint.latest(tmp_path, RID)
    assert str(e.value) == (f"{index}: checkpoint of run run-b, but this config is run {RID}; "
                            f"delete {index.parent} or use another --out directory")
    index.write_text(json.dumps({"step": "6", "run_id": RID}))
    assert checkpoint.latest(tmp_path, RID) == 6


def test_load_refuses_missing_corrupt_and_foreign_files_with_one_line(tmp_path):
    d = tmp_path / "checkpoint" / "step-8"
    with pytest.raises(CheckpointError) as e:
        checkpoint.load(tmp_path, 8, RID, 0, 0)
    assert str(e.value) == f"{d / 'group-0.pt'}: missing from the checkpoint at step 8"
    d.mkdir(parents=True)
    torch.save({"run_id": RID, "step": 8}, d / "group-0.pt")
    (d / "rank-0.pt").write_bytes(b"not a torch file")
    with pytest.raises(CheckpointError) as e:
        checkpoint.load(tmp_path, 8, RID, 0, 0)
    assert str(e.value).startswith(f"{d / 'rank-0.pt'}: corrupt checkpoint file (")
    assert str(e.value).endswith(f"); delete {tmp_path / 'checkpoint'} to start over")
    for run_id, step in (("run-b", 8), (RID, 4)):
        torch.save({"run_id": run_id, "step": step}, d / "rank-0.pt")
        with pytest.raises(CheckpointError) as e:
            checkpoint.load(tmp_path, 8, RID, 0, 0)
        assert str(e.value) == f"{d / 'rank-0.pt'}: holds run {run_id} step {step}, expected run {RID} step 8"
    # a pickle beyond tensors and plain containers (weights_only=True refuses it): corrupt, never executed
    torch.save({"run_id": RID, "step": 8, "when": datetime.date(2026, 1, 1)}, d / "rank-0.pt")
    with pytest.raises(CheckpointError, match="rank-0.pt: corrupt checkpoint file"):
        checkpoint.load(tmp_path, 8, RID, 0, 0)
    torch.save({"run_id": RID, "step": 8, "x": 1}, d / "rank-0.pt")
    assert checkpoint.load(tmp_path, 8, RID, 0, 0)[1]["x"] == 1


def test_a_state_key_the_file_lacks_is_one_line_naming_file_and_key(tmp_path):
    # e.g. PowerSGD's checkpoints before its DDP bucket layout was kept: no "ddp_buckets"
    old = {"model": {}, "optimizer": {}}
    with pytest.raises(CheckpointError) as e:
        with checkpoint.reading(tmp_path, 8, "group-1.pt"):
            old["ddp_buckets"]
    d = tmp_path / "checkpoint" / "step-8"
    assert str(e.value) == (f"{d / 'group-1.pt'}: its state has no 'ddp_buckets' (written by another codist "
                            f"version?); delete {tmp_path / 'checkpoint'} to start over")
    with checkpoint.reading(tmp_path, 8, "rank-0.pt"):   # nothing missing: nothing raised
        old["model"]


def test_the_cpu_generator_round_trips():
    cpu = torch.device("cpu")
    state = checkpoint.rng_state(cpu)
    first = torch.rand(5)
    torch.rand(3)
    checkpoint.restore_rng(state, cpu)
    assert torch.equal(torch.rand(5), first)


def test_a_gpu_checkpoint_resumes_on_the_cpu_without_touching_a_gpu_generator(monkeypatch):
    set_on_gpu = []
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda state, device: set_on_gpu.append(device))
    cpu = torch.device("cpu")
    state = {**checkpoint.rng_state(cpu), "cuda_rng": torch.zeros(16, dtype=torch.uint8)}
    first = torch.rand(3)
    checkpoint.restore_rng(state, cpu)
    assert set_on_gpu == [] and torch.equal(torch.rand(3), first)


def _one_rank(rank, port, run, out):
    import torch.distributed as dist

    from codist.runtime.comm import CommMeter
    try:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("gloo", rank=0, world_size=1)
        meter = CommMeter(0, [0])
        meter.install_hooks()
        cpu = torch.device("cpu")
        index = run / "checkpoint" / "latest.json"
        out["none"] = checkpoint.agreed_step(run, RID, 0, meter, cpu)
        index.parent.mkdir(parents=True)
        index.write_text(json.dumps({"step": 0, "run_id": RID}))
        out["zero"] = checkpoint.agreed_step(run, RID, 0, meter, cpu)
        for step in (1, 2, 12):   # small steps are steps, not the 'none' / 'failed' flags
            index.write_text(json.dumps({"step": step, "run_id": RID}))
            out[step] = checkpoint.agreed_step(run, RID, 0, meter, cpu)
        index.write_text("{")
        try:
            checkpoint.agreed_step(run, RID, 0, meter, cpu)
        except CheckpointError as e:
            out["error"] = str(e)
        out["control_calls"] = sum(c.calls for (cat, _), c in meter.counts.items() if cat == "control")
        dist.destroy_process_group()
    except BaseException:
        out["failed"] = traceback.format_exc()


def test_agreed_step_on_one_rank_is_its_own_index(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with mp.Manager() as manager:
        out = manager.dict()
        mp.start_processes(_one_rank, args=(port, tmp_path, out), nprocs=1, start_method="fork")
        got = dict(out)
    assert "failed" not in got, got.get("failed")
    assert got["none"] is None and got["zero"] == 0 and (got[1], got[2], got[12]) == (1, 2, 12)
    assert got["error"].startswith(f"{tmp_path / 'checkpoint' / 'latest.json'}: unreadable checkpoint index")
    assert got["control_calls"] == 6   # one broadcast per call, under control


# ---------------------------------------------------------------- issue 52: an index entry vouches only for what it covers

def _flip_inside(path, values):
    data = bytearray(path.read_bytes())
    data[bytes(data).index(values.numpy().tobytes()) + 100] ^= 0x01   # inside the tensor: it still loads
    path.write_bytes(bytes(data))


def test_an_entry_whose_digest_map_is_empty_vouches_for_nothing(tmp_path, capsys):
    """N3: {"sha256": {}} looped over no file and resumed a damaged checkpoint without a word."""
    for step in (4, 8):
        _save(tmp_path, step, 0, {"group": 0, "w": torch.arange(64.0)}, [])
    index = tmp_path / "checkpoint" / "latest.json"
    info = json.loads(index.read_text())
    info["checkpoints"][0]["sha256"] = {}
    index.write_text(json.dumps(info))
    _flip_inside(tmp_path / "checkpoint" / "step-8" / "group-0.pt", torch.arange(64.0))
    capsys.readouterr()
    assert checkpoint.latest(tmp_path, RID) == 4
    d = tmp_path / "checkpoint" / "step-8"
    assert capsys.readouterr().err == (f"codist: checkpoint at step 8 not used: {d}: {index} records no sha256 for it "
                                       f"(expected one for each file the ranks load: at least one); resuming from "
                                       f"the checkpoint at step 4\n")
    info["checkpoints"][1]["sha256"] = {}   # none left: one error, nothing resumed
    index.write_text(json.dumps(info))
    with pytest.raises(CheckpointError, match="no good checkpoint is left"):
        checkpoint.latest(tmp_path, RID)


def test_an_entry_that_does_not_cover_every_file_the_ranks_load_is_not_used(tmp_path, capsys):
    """N3: a map naming rank-0.pt only still let group-0.pt (damaged) be loaded unverified."""
    for step in (4, 8):
        _save(tmp_path, step, 0, {"group": 0, "w": torch.arange(64.0)}, [])
    index = tmp_path / "checkpoint" / "latest.json"
    info = json.loads(index.read_text())
    del info["checkpoints"][0]["sha256"]["group-0.pt"]
    index.write_text(json.dumps(info))
    _flip_inside(tmp_path / "checkpoint" / "step-8" / "group-0.pt", torch.arange(64.0))
    files = checkpoint.loaded_files(1, 1)
    assert files == {"rank-0.pt", "group-0.pt"}
    capsys.readouterr()
    assert checkpoint.latest(tmp_path, RID, files) == 4
    err = capsys.readouterr().err
    assert err.startswith(f"codist: checkpoint at step 8 not used: {tmp_path / 'checkpoint' / 'step-8' / 'group-0.pt'}:"
                          f" {index} records no sha256 for it (expected one for each file the ranks load: "
                          f"group-0.pt, rank-0.pt)"), err
    # a world of 2 ranks in 2 models loads rank-1.pt and group-1.pt too: the one-rank checkpoint covers neither
    with pytest.raises(CheckpointError, match=r"step-4/group-1\.pt: .* records no sha256 for it"):
        checkpoint.latest(tmp_path, RID, checkpoint.loaded_files(2, 2))


def test_after_a_fallback_the_next_save_keeps_the_good_checkpoint_and_drops_the_failed_one(tmp_path, capsys):
    """N26: the save after resuming from step 4 (step 5's digest failed) kept step 5 as the fallback and
    removed step 4, the only good one."""
    for step in (4, 5):
        _save(tmp_path, step, 0, {"group": 0, "w": torch.arange(64.0)}, [])
    _flip_inside(tmp_path / "checkpoint" / "step-5" / "group-0.pt", torch.arange(64.0))
    assert checkpoint.latest(tmp_path, RID) == 4
    _save(tmp_path, 6, 0, {"group": 0, "w": torch.arange(64.0)}, [])
    index = json.loads((tmp_path / "checkpoint" / "latest.json").read_text())
    assert [e["step"] for e in index["checkpoints"]] == [6, 4]
    assert sorted(p.name for p in (tmp_path / "checkpoint").iterdir()) == ["latest.json", "step-4", "step-6"]
    # the newest now damaged too: the rerun still has the good step 4
    _flip_inside(tmp_path / "checkpoint" / "step-6" / "group-0.pt", torch.arange(64.0))
    assert checkpoint.latest(tmp_path, RID) == 4
    capsys.readouterr()
    # a step saved again after it failed is new: kept as the fallback of the save after it
    _save(tmp_path, 6, 0, {"group": 0, "w": torch.arange(64.0)}, [])
    _save(tmp_path, 8, 0, {"group": 0, "w": torch.arange(64.0)}, [])
    assert [e["step"] for e in json.loads((tmp_path / "checkpoint" / "latest.json").read_text())["checkpoints"]] == [8, 6]


def test_a_negative_index_step_is_one_line(tmp_path):
    """N30: step -1 was broadcast as 'no checkpoint' and the run trained from update 0 silently."""
    index = tmp_path / "checkpoint" / "latest.json"
    index.parent.mkdir()
    for low, info in ((-1, {"step": -1, "run_id": RID}),
                      (-2, {"step": 8, "run_id": RID, "checkpoints": [{"step": -2, "sha256": {}}]})):
        index.write_text(json.dumps(info))
        with pytest.raises(CheckpointError) as e:
            checkpoint.latest(tmp_path, RID)
        assert str(e.value) == (f"{index}: unreadable checkpoint index (step {low}; expected a step >= 0); "
                                f"delete {index.parent} to start over")


def test_a_latest_json_that_is_a_folder_is_one_line(tmp_path):
    """N28: a bare IsADirectoryError."""
    index = tmp_path / "checkpoint" / "latest.json"
    index.mkdir(parents=True)
    with pytest.raises(CheckpointError) as e:
        checkpoint.latest(tmp_path, RID)
    assert str(e.value) == (f"{index}: unreadable checkpoint index (Is a directory; expected a JSON file); "
                            f"delete {index.parent} to start over")


def test_a_save_holds_three_checkpoints_on_disk_at_its_peak(tmp_path):
    """docs/usage.md: 'the disk holds three checkpoints at the peak': the new one is whole before the
    index moves to it and the oldest of the two kept goes."""
    for step in (2, 4):
        _save(tmp_path, step, 0, {"group": 0, "w": torch.zeros(2)}, [])
    seen = []
    checkpoint.save(tmp_path, 6, RID, 0, {"group": 0, "w": torch.zeros(2)}, {}, barrier=lambda: None,
                    check=lambda path: seen.append(len(list((tmp_path / "checkpoint").glob("step-*")))))
    assert max(seen) == 3 and len(list((tmp_path / "checkpoint").glob("step-*"))) == 2
    assert "three checkpoints at the peak" in (Path(__file__).parents[1] / "docs" / "usage.md").read_text()


def test_a_digest_mismatch_names_both_digests_by_their_first_12_hex_digits(tmp_path, capsys):
    """The line quotes 12 hex digits of what was found and of what was recorded (enough to tell them
    apart, short enough to read): issue 52's survivors of the digest line's slices."""
    for step in (4, 8):
        _save(tmp_path, step, 0, {"group": 0, "w": torch.arange(8.0)}, [])
    bad = tmp_path / "checkpoint" / "step-8" / "rank-0.pt"
    recorded = sha256(bad)
    bad.write_bytes(bad.read_bytes() + b"\0")
    capsys.readouterr()
    assert checkpoint.latest(tmp_path, RID) == 4
    assert f"{bad}: sha256 {sha256(bad)[:12]}... differs from the {recorded[:12]}... recorded when it was written;" \
        in capsys.readouterr().err


def test_a_second_save_at_the_same_step_replaces_its_entry_and_keeps_the_fallback(tmp_path):
    """A run stopped by a signal just after its periodic save saves the same step again: the index
    names that step once, and the checkpoint before it stays its fallback."""
    for step in (4, 8, 8):
        _save(tmp_path, step, 0, {"group": 0, "w": torch.zeros(2)}, [])
    index = json.loads((tmp_path / "checkpoint" / "latest.json").read_text())
    assert [e["step"] for e in index["checkpoints"]] == [8, 4]
    assert sorted(p.name for p in (tmp_path / "checkpoint").iterdir()) == ["latest.json", "step-4", "step-8"]


def test_a_save_over_an_unreadable_index_writes_a_new_one(tmp_path):
    """latest.json damaged (not JSON) when the next checkpoint is written: the save still lands, and the
    new index names only the new checkpoint (the old entries cannot be read, so none is kept)."""
    _save(tmp_path, 4, 0, {"group": 0, "w": torch.zeros(2)}, [])
    (tmp_path / "checkpoint" / "latest.json").write_text("{")
    _save(tmp_path, 8, 0, {"group": 0, "w": torch.zeros(2)}, [])
    index = json.loads((tmp_path / "checkpoint" / "latest.json").read_text())
    assert [e["step"] for e in index["checkpoints"]] == [8] and checkpoint.latest(tmp_path, RID) == 8
