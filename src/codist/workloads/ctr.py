"""The `ctr` workload: Anil et al. 2018's Criteo click-through-rate DNN (Table 1: log loss, churn).

Data
----
`dataset: criteo` reads the Criteo Display Advertising Challenge TSV files (`read_criteo`):
each line is `label \\t I1..I13 \\t C1..C26`, 40 fields; the 13 integer features become
log(1 + max(x, 0)) (missing: 0), the standard Criteo preprocessing; each of the 26
categorical strings is hashed with CRC-32 (stable across processes and platforms, unlike
Python's salted `hash()`) into buckets 1..hash_buckets-1 of its own table (missing: the
reserved bucket 0). Without `val_file`, the last `val_fraction` of the lines are held out.
Nothing is downloaded. A run parses each file once into `workload.cache_dir` (`cached_criteo`:
numpy files that every rank and later run memory-maps, from a node-local copy in a SLURM job),
reporting its progress to the heartbeat.

`dataset: embedded` (the default) generates a CTR task from a *known* logistic model
(`ctr_embedded.generate_embedded`), so the Bayes-optimal log loss of the validation set is known
exactly and every evaluation reports the gap to it (`val_bayes_gap`). `SOURCES` maps the dataset
to its source (`CriteoFiles` or `ctr_embedded.EmbeddedCtrSource`), which serve one interface.

How a sample is represented
---------------------------
The training loop unpacks every batch as `(inputs, targets)`, `BatchStream` indexes the
tensors of a `TensorDataset`, and `to_device` moves the inputs. So each sample's inputs
are ONE float32 row of 39 values: the 13 transformed integer features, then the 26 bucket
ids stored as floats (exact, since `hash_buckets <= 2**24`, see `ctr_config`); the model
splits the row (`CtrDNN.forward`). The datasets are `TensorDataset(inputs (N, 39) float32,
labels (N,) int64)`, and every algorithm (sharding, teachers, ensembles) works unchanged.

Model and loss
--------------
`CtrDNN`: one embedding table per categorical feature (held as one big table with per-feature
offsets, so a batch is a single gather), concatenated with the dense features, an MLP with
ReLU (`hidden`; Anil et al.: 2560-1024-256) and TWO output logits (no click, click). Two
logits instead of Anil's single logistic output make the library's softmax-based
distillation, ensembles and label smoothing apply unchanged; cross-entropy on two logits is
exactly the logistic loss of their difference. p(click) = softmax(logits)[:, 1].

Metric: `val_log_loss` (lower is better; `val_loss` carries the same number for the plots).
Churn (Anil et al. Table 1): `prediction_churn`, the mean absolute difference of p(click)
between two models over the validation set.

Embedded scale: optimizer and what it reaches
---------------------------------------------
Anil et al. train with Adagrad, lr 0.001; here that is far too slow for a run of a minute
(validation log loss 0.476 after 6.5 epochs, still falling). The recommended embedded
optimizer is Adagrad, lr 0.03, weight_decay 0 (set `optimizer:` in the run config; the
library's default, SGD lr 0.1 momentum 0.9 weight_decay 5e-4, is unstable on this task: its
validation log loss swings between 0.47 and 0.50). Measured at the
defaults (100,000 training samples, MLP 64-32, 8-wide embeddings of 101 buckets per
feature, 37k parameters), one thread, batch 64, on a shared 2-core machine (~17k samples/s):
base-rate log loss 0.569, Bayes 0.418; validation log loss 0.454 after 2 epochs (~12 s),
best 0.448 around epoch 5-6 (~35 s), then the model overfits (0.488 by epoch 16). A
logistic regression (`hidden: []`) levels off near 0.454 at this data size: the MLP's
advantage comes from the interactions of the true model, which need data to learn.
"""
from __future__ import annotations

import hashlib
import math
import os
import zlib
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import Dataset, TensorDataset

from ..runlog import file_lock
from ..runtime import heartbeat
from ..runtime.data import eval_batches
from .base import Metric, Workload
from .ctr_config import CATEGORICAL_FEATURES, CRITEO_LAYOUT, DENSE_FEATURES, CtrConfig
from .ctr_embedded import EmbeddedCtrSource, generate_embedded  # noqa: F401 (generate_embedded: ctr.X callers)
from .prepared import cache_folder, node_scratch, staged

FIELDS = 1 + DENSE_FEATURES + CATEGORICAL_FEATURES      # 40 fields per Criteo line
INPUT_WIDTH = DENSE_FEATURES + CATEGORICAL_FEATURES     # 39 values per packed input row
LINE_FORMAT = ("label (0 or 1), I1..I13 (integers, may be empty), C1..C26 (categorical strings, may be empty): "
               f"{FIELDS} tab-separated fields")

# Anil et al. 2018, Table 1: the single DNN's log loss on Criteo. Their split is not given, so
# this is a reference point for `dataset: criteo`, not a like-for-like target. (AlgoPerf's
# Criteo 1TB target 0.123735 is for a different data set and split and does not apply.)
ANIL_DNN_LOG_LOSS = 0.4480

CRITEO_CACHE_VERSION = 1   # bump when what _parse_criteo makes of a line changes: old caches are not read


# --------------------------------------------------------------------------- Criteo TSV (and the data sources)


INT64_LIMIT = 1 << 63   # Criteo's integer features are counts; a larger one is a damaged line


class CriteoFormatError(ValueError):
    """A Criteo file that cannot be read; the message names the file, the line and the expected format."""


def dense_value(raw: int) -> float:
    """The standard Criteo transform of an integer feature: log(1 + max(x, 0)).

    Counts are heavy-tailed (up to millions); the log keeps them on the scale of the embeddings.
    A few features have small negative values (e.g. -1 in I2), clipped to 0.
    """
    return math.log1p(max(raw, 0))


def category_bucket(value: bytes, hash_buckets: int) -> int:
    """Bucket of a categorical value: 0 if empty (missing), else 1 + crc32(value) mod (hash_buckets - 1).

    CRC-32 is a fixed function of the bytes, so every rank, process and machine maps a
    string to the same bucket (Python's `hash()` of str is salted per process).
    """
    if not value:
        return 0
    return 1 + zlib.crc32(value) % (hash_buckets - 1)


def _count_lines(path: Path) -> int:
    """Number of lines of `path` (a final line without a newline counts), read in 16 MiB blocks."""
    n, last = 0, b"\n"
    with path.open("rb") as f:
        while block := f.read(1 << 24):
            n += block.count(b"\n")
            last = block[-1:]
            heartbeat.progress()
    return n + (last != b"\n")


def _criteo_lines(path: Path, max_lines: int | None) -> int:
    """Lines to read from `path` (all, or the first max_lines); a missing or empty file is an error."""
    if not path.is_file():
        raise FileNotFoundError(f"Criteo file {str(path)!r} does not exist; expected {CRITEO_LAYOUT}")
    n = _count_lines(path)
    if max_lines is not None:
        n = min(n, max_lines)
    if n == 0:
        raise CriteoFormatError(f"{path}: the file is empty; expected lines of {LINE_FORMAT}")
    return n


def read_criteo(path: str | Path, hash_buckets: int, max_lines: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs (N, 39) float32, labels (N,) int64) from a Criteo TSV file; see the module docstring.

    Reads the first `max_lines` lines (all if None). The arrays are allocated once after a
    counting pass, so the full 45M-line train.txt needs about 7 GB, not a list per line.
    Raises FileNotFoundError for a missing file and CriteoFormatError, naming the file and the
    1-based line number, for a line with the wrong number of fields, a label other than 0/1,
    or an integer feature that is not an integer. A run reads through `cached_criteo` instead.
    """
    path = Path(path)
    n = _criteo_lines(path, max_lines)
    inputs = np.empty((n, INPUT_WIDTH), dtype=np.float32)
    labels = np.empty(n, dtype=np.int64)
    _parse_criteo(path, hash_buckets, inputs, labels)
    return torch.from_numpy(inputs), torch.from_numpy(labels)


def _parse_criteo(path: Path, hash_buckets: int, inputs: np.ndarray, labels: np.ndarray) -> None:
    """Fill `inputs` and `labels` (len(labels) rows) from the first lines of `path` (read_criteo's rules).
    Each chunk of lines is reported to the rank's heartbeat (about a second of parsing each)."""
    n = len(labels)
    chunk_rows: list[list[float]] = []
    chunk_labels: list[int] = []
    chunk = 1 << 16      # rows converted to numpy at once: fast, without holding all rows as lists
    filled = 0
    m = hash_buckets - 1
    log1p, crc32 = math.log1p, zlib.crc32
    with path.open("rb") as f:
        for lineno, line in enumerate(f, start=1):
            if lineno > n:
                break
            fields = line.rstrip(b"\r\n").split(b"\t")
            if len(fields) != FIELDS:
                raise CriteoFormatError(f"{path}:{lineno}: expected {LINE_FORMAT}; got {len(fields)} field(s)")
            label = fields[0]
            if label not in (b"0", b"1"):
                raise CriteoFormatError(f"{path}:{lineno}: the label (field 1) must be 0 or 1, got "
                                        f"{label.decode(errors='replace')!r}; expected {LINE_FORMAT}")
            row = []
            for j in range(1, 1 + DENSE_FEATURES):
                s = fields[j]
                if s:
                    try:
                        v = int(s)
                    except ValueError:
                        raise CriteoFormatError(
                            f"{path}:{lineno}: integer feature I{j} (field {j + 1}) is "
                            f"{s.decode(errors='replace')!r}, not an integer; expected {LINE_FORMAT}") from None
                    if v >= INT64_LIMIT:   # log1p would raise OverflowError naming nothing
                        raise CriteoFormatError(f"{path}:{lineno}: integer feature I{j} (field {j + 1}) has {len(s)} "
                                                f"digits, beyond a 64-bit integer; expected {LINE_FORMAT}")
                    row.append(log1p(v) if v > 0 else 0.0)
                else:
                    row.append(0.0)
            for s in fields[1 + DENSE_FEATURES:]:
                row.append(1 + crc32(s) % m if s else 0)
            chunk_rows.append(row)
            chunk_labels.append(label == b"1")
            if len(chunk_rows) == chunk:
                inputs[filled:filled + chunk] = chunk_rows
                labels[filled:filled + chunk] = chunk_labels
                filled += chunk
                chunk_rows, chunk_labels = [], []
                heartbeat.progress()
    if chunk_rows:
        k = len(chunk_rows)
        inputs[filled:filled + k] = chunk_rows
        labels[filled:filled + k] = chunk_labels
        filled += k
    if filled != n:  # the file changed between the counting pass and the parse
        raise CriteoFormatError(f"{path}: counted {n} lines but read {filled}; was the file modified while reading?")


def cached_criteo(path: str | Path, hash_buckets: int, max_lines: int | None, cache_dir: Path,
                  scratch: Path | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """read_criteo's tensors, parsed once into `cache_dir` (two .npy files named by a hash of the
    file's name, size and modification time, hash_buckets, max_lines and CRITEO_CACHE_VERSION) and
    memory-mapped by every rank and later run: parsing is ~16 us a line in Python (12 minutes or
    more for the 45.8M lines of train.txt), and mapped pages are shared by the ranks of a node
    instead of each holding 7 GB. Ranks that start together take turns through a lock file; the
    first parses straight into the cache file, the others wait for it (the parsing rank's
    heartbeat keeps the run alive). With node-local `scratch` (`prepared.node_scratch`: a SLURM job's
    $SLURM_TMPDIR, say) the two files are copied there once per node and the copies are mapped
    (`prepared.staged`): a cluster's cache folder is often on a shared file system, whose every page
    fault would cross the network. Copy-on-write maps: the tensors are writable, the file is never
    written."""
    path = Path(path)
    if not path.is_file():
        _criteo_lines(path, max_lines)   # raises, naming the file
    st = path.stat()
    key = hashlib.sha256(f"{path.name}|{st.st_size}|{st.st_mtime_ns}|{hash_buckets}|{max_lines}|"
                         f"{CRITEO_CACHE_VERSION}".encode()).hexdigest()[:16]
    x_path, y_path = cache_dir / f"criteo-{key}.inputs.npy", cache_dir / f"criteo-{key}.labels.npy"
    with file_lock(cache_dir / f"criteo-{key}.lock"):
        if not y_path.is_file():   # the labels are renamed into place last: both are complete
            n = _criteo_lines(path, max_lines)
            tmp = [p.with_name(f".{p.name}.{os.getpid()}.tmp") for p in (x_path, y_path)]
            try:
                x = np.lib.format.open_memmap(tmp[0], "w+", np.float32, (n, INPUT_WIDTH))
                y = np.lib.format.open_memmap(tmp[1], "w+", np.int64, (n,))
                _parse_criteo(path, hash_buckets, x, y)
                x.flush(), y.flush()
                del x, y
                os.replace(tmp[0], x_path)
                os.replace(tmp[1], y_path)
            finally:
                for p in tmp:
                    p.unlink(missing_ok=True)
    x_path, y_path = staged([x_path, y_path], scratch)
    try:
        x, y = np.load(x_path, mmap_mode="c"), np.load(y_path, mmap_mode="c")
    except (OSError, ValueError) as e:
        raise ValueError(f"{x_path}: unreadable Criteo cache ({type(e).__name__}: {e}); delete it to rebuild") from None
    if x.shape != (len(y), INPUT_WIDTH) or x.dtype != np.float32 or y.dtype != np.int64:
        raise ValueError(f"{x_path}: a Criteo cache of shape {x.shape} {x.dtype} with {len(y)} {y.dtype} labels, "
                         f"expected ({len(y)}, {INPUT_WIDTH}) float32 and int64; delete both files to rebuild")
    return torch.from_numpy(x), torch.from_numpy(y)


def criteo_splits(cfg: CtrConfig) -> tuple[TensorDataset, TensorDataset]:
    """Training and validation sets of `dataset: criteo` (see `CtrConfig` for the hold-out rule)."""
    root = Path(cfg.data_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"Criteo data_dir {str(root)!r} does not exist; expected {CRITEO_LAYOUT}")
    cache = cache_folder(cfg.cache_dir, cfg.data_dir, "Criteo")

    def read(name: str, max_lines: int | None):
        if cache is None:
            return read_criteo(root / name, cfg.hash_buckets, max_lines)
        return cached_criteo(root / name, cfg.hash_buckets, max_lines, cache, node_scratch())
    x, y = read(cfg.train_file, cfg.max_lines)
    if cfg.val_file is not None:
        vx, vy = read(cfg.val_file, None)
        return TensorDataset(x, y), TensorDataset(vx, vy)
    n = len(y)
    if n < 2:
        raise CriteoFormatError(f"{root / cfg.train_file}: {n} line(s); holding out a validation set "
                                f"(workload.val_fraction) needs at least 2, or set workload.val_file")
    n_val = min(max(1, round(n * cfg.val_fraction)), n - 1)   # both splits non-empty
    return TensorDataset(x[:n - n_val], y[:n - n_val]), TensorDataset(x[n - n_val:], y[n - n_val:])


class CriteoFiles:
    """The data source of `dataset: criteo`: the TSV files under `data_dir`, read on first use;
    splits(), target(), bayes_log_loss, eval_extras() and facts() as `ctr_embedded.EmbeddedCtrSource`'s."""

    bayes_log_loss = None   # real clicks: their optimum is unknown

    def __init__(self, cfg: CtrConfig):
        self.cfg = cfg
        self._splits: tuple[TensorDataset, TensorDataset] | None = None

    def splits(self) -> tuple[TensorDataset, TensorDataset]:
        if self._splits is None:
            self._splits = criteo_splits(self.cfg)
        return self._splits

    def target(self) -> float:
        return ANIL_DNN_LOG_LOSS

    def eval_extras(self, log_loss: float) -> dict[str, float]:
        return {}

    def facts(self) -> dict:
        return {}


#: `workload.dataset` -> the data source: splits(), target(), bayes_log_loss, eval_extras(), facts()
SOURCES = {"embedded": EmbeddedCtrSource, "criteo": CriteoFiles}


def bayes_log_loss(cfg: CtrConfig) -> float:
    """The Bayes-optimal log loss of the embedded validation set of `cfg` (see `ctr_embedded.EmbeddedCtr`)."""
    bayes = SOURCES[cfg.dataset](cfg).bayes_log_loss
    if bayes is None:
        raise ValueError(f"the Bayes log loss is known for workload.dataset='embedded' only, not {cfg.dataset!r}")
    return bayes


# --------------------------------------------------------------------------- model


class CtrDNN(nn.Module):
    """Embeddings of the 26 categorical features + the 13 dense features -> ReLU MLP -> 2 logits.

    Input: the packed (N, 39) float rows described in the module docstring. The 26 tables
    are one `nn.Embedding` of 26 * hash_buckets rows; feature f's ids are offset by
    f * hash_buckets (a non-persistent buffer, so state dicts hold only the weights).
    Embeddings start at N(0, 0.1^2) rather than PyTorch's N(0, 1): with 26 of them the
    first layer's input would otherwise be dominated by random embedding noise at the start.
    """

    def __init__(self, hidden: list[int], embedding_dim: int, hash_buckets: int):
        super().__init__()
        self.hash_buckets = hash_buckets
        self.embedding = nn.Embedding(CATEGORICAL_FEATURES * hash_buckets, embedding_dim)
        nn.init.normal_(self.embedding.weight, std=0.1)
        self.register_buffer("offsets", torch.arange(CATEGORICAL_FEATURES) * hash_buckets, persistent=False)
        layers: list[nn.Module] = []
        width = DENSE_FEATURES + CATEGORICAL_FEATURES * embedding_dim
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        layers.append(nn.Linear(width, 2))
        self.mlp = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dense = x[:, :DENSE_FEATURES]
        ids = x[:, DENSE_FEATURES:].long() + self.offsets
        return self.mlp(torch.cat([dense, self.embedding(ids).flatten(1)], dim=1))


def build_ctr_model(cfg: CtrConfig) -> CtrDNN:
    return CtrDNN(list(cfg.hidden), cfg.embedding_dim, cfg.hash_buckets)


# --------------------------------------------------------------------------- churn


@torch.no_grad()
def click_probabilities(model: nn.Module, dataset: Dataset, batch: int = 4096) -> torch.Tensor:
    """p(click) = softmax(logits)[:, 1] of `model` on every sample of `dataset`, in order (float64, CPU)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    out = []
    try:
        for x, _ in eval_batches(dataset, 1, 0, batch):
            out.append(torch.softmax(model(x.to(device)).double(), dim=1)[:, 1].cpu())
    finally:
        model.train(was_training)
    return torch.cat(out)


def prediction_churn(model_a: nn.Module, model_b: nn.Module, dataset: Dataset, batch: int = 4096) -> float:
    """Anil et al. 2018's prediction churn: mean over `dataset` of |p_a(click) - p_b(click)|.

    In Table 1 the two models are two retrains of the same configuration (different seeds);
    pass the validation set. 0 for identical models; at most 1.
    """
    return float((click_probabilities(model_a, dataset, batch) - click_probabilities(model_b, dataset, batch))
                 .abs().mean())


def load_model(workload: "CtrWorkload", path: str | Path) -> CtrDNN:
    """A model of `workload`'s architecture with the weights of a saved state dict (a run's model_<name>.pt)."""
    model = workload.build_model()
    model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    return model


# --------------------------------------------------------------------------- workload

class CtrWorkload(Workload):
    """Anil et al.'s Criteo DNN on Criteo TSV files or the embedded CTR task.

    The data come from `SOURCES[cfg.dataset]` (the embedded task is generated when the workload
    is built, and cached per process; Criteo files are read on first use). `seed` is the run
    seed: the data never depend on it. `metric` is set per instance, since its target depends
    on the data set.
    """
    whole_set_metrics = ("val_bayes_gap",)

    metric = Metric("val_log_loss", higher_is_better=False)
    num_classes = 2

    def __init__(self, cfg: CtrConfig, seed: int):
        self.cfg = cfg
        self.seed = seed
        self.data = SOURCES[cfg.dataset](cfg)   # the embedded generator or the Criteo files
        self.metric = Metric("val_log_loss", higher_is_better=False, target=round(self.data.target(), 4))

    @property
    def bayes_log_loss(self) -> float | None:
        """The validation set's Bayes-optimal log loss (embedded), None for real data."""
        return self.data.bayes_log_loss

    def build_model(self) -> nn.Module:
        return build_ctr_model(self.cfg)

    def train_dataset(self) -> Dataset:
        return self.data.splits()[0]

    def val_dataset(self) -> Dataset:
        """Embedded: the generated validation split; criteo: val_file or the held-out last lines."""
        return self.data.splits()[1]

    def val_predictions(self, model: nn.Module) -> torch.Tensor:
        """p(click) of every validation sample, in order: what prediction churn compares."""
        return click_probabilities(model, self.val_dataset())

    def eval_sums(self, outputs: torch.Tensor, targets: torch.Tensor) -> dict[str, float]:
        """Summed log loss, correct predictions, predicted and observed clicks of one batch."""
        logp = F.log_softmax(outputs.double(), dim=1)
        return {
            "loss_sum": float(F.nll_loss(logp, targets, reduction="sum")),
            "correct": float((outputs.argmax(dim=1) == targets).sum()),
            "p_sum": float(logp[:, 1].exp().sum()),
            "label_sum": float(targets.sum()),
            "count": float(targets.numel()),
        }

    def finalize_eval(self, sums: dict[str, float]) -> dict[str, float]:
        """val_log_loss (= val_loss), val_accuracy, mean predicted and observed click rate and,
        for embedded data, val_bayes_gap = val_log_loss - the Bayes-optimal log loss."""
        n = sums["count"]
        log_loss = sums["loss_sum"] / n
        return {"val_log_loss": log_loss, "val_loss": log_loss, "val_accuracy": sums["correct"] / n,
                "val_pred_ctr": sums["p_sum"] / n, "val_ctr": sums["label_sum"] / n,
                **self.data.eval_extras(log_loss)}

    def describe(self) -> dict:
        facts = super().describe()
        facts.update(dataset=self.cfg.dataset, hidden=list(self.cfg.hidden), embedding_dim=self.cfg.embedding_dim,
                     hash_buckets=self.cfg.hash_buckets, num_classes=2,
                     train_ctr=float(self.train_dataset().tensors[1].double().mean()), **self.data.facts())
        return facts
