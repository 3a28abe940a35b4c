"""Fake WMT'16 En-De and IWSLT'14 De-En: sentence pairs written as text and binarized by
fairseq-preprocess itself (`translation_data.preprocess`: fairseq_cli.preprocess in this process,
mmap format), so the folders hold what fairseq writes: dict.<lang>.txt, {train,valid}.<src>-<tgt>.
<lang>.{bin,idx} and preprocess.log.

WMT'16 as Ott et al. prepare it: BPE'd text (`@@ ` continuation marks, which the preset's
post_process removes) and one joined dictionary (`--joined-dictionary`: the preset shares all
embeddings). IWSLT'14 as prepare-iwslt14.sh leaves it: lowercased, BPE'd, separate dictionaries.
Target words are a fixed word-by-word image of the source words (a learnable task).

Sizes: train pairs per data set: a rehearsal model group of 2 ranks takes 2 x 128 pairs (WMT) or
2 x 64 (IWSLT) per update; VALID_PAIRS for the validation slice.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from .seeded import pseudo_words, rng

VALID_PAIRS = 64
VOCABULARY = 300
SENTENCE_WORDS = (3, 30)
BPE_MIN_LEN = 7          # words of at least this many letters are split into two BPE pieces
# name -> (source language, target language, train pairs, joined dictionary, lowercase)
PAIRS = {
    "wmt16_en_de_bpe32k": ("en", "de", 512, True, False),
    "iwslt14_de_en": ("de", "en", 256, False, True),
}
LETTERS = {"en": [c + v for c in "bdgklmnprst" for v in "aeiou"], "de": [c + v for c in "cfhjqvwxyz" for v in "aeiou"]}


def _bpe(word: str) -> str:
    return f"{word[:len(word) // 2]}@@ {word[len(word) // 2:]}" if len(word) >= BPE_MIN_LEN else word


def _pairs(r: np.random.Generator, src: str, tgt: str, n: int, lowercase: bool) -> list[tuple[str, str]]:
    source = pseudo_words(r, VOCABULARY, LETTERS[src])
    target = pseudo_words(r, VOCABULARY, LETTERS[tgt])
    out = []
    for _ in range(n):
        ids = r.integers(0, VOCABULARY, int(r.integers(*SENTENCE_WORDS)))
        s, t = (" ".join(_bpe(words[i]) for i in ids) for words in (source, target))
        if not lowercase:   # sentence case, as in the WMT news text
            s, t = s[:1].upper() + s[1:], t[:1].upper() + t[1:]
        out.append((s + " .", t + " ."))
    return out


def _write(dest: Path, name: str, seed: int) -> str:
    from ..workloads.translation_data import preprocess, write_text
    src, tgt, n_train, joined, lowercase = PAIRS[name]
    r = rng(seed, name)
    with tempfile.TemporaryDirectory(prefix="codist-fake-text-") as text:
        write_text(Path(text), "train", _pairs(r, src, tgt, n_train, lowercase), src, tgt)
        write_text(Path(text), "valid", _pairs(r, src, tgt, VALID_PAIRS, lowercase), src, tgt)
        preprocess(Path(text), dest, src, tgt, joined=joined)
    sizes = {lang: sum(1 for _ in (dest / f"dict.{lang}.txt").open()) for lang in (src, tgt)}
    dicts = "one joined dictionary" if joined else "separate dictionaries"
    return (f"{src}-{tgt}: {n_train} train + {VALID_PAIRS} valid pairs, binarized by fairseq-preprocess, {dicts} "
            f"({sizes[src]} {src} / {sizes[tgt]} {tgt} types)")


def write_wmt16(dest: Path, seed: int, root: Path) -> str:
    return _write(dest, "wmt16_en_de_bpe32k", seed)


def write_iwslt14(dest: Path, seed: int, root: Path) -> str:
    return _write(dest, "iwslt14_de_en", seed)
