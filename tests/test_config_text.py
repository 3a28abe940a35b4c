"""A run's config file is a Snakemake param (workflows/train.smk): when its text changes, Snakemake
trains the finished run again under the same id. A config key added with a default changed every
run's text that way (launch.backend, train.deterministic, workload.downsample before it), so a user
updating codist retrained their results. These tests hold every planned run's text fixed against
tests/config_text_digests.csv and check codist.config.TEXT_UNLESS, where a new key goes instead.

After a deliberate change of the texts: `python tests/test_config_text.py` records them again."""
from __future__ import annotations

import csv
import hashlib
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DIGESTS = Path(__file__).with_name("config_text_digests.csv")
SCALES = ("embedded", "full")


def planned_texts() -> dict[tuple[str, str], str]:
    sys.path.insert(0, str(ROOT))
    from workflows.experiments import EVERY_TIER, load_plan
    out = {}
    for scale in SCALES:
        plan = load_plan(ROOT / "replications", scale, tier=EVERY_TIER)
        out.update({(scale, rid): plan.config_text(rid) for rid in plan.configs})
    return out


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def test_every_recorded_run_keeps_its_config_text():
    recorded = {(r["scale"], r["run_id"]): r["digest"] for r in csv.DictReader(DIGESTS.open())}
    texts = planned_texts()
    both = sorted(set(recorded) & set(texts))
    # most recorded runs are still planned: the comparison cannot pass on an empty overlap
    assert len(both) >= 0.8 * len(recorded), f"only {len(both)} of {len(recorded)} recorded runs still planned"
    changed = [k for k in both if digest(texts[k]) != recorded[k]]
    assert not changed, (
        f"{len(changed)} planned runs' config files changed (first: {changed[0]}); Snakemake would train them "
        "again. A key added with a default belongs in codist.config.TEXT_UNLESS; for a deliberate change run "
        "`python tests/test_config_text.py` to record the new texts")


def test_a_text_unless_key_is_written_only_away_from_its_default(monkeypatch):
    from codist import config
    monkeypatch.setattr(config, "TEXT_UNLESS", {"train.deterministic": False, "workload.downsample": 1})
    base = {"workload": {"name": "cifar", "dataset": "fashion_mnist"}, "algorithm": {"name": "allreduce"}}
    at_default = config.validate(base, "test")
    text = yaml.safe_dump(config.to_text_dict(at_default), sort_keys=False)
    assert "deterministic" not in text and "downsample" not in text
    assert config.validate(yaml.safe_load(text), "test") == at_default   # the file loads as the same run
    moved = config.validate({**base, "train": {"deterministic": True}, "workload": {**base["workload"],
                                                                                    "downsample": 2}}, "test")
    text = yaml.safe_dump(config.to_text_dict(moved), sort_keys=False)
    assert "deterministic: true" in text and "downsample: 2" in text
    assert config.validate(yaml.safe_load(text), "test") == moved
    assert config.run_id(at_default) != config.run_id(moved)   # the id does not depend on the text


def record() -> None:
    rows = sorted((scale, rid, digest(text)) for (scale, rid), text in planned_texts().items())
    with DIGESTS.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["scale", "run_id", "digest"])
        w.writerows(rows)
    print(f"wrote {DIGESTS} ({len(rows)} runs)")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    record()
