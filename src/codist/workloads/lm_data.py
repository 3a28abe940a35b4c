"""Data of the `lm` workload: the embedded language, text shards, tokenizers, training streams.

Training data are *streams*, not a finite set: Anil et al. train on Common Crawl, which is
never revisited, and their LSTM carries its hidden state from one 32-token segment to the
next. So a stream gives every row of a model's global batch its own run of consecutive text,
and `batch(step)` is the `step`-th segment of each row. It is a pure function of `step`
(a run resumed from a checkpoint at any step gets exactly the batches it would have had),
so nothing may depend on having produced `batch(step - 1)`:

- embedded: a row's text is an endless concatenation of independent *documents* of
  `doc_len` tokens, each a stationary run of the HMM (its first hidden state drawn from the
  stationary distribution). Document d of row r is generated from its own seed, derived from
  (stream, r, d), so segment s needs only the one or two documents it overlaps, whatever came
  before. Within a document the text is one continuous HMM run, so the carried LSTM state is
  meaningful; at a document boundary the next text is independent of the last, as at a
  paragraph boundary in a real corpus. Each row starts at its own random phase inside its
  first document, so the rows of a batch do not all cross boundaries at the same step.
- text: the shards are tokenised once into one token array (paragraphs separated by an
  end-of-paragraph id). Row r reads consecutive tokens from its own offset: the rows' starting
  points are spread evenly over the model's part of the corpus, so only after
  `epoch_steps` = (part length / rows) / seq_len steps does a row reach text that another row
  has already read: the corpus is then exhausted and reading simply continues (the data
  repeat; a warning says so once).

Seeds are numpy SeedSequences over tuples of integers with a different leading tag per use
(parameters, validation, training documents, ...), so the validation text is never a training
document and no two uses share random numbers.
"""
from __future__ import annotations

import bisect
import gzip
import hashlib
import io
import math
import os
import re
import warnings
import zlib
from array import array
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
import torch

from ..runlog import file_lock
from ..runtime import heartbeat
from . import generated_cache
from .lm_config import BYTES_VOCAB_SIZE, TEXT_LAYOUT, TEXT_SHARD_PATTERNS, LmConfig

# Leading entries of the seed tuples: one per use of randomness.
_PARAMS, _VAL, _COUNTS, _DOC, _PHASE, _KEY, _ROTATION = range(1, 8)

#: tokens of the fixed sample of the embedded language whose unigram counts `class_counts` returns
COUNT_SAMPLE_TOKENS = 1 << 16
# The embedded target (val_loss): the Bayes optimum plus this fraction of the gap between the
# unigram entropy (what a context-free model reaches) and the optimum. See lm.LmWorkload.
EMBEDDED_TARGET_FRACTION = 0.25

#: weight of the uniform distribution mixed into the HMM's transition rows: it makes the chain
#: irreducible and aperiodic, so its stationary distribution is unique (a sparse Dirichlet draw
#: alone may split the states into closed classes)
TRANSITION_FLOOR = 1e-3

#: model splits of the training data, as in `codist.runtime.data.model_data`
SPLITS = ("same", "shuffled", "disjoint")


def _seed(*parts: int) -> np.random.SeedSequence:
    return np.random.SeedSequence([int(p) for p in parts])


def _key63(*parts: int) -> int:
    """A 63-bit integer identifying a stream row (fits a signed int64 tensor)."""
    return int(_seed(*parts).generate_state(1, np.uint64)[0] >> np.uint64(1))


def _model_tag(split: str, model: int) -> int:
    """0 when every model shares one stream (`same`), else model + 1 (its own stream)."""
    if split not in SPLITS:
        raise ValueError(f"data split {split!r}: allowed {', '.join(map(repr, SPLITS))}")
    return 0 if split == "same" else model + 1


def _batch(tokens: np.ndarray, keys: list[int], step: int) -> tuple[dict, torch.Tensor]:
    """(inputs, targets) from rows of seq_len + 1 consecutive tokens.

    The inputs are a dict so that the stream's identity travels with the tokens through every
    wrapper (DeepSpeed engine, DDP, output ensembles) to the LSTM, which carries its hidden state
    only from segment s of a row to segment s + 1 of the same row (see `lm.LstmLM`).
    """
    t = torch.from_numpy(np.ascontiguousarray(tokens, dtype=np.int64))
    b = t.shape[0]
    inputs = {"tokens": t[:, :-1], "stream": torch.tensor(keys, dtype=torch.int64),
              "segment": torch.full((b,), step, dtype=torch.int64)}
    return inputs, t[:, 1:]


# =============================================================================== embedded language


def _cumulative(p: np.ndarray) -> np.ndarray:
    c = np.cumsum(p, axis=-1)
    c[..., -1] = 2.0
    return c


class HmmLanguage:
    """A hidden Markov model over `vocab` tokens with `states` hidden states.

    Transitions: row k of A is a Dirichlet(`transition_alpha`) draw (small alpha: a few likely
    successors, so the past says much about the next state), mixed with TRANSITION_FLOOR of the
    uniform distribution. Emissions: state k emits the token of rank r in its own random order
    of the vocabulary with probability proportional to r^-zipf, a Zipfian law like that of word
    frequencies; the states' orders differ, so a token is evidence about the state but rarely
    proof of it. The per-token cross-entropy of the best possible predictor given the context is
    computed exactly by the forward algorithm with these true parameters (`nll`).
    """

    def __init__(self, vocab: int, states: int, zipf: float, transition_alpha: float, seed: int):
        rng = np.random.default_rng(_seed(_PARAMS, seed))
        k = states
        a = rng.dirichlet(np.full(k, transition_alpha), size=k)
        a = (1 - TRANSITION_FLOOR) * a / a.sum(1, keepdims=True) + TRANSITION_FLOOR / k
        base = 1.0 / np.arange(1, vocab + 1) ** zipf
        base /= base.sum()
        # order[s, r]: the token of rank r in state s
        order = np.stack([rng.permutation(vocab) for _ in range(k)])
        e = np.empty((k, vocab))
        np.put_along_axis(e, order, base[None, :], axis=1)
        self.vocab, self.states = vocab, k
        self.A, self.E, self._order = a, e, order
        self._E_by_token = np.ascontiguousarray(e.T)   # (vocab, states): likelihood of each state
        self.pi = self._stationary(a)
        # Cumulative laws for inverse-CDF sampling; the last entry is raised above 1 so that a
        # uniform draw never falls past it through rounding.
        self._cum_pi = _cumulative(self.pi).tolist()
        self._cum_A = _cumulative(a).tolist()
        self._cum_rank = _cumulative(base)

    @staticmethod
    def _stationary(a: np.ndarray) -> np.ndarray:
        """pi with pi A = pi, sum(pi) = 1 (unique: the chain is irreducible and aperiodic)."""
        k = a.shape[0]
        m = a.T - np.eye(k)
        m[-1] = 1.0
        rhs = np.zeros(k)
        rhs[-1] = 1.0
        pi = np.linalg.solve(m, rhs)
        pi = np.clip(pi, 0, None)
        return pi / pi.sum()

    def unigram(self) -> np.ndarray:
        """The stationary token distribution pi E."""
        return self.pi @ self.E

    def unigram_entropy(self) -> float:
        """Cross-entropy (nats/token) of the best context-free predictor."""
        p = self.unigram()
        p = p[p > 0]
        return float(-(p * np.log(p)).sum())

    def sample(self, seed: np.random.SeedSequence, length: int) -> np.ndarray:
        """`length` tokens of one stationary run, a function of `seed` alone (int64).

        Inverse-CDF sampling from two streams of uniforms: one drives the state chain (a Python
        loop: each state depends on the last), the other the emissions, drawn as ranks of the
        shared Zipf law and mapped through each state's order of the vocabulary (vectorised).
        """
        rng = np.random.default_rng(seed)
        u_state, u_emit = rng.random(length), rng.random(length)
        cum_a, search = self._cum_A, bisect.bisect_right
        s = search(self._cum_pi, u_state[0])
        states = [s]
        append = states.append
        for u in u_state[1:].tolist():
            s = search(cum_a[s], u)
            append(s)
        ranks = np.searchsorted(self._cum_rank, u_emit, side="right")
        return self._order[np.asarray(states), ranks].astype(np.int64)

    def nll(self, seqs: np.ndarray) -> np.ndarray:
        """Bayes-optimal -log p(x_t | x_<t) for t >= 1 of each row of `seqs` (N, L+1) -> (N, L).

        Each row is scored as a stationary run seen from its first token, i.e. with exactly the
        context an LSTM evaluated from a zero state on that row gets.
        """
        n, length = seqs.shape
        alpha = np.tile(self.pi, (n, 1))          # p(state_t | x_<t)
        out = np.zeros((n, length - 1))
        for t in range(length):
            joint = alpha * self._E_by_token[seqs[:, t]]
            z = joint.sum(1)
            if t:
                out[:, t - 1] = -np.log(z)
            alpha = (joint / z[:, None]) @ self.A
        return out


class EmbeddedData:
    """The embedded language of a config, its validation set, Bayes optimum and count sample.

    Everything here depends on the `data_seed` and the language knobs only, never on the run
    seed: all runs of one config are scored on the same validation text against the same optimum.
    """

    def __init__(self, cfg: LmConfig):
        self.cfg = cfg
        self.lang = HmmLanguage(cfg.vocab, cfg.states, cfg.zipf, cfg.transition_alpha, cfg.data_seed)
        self.unigram_entropy = self.lang.unigram_entropy()
        knobs = {k: getattr(cfg, k) for k in ("vocab", "states", "zipf", "transition_alpha", "data_seed",
                                              "val_tokens", "val_seq_len", "doc_len")}
        # The language is cheap to build and the training stream needs it; the samples are the cost.
        self.generated = generated_cache.cached("lm_embedded", knobs, self._samples)
        self.val_seqs = self.generated.arrays["val_seqs"]
        self.count_sample = self.generated.arrays["count_sample"]
        self.bayes_val_loss = float(self.generated.arrays["bayes_val_loss"])

    def _samples(self) -> dict[str, np.ndarray]:
        """The validation sequences, their Bayes-optimal loss and the count sample (cached arrays)."""
        cfg, lang = self.cfg, self.lang
        n = cfg.val_tokens // cfg.val_seq_len
        seqs = np.stack([lang.sample(_seed(_VAL, cfg.data_seed, i), cfg.val_seq_len + 1) for i in range(n)])
        docs = -(-COUNT_SAMPLE_TOKENS // cfg.doc_len)
        counts = np.concatenate([lang.sample(_seed(_COUNTS, cfg.data_seed, i), cfg.doc_len)
                                 for i in range(docs)])[:COUNT_SAMPLE_TOKENS]
        return {"val_seqs": seqs, "bayes_val_loss": np.float64(lang.nll(seqs).mean()), "count_sample": counts}

    @property
    def vocab_size(self) -> int:
        return self.cfg.vocab

    @property
    def train_tokens(self) -> np.ndarray:
        """A finite view of the endless training language: the count sample."""
        return self.count_sample

    def target(self) -> float:
        """val_loss target: the Bayes optimum plus EMBEDDED_TARGET_FRACTION of the gap to the
        unigram entropy (see lm.LmWorkload)."""
        return self.bayes_val_loss + EMBEDDED_TARGET_FRACTION * (self.unigram_entropy - self.bayes_val_loss)

    def eval_extras(self, val_loss: float) -> dict[str, float]:
        """val_bayes_gap: the sums cover the whole validation set once, so the gap is exact."""
        return {"val_bayes_gap": val_loss - self.bayes_val_loss}

    def facts(self) -> dict:
        return {"train_size": None, "bayes_val_loss": round(self.bayes_val_loss, 6),
                "unigram_entropy": round(self.unigram_entropy, 6), "hmm_states": self.cfg.states,
                "zipf": self.cfg.zipf, "data_generation_s": round(self.generated.seconds, 4),
                "data_cached": self.generated.loaded}

    def val_tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        t = torch.from_numpy(self.val_seqs)
        return t[:, :-1].contiguous(), t[:, 1:].contiguous()

    def class_counts(self) -> torch.Tensor:
        return torch.from_numpy(np.bincount(self.count_sample, minlength=self.cfg.vocab))

    def stream(self, split: str, model: int, models: int, seed: int, rows: range, global_rows: int,
               seq_len: int) -> "EmbeddedStream":
        """Rows `rows` of model `model`'s global batches (`same`: one stream for every model;
        `disjoint` and `shuffled`: the model's own fresh stream, since the language is endless)."""
        ident = (self.cfg.data_seed, seed, _model_tag(split, model))
        return EmbeddedStream(self.lang, ident, rows, seq_len, self.cfg.doc_len)


class EmbeddedStream:
    """`batch(step)`: segment `step` of each of this rank's rows of the embedded language."""

    #: documents kept per row; a segment overlaps at most two when doc_len > seq_len
    CACHE_DOCS = 3

    def __init__(self, lang: HmmLanguage, ident: tuple[int, ...], rows: range, seq_len: int, doc_len: int):
        self.lang, self.ident, self.rows = lang, ident, rows
        self.seq_len, self.doc_len = seq_len, doc_len
        self.phases = [int(_seed(_PHASE, *ident, r).generate_state(1)[0]) % doc_len for r in rows]
        self.keys = [_key63(_KEY, 0, *ident, r) for r in rows]
        self._docs: list[dict[int, np.ndarray]] = [{} for _ in rows]

    def _doc(self, i: int, d: int) -> np.ndarray:
        """Document d of the i-th row; a memo only (any document can be produced directly)."""
        cache = self._docs[i]
        if d not in cache:
            if len(cache) >= self.CACHE_DOCS:
                del cache[min(cache)]
            cache[d] = self.lang.sample(_seed(_DOC, *self.ident, self.rows[i], d), self.doc_len)
        return cache[d]

    def row_tokens(self, i: int, start: int, n: int) -> np.ndarray:
        """Tokens [start, start + n) of the i-th row's text."""
        first, last = start // self.doc_len, (start + n - 1) // self.doc_len
        off = start - first * self.doc_len
        if first == last:
            return self._doc(i, first)[off:off + n]
        text = np.concatenate([self._doc(i, d) for d in range(first, last + 1)])
        return text[off:off + n]

    def batch(self, step: int):
        t = self.seq_len
        tokens = np.stack([self.row_tokens(i, self.phases[i] + step * t, t + 1) for i in range(len(self.rows))])
        return _batch(tokens, self.keys, step)


# =============================================================================== text shards


def find_shards(data_dir: str | os.PathLike) -> list[Path]:
    """The shard files under `data_dir` (recursively, sorted; hidden folders such as the cache skipped).

    Raises FileNotFoundError naming the path and the expected layout.
    """
    root = Path(data_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"workload.data_dir {str(root)!r} is not a folder; expected {TEXT_LAYOUT}")
    found = set()
    for pattern in TEXT_SHARD_PATTERNS:
        for path in root.rglob(pattern):
            rel = path.relative_to(root)
            if path.is_file() and not any(part.startswith(".") for part in rel.parts):
                found.add(path)
    if not found:
        raise FileNotFoundError(f"workload.data_dir {str(root)!r} holds no text shards; expected {TEXT_LAYOUT}")
    return sorted(found)


def _open_binary(path: Path):
    return gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")


def _is_wet(path: Path) -> bool:
    name = path.name[:-3] if path.name.endswith(".gz") else path.name
    return name.endswith(".wet")


_HEADER = re.compile(rb"^([A-Za-z0-9-]+):\s*(.*?)\s*$")


def read_wet(path: str | os.PathLike) -> Iterator[str]:
    """Payloads of the `WARC-Type: conversion` records of a WET file (WARC 1.0/1.1 framing).

    A record is a `WARC/x.y` line, header lines up to an empty line, and exactly
    Content-Length payload bytes; the payload is read by length, never by scanning for the next
    header, so text that looks like a header cannot split a record. Other records (warcinfo,
    and request/response/metadata in a full WARC) are skipped.
    """
    path = Path(path)
    with _open_binary(path) as f:
        while True:
            line = f.readline()
            if not line:
                return
            if not line.strip():
                continue                          # blank lines between records
            if not line.startswith(b"WARC/"):
                raise ValueError(f"{path}: not a WARC/WET file: expected a 'WARC/1.0' record line, got "
                                 f"{line[:60]!r} at byte {f.tell() - len(line)}")
            headers = {}
            for line in iter(f.readline, b""):
                if not line.strip():
                    break
                m = _HEADER.match(line)
                if m:
                    headers[m.group(1).decode("ascii", "replace").lower()] = m.group(2)
            if "content-length" not in headers:
                raise ValueError(f"{path}: WARC record without Content-Length (headers {sorted(headers)})")
            n = int(headers["content-length"])
            payload = f.read(n)
            if len(payload) < n:
                raise ValueError(f"{path}: truncated WARC record: Content-Length {n}, {len(payload)} bytes left")
            if headers.get("warc-type", b"").lower() == b"conversion":
                yield payload.decode("utf-8", errors="replace")


def _paragraphs(text: str) -> Iterator[str]:
    for line in text.splitlines():
        line = line.strip()
        if line:
            yield line


def read_paragraphs(path: str | os.PathLike) -> Iterator[str]:
    """The paragraphs (non-empty lines, stripped) of one shard: a WET file's conversion payloads,
    or a plain-text file (UTF-8, undecodable bytes replaced). A shard that cannot be read (e.g. a
    truncated or corrupt .gz) is a ValueError naming it: gzip's own errors do not."""
    path = Path(path)
    try:
        yield from _read_paragraphs(path)
    except (OSError, EOFError, zlib.error) as e:
        raise ValueError(f"{path}: unreadable text shard ({type(e).__name__}: {e})") from None


def _read_paragraphs(path: Path) -> Iterator[str]:
    if _is_wet(path):
        for payload in read_wet(path):
            yield from _paragraphs(payload)
        return
    with _open_binary(path) as f, io.TextIOWrapper(f, encoding="utf-8", errors="replace") as text:
        for line in text:
            line = line.strip()
            if line:
                yield line


def shards_signature(root: Path, shards: list[Path]) -> str:
    """Hash of the shards' relative names, sizes and modification times: a cache key that
    changes when the corpus does, without reading it."""
    h = hashlib.sha256()
    for p in shards:
        st = p.stat()
        h.update(f"{p.relative_to(root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


# =============================================================================== tokenizers


class BytesTokenizer:
    """UTF-8 bytes (ids 0..255) and an end-of-paragraph id 256: no training, nothing unknown."""

    vocab_size = BYTES_VOCAB_SIZE
    eos_id = 256
    key = "bytes-v1"

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: Iterable[int]) -> str:
        """Inverse of `encode`; the end-of-paragraph id decodes as a newline."""
        return bytes(10 if i == self.eos_id else i for i in ids).decode("utf-8", errors="replace")

    def encode_paragraphs(self, paragraphs: list[str]) -> np.ndarray:
        """Each paragraph's bytes followed by the end-of-paragraph id. Paragraphs are lines, so
        every newline of the joined text is a paragraph boundary."""
        if not paragraphs:
            return np.zeros(0, dtype=np.int32)
        data = np.frombuffer(("\n".join(paragraphs) + "\n").encode("utf-8"), dtype=np.uint8).astype(np.int32)
        data[data == 10] = self.eos_id
        return data


class SentencePieceTokenizer:
    """A SentencePiece model; the paragraph end is its `</s>` id."""

    def __init__(self, model_file: str | os.PathLike):
        import sentencepiece as spm
        path = Path(model_file)
        if not path.is_file():
            raise FileNotFoundError(f"workload.tokenizer_model {str(path)!r}: no such SentencePiece model file")
        self.path = path
        try:
            self.sp = spm.SentencePieceProcessor(model_file=str(path))
        except (OSError, RuntimeError) as e:   # sentencepiece's parse error does not name the file
            raise ValueError(f"{path}: not a SentencePiece model ({type(e).__name__}: {e})") from None
        self.vocab_size = self.sp.get_piece_size()
        self.eos_id = self.sp.eos_id()
        if self.eos_id < 0:
            raise ValueError(f"{path}: the SentencePiece model has no </s> id; the LM needs one to end paragraphs")
        self.key = "spm-" + hashlib.sha256(path.read_bytes()).hexdigest()

    def encode(self, text: str) -> list[int]:
        return self.sp.encode(text)

    def decode(self, ids: Iterable[int]) -> str:
        return self.sp.decode([int(i) for i in ids])

    def encode_paragraphs(self, paragraphs: list[str]) -> np.ndarray:
        out = array("i")
        for ids in self.sp.encode(paragraphs):
            out.extend(ids)
            out.append(self.eos_id)
        return np.frombuffer(out, dtype=np.int32).copy()


#: settings of every SentencePiece model trained here (part of the cache key). `unigram` is
#: SentencePiece's likelihood-based segmentation, the closest to Google's WordPiece; at most
#: input_sentence_size paragraphs (the first ones, in shard order) are used for training; a fixed
#: thread count keeps the result independent of the machine.
SPM_SETTINGS = {"model_type": "unigram", "character_coverage": 0.9995, "input_sentence_size": 2_000_000,
                "shuffle_input_sentence": False, "num_threads": 8}


def train_sentencepiece(paragraphs: Iterable[str], vocab_size: int, out: str | os.PathLike) -> Path:
    """Train a SentencePiece model of `vocab_size` pieces (ids: <unk> 0, <s> 1, </s> 2) and
    write it to `out` atomically."""
    import sentencepiece as spm
    model = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(sentence_iterator=iter(paragraphs), model_writer=model,
                                       vocab_size=vocab_size, minloglevel=2, **SPM_SETTINGS)
    except RuntimeError as e:
        raise RuntimeError(f"training a SentencePiece model of workload.vocab_size={vocab_size} failed: {e}. "
                           f"A small corpus supports only a small vocabulary: lower vocab_size") from e
    out = Path(out)
    _atomic_write_bytes(out, model.getvalue())
    return out


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)




# =============================================================================== text corpus


#: characters of paragraphs tokenised at a time into the token cache: the build holds one such
#: chunk's ids (SentencePiece returns Python lists, ~40 bytes a token), never the corpus
ENCODE_CHUNK_CHARS = 1 << 20


def _npy_header(dtype, n: int) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
                                               "fortran_order": False, "shape": (n,)})
    return buf.getvalue()


def write_npy_stream(path: str | os.PathLike, chunks: Iterable[np.ndarray], dtype) -> int:
    """Write the concatenation of `chunks` to the .npy file `path` as they come, holding one chunk
    at a time (the whole corpus in memory, at ~10 bytes a token, capped what one job could
    tokenise); returns its length. The header is written for length 0 and rewritten at the end, in
    place: numpy pads a header with room for the longest length (np.lib.format's
    GROWTH_AXIS_MAX_DIGITS), and the rewrite is checked to be the same size."""
    first = _npy_header(dtype, 0)
    n = 0
    with open(path, "wb") as f:
        f.write(first)
        for chunk in chunks:
            np.asarray(chunk).astype(dtype, copy=False).tofile(f)
            n += len(chunk)
        last = _npy_header(dtype, n)
        if len(last) != len(first):   # (a numpy without that padding: the data would have to move)
            raise RuntimeError(f"{path}: the .npy header for {n} tokens is {len(last)} bytes, not {len(first)}")
        f.seek(0)
        f.write(last)
    return n



# ------------------------------------------------------------------ the preparing job's resources
# What a SLURM job of `codist data prepare` (the workflow's lm_data rule) asks for, from what is known
# of the corpus before reading it: the shards' sizes. Rates measured on this repository's 2-core
# machine (synthetic text, a 1,000-piece model): SentencePiece encodes ~3 MB of text a second, and
# its training takes ~3 s and peaks at ~20 bytes a byte of its training text (4 and 16 MB measured);
# the token cache is written as it is encoded (write_npy_stream), so only the training's memory grows
# with the corpus, and it reads at most SPM_SETTINGS["input_sentence_size"] paragraphs.

#: text bytes per stored byte of a .gz shard (Common Crawl's WET files: ~3)
GZIP_TEXT_RATIO = 3
#: text bytes per token where the shards are not there to measure: SentencePiece on English text,
#: ~4 (Anil's 24,006 word-pieces); the bytes tokenizer, 1
TEXT_BYTES_PER_TOKEN = {"sentencepiece": 4, "bytes": 1}
#: SentencePiece's training: peak memory per byte of its training text (measured: ~20)
SPM_MEMORY_PER_TEXT_BYTE = 24
#: the most text SentencePiece trains on: input_sentence_size paragraphs of ~500 bytes (assumed: a
#: Common Crawl paragraph is a line of a page's text)
SPM_MAX_TEXT_BYTES = SPM_SETTINGS["input_sentence_size"] * 500
#: SentencePiece's training: seconds per MB of its training text (measured: ~3)
SPM_SECONDS_PER_MB = 4
#: text encoded a second (measured: ~3 MB)
ENCODE_BYTES_PER_S = 2_000_000
#: memory and minutes beside those: the interpreter, torch and numpy, one chunk's ids; start-up,
#: listing and hashing the shards, the unigram counts
BASE_MEM_MB, BASE_MINUTES = 4000, 30


def corpus_text_bytes(data_dir: str | os.PathLike) -> int | None:
    """The text the shards under `data_dir` hold, from their sizes alone (a .gz shard's size x
    GZIP_TEXT_RATIO); None where there are none to see (the data root not given, or not here)."""
    try:
        shards = find_shards(data_dir)
    except FileNotFoundError:
        return None
    return sum(p.stat().st_size * (GZIP_TEXT_RATIO if p.suffix == ".gz" else 1) for p in shards)


def prepare_resources(cfg) -> dict:
    """{"mem_mb", "runtime"} (minutes) of the job that prepares an LM's text for run config `cfg`:
    from the corpus's size where the data root shows its shards, else from the text the run reads
    (train.steps x the global batch x workload.seq_len tokens, which a corpus it never repeats holds)."""
    from ..config import ConfigError
    from ..data_root import workload_with_data
    w = cfg.workload
    try:
        text = corpus_text_bytes(workload_with_data(cfg).data_dir)
    except ConfigError:   # a relative data_dir and no data root (a dry run elsewhere)
        text = None
    if text is None:
        tokens = cfg.train.steps * cfg.train.batch_per_rank * cfg.parallel.world_size * w.seq_len
        text = tokens * TEXT_BYTES_PER_TOKEN[w.tokenizer]
    trains_spm = w.tokenizer == "sentencepiece" and not w.tokenizer_model
    spm_text = min(text, SPM_MAX_TEXT_BYTES) if trains_spm else 0
    seconds = spm_text / 1e6 * SPM_SECONDS_PER_MB + text / ENCODE_BYTES_PER_S
    return {"mem_mb": BASE_MEM_MB + -(-spm_text * SPM_MEMORY_PER_TEXT_BYTE // 1_000_000),
            "runtime": BASE_MINUTES + math.ceil(seconds / 60)}


class TextCorpus:
    """The tokenised shards of a `dataset: text` config.

    Tokenised once and cached in `cache_dir` as `tokens-<hash>.npy` (the hash covers the shards'
    names, sizes and times and the tokenizer's identity); a SentencePiece model trained here is
    cached there as `spm-<hash>.model`. Ranks that start together take turns through a lock file,
    so the work is done once (the working rank reports its progress to its heartbeat, so a long
    tokenization does not look like a hang to the launcher's watchdog). The last `val_tokens` tokens are the validation text; the rest is
    the training text (so with several shards, validation comes from the last shard).
    The SentencePiece model, when trained here, sees all shards, validation text included: it is
    unsupervised, and on a large corpus only the first SPM_SETTINGS["input_sentence_size"]
    paragraphs are used anyway.
    """

    def __init__(self, cfg: LmConfig):
        self.cfg = cfg
        self.root = Path(cfg.data_dir)
        self.shards = find_shards(self.root)
        self.cache_dir = Path(cfg.cache_dir) if cfg.cache_dir else self.root / ".codist_cache"
        try:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise OSError(f"cannot create the LM cache folder {str(self.cache_dir)!r} ({e}); set "
                          f"workload.cache_dir to a writable folder") from e
        signature = shards_signature(self.root, self.shards)
        self.tokenizer = self._tokenizer(signature)
        if cfg.vocab_size is not None and cfg.tokenizer_model and self.tokenizer.vocab_size != cfg.vocab_size:
            raise ValueError(f"workload.vocab_size={cfg.vocab_size} but workload.tokenizer_model "
                             f"{cfg.tokenizer_model!r} has {self.tokenizer.vocab_size} pieces")
        self.tokens = self._tokens(signature)
        if len(self.tokens) <= cfg.val_tokens + cfg.seq_len + 1:
            raise ValueError(f"the text in {str(self.root)!r} has {len(self.tokens)} tokens: too few for "
                             f"workload.val_tokens={cfg.val_tokens} held out plus training segments of "
                             f"seq_len={cfg.seq_len}")
        self.train_tokens = self.tokens[:-cfg.val_tokens]
        self.val_text = self.tokens[-cfg.val_tokens:]
        self._counts = None

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    def paragraphs(self) -> Iterator[str]:
        """Every shard's paragraphs, in order; each 10,000 reported to the heartbeat (SentencePiece's
        training reads them one by one)."""
        for shard in self.shards:
            for i, p in enumerate(read_paragraphs(shard), start=1):
                if i % 10000 == 0:
                    heartbeat.progress()
                yield p

    def _tokenizer(self, signature: str):
        cfg = self.cfg
        if cfg.tokenizer == "bytes":
            return BytesTokenizer()
        if cfg.tokenizer_model:
            return SentencePieceTokenizer(cfg.tokenizer_model)
        key = hashlib.sha256(f"{signature}|{cfg.spm_vocab_size}|{sorted(SPM_SETTINGS.items())}".encode())
        path = self.cache_dir / f"spm-{key.hexdigest()[:16]}.model"
        with file_lock(self.cache_dir / f"{path.name}.lock"):
            if not path.is_file():
                train_sentencepiece(self.paragraphs(), cfg.spm_vocab_size, path)
        return SentencePieceTokenizer(path)

    def _tokens(self, signature: str) -> np.ndarray:
        key = hashlib.sha256(f"{signature}|{self.tokenizer.key}".encode()).hexdigest()[:16]
        path = self.cache_dir / f"tokens-{key}.npy"
        with file_lock(self.cache_dir / f"{path.name}.lock"):
            if not path.is_file():
                dtype = np.uint16 if self.tokenizer.vocab_size <= 1 << 16 else np.int32
                tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.npy")
                write_npy_stream(tmp, (c for s in self.shards for c in self._encode_chunks(s)), dtype)
                os.replace(tmp, path)
        try:
            tokens = np.load(path, mmap_mode="r")
        except (OSError, ValueError) as e:
            raise ValueError(f"{path}: unreadable token cache ({type(e).__name__}: {e}); delete it to rebuild") from None
        if tokens.ndim != 1 or tokens.dtype.kind not in "iu":
            raise ValueError(f"{path}: the token cache must be a 1-d integer array, got {tokens.dtype} with shape "
                             f"{tokens.shape}; delete it to rebuild")
        return tokens

    def _encode_chunks(self, shard: Path) -> Iterator[np.ndarray]:
        """One shard's tokens, ENCODE_CHUNK_CHARS characters of paragraphs at a time."""
        buf, size = [], 0
        for p in read_paragraphs(shard):
            buf.append(p)
            size += len(p)
            if size >= ENCODE_CHUNK_CHARS:
                yield self.tokenizer.encode_paragraphs(buf)
                buf, size = [], 0
                heartbeat.progress()
        if buf:
            yield self.tokenizer.encode_paragraphs(buf)

    def val_tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Validation sequences: consecutive windows of val_seq_len + 1 tokens of the held-out text,
        overlapping by one token, so every held-out token but the first is a target exactly once
        (a trailing part shorter than val_seq_len is left out)."""
        L = self.cfg.val_seq_len
        text = np.asarray(self.val_text, dtype=np.int64)
        n = (len(text) - 1) // L
        idx = np.arange(n)[:, None] * L + np.arange(L + 1)[None, :]
        t = torch.from_numpy(text[idx])
        return t[:, :-1].contiguous(), t[:, 1:].contiguous()

    def class_counts(self) -> torch.Tensor:
        """Unigram counts of the training text, counted once per process (`token_counts`)."""
        if self._counts is None:
            self._counts = token_counts(self.train_tokens, self.vocab_size)
        return torch.from_numpy(self._counts.copy())

    def target(self) -> float | None:
        return self.cfg.target   # real text: the config's (no known optimum)

    def eval_extras(self, val_loss: float) -> dict[str, float]:
        return {}

    def facts(self) -> dict:
        return {"train_size": len(TokenWindows(self.train_tokens, self.cfg.seq_len)),
                "train_tokens": int(len(self.train_tokens)), "val_tokens": int(len(self.val_text)),
                "shards": len(self.shards), "tokenizer": self.cfg.tokenizer,
                "tokenizer_file": str(getattr(self.tokenizer, "path", "")) or None,
                "unigram_entropy": round(entropy(self.class_counts().numpy()), 6)}

    def stream(self, split: str, model: int, models: int, seed: int, rows: range, global_rows: int,
               seq_len: int) -> "TextStream":
        """Rows `rows` of model `model`'s global batches of `global_rows` rows.

        `same`: every model reads the whole training text at the same offsets; `shuffled`: the
        whole text, at offsets rotated by a model-specific amount; `disjoint`: the model reads
        only its own contiguous 1/models of the text (fresh text for each model, as Anil's
        partitioned data, exhausted `models` times sooner).
        """
        tag = _model_tag(split, model)
        n = len(self.train_tokens)
        start, end = (model * n // models, (model + 1) * n // models) if split == "disjoint" else (0, n)
        length = end - start
        rotation = int(_seed(_ROTATION, seed, tag).generate_state(1, np.uint64)[0] % np.uint64(length))
        return TextStream(self.train_tokens, start, length, rotation, rows, global_rows, seq_len,
                          ident=(seed, tag))


class TextStream:
    """`batch(step)`: segment `step` of each of this rank's rows of the training text.

    Row r of the model's `global_rows` starts at `rotation + r * stride` inside the model's part
    [start, start + length) of the text (stride = length // global_rows) and reads on from there,
    so segment s of row r is the tokens at offset (r * stride + rotation + s * seq_len) modulo
    `length`, plus one more for the last target: consecutive segments are consecutive text.
    """

    def __init__(self, tokens: np.ndarray, start: int, length: int, rotation: int, rows: range,
                 global_rows: int, seq_len: int, ident: tuple[int, ...]):
        self.stride = length // global_rows
        if self.stride < seq_len + 1:
            raise ValueError(f"the training text ({length} tokens for this model) is too short for "
                             f"{global_rows} rows of segments of {seq_len} + 1 tokens")
        self.tokens, self.start, self.length, self.rows, self.seq_len = tokens, start, length, rows, seq_len
        self.offsets = np.array([(rotation + r * self.stride) % length for r in rows], dtype=np.int64)
        self.keys = [_key63(_KEY, 1, *ident, r) for r in rows]
        #: steps before a row reaches text another row of this model has read (then the data repeat)
        self.epoch_steps = self.stride // seq_len
        self._warned = False

    def batch(self, step: int):
        if step >= self.epoch_steps and not self._warned:
            self._warned = True
            warnings.warn(f"LM text stream: the training text is exhausted after {self.epoch_steps} steps "
                          f"({self.length} tokens / {self.length // self.stride} rows / seq_len {self.seq_len}); "
                          f"step {step} re-reads text already trained on", stacklevel=2)
        pos = (self.offsets[:, None] + step * self.seq_len + np.arange(self.seq_len + 1)[None, :]) % self.length
        return _batch(np.asarray(self.tokens[self.start + pos]), self.keys, step)


class TokenWindows(torch.utils.data.Dataset):
    """Non-overlapping windows of seq_len inputs and their next-token targets over a token
    array: a finite, map-style view of LM text for code that wants a `Dataset`."""

    def __init__(self, tokens: np.ndarray, seq_len: int):
        self.tokens, self.seq_len = tokens, seq_len

    def __len__(self) -> int:
        return max(0, (len(self.tokens) - 1) // self.seq_len)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if not 0 <= i < len(self):
            raise IndexError(i)
        s = i * self.seq_len
        w = torch.from_numpy(np.asarray(self.tokens[s:s + self.seq_len + 1], dtype=np.int64))
        return w[:-1], w[1:]


#: tokens counted at a time by `token_counts`: np.bincount copies its input to 8-byte integers
COUNT_CHUNK = 1 << 22


def token_counts(tokens: np.ndarray, vocab_size: int) -> np.ndarray:
    """np.bincount(tokens, minlength=vocab_size), counted COUNT_CHUNK tokens at a time: a memory-mapped
    corpus of billions of 2-byte tokens is never copied whole (at 8 bytes a token) into a rank."""
    counts = np.zeros(vocab_size, dtype=np.int64)
    for start in range(0, len(tokens), COUNT_CHUNK):
        counts += np.bincount(tokens[start:start + COUNT_CHUNK], minlength=vocab_size)
    return counts


def entropy(counts: np.ndarray) -> float:
    """Entropy (nats) of the distribution proportional to `counts`."""
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())


#: `workload.dataset` -> the data source: each has vocab_size, train_tokens (a finite view),
#: stream(...), val_tensors(), class_counts(), target(), eval_extras(val_loss) and facts()
SOURCES = {"embedded": EmbeddedData, "text": TextCorpus}
