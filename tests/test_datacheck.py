"""`codist data check` (src/codist/datacheck.py) on tiny real trees in the real formats: CIFAR python
pickles, an ImageFolder with 2 classes of real PNGs, fairseq-preprocess output, Criteo TSV lines and
text shards; each damage is one line naming the path and the expected layout."""
from __future__ import annotations

import gzip
import pickle

import numpy as np
import pytest

from codist import cli, datacheck


def cifar_tree(root, n=4):
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {b"data": np.zeros((n, 3072), np.uint8), b"labels": list(range(n))}
        (folder / name).write_bytes(pickle.dumps(batch, protocol=2))
    return folder


def test_cifar(tmp_path):
    folder = cifar_tree(tmp_path)
    problems, notes = datacheck.check("cifar", tmp_path)
    assert problems == [] and notes == [f"cifar10: 20 training and 4 test images in {folder}"]
    (folder / "data_batch_3").write_bytes((folder / "data_batch_3").read_bytes()[:50])   # truncated
    batch = {b"data": np.zeros((4, 3072), np.float32), b"labels": [0, 1, 2, 3]}
    (folder / "test_batch").write_bytes(pickle.dumps(batch, protocol=2))
    problems, _ = datacheck.check("cifar", tmp_path)
    assert len(problems) == 2
    assert problems[0].startswith(f"{folder / 'data_batch_3'}: not a readable CIFAR python pickle")
    assert problems[1].startswith(f"{folder / 'test_batch'}: b'data' must be a uint8 array")
    assert all("expected <data_dir>/cifar-10-batches-py/ holding" in p for p in problems)
    # cifar100's files are not there: one line naming every missing file
    problems, _ = datacheck.check("cifar", tmp_path, dataset="cifar100")
    assert len(problems) == 1 and "cifar-100-python/train" in problems[0]


def imagefolder(root):
    from PIL import Image
    for split in ("train", "val"):
        for c in ("n01440764", "n01443537"):
            (root / split / c).mkdir(parents=True)
            Image.new("RGB", (8, 8), (10, 20, 30)).save(root / split / c / "a.png")


def test_imagefolder(tmp_path):
    imagefolder(tmp_path)
    problems, notes = datacheck.check("imagenet", tmp_path)
    assert problems == []
    assert notes[:2] == ["train/: 2 classes, 2 images", "val/: 2 classes, 2 images"]
    assert "not ImageNet-1k's 1000" in notes[2]
    (tmp_path / "val" / "ILSVRC2012_val_00000001.JPEG").write_bytes(b"x")        # unsorted val image
    (tmp_path / "train" / "n01440764" / "a.png").write_bytes(b"not a png")       # damaged image
    (tmp_path / "train" / "n09999999").mkdir()                                    # class without images
    problems, _ = datacheck.check("imagenet", tmp_path)
    assert [p.split(":")[0] for p in problems] == [
        str(tmp_path / "train"), str(tmp_path / "train" / "n01440764" / "a.png"), str(tmp_path / "val"),
        str(tmp_path)]
    assert "class folder(s) without images" in problems[0]
    assert "unreadable image" in problems[1]
    assert "1 files directly in val/ (e.g. ILSVRC2012_val_00000001.JPEG)" in problems[2]
    assert "train/ and val/ hold different class folders (1 differ, e.g. n09999999)" in problems[3]
    assert all(p.endswith("(torchvision ImageFolder; the same class folders in both)") for p in problems)


@pytest.fixture(scope="module")
def fairseq_dir(tmp_path_factory):
    from codist.workloads import translation_data as tdata
    root = tmp_path_factory.mktemp("iwslt")
    pairs = [("das ist gut", "that is good"), ("ein haus", "a house"), ("gut", "good")]
    tdata.write_text(root / "text", "train", pairs, "de", "en")
    tdata.write_text(root / "text", "valid", pairs[:2], "de", "en")
    tdata.preprocess(root / "text", root / "bin", "de", "en")
    return root / "bin"


def test_fairseq(fairseq_dir, tmp_path):
    problems, notes = datacheck.check("translation", fairseq_dir, source_lang="de", target_lang="en")
    assert problems == []
    assert "train: 3 pairs, 3.00 target tokens per sentence (eos included)" in notes   # (4 + 3 + 2) / 3
    import shutil
    broken = tmp_path / "bin"
    shutil.copytree(fairseq_dir, broken)
    (broken / "valid.de-en.en.idx").unlink()
    problems, _ = datacheck.check("translation", broken, source_lang="de", target_lang="en")
    assert len(problems) == 1 and f"lacks {broken / 'valid.de-en.en.idx'}" in problems[0]
    assert "the output folder of fairseq-preprocess" in problems[0]
    shutil.copy(fairseq_dir / "valid.de-en.en.idx", broken)
    bin_file = broken / "train.de-en.en.bin"
    bin_file.write_bytes(bin_file.read_bytes()[:-2])                              # truncated
    problems, _ = datacheck.check("translation", broken, source_lang="de", target_lang="en")
    assert len(problems) == 1 and problems[0].startswith(f"{broken / 'train.de-en.en'}.bin:")
    # the wrong language pair: every missing file named
    problems, _ = datacheck.check("translation", fairseq_dir, source_lang="en", target_lang="de")
    assert len(problems) == 1 and "dict.en.txt" not in problems[0] and "train.en-de.en.bin" in problems[0]


def criteo_line(label="0"):
    return "\t".join([label] + ["1"] * 13 + ["68fd1e64"] * 26) + "\n"


def test_criteo(tmp_path):
    (tmp_path / "train.txt").write_text(criteo_line("1") + criteo_line() * 3)
    problems, notes = datacheck.check("ctr", tmp_path)
    assert problems == [] and notes == [f"{tmp_path / 'train.txt'}: first 4 lines parse, click rate 0.250"]
    (tmp_path / "train.txt").write_text(criteo_line() + criteo_line()[2:])       # label field lost on line 2
    problems, _ = datacheck.check("ctr", tmp_path)
    assert len(problems) == 1 and problems[0].startswith(f"{tmp_path / 'train.txt'}:2: expected label (0 or 1)")
    problems, _ = datacheck.check("ctr", tmp_path, val_file="valid.txt")
    assert problems[-1].startswith(f"{tmp_path / 'valid.txt'}: does not exist; expected <data_dir>/train.txt")


def test_text(tmp_path):
    problems, _ = datacheck.check("lm", tmp_path)
    assert len(problems) == 1 and "holds no text shards; expected a folder" in problems[0]
    with gzip.open(tmp_path / "a.txt.gz", "wt") as f:
        f.write("one paragraph\nanother\n")
    problems, notes = datacheck.check("lm", tmp_path)
    assert problems == [] and notes[0].startswith("1 shards")
    (tmp_path / "a.txt.gz").write_bytes((tmp_path / "a.txt.gz").read_bytes()[:12])   # truncated gzip
    problems, _ = datacheck.check("lm", tmp_path)
    assert len(problems) == 1 and problems[0].startswith(f"{tmp_path / 'a.txt.gz'}: unreadable text shard")


def test_cli(tmp_path, capsys):
    cifar_tree(tmp_path)
    assert cli.main(["data", "check", "cifar", str(tmp_path)]) == 0
    assert capsys.readouterr().out.endswith(f"cifar data in {tmp_path}: ok\n")
    assert cli.main(["data", "check", "imagenet", str(tmp_path / "nothing")]) == 1
    err = capsys.readouterr().err
    assert err == f"{tmp_path / 'nothing'}: does not exist; expected <data_dir>/train/<class>/<image> and " \
                  "<data_dir>/val/<class>/<image> (torchvision ImageFolder; the same class folders in both)\n"
    config = tmp_path / "run.yaml"
    config.write_text(f"workload: {{name: cifar, dataset: cifar10, data_dir: {tmp_path}}}\n")
    assert cli.main(["data", "check", "--config", str(config)]) == 0
