"""Workload registry: config schema and builder for each workload, keyed by `name`."""
from __future__ import annotations

from .base import Metric, Workload
from typing import Annotated, Union

from pydantic import Field

from .cifar import CifarConfig, CifarWorkload
from .imagenet import ImagenetWorkload
from .imagenet_config import ImagenetConfig

# name -> (pydantic config class, workload class); the class takes (config, seed).
REGISTRY = {
    "cifar": (CifarConfig, CifarWorkload),
    "imagenet": (ImagenetConfig, ImagenetWorkload),
}

# The `workload:` section of a run config: a discriminated union on `name`.
WorkloadConfig = Annotated[Union[CifarConfig, ImagenetConfig], Field(discriminator="name")]


# Bump a workload's version when its generated data or its model definition changes, so that
# run ids (and hence Snakemake targets) change with it.
DATA_VERSIONS = {"cifar": 1, "imagenet": 1}


def data_version(name: str) -> int:
    return DATA_VERSIONS[name]


def build_workload(cfg, seed: int) -> Workload:
    """The workload object for a validated `workload:` config section."""
    _, cls = REGISTRY[cfg.name]
    return cls(cfg, seed)


__all__ = ["Metric", "Workload", "WorkloadConfig", "REGISTRY", "build_workload", "data_version"]
