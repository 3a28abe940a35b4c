"""Sharded evaluation of every model of a run, one world all-reduce of the sums (category eval)."""
from __future__ import annotations

import torch

from ..algorithms.base import TrainContext
from .norm_stats import as_saved
from .probes import build_probes
from ..runtime.data import eval_batches, evaluation_slice, to_device
from ..runtime.precision import autocast


class Evaluator:
    """Each rank evaluates its shard of the validation set (or of its `train.eval_size` slice,
    without the workload's whole-set metrics) on the models its algorithm gives it, and adds its
    own model's training statistics and the requested probes (`train.probes`); one all-reduce of
    the (models x statistics) table gives every rank every model's metrics. The models are scored
    as they are saved: a model of several ranks with the BatchNorm statistics of its saved file
    (the group's, `norm_stats.as_saved`), each rank's own given back after. Items that must be
    decoded (real images) are decoded by the workload's `loader_workers` DataLoader processes, as its
    training batches are: the same batches in the same order as in the rank's thread."""

    def __init__(self, ctx: TrainContext, algo):
        self.ctx, self.algo = ctx, algo
        self.names = algo.eval_names()
        whole = ctx.workload.val_dataset()
        self.val = evaluation_slice(whole, ctx.cfg.train.eval_size)
        self.partial = ctx.workload.whole_set_metrics if len(self.val) < len(whole) else ()
        self.probes = build_probes(ctx.cfg.train.probes, algo)

    @torch.no_grad()
    def __call__(self, train_loss_sum: float, train_loss_count: int, distill_sum: float = 0.0,
                 distill_count: int = 0) -> dict[str, dict[str, float]]:
        ctx, topo = self.ctx, self.ctx.topo
        with as_saved(self.algo):   # the saved file's norm statistics, not this rank's own
            rows = self.score()
        keys = list(rows[next(reversed(rows))]) if rows else None
        if keys is None:  # every algorithm gives each rank its own model to evaluate
            raise RuntimeError(f"rank {topo.rank}: the algorithm gave this rank no model to evaluate")
        return self.metrics(rows, keys, train_loss_sum, train_loss_count, distill_sum, distill_count)

    def score(self) -> dict[str, dict[str, float]]:
        """This rank's sums over its shard, per model the algorithm gives it to evaluate."""
        ctx, topo = self.ctx, self.ctx.topo
        rows = {}
        for name, model in self.algo.eval_models().items():
            was_training = model.training
            model.eval()
            sums: dict[str, float] = {}
            # at the run's precision, as the ensembles' members (Algorithm.forward) are: every model
            # of a run is scored alike; autocast computes the losses themselves in fp32
            with autocast(ctx.cfg.train.precision, ctx.device):
                for batch in eval_batches(self.val, topo.ranks_per_model, topo.dp_rank, ctx.cfg.train.eval_batch,
                                          ctx.workload.loader_workers):   # real images: decoded by workers
                    x, y = to_device(batch, ctx.device)
                    for k, v in ctx.workload.eval_model_sums(model, x, y).items():
                        sums[k] = sums.get(k, 0.0) + v
            model.train(was_training)
            rows[name] = sums
        return rows

    def metrics(self, rows, keys, train_loss_sum, train_loss_count, distill_sum, distill_count):
        """The all-reduced (models x statistics) table as every model's metrics."""
        ctx, topo = self.ctx, self.ctx.topo
        own = ["train_loss_sum", "train_loss_count", "comm_sent_bytes", "distill_sum", "distill_count"]
        cols = keys + own + list(self.probes)
        table = torch.zeros(len(self.names), len(cols), dtype=torch.float64)
        mine = str(topo.model_index)
        for name, sums in rows.items():
            i = self.names.index(name)
            table[i, :len(keys)] = torch.tensor([sums.get(k, 0.0) for k in keys], dtype=torch.float64)
        if mine in self.names:  # training statistics and probes belong to this rank's own model
            i = self.names.index(mine)
            probed = [probe() if topo.dp_rank == 0 else 0.0 for probe in self.probes.values()]   # one rank per model
            table[i, len(keys):] = torch.tensor([train_loss_sum, train_loss_count, ctx.meter.sent_bytes(),
                                                 distill_sum, distill_count, *probed], dtype=torch.float64)
        table = table.to(ctx.device)   # built on the CPU from host numbers; the collective needs the run's device
        ctx.meter.all_reduce(table, category="eval")
        table = table.cpu()
        out = {}
        for i, name in enumerate(self.names):
            vals = dict(zip(cols, table[i].tolist()))
            metrics = ctx.workload.finalize_eval({k: vals[k] for k in keys})
            for k in self.partial:   # exact over the whole set only
                metrics.pop(k, None)
            n = vals["train_loss_count"]
            metrics["train_loss"] = vals["train_loss_sum"] / n if n else None   # the task loss only
            dn = vals["distill_count"]   # the distillation / compression term, on the updates it acted
            metrics["distill_loss"] = vals["distill_sum"] / dn if dn else None
            metrics["comm_bytes"] = int(vals["comm_sent_bytes"])
            for probe in self.probes:
                metrics[probe] = vals[probe] if n else None   # local models only
            out[name] = metrics
        return out
