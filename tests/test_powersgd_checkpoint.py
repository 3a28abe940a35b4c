"""PowerSGD's checkpointed state (issue 28): its error-feedback residuals are each rank's own (its
gradient minus the low-rank approximation), so each rank saves and restores its own, not its group's
first rank's; what is restored goes to the run's device, where the hook computes with it."""
from types import SimpleNamespace

import torch
from conftest import TINY, deep_update, launch_run
from torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook import PowerSGDState

from codist.algorithms.ddp_baselines import PowerSGD

RUN = deep_update(TINY, {"parallel": {"world_size": 2}, "algorithm": {"name": "powersgd", "start_iter": 2},
                         "train": {"steps": 12, "eval_every": 6, "checkpoint_every": 8}})


def restored(state: dict, device: str) -> dict:
    """`state` (a rank's checkpointed algorithm state) restored by PowerSGD on `device`."""
    algo = PowerSGD.__new__(PowerSGD)   # only its state: no model, no process group
    algo.ctx = SimpleNamespace(device=torch.device(device))
    algo.powersgd_state = PowerSGDState(process_group=None)
    algo.model = torch.nn.Sequential()   # (its BatchNorm statistics are test_bn_sync's)
    algo.load_rank_checkpoint_state(state)
    return algo.powersgd_state.error_dict


def test_each_rank_checkpoints_and_restores_its_own_residuals_on_the_runs_device(tmp_path):
    run = launch_run(tmp_path / "run", RUN, base={})
    step = run / "checkpoint" / "step-8"
    ranks = [torch.load(step / f"rank-{r}.pt", weights_only=True)["algorithm"] for r in (0, 1)]
    group = torch.load(step / "group-0.pt", weights_only=True)["algorithm"]
    assert "error_dict" not in group and {"p_memory_dict", "q_memory_dict"} <= set(group)
    (bucket, mine), = ranks[1]["error_dict"].items()
    assert not torch.equal(mine, ranks[0]["error_dict"][bucket])   # the ranks' residuals differ
    assert torch.equal(restored(ranks[1], "cpu")[bucket], mine)
    assert restored(ranks[1], "meta")[bucket].device.type == "meta"
