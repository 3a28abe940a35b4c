"""Fake Criteo: `train.txt` in the Kaggle Display Advertising Challenge layout, one sample a
line, 40 tab-separated fields: the label (0/1), I1..I13 (integer counts, I2 may be negative, any
may be empty) and C1..C26 (8 lowercase hex digits, any may be empty), no header.

Sizes: LINES lines: the preset holds out the last 10% for validation, and a rehearsal model group
of 2 ranks x 128 takes 256 training lines per update. LINES is also `codist data check`'s sample.
Missing rates and value ranges are of the real file's order (I1 ~45% empty, C22 ~76%); the click
rate is about a quarter, as in the real data, and depends a little on I1 and C1 (learnable).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..workloads.ctr_config import CATEGORICAL_FEATURES, DENSE_FEATURES
from .seeded import rng

LINES = 1000
VALUES_PER_FEATURE = 50      # distinct hex strings per categorical feature
DENSE_MISSING = (0.45, 0.0, 0.2, 0.2, 0.03, 0.22, 0.04, 0.0, 0.04, 0.45, 0.04, 0.76, 0.2)
CAT_MISSING = {5: 0.12, 18: 0.44, 19: 0.44, 21: 0.76, 24: 0.44, 25: 0.44}   # 0-based feature index


def write_criteo(dest: Path, seed: int, root: Path) -> str:
    r = rng(seed, "criteo")
    vocab = [[f"{int(v):08x}" for v in r.integers(0, 2 ** 32, VALUES_PER_FEATURE)] for _ in range(CATEGORICAL_FEATURES)]
    zipf = 1.0 / np.arange(1, VALUES_PER_FEATURE + 1)
    zipf /= zipf.sum()
    lines, clicks = [], 0
    for _ in range(LINES):
        dense = [int(v) for v in np.floor(r.lognormal(1.0, 1.5, DENSE_FEATURES))]
        if r.random() < 0.1:
            dense[1] = -int(r.integers(1, 4))          # I2 holds small negative values in the real file
        cats = [int(r.choice(VALUES_PER_FEATURE, p=zipf)) for _ in range(CATEGORICAL_FEATURES)]
        logit = -1.4 + 0.15 * min(dense[0], 10) - 0.8 * (cats[0] == 0)
        label = int(r.random() < 1 / (1 + np.exp(-logit)))
        clicks += label
        fields = [str(label)]
        fields += ["" if r.random() < DENSE_MISSING[i] else str(v) for i, v in enumerate(dense)]
        fields += ["" if r.random() < CAT_MISSING.get(i, 0.0) else vocab[i][c] for i, c in enumerate(cats)]
        lines.append("\t".join(fields) + "\n")
    (dest / "train.txt").write_text("".join(lines))
    return f"train.txt: {LINES:,} lines, {clicks / LINES:.2f} click rate"
