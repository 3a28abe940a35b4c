"""Bad inputs of issue 26, replayed: each fails in `codist check` (or before launch) with one line
naming where it came from (the file, or the `--set`), fast, and without printing what an alias
expands to."""
from __future__ import annotations

import subprocess
import sys

import pytest
import yaml
from conftest import ROOT, TINY, deep_update, one_rank_env

from codist import config
from codist.config import ConfigError
from codist.launching.inputs import check_inputs

LEVELS = 9
# 461 bytes in the probe: 9 levels of 9 aliases each, 9**9 values once expanded
BOMB = "".join(f"{chr(97 + i)}: &{chr(97 + i)} [{', '.join([f'*{chr(96 + i)}'] * 9) if i else ', '.join(['lol'] * 9)}]\n"
               for i in range(LEVELS))


def codist(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "codist.cli", *args], capture_output=True, text=True, timeout=120)


def test_an_alias_bomb_is_refused_at_once_without_its_expansion(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    with pytest.raises(ConfigError, match=r"more than 100000 values \(an alias bomb\?\)") as e:
        config.load(path)
    assert "lol" not in str(e.value) and len(str(e.value).splitlines()) == 1
    # a recursive alias, and a legitimate one (anchors for shared sections) still works
    (tmp_path / "loop.yaml").write_text("a: &a [*a]\n")
    with pytest.raises(ConfigError, match="alias refers to a value containing itself"):
        config.load(tmp_path / "loop.yaml")
    (tmp_path / "ok.yaml").write_text("x-train: &t {steps: 7}\n" + yaml.safe_dump({k: v for k, v in TINY.items()
                                                                                    if k != "train"})
                                      + "train: *t\n")
    with pytest.raises(ConfigError, match="x-train: unknown key"):   # the anchor's holder is still a key
        config.load(tmp_path / "ok.yaml")


def test_a_huge_value_is_cut_short_in_the_message(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump(deep_update(TINY, {"train": {"stepz": list(range(10000))}})))
    with pytest.raises(ConfigError) as e:
        config.load(path)
    assert len(str(e.value)) < 600 and "..." in str(e.value)


def test_set_errors_name_the_set_and_suggest_the_key(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(TINY))
    with pytest.raises(ConfigError) as e:
        config.load(path, ["train.stepz=3"])
    first, line = str(e.value).splitlines()
    assert first == "--set train.stepz=3: invalid run config" and str(path) not in str(e.value)
    assert "train.stepz (--set train.stepz=3): unknown key" in line and "did you mean train.steps?" in line
    result = codist("check", str(path), "--set", "train.steps=[1,")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        "codist: --set train.steps=[1,: the value is not valid YAML (expected the node content, but found "
        "'<stream end>'); quote a string, e.g. --set train.steps='\"...\"'"]


@pytest.mark.parametrize("setting, message", [
    ("seed=100000000000000000000000", r"seed \(--set seed=1\d+\): got 1\d+: Input should be less than or equal to "
                                      r"2147483647"),
    ("seed=1e23", r"seed \(--set seed=1e23\): got '1e23': Input should be a valid integer"),
    ("algorithm.exchange_every=7", r"algorithm.exchange_every=7 with train.steps=6: the models would never exchange"),
])
def test_values_that_cannot_work_fail_in_check(tmp_path, setting, message):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(deep_update(TINY, {"parallel": {"world_size": 2, "models": 2},
                                                      "algorithm": {"name": "codistill"}})))
    result = codist("check", str(path))   # the default period (50) is not refused, but said once
    assert result.returncode == 0
    assert [line for line in result.stderr.splitlines() if "note:" in line] == [
        "codist: note: algorithm.exchange_every=50 (codistill's default) is more than train.steps=6: the run "
        "ends before the algorithm's first exchange; set algorithm.exchange_every to at most 6 if it should have one"]
    assert "note:" not in codist("check", str(path), "--set", "algorithm.exchange_every=6").stderr
    with pytest.raises(ConfigError, match=message):
        config.load(path, [setting])
    assert config.load(path, ["seed=2147483647"]).seed == 2147483647


def test_paths_that_are_not_utf8_fail_before_launch(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(TINY))
    out = str(tmp_path).encode() + b"/run\xff"
    result = subprocess.run([sys.executable.encode(), b"-m", b"codist.cli", b"run", str(path).encode(), b"--out", out],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "--out:" in result.stderr and "is not UTF-8 text" in result.stderr
    assert not (tmp_path / "run\udcff").exists() and len(result.stderr.strip().splitlines()) == 1
    with pytest.raises(ConfigError, match="is not UTF-8 text"):
        config.load(path, ["workload.data_dir=/data/\udcff"])
    (tmp_path / "latin1.yaml").write_bytes(b"name: caf\xe9\n")
    with pytest.raises(ConfigError, match=r"latin1.yaml: not UTF-8 text \(byte 0xe9 at offset 9\)"):
        config.load(tmp_path / "latin1.yaml")


# ---------------------------------------------------------------- readers: the file and the line

def test_a_metrics_file_cut_mid_line_names_the_file_and_line(tmp_path):
    sys.path.insert(0, str(ROOT / "analysis"))
    from aggregate import read_metrics
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 3, "model": "0"}\n{"step": 6, "mod')
    with pytest.raises(ValueError, match=rf"{path}:2: not a JSON metrics row"):
        read_metrics(path)


def criteo_line(dense: list[str]) -> str:
    return "\t".join(["1", *dense, *(["68fd1e64"] * 26)]) + "\n"


def test_a_criteo_integer_beyond_64_bits_names_the_file_and_line(tmp_path):
    from codist import datacheck
    from codist.workloads.ctr import CriteoFormatError, read_criteo
    path = tmp_path / "train.txt"
    path.write_text(criteo_line(["1"] * 13) + criteo_line(["9" * 400] + ["1"] * 12))
    with pytest.raises(CriteoFormatError, match=rf"{path}:2: integer feature I1 \(field 2\) has 400 digits"):
        read_criteo(path, 2 ** 10)
    problems, _ = datacheck.check("ctr", tmp_path)
    assert len(problems) == 1 and f"{path}:2: integer feature I1" in problems[0]


def png_bomb(path) -> None:
    """A PNG whose header claims 30,000 x 30,000 pixels (900 M, PIL refuses above 2 x 89 M) in 70 bytes."""
    import io
    import struct
    import zlib

    from PIL import Image
    buf = io.BytesIO()
    Image.new("L", (8, 8)).save(buf, "PNG")
    data = bytearray(buf.getvalue())
    data[16:24] = struct.pack(">II", 30000, 30000)             # IHDR width, height
    data[29:33] = struct.pack(">I", zlib.crc32(bytes(data[12:29])))   # IHDR's CRC over type + data
    path.write_bytes(bytes(data))


def test_a_png_decompression_bomb_is_reported_with_its_path(tmp_path):
    from PIL import Image

    from codist import datacheck
    from codist.workloads.imagenet import load_image
    for split in ("train", "val"):
        (tmp_path / split / "cls").mkdir(parents=True)
        Image.new("RGB", (4, 4)).save(tmp_path / split / "cls" / "a.png")
    bomb = tmp_path / "train" / "cls" / "z.png"
    png_bomb(bomb)
    with pytest.raises(ValueError, match=rf"{bomb}: unreadable image \(DecompressionBombError"):
        load_image(str(bomb))
    problems, _ = datacheck.check("imagenet", tmp_path)
    assert [p for p in problems if str(bomb) in p and "DecompressionBombError" in p], problems
    result = codist("data", "check", "imagenet", str(tmp_path))
    assert result.returncode != 0 and str(bomb) in result.stdout + result.stderr
    assert "ok" not in (result.stdout + result.stderr).splitlines()[-1]


# ---------------------------------------------------------------- NaN in an evaluation

def test_nan_in_the_validation_data_fails_the_run(tmp_path):
    """The probe ended with exit 0 and "val_loss": NaN in summary.json. One rank, as the launcher
    starts it, with the embedded task's validation images holding one NaN (training data clean)."""
    from codist.rank.train import EXIT_DIVERGED
    env = one_rank_env(tmp_path, {"train": {"steps": 4, "eval_every": 2}})
    code = ("import sys, torch; from torch.utils.data import TensorDataset; from codist.rank import train; "
            "from codist.workloads import cifar; clean = cifar.CifarWorkload.val_dataset\n"
            "def poisoned(self):\n"
            "    x, y = clean(self).tensors; x = x.clone().float(); x[0].view(-1)[0] = float('nan')\n"
            "    return TensorDataset(x, y)\n"
            "cifar.CifarWorkload.val_dataset = poisoned\n"
            f"sys.exit(train.main(['--config', {str(tmp_path / 'config.yaml')!r}, '--out', {str(tmp_path)!r}]))")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == EXIT_DIVERGED, done.stderr[-3000:]
    line = [ln for ln in done.stderr.splitlines() if "the evaluation after update 2 is not finite" in ln]
    assert line and "val_loss nan (model 0)" in line[0], done.stderr[-3000:]
    assert not (tmp_path / "summary.json").exists()


def test_a_batch_larger_than_the_training_set_is_refused_by_codist_check(tmp_path):
    """Issue 42: `codist check` said "valid, fits" to train.batch_per_rank=2000000, and every rank then
    failed after launch (exit 1). The size is the embedded set's train_size (512 in TINY)."""
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(TINY))
    result = codist("check", str(path), "--set", "train.batch_per_rank=2000000")
    assert result.returncode == 2 and "Traceback" not in result.stderr and "valid" not in result.stdout
    assert result.stderr == (
        "codist: train.batch_per_rank=2000000 x 1 rank(s) per model is a batch of 2000000 samples, larger than "
        "the training set (512 samples: workload.train_size=512); allowed: train.batch_per_rank <= 512\n")
    # a disjoint split: each of 2 models draws from its 256; with 2 ranks per model a batch of 2 x 128 fits
    two = deep_update(TINY, {"parallel": {"world_size": 4, "models": 2},
                             "algorithm": {"name": "codistill", "data": "disjoint", "exchange_every": 2}})
    check_inputs(config.validate(deep_update(two, {"train": {"batch_per_rank": 128}})))
    with pytest.raises(ConfigError, match=r"batch of 258 samples, larger than the training set \(256 samples: "
                                          r"each model's part of workload.train_size=512 split disjoint over "
                                          r"parallel.models=2\); allowed: train.batch_per_rank <= 128"):
        check_inputs(config.validate(deep_update(two, {"train": {"batch_per_rank": 129}})))
    check_inputs(config.validate(deep_update(two, {"algorithm": {"data": "same"}, "train": {"batch_per_rank": 256}})))
    # and `codist run` refuses it before launch, with the same line and nothing written
    result = codist("run", str(path), "--set", "train.batch_per_rank=2000000", "--out", str(tmp_path / "run"))
    assert result.returncode == 2 and result.stderr.startswith("codist: train.batch_per_rank=2000000 x 1")
    assert not (tmp_path / "run").exists()


# ---------------------------------------------------------------- issue 52 N1, N39: every workload's batch, and memory

def _check(tmp_path, cfg: dict, *sets: str) -> subprocess.CompletedProcess:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return codist("check", str(path), *[a for s in sets for a in ("--set", s)])


def test_a_translation_batch_larger_than_its_pairs_is_refused(tmp_path):
    """N1: the refusal read only `train_size`; translation's embedded set is `pairs` sentence pairs."""
    cfg = {**TINY, "workload": {"name": "translation", "dataset": "embedded", "pairs": 4000}}
    result = _check(tmp_path, cfg, "train.batch_per_rank=2000000")
    assert result.returncode == 2 and "Traceback" not in result.stderr and "valid" not in result.stdout
    assert result.stderr == (
        "codist: train.batch_per_rank=2000000 x 1 rank(s) per model is a batch of 2000000 samples, larger than "
        "the training set (4000 samples: workload.pairs=4000); allowed: train.batch_per_rank <= 4000\n")
    check_inputs(config.validate(deep_update(cfg, {"train": {"batch_per_rank": 4000}})))
    many = deep_update(TINY, {"launch": {"oversubscribe": True}, "parallel": {"world_size": 4000}})
    with pytest.raises(ConfigError, match=r"\(512 samples: workload.train_size=512\); allowed: at most 512 rank\(s\) "
                                          r"per model, or a larger workload.train_size$"):
        check_inputs(config.validate(many))   # never 'train.batch_per_rank <= 0'


def test_an_embedded_lm_batch_beyond_this_machines_memory_does_not_fit(tmp_path):
    """N1: the embedded language is endless (no training set to bound the batch), but its stream keeps 3
    documents of doc_len int64 tokens a row: a batch of 2,000,000 rows needs 46,875 MB a rank. The lm run
    died of a MemoryError after 6.5 min; `codist check` said it fits and `codist run` now refuses it."""
    from codist.launching import launch
    cfg = {**TINY, "workload": {"name": "lm"}}
    big = config.validate(deep_update(cfg, {"train": {"batch_per_rank": 2_000_000}}))
    with pytest.raises(ConfigError) as e:
        launch.check_fits(big, "cpu", cores=2, memory=32_000)
    assert str(e.value) == (
        "parallel.world_size=1 does not fit: 1 rank(s) need at least 47,003 MB (128 MB a rank, plus 46,875 MB for "
        "the embedded language's stream: train.batch_per_rank=2000000 rows x 3 documents of workload.doc_len=1024 "
        "tokens x 8 bytes) and this machine has 32,000 MB; allowed: a smaller train.batch_per_rank")
    launch.check_fits(config.validate(deep_update(cfg, {"train": {"batch_per_rank": 64}})), "cpu", cores=2,
                      memory=32_000)
    if launch.memory_mb() < 47_003:   # this machine: `codist check` says so, `codist run` refuses before launch
        assert "# fits this machine: no: parallel.world_size=1 does not fit: 1 rank(s) need at least 47,003 MB" in \
            _check(tmp_path, cfg, "train.batch_per_rank=2000000").stdout
        path = tmp_path / "run.yaml"
        result = codist("run", str(path), "--set", "train.batch_per_rank=2000000", "--out", str(tmp_path / "run"))
        assert result.returncode == 2 and result.stderr.startswith("codist: parallel.world_size=1 does not fit: ")
        assert not (tmp_path / "run").exists()


def test_the_lm_streams_documents_per_row_are_the_streams_own():
    from codist.launching.launch import LM_EMBEDDED_DOCS_PER_ROW
    from codist.workloads.lm_data import EmbeddedStream
    assert LM_EMBEDDED_DOCS_PER_ROW == EmbeddedStream.CACHE_DOCS


def test_oversubscribed_ranks_are_bounded_by_memory(tmp_path):
    """N39: with launch.oversubscribe=true, 4,000 ranks 'fit' a 2-core machine. More ranks than cores only
    run slower; at 128 MB a rank at least (a 4-rank TINY run's PSS: 123 MB) 4,000 need 512,000 MB."""
    from codist.launching import launch
    over = {"launch": {"oversubscribe": True}, "parallel": {"world_size": 4000}}
    with pytest.raises(ConfigError) as e:
        launch.check_fits(config.validate(deep_update(TINY, over)), "cpu", cores=2, memory=16_000)
    assert str(e.value) == ("parallel.world_size=4000 does not fit: 4000 rank(s) need at least 512,000 MB (at least "
                            "128 MB a rank) and this machine has 16,000 MB; allowed: parallel.world_size <= 125")
    launch.check_fits(config.validate(deep_update(TINY, {**over, "parallel": {"world_size": 8}})), "cpu", cores=2,
                      memory=16_000)   # the Sun replications' 8 ranks on 2 cores still fit
    out = _check(tmp_path, TINY, "launch.oversubscribe=true", "parallel.world_size=4000",
                 "workload.train_size=100000").stdout
    assert "# fits this machine: no: parallel.world_size=4000 does not fit: 4000 rank(s) need at least 512,000 MB" \
        in out, out


def test_an_out_directory_that_is_a_symlink_loop_is_one_line(tmp_path):
    """N24's sibling: `codist run --out` a symbolic link loop gave a 25-line traceback (resolve())."""
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(TINY))
    result = codist("run", str(path), "--out", str(tmp_path / "a"))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr == (f"codist: --out {tmp_path / 'a'}: cannot be resolved (Symlink loop from "
                             f"'{tmp_path / 'a'}'); expected a run directory or a path where one can be made\n")
