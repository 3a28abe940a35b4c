"""A rank's checkpoint file that lacks what a rank restores from it (another file copied in its
place: a group file as rank-0.pt) stops the resume with one line naming the file and the key, not a
bare KeyError (issue 42): every read of rank-<r>.pt sits inside checkpoint.reading."""
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from codist.rank.checkpoint import CheckpointError
from codist.rank.train import restore_rank


def a_run(out: Path, rank: int) -> SimpleNamespace:
    restored = {}
    algo = SimpleNamespace(load_rank_checkpoint_state=lambda state: restored.setdefault("algorithm", state))
    meter = SimpleNamespace(load_tensor=lambda t: restored.setdefault("meter", t))
    return SimpleNamespace(out=out, topo=SimpleNamespace(rank=rank), algo=algo, meter=meter,
                           device=torch.device("cpu"), timers=None, rows=None, restored=restored)


def test_a_group_file_in_place_of_the_rank_file_is_one_line_naming_both(tmp_path):
    group_file = {"run_id": "r", "step": 8, "group": 0, "algorithm": {"model": {}, "optimizer": {}}}
    with pytest.raises(CheckpointError) as e:
        restore_rank(a_run(tmp_path, 1), 8, group_file)
    rank_file = tmp_path / "checkpoint" / "step-8" / "rank-1.pt"
    assert str(e.value) == (f"{rank_file}: its state has no 'rng' (written by another codist version?); "
                            f"delete {rank_file.parent.parent} to start over")


@pytest.mark.parametrize("lacks", ["meter", "timers", "rows"])
def test_each_key_a_rank_restores_is_read_inside_the_check(tmp_path, lacks):
    state = {"rng": torch.get_rng_state(), "meter": torch.zeros(3), "timers": {"train_s": 1.0}, "rows": "[]",
             "algorithm": {}}
    run = a_run(tmp_path, 0)
    restore_rank(run, 4, state)
    assert run.timers == {"train_s": 1.0} and run.rows == [] and torch.equal(run.restored["meter"], torch.zeros(3))
    del state[lacks]
    with pytest.raises(CheckpointError, match=f"rank-0.pt: its state has no '{lacks}'"):
        restore_rank(a_run(tmp_path, 0), 4, state)
