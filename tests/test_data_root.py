"""The data root (issue 14): a relative workload.data_dir is joined to launch.data_root (or
$CODIST_DATA_ROOT), which is not part of the run id; an absolute one is used as is; a relative one
without a root is one line naming what to set. The workflow: `snakemake -n --config scale=full
data_root=DIR` plans every data-reading run under DIR, with the same run ids for any DIR."""
from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from codist import cli, config, datacheck
from codist.config import ConfigError
from codist.data_root import ENV, with_data_root, workload_with_data
from codist.launching.inputs import check_inputs
from conftest import TINY, deep_update
from test_cifar_workload import write_cifar10

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).with_name("snakemake")
sys.path.insert(0, str(ROOT / "workflows"))
from experiments import load_plan  # noqa: E402

CIFAR = {"workload": {"name": "cifar", "dataset": "cifar10", "data_dir": "cifar", "width": 4},
         "train": {"steps": 2, "batch_per_rank": 8, "eval_every": 2, "eval_batch": 8}}


@pytest.fixture(autouse=True)
def no_env_root(monkeypatch):
    """The tests set the root themselves; one in the caller's environment must not leak in."""
    monkeypatch.delenv(ENV, raising=False)


def cifar_config(**launch) -> config.RunConfig:
    return config.validate(deep_update(TINY, {**CIFAR, "launch": {**TINY["launch"], **launch}}))


# --------------------------------------------------------------------------- resolution (unit)

def test_relative_data_dir_is_joined_to_the_root(tmp_path, monkeypatch):
    cfg = cifar_config(data_root=str(tmp_path / "data"))
    assert workload_with_data(cfg).data_dir == str(tmp_path / "data" / "cifar")
    assert cfg.workload.data_dir == "cifar"   # the config itself (hashed into the run id) keeps it relative
    monkeypatch.setenv(ENV, str(tmp_path / "env"))   # the config's root wins over the environment's
    assert workload_with_data(cfg).data_dir == str(tmp_path / "data" / "cifar")
    assert workload_with_data(cifar_config()).data_dir == str(tmp_path / "env" / "cifar")


def test_absolute_data_dir_is_untouched(tmp_path):
    cfg = config.validate(deep_update(TINY, deep_update(CIFAR, {"workload": {"data_dir": str(tmp_path / "mine")},
                                                                 "launch": {"data_root": "/elsewhere"}})))
    assert workload_with_data(cfg).data_dir == str(tmp_path / "mine")
    embedded = config.validate(TINY)   # reads no folder: no root needed
    assert workload_with_data(embedded) is embedded.workload


def test_a_relative_root_is_made_absolute_against_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = with_data_root(cifar_config(), "data")
    assert cfg.launch.data_root == str(tmp_path / "data")
    assert workload_with_data(cfg).data_dir == str(tmp_path / "data" / "cifar")
    assert with_data_root(cifar_config(), None).launch.data_root is None   # nothing given: nothing set


def test_run_id_does_not_depend_on_the_data_root(tmp_path):
    ids = {cifar_config(data_root=str(tmp_path / r)).run_id() for r in ("a", "b")}
    ids.add(cifar_config().run_id())
    ids.add(with_data_root(cifar_config(), tmp_path / "c").run_id())
    assert len(ids) == 1
    assert config.validate(deep_update(TINY, deep_update(CIFAR, {"workload": {"data_dir": "cifar2"}}))).run_id() \
        not in ids   # the data set's name is still part of it


def test_a_relative_data_dir_without_a_root_is_one_line():
    with pytest.raises(ConfigError) as e:
        workload_with_data(cifar_config())
    assert str(e.value) == (
        "workload.data_dir='cifar' is relative to a data root, and none was given: expected --data-root DIR "
        "(codist run / check / data check), --config data_root=DIR (snakemake), launch.data_root or "
        "$CODIST_DATA_ROOT")


# --------------------------------------------------------------------------- what reads data uses it

def test_input_checks_codist_check_and_data_check_use_the_root(tmp_path, capsys):
    write_cifar10(tmp_path / "data" / "cifar")
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(deep_update(TINY, CIFAR)))
    check_inputs(cifar_config(data_root=str(tmp_path / "data")))
    with pytest.raises(ConfigError, match=r"^workload.data_dir: '.*/other/cifar' does not exist"):
        check_inputs(cifar_config(data_root=str(tmp_path / "other")))

    assert cli.main(["check", str(path), "--data-root", str(tmp_path / "data")]) == 0
    out = capsys.readouterr().out
    assert f"data_root: {tmp_path / 'data'}" in out and "# run id: " in out
    assert cli.main(["check", str(path)]) == 2
    assert "workload.data_dir='cifar' is relative to a data root" in capsys.readouterr().err

    assert datacheck.main(["check", "--config", str(path), "--data-root", str(tmp_path / "data")]) == 0
    assert f"cifar data in {tmp_path / 'data' / 'cifar'}: ok" in capsys.readouterr().out
    assert datacheck.main(["check", "--config", str(path)]) == 2
    assert "none was given" in capsys.readouterr().err


@pytest.mark.slow
def test_a_real_run_reads_its_data_under_the_root(tmp_path, monkeypatch):
    """codist run with a relative root from the environment: the ranks (another process) read the
    CIFAR pickles under it; the run id is the root-free one."""
    write_cifar10(tmp_path / "data" / "cifar", per_batch=8, test=8)
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(deep_update(TINY, CIFAR)))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(ENV, "data")
    out = tmp_path / "run"
    assert cli.main(["run", str(path), "--out", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["run_id"] == cifar_config().run_id()
    assert manifest["config"]["launch"]["data_root"] == str(tmp_path / "data")
    assert manifest["config"]["workload"]["data_dir"] == "cifar"


# --------------------------------------------------------------------------- the workflow

def planned_configs(workdir: Path, *config_args: str) -> dict[str, dict]:
    """run id -> the config text each run_config job of a dry run of the real Snakefile would write
    (read from the printed shell command: `printf '%s' '<yaml>' > .../configs/<id>.yaml.tmp`)."""
    proc = subprocess.run([str(SNAKEMAKE), "-n", "-p", "-s", str(ROOT / "Snakefile"), "--directory", str(workdir),
                           "--config", *config_args], capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    configs = {}
    quoted = r"""((?:'[^']*'|"'")+)"""   # shlex.quote's output: '...' pieces around "'"
    for m in re.finditer(rf"printf '%s' {quoted} > \S+?/configs/([0-9a-f]{{12}})\.yaml\.tmp", out):
        configs[m[2]] = yaml.safe_load(shlex.split(m[1])[0])
    assert configs, out
    return configs


def test_full_scale_dry_run_plans_under_the_data_root_with_the_same_run_ids(tmp_path):
    (tmp_path / "work").mkdir()
    one = planned_configs(tmp_path / "work", "scale=full", "data_root=/some/dir")
    other = planned_configs(tmp_path / "work", "scale=full", "data_root=other/dir")   # relative: made absolute
    assert one.keys() == other.keys()
    assert len(one) == len(load_plan(ROOT / "replications", "full").configs)   # every run was read back
    reading = {rid: c for rid, c in one.items() if c["workload"].get("data_dir")}
    assert len(reading) == len(one)   # every full-scale run reads a real data set
    for rid, raw in reading.items():
        cfg = config.validate(raw)
        assert cfg.run_id() == rid
        assert workload_with_data(cfg).data_dir.startswith("/some/dir/"), (rid, raw["workload"])
        assert workload_with_data(config.validate(other[rid])).data_dir.startswith(
            f"{tmp_path / 'work' / 'other' / 'dir'}/")
    names = {c["workload"]["data_dir"] for c in one.values()}
    assert names == {"imagenet", "imagenet_quarter", "cifar", "criteo", "common_crawl_wet",
                     "wmt16_en_de_bpe32k", "iwslt14_de_en"}
