"""`codist data fake` (src/codist/fake_data): every data set the full-scale plan reads is written
in its real on-disk format; each passes `codist data check --config` (the real command, in a
subprocess, with the plan's own run configs) and loads through the workload's reader with the
full-scale data sections, holding one update of every planned run as a rehearsal runs it (at
most REHEARSAL_RANKS ranks per model group, the planned batch per rank and data split)."""
from __future__ import annotations

import gzip
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from codist import config as config_mod
from codist import datacheck, fake_data
from codist.data_root import with_data_root, workload_with_data
from codist.workloads import build_workload

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflows"))
from experiments import load_plan  # noqa: E402

#: ranks per model group in a rehearsal (issue 24: at least 2 where the full run has more than 1)
REHEARSAL_RANKS = 2
CODIST = [sys.executable, "-m", "codist"]


@pytest.fixture(scope="module")
def plan():
    return load_plan(ROOT / "replications", "full", tier="paper")


@pytest.fixture(scope="module")
def fake_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("fake-data")
    fake_data.write(root, log=lambda line: None)
    return root


def data_sections(plan) -> dict[tuple, list]:
    """(data_dir, dataset) -> the plan's run configs reading it."""
    out: dict[tuple, list] = {}
    for rid in plan.configs:
        cfg = plan.config(rid)
        if getattr(cfg.workload, "data_dir", None):
            out.setdefault((cfg.workload.data_dir, cfg.workload.dataset), []).append(cfg)
    return out


def test_the_fake_root_holds_every_data_set_the_full_plan_reads(plan):
    assert {d for d, _ in data_sections(plan)} == set(fake_data.DATA_SETS)


def configs_of_each_data_set(plan, folder: Path) -> dict[tuple, Path]:
    """(data_dir, dataset) -> a run config of the plan reading it (its language pair, CIFAR
    variant, Criteo files), written as YAML into `folder`."""
    out = {}
    for (data_dir, dataset), cfgs in sorted(data_sections(plan).items()):
        path = out[data_dir, dataset] = folder / f"{data_dir}-{dataset}.yaml"
        path.write_text(yaml.safe_dump(config_mod.to_dict(cfgs[0]), sort_keys=False))
    return out


def test_data_check_accepts_each_data_set(plan, fake_root, tmp_path, capsys):
    """`codist data check --config RUN --data-root FAKE`'s code (codist.datacheck.main), in this process."""
    for (data_dir, _), path in configs_of_each_data_set(plan, tmp_path).items():
        code = datacheck.main(["check", "--config", str(path), "--data-root", str(fake_root)])
        out = capsys.readouterr().out
        assert code == 0 and out.rstrip().endswith(f"data in {fake_root / data_dir}: ok"), out


def test_codist_check_accepts_each_full_scale_preset(fake_root, capsys):
    """`codist check PRESET --data-root FAKE` (its input checks: codist.launching.inputs) for every preset."""
    from codist import cli
    for preset in sorted((ROOT / "replications" / "presets").glob("*.yaml")):
        assert cli.main(["check", str(preset), "--data-root", str(fake_root)]) == 0, capsys.readouterr().err
        assert "valid" in capsys.readouterr().out


@pytest.mark.slow   # eight processes importing torch (two also fairseq): ~15 s of CPU
def test_the_codist_data_check_command_accepts_each_data_set(plan, fake_root, tmp_path):
    """The real command, a process per data set, all started at once."""
    procs = {key: subprocess.Popen(CODIST + ["data", "check", "--config", str(path), "--data-root", str(fake_root)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for key, path in configs_of_each_data_set(plan, tmp_path).items()}
    for key, p in procs.items():
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, (key, out, err)
        assert out.rstrip().endswith(f"data in {fake_root / key[0]}: ok"), (key, out)


@pytest.mark.parametrize("data_dir", list(fake_data.DATA_SETS))
def test_each_loads_through_the_workload_reader_for_every_planned_run(plan, fake_root, data_dir):
    """The ranks' path: the workload built from the run's data section joined to the fake root
    (workload_with_data), every model's training stream of every planned run at rehearsal size,
    a batch of the first, a validation item."""
    for (d, dataset), cfgs in data_sections(plan).items():
        if d != data_dir:
            continue
        w = workload_with_data(with_data_root(cfgs[0], fake_root))
        assert w.data_dir == str(fake_root / data_dir)
        workload = build_workload(w, seed=0)
        shapes = {(c.algorithm.model_data(), c.parallel.models, c.train.batch_per_rank,
                   min(REHEARSAL_RANKS, c.parallel.world_size // c.parallel.models)) for c in cfgs}
        first = None
        for split, models, batch, ranks in sorted(shapes, key=lambda s: s[2]):   # raises if a part is too small
            streams = [workload.train_stream(split, m, models, batch, ranks, 0, 0) for m in range(models)]
            first = first or (streams[0], batch)
        stream, batch = first
        # ImageNet's PrefetchStream decodes in worker processes; its BatchStream is the same reader in this one
        inputs, targets = getattr(stream, "stream", stream).batch(0)
        assert len(targets) == batch
        assert len(workload.val_dataset()) > 0 and workload.val_dataset()[0] is not None
        if w.name in ("imagenet", "cifar"):
            assert workload.num_classes == {"imagenet": 1000, "cifar10": 10, "cifar100": 100}.get(dataset, 1000)
        if w.name == "lm":   # SentencePiece trained on the shards at Anil's size
            assert workload.num_classes == w.spm_vocab_size == 24006


def test_the_formats_are_the_originals(fake_root):
    """What the readers ignore but the formats have: CIFAR's meta files and Python 2 pickle
    opcodes, the quarter's linked files, the WET framing, the Criteo column count."""
    c10 = fake_root / "cifar" / "cifar-10-batches-py"
    raw = (c10 / "data_batch_1").read_bytes()
    assert raw.startswith(b"\x80\x02}") and b"_codecs" not in raw   # protocol 2, bytes as Python 2 str
    meta = pickle.loads((c10 / "batches.meta").read_bytes(), encoding="bytes")
    assert meta[b"label_names"][0] == b"airplane" and meta[b"num_vis"] == 3072
    meta = pickle.loads((fake_root / "cifar" / "cifar-100-python" / "meta").read_bytes(), encoding="bytes")
    assert len(meta[b"fine_label_names"]) == 100 and len(meta[b"coarse_label_names"]) == 20
    train = pickle.loads((fake_root / "cifar" / "cifar-100-python" / "train").read_bytes(), encoding="bytes")
    assert {(f, c) for f, c in zip(train[b"fine_labels"], train[b"coarse_labels"])} <= \
        set(enumerate(fake_data.cifar.FINE_TO_COARSE))

    q = fake_root / "imagenet_quarter"
    assert (q / "val").is_symlink() and (q / "val").resolve() == (fake_root / "imagenet" / "val").resolve()
    some = next((q / "train" / "n01440764").iterdir())
    assert some.stat().st_ino == (fake_root / "imagenet" / "train" / "n01440764" / some.name).stat().st_ino
    from PIL import Image
    modes = {Image.open(p).mode for p in (fake_root / "imagenet" / "train" / "n01440764").iterdir()}
    assert "L" in modes   # a grayscale JPEG, as ILSVRC-2012 has

    shard = sorted((fake_root / "common_crawl_wet").rglob("*.warc.wet.gz"))[0]
    text = gzip.decompress(shard.read_bytes())
    assert text.startswith(b"WARC/1.0\r\nWARC-Type: warcinfo\r\n") and b"WARC-Type: conversion\r\n" in text

    lines = (fake_root / "criteo" / "train.txt").read_text().splitlines()
    assert all(len(line.split("\t")) == 40 for line in lines)

    for d in fake_data.DATA_SETS:
        assert (fake_root / d / fake_data.MARKER).is_file()


def test_codist_data_help_lists_the_command(capsys):
    with pytest.raises(SystemExit):
        datacheck.main(["--help"])
    assert "codist data fake --root DIR" in " ".join(capsys.readouterr().out.split())


def test_the_command_writes_again_but_never_over_real_data(tmp_path):
    root = tmp_path / "root"
    done = subprocess.run(CODIST + ["data", "fake", "--root", str(root), "--only", "criteo"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    first = (root / "criteo" / "train.txt").read_bytes()
    assert done.stdout.startswith(f"{root / 'criteo'}: train.txt: 1,000 lines")
    again = subprocess.run(CODIST + ["data", "fake", "--root", str(root), "--only", "criteo"],
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and (root / "criteo" / "train.txt").read_bytes() == first   # same seed, same bytes
    real = root / "cifar"
    real.mkdir()
    (real / "data_batch_1").write_bytes(b"real")
    for only in ([], ["--only", "criteo"]):   # not even beside a real data set
        refused = subprocess.run(CODIST + ["data", "fake", "--root", str(root)] + only,
                                 capture_output=True, text=True, timeout=120)
        assert refused.returncode == 2
        assert refused.stderr.strip().startswith(f"codist data fake: {real}: exists and is not fake data")
    assert (real / "data_batch_1").read_bytes() == b"real" and not (root / "imagenet").exists()
    assert (root / "criteo" / "train.txt").read_bytes() == first
