"""codist.workloads.metrics lists every metric each workload logs with its direction (from the
workloads' registrations), and the analysis takes directions from it: checked against the workloads' own finalize_eval and
headline metrics, so a metric added to a workload without a direction fails here."""
import sys
from pathlib import Path
from types import SimpleNamespace as NS

import pytest

from codist.workloads import metrics, workload_class
from codist.workloads.base import Workload
from codist.workloads.ctr_embedded import EmbeddedCtrSource
from codist.workloads.lm_data import EmbeddedData

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analysis"))
import figure_data  # noqa: E402

# each workload's finalize_eval, called on made-up sums with just the attributes it reads
FINALS = {
    "cifar": lambda c: Workload.finalize_eval(None, {"loss_sum": 1.0, "correct": 1.0, "count": 2.0}),
    "imagenet": lambda c: c.finalize_eval(None, {"loss_sum": 1.0, "correct": 1.0, "count": 2.0}),
    "lm": lambda c: c.finalize_eval(NS(data=NS(eval_extras=lambda loss: EmbeddedData.eval_extras(
                                        NS(bayes_val_loss=0.1), loss))), {"loss_sum": 1.0, "count": 2.0}),
    "ctr": lambda c: c.finalize_eval(NS(data=NS(eval_extras=lambda loss: EmbeddedCtrSource.eval_extras(
                                         NS(generated=NS(bayes_log_loss=0.1)), loss))),
                                     {"loss_sum": 1.0, "correct": 1.0, "p_sum": 1.0, "label_sum": 1.0, "count": 2.0}),
    "translation": lambda c: {**c.finalize_eval(NS(cfg=NS(bleu_every_eval=False)),
                                                {"nll_sum": 1.0, "tokens": 2.0, "correct": 1.0}), "val_bleu": 0.0},
}


def test_every_builtin_workload_is_checked_here():
    from codist.workloads import specs
    builtin = {n for n, s in specs().items() if s.config.__module__.startswith("codist.")}   # not a test's plugin
    assert builtin == set(FINALS)


@pytest.mark.parametrize("name", sorted(FINALS))
def test_every_logged_metric_has_a_listed_direction(name):
    cls = workload_class(name)
    logged = set(FINALS[name](cls))
    assert logged <= set(metrics.LOGGED[name]), logged - set(metrics.LOGGED[name])
    assert set(metrics.LOGGED[name]) <= set(metrics.DIRECTIONS)
    headline = getattr(cls, "metric", None)
    if headline is not None:   # the workload's own headline direction agrees with the table
        assert metrics.DIRECTIONS[headline.name] == headline.higher_is_better


def test_the_analysis_reads_directions_from_the_workloads():
    assert figure_data.higher_is_better("val_token_accuracy") is True   # the hand list missed it
    assert figure_data.higher_is_better("val_nll") is False
    with pytest.raises(ValueError, match="no better direction"):
        figure_data.higher_is_better("comm_bytes")
