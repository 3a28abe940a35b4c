"""Preparing an LM's text (issue 51, G1): the token cache is streamed to its .npy as it is encoded, so
building it holds one chunk, not the corpus (which took ~10 bytes a token, and capped one job at
~0.8 B tokens); and the preparing job's memory and time limit follow the corpus it tokenises."""
import tracemalloc
from pathlib import Path

import numpy as np
from codist import config
from codist.workloads import lm_data
from codist.workloads.lm_config import LmConfig
from codist.workloads.lm_data import TextCorpus


def write_corpus(path, megabytes: float, seed: int = 0) -> int:
    """A plain-text shard of made-up words, one paragraph a line (2,000 distinct ones, repeated: the
    memory measured does not depend on the words); returns its size in bytes."""
    r = np.random.default_rng(seed)
    letters = np.array(list("abcdefghiklmnoprstuvwyz"))
    words = ["".join(r.choice(letters, size=r.integers(2, 9))) for _ in range(3000)]
    lines = [" ".join(r.choice(words, size=r.integers(10, 80))) for _ in range(2000)]
    block = "\n".join(lines) + "\n"
    text = block * int(np.ceil(megabytes * 1e6 / len(block)))
    path.write_text(text)
    return len(text)


def peak_bytes_per_token(cfg: LmConfig) -> tuple[float, TextCorpus]:
    """Build the token cache anew (any SentencePiece model already trained is reused) under
    tracemalloc: (peak Python memory / tokens, the corpus)."""
    for p in Path(cfg.cache_dir).glob("tokens-*.npy"):
        p.unlink()
    tracemalloc.start()
    try:
        corpus = TextCorpus(cfg)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak / len(corpus.tokens), corpus


def test_the_bytes_token_cache_is_built_in_under_3_bytes_a_token(tmp_path):
    (tmp_path / "text").mkdir()
    write_corpus(tmp_path / "text" / "shard.txt", 6)
    cfg = LmConfig(dataset="text", data_dir=str(tmp_path / "text"), cache_dir=str(tmp_path / "cache"),
                   tokenizer="bytes", val_tokens=1000)
    per_token, corpus = peak_bytes_per_token(cfg)
    assert len(corpus.tokens) > 5_000_000 and per_token < 3, per_token
    whole = lm_data.BytesTokenizer().encode_paragraphs(list(lm_data.read_paragraphs(tmp_path / "text" / "shard.txt")))
    assert corpus.tokens.dtype == np.uint16 and np.array_equal(corpus.tokens, whole)


def test_the_sentencepiece_token_cache_holds_one_chunk_not_the_corpus(tmp_path, monkeypatch):
    """SentencePiece's ids come back as Python lists (~40 bytes a token), so the chunk is what memory
    holds: a 64 KiB chunk here, over a corpus of ~1.4 M tokens in two shards. The cache equals the
    corpus encoded at once, shard by shard."""
    (tmp_path / "text").mkdir()
    for i in range(2):
        write_corpus(tmp_path / "text" / f"shard{i}.txt", 1.1, seed=i)
    cfg = LmConfig(dataset="text", data_dir=str(tmp_path / "text"), cache_dir=str(tmp_path / "cache"),
                   vocab_size=300, val_tokens=1000)
    TextCorpus(cfg)   # trains the SentencePiece model (not measured)
    monkeypatch.setattr(lm_data, "ENCODE_CHUNK_CHARS", 1 << 16, raising=False)
    per_token, corpus = peak_bytes_per_token(cfg)
    assert len(corpus.tokens) > 1_000_000 and per_token < 3, per_token
    whole = np.concatenate([corpus.tokenizer.encode_paragraphs(list(lm_data.read_paragraphs(s)))
                            for s in corpus.shards])
    assert np.array_equal(corpus.tokens, whole)


def test_an_empty_stream_is_a_valid_empty_npy(tmp_path):
    path = tmp_path / "t.npy"
    assert lm_data.write_npy_stream(path, iter([]), np.int32) == 0
    assert np.load(path).shape == (0,) and np.load(path).dtype == np.int32


# ---------------------------------------------------------------- the preparing job's resources

def text_run(data_dir: str, data_root=None, **workload) -> config.RunConfig:
    return config.validate({"scale": "full", "workload": {"name": "lm", "dataset": "text", "data_dir": data_dir,
                                                          **workload},
                            "parallel": {"world_size": 128}, "train": {"steps": 50000, "batch_per_rank": 128},
                            "launch": {"device": "cuda", **({"data_root": data_root} if data_root else {})}})


def test_the_preparing_jobs_memory_and_time_follow_the_corpus(tmp_path):
    """Sized from the shards' sizes (a .gz shard counts GZIP_TEXT_RATIO times), found without reading
    them; a larger corpus gets more time, and more memory until SentencePiece's bounded input."""
    root = tmp_path / "data"
    (root / "cc").mkdir(parents=True)
    with open(root / "cc" / "a.txt", "wb") as f:   # sparse: its size is what counts
        f.truncate(10_000_000)
    small = lm_data.prepare_resources(text_run("cc", str(root)))
    with open(root / "cc" / "b.wet.gz", "wb") as f:
        f.truncate(20_000_000_000)
    big = lm_data.prepare_resources(text_run("cc", str(root)))
    assert lm_data.corpus_text_bytes(root / "cc") == 10_000_000 + 20_000_000_000 * lm_data.GZIP_TEXT_RATIO
    assert small["mem_mb"] < big["mem_mb"] and small["runtime"] < big["runtime"]
    # 60 GB of text at 2 MB/s: over 8 hours; SentencePiece's training input is bounded
    assert big["runtime"] > 8 * 60 and big["mem_mb"] == lm_data.BASE_MEM_MB + (
        lm_data.SPM_MAX_TEXT_BYTES * lm_data.SPM_MEMORY_PER_TEXT_BYTE // 1_000_000)
    # with a SentencePiece model given (or bytes) nothing is trained: no training memory
    given = lm_data.prepare_resources(text_run("cc", str(root), tokenizer_model="m.model"))
    assert given["mem_mb"] == lm_data.BASE_MEM_MB and given["runtime"] < big["runtime"]
    # no data root here (a dry run elsewhere): the text the run reads, 26 B tokens of ~4 bytes
    unseen = lm_data.prepare_resources(text_run("cc"))
    assert unseen["runtime"] >= 50000 * 128 * 128 * 32 * 4 / lm_data.ENCODE_BYTES_PER_S / 60
