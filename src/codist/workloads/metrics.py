"""Every metric a run logs, per workload, and its direction (True: higher is better).

Kept beside the workloads (torch-free, so the plan and the analysis read it cheaply) and
checked against what each workload's `finalize_eval` and the training loop really write
(tests/test_metric_directions.py): the analysis takes a metric's direction from here, never
from a list of its own.
"""
from __future__ import annotations

# direction of each metric name, wherever it is logged
DIRECTIONS = {
    "val_loss": False, "val_accuracy": True, "val_log_loss": False, "val_pred_ctr": None, "val_ctr": None,
    "val_bayes_gap": False, "val_ppl": False, "val_nll": False, "val_nll_bits": False,
    "val_token_accuracy": True, "val_bleu": True,
    # written by the training loop for every workload (init_distance: when train.probes asks)
    "train_loss": False, "distill_loss": None, "comm_bytes": None, "init_distance": None,
    # derived by the analysis
    "error_pct": False, "churn": False,
}
_TRAIN = ("train_loss", "distill_loss", "comm_bytes", "init_distance")
# metrics each workload's finalize_eval writes (optional ones included), plus the loop's
LOGGED = {
    "cifar": ("val_loss", "val_accuracy", "error_pct") + _TRAIN,
    "imagenet": ("val_loss", "val_accuracy", "error_pct") + _TRAIN,
    "ctr": ("val_log_loss", "val_loss", "val_accuracy", "val_pred_ctr", "val_ctr", "val_bayes_gap") + _TRAIN,
    "lm": ("val_loss", "val_ppl", "val_bayes_gap") + _TRAIN,
    "translation": ("val_nll", "val_loss", "val_nll_bits", "val_ppl", "val_token_accuracy", "val_bleu") + _TRAIN,
}


def higher_is_better(metric: str) -> bool:
    """The metric's direction; a metric without one (a count, a rate) is an error to compare."""
    if DIRECTIONS.get(metric) is None:
        have = sorted(k for k, v in DIRECTIONS.items() if v is not None)
        raise ValueError(f"metric {metric!r} has no better direction; comparable metrics: {have}")
    return DIRECTIONS[metric]
