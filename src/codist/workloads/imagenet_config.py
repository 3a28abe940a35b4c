"""The `workload:` section for `name: imagenet` (pydantic only: `import codist.config` needs no torch)."""
from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, StrictInt, model_validator

from . import DataNeeds, register
from .schema import WorkloadSection

IMAGEFOLDER_LAYOUT = ("<data_dir>/train/<class>/<image> and <data_dir>/val/<class>/<image> "
                      "(torchvision ImageFolder; the same class folders in both)")


class ImagenetConfig(WorkloadSection):
    """ImageNet classification with a torchvision ResNet (full: ResNet-50, Goyal et al. 2017).

    `embedded` generates a small image task in-process (the generator of the cifar workload at
    `embedded_image_size` with `classes` classes); its default model is a narrow CIFAR-style
    ResNet. The torchvision architectures also run on it (they downsample 32x, so on 24-pixel
    images they are only useful to measure communication of the real model sizes).
    """

    convnet = True   # ResNets: channels_last on a GPU
    name: Literal["imagenet"] = "imagenet"
    dataset: Literal["embedded", "imagefolder"] = "embedded"
    data_dir: str | None = Field(None, description=f"for imagefolder: {IMAGEFOLDER_LAYOUT}")
    cache_dir: str | None = Field(None, description="imagefolder: where each split's file list is cached, listed "
                                  "once for every rank and run (default <data_dir>/.codist_cache); named by a hash "
                                  "of the folders' paths and modification times")
    arch: Literal["resnet50", "resnet18", "resnext101_32x8d", "cifar_resnet8", "cifar_resnet20"] = "cifar_resnet8"
    width: StrictInt = Field(16, ge=4, description="base width of the cifar_resnet* archs (embedded)")
    image_size: StrictInt = Field(224, ge=8, le=512, description="training crop (224 in Goyal et al.)")
    val_resize: StrictInt = Field(256, ge=8, le=600, description="validation: resize the short side, center-crop image_size")
    loader_workers: StrictInt = Field(4, ge=0, description="DataLoader worker processes per rank (imagefolder)")
    # embedded generator knobs
    classes: StrictInt = Field(20, ge=2, le=1000)
    embedded_image_size: StrictInt = Field(24, ge=8, le=64)
    train_size: StrictInt = Field(6000, ge=1)
    val_size: StrictInt = Field(1000, ge=1)
    label_noise: float = Field(0.1, ge=0.0, lt=0.5)
    data_seed: StrictInt = Field(0, ge=0)

    @model_validator(mode="after")
    def _check(self) -> "ImagenetConfig":
        if self.dataset == "imagefolder" and not self.data_dir:
            raise ValueError(f"workload.data_dir is required for workload.dataset='imagefolder': {IMAGEFOLDER_LAYOUT}")
        return self


def data_needs(w: ImagenetConfig, root: Path) -> DataNeeds:
    return DataNeeds([root / "train", root / "val"], [], IMAGEFOLDER_LAYOUT)


register("imagenet", ImagenetConfig, "codist.workloads.imagenet:ImagenetWorkload",
         metrics={"val_loss": False, "val_accuracy": True, "error_pct": False},
         data_needs=data_needs, data_check="codist.datacheck:check_imagefolder",
         throughput_model=lambda w: w.arch)
