"""The communication meter's accounting at group sizes other than 2 (issue 29): every byte formula of
codist.runtime.comm at p = 3 and 4 on a real 4-rank gloo world, each hooked torch.distributed entry point
counted once with its payload, tier and category, what the meter did not see, and the counters'
round trip through a checkpoint tensor and summary.json's comm section. Expected values are worked
out by hand in the comments (the module docstring's formulas), never by calling the meter."""
import datetime
import inspect
import os
import socket
import traceback

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from codist.runtime import comm
from codist.runtime.comm import CATEGORIES, CollectiveDeviceError, CommMeter, Counter, summarize

# 4 ranks: model 0 holds ranks 0, 1, 2 (a group of three), model 1 holds rank 3
MODEL_OF = [0, 0, 0, 1]
B = 1200   # payload bytes: divisible by 3 and 4, so the formulas' integer division is exact


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _counts(meter):
    return {f"{cat}/{tier}": (c.sent, c.recv, c.calls) for (cat, tier), c in meter.counts.items()}


def _formulas(rank, g3):
    """meter.record alone (no collective runs) for each formula, on a fresh meter each."""
    got = {}

    def one(name, **kw):
        m = CommMeter(rank, MODEL_OF)
        m.current = "eval"
        try:
            m.record(**kw)
            got[name] = _counts(m)
        except ValueError as e:
            got[name] = str(e)
    one("all_reduce_world", op="all_reduce", payload=B)
    one("broadcast_world_src2", op="broadcast", payload=B, src=2)
    one("all_gather_world", op="all_gather", payload=B)
    one("reduce_scatter_world", op="reduce_scatter", payload=B)
    if g3 is not None:
        one("all_reduce_g3", op="all_reduce", payload=B, group=g3)
        one("all_gather_g3", op="all_gather", payload=B, group=g3)
        one("reduce_scatter_g3", op="reduce_scatter", payload=B, group=g3)
    one("send_to_3", op="send", payload=B, peer=3)
    one("recv_from_0", op="recv", payload=B, peer=0)
    one("barrier", op="barrier", payload=B)
    one("barrier_eval", op="barrier", payload=0, category="eval")
    one("gossip", op="gossip", payload=B)
    m = CommMeter(rank, MODEL_OF)
    m.record("all_reduce", B, collectives=3)
    m.record("all_reduce", B, category="model_average")
    got["seen_world_after_4"] = m.seen[dist.distributed_c10d._get_default_group()]
    got["twice"] = _counts(m)
    return got


def _hooked(rank, g3, gx, idle):
    """Real collectives through the hooks, in order; the meter's counters and unseen calls after."""
    got = {}
    comm.install_hooks()
    dist.broadcast(torch.ones(25), src=0)                  # before the meter exists: counted as setup
    meter = CommMeter(rank, MODEL_OF)
    meter.install_hooks()
    got["setup"] = _counts(meter)
    meter.counts.clear()
    if g3 is not None:                                     # ranks 0-2: all-reduce of 300 floats over three
        meter.all_reduce(torch.ones(300), group=g3, category="grad_allreduce")
    out = torch.zeros(4 * 300)
    dist.all_gather_into_tensor(out, torch.full((300,), float(rank)))   # under the current category
    got["gathered"] = out.view(4, 300)[:, 0].tolist()
    with meter.category("model_average"):
        try:   # counted before it runs: the count stands whether or not gloo has reduce_scatter
            dist.reduce_scatter_tensor(torch.zeros(300), torch.ones(1200))
        except RuntimeError:
            pass
    with meter.category("prediction_exchange"):
        if rank == 2:
            dist.send(torch.ones(300), 3)                  # send calls isend: one count
        elif rank == 3:
            dist.recv(torch.empty(300), 2)
    if rank in (0, 1):                                     # a pair inside model 0, one batch
        meter.exchange(torch.ones(300), 1 - rank, torch.empty(300), 1 - rank, category="param_exchange")
    ts = [torch.ones(200), torch.arange(50, dtype=torch.int64)]   # 800 + 400 bytes, two dtype buckets
    if gx is not None:                                     # ranks 2 and 3; group rank 0 is global rank 2
        with meter.category("eval"):
            dist._broadcast_coalesced(gx, ts, 1 << 20, 0)
        got["coalesced_seen"] = meter.seen[gx]
        with meter.category("setup"):   # one dtype: one broadcast, one call; src defaults to group rank 0
            dist._broadcast_coalesced(gx, [torch.ones(25)], 1 << 20)
        got["coalesced_seen_one_bucket"] = meter.seen[gx]
        with meter.category("eval"):
            dist._verify_params_across_processes(gx, [torch.ones(3)])
    meter.barrier()
    # the hooks keep torch's names and signatures (whoever inspects torch.distributed sees torch's)
    got["signatures"] = [(f.__name__, list(inspect.signature(f).parameters)[:2])
                         for f in (dist.all_reduce, dist.broadcast, dist.send)]
    got["category_after"] = meter.current
    got["counts"] = _counts(meter)
    got["unseen_before"] = meter.unseen_calls()
    if gx is not None:
        gx.allreduce([torch.ones(3)]).wait()               # a process group's own method: no hook sees it
    idle.allreduce([torch.ones(3)]).wait()                 # the same on a group the meter never saw
    got["unseen_after"] = meter.unseen_calls()
    got["as_tensor_unseen"] = meter.as_tensor()[CATEGORIES.index("unseen")].tolist()
    # the meter's own wrappers are synchronous unless asked: each returns None, its result in place
    parts = [torch.zeros(2) for _ in range(4)]
    meter.counts.clear()
    returned = [meter.all_reduce(torch.ones(2), category="grad_allreduce"),
                meter.broadcast(torch.ones(2), src=0, category="param_exchange"),
                meter.all_gather(parts, torch.full((2,), float(rank)), category="eval"), meter.barrier()]
    got["synchronous"] = [r is None for r in returned]
    got["parts"] = [float(t[0]) for t in parts]
    got["wrapper_counts"] = _counts(meter)
    CommMeter(rank, MODEL_OF, torch.device("meta")).install_hooks()   # now the active meter: CPU is the wrong device
    calls = [lambda: dist.all_reduce(torch.ones(2))]
    if gx is not None:   # the C++ bindings' wrappers check too, before anything runs
        calls += [lambda: dist._broadcast_coalesced(gx, [torch.ones(2)], 1 << 20, 0),
                  lambda: dist._verify_params_across_processes(gx, [torch.ones(2)])]
    got["refused"] = []
    for call in calls:
        try:
            call()
            got["refused"].append(False)
        except CollectiveDeviceError:
            got["refused"].append(True)
    return got


def _rank(rank, port, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    # a collective a rank never joins fails after 20 s, not gloo's 30 minutes (a mutant can strand a recv)
    dist.init_process_group("gloo", rank=rank, world_size=4, timeout=datetime.timedelta(seconds=20))
    g3, gx = dist.new_group([0, 1, 2]), dist.new_group([2, 3])
    idle = dist.new_group([0, 1, 2, 3])   # unused until its own method runs: then that call is unseen
    g3 = g3 if rank < 3 else None
    gx = gx if rank >= 2 else None
    for part in (_formulas, _hooked):
        try:
            out[(rank, part.__name__)] = part(rank, g3) if part is _formulas else part(rank, g3, gx, idle)
        except BaseException:
            out[(rank, part.__name__)] = traceback.format_exc()
    dist.barrier()
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def world():
    with mp.Manager() as manager:
        out = manager.dict()
        # forked: the ranks need only what this process imported; tiny tensors and gloo only
        mp.start_processes(_rank, args=(_free_port(), out), nprocs=4, start_method="fork")
        got = dict(out)
    for key, value in got.items():
        if isinstance(value, str):
            pytest.fail(f"rank {key[0]} {key[1]}: {value}", pytrace=False)
    return got


def test_category_blocks_restore_the_previous_one_and_reject_unknown_names():
    m = CommMeter(0, [0])
    with pytest.raises(KeyError):
        with m.category("eval"):
            assert m.current == "eval"
            raise KeyError("inside")
    assert m.current == "setup"
    with pytest.raises(ValueError, match="unknown communication category 'gossip'"):
        with m.category("gossip"):
            pass
    assert m.current == "setup"


def test_tiers_and_device_check_without_a_world():
    m = CommMeter(0, [0, 0, 1], torch.device("meta"))
    assert m._tier([0, 1]) == "within" and m._tier([1]) == "within" and m._tier([1, 2]) == "between"
    m.check_device("all_reduce", [torch.empty(2, device="meta")])
    with pytest.raises(CollectiveDeviceError) as e:
        m.check_device("broadcast", [torch.empty(2, device="meta"), torch.zeros(2)])
    assert str(e.value).startswith("codist: a 'setup' broadcast at tests/test_comm_accounting.py:")
    assert "got a tensor on cpu, but this run's collectives need the run's device meta" in str(e.value)


def test_a_group_that_does_not_number_its_collectives_gives_no_count():
    class Unnumbered:
        def _get_sequence_number_for_group(self):
            raise RuntimeError("this backend does not number its collectives")
    assert comm._numbered(Unnumbered(), lambda: "out") == ("out", None)
    assert comm._numbered(object(), lambda: "out") == ("out", None)


def test_counters_round_trip_through_the_checkpoint_tensor_and_sum_by_category_and_tier():
    m = CommMeter(0, [0, 1])
    m.counts[("grad_allreduce", "within")] = Counter(10, 11, 1)
    m.counts[("param_exchange", "between")] = Counter(20, 21, 2)
    m.counts[("eval", "between")] = Counter(40, 41, 4)
    m.counts[("control", "within")] = Counter(0, 0, 3)
    t = m.as_tensor()
    assert t.shape == (len(CATEGORIES), 2, 3) and t.dtype == torch.int64
    assert t[CATEGORIES.index("param_exchange"), 1].tolist() == [20, 21, 2]
    assert t[CATEGORIES.index("control"), 0].tolist() == [0, 0, 3]
    back = CommMeter(0, [0, 1])
    back.counts[("setup", "within")] = Counter(1, 1, 1)          # replaced, not added to
    back.load_tensor(t)
    assert dict(back.counts) == dict(m.counts)
    old = CommMeter(0, [0, 1])
    old.load_tensor(t[:-1])                                          # a checkpoint from before "unseen"
    assert dict(old.counts) == dict(m.counts)
    # training categories only by default (eval and control left out); a tier narrows it
    assert m.sent_bytes() == 30
    assert m.sent_bytes(tier="between") == 20 and m.sent_bytes(tier="within") == 10
    assert m.sent_bytes(categories=("eval",)) == 40


def test_summary_divides_by_ranks_and_updates_and_flags_unseen_calls(capsys):
    t = torch.zeros(len(CATEGORIES), 2, 3, dtype=torch.int64)
    t[CATEGORIES.index("grad_allreduce"), 0] = torch.tensor([800, 700, 8])
    t[CATEGORIES.index("model_average"), 0] = torch.tensor([100, 90, 1])
    t[CATEGORIES.index("model_average"), 1] = torch.tensor([300, 310, 3])
    t[CATEGORIES.index("eval"), 1] = torch.tensor([5000, 5000, 2])
    t[CATEGORIES.index("control"), 0] = torch.tensor([0, 0, 6])      # calls only: still listed
    t[CATEGORIES.index("control"), 1] = torch.tensor([0, 0, 6])
    t[CATEGORIES.index("setup"), 1] = torch.tensor([0, 0, 2])        # calls between groups only: listed too
    s = summarize(t, world_size=4, updates=5)
    assert set(s["by_category"]) == {"grad_allreduce", "model_average", "eval", "control", "setup"}
    assert s["by_category"]["control"]["calls_all_ranks"] == 12
    ma = s["by_category"]["model_average"]
    assert ma == {"sent_bytes_all_ranks": 400, "recv_bytes_all_ranks": 400, "within_group_sent_bytes": 100,
                  "between_group_sent_bytes": 300, "calls_all_ranks": 4,
                  "sent_bytes_per_rank_per_update": 400 / 4 / 5}
    assert s["training_sent_bytes_all_ranks"] == 1200                 # eval is not training traffic
    assert s["training_sent_bytes_per_rank_per_update"] == 1200 / 4 / 5
    assert s["between_group_sent_bytes_per_rank_per_update"] == 300 / 4 / 5
    assert s["unseen_collectives_all_ranks"] == 0 and capsys.readouterr().err == ""
    t[CATEGORIES.index("unseen"), 0, 2] = 2
    t[CATEGORIES.index("unseen"), 1, 2] = 1
    s = summarize(t, world_size=4, updates=5)
    assert s["unseen_collectives_all_ranks"] == 3
    assert s["by_category"]["unseen"]["calls_all_ranks"] == 3
    assert "did not see 3 collective call(s)" in capsys.readouterr().err


def test_byte_formulas_at_three_and_four_ranks(world):
    f = world[(0, "_formulas")]
    # world all-reduce, p = 4: 2(p-1)/p B = 6/4 x 1200 = 1800 each way; spans both models: between
    assert f["all_reduce_world"] == {"eval/between": (1800, 1800, 1)}
    # broadcast from global rank 2: rank 0 receives B, sends nothing; the root sends (p-1) B = 3600
    assert f["broadcast_world_src2"] == {"eval/between": (0, 1200, 1)}
    assert world[(2, "_formulas")]["broadcast_world_src2"] == {"eval/between": (3600, 0, 1)}
    # all-gather, B = one rank's part: (p-1) B = 3600; reduce-scatter, B = the input: (p-1)/p B = 900
    assert f["all_gather_world"] == {"eval/between": (3600, 3600, 1)}
    assert f["reduce_scatter_world"] == {"eval/between": (900, 900, 1)}
    # the group of three inside model 0: 4/3 B = 1600, 2 B = 2400, 2/3 B = 800, within
    assert f["all_reduce_g3"] == {"eval/within": (1600, 1600, 1)}
    assert f["all_gather_g3"] == {"eval/within": (2400, 2400, 1)}
    assert f["reduce_scatter_g3"] == {"eval/within": (800, 800, 1)}
    # point to point: the tier is that of the two ends (rank 0 -> 3 crosses models; 0 <- 0 does not)
    assert f["send_to_3"] == {"eval/between": (1200, 0, 1)}
    assert f["recv_from_0"] == {"eval/within": (0, 1200, 1)}
    # a barrier carries no bytes and is control traffic unless a category is named
    assert f["barrier"] == {"control/between": (0, 0, 1)}
    assert f["barrier_eval"] == {"eval/between": (0, 0, 1)}
    assert f["gossip"] == "the meter has no byte formula for collective 'gossip'"
    # counts add up per (category, tier); `collectives` is what the group numbered for it (3 + 1)
    assert f["twice"] == {"setup/between": (1800, 1800, 1), "model_average/between": (1800, 1800, 1)}
    assert f["seen_world_after_4"] == 4


def test_each_hooked_collective_is_counted_once_with_its_payload(world):
    h = {r: world[(r, "_hooked")] for r in range(4)}
    # the broadcast before the meter existed: setup, root rank 0 sent 3 x 100 B, the others got 100 B
    assert h[0]["setup"] == {"setup/between": (300, 0, 1)}
    assert h[3]["setup"] == {"setup/between": (0, 100, 1)}
    assert [h[0]["gathered"]] == [[0.0, 1.0, 2.0, 3.0]]          # the collectives really ran
    # all_gather_into_tensor: B = the 1200-byte input, 3 x 1200 each way (category: setup, the current one)
    # reduce_scatter_tensor: B = the 4800-byte input, 3/4 x 4800 = 3600 each way
    # rank 0: the all-reduce over three (1600), the pair exchange inside model 0 (1200 each way), a barrier
    assert h[0]["counts"] == {"grad_allreduce/within": (1600, 1600, 1), "setup/between": (3600, 3600, 1),
                              "model_average/between": (3600, 3600, 1), "param_exchange/within": (1200, 1200, 2),
                              "control/between": (0, 0, 1)}
    # rank 2: sends 1200 B to rank 3 (model 1: between) once, though send runs through isend;
    # _broadcast_coalesced from its group rank 0 (global 2) to one other rank: 800 + 400 B sent;
    # DDP's parameter check: 0-byte control calls, as many as the group ran (besides the world barrier)
    c2, c3 = h[2]["counts"], h[3]["counts"]
    assert c2["prediction_exchange/between"] == (1200, 0, 1)
    assert c3["prediction_exchange/between"] == (0, 1200, 1)
    assert c2["eval/between"] == (1200, 0, 1) and c3["eval/between"] == (0, 1200, 1)
    assert h[2]["coalesced_seen"] == 2 and h[3]["coalesced_seen"] == 2   # one broadcast per dtype bucket
    assert h[2]["coalesced_seen_one_bucket"] == h[3]["coalesced_seen_one_bucket"] == 3
    assert h[0]["signatures"] == [("all_reduce", ["tensor", "op"]), ("broadcast", ["tensor", "src"]),
                                  ("send", ["tensor", "dst"])]
    assert c2["control/between"][:2] == (0, 0) and c2["control/between"][2] >= 2
    assert c2["control/between"] == c3["control/between"]
    assert "grad_allreduce/within" not in c3 and "param_exchange/within" not in c2
    assert all(h[r]["category_after"] == "setup" for r in range(4))      # each category block restored
    # everything the groups ran went through a hook; a group's own method did not
    assert [h[r]["unseen_before"] for r in range(4)] == [0, 0, 0, 0]
    assert [h[r]["unseen_after"] for r in range(4)] == [1, 1, 2, 2]
    assert h[2]["as_tensor_unseen"] == [[0, 0, 2], [0, 0, 0]]
    # setup on ranks 2, 3: the world all-gather (3600 each way) and the one-bucket broadcast of 100 B from rank 2
    assert c2["setup/between"] == (3700, 3600, 2) and c3["setup/between"] == (3600, 3700, 2)
    assert h[0]["refused"] == [True] and h[2]["refused"] == h[3]["refused"] == [True, True, True]
    assert all(h[r]["synchronous"] == [True] * 4 and h[r]["parts"] == [0.0, 1.0, 2.0, 3.0] for r in range(4))
    # each wrapper counts under the category it is given: 8 B over 4 ranks, all between models
    # (all-reduce 2 x 3/4 x 8 = 12; broadcast root 3 x 8 = 24; all-gather 3 x 8 = 24)
    assert h[0]["wrapper_counts"] == {"grad_allreduce/between": (12, 12, 1), "param_exchange/between": (24, 0, 1),
                                      "eval/between": (24, 24, 1), "control/between": (0, 0, 1)}
