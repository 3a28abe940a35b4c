"""A figure's `offsets` shift a series' curve by a number of steps, or by "@<series>": that series'
train.steps at the plan's scale (a two-phase student drawn after its teacher's phase 1, whose
length differs between scales). Plans only: nothing trains."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from workflows.experiments import ExperimentsError, load_plan

BASE = {"workload": {"name": "cifar"}, "train": {"steps": 10, "batch_per_rank": 8, "eval_every": 5},
        "launch": {"device": "cpu"}}


def paper(root: Path, offsets: dict) -> Path:
    scale = lambda steps: {"base": BASE, "seeds": [0], "series": {   # noqa: E731
        "phase 1": {"train.steps": steps}, "phase 2": {"optimizer.lr": 0.2}, "other": {}}}
    doc = {"paper": "toy", "source": "a test",
           "figures": {"f": {"title": "t", "source": "Fig. 0", "kind": "curves", "offsets": offsets,
                             "scales": {"embedded": scale(30), "full": scale(400)}}}}
    (root / "toy").mkdir(parents=True, exist_ok=True)
    (root / "toy" / "experiments.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return root


def test_an_offset_naming_a_series_is_its_steps_at_each_scale(tmp_path):
    root = paper(tmp_path, {"phase 2": "@phase 1", "other": 7})
    for scale, steps in (("embedded", 30), ("full", 400)):
        manifest = load_plan(root, scale).figure_manifest("toy", "f", "r")
        assert manifest["offsets"] == {"phase 2": steps, "other": 7}


@pytest.mark.parametrize("offset, message", [
    ("@phase 3", r"offsets: 'phase 2' -> '@phase 3': series 'phase 3' does not exist; have \['other', 'phase 1', "
                 r"'phase 2'\]"),
    ("phase 1", r"offsets: 'phase 2': a number of steps or '@<series>'"),
])
def test_an_offset_that_names_no_series_fails_the_plan(tmp_path, offset, message):
    with pytest.raises(ExperimentsError, match=message):
        load_plan(paper(tmp_path, {"phase 2": offset}), "embedded")
