"""Data for the `translation` workload: the embedded parallel corpus, fairseq-preprocess, and the
checks on a fairseq data folder.

The embedded corpus comes from a KNOWN transduction, so the best achievable scores are known:

- Source words belong to four classes (determiners, adjectives, nouns, verbs: disjoint slices of
  the `vocab` source words). A sentence of L words (L uniform in [min_len, max_len]) is a
  sequence of phrases: a verb, or a noun phrase `[det] [adj [adj]] noun`.
- Each source word has one target word; a `synonym_fraction` of them have a second one, used
  with probability `synonym_prob` (independently at every occurrence). That noise is the only
  randomness of the target given the source, so the Bayes-optimal translator is known.
- Reordering: in a noun phrase the adjectives move behind the noun, in reverse order:
  `det a1 a2 noun` -> `det' noun' a2' a1'`. Verbs stay in place. Lengths are preserved.

Known limits, computed on the validation set from the generating process and stored in the
corpus's `corpus.json`: `bayes_val_nll`, the NLL (nats per target token, eos included) of the
true conditional distribution, which no model beats in expectation; and `map_val_bleu`, the
corpus BLEU of the Bayes-optimal per-token (MAP) translator, which always picks the majority
synonym: the ceiling of any system that outputs the single most probable translation.

The corpus is written as text and binarized by fairseq-preprocess (in this process), so the
embedded run reads exactly the format of real fairseq data. The result is cached in a folder
named by a hash of the generator's knobs, built under a temporary name and renamed into
place, with a file lock so that the ranks of a run build it once.
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import random
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..runlog import file_lock
from .translation_config import required_files

#: bump when the generator's output for the same knobs changes (changes every cache key)
GENERATOR_VERSION = 1

CLASSES = ("det", "adj", "noun", "verb")
#: share of the source vocabulary in each class (nouns take what is left)
CLASS_SHARES = {"det": 0.05, "adj": 0.30, "verb": 0.25}
P_VERB = 0.3                    # a phrase is a verb with this probability, else a noun phrase
P_DET = 0.5                     # a noun phrase starts with a determiner
P_ADJ = (0.4, 0.35, 0.25)       # a noun phrase has 0, 1 or 2 adjectives

# Disjoint alphabets keep every source word different from every target word, so a joined
# dictionary (share_embeddings: all) never merges a source word with a target word.
SRC_SYLLABLES = [c + v for c in "bdgklmnprst" for v in "aeiou"]
TGT_SYLLABLES = [c + v for c in "cfhjqvwxyz" for v in "aeiou"]


def _words(n: int, syllables: list[str], rng: random.Random) -> list[str]:
    """n distinct words of at least two syllables from a shuffled syllable table."""
    table = list(syllables)
    rng.shuffle(table)
    width = max(2, math.ceil(math.log(max(n, 2), len(table))))
    out = []
    for i in range(n):
        digits, k = [], i
        for _ in range(width):
            k, d = divmod(k, len(table))
            digits.append(table[d])
        out.append("".join(digits))
    return out


@dataclass(frozen=True)
class Transduction:
    """The known source->target rule: word classes, translations, synonyms."""

    src_words: list[str]
    kinds: list[str]                  # class of each source word
    main: list[str]                   # majority translation of each source word
    synonym: list[str | None]         # minority translation, or None
    synonym_prob: float
    by_kind: dict[str, list[int]] = field(default_factory=dict)

    @classmethod
    def make(cls, vocab: int, synonym_fraction: float, synonym_prob: float, rng: random.Random) -> "Transduction":
        counts = {k: max(1, round(share * vocab)) for k, share in CLASS_SHARES.items()}
        counts["noun"] = vocab - sum(counts.values())
        if counts["noun"] < 1:
            raise ValueError(f"workload.vocab={vocab} is too small for four word classes")
        kinds = [k for k in CLASSES for _ in range(counts[k])]
        src = _words(vocab, SRC_SYLLABLES, rng)
        n_syn = round(synonym_fraction * vocab)
        tgt = _words(vocab + n_syn, TGT_SYLLABLES, rng)
        rng.shuffle(tgt)
        with_syn = set(rng.sample(range(vocab), n_syn))
        extra = iter(tgt[vocab:])
        synonym = [next(extra) if i in with_syn else None for i in range(vocab)]
        by_kind = {k: [i for i in range(vocab) if kinds[i] == k] for k in CLASSES}
        return cls(src, kinds, tgt[:vocab], synonym, synonym_prob, by_kind)

    def sample_source(self, length: int, rng: random.Random) -> list[int]:
        """A grammatical source sentence of exactly `length` words (as word indices)."""
        out: list[int] = []
        while len(out) < length:
            room = length - len(out)
            if rng.random() < P_VERB:
                out.append(rng.choice(self.by_kind["verb"]))
                continue
            det = rng.random() < P_DET
            adjs = rng.choices(range(3), weights=P_ADJ)[0]
            adjs = min(adjs, room - 1)
            det = det and (adjs + 2 <= room)
            if det:
                out.append(rng.choice(self.by_kind["det"]))
            out.extend(rng.choice(self.by_kind["adj"]) for _ in range(adjs))
            out.append(rng.choice(self.by_kind["noun"]))
        return out

    def reorder(self, sentence: list[int]) -> list[int]:
        """Source word indices in target order: adjectives behind their noun, reversed."""
        out, adjs = [], []
        for w in sentence:
            kind = self.kinds[w]
            if kind == "adj":
                adjs.append(w)
            elif kind == "noun":
                out.append(w)
                out.extend(reversed(adjs))
                adjs = []
            else:
                out.append(w)
        if adjs:
            raise ValueError("adjectives without a noun: not a sentence of this grammar")
        return out

    def translate(self, sentence: list[int], rng: random.Random | None = None) -> list[str]:
        """The target sentence; with `rng`, synonyms are drawn, without it the MAP translation."""
        words = []
        for w in self.reorder(sentence):
            use_syn = self.synonym[w] is not None and rng is not None and rng.random() < self.synonym_prob
            words.append(self.synonym[w] if use_syn else self.main[w])
        return words

    def token_probs(self, sentence: list[int], target: list[str]) -> list[float]:
        """True probability of each target word given the source (eos, probability 1, not included)."""
        probs = []
        for w, t in zip(self.reorder(sentence), target):
            if self.synonym[w] is None:
                probs.append(1.0)
            else:
                probs.append(self.synonym_prob if t == self.synonym[w] else 1.0 - self.synonym_prob)
        return probs


@dataclass
class Corpus:
    train: list[tuple[str, str]]
    valid: list[tuple[str, str]]
    transduction: Transduction
    facts: dict


def generate(pairs: int, val_pairs: int, vocab: int, min_len: int, max_len: int, synonym_fraction: float,
             synonym_prob: float, data_seed: int) -> Corpus:
    """The embedded corpus: `pairs` training and `val_pairs` validation pairs of space-separated words.

    Deterministic in its arguments (Python's `random` with an integer seed is stable across
    versions). Validation sources never occur in the training set.
    """
    rng = random.Random(f"codist-translation-{data_seed}")
    trans = Transduction.make(vocab, synonym_fraction, synonym_prob, rng)
    src_rng, noise_rng = random.Random(rng.random()), random.Random(rng.random())

    def pair(seen: set | None):
        for _ in range(1000):
            src = trans.sample_source(src_rng.randint(min_len, max_len), src_rng)
            if seen is None or tuple(src) not in seen:
                return src, trans.translate(src, noise_rng)
        raise ValueError("cannot find validation sentences outside the training set: raise workload.vocab or "
                         "workload.max_len, or lower workload.pairs")

    train_idx = [pair(None) for _ in range(pairs)]
    seen = {tuple(s) for s, _ in train_idx}
    valid_idx = [pair(seen) for _ in range(val_pairs)]

    def text(rows):
        return [(" ".join(trans.src_words[w] for w in s), " ".join(t)) for s, t in rows]

    tokens = sum(len(t) + 1 for _, t in valid_idx)
    nll = -sum(math.log(p) for s, t in valid_idx for p in trans.token_probs(s, t))
    facts = {
        "bayes_val_nll": nll / tokens,
        "map_val_bleu": _corpus_bleu([" ".join(trans.translate(s)) for s, _ in valid_idx],
                                     [" ".join(t) for _, t in valid_idx]),
        "source_words": vocab,
        "target_words": vocab + sum(x is not None for x in trans.synonym),
    }
    return Corpus(text(train_idx), text(valid_idx), trans, facts)


def _corpus_bleu(hyps: list[str], refs: list[str]) -> float:
    import sacrebleu
    return float(sacrebleu.corpus_bleu(hyps, [refs]).score)


# --------------------------------------------------------------------------- fairseq-preprocess

def write_text(folder: Path, split: str, pairs: list[tuple[str, str]], src: str, tgt: str) -> None:
    """`<split>.<src>` and `<split>.<tgt>`, one sentence per line (fairseq-preprocess's input)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{split}.{src}").write_text("".join(s + "\n" for s, _ in pairs))
    (folder / f"{split}.{tgt}").write_text("".join(t + "\n" for _, t in pairs))


def preprocess(text_dir: Path, dest: Path, src: str, tgt: str, joined: bool = False, valid: bool = True) -> float:
    """Binarize `text_dir/{train,valid}.{src,tgt}` into `dest` with fairseq-preprocess; returns seconds.

    Runs `fairseq_cli.preprocess.main` in this process (a subprocess would import fairseq again,
    ~8 s of CPU). Importing that module calls logging.basicConfig and `main` attaches a file
    handler to its logger: both are undone here, so the caller's logging is left as it was.
    """
    root = logging.getLogger()
    root_handlers, root_level = list(root.handlers), root.level
    t0 = time.perf_counter()
    from fairseq import options
    from fairseq_cli import preprocess as fp

    argv = ["--source-lang", src, "--target-lang", tgt, "--trainpref", str(text_dir / "train"),
            "--destdir", str(dest), "--workers", "1", "--dataset-impl", "mmap"]
    if valid:
        argv += ["--validpref", str(text_dir / "valid")]
    if joined:
        argv.append("--joined-dictionary")
    args = options.get_preprocessing_parser().parse_args(argv)
    handlers = list(fp.logger.handlers)
    level = fp.logger.level
    fp.logger.setLevel(logging.WARNING)
    try:
        fp.main(args)
    finally:
        for h in fp.logger.handlers[:]:
            if h not in handlers:
                fp.logger.removeHandler(h)
                h.close()
        fp.logger.setLevel(level)
        for h in root.handlers[:]:
            if h not in root_handlers:
                root.removeHandler(h)
        root.setLevel(root_level)
    return time.perf_counter() - t0


def check_data_dir(data_dir: str | Path, src: str, tgt: str) -> Path:
    """The fairseq data folder, or FileNotFoundError naming it, every missing file, and the layout."""
    from .translation_config import FAIRSEQ_LAYOUT
    root = Path(data_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"workload.data_dir {str(root)!r} does not exist; expected {FAIRSEQ_LAYOUT} "
                                f"with <src>={src}, <tgt>={tgt}")
    missing = [str(root / f) for f in required_files(src, tgt) if not (root / f).is_file()]
    if missing:
        raise FileNotFoundError(f"workload.data_dir {str(root)!r} lacks {', '.join(missing)}; expected "
                                f"{FAIRSEQ_LAYOUT} with <src>={src}, <tgt>={tgt} (workload.source_lang/target_lang)")
    return root


def load_dictionary(path: Path):
    """fairseq's Dictionary of a dict.<lang>.txt; a malformed file is a ValueError naming it."""
    from fairseq.data import Dictionary
    try:
        return Dictionary.load(str(path))
    except (OSError, ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not a fairseq dictionary ({type(e).__name__}: {e})") from None


def load_side(prefix: Path, lang: str, dictionary):
    """One language of a split, `<prefix>.<lang>.{bin,idx}` (fairseq indexed data), checked: read
    errors name the files, the .bin holds exactly the tokens the .idx lists (not truncated), and
    every token id is an entry of `dictionary` (data binarized with another dictionary is refused,
    not read as other words)."""
    import numpy as np
    from fairseq.data import data_utils
    name = f"{prefix}.{lang}"
    try:
        data = data_utils.load_indexed_dataset(name, dictionary, None)
    except Exception as e:   # fairseq's readers raise assorted errors on damaged files, none naming them
        raise ValueError(f"{name}.{{bin,idx}}: not fairseq indexed data ({type(e).__name__}: {e})") from None
    if data is None:
        raise FileNotFoundError(f"cannot read {name}.{{bin,idx}} as fairseq indexed data")
    buffer = getattr(data, "_bin_buffer", None)   # the mmap format (fairseq-preprocess's default)
    if buffer is not None:
        dtype = np.dtype(data._index.dtype)
        count = int(np.sum(data.sizes, dtype=np.int64))
        if len(buffer) != count * dtype.itemsize:
            raise ValueError(f"{name}.bin: {len(buffer)} bytes, but {name}.idx lists {count} tokens of "
                             f"{dtype.itemsize} bytes (truncated, or the .idx of other data)")
        tokens = np.frombuffer(buffer, dtype=dtype, count=count)
        if count and int(tokens.max()) >= len(dictionary):
            raise ValueError(f"{name}.bin: token id {int(tokens.max())} but the dictionary has {len(dictionary)} "
                             f"entries (binarized with another dict.{lang}.txt?)")
    return data


# --------------------------------------------------------------------------- the cache

def corpus_knobs(cfg) -> dict:
    """Everything the binarized embedded corpus depends on (the cache key)."""
    return {"version": GENERATOR_VERSION, "pairs": cfg.pairs, "val_pairs": cfg.val_pairs, "vocab": cfg.vocab,
            "min_len": cfg.min_len, "max_len": cfg.max_len, "synonym_fraction": cfg.synonym_fraction,
            "synonym_prob": cfg.synonym_prob, "data_seed": cfg.data_seed, "src": cfg.source_lang,
            "tgt": cfg.target_lang, "joined_dictionary": cfg.share_embeddings == "all"}


def cache_root(cfg) -> Path:
    if cfg.cache_dir:
        return Path(cfg.cache_dir)
    base = os.environ.get("CODIST_CACHE")
    return (Path(base) if base else Path.home() / ".cache" / "codist") / "translation"




def ensure_embedded(cfg) -> Path:
    """The binarized embedded corpus for `cfg` (a TranslationConfig): built once, then reused.

    Folder `<cache_root>/<hash of corpus_knobs>` holds the fairseq data (dict.*.txt,
    train/valid .bin/.idx), `text/` (the raw sentences) and `corpus.json` (knobs, Bayes
    limits, build times). It appears only complete: built in a temporary sibling, renamed.
    """
    knobs = corpus_knobs(cfg)
    key = hashlib.sha256(json.dumps(knobs, sort_keys=True).encode()).hexdigest()[:16]
    root = cache_root(cfg)
    root.mkdir(parents=True, exist_ok=True)
    final = root / key
    if (final / "corpus.json").is_file():
        return final
    with file_lock(root / f"{key}.lock") as locked:
        if (final / "corpus.json").is_file():   # another rank built it while we waited
            return final
        for stale in root.glob(f".{key}.tmp*") if locked else ():  # left by a killed build (we hold the lock)
            shutil.rmtree(stale, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}.tmp", dir=root))
        try:
            t0 = time.perf_counter()
            corpus = generate(cfg.pairs, cfg.val_pairs, cfg.vocab, cfg.min_len, cfg.max_len,
                              cfg.synonym_fraction, cfg.synonym_prob, cfg.data_seed)
            gen_s = time.perf_counter() - t0
            write_text(tmp / "text", "train", corpus.train, cfg.source_lang, cfg.target_lang)
            write_text(tmp / "text", "valid", corpus.valid, cfg.source_lang, cfg.target_lang)
            prep_s = preprocess(tmp / "text", tmp, cfg.source_lang, cfg.target_lang,
                                joined=knobs["joined_dictionary"])
            facts = {"knobs": knobs, **corpus.facts, "generate_s": round(gen_s, 4),
                     "preprocess_s": round(prep_s, 4)}
            (tmp / "corpus.json").write_text(json.dumps(facts, indent=1, sort_keys=True))
            os.chmod(tmp, 0o755)   # mkdtemp makes it private; the cache is shared like any other
            try:
                os.rename(tmp, final)
            except OSError:   # without a lock another rank may have renamed its copy first
                if locked or not (final / "corpus.json").is_file():
                    raise
                shutil.rmtree(tmp, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return final


# --------------------------------------------------------------------------- the data sources

# Embedded target for val_nll (time-to-target): the Bayes NLL of the corpus plus this margin,
# in nats per token (0.127 + 0.5 at the defaults). Measured with the defaults (transformer_tiny,
# Adam lr 3e-3 betas (0.9, 0.98), 32 pairs per batch, one thread on a shared 2-core machine,
# ~3.5k target tokens/s): val_nll 1.0 after 45 s (~500 updates), 0.72 after 75 s, 0.49 after 90 s,
# 0.39 after 100 s (BLEU 75 vs the MAP translator's 85). So a plain run reaches the target in
# about 80 s and keeps improving: the target separates fast from slow algorithms without any
# of them having to sit at the floor.
EMBEDDED_TARGET_MARGIN = 0.5

#: what `describe` reports of the embedded corpus's corpus.json
CORPUS_FACTS = ("bayes_val_nll", "map_val_bleu", "preprocess_s", "generate_s")


class EmbeddedCorpus:
    """The data source of `dataset: embedded`: the folder of `ensure_embedded`, built (or found in
    the cache) by `folder()`; its corpus.json gives the target and the facts."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.corpus: dict = {}

    def folder(self) -> Path:
        root = ensure_embedded(self.cfg)
        self.corpus = json.loads((root / "corpus.json").read_text())
        return root

    def target(self) -> float:
        """val_nll target: the corpus's Bayes NLL plus EMBEDDED_TARGET_MARGIN (after `folder()`)."""
        return self.corpus["bayes_val_nll"] + EMBEDDED_TARGET_MARGIN

    def facts(self) -> dict:
        return {k: self.corpus[k] for k in CORPUS_FACTS if k in self.corpus}


class FairseqFolder:
    """The data source of `dataset: fairseq`: a fairseq-preprocess folder, checked by `folder()`;
    `folder()`, `target()` and `facts()` as `EmbeddedCorpus`'s."""

    def __init__(self, cfg):
        self.cfg = cfg

    def folder(self) -> Path:
        return check_data_dir(self.cfg.data_dir, self.cfg.source_lang, self.cfg.target_lang)

    def target(self) -> None:
        return None   # real text: no known optimum

    def facts(self) -> dict:
        return {}


#: `workload.dataset` -> the data source: folder() (the fairseq data folder), target(), facts()
SOURCES = {"embedded": EmbeddedCorpus, "fairseq": FairseqFolder}
