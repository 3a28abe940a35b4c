"""ImageNet classification (Anil Fig. 3, Sodhani Figs. 1-4 and 6, Sun's ImageNet speed-ups).

Real data: torchvision's ImageFolder layout (train/ and val/ with one folder per class),
with the standard augmentation of the torchvision reference recipe (RandomResizedCrop +
flip for training; resize 256 + center crop 224 for validation). The Goyal et al. schedule
(warmup, LR 0.1 x b/256, step decays at 30/60/80 epochs, L2 1e-4) lives in the run config's
optimizer and schedule sections: see replications/presets/imagenet_resnet50_goyal.yaml.
"""
from __future__ import annotations

from pathlib import Path

import torch
from torch import nn
from torch.utils.data import Dataset

from . import embedded_images
from .base import Metric, Workload
from .image_models import build_cifar_resnet
from .imagenet_config import IMAGEFOLDER_LAYOUT, ImagenetConfig

IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
# Goyal et al. 2017, Table 2 (ResNet-50, kn=256 ... 8k): 76.3% top-1; AlgoPerf's target 0.77431
RESNET50_TARGET = 0.7643
EMBEDDED_TARGET_FRACTION = 0.75


def check_imagefolder(data_dir: str | Path) -> tuple[Path, Path]:
    """train/ and val/ exist, hold the same class folders, and each has at least one file."""
    root = Path(data_dir)
    splits = []
    for split in ("train", "val"):
        d = root / split
        if not d.is_dir():
            raise FileNotFoundError(f"{d}: missing; expected {IMAGEFOLDER_LAYOUT}")
        classes = sorted(p.name for p in d.iterdir() if p.is_dir())
        if not classes:
            raise FileNotFoundError(f"{d}: no class folders; expected {IMAGEFOLDER_LAYOUT}")
        empty = [c for c in classes if not any((d / c).iterdir())]
        if empty:
            raise FileNotFoundError(f"{d}: class folder(s) {empty[:5]} hold no images")
        splits.append((d, classes))
    (train, train_classes), (val, val_classes) = splits
    if train_classes != val_classes:
        diff = sorted(set(train_classes) ^ set(val_classes))[:5]
        raise ValueError(f"{root}: train/ and val/ have different class folders (e.g. {diff})")
    return train, val


def load_image(path: str):
    """torchvision's image loader (RGB PIL image: 3 channels, 8 bits, whatever the file holds),
    with a read error that names the file: PIL's "image file is truncated" does not."""
    from PIL import Image
    from torchvision.datasets.folder import default_loader
    try:
        return default_loader(path)
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:   # PIL: damaged files, bombs
        raise ValueError(f"{path}: unreadable image ({type(e).__name__}: {e})") from None


class ImageFolderData:
    """The data source of `dataset: imagefolder`: torchvision ImageFolder splits under `data_dir`,
    opened on first use, with the reference recipe's transforms; the interface of
    `embedded_images.EmbeddedImageSource` (splits, num_classes, train_labels, target, loader_workers)."""

    def __init__(self, cfg: ImagenetConfig):
        self.cfg = cfg
        self._splits = None

    @property
    def loader_workers(self) -> int:
        return self.cfg.loader_workers   # JPEG decoding is the bottleneck: worker processes per rank

    @property
    def num_classes(self) -> int:
        return len(self.splits()[0].classes)

    def splits(self):
        if self._splits is None:
            from torchvision import transforms
            from .imagefolder_list import ListedImageFolder
            from .prepared import cache_folder
            cfg = self.cfg
            train_dir, val_dir = check_imagefolder(cfg.data_dir)
            norm = transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)
            cache = cache_folder(cfg.cache_dir, cfg.data_dir, "ImageFolder")
            train = ListedImageFolder(train_dir, cache, loader=load_image, transform=transforms.Compose([
                transforms.RandomResizedCrop(cfg.image_size), transforms.RandomHorizontalFlip(),
                transforms.ToTensor(), norm]))
            val = ListedImageFolder(val_dir, cache, loader=load_image, transform=transforms.Compose([
                transforms.Resize(cfg.val_resize), transforms.CenterCrop(cfg.image_size), transforms.ToTensor(),
                norm]))
            self._splits = train, val
        return self._splits

    def train_labels(self) -> torch.Tensor:
        return torch.as_tensor(self.splits()[0].targets)   # from the file list: no image is decoded

    def target(self) -> float | None:
        return RESNET50_TARGET if self.cfg.arch == "resnet50" else None   # known for ResNet-50 only


def embedded_source(cfg: ImagenetConfig) -> embedded_images.EmbeddedImageSource:
    return embedded_images.EmbeddedImageSource(cfg, cfg.embedded_image_size, EMBEDDED_TARGET_FRACTION)


#: `workload.dataset` -> the data source: splits(), num_classes, train_labels(), target(), loader_workers
SOURCES = {"embedded": embedded_source, "imagefolder": ImageFolderData}


class ImagenetWorkload(Workload):
    def __init__(self, cfg: ImagenetConfig, seed: int):
        self.cfg, self.seed = cfg, seed
        self.data = SOURCES[cfg.dataset](cfg)   # the embedded generator or the ImageFolder splits
        target = self.data.target()
        self.metric = Metric("val_accuracy", higher_is_better=True,
                             target=None if target is None else round(target, 4))

    @property
    def num_classes(self) -> int:
        return self.data.num_classes

    def build_model(self) -> nn.Module:
        arch = self.cfg.arch
        if arch.startswith("cifar_resnet"):
            return build_cifar_resnet(int(arch.removeprefix("cifar_resnet")), self.cfg.width, self.num_classes)
        import torchvision   # only here: its import is 0.4 s of every embedded stand-in run's start-up otherwise
        return getattr(torchvision.models, arch)(weights=None, num_classes=self.num_classes)

    def train_dataset(self) -> Dataset:
        return self.data.splits()[0]

    def val_dataset(self) -> Dataset:
        return self.data.splits()[1]

    @property
    def loader_workers(self) -> int:
        """The source's: real images are decoded by DataLoader processes (training and evaluation)."""
        return self.data.loader_workers

    def train_stream(self, split, model, models, batch_per_rank, ranks, rank, seed):
        """Real images are decoded by the source's `loader_workers` DataLoader processes per rank."""
        stream = super().train_stream(split, model, models, batch_per_rank, ranks, rank, seed)
        if self.loader_workers > 0:
            from ..runtime.data import PrefetchStream
            return PrefetchStream(stream, self.loader_workers)
        return stream

    def class_counts(self) -> torch.Tensor:
        return torch.bincount(self.data.train_labels(), minlength=self.num_classes)
