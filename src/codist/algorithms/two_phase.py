"""Two-phase (offline) distillation, the baseline of Anil et al. 2018, Sec. 3.4.1: first train
teachers (e.g. an ensemble of two) to the end, then train one fresh model on
  loss = CE(y, f(x)) + alpha * D(mean_j softmax(t_j(x) / T), f(x))
with the teachers frozen. The teachers are the saved models (`model_<name>.pt`) of a finished
run, `algorithm.teacher_run`, a sibling directory of this run's (results/<scale>/runs/<id>):
the workflow trains it first. Only the student's own updates are counted as its steps.
"""
from __future__ import annotations

from pathlib import Path

import torch

from .distillation_loss import distill_loss, teacher_probs
from .base import Algorithm
from .state import frozen


class TwoPhaseDistill(Algorithm):
    def teacher_dir(self) -> Path:
        if self.ctx.out is None:
            raise RuntimeError("algorithm.name='distill' needs the run's output directory to find its teacher run")
        return Path(self.ctx.out).parent / self.cfg.algorithm.teacher_run

    def setup(self) -> None:
        super().setup()
        a, where = self.cfg.algorithm, self.teacher_dir()
        self.teachers = []
        for name in a.teacher_models:
            path = where / f"model_{name}.pt"
            if not path.exists():
                raise FileNotFoundError(f"algorithm.teacher_run={a.teacher_run!r}: {path} does not exist; "
                                        f"train the teacher run first, with train.save_model: true")
            model = self.new_model()
            model.load_state_dict(torch.load(path, map_location=self.ctx.device, weights_only=True))
            self.teachers.append(frozen(model))
        self._teacher_logits = None

    def before_step(self, step, x, y) -> None:
        with torch.no_grad():
            self._teacher_logits = [self.forward(t, x) for t in self.teachers]

    def loss(self, step, x, y, logits):
        a = self.cfg.algorithm
        target = teacher_probs(self._teacher_logits, a.temperature)
        mask = self.workload.token_mask(y, logits)
        return self.objective(self.workload.loss(logits, y), distill_loss(logits, target, a.temperature, a.loss, mask),
                              1.0, a.alpha)
