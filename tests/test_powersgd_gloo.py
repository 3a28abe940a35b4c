"""PowerSGD on gloo with a model over DDP's first bucket (1 MiB): torch's hook waits inside its
futures' callbacks (pytorch/pytorch#48478), which gloo runs on its 2 worker threads, so with
several buckets it hung (1 rank) or aborted on a collective mismatch (2 ranks: "op.preamble.length
<= op.nbytes"); codist reduces such a model in one bucket on gloo (ddp_baselines.PowerSGD.ddp_options).
Its checkpoint right after DDP's bucket rebuild (update 2, which DDP's log records only at the
next forward) carries the rebuilt layout, and a run resumed there equals the uninterrupted one; a
resumed DDP's checkpoints name the layout it was given until its own rebuild."""
import shutil

import pytest
import torch
from conftest import comparable, launch_run, read_rows, read_summary

pytestmark = pytest.mark.slow
# resnet8 of width 32: 1.19 MB of parameters. hang_timeout_s: a hung rank fails the run in a minute.
RUN = {"workload": {"width": 32}, "parallel": {"world_size": 2}, "algorithm": {"name": "powersgd", "start_iter": 2},
       "train": {"steps": 4, "eval_every": 2, "checkpoint_every": 2}, "launch": {"hang_timeout_s": 60}}
BUFFERS = ("running_mean", "running_var", "num_batches_tracked")


def test_powersgd_on_gloo_reduces_a_model_over_1_mib_in_one_bucket_and_resumes_after_the_rebuild(tmp_path):
    ref = launch_run(tmp_path / "ref", RUN)
    saved = torch.load(ref / "checkpoint" / "step-2" / "group-0.pt", weights_only=True)["algorithm"]
    params = [k for k in saved["model"] if not k.endswith(BUFFERS)]
    assert sum(saved["model"][k].numel() * 4 for k in params) > 2**20   # over DDP's first bucket
    assert len(saved["ddp_buckets"]) == 1 and sorted(saved["ddp_buckets"][0]) == list(range(len(params)))
    assert saved["ddp_buckets"][0] != sorted(saved["ddp_buckets"][0], reverse=True)   # not DDP's first layout

    resumed = tmp_path / "resumed"
    shutil.copytree(ref, resumed)
    for pattern in ("summary.json", "metrics.jsonl", "model_*.pt", "val_predictions_*.npy"):
        for path in resumed.glob(pattern):
            path.unlink()
    launch_run(resumed, RUN)
    assert read_summary(resumed)["resumed_from_step"] == 2
    drop_wall = [comparable(read_rows(run)) for run in (ref, resumed)]
    assert drop_wall[0] == drop_wall[1]
    models = sorted(p.name for p in ref.glob("model_*.pt"))
    assert models and models == sorted(p.name for p in resumed.glob("model_*.pt"))
    for file in models:
        a, b = (torch.load(run / file, weights_only=True) for run in (ref, resumed))
        assert all(torch.equal(a[k], b[k]) for k in a), file


def _layouts_around_a_relayout(rank, out, width):
    """One gloo rank: codist's PowerSGD set up as a run sets it up (a resnet8 of `width`), 3 updates,
    its checkpoint state loaded back (the resumed run's DDP built with the saved layout), then the
    layout each checkpoint names before and after that DDP's first 3 updates."""
    import torch.distributed as dist

    from codist import config
    from codist.algorithms import TrainContext, build_algorithm
    from codist.runtime.comm import CommMeter
    from codist.runtime.distributed import topology
    from codist.workloads import build_workload
    from conftest import TINY, deep_update
    torch.set_num_threads(1)
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    cfg = config.validate(deep_update(TINY, {"algorithm": {"name": "powersgd", "start_iter": 2},
                                             "workload": {"width": width}}))
    topo = topology(1)
    algo = build_algorithm(TrainContext(cfg, topo, CommMeter(0, topo.model_of()),
                                        build_workload(cfg.workload, cfg.seed), torch.device("cpu")))
    algo.setup()

    def update(i):
        algo.optimizer.zero_grad()
        algo.update.forward_module(torch.randn(4, 3, 32, 32, generator=torch.Generator().manual_seed(i))).sum().backward()
        algo.optimizer.step()
    layouts = []
    for i in range(3):
        update(i)
        layouts.append(algo.checkpoint_state()["ddp_buckets"])
    algo.load_checkpoint_state(algo.checkpoint_state())
    for i in range(3, 6):
        layouts.append(algo.checkpoint_state()["ddp_buckets"])
        update(i)
    layouts.append(algo.checkpoint_state()["ddp_buckets"])
    torch.save(layouts, out)
    dist.destroy_process_group()


# width 8: about 0.07 MiB of gradients; width 64: 4.5 MiB, so one bucket needs a cap of the whole model (half of
# it and 1 MiB more would split it)
@pytest.mark.parametrize("width", [8, 64])
def test_checkpoints_name_the_rebuilt_layout_from_update_2_on_and_a_resumed_ddps_given_one(tmp_path, width):
    import torch.multiprocessing as mp
    mp.spawn(_layouts_around_a_relayout, args=(tmp_path / "layouts.pt", width), nprocs=1)
    first, second, third, *resumed = torch.load(tmp_path / "layouts.pt", weights_only=True)
    assert first == [] and second and len(second) == 1   # rebuilt in update 2's forward: one bucket
    assert third == second and resumed == [second] * 4   # the resumed DDP: given, then its own rebuild
