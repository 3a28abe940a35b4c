"""The algorithm interface: a small strategy over the one training loop in `codist.rank.train`.

Every algorithm trains one model per data-parallel group; what differs is the loss, what
happens around each update, and which models are evaluated. Subclasses override the hooks
`before_step`, `loss`, `after_step` and `extra_eval_models`, and, to update through torch DDP
with a comm hook of its own instead of a DeepSpeed engine, `build_update` (see `updates`; any
algorithm's model group of several ranks reduces through DDP with `parallel.grad_reduction: ddp`).
An algorithm is registered with its config class and capabilities in `registry`.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from ..config import RunConfig
from ..runtime.comm import CommMeter
from ..runtime.cuda_defaults import maybe_compile, place_model
from ..runtime.data import to_device
from ..runtime.distributed import Topology
from ..runtime.precision import autocast
from ..workloads.base import Workload
from .registry import spec
from .state import norm_statistics
from .updates import DDPUpdate, EngineUpdate, LocalUpdate, OverlapUpdate


def _with_extra_state(model: nn.Module):
    """(path, module) of the model's modules that keep extra state (`get_extra_state` overridden)."""
    return [(path, m) for path, m in model.named_modules() if type(m).get_extra_state is not nn.Module.get_extra_state]


@dataclass
class TrainContext:
    cfg: RunConfig
    topo: Topology
    meter: CommMeter
    workload: Workload
    device: torch.device
    out: Path | None = None   # the run's directory (algorithms that read other runs' files)


class Algorithm:
    #: models that start from one shared initialisation (MA-DNN, EC-DNN) instead of independent ones
    shared_init = False

    def __init__(self, ctx: TrainContext):
        self.ctx = ctx
        self.cfg, self.topo, self.meter, self.workload = ctx.cfg, ctx.topo, ctx.meter, ctx.workload

    # ------------------------------------------------------------ set-up
    def new_model(self) -> nn.Module:
        return place_model(self.workload.build_model(), self.ctx.device, self.cfg.workload.convnet)

    def setup(self) -> None:
        torch.manual_seed(self.model_seed())
        model = maybe_compile(self.new_model(), self.cfg.train.compile)
        with self.meter.category("setup"):
            self.update = self.build_update(model)
        self.model, self.optimizer, self.scheduler = self.update.model, self.update.optimizer, self.update.scheduler

    def build_update(self, model: nn.Module):
        """The update mechanics (`updates`): a DeepSpeed engine over this model's group, or torch DDP
        overlapping its all-reduces with backward (`parallel.grad_reduction: ddp`); a group of one
        rank, with nothing to all-reduce, steps its optimizer itself (same numbers, no engine)."""
        if self.topo.ranks_per_model == 1:
            return LocalUpdate(self.cfg, model)
        if self.cfg.parallel.grad_reduction == "ddp":
            return OverlapUpdate(self.cfg, self.topo, model)
        return EngineUpdate(self.cfg, self.topo, model)

    def model_seed(self) -> int:
        """Seed of this rank's model initialisation; ranks of one model share it."""
        own = 0 if self.shared_init else self.topo.model_index
        return self.cfg.seed * 1009 + own

    @torch.no_grad()
    def initial_parameters(self) -> list[torch.Tensor]:
        """This rank's model's parameters at initialisation, rebuilt from its seed (so a resumed run
        has them too), kept on the CPU; the global RNG is left as it was."""
        rng = torch.random.get_rng_state()
        torch.manual_seed(self.model_seed())
        params = [p.detach().cpu().clone() for p in self.new_model().parameters()]
        torch.random.set_rng_state(rng)
        return params

    def train_stream(self):
        """This rank's batches: its model's data (`model_data()`), its slice."""
        t, c = self.topo, self.cfg
        return self.workload.train_stream(c.algorithm.model_data(), t.model_index, t.models,
                                          c.train.batch_per_rank, t.ranks_per_model, t.dp_rank, c.seed)

    def forward(self, model, inputs) -> torch.Tensor:
        """Logits at the run's precision (teachers too, not only the engine, whose own forward is
        under autocast already), returned in fp32 so that every loss term is computed in fp32
        (`.float()` returns an fp32 tensor itself: fp32 runs are unchanged)."""
        with autocast(self.cfg.train.precision, self.ctx.device):
            return self.workload.forward(model, inputs).float()

    # ------------------------------------------------------------ one update
    def before_step(self, step: int, x: torch.Tensor, y: torch.Tensor) -> None:
        """Runs before the forward pass of update `step` (0-based)."""

    def loss(self, step: int, x: torch.Tensor, y: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        return self.workload.loss(logits, y)

    def objective(self, task: torch.Tensor, extra: torch.Tensor | None = None, w_task: float = 1.0,
                  w_extra: float = 0.0) -> torch.Tensor:
        """w_task x task + w_extra x extra, remembering the task loss and the extra (distillation,
        compression or smoothing) term apart: `train_loss` logs the task loss only, so that a
        distillation term switched on at burn-in never shows up as a jump in the training loss."""
        self.last_task = task.detach()
        self.last_extra = None if extra is None else extra.detach()
        return task * w_task if extra is None else w_task * task + w_extra * extra

    def split_losses(self, total: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(task loss, extra term) of the update just taken, detached 0-d tensors on the device (read
        on the host once per logging interval, not per update); a plain loss is all task."""
        task, extra = getattr(self, "last_task", None), getattr(self, "last_extra", None)
        self.last_task = self.last_extra = None
        return (total.detach() if task is None else task), extra

    def after_step(self, step: int) -> None:
        """Runs after update `step` has been applied."""

    @torch.no_grad()
    def sync_norm_statistics(self, category: str) -> None:
        """Average the BatchNorm running statistics over this model's group (counters kept). The
        engine all-reduces gradients, not buffers, so each rank's statistics follow its own batches
        and drift apart; before the model's state leaves the group (an exchange, a saved model) the
        group agrees on the mean (`parallel.grad_reduction: ddp` too). The DDP baselines' DDP broadcasts
        its first rank's buffers before every forward itself; a group of one rank has nothing to agree on."""
        if self.topo.ranks_per_model == 1 or getattr(self.update, "broadcasts_buffers", False):
            return
        stats = norm_statistics(self.model)
        if stats:
            flat = torch.cat([t.reshape(-1) for t in stats])
            self.meter.all_reduce(flat, group=self.topo.dp_group, category=category)
            flat.div_(self.topo.ranks_per_model)
            offset = 0
            for t in stats:
                t.copy_(flat[offset:offset + t.numel()].view_as(t))
                offset += t.numel()

    def train_step(self, step: int, batch) -> torch.Tensor:
        x, y = to_device(batch, self.ctx.device)
        self.before_step(step, x, y)
        with self.meter.category("grad_allreduce"):
            logits = self.forward(self.update.forward_module, x)
            loss = self.loss(step, x, y, logits)
            self.update.apply(loss)
        self.after_step(step)
        task, self.last_distill = self.split_losses(loss)
        return task

    # ------------------------------------------------------------ checkpoints
    def checkpoint_state(self) -> dict:
        """Everything this model's group needs to continue exactly (tensors and plain values only:
        checkpoints load with weights_only=True). Subclasses add their own state."""
        state = {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                 "scheduler": self.scheduler.state_dict()}
        if self.update.scaler is not None:   # fp16: the loss scale and its growth counter
            state["grad_scaler"] = self.update.scaler.state_dict()
        if isinstance(self.update, DDPUpdate):   # its bucket layout, for a resumed run's DDP
            state["ddp_buckets"] = self.update.buckets()
        return state

    def rank_checkpoint_state(self) -> dict:
        """What this rank alone holds (checkpointed per rank, `checkpoint_state` once per group):
        its own BatchNorm running statistics when its group has several ranks (they drift apart
        between exchanges; the group's file has its first rank's). Tensors and plain values only."""
        if self.topo.ranks_per_model == 1:
            return {}
        return {"norm_statistics": [t.clone() for t in norm_statistics(self.model)],
                "extra_state": {name: {path: m.get_extra_state() for path, m in _with_extra_state(model)}
                                for name, model in self.carried_models().items()}}

    def load_rank_checkpoint_state(self, state: dict) -> None:
        """Restore what `rank_checkpoint_state` gave, on this rank (after `load_checkpoint_state`)."""
        with torch.no_grad():
            for t, saved in zip(norm_statistics(self.model), state.get("norm_statistics", [])):
                t.copy_(saved)
        for name, model in self.carried_models().items():
            saved = state.get("extra_state", {}).get(name, {})
            for path, m in _with_extra_state(model):
                if path in saved:
                    m.set_extra_state(saved[path])

    def carried_models(self) -> dict[str, nn.Module]:
        """The models that carry state of this rank's own between batches (an LM's hidden state, as
        module extra state), by a name that is the same on every rank: its own model; teachers too."""
        return {"model": self.model}

    def load_checkpoint_state(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if self.update.scaler is not None:
            self.update.scaler.load_state_dict(state["grad_scaler"])
        if isinstance(self.update, DDPUpdate) and state["ddp_buckets"]:
            self.update.restore_buckets(state["ddp_buckets"])

    # ------------------------------------------------------------ evaluation
    def eval_names(self) -> list[str]:
        """Every model name evaluated anywhere in the job, in a fixed order."""
        return [str(i) for i in range(self.topo.models)] + self.extra_eval_names()

    def extra_eval_names(self) -> list[str]:
        return list(spec(self.cfg.algorithm.name).extra_models)

    def extra_eval_models(self) -> dict[str, nn.Module]:
        """Models beyond the local ones (ensembles, averages); called on every rank at evaluation."""
        return {}

    def eval_models(self) -> dict[str, nn.Module]:
        """The models this rank helps evaluate (every rank of a group returns the same names)."""
        return {str(self.topo.model_index): self.model, **self.extra_eval_models()}
