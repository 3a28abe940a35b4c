"""Safe, checked inputs (issue 17): crafted, broken or mistyped data files are refused with one
line naming the file; missing data paths fail `codist check` before anything launches. Every
file here is written in the real format (CIFAR python pickles, gzip shards, fairseq names)."""
from __future__ import annotations

import gzip
import os
import pickle
import shutil

import numpy as np
import pytest
import yaml

from codist import cli, config
from codist.config import ConfigError
from codist.launching.inputs import check_inputs
from codist.workloads.cifar import read_cifar
from codist.workloads.lm_data import read_paragraphs
from test_cifar_workload import _dump, write_cifar10, write_cifar100
from test_imagenet_workload import workload as imagenet_workload
from test_imagenet_workload import write_imagefolder
from test_translation_workload import write_fairseq

# --------------------------------------------------------------------------- CIFAR pickles


class _Payload:
    """Unpickling this runs `touch <marker>`: what a crafted file in a data_dir could do."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_crafted_cifar_pickle_runs_no_code(tmp_path):
    write_cifar10(tmp_path)
    batch = tmp_path / "cifar-10-batches-py" / "data_batch_2"
    marker = tmp_path / "pwned"
    _dump(batch, {b"data": np.zeros((2, 3072), np.uint8), b"labels": [0, 1], b"x": _Payload(marker)})
    with pytest.raises(ValueError) as e:
        read_cifar(tmp_path, "cifar10")
    assert not marker.exists()
    msg = str(e.value)
    assert msg.startswith(f"{batch}: refused to load the global ") and "system" in msg


@pytest.mark.parametrize("content", [b"", b"\x80\x04\x95", b"this is a text file, not a pickle\n"])
def test_empty_truncated_or_foreign_cifar_file_is_named(tmp_path, content):
    write_cifar10(tmp_path)
    batch = tmp_path / "cifar-10-batches-py" / "data_batch_4"
    batch.write_bytes(content)
    with pytest.raises(ValueError, match=rf"^{batch}: not a readable CIFAR python pickle"):
        read_cifar(tmp_path, "cifar10")


def test_truncated_real_batch_is_named(tmp_path):
    write_cifar100(tmp_path)
    batch = tmp_path / "cifar-100-python" / "train"
    batch.write_bytes(batch.read_bytes()[:-40])
    with pytest.raises(ValueError, match=rf"^{batch}: not a readable CIFAR python pickle"):
        read_cifar(tmp_path, "cifar100")


@pytest.mark.parametrize("pixels", [np.full((2, 3072), 300, np.int64), np.full((2, 3072), 0.5, np.float32),
                                    np.full((2, 3072), 7, np.int64)])
def test_wrong_pixel_dtype_is_refused_not_converted(tmp_path, pixels):
    write_cifar10(tmp_path)
    batch = tmp_path / "cifar-10-batches-py" / "test_batch"
    _dump(batch, {b"data": pixels, b"labels": [0, 1]})
    with pytest.raises(ValueError, match=rf"^{batch}: b'data' must be a uint8 array .* got a {pixels.dtype} array"):
        read_cifar(tmp_path, "cifar10")


@pytest.mark.parametrize("labels, words", [
    ([0, 10], r"labels in \[0, 10\]; expected \[0, 10\)"),
    ([0, -1], r"labels in \[-1, 0\]; expected \[0, 10\)"),
    ([0.0, 1.5], "must be a list of integer class labels"),
    ([True, False], "must be a list of integer class labels"),
])
def test_labels_out_of_range_or_not_integers_name_the_file(tmp_path, labels, words):
    write_cifar10(tmp_path)
    batch = tmp_path / "cifar-10-batches-py" / "data_batch_1"
    _dump(batch, {b"data": np.zeros((2, 3072), np.uint8), b"labels": labels})
    with pytest.raises(ValueError, match=rf"^{batch}: b'labels' .*{words}"):
        read_cifar(tmp_path, "cifar10")


def test_python2_style_and_numpy_label_batches_still_load(tmp_path):
    """Protocol 2 (the official files' era) and labels given as an int array both read."""
    write_cifar10(tmp_path)
    batch = tmp_path / "cifar-10-batches-py" / "data_batch_5"
    with open(batch, "wb") as f:
        pickle.dump({b"data": np.arange(2 * 3072).astype(np.uint8).reshape(2, 3072), b"batch_label": b"x",
                     b"labels": np.array([3, 9], np.int32)}, f, protocol=2)
    train_x, train_y, _, _ = read_cifar(tmp_path, "cifar10")
    assert train_x.dtype == np.uint8 and train_x.shape == (14, 3, 32, 32) and train_y[-2:].tolist() == [3, 9]


# --------------------------------------------------------------------------- LM shards


def test_bad_gz_shard_is_named(tmp_path):
    good = tmp_path / "00.txt.gz"
    with gzip.open(good, "wt") as f:
        f.write("a paragraph\n" * 2000)
    truncated = tmp_path / "01.txt.gz"
    truncated.write_bytes(good.read_bytes()[:-30])
    not_gzip = tmp_path / "02.txt.gz"
    not_gzip.write_text("plain text with a .gz name\n")
    assert list(read_paragraphs(good)) == ["a paragraph"] * 2000
    for bad in (truncated, not_gzip):
        with pytest.raises(ValueError, match=rf"^{bad}: unreadable text shard"):
            list(read_paragraphs(bad))


def test_damaged_token_cache_or_tokenizer_model_is_named(tmp_path):
    from codist.workloads.lm_config import LmConfig
    from codist.workloads.lm_data import SentencePieceTokenizer, TextCorpus
    (tmp_path / "00.txt").write_text("a first paragraph of text\n" * 20)
    cfg = LmConfig(dataset="text", data_dir=str(tmp_path), tokenizer="bytes", val_tokens=40, val_seq_len=8)
    TextCorpus(cfg)
    [cache] = (tmp_path / ".codist_cache").glob("tokens-*.npy")
    cache.write_bytes(cache.read_bytes()[:100])
    with pytest.raises(ValueError, match=rf"^{cache}: unreadable token cache"):
        TextCorpus(cfg)
    np.save(cache, np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match=rf"^{cache}: the token cache must be a 1-d integer array, got float32"):
        TextCorpus(cfg)
    model = tmp_path / "spm.model"
    model.write_bytes(b"not a sentencepiece model")
    with pytest.raises(ValueError, match=rf"^{model}: not a SentencePiece model"):
        SentencePieceTokenizer(model)


# --------------------------------------------------------------------------- ImageFolder


@pytest.mark.parametrize("damage", [lambda b: b[: len(b) // 2], lambda b: b"", lambda b: b"GIF89a not really"])
def test_damaged_image_is_named(tmp_path, damage):
    root = write_imagefolder(tmp_path / "imnet")
    image = root / "val" / "n02" / "1.JPEG"
    image.write_bytes(damage(image.read_bytes()))
    w = imagenet_workload({"dataset": "imagefolder", "data_dir": str(root), "arch": "resnet18", "image_size": 32,
                           "val_resize": 36})
    assert w.val_dataset()[0][0].shape == (3, 32, 32)   # the others still read
    with pytest.raises(ValueError, match=rf"^{image}: unreadable image"):
        w.val_dataset()[4]


# --------------------------------------------------------------------------- fairseq binarized data


@pytest.fixture(scope="module")
def fairseq_data(tmp_path_factory):
    """fairseq-preprocess output of a three-pair de-en corpus (run once: it imports fairseq)."""
    return write_fairseq(tmp_path_factory.mktemp("fairseq"))


def _translation_train(data):
    from codist.workloads.translation import TranslationWorkload
    from codist.workloads.translation_config import TranslationConfig
    cfg = TranslationConfig(dataset="fairseq", data_dir=str(data), source_lang="de", target_lang="en",
                            arch="transformer_tiny")
    return TranslationWorkload(cfg, seed=0).train_dataset()


@pytest.mark.parametrize("damage, file, words", [
    (lambda d: (d / "train.de-en.de.bin").write_bytes((d / "train.de-en.de.bin").read_bytes()[:-3]),
     "train.de-en.de.bin", r"bytes, but .*train.de-en.de.idx lists \d+ tokens"),
    (lambda d: (d / "dict.en.txt").write_text((d / "dict.en.txt").read_text().splitlines()[0] + "\n"),
     "train.de-en.en.bin", r"token id \d+ but the dictionary has 5 entries"),
    (lambda d: (d / "dict.de.txt").write_text("no count on this line\n"), "dict.de.txt", "not a fairseq dictionary"),
    (lambda d: (d / "valid.de-en.en.idx").write_bytes(b"MMIDIDX\x00\x00garbage"),
     "valid.de-en.en", "not fairseq indexed data"),
])
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")   # fairseq's __del__ of a bad .idx
def test_damaged_fairseq_data_is_named(fairseq_data, tmp_path, damage, file, words):
    data = shutil.copytree(fairseq_data, tmp_path / "bin")
    assert len(_translation_train(data)) == 3    # intact, it reads
    damage(data)
    with pytest.raises(ValueError, match=rf"^{data / file}.*{words}"):
        _translation_train(data)


# --------------------------------------------------------------------------- paths, before launch


def _cfg(workload: dict):
    return config.validate({"workload": workload}, "test")


@pytest.mark.parametrize("workload", [
    {"name": "cifar", "dataset": "cifar10"},
    {"name": "imagenet", "dataset": "imagefolder"},
    {"name": "lm", "dataset": "text", "tokenizer": "bytes"},
    {"name": "ctr", "dataset": "criteo"},
    {"name": "translation", "dataset": "fairseq"},
])
def test_missing_data_dir_is_one_line_naming_key_and_path(tmp_path, workload):
    missing = tmp_path / "nowhere"
    with pytest.raises(ConfigError) as e:
        check_inputs(_cfg({**workload, "data_dir": str(missing)}))
    msg = str(e.value)
    assert msg.startswith(f"workload.data_dir: '{missing}' does not exist; expected ") and "\n" not in msg


def test_missing_files_inside_data_dir_are_named(tmp_path):
    write_cifar10(tmp_path)
    (tmp_path / "cifar-10-batches-py" / "data_batch_3").unlink()
    with pytest.raises(ConfigError, match=rf"workload.data_dir: '{tmp_path}/cifar-10-batches-py/data_batch_3' "
                                          "does not exist"):
        check_inputs(_cfg({"name": "cifar", "dataset": "cifar10", "data_dir": str(tmp_path)}))
    (tmp_path / "notes.md").write_text("no shards\n")
    with pytest.raises(ConfigError, match="holds no text shards"):
        check_inputs(_cfg({"name": "lm", "dataset": "text", "tokenizer": "bytes", "data_dir": str(tmp_path)}))
    (tmp_path / "train.txt").mkdir()
    with pytest.raises(ConfigError, match=rf"'{tmp_path}/train.txt' is not a file"):
        check_inputs(_cfg({"name": "ctr", "dataset": "criteo", "data_dir": str(tmp_path)}))
    with pytest.raises(ConfigError, match=r"workload.tokenizer_model: '.*nope.model' does not exist"):
        check_inputs(_cfg({"name": "lm", "dataset": "text", "data_dir": str(tmp_path),
                           "tokenizer_model": str(tmp_path / "nope.model")}))


def test_present_data_and_embedded_pass(tmp_path, monkeypatch):
    """What the check lets through, the reader reads: both folders it accepts hold the 5 x 3 training
    and 4 test images written; an embedded data set needs no data, even under a missing data root."""
    write_cifar10(tmp_path)
    for data_dir in (tmp_path, tmp_path / "cifar-10-batches-py"):   # the parent, or the files' own folder
        assert check_inputs(_cfg({"name": "cifar", "dataset": "cifar10", "data_dir": str(data_dir)})) is None
        train_x, train_y, test_x, test_y = read_cifar(data_dir, "cifar10")
        assert train_x.shape == (15, 3, 32, 32) and test_x.shape == (4, 3, 32, 32) and len(train_y) == 15
    monkeypatch.setenv("CODIST_DATA_ROOT", str(tmp_path / "nowhere"))
    assert check_inputs(_cfg({"name": "lm"})) is None
    with pytest.raises(ConfigError, match="nowhere"):     # the same root refuses a relative data_dir
        check_inputs(_cfg({"name": "cifar", "dataset": "cifar10", "data_dir": "cifar"}))


def without_file_permission_overrides():
    """In the child process only (subprocess preexec_fn): drop CAP_DAC_OVERRIDE (1) and
    CAP_DAC_READ_SEARCH (2) from the bounding set, so that the exec'd program, even as root, is
    refused files by their permission bits as any user is."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):
        if libc.prctl(24, cap, 0, 0, 0) != 0:   # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def test_unreadable_data_dir_is_named(tmp_path):
    """Run in a child process; as root (how CI runs) without the capabilities that let root read
    every file, so the check meets the permission bits it is about."""
    import subprocess
    import sys
    write_cifar10(tmp_path)
    (tmp_path / "cifar-10-batches-py" / "test_batch").chmod(0)
    code = ("from codist import config; from codist.config import ConfigError; from codist.launching.inputs import check_inputs\n"
            f"cfg = config.validate({{'workload': {{'name': 'cifar', 'dataset': 'cifar10', 'data_dir': {str(tmp_path)!r}}}}})\n"
            "try:\n    check_inputs(cfg)\nexcept ConfigError as e:\n    print(e)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          preexec_fn=without_file_permission_overrides if os.geteuid() == 0 else None)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == (f"workload.data_dir: '{tmp_path}/cifar-10-batches-py/test_batch': "
                                   "this user may not read the file"), proc.stdout + proc.stderr
def test_codist_check_fails_on_a_missing_data_dir(tmp_path, capsys):
    path = tmp_path / "run.yaml"
    missing = tmp_path / "cifar"
    path.write_text(yaml.safe_dump({"workload": {"name": "cifar", "dataset": "cifar10", "data_dir": str(missing)}}))
    assert cli.main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"codist: workload.data_dir: '{missing}' does not exist") and err.count("\n") == 1


def test_tokenizer_model_must_be_a_file_not_a_folder(tmp_path):
    """The SentencePiece model is a file: a present one passes, a folder of that name is refused
    (kills make mutation's survivor that checked it as a folder, issue 52)."""
    (tmp_path / "train.txt").write_text("some text\n")
    model = tmp_path / "spm.model"
    model.write_bytes(b"\x0a\x00")
    lm = {"name": "lm", "dataset": "text", "data_dir": str(tmp_path), "tokenizer_model": str(model)}
    assert check_inputs(_cfg(lm)) is None
    folder = tmp_path / "spm_dir.model"
    folder.mkdir()
    with pytest.raises(ConfigError, match=rf"workload.tokenizer_model: '{folder}' is not a file; "
                                          "expected a SentencePiece .model file"):
        check_inputs(_cfg({**lm, "tokenizer_model": str(folder)}))


def test_a_set_as_large_as_the_ranks_allows_a_batch_of_one(tmp_path):
    """At the boundary, a training set of exactly as many samples as a model's ranks, the allowed
    batch is one sample a rank, not fewer ranks (kills make mutation's `part > ranks` survivor)."""
    cfg = _cfg({"name": "cifar", "dataset": "embedded", "train_size": 4})
    cfg = config.validate({**config.to_dict(cfg), "parallel": {"world_size": 4},
                           "train": {**config.to_dict(cfg)["train"], "batch_per_rank": 2}}, "test")
    with pytest.raises(ConfigError, match=r"allowed: train.batch_per_rank <= 1$"):
        check_inputs(cfg)
