"""The translation workload: fairseq-preprocess output read back exactly, clear errors for a bad
data_dir, the embedded transduction (deterministic, applied as stated), the model's output
shape, padding-blind loss and NLL, BLEU from summed sufficient statistics, and the sharded
evaluation through codist's own eval_batches. Small on purpose (one fairseq import, corpora of
a few hundred pairs): the whole file runs in well under 30 s on one core."""
from __future__ import annotations

import random

import pytest
import sacrebleu
import torch
from pydantic import ValidationError
from torch.nn import functional as F

from codist.runtime.data import eval_batches
from codist.workloads import translation_data as D
from codist.workloads.translation import (TranslationWorkload, bleu_from_stats, bleu_stats, collate)
from codist.workloads.translation_config import TranslationConfig

SMALL = dict(pairs=240, val_pairs=24, vocab=30, min_len=2, max_len=8, data_seed=3)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("translation_cache")


@pytest.fixture(scope="module")
def workload(cache):
    torch.set_num_threads(1)
    return TranslationWorkload(TranslationConfig(cache_dir=str(cache), **SMALL), seed=0)


@pytest.fixture(scope="module")
def model(workload):
    torch.manual_seed(0)
    m = workload.build_model()
    m.eval()
    return m


# --------------------------------------------------------------------------- real fairseq data

PAIRS = [("das haus ist klein", "the house is small"), ("das ist gut", "this is good"),
         ("klein klein haus", "small small house")]


def write_fairseq(root, pairs=PAIRS, valid=PAIRS[:2]):
    D.write_text(root / "text", "train", pairs, "de", "en")
    D.write_text(root / "text", "valid", valid, "de", "en")
    D.preprocess(root / "text", root / "bin", "de", "en")
    return root / "bin"


def test_preprocessed_data_is_read_back_exactly(tmp_path):
    data = write_fairseq(tmp_path)
    w = TranslationWorkload(TranslationConfig(dataset="fairseq", data_dir=str(data), source_lang="de",
                                              target_lang="en", arch="transformer_tiny"), seed=0)
    train, val = w.train_dataset(), w.val_dataset()
    assert len(train) == 3 and len(val) == 2
    src, tgt = train[2]
    assert src.tolist() == [w.src_dict.index(t) for t in "klein klein haus".split()] + [w.src_dict.eos()]
    assert tgt.tolist() == [w.tgt_dict.index(t) for t in "small small house".split()] + [w.tgt_dict.eos()]
    assert w.src_dict.unk() not in src.tolist() + tgt.tolist()
    assert w.num_classes == len(w.tgt_dict)
    (inputs, target) = val[1]   # padded to the longest validation pair: source left, target right
    assert inputs["src_tokens"].tolist() == [w.src_dict.pad()] + [w.src_dict.index(t) for t in "das ist gut".split()] \
        + [w.src_dict.eos()]
    assert target.tolist()[-1] == w.tgt_dict.pad() and inputs["prev_output_tokens"][0] == w.tgt_dict.eos()


def test_missing_or_incomplete_data_dir(tmp_path):
    with pytest.raises(ValidationError, match="workload.data_dir is required"):
        TranslationConfig(dataset="fairseq")
    cfg = TranslationConfig(dataset="fairseq", data_dir=str(tmp_path / "nope"), source_lang="de", target_lang="en")
    with pytest.raises(FileNotFoundError, match="nope.*does not exist.*dict.<src>.txt"):
        TranslationWorkload(cfg, 0).train_dataset()
    data = write_fairseq(tmp_path)
    (data / "valid.de-en.en.idx").unlink()
    cfg = TranslationConfig(dataset="fairseq", data_dir=str(data), source_lang="de", target_lang="en")
    with pytest.raises(FileNotFoundError) as err:
        TranslationWorkload(cfg, 0).train_dataset()
    assert str(data / "valid.de-en.en.idx") in str(err.value) and "train.de-en.de.bin" not in str(err.value)


def test_config_defaults_and_errors():
    emb, real = TranslationConfig(), TranslationConfig(dataset="fairseq", data_dir="/x")
    assert (emb.arch, emb.gen_max_len_b) == ("transformer_tiny", 5)
    assert (real.arch, real.gen_max_len_a, real.gen_max_len_b, real.max_len) == \
        ("transformer_vaswani_wmt_en_de_big", 0.0, 200, 1022)
    assert TranslationConfig(max_len=9).max_len == 9 and emb.max_len == 16
    with pytest.raises(ValidationError, match="extra"):
        TranslationConfig(vocabulary=10)
    with pytest.raises(ValidationError, match="arch"):
        TranslationConfig(arch="transformer_huge")


def test_shared_embeddings_need_a_joined_dictionary(tmp_path, cache):
    data = write_fairseq(tmp_path)
    cfg = TranslationConfig(dataset="fairseq", data_dir=str(data), source_lang="de", target_lang="en",
                            arch="transformer_tiny", share_embeddings="all")
    with pytest.raises(ValueError, match="joined dictionary.*dict.de.txt"):
        TranslationWorkload(cfg, 0).train_dataset()
    joined = TranslationWorkload(TranslationConfig(cache_dir=str(cache), share_embeddings="all", **SMALL), 0)
    model = joined.build_model()
    assert joined.src_dict is joined.tgt_dict
    assert model.encoder.embed_tokens.weight is model.decoder.embed_tokens.weight
    assert model.decoder.output_projection.weight is model.decoder.embed_tokens.weight


# --------------------------------------------------------------------------- the embedded corpus

def test_generator_is_deterministic_and_applies_the_transduction():
    knobs = [SMALL[k] for k in ("pairs", "val_pairs", "vocab", "min_len", "max_len")] + [0.3, 0.25]
    a, b, c = D.generate(*knobs, data_seed=7), D.generate(*knobs, data_seed=7), D.generate(*knobs, data_seed=8)
    assert a.train == b.train and a.valid == b.valid and a.train != c.train
    t = a.transduction
    det, adj1, adj2, noun, verb = (t.by_kind["det"][0], t.by_kind["adj"][0], t.by_kind["adj"][1],
                                   t.by_kind["noun"][0], t.by_kind["verb"][0])
    assert t.translate([det, adj1, adj2, noun, verb]) == [t.main[w] for w in (det, noun, adj2, adj1, verb)]
    # every generated pair is the rule's output, up to the allowed synonyms
    index = {w: i for i, w in enumerate(t.src_words)}
    synonyms_used = 0
    for src, tgt in a.train:
        order = t.reorder([index[w] for w in src.split()])
        for w, out in zip(order, tgt.split(), strict=True):
            assert out in (t.main[w], t.synonym[w])
            synonyms_used += out == t.synonym[w]
    assert synonyms_used > 0
    assert not {s for s, _ in a.valid} & {s for s, _ in a.train}
    assert 0 < a.facts["bayes_val_nll"] < 1 and 40 < a.facts["map_val_bleu"] < 100


def test_embedded_corpus_is_cached(workload, cache, monkeypatch):
    first = workload.data_dir
    monkeypatch.setattr(D, "preprocess", lambda *a, **k: pytest.fail("rebuilt a cached corpus"))
    assert D.ensure_embedded(workload.cfg) == first
    assert not list(cache.glob(".*tmp*"))
    assert len(workload.train_dataset()) == SMALL["pairs"] and len(workload.val_dataset()) == SMALL["val_pairs"]


# --------------------------------------------------------------------------- model, batches, loss

def test_forward_shape_and_pure_batches(workload, model):
    stream = workload.train_stream("same", 0, 1, 8, 1, 0, seed=1)
    x, y = stream.batch(3)
    logits = workload.forward(model, x)
    assert logits.shape == (8, y.size(1), workload.num_classes)
    stream.batch(500)   # another epoch in between
    x2, y2 = stream.batch(3)
    assert torch.equal(y, y2) and all(torch.equal(x[k], x2[k]) for k in x)
    # sentences, not a fixed token count: lengths vary, padding only where a sentence is short
    assert y.ne(workload.pad).sum(1).unique().numel() > 1


def test_loss_and_nll_ignore_padding(workload, model):
    pairs = [workload.train_dataset()[i] for i in range(6)]
    pad, eos = workload.pad, workload.tgt_dict.eos()
    x, y = collate(pairs, pad, eos)
    xp, yp = collate(pairs, pad, eos, src_len=x["src_tokens"].size(1) + 3, tgt_len=y.size(1) + 4)
    with torch.no_grad():   # call the model directly: no trimming, the padded logits are longer
        tight = model(x["src_tokens"], x["src_lengths"], x["prev_output_tokens"])[0]
        loose = model(xp["src_tokens"], xp["src_lengths"], xp["prev_output_tokens"])[0]
    assert loose.size(1) == tight.size(1) + 4
    assert torch.allclose(workload.loss(tight, y), workload.loss(loose, yp), atol=1e-5)
    a, b = workload.eval_sums(tight, y), workload.eval_sums(loose, yp)
    assert a["tokens"] == b["tokens"] == float(y.ne(pad).sum()) and a["nll_sum"] == pytest.approx(b["nll_sum"], rel=1e-5)
    assert torch.equal(workload.token_mask(yp, tight), y.ne(pad))
    ce = F.cross_entropy(tight.transpose(1, 2), y, ignore_index=pad)
    assert a["nll_sum"] / a["tokens"] == pytest.approx(float(ce), rel=1e-5)
    smoothed = workload.loss(tight, y)
    lp = F.log_softmax(tight, -1)
    m = y.ne(pad)
    eps, v = workload.cfg.label_smoothing, tight.size(-1)
    manual = ((1 - eps - eps / (v - 1)) * -lp.gather(-1, y[..., None])[..., 0] - eps / (v - 1) * lp.sum(-1))[m].mean()
    assert float(smoothed) == pytest.approx(float(manual), rel=1e-5)


def test_class_counts_are_target_tokens(workload):
    counts = workload.class_counts()
    data = workload.train_dataset()
    assert counts.numel() == workload.num_classes and counts[workload.pad] == 0
    assert int(counts.sum()) == sum(data[i][1].numel() for i in range(len(data)))
    assert counts[workload.tgt_dict.eos()] == len(data)


# --------------------------------------------------------------------------- BLEU

def _refs(n=40, seed=0):
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(50)]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))) for _ in range(n)]


def test_bleu_of_references_and_of_a_wrong_system():
    refs = _refs()
    assert bleu_from_stats(bleu_stats(refs, refs)) == pytest.approx(100.0)
    wrong = _refs(seed=1)
    assert bleu_from_stats(bleu_stats(wrong, refs)) < 5


def test_summed_statistics_give_corpus_bleu():
    refs = _refs()
    rng = random.Random(2)
    hyps = [" ".join(w if rng.random() < 0.7 else "x" for w in r.split()[: rng.randint(2, 12)]) for r in refs]
    sums: dict[str, float] = {}
    for shard in range(3):   # strided shards, as codist's eval_batches
        part = range(shard, len(refs), 3)
        for k, v in bleu_stats([hyps[i] for i in part], [refs[i] for i in part]).items():
            sums[k] = sums.get(k, 0.0) + v
    whole = sacrebleu.corpus_bleu(hyps, [refs]).score
    assert 5 < whole < 95
    assert bleu_from_stats(sums) == pytest.approx(whole, abs=1e-9)


def test_sharded_evaluation_matches_whole_set(cache, model):
    """Two ranks' eval_model_sums (fixed-length items through eval_batches) add up to the
    metrics of the whole validation set, BLEU included, and to bleu()."""
    w = TranslationWorkload(TranslationConfig(cache_dir=str(cache), bleu_every_eval=True, **SMALL), seed=0)
    whole = w.finalize_eval(_sums(w, model, [eval_batches(w.val_dataset(), 1, 0, 100)]))
    split = w.finalize_eval(_sums(w, model, [eval_batches(w.val_dataset(), 2, r, 5) for r in range(2)]))
    assert split["val_nll"] == pytest.approx(whole["val_nll"], rel=1e-5)
    assert split["val_bleu"] == pytest.approx(whole["val_bleu"], abs=1e-9)
    assert whole["val_bleu"] == pytest.approx(w.bleu(model), abs=1e-9)
    assert model.training is False
    with pytest.raises(RuntimeError, match="eval_model_sums"):
        w.finalize_eval({"nll_sum": 1.0, "tokens": 1.0, "correct": 0.0})


def _sums(w, model, shards) -> dict[str, float]:
    sums: dict[str, float] = {}
    with torch.no_grad():
        for batches in shards:
            for x, y in batches:
                for k, v in w.eval_model_sums(model, x, y).items():
                    sums[k] = sums.get(k, 0.0) + v
    return sums


def test_exchanged_state_is_the_saved_state_without_the_position_tables(model, tmp_path):
    """A checkpoint exchange or model average sends what the closed form counts (the saved model's
    floats, tied tensors once: workflows/rehearsal.model_size), not fairseq's sinusoidal position
    tables, which are non-persistent constants every rank builds (issue 42: 2 x 1,026 x 1,024 floats
    of Transformer-big an exchange beyond the closed form)."""
    from codist.algorithms.state import flat_state
    from workflows.rehearsal import model_size
    tables = [b for m in model.modules() for n, b in m._buffers.items()
              if n in m._non_persistent_buffers_set and b is not None and b.is_floating_point()]
    assert len(tables) == 2 and all(t.numel() > 0 for t in tables)   # encoder's and decoder's
    torch.save(model.state_dict(), tmp_path / "model_0.pt")
    params, floats, _ = model_size(tmp_path / "model_0.pt")
    assert flat_state(model).numel() == floats
    assert flat_state(model, buffers=False).numel() == params == sum(p.numel() for p in model.parameters())
