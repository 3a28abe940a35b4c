"""Fake CIFAR-10 and CIFAR-100: the python versions' files, as their archives unpack them
(`cifar-10-batches-py/`: data_batch_1..5, test_batch, batches.meta; `cifar-100-python/`: train,
test, meta), pickled as the originals were, by Python 2 with protocol 2, whose `str` (keys,
names, the arrays' bytes) are BINSTRING opcodes that Python 3 reads as bytes: b'data' uint8 N x 3072 (the R, G and B planes of a 32 x 32 image, row-major),
b'labels' (CIFAR-10) or b'fine_labels' and b'coarse_labels' (CIFAR-100), b'filenames',
b'batch_label'; the meta files hold the real label names.

Sizes: TRAIN_IMAGES training images per data set (CIFAR-10: 5 batches of 208): Sun's EC-DNN with
K = 8 gives each of its 8 one-rank models a disjoint eighth of the training set, and a model's
batch is 128 images, so at least 8 x 128 = 1,024 are needed. TEST_IMAGES test images, each class
at least once.
"""
from __future__ import annotations

import pickle
import struct
from pathlib import Path

import numpy as np

from .seeded import rng

TRAIN_IMAGES = 1040
TEST_IMAGES = 100
CIFAR10_BATCHES = 5

CIFAR10_NAMES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
CIFAR100_FINE = (
    "apple aquarium_fish baby bear beaver bed bee beetle bicycle bottle bowl boy bridge bus butterfly camel can "
    "castle caterpillar cattle chair chimpanzee clock cloud cockroach couch crab crocodile cup dinosaur dolphin "
    "elephant flatfish forest fox girl hamster house kangaroo keyboard lamp lawn_mower leopard lion lizard "
    "lobster man maple_tree motorcycle mountain mouse mushroom oak_tree orange orchid otter palm_tree pear "
    "pickup_truck pine_tree plain plate poppy porcupine possum rabbit raccoon ray road rocket rose sea seal "
    "shark shrew skunk skyscraper snail snake spider squirrel streetcar sunflower sweet_pepper table tank "
    "telephone television tiger tractor train trout tulip turtle wardrobe whale willow_tree wolf woman worm"
).split()
CIFAR100_COARSE = (
    "aquatic_mammals fish flowers food_containers fruit_and_vegetables household_electrical_devices "
    "household_furniture insects large_carnivores large_man-made_outdoor_things large_natural_outdoor_scenes "
    "large_omnivores_and_herbivores medium_mammals non-insect_invertebrates people reptiles small_mammals trees "
    "vehicles_1 vehicles_2"
).split()
#: the coarse class (superclass) of each fine class, as in CIFAR-100's files
FINE_TO_COARSE = (4, 1, 14, 8, 0, 6, 7, 7, 18, 3, 3, 14, 9, 18, 7, 11, 3, 9, 7, 11, 6, 11, 5, 10, 7, 6, 13, 15, 3,
                  15, 0, 11, 1, 10, 12, 14, 16, 9, 11, 5, 5, 19, 8, 8, 15, 13, 14, 17, 18, 10, 16, 4, 17, 4, 2, 0,
                  17, 4, 18, 17, 10, 3, 2, 12, 12, 16, 12, 1, 9, 19, 2, 10, 0, 1, 16, 12, 9, 13, 15, 13, 16, 19,
                  2, 4, 6, 19, 5, 5, 8, 19, 18, 1, 2, 15, 6, 0, 17, 8, 14, 13)


def _pixels(r: np.random.Generator, labels: np.ndarray) -> np.ndarray:
    """uint8 N x 3072: a class colour per channel plane plus noise."""
    colour = np.stack([(labels * 37) % 256, (labels * 91) % 256, (labels * 151) % 256], axis=1)   # N x 3
    x = colour[:, :, None].astype(np.float64) + r.normal(0, 24, (len(labels), 3, 1024))
    return np.clip(x, 0, 255).astype(np.uint8).reshape(len(labels), 3072)


def _labels(r: np.random.Generator, n: int, classes: int) -> np.ndarray:
    """Every class at least once (n >= classes), the rest uniform, shuffled."""
    y = np.concatenate([np.arange(classes), r.integers(0, classes, max(0, n - classes))])
    r.shuffle(y)
    return y


class _Python2Pickler(pickle._Pickler):
    """Protocol 2 with bytes written as Python 2's str (SHORT_BINSTRING / BINSTRING), as in the
    real files: Python 3's pickler writes bytes as `_codecs.encode(latin-1 text)` instead, half
    again as large for pixel data."""

    dispatch = dict(pickle._Pickler.dispatch)

    def save_py2_str(self, obj: bytes) -> None:
        n = len(obj)
        head = pickle.SHORT_BINSTRING + bytes([n]) if n < 256 else pickle.BINSTRING + struct.pack("<i", n)
        self.write(head + obj)
        self.memoize(obj)

    dispatch[bytes] = save_py2_str


def _dump(path: Path, obj: dict) -> None:
    with path.open("wb") as f:
        _Python2Pickler(f, protocol=2).dump(obj)


def _filenames(labels: np.ndarray, names, start: int) -> list[bytes]:
    return [f"{names[y]}_s_{start + i:06d}.png".encode() for i, y in enumerate(labels)]


def write_cifar10(folder: Path, r: np.random.Generator) -> None:
    folder.mkdir(parents=True)
    per = TRAIN_IMAGES // CIFAR10_BATCHES
    for b in range(CIFAR10_BATCHES):
        y = _labels(r, per, 10)
        _dump(folder / f"data_batch_{b + 1}", {b"batch_label": f"training batch {b + 1} of {CIFAR10_BATCHES}".encode(),
                                                b"labels": y.tolist(), b"data": _pixels(r, y),
                                                b"filenames": _filenames(y, CIFAR10_NAMES, b * per)})
    y = _labels(r, TEST_IMAGES, 10)
    _dump(folder / "test_batch", {b"batch_label": b"testing batch 1 of 1", b"labels": y.tolist(),
                                  b"data": _pixels(r, y), b"filenames": _filenames(y, CIFAR10_NAMES, TRAIN_IMAGES)})
    _dump(folder / "batches.meta", {b"num_cases_per_batch": per, b"label_names": [n.encode() for n in CIFAR10_NAMES],
                                    b"num_vis": 3072})


def write_cifar100(folder: Path, r: np.random.Generator) -> None:
    folder.mkdir(parents=True)
    coarse = np.array(FINE_TO_COARSE)
    for name, n, start in (("train", TRAIN_IMAGES, 0), ("test", TEST_IMAGES, TRAIN_IMAGES)):
        y = _labels(r, n, 100)
        label = "training" if name == "train" else "testing"
        _dump(folder / name, {b"filenames": _filenames(y, CIFAR100_FINE, start),
                              b"batch_label": f"{label} batch 1 of 1".encode(), b"fine_labels": y.tolist(),
                              b"coarse_labels": coarse[y].tolist(), b"data": _pixels(r, y)})
    _dump(folder / "meta", {b"fine_label_names": [n.encode() for n in CIFAR100_FINE],
                            b"coarse_label_names": [n.encode() for n in CIFAR100_COARSE]})


def write_cifar(dest: Path, seed: int, root: Path) -> str:
    from ..workloads.cifar_config import CIFAR_LAYOUT
    write_cifar10(dest / CIFAR_LAYOUT["cifar10"][0], rng(seed, "cifar10"))
    write_cifar100(dest / CIFAR_LAYOUT["cifar100"][0], rng(seed, "cifar100"))
    return (f"CIFAR-10 ({CIFAR10_BATCHES} batches of {TRAIN_IMAGES // CIFAR10_BATCHES}, test {TEST_IMAGES}) and "
            f"CIFAR-100 (train {TRAIN_IMAGES}, test {TEST_IMAGES}) python pickles")
