"""A real run's checkpoint with one byte flipped inside a tensor (issue 42): the file still loads, so
only its sha256 in latest.json tells; the rerun resumes from the previous checkpoint, saying so in one
line, and ends as the uninterrupted run did; with no good checkpoint left it fails naming the file."""
import json
import shutil

import pytest
import torch
from conftest import TINY, comparable, deep_update, launch_run, read_rows

from codist import config
from codist.launching import launch

pytestmark = pytest.mark.slow   # real runs: 1 rank, 6 updates each

RUN = deep_update(TINY, {"train": {"checkpoint_every": 2}})   # checkpoints at updates 2 and 4 (none at the end)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return launch_run(tmp_path_factory.mktemp("digests") / "ref", RUN)


def flip_a_byte_inside_a_tensor(path):
    """One bit of the first weight tensor's stored bytes (a stored zip entry of torch.save's format)."""
    state = torch.load(path, weights_only=True)
    model = state["algorithm"]["model"] if "model" in state["algorithm"] else state["algorithm"]
    weight = next(v for k, v in model.items() if torch.is_tensor(v) and v.is_floating_point() and v.numel() >= 64)
    data = bytearray(path.read_bytes())
    at = bytes(data).index(weight.contiguous().numpy().tobytes()) + weight.numel() * weight.element_size() // 2
    data[at] ^= 0x10
    path.write_bytes(bytes(data))


def unfinished_copy(ref, to):
    shutil.copytree(ref, to)
    (to / "summary.json").unlink()
    return to


def test_a_flipped_byte_in_the_newest_checkpoint_resumes_from_the_one_before(reference, tmp_path):
    out = unfinished_copy(reference, tmp_path / "flipped")
    bad = out / "checkpoint" / "step-4" / "group-0.pt"
    flip_a_byte_inside_a_tensor(bad)
    torch.load(bad, weights_only=True)   # still a valid file: only the digest can tell
    assert launch.run(config.validate(RUN), out) == 0
    assert json.loads((out / "summary.json").read_text())["resumed_from_step"] == 2
    assert comparable(read_rows(out)) == comparable(read_rows(reference))
    log = (out / "logs" / "rank0.log").read_text()
    lines = [line for line in log.splitlines() if "not used" in line]
    assert len(lines) == 1 and lines[0].startswith(f"codist: checkpoint at step 4 not used: {bad}: sha256 ")
    assert lines[0].endswith("recorded when it was written; resuming from the checkpoint at step 2")


def test_with_no_good_checkpoint_left_the_run_fails_naming_the_files(reference, tmp_path):
    out = unfinished_copy(reference, tmp_path / "both")
    for step in (2, 4):
        flip_a_byte_inside_a_tensor(out / "checkpoint" / f"step-{step}" / "group-0.pt")
    assert launch.run(config.validate(RUN), out) != 0
    error = json.loads((out / ".ranks" / "rank-0.json").read_text())["error"]
    for step in (2, 4):
        assert f"checkpoint at step {step} not used: {out / 'checkpoint' / f'step-{step}' / 'group-0.pt'}: sha256" in error
    assert f"no good checkpoint is left: delete {out / 'checkpoint'} to start over" in error
    assert not (out / "summary.json").exists()


@pytest.mark.parametrize("vouched", [{}, {"rank-0.pt"}], ids=["empty", "rank-file-only"])
def test_an_index_entry_that_does_not_vouch_for_the_damaged_file_is_not_resumed(reference, tmp_path, vouched):
    """Issue 52 N3: the newest entry's sha256 map {} (or one naming rank-0.pt only) vouched for nothing, and the
    damaged group-0.pt was resumed without a word; now the run falls back to step 2 and says why."""
    out = unfinished_copy(reference, tmp_path / "unvouched")
    index = out / "checkpoint" / "latest.json"
    info = json.loads(index.read_text())
    info["checkpoints"][0]["sha256"] = {k: v for k, v in info["checkpoints"][0]["sha256"].items() if k in vouched}
    index.write_text(json.dumps(info))
    flip_a_byte_inside_a_tensor(out / "checkpoint" / "step-4" / "group-0.pt")
    assert launch.run(config.validate(RUN), out) == 0
    assert json.loads((out / "summary.json").read_text())["resumed_from_step"] == 2
    assert comparable(read_rows(out)) == comparable(read_rows(reference))
    (line,) = [ln for ln in (out / "logs" / "rank0.log").read_text().splitlines() if "not used" in ln]
    assert f"records no sha256 for it (expected one for each file the ranks load: group-0.pt, rank-0.pt)" in line
