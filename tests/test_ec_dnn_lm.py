"""EC-DNN on the LM workload (3-D logits: batch x time x vocabulary): the compression term pulls each
local model toward G's softened prediction over the vocabulary at every position. On a real forked
gloo world of 2 models x 1 rank: one local update each, a round (tau 1), then the combined loss
(1 - w) CE(y, f_i) + w T^2 KL(G_T || f_i,T) of model i on its first segment, against the same loss
computed here in float64 from the two ranks' saved models (issue 29's survivor 'softmax over dim=1',
the time axis of 3-D logits, which the image workloads' 2-D logits cannot tell from the last)."""

import pytest
import torch
import torch.nn.functional as F
import forked_world
from conftest import TINY, deep_update

from codist import config
from codist.workloads import build_workload

T, W = 2.0, 0.7   # temperature other than 1, weight other than 1/2
WORKLOAD = {"name": "lm", "dataset": "embedded", "vocab": 24, "states": 4, "doc_len": 40, "seq_len": 6,
            "val_seq_len": 8, "val_tokens": 64, "hidden": 8, "embedding": 4, "layers": 1}
RUN = deep_update({**TINY, "workload": WORKLOAD},
                  {"parallel": {"world_size": 2, "models": 2}, "train": {"batch_per_rank": 3},
                   "algorithm": {"name": "ensemble_compress", "tau": 1, "temperature": T, "distill_weight": W}})


def _rank(rank):
    from codist.algorithms import TrainContext
    from codist.algorithms.ensemble_compress import EnsembleCompress
    from codist.runtime.comm import CommMeter
    from codist.runtime.distributed import topology
    cfg = config.validate(RUN)
    topo = topology(2)
    algo = EnsembleCompress(TrainContext(cfg, topo, CommMeter(rank, topo.model_of()),
                                         build_workload(cfg.workload, cfg.seed), torch.device("cpu")))
    algo.setup()
    x, y = algo.train_stream().batch(0)
    algo.train_step(0, (x, y))   # no G yet: cross-entropy only; then round 1 (tau 1)
    # segment 0 again: the student starts from a zero state, as G's members (they never ran)
    logits = algo.forward(algo.model, x)
    loss = algo.loss(1, x, y, logits)
    return {"rounds": algo.rounds, "loss": float(loss.detach()), "shape": tuple(logits.shape),
            "tokens": x["tokens"].clone(), "targets": y.clone(),
            "params": {k: v.clone() for k, v in algo.model.state_dict().items() if k != "_extra_state"}}


@pytest.fixture(scope="module")
def world():
    return forked_world.run(2, _rank)


def _logits(params: dict, tokens: torch.Tensor) -> torch.Tensor:
    """The saved model's logits (B, T, V) from a zero state, in float64: embedding, LSTM, LayerNorm, head."""
    c = config.validate(RUN).workload
    lstm = torch.nn.LSTM(c.embedding, c.hidden, batch_first=True).double()
    lstm.load_state_dict({k.removeprefix("lstms.0."): v.double() for k, v in params.items() if k.startswith("lstms.0.")})
    with torch.no_grad():
        h, _ = lstm(params["embed.weight"].double()[tokens])
        h = F.layer_norm(h, (c.hidden,), params["norms.0.weight"].double(), params["norms.0.bias"].double())
        return h @ params["head.weight"].double().T + params["head.bias"].double()


def _expected(got, rank: int, dim: int = -1) -> float:
    """(1 - W) CE + W T^2 KL(softmax(log G / T) || softmax(f / T)), G the mean of the 2 models'
    softmax outputs; `dim` where G's softened distribution is normalised (-1: the vocabulary)."""
    tokens, y = got[rank]["tokens"], got[rank]["targets"]
    z = [_logits(got[r]["params"], tokens) for r in (0, 1)]
    log_g = torch.log(torch.stack([torch.softmax(zi, -1) for zi in z]).mean(0))
    q = torch.softmax(log_g / T, dim=dim)
    log_p = torch.log_softmax(z[rank] / T, -1)
    kl = (q * (torch.log(q) - log_p)).sum(-1).mean() * T ** 2
    ce = F.cross_entropy(z[rank].reshape(-1, z[rank].shape[-1]), y.reshape(-1))
    return float((1 - W) * ce + W * kl)


def test_ec_dnn_on_the_lm_compresses_toward_G_over_the_vocabulary(world):
    for rank in (0, 1):
        assert world[rank]["rounds"] == 1
        assert world[rank]["shape"] == (3, 6, 24)   # batch x time x vocabulary
        assert world[rank]["loss"] == pytest.approx(_expected(world, rank), rel=1e-5)
    # the two models differ after their local updates on disjoint data (so G is no single model's), and
    # G normalised over time instead of the vocabulary gives another loss, by far more than the tolerance
    assert any(not torch.equal(world[0]["params"][k], world[1]["params"][k]) for k in world[0]["params"])
    assert abs(_expected(world, 0, dim=1) - _expected(world, 0)) > 1e-2 * abs(_expected(world, 0))
