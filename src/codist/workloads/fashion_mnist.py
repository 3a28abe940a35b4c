"""Fashion-MNIST's IDX files: found, read and checked (numpy only), and a class-balanced subset.

`workload.dataset: fashion_mnist` of the `cifar` workload reads these. The four files lie in
`workload.data_dir` (relative to the data root, as every data set's; a user's own copy) or, when
that is unset, in the folder of Debian's `dataset-fashion-mnist` package; each may be gzipped.
Nothing is downloaded. On every load each file is checked, and any failure is one line naming the
file and what was expected: its IDX magic and shape (60,000 / 10,000 images of 28 x 28 uint8,
as many labels), its label range (0-9), and the sha256 of its IDX bytes against `KNOWN_DIGESTS`.
The digests found (`digests`) are what the data check prints and the source's facts carry.

The reader is numpy's, not torchvision's: torchvision 0.29's `read_image_file` opens its path as a
plain file (the package's files are gzipped), fails on a bad header with a bare AssertionError
naming no file, and reads a truncated file without complaint (strict=False); its `FashionMNIST`
wants uncompressed files under `<root>/FashionMNIST/raw/` and checks no digest of them.
"""
from __future__ import annotations

import gzip
import hashlib
import struct
import zlib
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .cifar_config import (FASHION_MNIST_CLASSES, FASHION_MNIST_FILES, FASHION_MNIST_LAYOUT, FASHION_MNIST_PACKAGE,
                           FASHION_MNIST_PACKAGE_DIR, FASHION_MNIST_SIDE, FASHION_MNIST_SPLITS, fashion_mnist_file)

IMAGE_SIDE = FASHION_MNIST_SIDE
_IDX_UBYTE = 0x08   # the IDX type code of unsigned bytes (the magic's third byte; the fourth: dimensions)


class Known(NamedTuple):
    sha256: str        # of the IDX bytes (decompressed)
    md5: str           # of the IDX bytes (decompressed)
    archive_md5: str   # of upstream's .gz, as its README lists it


# The IDX bytes' digests were computed here from dataset-fashion-mnist 0.0~git20200523.55506a9-1
# (Debian), whose .gz files decompress to them; the same md5s and sha256s of the decompressed
# files appear in public Fashion-MNIST loaders' code, found by search (not an official source).
# archive_md5: the MD5 column of the README of zalandoresearch/fashion-mnist, shipped in the package
# as /usr/share/doc/dataset-fashion-mnist/README.md.gz. Debian re-gzipped the files (gzip header
# time 2020-06-05, the package's build), so its .gz files do not have these md5s; a user's copy of
# the upstream archives does. Only the IDX bytes' sha256 decides: compression is not the data.
KNOWN_DIGESTS = {
    "train-images-idx3-ubyte": Known("c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
                                     "f4a8712d7a061bf5bd6d2ca38dc4d50a", "8d4fb7e6c68d591d4c3dfef9ec88bf0d"),
    "train-labels-idx1-ubyte": Known("bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
                                     "9018921c3c673c538a1fc5bad174d6f9", "25c81989df183df01b3e8a0aad5dffbe"),
    "t10k-images-idx3-ubyte": Known("5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
                                    "8181f5470baa50b63fa0f6fddb340f0a", "bef4ecab320f06d8554ea6380940ec79"),
    "t10k-labels-idx1-ubyte": Known("0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
                                    "15d484375f8d13e6eb1aabb0c3f46965", "bb300cfdad3c16e7a12a480ee83cd310"),
}


def find_folder(data_dir: str | Path | None) -> Path:
    """The folder holding the four files: `data_dir`, or the package's folder when it is None.
    Raises FileNotFoundError, one line: where it looked, what is missing, how to install them."""
    folder = Path(data_dir) if data_dir is not None else Path(FASHION_MNIST_PACKAGE_DIR)
    missing = [n for n in FASHION_MNIST_FILES if not fashion_mnist_file(folder, n).is_file()]
    if not missing:
        return folder
    install = f"`apt-get install {FASHION_MNIST_PACKAGE}`"
    if data_dir is not None:
        where = f"{folder} (workload.data_dir)"
        remedy = (f"put the four IDX files there, or unset workload.data_dir to read the copy that {install} "
                  f"puts in {FASHION_MNIST_PACKAGE_DIR}")
    else:
        where = f"{folder} (the {FASHION_MNIST_PACKAGE} package's folder, as workload.data_dir is unset)"
        remedy = (f"install them with {install}, or put the four IDX files in a folder under the data root and "
                  f"set workload.data_dir to it")
    raise FileNotFoundError(f"Fashion-MNIST files missing in {where}: {', '.join(missing)} (each as it is or "
                            f".gz); {remedy}")


def _idx_bytes(path: Path) -> tuple[bytes, str | None]:
    """(the IDX bytes, md5 of the .gz file or None), decompressing a .gz; one line naming the file on failure."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise OSError(f"{path}: cannot read the Fashion-MNIST file ({e.strerror or e})") from None
    if path.suffix != ".gz":
        return raw, None
    try:
        return gzip.decompress(raw), hashlib.md5(raw).hexdigest()
    except (OSError, EOFError, zlib.error) as e:   # BadGzipFile is an OSError; a cut stream is EOFError
        raise ValueError(f"{path}: not a whole gzip file ({type(e).__name__}: {e}); expected "
                         f"{FASHION_MNIST_LAYOUT}") from None


def read_idx(path: Path, name: str, shape: tuple[int, ...]) -> tuple[np.ndarray, dict]:
    """(uint8 array of `shape`, its digests) from Fashion-MNIST's IDX file `name` at `path`; ValueError,
    one line naming the file and what was expected, if its magic, shape, length or sha256 is wrong."""
    data, archive_md5 = _idx_bytes(path)
    header = 4 + 4 * len(shape)
    want = f"IDX unsigned bytes of shape {' x '.join(map(str, shape))}"
    magic = bytes([0, 0, _IDX_UBYTE, len(shape)])
    if data[:4] != magic:
        raise ValueError(f"{path}: IDX magic {data[:4].hex()}, expected {magic.hex()} ({want}); not {name}")
    dims = struct.unpack(f">{len(shape)}I", data[4:header]) if len(data) >= header else ()
    if dims != shape:
        raise ValueError(f"{path}: IDX header says shape {dims}, expected {want} ({name})")
    if len(data) != header + int(np.prod(shape)):
        raise ValueError(f"{path}: {len(data):,} bytes of IDX data, expected {header + int(np.prod(shape)):,} "
                         f"({want}: truncated or padded)")
    digests = {"file": str(path), "sha256": hashlib.sha256(data).hexdigest(), "md5": hashlib.md5(data).hexdigest()}
    if archive_md5 is not None:
        digests.update(archive_md5=archive_md5, upstream_archive=archive_md5 == KNOWN_DIGESTS[name].archive_md5)
    array = np.frombuffer(data, np.uint8, offset=header).reshape(shape)
    if shape[1:] == () and array.max() >= FASHION_MNIST_CLASSES:   # a labels file
        raise ValueError(f"{path}: labels in [{array.min()}, {array.max()}], expected 0-{FASHION_MNIST_CLASSES - 1}")
    if digests["sha256"] != KNOWN_DIGESTS[name].sha256:
        raise ValueError(f"{path}: sha256 of its IDX bytes is {digests['sha256']}, expected "
                         f"{KNOWN_DIGESTS[name].sha256} (Fashion-MNIST's {name}): damaged or another data set")
    return array, digests


class FashionMnist(NamedTuple):
    train_x: np.ndarray   # uint8 N x 1 x 28 x 28
    train_y: np.ndarray   # int64 N
    test_x: np.ndarray
    test_y: np.ndarray
    folder: Path
    digests: dict         # file name -> {file, sha256, md5[, archive_md5, upstream_archive]}


def read_fashion_mnist(data_dir: str | Path | None) -> FashionMnist:
    """Both splits, every file checked (see the module docstring); raises FileNotFoundError or ValueError, one line."""
    folder = find_folder(data_dir)
    arrays, digests = [], {}
    for images, labels, n in FASHION_MNIST_SPLITS.values():
        x, digests[images] = read_idx(fashion_mnist_file(folder, images), images, (n, IMAGE_SIDE, IMAGE_SIDE))
        y, digests[labels] = read_idx(fashion_mnist_file(folder, labels), labels, (n,))
        arrays += [x[:, None], y.astype(np.int64)]
    return FashionMnist(*arrays, folder, digests)


def balanced_subset(labels: np.ndarray, size: int, seed: int, stream: int) -> np.ndarray:
    """Sorted indices of `size` items whose classes are as equal in number as they can be (they differ
    by at most one), drawn without replacement from numpy's PCG64 seeded by (seed, stream); the whole
    set, in order, when `size` is its length. Which classes get the remainder's extra item is drawn too."""
    if size > len(labels):
        raise ValueError(f"a subset of {size} from {len(labels)} items")
    rng = np.random.default_rng([seed, stream])
    classes = np.unique(labels)
    per_class = np.full(len(classes), size // len(classes))
    per_class[rng.permutation(len(classes))[: size % len(classes)]] += 1
    picked = []
    for c, k in zip(classes, per_class):
        members = np.flatnonzero(labels == c)
        if k > len(members):
            raise ValueError(f"a balanced subset of {size} needs {k} items of class {c}, which has {len(members)}")
        picked.append(rng.permutation(members)[:k])
    return np.sort(np.concatenate(picked))


def check_files(root: Path | None) -> tuple[list[str], list[str]]:
    """`codist data check`: (problems, notes) of the Fashion-MNIST files in `root` (None: the package's folder)."""
    try:
        data = read_fashion_mnist(root)
    except (OSError, ValueError) as e:
        return [str(e)], []
    notes = [f"fashion_mnist: {len(data.train_y):,} training and {len(data.test_y):,} test images in {data.folder}"]
    notes += [f"{name}: sha256 {d['sha256']} md5 {d['md5']} (known)"
              + (f"; .gz md5 {d['archive_md5']} ({'upstream' if d['upstream_archive'] else 'recompressed'})"
                 if "archive_md5" in d else "") for name, d in data.digests.items()]
    return [], notes
