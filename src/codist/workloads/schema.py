"""What every section of the run-config schema shares, and the registry of a kind of section
(pydantic only: no torch)."""
from __future__ import annotations

import importlib
import os
import pkgutil
from typing import Annotated, Any, Callable, ClassVar, Union

from pydantic import BaseModel, ConfigDict, Field

# extra="forbid": an unknown (e.g. misspelt) key is an error, not silently ignored.
# allow_inf_nan=False: .inf and .nan are refused for every float (lr = .inf trained on NaN loss
# and "finished" normally). Counts are typed pydantic.StrictInt, so `steps: true` or `steps: 2.0`
# is refused instead of read as 1 or 2.
SECTION_CONFIG = ConfigDict(extra="forbid", allow_inf_nan=False)


class WorkloadSection(BaseModel):
    """Base of every `workload:` config class. Its class variables are the workload's
    capabilities, which generic code (engine, launchers) asks instead of the workload's name;
    they are not fields, so they are not part of the run id."""
    model_config = SECTION_CONFIG

    #: the ranks import fairseq (models, data); otherwise DeepSpeed's fairseq import is hidden
    needs_fairseq: ClassVar[bool] = False
    #: the model is convolutional: on a GPU it is kept in channels_last (NHWC), which cuDNN's
    #: convolutions run fastest in, especially under bf16/fp16 (codist.runtime.cuda_defaults)
    convnet: ClassVar[bool] = False


def load_plugins() -> None:
    """Import the modules named in `CODIST_PLUGINS` (comma-separated): their registrations
    (algorithms, workloads) join the built-ins'."""
    for module in filter(None, (m.strip() for m in os.environ.get("CODIST_PLUGINS", "").split(","))):
        importlib.import_module(module)


class SectionRegistry:
    """The registrations of one kind of config section by its `name` (the algorithms, the
    workloads): `register` checks the config class and stores `make(name, config, target,
    **capabilities)`; the built-ins are the package's `*_config` modules, imported on first use;
    a registration after that first use calls the `on_change` listeners (codist.config rebuilds
    its schema)."""

    def __init__(self, kind: str, base: type[BaseModel], package: str, make: Callable[..., Any]):
        self.kind, self.base, self.package, self.make = kind, base, package, make
        self._specs: dict[str, Any] = {}
        self._listeners: list[Callable[[], None]] = []
        self._loaded = False

    def register(self, name: str, config: type[BaseModel], target, **capabilities):
        if not issubclass(config, self.base) or config.model_fields.get("name") is None \
                or config.model_fields["name"].default != name:
            raise ValueError(f"{self.kind} {name!r}: its config class must subclass {self.base.__name__} and have "
                             f"name: Literal[{name!r}] = {name!r}")
        if name in self._specs and self._specs[name].config is not config:
            raise ValueError(f"{self.kind} {name!r} is registered twice ({self._specs[name].config.__module__} "
                             f"and {config.__module__})")
        spec = self._specs[name] = self.make(name, config, target, **capabilities)
        if self._loaded:
            for listener in self._listeners:
                listener()
        return spec

    def load(self) -> None:
        """Import the package's built-in `*_config` modules (once)."""
        if self._loaded:
            return
        path = importlib.import_module(self.package).__path__
        for name in sorted(m.name for m in pkgutil.iter_modules(path) if m.name.endswith("_config")):
            importlib.import_module(f"{self.package}.{name}")
        self._loaded = True

    def specs(self) -> dict[str, Any]:
        self.load()
        return dict(self._specs)

    def config_union(self):
        """The section's type: a union of every registered config class, tagged by `name`."""
        return Annotated[Union[tuple(s.config for s in self.specs().values())], Field(discriminator="name")]

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call `listener` after each registration that follows the first use of the registry."""
        self._listeners.append(listener)
