"""Each algorithm, launched for real on 2 CPU ranks: equivalences, guarantees, exact bytes."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import launch_run, read_rows, read_summary

from codist import config
from codist.algorithms.state import OutputEnsemble, flat_state
from codist.runtime.comm import ring_all_reduce_bytes
from codist.runtime.data import eval_batches, model_data
from codist.workloads import build_workload
from conftest import TINY, deep_update

pytestmark = pytest.mark.slow
TWO_MODELS = {"parallel": {"world_size": 2, "models": 2}}


def workload_of(extra):
    return build_workload(config.validate(deep_update(TINY, extra)).workload, 0)


def state_bytes(extra, buffers=True) -> int:
    return flat_state(workload_of(extra).build_model(), buffers).numel() * 4


def load(run, name):
    return torch.load(run / f"model_{name}.pt", weights_only=True)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Runs shared by several tests (each launch costs ~15 s of process start-up)."""
    root = tmp_path_factory.mktemp("algorithms")
    cache = {}

    def get(name, extra):
        if name not in cache:
            cache[name] = launch_run(root / name, extra)
        return cache[name]
    return get


CODISTILL_ALPHA0 = {**TWO_MODELS, "algorithm": {"name": "codistill", "alpha": 0.0, "data": "same",
                                                "exchange_every": 2, "burn_in": 1}}


def test_codistill_alpha0_trains_like_independent_allreduce(runs):
    co = runs("codistill_alpha0", CODISTILL_ALPHA0)
    ar = runs("allreduce", {})
    a, b = load(co, "0"), load(ar, "0")
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=0)
    other = load(co, "1")    # the second model is a different model (own initialisation)
    assert any(not torch.equal(other[k], a[k]) for k in a if a[k].is_floating_point())


def test_codistill_checkpoint_bytes_closed_form(runs):
    s = read_summary(runs("codistill_alpha0", CODISTILL_ALPHA0))["comm"]["by_category"]
    steps, burn_in, k, n, m = 6, 1, 2, 2, 1
    exchanges = len(range(burn_in, steps, k))                   # before steps 1, 3, 5
    receivers = n * (n - 1) * m                                 # every model to every other group's ranks
    assert s["param_exchange"]["sent_bytes_all_ranks"] == state_bytes(CODISTILL_ALPHA0) * exchanges * receivers
    assert s["param_exchange"]["between_group_sent_bytes"] == s["param_exchange"]["sent_bytes_all_ranks"]
    assert "grad_allreduce" not in s     # one rank per model: nothing to all-reduce, not even a call


def test_codistill_prediction_bytes_closed_form(runs):
    extra = {**TWO_MODELS, "algorithm": {"name": "codistill", "exchange": "predictions", "data": "same",
                                         "burn_in": 2}}
    s = read_summary(runs("codistill_predictions", extra))["comm"]["by_category"]
    steps, burn_in, b, classes, n = 6, 2, 16, 10, 2
    per_rank_per_step = (n - 1) * b * classes * 4               # all-gather of the logits
    assert s["prediction_exchange"]["sent_bytes_all_ranks"] == (steps - burn_in) * n * per_rank_per_step
    assert "param_exchange" not in s


MA = {**TWO_MODELS, "algorithm": {"name": "model_average", "tau": 2, "average_buffers": False},
      "train": {"steps": 5, "eval_every": 5}}


def test_model_average_bytes_closed_form(runs):
    s = read_summary(runs("model_average", MA))["comm"]["by_category"]
    rounds, world, K = 5 // 2, 2, 2
    per_rank = ring_all_reduce_bytes(state_bytes(MA, buffers=False), K)
    assert s["model_average"]["sent_bytes_all_ranks"] == rounds * world * per_rank


def _reference_local_sgd(rank, world, port, extra, out):
    """The same training with plain torch and torch's PeriodicModelAverager."""
    import os
    import torch.distributed as dist
    from torch.distributed.algorithms.model_averaging.averagers import PeriodicModelAverager
    from codist.runtime.data import BatchStream
    from codist.runtime.optim import build_optimizer
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    cfg = config.validate(deep_update(TINY, extra))
    workload = build_workload(cfg.workload, cfg.seed)
    torch.manual_seed(cfg.seed * 1009)                          # one shared start for all workers
    model = workload.build_model()
    opt = build_optimizer(model.parameters(), cfg.optimizer)
    data, seed = model_data(workload.train_dataset(), "disjoint", rank, world, cfg.seed)
    stream = BatchStream(data, cfg.train.batch_per_rank, 1, 0, seed)
    tau = cfg.algorithm.tau
    averager = PeriodicModelAverager(period=tau, warmup_steps=tau - 1)   # averages after updates tau, 2tau, ...
    for step in range(cfg.train.steps):
        x, y = stream.batch(step)
        opt.zero_grad()
        workload.loss(model(x), y).backward()
        opt.step()
        averager.average_parameters(model.parameters())
    out[rank] = {k: v.clone() for k, v in model.state_dict().items()}
    dist.destroy_process_group()


def test_model_average_equals_torch_periodic_model_averager(runs):
    import socket
    import torch.multiprocessing as mp
    ours = runs("model_average", MA)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with mp.Manager() as manager:
        out = manager.dict()
        mp.spawn(_reference_local_sgd, args=(2, port, MA, out), nprocs=2)
        ref = dict(out)
    for rank in (0, 1):
        mine = load(ours, str(rank))
        params = [k for k in mine if "running" not in k and "num_batches" not in k]
        for k in params:
            torch.testing.assert_close(mine[k], ref[rank][k], rtol=1e-5, atol=1e-6)
    # after the last round (update 4) and one more local update the workers differ again
    assert any(not torch.allclose(load(ours, "0")[k], load(ours, "1")[k]) for k in params)


EC = {**TWO_MODELS, "algorithm": {"name": "ensemble_compress", "tau": 3, "distill_weight": 0.7},
      "train": {"steps": 6, "eval_every": 3}}
EDNN = deep_update(EC, {"algorithm": {"compress": False}})


def log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(1, keepdims=True)
    return z - np.log(np.exp(z).sum(1, keepdims=True))


def saved_models(run, w, names=("0", "1")) -> list:
    models = []
    for name in names:
        m = w.build_model()
        m.load_state_dict(load(run, name))
        models.append(m.eval())
    return models


def output_average_scores(models, w) -> tuple[float, float]:
    """(loss, accuracy) on the whole validation set of the mean of the models' softmax outputs, in numpy."""
    x, y = (torch.stack(t) for t in zip(*[w.val_dataset()[i] for i in range(len(w.val_dataset()))]))
    with torch.no_grad():
        probs = np.mean([np.exp(log_softmax(m(x).double().numpy())) for m in models], axis=0)
    y = y.numpy()
    return float(-np.log(probs[np.arange(len(y)), y]).mean()), float((probs.argmax(1) == y).mean())


def test_ec_dnn_global_model_is_the_output_average_of_the_local_models(runs):
    """Right after the round at update 6, G's row scores the mean of the saved local models' outputs
    (not merely below the members' mean loss: any ensemble is)."""
    run = runs("ec_dnn", EC)
    w = workload_of(EC)
    last = {r["model"]: r for r in read_rows(run) if r["step"] == 6}
    loss, accuracy = output_average_scores(saved_models(run, w), w)
    assert last["G"]["val_loss"] == pytest.approx(loss, rel=1e-5)
    assert last["G"]["val_accuracy"] == pytest.approx(accuracy)


def _kl_to_global(run, w):
    """Mean KL(G || local) on the validation set; G as of the last round (saved as model_G.pt)."""
    g = OutputEnsemble([w.build_model(), w.build_model()])
    g.load_state_dict(load(run, "G"))
    g.eval()
    total = 0.0
    for m in saved_models(run, w):
        with torch.no_grad():
            for x, _ in eval_batches(w.val_dataset(), 1, 0, 128):
                total += float(F.kl_div(F.log_softmax(m(x), -1), g(x), log_target=True, reduction="sum"))
    return total


def test_compression_pulls_local_models_toward_the_ensemble(runs):
    """After round 1 at update 3, three updates with (EC-DNN) and without (E-DNN) compression;
    the run ends at update 5 before round 2, so model_G.pt is round 1's ensemble."""
    ec = runs("ec_dnn_5", deep_update(EC, {"train": {"steps": 5, "eval_every": 5}}))
    e = runs("e_dnn_5", deep_update(EDNN, {"train": {"steps": 5, "eval_every": 5}}))
    w = workload_of(EC)
    assert _kl_to_global(ec, w) < _kl_to_global(e, w)


def test_ec_dnn_exchange_bytes_closed_form(runs):
    s = read_summary(runs("ec_dnn", EC))["comm"]["by_category"]
    rounds, world, K = 2, 2, 2
    assert s["param_exchange"]["sent_bytes_all_ranks"] == rounds * world * (K - 1) * state_bytes(EC)


ENSEMBLE = {**TWO_MODELS, "algorithm": {"name": "ensemble"}}


def test_ensemble_row_scores_the_average_of_the_two_models_predictions(runs):
    """The ensemble's validation loss and accuracy are those of the mean of the saved models'
    softmax outputs, computed here in numpy (not merely below the members' mean: any members are)."""
    run = runs("ensemble", ENSEMBLE)
    last = {r["model"]: r for r in read_rows(run) if r["step"] == 6}
    assert set(last) == {"0", "1", "ensemble"}
    w = workload_of(ENSEMBLE)
    loss, accuracy = output_average_scores(saved_models(run, w), w)
    assert last["ensemble"]["val_loss"] == pytest.approx(loss, rel=1e-5)
    assert last["ensemble"]["val_accuracy"] == pytest.approx(accuracy)
    assert last["ensemble"]["val_loss"] not in (last["0"]["val_loss"], last["1"]["val_loss"])


LS = {"algorithm": {"name": "label_smoothing", "prior": "unigram", "weight": 0.2}, "train": {"steps": 1}}


def test_label_smoothing_first_update_by_hand(runs):
    """One update from the initialisation rebuilt from the seed: loss (1 - w) CE(y, f) + w CE(prior, f)
    with the training set's class frequencies as the prior (counted here), SGD by hand; the row's
    train_loss is the CE alone and its distill_loss the smoothing term."""
    run = runs("label_smoothing_1", LS)
    w, cfg = workload_of(LS), config.validate(deep_update(TINY, LS))
    torch.manual_seed(cfg.seed * 1009)                      # model 0's initialisation (Algorithm.model_seed)
    init = w.build_model()
    x, y = w.train_stream("same", 0, 1, cfg.train.batch_per_rank, 1, 0, cfg.seed).batch(0)
    labels = np.array([int(w.train_dataset()[i][1]) for i in range(len(w.train_dataset()))])
    unigram = np.bincount(labels, minlength=10) / len(labels)
    o = cfg.optimizer

    def one_update(prior, weight):
        m = w.build_model()
        m.load_state_dict(init.state_dict())
        logits = m(x)
        smooth = -(torch.tensor(prior, dtype=torch.float32) * F.log_softmax(logits, -1)).sum(-1).mean()
        ((1 - weight) * F.cross_entropy(logits, y) + weight * smooth).backward()
        return {n: p.detach() - o.lr * (p.grad + o.weight_decay * p.detach()) for n, p in m.named_parameters()}, \
            logits.detach().double().numpy()
    saved = load(run, "0")
    expected, logits = one_update(unigram, 0.2)
    err = max(float((saved[n] - v).abs().max()) for n, v in expected.items())
    assert err < 1e-6, err
    for prior, weight in ((unigram, 0.0), (np.full(10, 0.1), 0.2)):     # no smoothing; the uniform prior
        other, _ = one_update(prior, weight)
        assert max(float((saved[n] - v).abs().max()) for n, v in other.items()) > 10 * max(err, 1e-8)
    log_p = log_softmax(logits)
    (r,) = read_rows(run)
    assert r["train_loss"] == pytest.approx(float(-log_p[np.arange(len(y)), y.numpy()].mean()), rel=1e-5)
    assert r["distill_loss"] == pytest.approx(float(-(unigram * log_p).sum(1).mean()), rel=1e-5)


def test_powersgd_bytes_match_its_compression_and_fall_below_allreduce(runs):
    """Plain all-reduce for start_iter updates, then rank-1 factors: per update the ring moves
    2(p-1)/p x 4 bytes x (sum of (rows + cols) x rank over compressed matrices + the rest)."""
    from torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook import _should_compress
    extra = {"parallel": {"world_size": 2}, "algorithm": {"name": "powersgd", "start_iter": 2}}
    s = read_summary(runs("powersgd", extra))["comm"]["by_category"]["grad_allreduce"]
    model = workload_of(extra).build_model()
    compressed = 0
    for p in model.parameters():
        rows = p.shape[0] if p.dim() > 1 else 0
        cols = p.numel() // rows if rows else 0
        ok = rows and _should_compress(rows, cols, 1, 2.0)[0]
        compressed += (rows + cols) * 1 if ok else p.numel()
    full = sum(p.numel() for p in model.parameters()) * 4
    steps, start, world = 6, 2, 2
    expected = world * (start * ring_all_reduce_bytes(full, 2) + (steps - start) * ring_all_reduce_bytes(compressed * 4, 2))
    # DDP broadcasts the buffers (BatchNorm statistics) from rank 0 before every forward
    buffers = sum(b.numel() * b.element_size() for b in model.buffers())
    assert buffers > 0
    assert s["sent_bytes_all_ranks"] == expected + steps * (world - 1) * buffers
    assert compressed * 4 < full / 2


def test_no_collective_of_a_ddp_update_goes_unseen(runs):
    """DDP's C++ bindings (buffer broadcasts per dtype bucket, the set-up shape check) are counted as
    the group numbers them: what the meter still misses does not grow with the updates."""
    extra = {"parallel": {"world_size": 2}, "algorithm": {"name": "powersgd", "start_iter": 2}}
    unseen = [read_summary(runs(name, deep_update(extra, {"train": {"steps": steps}})))["comm"]
              .get("unseen_collectives_all_ranks", 0) for name, steps in (("powersgd", 6), ("powersgd_12", 12))]
    assert unseen[0] == unseen[1], unseen


def test_post_local_sgd_bytes_closed_form(runs):
    """Warm-up: global gradient all-reduce; then local groups of one rank (nothing to send) and a
    global parameter average after updates warmup+1+k*tau (torch's PeriodicModelAverager)."""
    extra = {**TWO_MODELS, "algorithm": {"name": "post_local_sgd", "tau": 2, "warmup_steps": 2}}
    s = read_summary(runs("post_local_sgd", extra))["comm"]["by_category"]
    pbytes = state_bytes(extra, buffers=False)
    steps, warmup, tau, world = 6, 2, 2, 2
    buffers = sum(b.numel() * b.element_size() for b in workload_of(extra).build_model().buffers())
    # + DDP's buffer broadcast from rank 0 over all ranks before every forward
    assert s["grad_allreduce"]["sent_bytes_all_ranks"] == (world * warmup * ring_all_reduce_bytes(pbytes, 2)
                                                           + steps * (world - 1) * buffers)
    averages = len([i for i in range(steps) if i >= warmup and (i - warmup) % tau == 0])
    assert s["model_average"]["sent_bytes_all_ranks"] == world * averages * ring_all_reduce_bytes(pbytes, 2)
    assert s["model_average"]["between_group_sent_bytes"] == s["model_average"]["sent_bytes_all_ranks"]
