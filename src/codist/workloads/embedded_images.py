"""Embedded image classification task: small images whose classes need a CNN to tell apart.

No data set can be downloaded at run time, so the `cifar` workload's default scale uses this
generator instead of CIFAR. It is deterministic in `data_seed` and the size knobs only (never
in the run seed), so runs with different seeds train on the same data, as they would on CIFAR.

How an image of class k is made (every random draw comes from numpy's PCG64 seeded by
`data_seed`, so the data are the same on every platform):

* Every class owns two "parts": small random shapes (about image_size * 5/16 pixels square),
  each a binary mask with its own colour and a faint texture. There are also a few clutter
  parts that belong to no class. All parts are drawn independently.
* The background is smooth random colour noise (a coarse random field, bilinearly upsampled).
* Two clutter parts are pasted at random positions.
* Both of class k's parts are pasted on top, at random positions where they do not overlap
  each other, so they are always whole and visible.
* Each pasted part gets its own random contrast; the image gets random per-channel gains and
  offsets (colour jitter) and per-pixel Gaussian noise.

So the class is read off which parts appear, anywhere in the image, among clutter: a
translation-invariant detection task that a small CNN with global pooling learns, while a
linear model or nearest-class-mean rule on pixels stays near chance (positions are uniform).
Measured at the defaults (4000 train images, 10 classes, label_noise 0.1), a ResNet-8 of
width 16 memorises the training set, noisy labels included, and ends near 0.70 validation
accuracy against a ceiling of 0.90: the overfitting regime, with room above every algorithm,
in which the replicated papers' regularisation effects can show.

Labels: a clean label is replaced, with probability `label_noise`, by one of the other
classes chosen uniformly. Validation labels get the same noise (it is the data distribution,
not a corruption of the training set only), which caps attainable accuracy: see
`bayes_accuracy_upper_bound`. Classes are exactly balanced before the noise.

The training set is finite and fixed (`train_size`), and the train and validation splits
come from separate random streams, so changing one split's size leaves the other unchanged.
Pixels are normalised per channel with the mean and standard deviation of the training set.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import TensorDataset

from . import generated_cache

# Generator constants. They are part of the task's definition (changing one changes every
# data set and the measured difficulty), so they are fixed here rather than config knobs.
PARTS_PER_CLASS = 2
CLUTTER_PARTS = 8            # parts that belong to no class
CLUTTER_PER_IMAGE = 2        # clutter parts pasted (under the class's parts) per image
PART_FILL = 0.55             # probability a pixel of a part's mask is on
PART_TEXTURE = 0.15          # amplitude of a part's per-pixel texture around its colour
BACKGROUND_STD = 0.3         # amplitude of the smooth background noise
BACKGROUND_GRID = 4          # coarse grid of the background noise (upsampled to the image)
PART_CONTRAST = (0.6, 1.4)   # range of each pasted part's random contrast factor
CHANNEL_GAIN = (0.7, 1.3)    # range of the per-image, per-channel colour gain
CHANNEL_OFFSET_STD = 0.2     # per-image, per-channel brightness offset
PIXEL_NOISE_STD = 0.2        # i.i.d. Gaussian pixel noise
CHANNELS = 3

# Seed-sequence streams, so that e.g. changing val_size leaves the training set unchanged.
_STREAM_PARTS, _STREAM_TRAIN, _STREAM_VAL = 0, 1, 2


def part_size(image_size: int) -> int:
    """Side of a part in pixels: 5 at the default 16x16, scaled with the image."""
    return max(3, round(image_size * 5 / 16))


def bayes_accuracy_upper_bound(cfg) -> float:
    """Best accuracy any classifier can reach on the (noisy) validation labels: 1 - label_noise.

    With symmetric noise (a label is kept with probability 1 - e, else moved to one of the
    K - 1 other classes uniformly), a classifier that predicts the clean label with probability
    a scores a(1 - e) + (1 - a) e / (K - 1), which, for e < (K - 1)/K, is largest at a = 1.
    So 1 - e bounds every classifier whatever the images. The clean task is separable by
    construction (a class's parts are always whole and visible, and differ from every other
    part), so a = 1 is attainable up to the negligible chance that pixel noise makes one part
    look like another: to that precision the bound is the Bayes-optimal accuracy.
    `cfg` is anything with `label_noise` and `classes` (e.g. a CifarConfig).
    """
    e, k = float(cfg.label_noise), int(cfg.classes)
    if not 0.0 <= e < (k - 1) / k:
        raise ValueError(f"label_noise must be in [0, (classes-1)/classes), got {e} with {k} classes")
    return 1.0 - e


@dataclass(frozen=True)
class EmbeddedImages:
    """The generated task. x are normalised float32 NCHW, y the (noisy) int64 labels.

    The clean labels are kept for tests and analysis only; training and evaluation use y.
    """

    train_x: torch.Tensor
    train_y: torch.Tensor
    train_clean_y: torch.Tensor
    val_x: torch.Tensor
    val_y: torch.Tensor
    val_clean_y: torch.Tensor
    mean: torch.Tensor            # per-channel mean of the unnormalised training pixels
    std: torch.Tensor             # per-channel std of the unnormalised training pixels
    generation_s: float           # spent obtaining them: generating, or loading when `cached`
    cached: bool                  # loaded from the on-disk cache (`generated_cache`)

    def train_dataset(self) -> TensorDataset:
        return TensorDataset(self.train_x, self.train_y)

    def val_dataset(self) -> TensorDataset:
        return TensorDataset(self.val_x, self.val_y)


@dataclass(frozen=True)
class _Parts:
    """Row k < classes holds class k's parts (first PARTS_PER_CLASS columns); the last row the clutter."""

    masks: np.ndarray    # (classes + 1, columns, m, m) bool
    colours: np.ndarray  # (classes + 1, columns, C, m, m) float32

    @property
    def classes(self) -> int:
        return self.masks.shape[0] - 1


def _make_parts(rng: np.random.Generator, classes: int, m: int) -> _Parts:
    shape = (classes + 1, max(PARTS_PER_CLASS, CLUTTER_PARTS))
    masks = rng.random(shape + (m, m)) < PART_FILL
    masks[..., m // 2, m // 2] = True  # no empty part
    base = rng.uniform(-1.0, 1.0, shape + (CHANNELS, 1, 1))
    texture = rng.uniform(-PART_TEXTURE, PART_TEXTURE, shape + (CHANNELS, m, m))
    return _Parts(masks, (base + texture).astype(np.float32))


def _bilinear_matrix(size: int, grid: int) -> np.ndarray:
    """(size, grid) matrix of 1-D linear interpolation from `grid` knots to `size` pixels (corners aligned)."""
    pos = np.linspace(0.0, grid - 1, size)
    lo = np.minimum(np.floor(pos).astype(int), grid - 2)
    frac = pos - lo
    mat = np.zeros((size, grid))
    mat[np.arange(size), lo] = 1.0 - frac
    mat[np.arange(size), lo + 1] = frac
    return mat.astype(np.float32)


def _paste(canvas: np.ndarray, pixels: np.ndarray, masks: np.ndarray, ys: np.ndarray, xs: np.ndarray) -> None:
    """canvas[n, :, ys[n]:ys[n]+m, xs[n]:xs[n]+m] = pixels[n] where masks[n], for every n at once."""
    n, c, m = pixels.shape[0], pixels.shape[1], pixels.shape[-1]
    rows = (ys[:, None] + np.arange(m))[:, None, :, None]
    cols = (xs[:, None] + np.arange(m))[:, None, None, :]
    idx = (np.arange(n)[:, None, None, None], np.arange(c)[None, :, None, None], rows, cols)
    canvas[idx] = np.where(masks[:, None], pixels, canvas[idx])


def _separate(rng: np.random.Generator, ya, xa, yb, xb, m: int, span: int) -> None:
    """Move (yb, xb) in place until part B no longer overlaps part A.

    Rejection sampling keeps B uniform over the free positions; the fallback (never needed in
    practice) moves B sideways, which `generate` guarantees is possible (image_size >= 3m - 1).
    """
    for _ in range(64):
        clash = (np.abs(ya - yb) < m) & (np.abs(xa - xb) < m)
        if not clash.any():
            return
        k = int(clash.sum())
        yb[clash], xb[clash] = rng.integers(0, span, k), rng.integers(0, span, k)
    clash = (np.abs(ya - yb) < m) & (np.abs(xa - xb) < m)
    xb[clash] = np.where(xa[clash] >= m, 0, span - 1)


def _render(rng: np.random.Generator, parts: _Parts, labels: np.ndarray, image_size: int) -> np.ndarray:
    """Unnormalised float32 images (N, C, S, S) of the given clean labels."""
    n, m, s = labels.shape[0], parts.masks.shape[-1], image_size
    span = s - m + 1

    coarse = rng.standard_normal((n, CHANNELS, BACKGROUND_GRID, BACKGROUND_GRID), dtype=np.float32)
    up = _bilinear_matrix(s, BACKGROUND_GRID) * np.float32(BACKGROUND_STD)
    canvas = np.ascontiguousarray(up @ coarse @ up.T)  # (n, C, s, s)

    def paste(row: np.ndarray, column: np.ndarray, ys: np.ndarray, xs: np.ndarray) -> None:
        contrast = rng.uniform(*PART_CONTRAST, (n, 1, 1, 1)).astype(np.float32)
        _paste(canvas, parts.colours[row, column] * contrast, parts.masks[row, column], ys, xs)

    clutter_row = np.full(n, parts.classes)
    for _ in range(CLUTTER_PER_IMAGE):
        paste(clutter_row, rng.integers(0, CLUTTER_PARTS, n), rng.integers(0, span, n), rng.integers(0, span, n))

    ya, xa, yb, xb = (rng.integers(0, span, n) for _ in range(4))
    _separate(rng, ya, xa, yb, xb, m, span)
    first = rng.integers(0, PARTS_PER_CLASS, n)  # which part goes at (ya, xa)
    paste(labels, first, ya, xa)
    paste(labels, 1 - first, yb, xb)

    gain = rng.uniform(*CHANNEL_GAIN, (n, CHANNELS, 1, 1)).astype(np.float32)
    offset = (CHANNEL_OFFSET_STD * rng.standard_normal((n, CHANNELS, 1, 1), dtype=np.float32))
    noise = rng.standard_normal(canvas.shape, dtype=np.float32)
    noise *= np.float32(PIXEL_NOISE_STD)
    canvas *= gain
    canvas += offset
    canvas += noise
    return canvas


def _noisy_labels(rng: np.random.Generator, clean: np.ndarray, classes: int, noise: float) -> np.ndarray:
    """Each label moves, with probability `noise`, to one of the other classes uniformly."""
    flip = rng.random(clean.shape[0]) < noise
    shift = rng.integers(1, classes, clean.shape[0])
    return np.where(flip, (clean + shift) % classes, clean)


def _split(seed: int, stream: int, size: int, parts: _Parts, image_size: int, noise: float):
    rng = np.random.default_rng([seed, stream])
    clean = rng.permutation(np.arange(size) % parts.classes)
    x = _render(rng, parts, clean, image_size)
    y = _noisy_labels(rng, clean, parts.classes, noise)
    return x, y, clean


def generate(
    *,
    classes: int = 10,
    image_size: int = 16,
    train_size: int = 4000,
    val_size: int = 1000,
    label_noise: float = 0.1,
    data_seed: int = 0,
) -> EmbeddedImages:
    """The embedded image task for these knobs (deterministic; about 0.2 s at the defaults, a few ms
    when `generated_cache` has it)."""
    m = part_size(image_size)
    if classes < 2:
        raise ValueError(f"classes must be >= 2, got {classes}")
    if image_size < 3 * m - 1:
        raise ValueError(f"image_size {image_size} is too small to place two parts of size {m} apart")
    if not 0.0 <= label_noise < (classes - 1) / classes:
        raise ValueError(f"label_noise must be in [0, (classes-1)/classes), got {label_noise}")
    if train_size < 1 or val_size < 1:
        raise ValueError(f"train_size and val_size must be >= 1, got {train_size} and {val_size}")
    if data_seed < 0:
        raise ValueError(f"data_seed must be >= 0, got {data_seed}")
    knobs = dict(classes=classes, image_size=image_size, train_size=train_size, val_size=val_size,
                 label_noise=label_noise, data_seed=data_seed)
    got = generated_cache.cached("embedded_images", knobs, lambda: _arrays(**knobs))
    return EmbeddedImages(**{name: torch.from_numpy(a) for name, a in got.arrays.items()},
                          generation_s=got.seconds, cached=got.loaded)


def _arrays(*, classes, image_size, train_size, val_size, label_noise, data_seed) -> dict[str, np.ndarray]:
    """EmbeddedImages' tensors, as numpy arrays (what the cache stores)."""
    parts = _make_parts(np.random.default_rng([data_seed, _STREAM_PARTS]), classes, part_size(image_size))
    tx, ty, tc = _split(data_seed, _STREAM_TRAIN, train_size, parts, image_size, label_noise)
    vx, vy, vc = _split(data_seed, _STREAM_VAL, val_size, parts, image_size, label_noise)
    mean = tx.mean(axis=(0, 2, 3), dtype=np.float64, keepdims=True)
    std = tx.std(axis=(0, 2, 3), dtype=np.float64, keepdims=True)

    def to_x(a: np.ndarray) -> np.ndarray:
        return ((a - mean) / std).astype(np.float32)

    return dict(train_x=to_x(tx), train_y=ty.astype(np.int64), train_clean_y=tc.astype(np.int64),
                val_x=to_x(vx), val_y=vy.astype(np.int64), val_clean_y=vc.astype(np.int64),
                mean=mean.reshape(-1).astype(np.float32), std=std.reshape(-1).astype(np.float32))


class EmbeddedImageSource:
    """The generated task as a data source of the image workloads (cifar, imagenet): the same
    interface as their real-format readers (`splits`, `num_classes`, `train_labels`, `target`,
    `facts`, `loader_workers`). Generated on first use, from `cfg`'s knobs only (never the run seed).

    `image_size` is the generated side (the configs name it differently); the target is
    `target_fraction` of the Bayes bound, a fraction each workload measured for itself.
    """

    loader_workers = 0   # the tensors are in memory already: nothing for DataLoader workers to decode

    def __init__(self, cfg, image_size: int, target_fraction: float):
        self.cfg, self.image_size, self.target_fraction = cfg, image_size, target_fraction
        self.generated: EmbeddedImages | None = None
        self._splits: tuple[TensorDataset, TensorDataset] | None = None

    @property
    def num_classes(self) -> int:
        return self.cfg.classes

    def splits(self) -> tuple[TensorDataset, TensorDataset]:
        """(train, validation), generated once."""
        if self._splits is None:
            c = self.cfg
            self.generated = generate(classes=c.classes, image_size=self.image_size, train_size=c.train_size,
                                      val_size=c.val_size, label_noise=c.label_noise, data_seed=c.data_seed)
            self._splits = self.generated.train_dataset(), self.generated.val_dataset()
        return self._splits

    def train_labels(self) -> torch.Tensor:
        return self.splits()[0].tensors[1]

    def target(self) -> float:
        return self.target_fraction * bayes_accuracy_upper_bound(self.cfg)

    def facts(self) -> dict:
        self.splits()
        return {"bayes_accuracy_upper_bound": bayes_accuracy_upper_bound(self.cfg),
                "data_generation_s": round(self.generated.generation_s, 4), "data_cached": self.generated.cached}
