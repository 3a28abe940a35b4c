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


# Fashion-MNIST (Xiao et al. 2017, Zalando): four IDX files, as Debian's dataset-fashion-mnist
# installs them (gzipped) in its folder, or as a user brings them in a folder under the data root.
FASHION_MNIST_PACKAGE = "dataset-fashion-mnist"
FASHION_MNIST_PACKAGE_DIR = "/usr/share/datasets/fashion-mnist"
FASHION_MNIST_CLASSES = 10
FASHION_MNIST_SIDE = 28   # pixels; every image is FASHION_MNIST_SIDE x FASHION_MNIST_SIDE uint8, one channel
#: split -> (images file, labels file, images in it)
FASHION_MNIST_SPLITS = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", 60_000),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", 10_000),
}
FASHION_MNIST_FILES = tuple(name for images, labels, _ in FASHION_MNIST_SPLITS.values() for name in (images, labels))
FASHION_MNIST_LAYOUT = (f"the four Fashion-MNIST IDX files, each as it is or gzipped (.gz): "
                        f"{', '.join(FASHION_MNIST_FILES)} (`apt-get install {FASHION_MNIST_PACKAGE}` puts them in "
                        f"{FASHION_MNIST_PACKAGE_DIR})")


def fashion_mnist_file(folder: Path, name: str) -> Path:
    """`folder/name`, or `folder/name.gz` when only that exists (the package ships them gzipped)."""
    plain = folder / name
    return plain if plain.exists() or not (folder / f"{name}.gz").exists() else folder / f"{name}.gz"


class CifarConfig(WorkloadSection):
    """The `workload:` section for `name: cifar`.

    `classes`, `image_size`, `train_size`, `val_size`, `label_noise` and `data_seed` shape
    the embedded data set only (they are ignored for cifar10/cifar100). The embedded data
    depend on these knobs alone, never on the run seed.

    `dataset: fashion_mnist` reads Fashion-MNIST (1 x 28 x 28, 10 classes) from `data_dir`, or
    from the dataset-fashion-mnist package's folder when `data_dir` is unset. There `train_size`
    and `val_size` are caps (unset: the whole 60,000-image training set and 10,000-image test
    set): a cap picks a fixed, class-balanced subset drawn with `data_seed`, so a tier can
    downscale. A subset is still real data, a smaller sample of the same images, not a stand-in;
    so is `downsample`, the same images at a lower resolution (block means of the pixels).
    """


    convnet = True   # ResNets: channels_last on a GPU
    name: Literal["cifar"] = "cifar"
    dataset: Literal["embedded", "cifar10", "cifar100", "fashion_mnist"] = "embedded"
    data_dir: str | None = Field(None, description="folder holding cifar-10-batches-py/ or cifar-100-python/, or "
                                 "Fashion-MNIST's IDX files (fashion_mnist; unset: the package's folder)")
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
    downsample: StrictInt = Field(1, ge=1, description="Fashion-MNIST only: average-pool each 28 x 28 image over "
                                  "downsample x downsample blocks (2: 14 x 14), the same images at a quarter "
                                  "of the pixels where a CPU budget needs it; 1: as the files hold them")

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
                "set workload.dataset to 'cifar10', 'cifar100' or 'fashion_mnist' to read files from data_dir"
            )
        if self.dataset == "fashion_mnist":
            self._cap_fashion_mnist()
        if self.downsample != 1 and self.dataset != "fashion_mnist":
            raise ValueError(f"workload.downsample={self.downsample} applies to workload.dataset 'fashion_mnist' "
                             f"only (here {self.dataset!r}); expected 1")
        if FASHION_MNIST_SIDE % self.downsample:
            raise ValueError(f"workload.downsample={self.downsample} does not divide Fashion-MNIST's "
                             f"{FASHION_MNIST_SIDE}-pixel side; expected one of 1, 2, 4, 7, 14, 28")
        return self

    def _cap_fashion_mnist(self) -> None:
        """train_size / val_size as caps on Fashion-MNIST's splits: unset, the whole split (written
        into the config, so the run id and the manifest say how many images were read)."""
        for key, (_, _, full) in zip(("train_size", "val_size"), FASHION_MNIST_SPLITS.values()):
            if key not in self.model_fields_set:
                setattr(self, key, full)
            elif getattr(self, key) > full:
                split = "training" if key == "train_size" else "test"
                raise ValueError(f"workload.{key}={getattr(self, key)} is more than Fashion-MNIST's {full:,} "
                                 f"{split} images; expected at most {full} (a cap: a class-balanced subset)")

    @property
    def num_classes(self) -> int:
        if self.dataset == "fashion_mnist":
            return FASHION_MNIST_CLASSES
        return CIFAR_CLASSES.get(self.dataset, self.classes)

    @property
    def in_channels(self) -> int:
        """Image channels, the model's first convolution's input: Fashion-MNIST is grayscale."""
        return 1 if self.dataset == "fashion_mnist" else 3


def data_needs(w: CifarConfig, root: Path) -> DataNeeds:
    if w.dataset == "fashion_mnist":   # the files directly in data_dir (unset: the package's folder, not checked here)
        return DataNeeds([], [fashion_mnist_file(root, n) for n in FASHION_MNIST_FILES], FASHION_MNIST_LAYOUT)
    folder, train, test, _ = CIFAR_LAYOUT[w.dataset]
    # the loader accepts data_dir/<folder>/ or the files directly in data_dir
    base = root / folder if (root / folder).is_dir() or not (root / (train + test)[0]).exists() else root
    return DataNeeds([base], [base / name for name in train + test], layout_text(w.dataset))


register("cifar", CifarConfig, "codist.workloads.cifar:CifarWorkload",
         metrics={"val_loss": False, "val_accuracy": True, "error_pct": False},
         data_needs=data_needs, data_check="codist.datacheck:check_cifar",
         throughput_model=lambda w: f"cifar_{w.arch}")
