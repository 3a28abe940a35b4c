"""The lm workload: text shards and WET files written here in their real formats, the tokenizers,
the training streams' promises (pure in the step, fresh per model, one slice per rank, consecutive
text per row), the embedded language's exact Bayes optimum, the carried hidden state, the config's
errors, and a short training run that moves val_loss toward the optimum."""
from __future__ import annotations

import gzip
import itertools
import math

import numpy as np
import pytest
import torch
from pydantic import ValidationError
from torch.nn import functional as F

from codist.algorithms.state import flat_state, frozen
from codist.runtime.data import eval_batches
from codist.workloads.lm import LmWorkload, LstmLM
from codist.workloads.lm_config import LmConfig
from codist.workloads.lm_data import (COUNT_SAMPLE_TOKENS, BytesTokenizer, EmbeddedData, HmmLanguage,
                                      TextCorpus, find_shards, read_paragraphs, read_wet)

# A small embedded language: quick to generate, yet with context that matters.
SMALL = dict(vocab=48, states=8, zipf=1.3, transition_alpha=0.05, doc_len=80, val_tokens=4096,
             val_seq_len=64, seq_len=16, hidden=32, embedding=16)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """One intra-op thread, as a rank runs: small LSTMs get slower, not faster, with more threads
    on a shared machine (6x slower with 2 threads under load, measured)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def small(**kw) -> LmConfig:
    return LmConfig(**{**SMALL, **kw})


# --------------------------------------------------------------------------- real text formats


def warc_record(kind: str, payload: bytes, uri: str = "http://example.com/") -> bytes:
    head = (f"WARC/1.0\r\nWARC-Type: {kind}\r\nWARC-Target-URI: {uri}\r\n"
            f"WARC-Date: 2017-01-01T00:00:00Z\r\nContent-Type: text/plain\r\n"
            f"Content-Length: {len(payload)}\r\n\r\n").encode()
    return head + payload + b"\r\n\r\n"


def write_wet(path, pages: list[str], opener=open) -> None:
    """A WET file as Common Crawl writes it: a warcinfo record, then one conversion record per page
    (here also a metadata record, which a WET reader must skip)."""
    with opener(path, "wb") as f:
        f.write(warc_record("warcinfo", b"software: test\r\nformat: WARC File Format 1.0\r\n"))
        for i, page in enumerate(pages):
            f.write(warc_record("conversion", page.encode("utf-8"), uri=f"http://example.com/{i}"))
            f.write(warc_record("metadata", b"fetchTimeMs: 12\r\nnot text of the page\r\n"))


PAGES = ["Erste Seite, erster Absatz.\nZweiter Absatz mit Umlauten: äöü.\n",
         # a payload that contains header-like lines: only Content-Length may delimit it
         "Looks like a header:\nWARC/1.0\nWARC-Type: conversion\n\nlast line of page two\n"]


def test_wet_reader_returns_only_conversion_payloads(tmp_path):
    write_wet(tmp_path / "a.warc.wet", PAGES)
    write_wet(tmp_path / "b.warc.wet.gz", PAGES[:1], opener=gzip.open)
    assert list(read_wet(tmp_path / "a.warc.wet")) == PAGES
    assert list(read_paragraphs(tmp_path / "b.warc.wet.gz")) == ["Erste Seite, erster Absatz.",
                                                                  "Zweiter Absatz mit Umlauten: äöü."]
    (tmp_path / "bad.wet").write_bytes(b"<html>not a warc file</html>\n")
    with pytest.raises(ValueError, match="not a WARC/WET file"):
        list(read_wet(tmp_path / "bad.wet"))


def test_text_shards_and_wet_files_make_one_corpus(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "00.txt").write_text("first paragraph\n\n  second paragraph  \n")
    with gzip.open(tmp_path / "sub" / "01.txt.gz", "wt") as f:
        f.write("third one\n")
    write_wet(tmp_path / "sub" / "02.warc.wet", PAGES)
    (tmp_path / "README.md").write_text("not a shard\n")
    (tmp_path / ".codist_cache").mkdir()
    (tmp_path / ".codist_cache" / "stale.txt").write_text("never a shard\n")
    cfg = LmConfig(dataset="text", data_dir=str(tmp_path), tokenizer="bytes", val_tokens=40, val_seq_len=8)
    corpus = TextCorpus(cfg)
    assert [p.relative_to(tmp_path).as_posix() for p in corpus.shards] == ["00.txt", "sub/01.txt.gz",
                                                                           "sub/02.warc.wet"]
    expected = ["first paragraph", "second paragraph", "third one", "Erste Seite, erster Absatz.",
                "Zweiter Absatz mit Umlauten: äöü.", "Looks like a header:", "WARC/1.0",
                "WARC-Type: conversion", "last line of page two"]
    assert BytesTokenizer().decode(corpus.tokens.tolist()) == "".join(p + "\n" for p in expected)
    # the last val_tokens tokens are held out; validation windows overlap by one token
    assert len(corpus.train_tokens) + len(corpus.val_text) == len(corpus.tokens) and len(corpus.val_text) == 40
    x, y = corpus.val_tensors()
    assert x.shape == (39 // 8, 8) and torch.equal(x[1:, 0], y[:-1, -1])
    assert torch.equal(x[0], torch.as_tensor(np.asarray(corpus.val_text[:8], dtype=np.int64)))
    # cached: a second corpus loads the same token file
    cached = sorted(p.name for p in (tmp_path / ".codist_cache").glob("tokens-*.npy"))
    assert len(cached) == 1 and np.array_equal(TextCorpus(cfg).tokens, corpus.tokens)


def test_missing_data_dir_or_shards_is_a_clear_error(tmp_path):
    with pytest.raises(ValidationError, match=r"workload.data_dir is required.*\*\.txt.*WET"):
        LmConfig(dataset="text")
    with pytest.raises(ValidationError, match="workload.data_dir is set but workload.dataset is 'embedded'"):
        LmConfig(data_dir=str(tmp_path))
    missing = tmp_path / "nowhere"
    with pytest.raises(FileNotFoundError, match=rf"{missing}.*is not a folder.*\*\.txt"):
        find_shards(missing)
    (tmp_path / "notes.md").write_text("no shards here\n")
    with pytest.raises(FileNotFoundError, match=rf"{tmp_path}.*holds no text shards.*conversion"):
        LmWorkload(LmConfig(dataset="text", data_dir=str(tmp_path), tokenizer="bytes"), seed=0).num_classes


def test_config_rejects_contradictions():
    with pytest.raises(ValidationError, match="bytes vocabulary is always 257"):
        LmConfig(tokenizer="bytes", vocab_size=1000)
    with pytest.raises(ValidationError, match="val_tokens=64 must exceed workload.val_seq_len=64"):
        LmConfig(val_tokens=64, val_seq_len=64)
    with pytest.raises(ValidationError, match="extra"):
        LmConfig(hiden=1024)


# --------------------------------------------------------------------------- tokenizers


def test_bytes_tokenizer_round_trips():
    tok = BytesTokenizer()
    text = "Grüße, 世界! tab\tand emoji 🙂"
    ids = tok.encode(text)
    assert tok.decode(ids) == text and max(ids) < 256 and tok.vocab_size == 257
    assert tok.encode_paragraphs(["ab", "ü"]).tolist() == [97, 98, 256, 195, 188, 256]


def _word_corpus(n_lines: int = 400, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    words = ["".join(rng.choice(list("abcdefghijklmnop"), size=rng.integers(2, 7))) for _ in range(40)]
    return [" ".join(rng.choice(words, size=rng.integers(3, 12))) for _ in range(n_lines)]


def test_sentencepiece_is_trained_on_the_shards_and_cached(tmp_path):
    lines = _word_corpus()
    (tmp_path / "shard.txt").write_text("\n".join(lines) + "\n")
    cache = tmp_path / "cache"
    cfg = LmConfig(dataset="text", data_dir=str(tmp_path), cache_dir=str(cache), vocab_size=60,
                   val_tokens=100, val_seq_len=16)
    corpus = TextCorpus(cfg)
    (model,) = cache.glob("spm-*.model")
    tok = corpus.tokenizer
    assert tok.vocab_size == 60
    assert tok.decode(tok.encode(lines[3])) == lines[3]
    assert len(tok.encode(lines[3])) < len(lines[3])            # pieces longer than characters
    # paragraphs end with </s>; the corpus decodes back to the shard's lines
    eos = np.flatnonzero(np.asarray(corpus.tokens) == tok.eos_id)
    assert len(eos) == len(lines)
    assert tok.decode(np.asarray(corpus.tokens[eos[1] + 1:eos[2]]).tolist()) == lines[2]
    # the cached model is reused, not retrained; an explicit tokenizer_model is used as given
    mtime = model.stat().st_mtime_ns
    assert TextCorpus(cfg).tokenizer.key == tok.key and model.stat().st_mtime_ns == mtime
    given = LmWorkload(LmConfig(dataset="text", data_dir=str(tmp_path), cache_dir=str(cache),
                                tokenizer_model=str(model), val_tokens=100, val_seq_len=16), seed=0)
    assert given.num_classes == 60
    with pytest.raises(ValueError, match="vocab_size=61 but workload.tokenizer_model"):
        TextCorpus(LmConfig(dataset="text", data_dir=str(tmp_path), cache_dir=str(cache),
                            tokenizer_model=str(model), vocab_size=61, val_tokens=100, val_seq_len=16))


# --------------------------------------------------------------------------- training streams


def _equal_batches(a, b) -> bool:
    (xa, ya), (xb, yb) = a, b
    return all(torch.equal(xa[k], xb[k]) for k in xa) and torch.equal(ya, yb)


def _check_stream_contract(workload: LmWorkload, seq_len: int):
    stream = lambda split="disjoint", model=0, b=4, ranks=1, rank=0, seed=0: workload.train_stream(  # noqa: E731
        split, model, 2, b, ranks, rank, seed)
    s = stream()
    batches = [s.batch(step) for step in range(12)]
    # pure in the step: a fresh stream's step 9 (nothing generated before), and step 9 again later
    assert _equal_batches(stream().batch(9), batches[9]) and _equal_batches(s.batch(9), batches[9])
    for (x0, y0), (x1, y1) in zip(batches, batches[1:]):
        assert x0["tokens"].shape == y0.shape == (4, seq_len)
        assert torch.equal(y0[:, :-1], x0["tokens"][:, 1:])            # targets: next tokens
        assert torch.equal(x1["tokens"][:, 0], y0[:, -1])              # rows continue across segments
        assert torch.equal(x1["stream"], x0["stream"]) and (x1["segment"] == x0["segment"] + 1).all()
    # rank j of m takes rows [j*b, (j+1)*b) of the model's global batch
    whole = stream(b=4, ranks=1).batch(5)
    parts = [stream(b=2, ranks=2, rank=j).batch(5) for j in (0, 1)]
    assert torch.equal(torch.cat([p[0]["tokens"] for p in parts]), whole[0]["tokens"])
    assert torch.equal(torch.cat([p[0]["stream"] for p in parts]), whole[0]["stream"])
    # the rows of a batch are different text
    assert len({tuple(r) for r in whole[0]["tokens"].tolist()}) == 4
    # models: same -> identical, disjoint and shuffled -> different; another run seed -> different
    assert _equal_batches(stream("same", 0).batch(3), stream("same", 1).batch(3))
    for split in ("disjoint", "shuffled"):
        a, b = stream(split, 0).batch(3), stream(split, 1).batch(3)
        assert not torch.equal(a[0]["tokens"], b[0]["tokens"]) and not torch.equal(a[0]["stream"], b[0]["stream"])
    assert not torch.equal(stream(seed=1).batch(3)[0]["tokens"], batches[3][0]["tokens"])
    with pytest.raises(ValueError, match="allowed 'same', 'shuffled', 'disjoint'"):
        stream("random")
    return batches


def test_embedded_stream_is_pure_fresh_per_model_and_sliced_per_rank():
    w = LmWorkload(small(), seed=0)
    batches = _check_stream_contract(w, seq_len=16)
    # 12 segments of 16 tokens cross document boundaries (doc_len 80) in every row: still continuous
    # by construction, and the documents are independent fresh text, never a repeat
    text = torch.cat([x["tokens"] for x, _ in batches], dim=1)
    assert len({tuple(text[0, i:i + 16].tolist()) for i in range(0, 192, 16)}) == 12


def test_text_stream_reads_consecutive_tokens_of_the_corpus(tmp_path):
    (tmp_path / "a.txt").write_text("\n".join(_word_corpus(300, seed=1)) + "\n")
    cfg = LmConfig(dataset="text", data_dir=str(tmp_path), tokenizer="bytes", seq_len=8, val_tokens=64,
                   val_seq_len=16)
    w = LmWorkload(cfg, seed=0)
    _check_stream_contract(w, seq_len=8)
    corpus = w.corpus
    train = np.asarray(corpus.train_tokens, dtype=np.int64)
    s = w.train_stream("same", 0, 1, 3, 1, 0, 0)
    for row in range(3):   # exact token continuity: the row's segments are a slice of the corpus
        got = np.concatenate([s.batch(k)[0]["tokens"][row].numpy() for k in range(6)])
        start = int(s.offsets[row])
        assert np.array_equal(got, np.take(train, np.arange(start, start + 48), mode="wrap"))
    # disjoint: each model reads only its own half of the training text
    for model in (0, 1):
        d = w.train_stream("disjoint", model, 2, 3, 1, 0, 0)
        assert d.start == model * (len(train) // 2) and d.length in (len(train) // 2, len(train) - len(train) // 2)
    # past the end of the corpus the text repeats, and the stream says so
    with pytest.warns(UserWarning, match="exhausted"):
        s.batch(s.epoch_steps)
    counts = w.class_counts()
    assert counts.shape == (257,) and torch.equal(counts, torch.bincount(torch.from_numpy(train), minlength=257))


# --------------------------------------------------------------------------- the embedded language


def test_forward_algorithm_matches_brute_force_enumeration():
    lang = HmmLanguage(vocab=4, states=3, zipf=1.0, transition_alpha=0.5, seed=3)
    seqs = np.array([[0, 1, 3, 3, 2], [2, 2, 0, 1, 1]])

    def prob(seq):   # sum over every hidden path of p(path, seq)
        total = 0.0
        for path in itertools.product(range(3), repeat=len(seq)):
            p = lang.pi[path[0]] * lang.E[path[0], seq[0]]
            for t in range(1, len(seq)):
                p *= lang.A[path[t - 1], path[t]] * lang.E[path[t], seq[t]]
            total += p
        return total

    expected = [[-math.log(prob(s[:t + 1]) / prob(s[:t])) for t in range(1, len(s))] for s in seqs]
    assert np.allclose(lang.nll(seqs), expected, rtol=1e-10)


def test_sampler_draws_from_the_hmm_that_is_scored():
    lang = HmmLanguage(vocab=6, states=3, zipf=1.0, transition_alpha=0.3, seed=1)
    x = np.concatenate([lang.sample(np.random.SeedSequence([9, i]), 2000) for i in range(20)])
    assert x.min() >= 0 and x.max() < 6
    uni = np.bincount(x, minlength=6) / len(x)
    assert 0.5 * np.abs(uni - lang.unigram()).sum() < 0.02
    # pairs within runs against the exact bigram law sum_{s,s'} pi_s E_sa A_ss' E_s'b
    pairs = np.concatenate([np.stack([r[:-1], r[1:]], 1) for r in np.split(x, 20)])
    emp = np.zeros((6, 6))
    np.add.at(emp, (pairs[:, 0], pairs[:, 1]), 1)
    exact = (lang.pi[:, None] * lang.E).T @ lang.A @ lang.E
    assert 0.5 * np.abs(emp / emp.sum() - exact).sum() < 0.03


def test_bayes_optimum_is_between_zero_and_the_unigram_entropy():
    e = EmbeddedData(small())
    assert 0 < e.bayes_val_loss < e.unigram_entropy - 0.3
    x, y = e.val_tensors()
    assert x.shape == (4096 // 64, 64) and torch.equal(x[:, 1:], y[:, :-1])
    counts = e.class_counts()
    assert counts.shape == (48,) and int(counts.sum()) == COUNT_SAMPLE_TOKENS
    # the count sample's unigram is the language's: its entropy is close to the exact one
    p = counts.double() / counts.sum()
    assert abs(float(-(p[p > 0] * p[p > 0].log()).sum()) - e.unigram_entropy) < 0.02


def _evaluate(w: LmWorkload, model) -> dict:
    model.eval()
    sums = {}
    with torch.no_grad():
        for x, y in eval_batches(w.val_dataset(), 1, 0, 64):
            for k, v in w.eval_sums(model(x), y).items():
                sums[k] = sums.get(k, 0.0) + v
    model.train()
    return w.finalize_eval(sums)


def test_short_training_run_moves_val_loss_toward_the_bayes_optimum():
    torch.manual_seed(0)
    w = LmWorkload(small(), seed=0)
    model = w.build_model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    stream = w.train_stream("same", 0, 1, 16, 1, 0, 0)
    before = _evaluate(w, model)
    for step in range(150):
        x, y = stream.batch(step)
        loss = w.loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    after = _evaluate(w, model)
    bayes, unigram = w.embedded.bayes_val_loss, w.embedded.unigram_entropy
    assert before["val_loss"] > unigram                 # untrained: about log(vocab)
    assert after["val_loss"] < unigram - 0.1            # learnt more than token frequencies: context
    assert 0 < after["val_bayes_gap"] < 0.6 * before["val_bayes_gap"]
    assert after["val_bayes_gap"] == pytest.approx(after["val_loss"] - bayes)
    assert after["val_ppl"] == pytest.approx(math.exp(after["val_loss"]))
    assert w.metric.name == "val_loss" and not w.metric.higher_is_better and bayes < w.metric.target < unigram


# --------------------------------------------------------------------------- model, state, loss


def test_hidden_state_is_carried_in_training_and_reset_in_evaluation():
    torch.manual_seed(0)
    w = LmWorkload(small(), seed=0)
    model = w.build_model()
    stream = w.train_stream("same", 0, 1, 4, 1, 0, 0)
    (x0, _), (x1, _), (x2, _) = (stream.batch(k) for k in range(3))
    val_x = w.val_dataset().tensors[0][:8]
    with torch.no_grad():
        cold = model(x1)                      # segment 1 with nothing before: from a zero state
        eval_before = model(val_x)
        model.reset_state()
        model(x0)
        warm = model(x1)                      # segment 1 right after segment 0: carried
        assert not torch.allclose(warm, cold)
        assert torch.allclose(cold, model.run(x1["tokens"])[0])
        assert torch.equal(model(x1), warm)   # the same segment again: the same start, same output
        # evaluation starts from zeros and leaves the carried state alone
        assert torch.equal(model(val_x), eval_before) and torch.equal(model(val_x), eval_before)
        nxt = model(x2)
        assert torch.allclose(model(x1), cold)   # going back is no continuation: from zeros again
        model(x1)
        assert not torch.allclose(model(x2), nxt)
        model.reset_state()
        model(x0)
        model(x1)
        assert torch.equal(model(x2), nxt)
        # a frozen (eval-mode) teacher copy carries its own state along the same stream
        teacher = frozen(LstmLM(48, 16, 32, 2))
        teacher.load_state_dict(model.state_dict())
        assert torch.equal(teacher(x2), nxt)  # the carried state travels in the state dict
        teacher.reset_state()
        assert not torch.allclose(teacher(x2), nxt)
        # a batch of another stream row never inherits this row's state
        other = dict(x2, stream=x2["stream"] + 1)
        model(x1)
        assert torch.allclose(model(other), model.run(x2["tokens"])[0])
    # the carried state is no parameter or buffer: exchanges and averages never move it
    n = sum(p.numel() for p in model.parameters()) + sum(b.numel() for b in model.buffers())
    assert flat_state(model).numel() == n


def test_loss_is_mean_cross_entropy_per_token_and_gradients_stop_at_segment_boundaries():
    torch.manual_seed(0)
    w = LmWorkload(small(), seed=0)
    model = w.build_model()
    (x0, y0), (x1, y1) = (w.train_stream("same", 0, 1, 4, 1, 0, 0).batch(k) for k in range(2))
    w.loss(model(x0), y0).backward()
    assert not any(v.requires_grad for v in model.get_extra_state().values())
    logits = model(x1)
    assert logits.shape == (4, 16, 48) and w.num_classes == 48
    loss = w.loss(logits, y1)
    manual = -F.log_softmax(logits, -1).gather(-1, y1.unsqueeze(-1)).mean()
    assert torch.allclose(loss, manual)
    loss.backward()       # truncated BPTT: segment 0's graph (freed by its backward) is not reached
    sums = w.eval_sums(logits.detach(), y1)
    assert sums["count"] == 64 and sums["loss_sum"] == pytest.approx(64 * loss.item(), rel=1e-5)


def test_describe_reports_the_optimum_and_sizes():
    facts = LmWorkload(small(), seed=0).describe()
    assert facts["vocab_size"] == 48 and facts["val_size"] == 64 and facts["parameters"] > 0
    assert 0 < facts["bayes_val_loss"] < facts["unigram_entropy"]



# --------------------------------------------------------------------------- the data-source seam


def test_both_data_sources_serve_one_interface_and_the_workload_only_uses_it(tmp_path):
    """The workload reaches its data only through `lm_data.SOURCES[dataset]`: each source gives the
    vocabulary, streams, validation tensors, counts, target, extra metrics and facts."""
    from codist.workloads.lm_data import SOURCES
    (tmp_path / "a.txt").write_text("\n".join(_word_corpus(300, seed=1)) + "\n")
    text = LmConfig(dataset="text", data_dir=str(tmp_path), tokenizer="bytes", seq_len=8, val_tokens=64,
                    val_seq_len=16, target=4.5)
    for cfg, source in ((small(), EmbeddedData), (text, TextCorpus)):
        assert SOURCES[cfg.dataset] is source
        w = LmWorkload(cfg, seed=0)
        assert isinstance(w.data, source) and w.num_classes == w.data.vocab_size
        tokens, _ = w.train_stream("shuffled", 1, 2, 2, 1, 0, 0).batch(0)
        assert tokens["tokens"].shape == (2, cfg.seq_len)
        assert len(w.train_dataset()) > 0 and len(w.val_dataset()) > 0
        assert w.class_counts().shape == (w.num_classes,)
        metrics = w.finalize_eval({"loss_sum": 3.0, "count": 1.0})
        assert set(metrics) == {"val_loss", "val_ppl"} | ({"val_bayes_gap"} if source is EmbeddedData else set())
        assert w.describe()["dataset"] == cfg.dataset
    assert LmWorkload(text, seed=0).metric.target == 4.5


# --------------------------------------------------------------------------- data prepared before the run


def test_class_counts_never_copy_the_whole_training_text(tmp_path, monkeypatch):
    """Issue 42: np.bincount of the memory-mapped corpus copied it whole, at 8 bytes a token, in every
    rank; the counts are now taken COUNT_CHUNK tokens at a time, and once per process."""
    from codist.workloads import lm_data
    (tmp_path / "shard.txt").write_text("\n".join(_word_corpus(60)) + "\n")
    corpus = TextCorpus(LmConfig(dataset="text", data_dir=str(tmp_path), tokenizer="bytes", val_tokens=40,
                                 val_seq_len=8))
    whole = np.bincount(np.asarray(corpus.train_tokens, dtype=np.int64), minlength=257)
    sizes, bincount = [], np.bincount
    monkeypatch.setattr(lm_data, "COUNT_CHUNK", 1000, raising=False)
    monkeypatch.setattr(lm_data.np, "bincount", lambda x, **kw: sizes.append(len(x)) or bincount(x, **kw))
    counts = corpus.class_counts()
    assert np.array_equal(counts.numpy(), whole) and counts.dtype == torch.int64
    assert len(sizes) == -(-len(corpus.train_tokens) // 1000) > 1 and max(sizes) <= 1000
    corpus.class_counts()[0] += 1   # a caller's copy: counted once, never changed by a caller
    assert len(sizes) == -(-len(corpus.train_tokens) // 1000) and torch.equal(corpus.class_counts(),
                                                                              torch.from_numpy(whole))


@pytest.mark.slow
def test_codist_data_prepare_builds_what_the_run_then_only_reads(tmp_path):
    """`codist data prepare` (the workflow's lm_data job) trains the SentencePiece model and tokenises
    the text into the cache before the run; the run reads them unchanged and logs what a run that
    prepared its own data logs."""
    import json
    import subprocess
    import sys

    import yaml
    from conftest import TINY, comparable, deep_update, launch_run, read_rows
    (tmp_path / "text").mkdir()
    (tmp_path / "text" / "shard.txt").write_text("\n".join(_word_corpus(400)) + "\n")

    def cfg(cache):
        return {**deep_update(TINY, {"optimizer": {"name": "adam", "lr": 0.003, "weight_decay": 0.0}}),
                "workload": {"name": "lm", "dataset": "text", "data_dir": str(tmp_path / "text"),
                             "cache_dir": str(tmp_path / cache), "vocab_size": 60, "val_tokens": 100,
                             "val_seq_len": 16}}
    path = tmp_path / "prepared.yaml"
    path.write_text(yaml.safe_dump(cfg("prepared")))
    done = subprocess.run([sys.executable, "-m", "codist.cli", "data", "prepare", "--config", str(path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    built = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "prepared").glob("*") if p.suffix in (".model", ".npy")}
    assert sorted(n.split("-")[0] for n in built) == ["spm", "tokens"]
    assert done.stdout.startswith(f"lm data in {tmp_path / 'text'}: ") and "cached in" in done.stdout
    prepared = launch_run(tmp_path / "run_prepared", cfg("prepared"), base={})
    assert {p.name: p.stat().st_mtime_ns for p in (tmp_path / "prepared").glob("*")
            if p.suffix in (".model", ".npy")} == built   # read, not rebuilt
    itself = launch_run(tmp_path / "run_itself", cfg("itself"), base={})   # no job before it: the ranks build it
    assert comparable(read_rows(prepared)) == \
        comparable(read_rows(itself))
    assert json.loads((prepared / "summary.json").read_text())["resumed_from_step"] is None
    assert np.array_equal(TextCorpus(LmConfig(**cfg("prepared")["workload"])).tokens,
                          TextCorpus(LmConfig(**cfg("itself")["workload"])).tokens)
    # a workload with nothing to prepare says so
    other = tmp_path / "cifar.yaml"
    other.write_text(yaml.safe_dump(TINY))
    done = subprocess.run([sys.executable, "-m", "codist.cli", "data", "prepare", "--config", str(other)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "nothing to prepare (workload 'cifar')" in done.stdout
