"""workload.lstm: unrolled (lm.UnrolledLSTM) is the fused nn.LSTM model in other code: the same
parameters and initialisation, the same outputs, gradients and carried state within float rounding,
interchangeable state dicts; a run id of its own while fused runs keep theirs; and torch.compile
traces it whole (it refuses nn.LSTM), which is why it exists (benchmarks/lm_levers.py)."""
from __future__ import annotations

import torch

from codist import config
from codist.workloads.lm import LstmLM, UnrolledLSTM


def _pair():
    torch.manual_seed(0)
    fused = LstmLM(64, 16, 24, 2, True, "fused")
    torch.manual_seed(0)
    unrolled = LstmLM(64, 16, 24, 2, True, "unrolled")
    return fused, unrolled


def _segment(tokens, segment):
    return {"tokens": tokens, "stream": torch.arange(tokens.shape[0]), "segment": torch.full((tokens.shape[0],), segment)}


def test_same_parameters_from_the_same_seed_and_interchangeable_state_dicts():
    fused, unrolled = _pair()
    a, b = fused.state_dict(), unrolled.state_dict()
    assert list(a) == list(b)
    assert all(torch.equal(a[k], b[k]) for k in a if torch.is_tensor(a[k]))
    assert isinstance(unrolled.lstms[0], UnrolledLSTM) and isinstance(fused.lstms[0], torch.nn.LSTM)
    torch.manual_seed(1)
    other = LstmLM(64, 16, 24, 2, True, "fused")
    unrolled.load_state_dict(other.state_dict())   # strict: every key and shape matches
    assert torch.equal(unrolled.lstms[1].weight_hh_l0, other.lstms[1].weight_hh_l0)


def test_outputs_gradients_and_carried_state_match_the_fused_kernel():
    fused, unrolled = _pair()
    g = torch.Generator().manual_seed(2)
    first, second = (torch.randint(0, 64, (5, 7), generator=g) for _ in range(2))
    for model in (fused, unrolled):
        model(_segment(first, 0))   # the state carried into segment 1
    outs = [m(_segment(second, 1)) for m in (fused, unrolled)]
    assert not torch.allclose(outs[0], fused(second), atol=1e-4), "segment 1 starts from the carried state"
    torch.testing.assert_close(outs[1], outs[0], atol=1e-5, rtol=1e-5)
    for out in outs:
        out.square().mean().backward()
    for (name, p), q in zip(fused.named_parameters(), unrolled.parameters()):
        torch.testing.assert_close(q.grad, p.grad, atol=1e-5, rtol=1e-4, msg=name)
    torch.testing.assert_close(unrolled(second), fused(second), atol=1e-5, rtol=1e-5)   # evaluation: zero state


def test_fused_runs_keep_their_ids_and_unrolled_gets_its_own():
    raw = {"workload": {"name": "lm"}, "algorithm": {"name": "allreduce"}, "train": {"steps": 10, "batch_per_rank": 8}}
    before = config.validate(raw, "test")
    fused = config.validate({**raw, "workload": {"name": "lm", "lstm": "fused"}}, "test")
    unrolled = config.validate({**raw, "workload": {"name": "lm", "lstm": "unrolled"}}, "test")
    assert config.run_id(fused) == config.run_id(before)
    assert config.run_id(unrolled) != config.run_id(before)


def test_torch_compile_traces_the_unrolled_layer_whole():
    import torch._dynamo

    torch._dynamo.reset()
    layer = UnrolledLSTM(16, 24)
    explained = torch._dynamo.explain(layer)(torch.randn(3, 5, 16))
    assert explained.graph_count == 1 and explained.graph_break_count == 0, explained.break_reasons
