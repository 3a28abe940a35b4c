"""The `workload:` section for `name: cifar` (pydantic only: `import codist.config` needs no torch)."""
from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, StrictInt, model_validator

from . import DataNeeds, register
from .schema import WorkloadSection

CIFAR_CLASSES = {"cifar10": 10, "cifar100": 100}

# On-disk layout of torchvision's CIFAR downloads: folder, training files, test files, label key.
CIFAR_LAYOUT = {
    "cifar10": ("cifar-10-batches-py", [f"data_batch_{i}" for i in range(1, 6)], ["test_batch"], b"labels"),
    "cifar100": ("cifar-100-python", ["train"], ["test"], b"fine_labels"),
}


def layout_text(dataset: str) -> str:
    """Human-readable description of the files `dataset` expects under `data_dir`."""
    folder, train, test, key = CIFAR_LAYOUT[dataset]
    return (
        f"<data_dir>/{folder}/ holding {', '.join(train + test)} "
        f"(python pickles of dicts with b'data' uint8 N x 3072 and b'{key.decode()}'), "
        f"as torchvision's {dataset.upper()} download unpacks them"
    )


class CifarConfig(WorkloadSection):
    """The `workload:` section for `name: cifar`.

    `classes`, `image_size`, `train_size`, `val_size`, `label_noise` and `data_seed` shape
    the embedded data set only (they are ignored for cifar10/cifar100). The embedded data
    depend on these knobs alone, never on the run seed.
    """


    convnet = True   # ResNets: channels_last on a GPU
    name: Literal["cifar"] = "cifar"
    dataset: Literal["embedded", "cifar10", "cifar100"] = "embedded"
    data_dir: str | None = Field(None, description="folder holding cifar-10-batches-py/ or cifar-100-python/")
    arch: Literal["resnet8", "resnet20", "resnet32", "resnet56"] = "resnet8"
    width: StrictInt = Field(16, ge=4, description="channels of the first ResNet stage (16 in He et al. 2016)")
    norm: Literal["batch", "group", "none"] = Field(
        "batch", description="normalisation layers: batch (He et al.), group, none (exact data-parallel checks)")
    augment: bool = Field(False, description="random crop (padding image_size/8) + horizontal flip on the train set")
    classes: StrictInt = Field(10, ge=2, le=1000)
    image_size: StrictInt = Field(16, ge=8, le=64)
    train_size: StrictInt = Field(4000, ge=1)
    val_size: StrictInt = Field(1000, ge=1)
    label_noise: float = Field(0.1, ge=0.0, lt=0.5)
    data_seed: StrictInt = Field(0, ge=0)

    @model_validator(mode="after")
    def _check_data_dir(self) -> "CifarConfig":
        if self.dataset in CIFAR_LAYOUT and not self.data_dir:
            raise ValueError(
                f"workload.data_dir is required for workload.dataset={self.dataset!r}: "
                f"the folder that holds {layout_text(self.dataset)} (nothing is downloaded)"
            )
        if self.dataset == "embedded" and self.data_dir is not None:
            raise ValueError(
                "workload.data_dir is set but workload.dataset is 'embedded', which generates its data; "
                "set workload.dataset to 'cifar10' or 'cifar100' to read files from data_dir"
            )
        return self

    @property
    def num_classes(self) -> int:
        return CIFAR_CLASSES.get(self.dataset, self.classes)


def data_needs(w: CifarConfig, root: Path) -> DataNeeds:
    folder, train, test, _ = CIFAR_LAYOUT[w.dataset]
    # the loader accepts data_dir/<folder>/ or the files directly in data_dir
    base = root / folder if (root / folder).is_dir() or not (root / (train + test)[0]).exists() else root
    return DataNeeds([base], [base / name for name in train + test], layout_text(w.dataset))


register("cifar", CifarConfig, "codist.workloads.cifar:CifarWorkload",
         metrics={"val_loss": False, "val_accuracy": True, "error_pct": False},
         data_needs=data_needs, data_check="codist.datacheck:check_cifar",
         throughput_model=lambda w: f"cifar_{w.arch}")
