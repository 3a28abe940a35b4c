"""Config validation: bad input fails before launch with a message naming key, value, what is allowed."""
import pytest

from codist import cli, config
from codist.config import ConfigError
from codist.launching.launch import check_fits


def test_valid_config_resolves_defaults(write_config):
    cfg = config.load(write_config())
    assert cfg.algorithm.name == "allreduce"
    assert cfg.optimizer.grad_clip == 0.0   # explicit: DeepSpeed's own default would clip at 1.0
    assert cfg.parallel.ranks_per_model == 1


def test_unknown_key_names_key_and_allowed(write_config):
    with pytest.raises(ConfigError) as e:
        config.load(write_config({"train": {"stpes": 5}}))
    msg = str(e.value)
    assert "train.stpes" in msg and "unknown key" in msg
    assert "steps" in msg and "batch_per_rank" in msg      # the allowed keys of that section
    assert "run.yaml" in msg                               # the file


def test_wrong_type_names_key_and_value(write_config):
    with pytest.raises(ConfigError) as e:
        config.load(write_config({"train": {"batch_per_rank": "lots"}}))
    assert "train.batch_per_rank" in str(e.value) and "'lots'" in str(e.value)


def test_value_out_of_range(write_config):
    with pytest.raises(ConfigError) as e:
        config.load(write_config({"optimizer": {"lr": -1}}))
    assert "optimizer.lr" in str(e.value) and "greater than 0" in str(e.value)


def test_unknown_choice_lists_allowed(write_config):
    with pytest.raises(ConfigError) as e:
        config.load(write_config({"optimizer": {"name": "lamb"}}))
    msg = str(e.value)
    assert "optimizer.name" in msg and "'lamb'" in msg and "'sgd'" in msg


def test_world_size_not_multiple_of_models(write_config):
    with pytest.raises(ConfigError) as e:
        config.load(write_config({"parallel": {"world_size": 3, "models": 2}}))
    msg = str(e.value)
    assert "parallel.world_size=3" in msg and "multiple of models" in msg


def test_world_size_larger_than_machine(write_config):
    cfg = config.load(write_config({"parallel": {"world_size": 8}}))
    with pytest.raises(ConfigError) as e:
        check_fits(cfg, "cpu", cores=2)
    assert "parallel.world_size=8" in str(e.value) and "launch.oversubscribe" in str(e.value)
    ok = config.load(write_config({"parallel": {"world_size": 8}, "launch": {"oversubscribe": True}}))
    check_fits(ok, "cpu", cores=2)


def test_overrides_are_validated_too(write_config):
    path = write_config()
    assert config.load(path, ["train.steps=42"]).train.steps == 42
    with pytest.raises(ConfigError) as e:
        config.load(path, ["train.steps=0"])
    assert "train.steps" in str(e.value)
    with pytest.raises(ConfigError, match="not key=value"):
        config.load(path, ["train.steps"])


def test_run_id_ignores_label_and_launch_but_not_results(write_config):
    path = write_config()
    base = config.load(path).run_id()
    assert config.load(path, ["name=other", "launch.launcher=deepspeed"]).run_id() == base
    assert config.load(path, ["seed=1"]).run_id() != base
    assert config.load(path, ["optimizer.lr=0.2"]).run_id() != base


def test_cli_check_exit_codes(write_config, capsys):
    assert cli.main(["check", str(write_config())]) == 0
    assert "run id" in capsys.readouterr().out
    assert cli.main(["check", str(write_config({"bogus": 1}))]) == 2
    assert "bogus: unknown key" in capsys.readouterr().err


def test_missing_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match="nope.yaml: config file not found"):
        config.load(tmp_path / "nope.yaml")


@pytest.mark.parametrize("extra, key, words", [
    ({"algorithm": {"name": "codistill"}, "parallel": {"world_size": 2, "models": 1}},
     "parallel.models=1", "at least 2"),
    ({"algorithm": {"name": "codistill"}, "parallel": {"world_size": 3, "models": 2}},
     "parallel.world_size=3", "multiple of models"),
    ({"algorithm": {"name": "model_average", "tau": 0}, "parallel": {"world_size": 2, "models": 2}},
     "algorithm.tau", "greater than or equal to 1"),
    ({"algorithm": {"name": "ensemble_compress", "tau": -5}, "parallel": {"world_size": 2, "models": 2}},
     "algorithm.tau", "greater than or equal to 1"),
    ({"algorithm": {"name": "codistill", "exchange": "gossip"}, "parallel": {"world_size": 2, "models": 2}},
     "algorithm.exchange", "'checkpoint' or 'predictions'"),
    ({"algorithm": {"name": "codistill", "exchange": "predictions", "data": "disjoint"},
      "parallel": {"world_size": 2, "models": 2}}, "algorithm.data='disjoint'", "shared batch"),
    ({"algorithm": {"name": "allreduce"}, "parallel": {"world_size": 2, "models": 2}},
     "parallel.models=2", "trains one model"),
    ({"algorithm": {"name": "gossip"}}, "algorithm", "'codistill'"),
])
def test_bad_algorithm_configs_fail_before_launch(write_config, extra, key, words):
    with pytest.raises(ConfigError) as e:
        config.load(write_config(extra))
    assert key in str(e.value) and words in str(e.value)


# ------------------------------------------------------------------ issue 17: inputs that used to pass


@pytest.mark.parametrize("extra, key", [
    ({"optimizer": {"lr": float("inf")}}, "optimizer.lr"),
    ({"algorithm": {"name": "codistill", "alpha": float("inf")}, "parallel": {"world_size": 2, "models": 2}},
     "algorithm.alpha"),
    ({"algorithm": {"name": "codistill", "temperature": float("nan")}, "parallel": {"world_size": 2, "models": 2}},
     "algorithm.temperature"),
    ({"optimizer": {"betas": [0.9, float("nan")]}}, "optimizer.betas"),
    ({"workload": {"name": "lm", "zipf": float("inf")}}, "workload.zipf"),   # workload sections too
])
def test_non_finite_floats_are_refused(write_config, extra, key):
    path = write_config(extra)
    assert ".inf" in path.read_text() or ".nan" in path.read_text()   # YAML's own spelling
    with pytest.raises(ConfigError) as e:
        config.load(path)
    assert key in str(e.value) and "finite number" in str(e.value)


@pytest.mark.parametrize("value", [True, 1.5, 2.0, "12"])
def test_counts_must_be_integers(write_config, value):
    with pytest.raises(ConfigError) as e:
        config.load(write_config({"train": {"steps": value}}))
    assert "train.steps" in str(e.value) and "valid integer" in str(e.value)
    with pytest.raises(ConfigError, match="workload.width"):   # workload sections too
        config.load(write_config({"workload": {"width": value}}))


@pytest.mark.parametrize("text", ["", "# only a comment\n\n", "{}\n"])
def test_empty_config_is_refused(tmp_path, text):
    path = tmp_path / "empty.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="empty.yaml: the config is empty"):
        config.load(path)


def test_duplicate_keys_name_file_key_and_line(tmp_path):
    path = tmp_path / "dup.yaml"
    path.write_text("name: x\noptimizer:\n  lr: 0.1\n  momentum: 0.5\n  lr: 100.0\n")
    with pytest.raises(ConfigError) as e:
        config.load(path)
    assert str(e.value) == ("dup.yaml, line 5: key 'lr' given twice (first on line 3); each key may appear "
                            "once in a mapping").replace("dup.yaml", str(path))
    # a YAML merge (<<) may still be overridden: that is not a duplicate
    path.write_text("x-base: &b {lr: 0.1, momentum: 0.5}\noptimizer:\n  <<: *b\n  lr: 0.2\n")
    assert config.load_raw(path)["optimizer"] == {"lr": 0.2, "momentum": 0.5}


def test_algorithm_without_name_lists_the_names(write_config):
    with pytest.raises(ConfigError) as e:
        config.load(write_config({"algorithm": {"alpha": 0.5}}))
    msg = str(e.value)
    assert "algorithm: no 'name' given; allowed names: allreduce, codistill" in msg
    assert "Unable to extract tag" not in msg
