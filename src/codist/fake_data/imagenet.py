"""Fake ImageNet: torchvision's ImageFolder layout under the 1,000 real wnid folders, JPEG files
written by PIL, named as the real ones are (train `n01440764_1.JPEG`, val
`ILSVRC2012_val_00000001.JPEG`, sorted into class folders as torchvision's ImageNet leaves them).

Sizes: TRAIN_PER_CLASS images per class (2,000): a rehearsal model group of 2 ranks takes at most
2 x 64 = 128 images per update, and EC-DNN's 4 disjoint parts 4 x 2 x 32 = 256; VAL_PER_CLASS (1,000),
as val/ must hold the same 1,000 folders. Images are small (24-64 pixels a side, any aspect):
the transforms resize them to 224 as they do real photographs. As in ILSVRC-2012, a few are not
RGB (one grayscale, one CMYK JPEG): the loader converts them.

The quarter (Sodhani Fig. 6, `imagenet_quarter`), as docs/full-scale.md says to prepare it: val/ a
relative symbolic link to the full copy's (a copy where links are refused) and, per class, a
seeded quarter of the training images rounded up (so no class folder is empty: 1 of 2 here), as
hard links to the full copy's files where the file system allows, else copies.
"""
from __future__ import annotations

import math
import os
import shutil
from pathlib import Path

import numpy as np

from .seeded import rng
from .wnids import WNIDS

TRAIN_PER_CLASS = 2
VAL_PER_CLASS = 1
QUARTER = 4
SIDES = (24, 64)     # each image's width and height are drawn from this range


def _image(r: np.random.Generator, cls: int, mode: str = "RGB"):
    """A smooth picture in a class-dependent colour (compresses to a few hundred bytes)."""
    from PIL import Image
    w, h = (int(v) for v in r.integers(SIDES[0], SIDES[1] + 1, 2))
    colour = np.array([(cls * 37) % 256, (cls * 91) % 256, (cls * 151) % 256], dtype=np.float64)
    ramp = np.linspace(-40, 40, w)[None, :, None] + np.linspace(-40, 40, h)[:, None, None]
    pixels = np.clip(colour + ramp + r.normal(0, 8, (h, w, 3)), 0, 255).astype(np.uint8)
    img = Image.fromarray(pixels, "RGB")
    return img.convert(mode) if mode != "RGB" else img


def write_imagenet(dest: Path, seed: int, root: Path) -> str:
    r = rng(seed, "imagenet")
    odd_modes = {("train", 0, 0): "L", ("train", 1, 0): "CMYK"}   # ILSVRC-2012 has both among its JPEGs
    val_number = 0
    for split, per in (("train", TRAIN_PER_CLASS), ("val", VAL_PER_CLASS)):
        for c, wnid in enumerate(WNIDS):
            folder = dest / split / wnid
            folder.mkdir(parents=True)
            for k in range(per):
                if split == "train":
                    name = f"{wnid}_{k + 1}.JPEG"
                else:
                    val_number += 1
                    name = f"ILSVRC2012_val_{val_number:08d}.JPEG"
                _image(r, c, odd_modes.get((split, c, k), "RGB")).save(folder / name, "JPEG", quality=75)
    return (f"{len(WNIDS):,} wnid class folders, {TRAIN_PER_CLASS * len(WNIDS):,} train + "
            f"{VAL_PER_CLASS * len(WNIDS):,} val JPEGs")


def _link(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:   # another file system, or links not allowed: a copy reads the same
        shutil.copy2(src, dst)


def write_quarter(dest: Path, seed: int, root: Path) -> str:
    full = root / "imagenet"
    r = rng(seed, "imagenet_quarter")
    kept = 0
    for wnid in WNIDS:
        files = sorted((full / "train" / wnid).iterdir())
        n = math.ceil(len(files) / QUARTER)
        (dest / "train" / wnid).mkdir(parents=True)
        for i in sorted(r.choice(len(files), n, replace=False)):
            _link(files[i], dest / "train" / wnid / files[i].name)
        kept += n
    try:
        os.symlink(os.path.join("..", full.name, "val"), dest / "val", target_is_directory=True)
    except OSError:
        shutil.copytree(full / "val", dest / "val", copy_function=_link)
    return (f"{len(WNIDS):,} wnid class folders, {kept:,} train JPEGs (1/{QUARTER} of each class's, rounded up, "
            f"linked) and val/ -> ../{full.name}/val")
