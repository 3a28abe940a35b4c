"""Where a run's data lives: a relative `workload.data_dir` joined to the data root.

The full-scale configs name their data sets relative (`data_dir: imagenet`), so the run id
(which hashes `workload.data_dir`) is the same on every site; the root that makes the path
real is `launch.data_root`, which is not part of the run id. `codist run --data-root DIR`,
`snakemake --config data_root=DIR` and the environment variable CODIST_DATA_ROOT set it.

There is no default root: a guessed one (the working directory, `/datasets`) would read
whatever copy happens to lie there, under a run id that does not show which; one line
naming the missing setting costs less. An absolute `data_dir` needs no root and is used as is.

Everything that reads a run's data asks `workload_with_data(cfg)` (the ranks' workload, the
input checks, `codist data check --config`), so the joining happens here only.
"""
from __future__ import annotations

import os
from pathlib import Path

from .config import ConfigError, RunConfig

#: the environment variable that gives the data root when the config and command line do not
ENV = "CODIST_DATA_ROOT"


def data_root(cfg: RunConfig) -> str | None:
    """The root a relative data_dir is joined to: launch.data_root, else $CODIST_DATA_ROOT."""
    return cfg.launch.data_root or os.environ.get(ENV) or None


def needs_root(cfg: RunConfig) -> bool:
    """Whether the run reads a data folder given relative to the data root."""
    data_dir = getattr(cfg.workload, "data_dir", None)
    return data_dir is not None and not Path(data_dir).is_absolute()


def _absolute(path: str | os.PathLike) -> str:
    return os.path.abspath(os.path.expanduser(str(path)))


def with_data_root(cfg: RunConfig, root: str | os.PathLike | None) -> RunConfig:
    """`cfg` with launch.data_root = `root` made absolute (against the working directory now),
    so the ranks, started elsewhere or later, read the same folder. None: $CODIST_DATA_ROOT or
    the config's own value, made absolute likewise. The run id does not change."""
    root = root or data_root(cfg)
    if not root:
        return cfg
    return cfg.model_copy(update={"launch": cfg.launch.model_copy(update={"data_root": _absolute(root)})})


def workload_with_data(cfg: RunConfig):
    """The run's workload section with a relative data_dir joined to the data root (an absolute
    one unchanged). Raises ConfigError, one line, when a relative data_dir has no root."""
    w = cfg.workload
    if not needs_root(cfg):
        return w
    root = data_root(cfg)
    if not root:
        raise ConfigError(f"workload.data_dir={w.data_dir!r} is relative to a data root, and none was given: "
                          f"expected --data-root DIR (codist run / check / data check), --config data_root=DIR "
                          f"(snakemake), launch.data_root or ${ENV}")
    return w.model_copy(update={"data_dir": os.path.join(_absolute(root), w.data_dir)})
