"""`codist data check` (src/codist/datacheck.py) on tiny real trees in the real formats: CIFAR python
pickles, an ImageFolder with 2 classes of real PNGs, fairseq-preprocess output, Criteo TSV lines and
text shards; each damage is one line naming the path and the expected layout."""
from __future__ import annotations

import gzip
import pickle

import numpy as np
import pytest
import yaml
from conftest import TINY

from codist import cli, datacheck
from codist.workloads.lm_config import TEXT_LAYOUT


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


def png(path):
    from PIL import Image
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8), (10, 20, 30)).save(path)


def imagefolder(root):
    for split in ("train", "val"):
        for c in ("n01440764", "n01443537"):
            png(root / split / c / "a.png")


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


# ---------------------------------------------------------------- what make mutation found unpinned (issue 52)

def test_cifar_counts_only_the_images_of_readable_batches(tmp_path):
    folder = cifar_tree(tmp_path)
    (folder / "data_batch_2").write_bytes(b"")
    (folder / "test_batch").write_bytes(b"not a pickle")
    problems, notes = datacheck.check("cifar", tmp_path)
    assert len(problems) == 2
    assert notes == [f"cifar10: 16 training and 0 test images in {folder}"]   # 4 readable batches of 4


def test_five_unreadable_images_are_named_and_a_sixth_is_counted(tmp_path):
    imagefolder(tmp_path)
    for i in range(5):
        (tmp_path / "train" / "n01443537" / f"bad{i}.png").write_bytes(b"not a png")
    problems, _ = datacheck.check("imagenet", tmp_path)
    assert [p.split(":")[0] for p in problems] == [str(tmp_path / "train" / "n01443537" / f"bad{i}.png")
                                                   for i in range(5)]
    (tmp_path / "train" / "n01443537" / "bad5.png").write_bytes(b"not a png")
    problems, _ = datacheck.check("imagenet", tmp_path)
    assert len(problems) == 6 and all("unreadable image" in p for p in problems[:5])
    assert problems[5].startswith(f"{tmp_path / 'train'}: 1 more unreadable images; expected <data_dir>/train/")


def test_the_first_image_is_decoded_a_truncated_jpeg_whose_header_is_whole(tmp_path):
    """Every image's header is read, the first image's pixels too: the first by name of the first class
    folder, as ImageFolder reads it."""
    from PIL import Image
    imagefolder(tmp_path)
    first = tmp_path / "train" / "n01440764" / "0.jpg"
    noise = np.random.default_rng(0).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    Image.fromarray(noise).save(first, quality=95)
    first.write_bytes(first.read_bytes()[:len(first.read_bytes()) // 2])
    assert datacheck.image_header_problem(first) is None   # the header alone does not show it
    problems, notes = datacheck.check("imagenet", tmp_path)
    assert len(problems) == 1
    assert problems[0].startswith(f"{first}: unreadable image (OSError: image file is truncated")
    assert notes[0] == "train/: 2 classes, 3 images"


def test_files_that_are_not_images_are_left_out_as_imagefolder_leaves_them(tmp_path):
    imagefolder(tmp_path)
    (tmp_path / "train" / "n01440764" / "labels.txt").write_text("n01440764 tench\n")
    (tmp_path / "val" / "n01440764" / "b.png").mkdir()    # a folder named like an image
    problems, notes = datacheck.check("imagenet", tmp_path)
    assert problems == [] and notes[:2] == ["train/: 2 classes, 2 images", "val/: 2 classes, 2 images"]


def test_a_missing_train_folder_still_checks_val(tmp_path):
    png(tmp_path / "val" / "n01440764" / "a.png")
    (tmp_path / "val" / "n01440764" / "b.png").write_bytes(b"not a png")
    problems, notes = datacheck.check("imagenet", tmp_path)
    assert [p.split(":")[0] for p in problems] == [str(tmp_path / "train"),
                                                   str(tmp_path / "val" / "n01440764" / "b.png")]
    assert problems[0].startswith(f"{tmp_path / 'train'}: missing; expected <data_dir>/train/<class>/<image>")
    assert notes == ["val/: 1 classes, 2 images"]


def test_each_finding_names_its_first_example_by_name(tmp_path):
    """Loose files, empty class folders and class folders only one split has: how many, and the first by name."""
    imagefolder(tmp_path)
    for c in ("n09999999", "n09999998"):
        (tmp_path / "train" / c).mkdir()
    for name in ("ILSVRC2012_val_00000002.JPEG", "ILSVRC2012_val_00000001.JPEG"):
        (tmp_path / "val" / name).write_bytes(b"x")
    problems, _ = datacheck.check("imagenet", tmp_path)
    assert len(problems) == 3
    assert "2 class folder(s) without images" in problems[0]
    assert f"e.g. {tmp_path / 'train' / 'n09999998'};" in problems[0]
    assert "2 files directly in val/ (e.g. ILSVRC2012_val_00000001.JPEG)" in problems[1]
    assert "train/ and val/ hold different class folders (2 differ, e.g. n09999998)" in problems[2]


def test_text_reads_the_first_shard_and_sums_every_shard_in_decimal_gb(tmp_path):
    (tmp_path / "a.txt").write_text("")
    (tmp_path / "b.txt").write_text("one paragraph\n")
    problems, notes = datacheck.check("lm", tmp_path)
    assert problems == [f"{tmp_path / 'a.txt'}: no paragraph in the first shard; expected {TEXT_LAYOUT}"]
    (tmp_path / "a.txt").write_text("one paragraph\n")
    # exact decimal GB: 0.125 GB prints 0.12 and 0.375 GB 0.38 (a tie rounds to even); sparse, nothing written
    for total, shown in ((125_000_000, "0.12"), (375_000_000, "0.38")):
        with (tmp_path / "b.txt").open("r+b") as f:
            f.truncate(total - len("one paragraph\n"))
        problems, notes = datacheck.check("lm", tmp_path)
        assert problems == [] and notes == [f"2 shards, {shown} GB (first: {tmp_path / 'a.txt'})"]


def test_a_missing_tokenizer_model_is_named_and_a_present_one_is_not(tmp_path):
    (tmp_path / "text").mkdir()
    (tmp_path / "text" / "a.txt").write_text("one paragraph\n")
    model = tmp_path / "spm.model"
    problems, _ = datacheck.check("lm", tmp_path / "text", tokenizer_model=str(model))
    assert problems == [f"{model}: the SentencePiece model (workload.tokenizer_model) does not exist"]
    model.write_bytes(b"a model")
    assert datacheck.check("lm", tmp_path / "text", tokenizer_model=str(model))[0] == []


def test_criteo_reads_the_first_1000_lines(tmp_path):
    """A sample: a damaged line 1001 is not seen (a run's reader finds it)."""
    (tmp_path / "train.txt").write_text(criteo_line("1") + criteo_line() * 999 + "damaged\n")
    problems, notes = datacheck.check("ctr", tmp_path)
    assert problems == [] and notes == [f"{tmp_path / 'train.txt'}: first 1,000 lines parse, click rate 0.001"]


def test_a_missing_criteo_train_file_still_checks_the_validation_file(tmp_path):
    (tmp_path / "valid.txt").write_text(criteo_line("1") + criteo_line())
    problems, notes = datacheck.check("ctr", tmp_path, val_file="valid.txt")
    assert len(problems) == 1 and problems[0].startswith(f"{tmp_path / 'train.txt'}: does not exist")
    assert notes == [f"{tmp_path / 'valid.txt'}: first 2 lines parse, click rate 0.500"]


def test_a_damaged_fairseq_dictionary_is_one_line(fairseq_dir, tmp_path):
    import shutil
    broken = tmp_path / "bin"
    shutil.copytree(fairseq_dir, broken)
    (broken / "dict.de.txt").write_text("das\n")   # no count
    problems, notes = datacheck.check("translation", broken, source_lang="de", target_lang="en")
    assert len(problems) == 1 and problems[0].startswith(f"{broken / 'dict.de.txt'}: not a fairseq dictionary")
    assert len(notes) == 1 and notes[0].startswith("dict.en.txt: ")   # the other dictionary read, no data


def test_fairseq_sides_of_different_lengths_are_named(fairseq_dir, tmp_path):
    """train's target side replaced by valid's (2 sentences, the same dictionary): 3 source, 2 target."""
    import shutil
    broken = tmp_path / "bin"
    shutil.copytree(fairseq_dir, broken)
    for ext in ("bin", "idx"):
        shutil.copy(fairseq_dir / f"valid.de-en.en.{ext}", broken / f"train.de-en.en.{ext}")
    problems, _ = datacheck.check("translation", broken, source_lang="de", target_lang="en")
    assert len(problems) == 1
    assert problems[0].startswith(f"{broken / 'train.de-en'}.{{de,en}}: 3 source but 2 target sentences; expected ")


def test_an_unknown_workload_is_a_value_error_naming_it(tmp_path):
    with pytest.raises(ValueError, match="^workload 'nope' is not registered"):
        datacheck.check("nope", tmp_path)


def test_cli_prints_the_notes_and_refuses_an_incomplete_command(tmp_path, capsys):
    cifar_tree(tmp_path)
    assert cli.main(["data", "check", "cifar", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"  cifar10: 20 training and 4 test images in {tmp_path / 'cifar-10-batches-py'}\n" in out
    for argv in (["data"], ["data", "check", "cifar"], ["data", "prepare"]):   # usage errors: exit 2
        with pytest.raises(SystemExit) as e:
            cli.main(argv)
        assert e.value.code == 2, argv
    err = capsys.readouterr().err
    assert "give WORKLOAD DATA_DIR or --config CONFIG" in err
    assert "the following arguments are required: --config" in err


def test_cli_config_of_a_workload_without_a_data_folder_is_ok(tmp_path, capsys):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(TINY))
    assert cli.main(["data", "check", "--config", str(path)]) == 0
    assert capsys.readouterr().out == f"codist data check: {path}: workload.dataset 'embedded' reads no data folder\n"


def test_prepare_exit_codes_bad_config_2_nothing_to_prepare_0_prepared_0(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**TINY, "workload": {"name": "cifar", "dataset": "cifar10", "data_dir": "cifar"}}))
    assert cli.main(["data", "prepare", "--config", str(bad)]) == 2   # relative data_dir, no data root
    assert capsys.readouterr().err.startswith("codist data prepare: workload.data_dir='cifar' is relative")
    cifar = tmp_path / "cifar.yaml"
    cifar.write_text(yaml.safe_dump(TINY))
    assert cli.main(["data", "prepare", "--config", str(cifar)]) == 0
    assert capsys.readouterr().out == f"codist data prepare: {cifar}: nothing to prepare (workload 'cifar')\n"
    (tmp_path / "text").mkdir()
    (tmp_path / "text" / "a.txt").write_text("a paragraph of text to tokenise byte by byte\n" * 20)
    lm = tmp_path / "lm.yaml"
    lm.write_text(yaml.safe_dump({**TINY, "workload": {
        "name": "lm", "dataset": "text", "tokenizer": "bytes", "data_dir": str(tmp_path / "text"),
        "cache_dir": str(tmp_path / "cache"), "seq_len": 8, "val_seq_len": 16, "val_tokens": 100}}))
    assert cli.main(["data", "prepare", "--config", str(lm)]) == 0
    out = capsys.readouterr().out
    # 20 paragraphs of 44 bytes, each with its end-of-paragraph id
    assert out.startswith(f"lm data in {tmp_path / 'text'}: 900 tokens of 1 shard(s)"), out
    assert any((tmp_path / "cache").iterdir())


def test_images_in_nested_folders_are_counted_in_the_order_imagefolder_reads_them(tmp_path):
    """torchvision's ImageFolder reads every folder below a class folder (sorted by folder, then name):
    a class whose images all sit one folder down is not empty, and the first image decoded is the one
    ImageFolder's first sample names."""
    from torchvision.datasets import ImageFolder
    for split in ("train", "val"):
        png(tmp_path / split / "n01440764" / "z.png")
        png(tmp_path / split / "n01440764" / "a" / "b.png")
        png(tmp_path / split / "n01443537" / "sub" / "c.png")
    problems, notes = datacheck.check("imagenet", tmp_path)
    assert problems == [] and notes[:2] == ["train/: 2 classes, 3 images", "val/: 2 classes, 3 images"]
    images, loops = datacheck.class_images(tmp_path / "train" / "n01440764", (".png",))
    assert [str(p) for p in images] == [s for s, _ in ImageFolder(str(tmp_path / "train")).samples][:2]
    assert images[0].name == "z.png" and loops == []


def test_a_folder_link_back_up_is_one_line_not_an_endless_walk(tmp_path):
    imagefolder(tmp_path)
    (tmp_path / "train" / "n01440764" / "again").symlink_to(tmp_path / "train" / "n01440764")
    problems, notes = datacheck.check("imagenet", tmp_path)
    from codist.workloads.imagenet_config import IMAGEFOLDER_LAYOUT
    assert problems == [f"{tmp_path / 'train' / 'n01440764' / 'again'}: a link to a folder already read "
                        f"(ImageFolder reads it again, forever if it points above itself); expected {IMAGEFOLDER_LAYOUT}"]
    assert notes[0] == "train/: 2 classes, 2 images"


def test_the_walk_goes_on_past_a_link_back_up(tmp_path):
    """After a folder link back up, the rest of the class folder is still read: two subfolders, each
    with an image and a link to the class folder, so whichever is walked first, its link comes before
    the other subfolder's image."""
    cls = tmp_path / "train" / "n01440764"
    for sub in ("a", "b"):
        png(cls / sub / f"{sub}.png")
        (cls / sub / "up").symlink_to(cls)
    images, loops = datacheck.class_images(cls, (".png",))
    assert [p.name for p in images] == ["a.png", "b.png"]
    assert sorted(loops) == [cls / "a" / "up", cls / "b" / "up"]
