"""Codistillation (Anil et al. 2018; Sodhani et al. 2020).

n models x m ranks; each model's group all-reduces its own gradients (DeepSpeed engine).
From step `burn_in` on, model i also matches its teachers' mean prediction:
  loss_i = CE(y, f_i(x)) + alpha_t * D(mean_j softmax(f_j(x) / T), f_i(x)).
Teachers are the other models (`all`) or the previous one (`ring`).

- exchange `checkpoint` (the papers' method): every k steps each model's state
  (parameters and BatchNorm statistics) goes to the ranks of the other groups that
  learn from it, which run the teacher forward passes locally on these stale copies.
- exchange `predictions`: every step the models, on the same batch, send each other
  their outputs; the teachers are then current, and traffic scales with batch x classes.
"""
from __future__ import annotations

import torch

from .distillation_loss import distill_loss, teacher_probs
from .base import Algorithm
from .state import flat_state, frozen, load_flat_state


class Codistill(Algorithm):
    def setup(self) -> None:
        super().setup()
        a, t = self.cfg.algorithm, self.topo
        n, me = t.models, t.model_index
        self.teacher_ids = [j for j in range(n) if j != me] if a.topology == "all" else [(me - 1) % n]
        self.teachers = {}
        if a.exchange == "checkpoint":   # local copies, filled at each exchange
            for j in self.teacher_ids:
                self.teachers[j] = frozen(self.new_model())
        self.exchanges = 0
        self._teacher_logits = None

    # ------------------------------------------------------------ helpers
    def distilling(self, step: int) -> bool:
        return step >= self.cfg.algorithm.burn_in

    def alpha(self, step: int) -> float:
        a = self.cfg.algorithm
        if a.alpha_ramp_steps == 0:
            return a.alpha
        return a.alpha * min(1.0, (step - a.burn_in + 1) / a.alpha_ramp_steps)

    def rank_of(self, model: int) -> int:
        """Global rank that holds `model` at this rank's position inside its group."""
        return model * self.topo.ranks_per_model + self.topo.dp_rank

    def exchange_checkpoints(self) -> None:
        """Every model's state to the ranks that learn from it (same local index in each group)."""
        t, a = self.topo, self.cfg.algorithm
        self.sync_norm_statistics("param_exchange")   # the group's statistics, not this rank's
        mine = flat_state(self.model)
        with self.meter.category("param_exchange"):
            if a.topology == "all":
                for j in range(t.models):
                    buf = mine if j == t.model_index else torch.empty_like(mine)
                    self.meter.broadcast(buf, src=self.rank_of(j), group=t.cross_group)
                    if j != t.model_index:
                        load_flat_state(self.teachers[j], buf)
            else:
                (src,) = self.teacher_ids
                buf = torch.empty_like(mine)
                self.meter.exchange(mine, dst=self.rank_of((t.model_index + 1) % t.models), recv=buf,
                                    src=self.rank_of(src))
                load_flat_state(self.teachers[src], buf)
        self.exchanges += 1

    def exchange_predictions(self, logits: torch.Tensor) -> list[torch.Tensor]:
        t, a = self.topo, self.cfg.algorithm
        mine = logits.detach().contiguous()
        with self.meter.category("prediction_exchange"):
            if a.topology == "all":
                gathered = [torch.empty_like(mine) for _ in range(t.models)]
                self.meter.all_gather(gathered, mine, group=t.cross_group)
                return [gathered[j] for j in self.teacher_ids]
            (src,) = self.teacher_ids
            buf = torch.empty_like(mine)
            self.meter.exchange(mine, dst=self.rank_of((t.model_index + 1) % t.models), recv=buf,
                                src=self.rank_of(src))
            return [buf]

    def checkpoint_state(self) -> dict:
        # whole state dicts: a teacher may carry more than parameters (an LM's hidden state)
        return {**super().checkpoint_state(), "exchanges": self.exchanges,
                "teachers": {str(j): m.state_dict() for j, m in self.teachers.items()}}

    def carried_models(self) -> dict:
        # a teacher runs on this rank's batches, so what it carries is this rank's own too
        return {**super().carried_models(), **{f"teacher{j}": m for j, m in self.teachers.items()}}

    def load_checkpoint_state(self, state: dict) -> None:
        super().load_checkpoint_state(state)
        self.exchanges = state["exchanges"]
        for j, teacher_state in state["teachers"].items():
            self.teachers[int(j)].load_state_dict(teacher_state)

    # ------------------------------------------------------------ hooks
    def before_step(self, step, x, y) -> None:
        a = self.cfg.algorithm
        self._teacher_logits = None
        if a.exchange != "checkpoint" or not self.distilling(step):
            return
        if (step - a.burn_in) % a.exchange_every == 0:
            self.exchange_checkpoints()
        with torch.no_grad():
            self._teacher_logits = [self.forward(self.teachers[j], x) for j in self.teacher_ids]

    def loss(self, step, x, y, logits):
        a = self.cfg.algorithm
        base = self.workload.loss(logits, y)
        if not self.distilling(step):
            return self.objective(base)
        teacher = self._teacher_logits if a.exchange == "checkpoint" else self.exchange_predictions(logits)
        target = teacher_probs(teacher, a.temperature)
        mask = self.workload.token_mask(y, logits)
        return self.objective(base, distill_loss(logits, target, a.temperature, a.loss, mask), 1.0, self.alpha(step))
