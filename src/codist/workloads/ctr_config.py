"""The `workload:` section for `name: ctr` (Anil et al. 2018's Criteo DNN), as a pydantic model.

Kept apart from `ctr.py` and importing only pydantic and the standard library, so that
validating a run config never has to import torch.

Defaults depend on the data set: the field defaults are the `criteo` ones (Anil et al.'s
MLP 2560-1024-256), and for `dataset: embedded` (the default) any of `hidden`,
`embedding_dim` and `hash_buckets` left out are filled with the small embedded values
before validation. The filled-in values are ordinary field values, so the resolved config
(and hence the run id and the manifest) shows what was actually built.
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, StrictInt, model_validator

from . import DataNeeds, register
from .schema import WorkloadSection

#: number of integer ("dense") and categorical features of a Criteo line
DENSE_FEATURES = 13
CATEGORICAL_FEATURES = 26

#: float32 represents every integer up to 2**24 exactly; categorical ids travel in the same
#: float32 input tensor as the dense features (see `ctr.py`), so no bucket id may exceed it.
MAX_HASH_BUCKETS = 2 ** 24

CRITEO_LAYOUT = (
    "<data_dir>/train.txt (or workload.train_file) in the Criteo Display Advertising Challenge "
    "format: one sample per line, 40 tab-separated fields: label (0 or 1), I1..I13 (integers, "
    "may be empty), C1..C26 (categorical strings, e.g. 8 hex digits, may be empty); optionally a "
    "labelled validation file in the same format (workload.val_file), otherwise the last "
    "workload.val_fraction of the lines are held out"
)

# Defaults for the embedded data set (the field defaults below are Criteo's). hash_buckets
# is the id space of the generated categories: `categories` values plus the missing bucket 0.
EMBEDDED_HIDDEN = [64, 32]
EMBEDDED_EMBEDDING_DIM = 8
EMBEDDED_CATEGORIES = 100

Width = Annotated[StrictInt, Field(ge=1)]


class CtrConfig(WorkloadSection):
    """The `workload:` section for `name: ctr`.

    Model (both data sets): one embedding table of `hash_buckets` rows x `embedding_dim` per
    categorical feature, concatenated with the 13 log-transformed integer features, into an
    MLP with ReLU layers of widths `hidden` and a 2-logit output. `hidden: []` gives a
    logistic regression on the embeddings and dense features (a useful baseline).

    `criteo` reads real files from `data_dir` (see `CRITEO_LAYOUT`): `train_file`, and either
    `val_file` or, without one, the last `val_fraction` of the (first `max_lines`) lines of
    `train_file` as validation set. Criteo's train.txt is in time order, so this holds out
    the most recent traffic. Criteo's own test.txt has no labels and cannot serve as `val_file`.

    `train_size`, `val_size`, `categories` and `data_seed` shape the embedded data set only
    (they are ignored for criteo); the embedded data depend on them alone, never on the
    run seed. `data_dir`, `train_file`, `val_file`, `val_fraction` and `max_lines` are read
    for criteo only.
    """


    name: Literal["ctr"] = "ctr"
    dataset: Literal["embedded", "criteo"] = "embedded"
    data_dir: str | None = Field(None, description="folder holding the Criteo TSV files (criteo only)")
    train_file: str = Field("train.txt", min_length=1, description="training file name inside data_dir")
    val_file: str | None = Field(None, min_length=1, description="labelled validation file inside data_dir; "
                                 "None: hold out the last val_fraction of train_file")
    val_fraction: float = Field(0.1, gt=0, lt=1, description="share of train_file's lines held out "
                                "(its last lines) when val_file is None")
    max_lines: StrictInt | None = Field(None, ge=2, description="read only the first max_lines lines of train_file "
                                  "(before the hold-out split); None: all")
    cache_dir: str | None = Field(None, description="criteo: where the parsed files are cached, parsed once for "
                                  "every rank and run (default <data_dir>/.codist_cache); named by a hash of the "
                                  "file's name, size and modification time and of hash_buckets and max_lines")
    hidden: list[Width] = Field([2560, 1024, 256], description="ReLU layer widths (Anil et al.: 2560-1024-256)")
    embedding_dim: StrictInt = Field(16, ge=1, le=1024, description="embedding width of each categorical feature "
                               "(not given by Anil et al.)")
    hash_buckets: StrictInt = Field(2 ** 18, ge=2, le=MAX_HASH_BUCKETS,
                              description="rows per categorical feature's embedding table: bucket 0 for a "
                              "missing value, the rest for hashed strings")
    train_size: StrictInt = Field(100_000, ge=1, description="embedded: training samples (a finite set)")
    val_size: StrictInt = Field(20_000, ge=1, description="embedded: validation samples")
    categories: StrictInt = Field(EMBEDDED_CATEGORIES, ge=2, description="embedded: the largest number of values of "
                            "a categorical feature (each feature's own count lies in [2, categories])")
    data_seed: StrictInt = Field(0, ge=0, description="embedded: seed of the generator")

    @model_validator(mode="before")
    @classmethod
    def _embedded_defaults(cls, data: Any) -> Any:
        """Fill the small embedded defaults for fields the user left out (see the module docstring)."""
        if isinstance(data, dict) and data.get("dataset", "embedded") == "embedded":
            data = dict(data)
            data.setdefault("hidden", list(EMBEDDED_HIDDEN))
            data.setdefault("embedding_dim", EMBEDDED_EMBEDDING_DIM)
            categories = data.get("categories", EMBEDDED_CATEGORIES)
            if isinstance(categories, int) and not isinstance(categories, bool):
                data.setdefault("hash_buckets", categories + 1)
        return data

    @model_validator(mode="after")
    def _check(self) -> "CtrConfig":
        if self.dataset == "criteo" and not self.data_dir:
            raise ValueError(
                f"workload.data_dir is required for workload.dataset='criteo': the folder that holds "
                f"{CRITEO_LAYOUT} (nothing is downloaded)"
            )
        if self.dataset == "embedded":
            if self.data_dir is not None:
                raise ValueError(
                    "workload.data_dir is set but workload.dataset is 'embedded', which generates its data; "
                    "set workload.dataset to 'criteo' to read files from data_dir"
                )
            if self.hash_buckets < self.categories + 1:
                raise ValueError(
                    f"workload.hash_buckets={self.hash_buckets} is too small for the embedded data: it needs "
                    f"workload.categories + 1 = {self.categories + 1} (bucket 0 is the missing value), so that "
                    "no two categories share a bucket and the Bayes log loss stays exact"
                )
        return self

    @property
    def num_classes(self) -> int:
        """Two logits (no click, click), so softmax-based distillation and smoothing apply unchanged."""
        return 2


def data_needs(w: CtrConfig, root: Path) -> DataNeeds:
    return DataNeeds([], [root / f for f in (w.train_file, w.val_file) if f], CRITEO_LAYOUT)


register("ctr", CtrConfig, "codist.workloads.ctr:CtrWorkload",
         metrics={"val_log_loss": False, "val_loss": False, "val_accuracy": True, "val_pred_ctr": None,
                  "val_ctr": None, "val_bayes_gap": False},
         data_needs=data_needs, data_check="codist.datacheck:check_criteo",
         throughput_model=lambda w: "ctr_mlp")
