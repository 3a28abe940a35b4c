"""Fashion-MNIST (`workload.dataset: fashion_mnist`) on the real IDX files of Debian's
dataset-fashion-mnist: their shapes, labels and digests, the class-balanced subsets, the lines a
missing or damaged file gives, and a short real training run through `codist.launching.launch`.

The tests that read the real files skip when the package is absent, except under CI=true, where
.ci/run installs it: there they fail (with the missing-files line) instead of passing unseen.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from codist import config
from codist.config import ConfigError
from codist.launching.inputs import check_inputs
from codist.workloads import fashion_mnist as F
from codist.workloads.cifar import CIFAR_STATS, CifarConfig, CifarWorkload
from codist.workloads.cifar_config import FASHION_MNIST_FILES as NAMES
from codist.workloads.cifar_config import FASHION_MNIST_PACKAGE_DIR

from conftest import TINY, deep_update, launch_run, read_rows

PACKAGE = Path(FASHION_MNIST_PACKAGE_DIR)
real_files = pytest.mark.skipif(
    not PACKAGE.is_dir() and os.environ.get("CI") != "true",
    reason=f"Debian's dataset-fashion-mnist is not installed ({PACKAGE} is missing): "
           f"apt-get install dataset-fashion-mnist (under CI=true these tests fail instead)")


@pytest.fixture(scope="module")
def real():
    return F.read_fashion_mnist(None)


def _plain_copy(tmp_path: Path, names=NAMES) -> Path:
    """The package's files decompressed into tmp_path (a user's own uncompressed copy)."""
    for name in names:
        src = F.fashion_mnist_file(PACKAGE, name)
        data = gzip.decompress(src.read_bytes()) if src.suffix == ".gz" else src.read_bytes()
        (tmp_path / name).write_bytes(data)
    return tmp_path


# --------------------------------------------------------------------------- the real files


@real_files
def test_real_files_shapes_labels_and_digests(real):
    assert real.folder == PACKAGE
    assert real.train_x.shape == (60_000, 1, 28, 28) and real.train_x.dtype == np.uint8
    assert real.test_x.shape == (10_000, 1, 28, 28) and real.test_x.dtype == np.uint8
    assert real.train_y.shape == (60_000,) and real.test_y.shape == (10_000,)
    assert real.train_y.min() == 0 and real.train_y.max() == 9
    # Fashion-MNIST is exactly balanced: 6,000 and 1,000 images a class
    assert np.bincount(real.train_y).tolist() == [6_000] * 10
    assert np.bincount(real.test_y).tolist() == [1_000] * 10
    assert 0 < real.train_x.mean() < 255   # pixels, not zeros
    for name in NAMES:
        found, known = real.digests[name], F.KNOWN_DIGESTS[name]
        assert found["sha256"] == known.sha256 and found["md5"] == known.md5, name
        assert Path(found["file"]).parent == PACKAGE


@real_files
def test_normalisation_constants_are_the_training_sets(real):
    counts = np.bincount(real.train_x.ravel(), minlength=256)   # of each pixel value: exact moments, cheaply
    v = np.arange(256) / 255.0
    m = (counts * v).sum() / counts.sum()
    sd = math.sqrt((counts * (v - m) ** 2).sum() / counts.sum())
    (mean,), (std,) = CIFAR_STATS["fashion_mnist"]
    assert m == pytest.approx(mean, abs=1e-4) and sd == pytest.approx(std, abs=1e-4)


@real_files
def test_uncompressed_copy_reads_the_same(real, tmp_path):
    """A user's uncompressed files in data_dir: the same arrays, digests and no archive md5."""
    copy = F.read_fashion_mnist(_plain_copy(tmp_path))
    assert np.array_equal(copy.train_x, real.train_x) and np.array_equal(copy.test_y, real.test_y)
    assert copy.digests["t10k-labels-idx1-ubyte"]["sha256"] == real.digests["t10k-labels-idx1-ubyte"]["sha256"]
    assert "archive_md5" not in copy.digests["t10k-labels-idx1-ubyte"]


# --------------------------------------------------------------------------- subsets and the workload


def _workload(**kw) -> CifarWorkload:
    return CifarWorkload(CifarConfig(dataset="fashion_mnist", **kw), seed=0)


@real_files
def test_workload_whole_splits_by_default():
    w = _workload()
    assert w.cfg.train_size == 60_000 and w.cfg.val_size == 10_000   # written into the config
    x, y = w.train_dataset().tensors
    vx, vy = w.val_dataset().tensors
    assert x.shape == (60_000, 1, 28, 28) and vx.shape == (10_000, 1, 28, 28) and x.dtype == torch.float32
    assert abs(float(x.mean())) < 1e-3 and float(x.std()) == pytest.approx(1.0, abs=1e-3)
    assert w.num_classes == 10 and w.build_model()(x[:3]).shape == (3, 10)   # a 1-channel first conv
    assert w.metric.name == "val_accuracy" and w.metric.target == pytest.approx(0.90)
    facts = w.describe()
    assert facts["dataset"] == "fashion_mnist" and facts["train_size"] == 60_000
    assert facts["files"]["train-images-idx3-ubyte"]["sha256"] == F.KNOWN_DIGESTS["train-images-idx3-ubyte"].sha256


@real_files
def test_subset_is_class_balanced_and_fixed_by_data_seed(real):
    w = _workload(train_size=1_003, val_size=200, data_seed=4)
    x, y = w.train_dataset().tensors
    vx, vy = w.val_dataset().tensors
    counts = torch.bincount(y, minlength=10)
    assert len(y) == 1_003 and int(counts.sum()) == 1_003 and int(counts.max() - counts.min()) == 1
    assert sorted(counts.tolist()) == [100] * 7 + [101] * 3
    assert torch.bincount(vy, minlength=10).tolist() == [20] * 10

    again = _workload(train_size=1_003, val_size=200, data_seed=4)
    assert torch.equal(again.train_dataset().tensors[0], x) and torch.equal(again.val_dataset().tensors[1], vy)
    other = _workload(train_size=1_003, val_size=200, data_seed=5)
    assert not torch.equal(other.train_dataset().tensors[0], x)
    # one split's cap leaves the other's subset alone (separate streams)
    assert torch.equal(_workload(train_size=1_003, val_size=300, data_seed=4).train_dataset().tensors[0], x)

    # the subset's images are the real ones: indices from balanced_subset, in file order
    keep = F.balanced_subset(real.train_y, 1_003, 4, 0)
    assert np.array_equal(np.sort(keep), keep) and len(set(keep.tolist())) == 1_003
    assert y.tolist() == real.train_y[keep].tolist()
    (mean,), (std,) = CIFAR_STATS["fashion_mnist"]
    assert float(x[17, 0, 14, 9]) == pytest.approx((real.train_x[keep[17], 0, 14, 9] / 255.0 - mean) / std, abs=1e-5)


@real_files
def test_downsample_averages_pixel_blocks_of_the_same_images(real):
    """downsample 2: each 14 x 14 image's pixel is the mean of the 2 x 2 block of the standardised 28 x 28
    image it came from (the same subset, labels and order); the model and augmentation take the new size."""
    full = _workload(train_size=200, val_size=100, data_seed=3)
    half = _workload(train_size=200, val_size=100, data_seed=3, downsample=2, augment=True)
    x, y = full.train_dataset().tensors
    hx, hy = half.data.splits()[0].tensors
    assert hx.shape == (200, 1, 14, 14) and half.val_dataset().tensors[0].shape == (100, 1, 14, 14)
    assert torch.equal(hy, y)
    assert float(hx[5, 0, 3, 6]) == pytest.approx(float(x[5, 0, 6:8, 12:14].mean()), abs=1e-6)
    assert half.train_dataset().padding == 1   # size // 8 of the 14-pixel side (3 at 28)
    assert half.build_model()(hx[:2]).shape == (2, 10)


def test_downsample_keeps_old_run_ids_and_refuses_what_it_cannot_do():
    """At its default the key is not in the run id, so the committed Fashion-MNIST pilot's runs keep their
    ids; any other value is."""
    base = {"name": "t", "workload": {"name": "cifar", "dataset": "fashion_mnist", "train_size": 500}}
    cfg = config.validate(base, "t")
    same = config.validate(deep_update(base, {"workload": {"downsample": 1}}), "t")
    other = config.validate(deep_update(base, {"workload": {"downsample": 2}}), "t")
    assert same.run_id() == cfg.run_id() != other.run_id()
    with pytest.raises(ValidationError, match=r"workload.downsample=2 applies to workload.dataset 'fashion_mnist' only"):
        CifarConfig(downsample=2)
    with pytest.raises(ValidationError, match=r"workload.downsample=3 does not divide Fashion-MNIST's 28-pixel side"):
        CifarConfig(dataset="fashion_mnist", downsample=3)
    from workflows.experiments import EVERY_TIER, load_plan
    root = Path(__file__).resolve().parents[1]
    planned = set(load_plan(root / "replications", "embedded", tier=EVERY_TIER).configs)
    pilot = json.loads((root / "results/embedded/sodhani2020/fig1_fmnist_pilot_runs.json").read_text())["runs"]
    assert len(pilot) == 12 and {r["run_id"] for r in pilot} <= planned


def test_balanced_subset_whole_set_is_every_item_in_order():
    labels = np.repeat(np.arange(10), 7)
    assert F.balanced_subset(labels, 70, 0, 0).tolist() == list(range(70))
    with pytest.raises(ValueError, match="needs 8 items of class"):
        F.balanced_subset(np.concatenate([labels, [0] * 10]), 80, 0, 0)


def test_config_caps_channels_and_errors():
    c = CifarConfig(dataset="fashion_mnist")
    assert (c.train_size, c.val_size, c.in_channels, c.num_classes) == (60_000, 10_000, 1, 10)
    assert CifarConfig().in_channels == 3 and CifarConfig().train_size == 4000   # the embedded default unchanged
    with pytest.raises(ValidationError, match=r"workload.train_size=60001 is more than Fashion-MNIST's 60,000"):
        CifarConfig(dataset="fashion_mnist", train_size=60_001)
    with pytest.raises(ValidationError, match=r"workload.val_size=10001 .* 10,000 test images"):
        CifarConfig(dataset="fashion_mnist", val_size=10_001)
    with pytest.raises(ValidationError, match="'fashion_mnist' to read files from data_dir"):
        CifarConfig(data_dir="/data")
    # a run config round-trips: the dumped sizes validate to the same run id
    cfg = config.validate({"name": "t", "workload": {"name": "cifar", "dataset": "fashion_mnist", "val_size": 500}},
                          "t")
    again = config.validate(config.to_dict(cfg), "dumped")
    assert again.workload.train_size == 60_000 and again.run_id() == cfg.run_id()


# --------------------------------------------------------------------------- missing and damaged files


def test_missing_files_one_line_naming_where_and_the_install(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError) as err:
        F.read_fashion_mnist(tmp_path)
    line = str(err.value)
    assert "\n" not in line and f"missing in {tmp_path} (workload.data_dir)" in line
    assert all(n in line for n in NAMES) and "apt-get install dataset-fashion-mnist" in line

    (tmp_path / "train-images-idx3-ubyte.gz").write_bytes(b"")   # present: only the other three are named
    with pytest.raises(FileNotFoundError, match="unset workload.data_dir") as err:
        F.read_fashion_mnist(tmp_path)
    assert "train-images-idx3-ubyte," not in str(err.value) and "t10k-labels-idx1-ubyte" in str(err.value)

    absent = tmp_path / "no-package"
    monkeypatch.setattr(F, "FASHION_MNIST_PACKAGE_DIR", str(absent))
    with pytest.raises(FileNotFoundError) as err:
        F.read_fashion_mnist(None)
    line = str(err.value)
    assert "\n" not in line and f"missing in {absent} (the dataset-fashion-mnist package's folder" in line
    assert "install them with `apt-get install dataset-fashion-mnist`" in line and "workload.data_dir" in line


def test_missing_data_dir_files_fail_before_launch(tmp_path):
    cfg = config.validate(deep_update(TINY, {"workload": {"dataset": "fashion_mnist", "data_dir": str(tmp_path)}}), "t")
    with pytest.raises(ConfigError, match=r"workload.data_dir: .*train-images-idx3-ubyte' does not exist; expected "
                                          r"the four Fashion-MNIST IDX files"):
        check_inputs(cfg)


@real_files
def test_truncated_gzip_one_line_naming_the_file(tmp_path):
    for name in NAMES:
        shutil.copy(F.fashion_mnist_file(PACKAGE, name), tmp_path)
    cut = tmp_path / "train-images-idx3-ubyte.gz"
    cut.write_bytes(cut.read_bytes()[: cut.stat().st_size // 2])
    with pytest.raises(ValueError) as err:
        F.read_fashion_mnist(tmp_path)
    line = str(err.value)
    assert "\n" not in line and line.startswith(f"{cut}: not a whole gzip file") and "expected the four" in line


@real_files
def test_damaged_idx_files_one_line_each(tmp_path):
    _plain_copy(tmp_path)
    images = tmp_path / "t10k-images-idx3-ubyte"
    whole = images.read_bytes()

    images.write_bytes(whole[:-784])   # one image short
    with pytest.raises(ValueError, match=rf"^{images}: 7,839,232 bytes of IDX data, expected 7,840,016 "
                                         r"\(IDX unsigned bytes of shape 10000 x 28 x 28: truncated or padded\)$"):
        F.read_fashion_mnist(tmp_path)

    images.write_bytes(whole[:4] + (9_999).to_bytes(4, "big") + whole[8:])
    with pytest.raises(ValueError, match=rf"^{images}: IDX header says shape \(9999, 28, 28\), expected"):
        F.read_fashion_mnist(tmp_path)

    images.write_bytes(b"\x00\x00\x08\x01" + whole[4:])   # a labels file's magic
    with pytest.raises(ValueError, match=rf"^{images}: IDX magic 00000801, expected 00000803"):
        F.read_fashion_mnist(tmp_path)

    flipped = bytearray(whole)
    flipped[5000] ^= 0xFF   # one pixel: same shape, another file
    images.write_bytes(bytes(flipped))
    with pytest.raises(ValueError) as err:
        F.read_fashion_mnist(tmp_path)
    assert str(err.value) == (f"{images}: sha256 of its IDX bytes is {hashlib.sha256(flipped).hexdigest()}, expected "
                              f"{F.KNOWN_DIGESTS['t10k-images-idx3-ubyte'].sha256} (Fashion-MNIST's "
                              f"t10k-images-idx3-ubyte): damaged or another data set")

    images.write_bytes(whole)
    labels = tmp_path / "train-labels-idx1-ubyte"
    y = bytearray(labels.read_bytes())
    y[8 + 123] = 10
    labels.write_bytes(bytes(y))
    with pytest.raises(ValueError, match=rf"^{labels}: labels in \[0, 10\], expected 0-9$"):
        F.read_fashion_mnist(tmp_path)


@real_files
def test_data_check_prints_the_digests(tmp_path):
    from codist.datacheck import check
    problems, notes = check("cifar", PACKAGE, dataset="fashion_mnist")
    assert problems == [] and "60,000 training and 10,000 test images" in notes[0]
    assert any(F.KNOWN_DIGESTS["t10k-images-idx3-ubyte"].sha256 in n and "recompressed" in n for n in notes)
    problems, _ = check("cifar", tmp_path, dataset="fashion_mnist")
    assert len(problems) == 1 and "missing in" in problems[0]


# --------------------------------------------------------------------------- a real run


@real_files
@pytest.mark.slow
def test_short_training_run_learns_above_chance(tmp_path):
    """60 updates of one rank on a 1,000-image balanced subset through the normal launch path: finite,
    and well above chance (0.1) on 500 real test images (measured 0.48 here; deterministic per platform)."""
    run = launch_run(tmp_path / "run", {
        "workload": {"dataset": "fashion_mnist", "train_size": 1_000, "val_size": 500, "width": 8},
        "train": {"steps": 60, "batch_per_rank": 32, "eval_every": 60, "eval_batch": 250},
        "optimizer": {"lr": 0.02}})
    (row,) = read_rows(run)
    assert row["step"] == 60 and math.isfinite(row["val_loss"]) and math.isfinite(row["train_loss"])
    assert row["val_accuracy"] > 0.2, row
