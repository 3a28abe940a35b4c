"""Seeded randomness for the fake data: one numpy generator per (seed, use), so each data set's
content depends on the seed and its own name only, never on which others are written."""
from __future__ import annotations

import zlib

import numpy as np


def rng(seed: int, use: str) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([seed, zlib.crc32(use.encode())]))


def pseudo_words(r: np.random.Generator, n: int, syllables: list[str], min_syl: int = 1,
                 max_syl: int = 4) -> list[str]:
    """`n` distinct made-up words of `min_syl`..`max_syl` syllables, in a random order."""
    words: set[str] = set()
    table = np.array(syllables)
    while len(words) < n:
        k = int(r.integers(min_syl, max_syl + 1))
        words.add("".join(table[r.integers(0, len(table), k)]))
    out = sorted(words)
    r.shuffle(out)
    return out
