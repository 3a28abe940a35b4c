"""Workloads, by `workload.name`.

Importing this package is cheap (pydantic only): the run-config schema needs the config
classes, and Snakemake parses configs often. The workload classes (torch, data, models) are
imported when a workload is built.
"""
from __future__ import annotations

import importlib
from typing import Annotated, Union

from pydantic import Field

from .cifar_config import CifarConfig
from .imagenet_config import ImagenetConfig
from .ctr_config import CtrConfig
from .lm_config import LmConfig
from .translation_config import TranslationConfig

# name -> (config class, "module:WorkloadClass"); the class takes (config, seed).
REGISTRY = {
    "cifar": (CifarConfig, "cifar:CifarWorkload"),
    "imagenet": (ImagenetConfig, "imagenet:ImagenetWorkload"),
    "lm": (LmConfig, "lm:LmWorkload"),
    "ctr": (CtrConfig, "ctr:CtrWorkload"),
    "translation": (TranslationConfig, "translation:TranslationWorkload"),
}

# The `workload:` section of a run config: a discriminated union on `name`.
WorkloadConfig = Annotated[Union[tuple(cfg for cfg, _ in REGISTRY.values())], Field(discriminator="name")]

# Bump a workload's version when its generated data or its model definition changes, so that
# run ids (and hence Snakemake targets) change with it.
DATA_VERSIONS = {"cifar": 1, "imagenet": 1, "lm": 1, "ctr": 1, "translation": 1}


def data_version(name: str) -> int:
    return DATA_VERSIONS[name]


def workload_class(name: str):
    module, cls = REGISTRY[name][1].split(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)


def build_workload(cfg, seed: int):
    """The workload object (a `base.Workload`) for a validated `workload:` config section."""
    return workload_class(cfg.name)(cfg, seed)


__all__ = ["WorkloadConfig", "REGISTRY", "build_workload", "workload_class", "data_version"]
