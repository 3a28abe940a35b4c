"""The papers' geometries, small: real runs with 3 and 4 models, 2 ranks per model, collective
groups of 3 and 4 ranks, temperatures other than 1, the ring topology, an alpha ramp and
optimizer-state averaging, each checked against a reference computed here: closed forms for the
bytes, numpy for averages and distillation terms, SGD written out by hand for an update.

Each run stops at update 3 (or 5) with a checkpoint after update 2 (or 4): the checkpoint holds
every model (and teacher, optimizer state) as the last update found them, so that update's loss
terms and result are recomputed from it and compared with the run's metrics row and final model.
"""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import TINY, deep_update, launch_run, read_rows, read_summary

from codist import config
from codist.runtime.comm import ring_all_reduce_bytes
from codist.workloads import build_workload

pytestmark = pytest.mark.slow
OVER = {"launch": {"oversubscribe": True}}   # up to 8 ranks on this machine's cores
STEPS = {"train": {"steps": 3, "eval_every": 1, "checkpoint_every": 2}}   # checkpoint after update 2


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("geometries")
    cache = {}

    def get(name, extra):
        if name not in cache:
            cache[name] = launch_run(root / name, deep_update(OVER, extra))
        return cache[name]
    return get


def workload_of(extra):
    cfg = config.validate(deep_update(TINY, extra))
    return build_workload(cfg.workload, cfg.seed), cfg


def group_state(run, step, group):
    return torch.load(run / "checkpoint" / f"step-{step}" / f"group-{group}.pt", weights_only=True)["algorithm"]


def model_from(w, state, train):
    m = w.build_model()
    m.load_state_dict(state)
    return m.train(train)


def param_bytes(w, buffers):
    m = w.build_model()
    n = sum(p.numel() for p in m.parameters())
    if buffers:
        n += sum(b.numel() for b in m.buffers() if b.is_floating_point())
    return 4 * n


def row(run, step, model):
    (r,) = [r for r in read_rows(run) if r["step"] == step and r["model"] == model]
    return r


# ---------------------------------------------------------------- references, written out here
def np_softmax(z):
    z = z - z.max(-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(-1, keepdims=True)


def np_log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def np_distill(student, target_probs, T):
    """T^2 x mean over the batch of KL(target || softmax(student / T)), in float64 (the run's own,
    in float32, is a difference of close numbers: it agrees to about 1e-5 relative)."""
    s = student.detach().double().numpy()
    q = np.asarray(target_probs, dtype=np.float64)
    return T * T * float((q * (np.log(q) - np_log_softmax(s / T))).sum(-1).mean())


def np_teacher_mean(teacher_logits, T):
    return np.mean([np_softmax(t.detach().double().numpy() / T) for t in teacher_logits], axis=0)


def np_ce(logits, y):
    return float(-np_log_softmax(logits.detach().double().numpy())[np.arange(len(y)), y.numpy()].mean())


# ---------------------------------------------------------------- codistillation, 3 models x 2 ranks
# topology all: each model's state is broadcast over a cross group of 3 ranks; T = 2; alpha ramps
# to 1 over 4 updates after burn-in, so update 2 runs with alpha = 2/4
ALL3 = {"parallel": {"world_size": 6, "models": 3}, "workload": {"norm": "none"}, **STEPS,
        "algorithm": {"name": "codistill", "temperature": 2.0, "alpha": 1.0, "alpha_ramp_steps": 4,
                      "burn_in": 1, "exchange_every": 1, "data": "disjoint"}}


def codistill_update_two(run, extra, model, alpha, T):
    """Update 2 of `model` redone from the checkpoint: on each of its ranks' batches, CE + alpha x
    the distillation term (teachers: the other models as exchanged before update 2, i.e. as the
    checkpoint after 2 updates holds them), gradients averaged over the ranks, then SGD with momentum
    and weight decay by hand. Returns (new parameters, [(CE, D) per rank])."""
    w, cfg = workload_of(extra)
    n, m = cfg.parallel.models, cfg.parallel.world_size // cfg.parallel.models
    states = [group_state(run, 2, g) for g in range(n)]
    teachers = [model_from(w, states[j]["model"], False) for j in range(n) if j != model]
    grads, terms = None, []
    for dp in range(m):
        x, y = w.train_stream("disjoint", model, n, cfg.train.batch_per_rank, m, dp, cfg.seed).batch(2)
        student = model_from(w, states[model]["model"], True)
        logits = student(x)
        with torch.no_grad():
            tl = [t(x) for t in teachers]
        q = torch.stack([F.softmax(t / T, -1) for t in tl]).mean(0)
        d = (q * (q.log() - F.log_softmax(logits / T, -1))).sum(-1).mean() * T * T
        ce = F.cross_entropy(logits, y)
        (ce + alpha * d).backward()
        g = [p.grad.clone() for p in student.parameters()]
        grads = g if grads is None else [a + b for a, b in zip(grads, g)]
        terms.append((np_ce(logits, y), np_distill(logits, np_teacher_mean(tl, T), T)))
    o, opt = cfg.optimizer, states[model]["optimizer"]
    new = []
    for i, (p, g) in enumerate(zip(model_from(w, states[model]["model"], True).parameters(), grads)):
        d_p = g / m + o.weight_decay * p.detach()
        buf = o.momentum * opt["state"][i]["momentum_buffer"] + d_p
        new.append(p.detach() - o.lr * buf)
    return new, terms


def test_codistill_three_models_two_ranks_each_tempered_ramped_update(runs):
    run = runs("all3", ALL3)
    T = 2.0
    for model in range(3):
        final = torch.load(run / f"model_{model}.pt", weights_only=True)
        got = [final[k] for k, _ in workload_of(ALL3)[0].build_model().named_parameters()]
        ramped, terms = codistill_update_two(run, ALL3, model, alpha=0.5, T=T)
        full, _ = codistill_update_two(run, ALL3, model, alpha=1.0, T=T)
        err = max(float((a - b).abs().max()) for a, b in zip(got, ramped))
        off = max(float((a - b).abs().max()) for a, b in zip(got, full))
        assert err < 1e-6 and off > 100 * max(err, 1e-8), (err, off)   # alpha 2/4, not the unramped 1
        # the row at update 3 holds update 2's terms, each the mean over the model's two ranks
        r = row(run, 3, str(model))
        assert r["distill_loss"] == pytest.approx(np.mean([d for _, d in terms]), rel=1e-4)
        assert r["train_loss"] == pytest.approx(np.mean([ce for ce, _ in terms]), rel=1e-4)


def test_codistill_broadcast_bytes_over_groups_of_three(runs):
    s = read_summary(runs("all3", ALL3))["comm"]["by_category"]
    w, _ = workload_of(ALL3)
    S, P = param_bytes(w, True), param_bytes(w, False)
    n, m, exchanges, steps = 3, 2, 2, 3               # exchanges before updates 1 and 2
    # per exchange and cross group, each of the n models' ranks is the root once and sends to n - 1
    assert s["param_exchange"]["sent_bytes_all_ranks"] == exchanges * m * n * (n - 1) * S
    assert s["param_exchange"]["recv_bytes_all_ranks"] == exchanges * m * n * (n - 1) * S
    assert s["param_exchange"]["between_group_sent_bytes"] == s["param_exchange"]["sent_bytes_all_ranks"]
    # gradients: a ring all-reduce over each model's 2 ranks, every update
    assert s["grad_allreduce"]["sent_bytes_all_ranks"] == steps * n * m * ring_all_reduce_bytes(P, m)
    assert s["grad_allreduce"]["between_group_sent_bytes"] == 0


# ---------------------------------------------------------------- codistillation, ring of 4 models
RING4 = {"parallel": {"world_size": 4, "models": 4}, "workload": {"norm": "none"}, **STEPS,
         "algorithm": {"name": "codistill", "topology": "ring", "temperature": 3.0, "burn_in": 1,
                       "exchange_every": 1, "data": "disjoint"}}


def test_ring_learns_from_the_previous_model_tempered(runs):
    run = runs("ring4", RING4)
    w, cfg = workload_of(RING4)
    T = 3.0
    states = [group_state(run, 2, g)["model"] for g in range(4)]
    for model in range(4):
        x, y = w.train_stream("disjoint", model, 4, cfg.train.batch_per_rank, 1, 0, cfg.seed).batch(2)
        student = model_from(w, states[model], True)(x)
        with torch.no_grad():
            t = {j: model_from(w, states[j], False)(x) for j in range(4)}
        prev, nxt = (model - 1) % 4, (model + 1) % 4
        expected = np_distill(student, np_teacher_mean([t[prev]], T), T)
        got = row(run, 3, str(model))["distill_loss"]
        assert got == pytest.approx(expected, rel=1e-4)
        assert got != pytest.approx(np_distill(student, np_teacher_mean([t[nxt]], T), T), rel=1e-2)
        assert got != pytest.approx(np_distill(student, np_teacher_mean([t[prev]], 1.0), T), rel=1e-2)
        others = [t[j] for j in range(4) if j != model]
        assert got != pytest.approx(np_distill(student, np_teacher_mean(others, T), T), rel=1e-2)
    # each exchange: every rank sends its state to the next model's rank and receives the previous one's
    s = read_summary(run)["comm"]["by_category"]["param_exchange"]
    assert s["sent_bytes_all_ranks"] == s["recv_bytes_all_ranks"] == 2 * 4 * param_bytes(w, True)
    assert s["between_group_sent_bytes"] == s["sent_bytes_all_ranks"]


# ---------------------------------------------------------------- MA-DNN, 4 models x 2 ranks
# one averaging round after update 4 (with BatchNorm statistics and momentum); the same run with tau
# 5 has not averaged yet when it checkpoints after update 4: its checkpoint holds the four local
# models (group files) and each rank's own running statistics (rank files)
MA = {"parallel": {"world_size": 8, "models": 4},
      "algorithm": {"name": "model_average", "tau": 4, "average_optimizer_state": True},
      "train": {"steps": 5, "eval_every": 5, "checkpoint_every": 4}}
LOCAL = deep_update(MA, {"algorithm": {"tau": 5}})


def rank_state(run, step, rank):
    return torch.load(run / "checkpoint" / f"step-{step}" / f"rank-{rank}.pt", weights_only=True)["algorithm"]


def test_model_average_is_the_mean_over_models_not_ranks(runs):
    ma, local = runs("ma", MA), runs("ma_local", LOCAL)
    before = [group_state(local, 4, g) for g in range(4)]
    after = [group_state(ma, 4, g) for g in range(4)]
    params = [k for k, _ in workload_of(MA)[0].build_model().named_parameters()]
    assert all(not torch.equal(before[0]["model"][k], before[1]["model"][k]) for k in params)
    for k in params:
        mean = np.mean([b["model"][k].double().numpy() for b in before], axis=0)
        for a in after:
            np.testing.assert_allclose(a["model"][k].double().numpy(), mean, rtol=1e-5, atol=1e-7)
    for i in before[0]["optimizer"]["state"]:
        mean = np.mean([b["optimizer"]["state"][i]["momentum_buffer"].double().numpy() for b in before], axis=0)
        for a in after:
            np.testing.assert_allclose(a["optimizer"]["state"][i]["momentum_buffer"].double().numpy(), mean,
                                       rtol=1e-5, atol=1e-7)
    # running statistics: each rank's own until the round, then the mean over all 8 ranks (a model's
    # group agrees first, then the models average)
    stats = [k for k in before[0]["model"] if "running" in k]
    ranks = [rank_state(local, 4, r)["norm_statistics"] for r in range(8)]
    assert len(stats) == len(ranks[0]) > 0
    for j, k in enumerate(stats):
        mean = np.mean([r[j].double().numpy() for r in ranks], axis=0)
        for g, a in enumerate(after):
            np.testing.assert_allclose(a["model"][k].double().numpy(), mean, rtol=1e-5, atol=1e-7)
            np.testing.assert_allclose(rank_state(ma, 4, 2 * g + 1)["norm_statistics"][j].double().numpy(), mean,
                                       rtol=1e-5, atol=1e-7)


def test_model_average_bytes_over_groups_of_four(runs):
    s = read_summary(runs("ma", MA))["comm"]["by_category"]["model_average"]
    w, _ = workload_of(MA)
    world, K, m, rounds = 8, 4, 2, 1
    stats = param_bytes(w, True) - param_bytes(w, False)          # BatchNorm running means and variances
    between = ring_all_reduce_bytes(param_bytes(w, True), K) + ring_all_reduce_bytes(param_bytes(w, False), K)
    assert s["between_group_sent_bytes"] == rounds * world * between    # states, then momentum buffers
    assert s["sent_bytes_all_ranks"] == rounds * world * (between + ring_all_reduce_bytes(stats, m))


# ---------------------------------------------------------------- EC-DNN, 4 models, T = 2
EC4 = {"parallel": {"world_size": 4, "models": 4}, **STEPS,
       "algorithm": {"name": "ensemble_compress", "tau": 2, "temperature": 2.0, "distill_weight": 0.6}}


def test_ec_dnn_four_models_compresses_the_tempered_ensemble(runs):
    run = runs("ec4", EC4)
    w, cfg = workload_of(EC4)
    T = 2.0
    states = [group_state(run, 2, g) for g in range(4)]    # right after the round at update 2
    members = [model_from(w, s["model"], False) for s in states]
    final_g = torch.load(run / "model_G.pt", weights_only=True)   # no round at update 3: still round 2's
    for k, v in states[0]["model"].items():
        for j in range(4 if v.is_floating_point() else 0):   # states go as floats: not BatchNorm's counters
            assert torch.equal(final_g[f"members.{j}.{k}"], states[j]["model"][k])
    for model in range(4):
        x, y = w.train_stream("disjoint", model, 4, cfg.train.batch_per_rank, 1, 0, cfg.seed).batch(2)
        student = model_from(w, states[model]["model"], True)(x)
        with torch.no_grad():
            probs = np.mean([np_softmax(m(x).double().numpy()) for m in members], axis=0)
        target = np_softmax(np.log(probs) / T)          # G's log-probabilities, tempered
        got = row(run, 3, str(model))["distill_loss"]
        assert got == pytest.approx(np_distill(student, target, T), rel=1e-4)
        assert got != pytest.approx(np_distill(student, probs, T), rel=1e-2)
    s = read_summary(run)["comm"]["by_category"]["param_exchange"]
    rounds, world, K = 1, 4, 4
    assert s["sent_bytes_all_ranks"] == rounds * world * (K - 1) * param_bytes(w, True)   # all-gather over 4
