"""A toy workload, written as a newcomer would add one: this module (and its throughput file,
toy_throughput.yaml) is all it takes: config class, workload class, one registration naming
its metrics and their directions, its data's needs and check, and its throughput-table model.

Gaussian blobs, one per class, and a linear classifier. `dataset: embedded` generates them from
`data_seed`; `dataset: csv` reads `<data_dir>/blobs.csv` (one sample a line: the features, then
the class). Its headline metric, `val_toy_error`, is a name no built-in workload logs, so the
analysis can only know its direction from this registration. Used by test_plugin_pipeline.py
through CODIST_PLUGINS."""
from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np
import torch
from pydantic import Field, StrictInt, model_validator
from torch import nn
from torch.utils.data import TensorDataset

from codist.workloads import DataNeeds, register
from codist.workloads.base import Metric, Workload
from codist.workloads.schema import WorkloadSection

LAYOUT = "<data_dir>/blobs.csv: one sample a line, its features then its class (comma-separated)"


class ToyBlobsConfig(WorkloadSection):
    name: Literal["toy_blobs"] = "toy_blobs"
    dataset: Literal["embedded", "csv"] = "embedded"
    data_dir: str | None = None
    classes: StrictInt = Field(3, ge=2)
    features: StrictInt = Field(4, ge=1)
    train_size: StrictInt = Field(256, ge=1)
    val_size: StrictInt = Field(128, ge=1)
    spread: float = Field(1.5, gt=0, description="the blobs' standard deviation (their centres are 1 apart)")
    data_seed: StrictInt = Field(0, ge=0)

    @model_validator(mode="after")
    def _data_dir(self) -> "ToyBlobsConfig":
        if (self.dataset == "csv") != (self.data_dir is not None):
            raise ValueError(f"workload.data_dir is needed exactly when workload.dataset is 'csv': {LAYOUT}")
        return self


def read_blobs(path: Path):
    """(features, classes) of a blobs.csv; ValueError naming the file and line otherwise."""
    rows = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        try:
            rows.append([float(v) for v in line.split(",")])
        except ValueError:
            raise ValueError(f"{path}:{i}: not comma-separated numbers") from None
    if not rows or len({len(r) for r in rows}) != 1:
        raise ValueError(f"{path}: no samples, or lines of different lengths")
    data = np.asarray(rows)
    return data[:, :-1], data[:, -1].astype(int)


def check_blobs(root: Path, **_) -> tuple[list[str], list[str]]:
    """`codist data check toy_blobs DIR`: the file exists and parses."""
    path = root / "blobs.csv"
    if not path.is_file():
        return [f"{path}: does not exist; expected {LAYOUT}"], []
    try:
        x, y = read_blobs(path)
    except ValueError as e:
        return [f"{e}; expected {LAYOUT}"], []
    return [], [f"{len(y):,} samples of {x.shape[1]} features, {len(set(y.tolist()))} classes"]


def data_needs(w: ToyBlobsConfig, root: Path) -> DataNeeds:
    return DataNeeds([], [root / "blobs.csv"], LAYOUT)


class ToyBlobsWorkload(Workload):
    metric = Metric("val_toy_error", higher_is_better=False)

    def __init__(self, cfg: ToyBlobsConfig, seed: int):
        self.cfg, self.num_classes = cfg, cfg.classes
        if cfg.dataset == "csv":
            x, y = read_blobs(Path(cfg.data_dir) / "blobs.csv")
            cut = len(y) * 3 // 4
            self._splits = [(x[:cut], y[:cut]), (x[cut:], y[cut:])]
        else:
            rng = np.random.default_rng(cfg.data_seed)
            centres = rng.standard_normal((cfg.classes, cfg.features))
            self._splits = []
            for n in (cfg.train_size, cfg.val_size):
                y = rng.integers(0, cfg.classes, n)
                self._splits.append((centres[y] + cfg.spread * rng.standard_normal((n, cfg.features)), y))

    def _data(self, i: int) -> TensorDataset:
        x, y = self._splits[i]
        return TensorDataset(torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.long))

    def build_model(self) -> nn.Module:
        return nn.Linear(self.cfg.features, self.cfg.classes)

    def train_dataset(self) -> TensorDataset:
        return self._data(0)

    def val_dataset(self) -> TensorDataset:
        return self._data(1)

    def finalize_eval(self, sums: dict[str, float]) -> dict[str, float]:
        out = super().finalize_eval(sums)
        return {**out, "val_toy_error": 1.0 - out["val_accuracy"]}


register("toy_blobs", ToyBlobsConfig, ToyBlobsWorkload,
         metrics={"val_loss": False, "val_accuracy": True, "val_toy_error": False},
         data_needs=data_needs, data_check=check_blobs,
         throughput_model=lambda w: "toy_linear", throughput=Path(__file__).with_name("toy_throughput.yaml"))
