"""Algorithms are plugins: one module (tests/toy_algorithm.py) with a config class, a strategy
and one `register` call is a new algorithm: it validates, is refused with too few models, is
planned (its extra models, period), and trains in a real run whose processes load it through
CODIST_PLUGINS."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import TINY, deep_update

from codist import config
from codist.algorithms import model_names, registry, spec, specs
from codist.config import ConfigError

TESTS = Path(__file__).resolve().parent
TOY = deep_update(TINY, {"parallel": {"world_size": 2, "models": 2},
                         "algorithm": {"name": "toy_broadcast", "every": 3},
                         "train": {"steps": 6, "eval_every": 3}})


def test_every_builtin_algorithm_registers_its_capabilities():
    s = specs()
    assert {"allreduce", "codistill", "model_average", "ensemble_compress", "label_smoothing", "ensemble",
            "powersgd", "post_local_sgd", "distill"} <= set(s)
    assert {n for n, x in s.items() if x.min_models} >= {"codistill", "model_average", "ensemble", "post_local_sgd"}
    assert model_names("model_average", 2) == ["0", "1", "G"] and model_names("ensemble", 2)[-1] == "ensemble"
    cfg = config.validate({"algorithm": {"name": "distill", "teacher_run": "0123456789ab"}})
    assert registry.upstream_run(cfg.algorithm) == "0123456789ab"
    cfg = config.validate({"parallel": {"world_size": 2, "models": 2}, "algorithm": {"name": "codistill",
                                                                                       "exchange_every": 7}})
    assert registry.exchange_period(cfg.algorithm) == 7 and registry.upstream_run(cfg.algorithm) is None
    for name, x in s.items():   # torch-free: a strategy is named, imported on first use (built-ins; a test's
        if not x.config.__module__.startswith("codist."):   # plugin may have registered its class itself)
            continue
        assert isinstance(x.strategy, str) and x.strategy_class().__name__ == x.strategy.split(":")[1], name


def test_a_plugin_module_registered_in_process_joins_the_schema():
    with pytest.raises(ConfigError, match="toy_broadcast"):   # not registered yet: an unknown name
        config.validate({"algorithm": {"name": "toy_broadcast"}})
    sys.path.insert(0, str(TESTS))
    import toy_algorithm  # noqa: F401  (registers toy_broadcast)
    cfg = config.validate(TOY)
    assert cfg.algorithm.every == 3 and cfg.algorithm.model_data() == "disjoint"
    assert registry.exchange_period(cfg.algorithm) == 3 and model_names("toy_broadcast", 2) == ["0", "1"]
    assert spec("toy_broadcast").min_models == 2
    with pytest.raises(ConfigError, match="toy_broadcast needs at least 2 models"):
        config.validate(deep_update(TOY, {"parallel": {"world_size": 1, "models": 1}}))
    with pytest.raises(ConfigError, match=r"algorithm\.evry: unknown key"):
        config.validate(deep_update(TOY, {"algorithm": {"evry": 2}}))


@pytest.mark.slow
def test_a_plugin_algorithm_trains_in_a_real_run(tmp_path):
    path = tmp_path / "toy.yaml"
    path.write_text(yaml.safe_dump(TOY))
    env = {**os.environ, "CODIST_PLUGINS": "toy_algorithm",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, "-m", "codist.cli", "run", str(path), "--out", str(tmp_path / "run")],
                         capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    last = {r["model"]: r for r in rows if r["step"] == 6}
    assert set(last) == {"0", "1"}
    # broadcast after update 6: the two models are the same model again (own data in between)
    assert last["0"]["val_loss"] == last["1"]["val_loss"]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["algorithm"] == "toy_broadcast"
    assert summary["comm"]["by_category"]["param_exchange"]["sent_bytes_all_ranks"] > 0
