"""The on-disk cache of the embedded data sets (`codist.workloads.generated_cache`): the same
arrays with and without it, a second call loads, a damaged or stale file is generated again, and
a folder that cannot be written only costs the caching."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from codist.workloads import ctr_embedded, embedded_images, generated_cache
from codist.workloads.lm_config import LmConfig
from codist.workloads.lm_data import EmbeddedData


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "generated"
    monkeypatch.setenv("CODIST_CACHE_DIR", str(folder))
    return folder


def counting_make(arrays: dict):
    calls = []

    def make():
        calls.append(1)
        return arrays
    return make, calls


ARRAYS = {"x": np.arange(12, dtype=np.float32).reshape(3, 4) / 7, "y": np.arange(5, dtype=np.int64),
          "loss": np.float64(1 / 3)}


def assert_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].dtype == b[name].dtype and np.array_equal(a[name], b[name]), name


def test_second_call_loads_the_identical_arrays(cache):
    make, calls = counting_make(ARRAYS)
    first = generated_cache.cached("demo", {"n": 3}, make)
    second = generated_cache.cached("demo", {"n": 3}, make)
    assert calls == [1] and not first.loaded and second.loaded
    assert_same(second.arrays, ARRAYS)
    assert len(list(cache.glob("demo-*.npz"))) == 1


def test_other_knobs_and_an_edited_source_get_new_keys(cache, monkeypatch):
    make, calls = counting_make(ARRAYS)
    generated_cache.cached("demo", {"n": 3}, make)
    generated_cache.cached("demo", {"n": 4}, make)
    generated_cache.cached("other", {"n": 3}, make)
    assert len(calls) == 3
    sources = [__file__]
    before = generated_cache.key("demo", {"n": 3}, sources)
    assert generated_cache.key("demo", {"n": 3}, sources) == before
    real = generated_cache.source_bytes
    monkeypatch.setattr(generated_cache, "source_bytes", lambda path: real(path) + b"# edited\n")
    assert generated_cache.key("demo", {"n": 3}, sources) != before
    generated_cache.cached("demo", {"n": 3}, make)
    assert len(calls) == 4
    assert len(list(cache.glob("demo-*.npz"))) == 2      # the older generator's n=3 file is gone


def test_a_truncated_or_garbage_file_is_generated_again(cache):
    make, calls = counting_make(ARRAYS)
    generated_cache.cached("demo", {"n": 3}, make)
    (path,) = cache.glob("demo-*.npz")
    for damage in (path.read_bytes()[: path.stat().st_size // 2], b"not a zip file"):
        path.write_bytes(damage)
        again = generated_cache.cached("demo", {"n": 3}, make)
        assert not again.loaded
        assert_same(again.arrays, ARRAYS)
    assert len(calls) == 3
    assert generated_cache.cached("demo", {"n": 3}, make).loaded     # rewritten whole


def test_an_unwritable_folder_generates_without_caching(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "a file"
    blocker.write_text("")
    monkeypatch.setenv("CODIST_CACHE_DIR", str(blocker / "generated"))   # cannot be made
    monkeypatch.setattr(generated_cache, "_warned", False)
    make, calls = counting_make(ARRAYS)
    for _ in range(2):
        got = generated_cache.cached("demo", {"n": 3}, make)
        assert not got.loaded
        assert_same(got.arrays, ARRAYS)
    assert len(calls) == 2
    assert capsys.readouterr().err.count("not caching generated data") == 1


def test_off_disables_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CODIST_CACHE_DIR", "off")
    monkeypatch.chdir(tmp_path)
    make, calls = counting_make(ARRAYS)
    for _ in range(2):
        assert not generated_cache.cached("demo", {"n": 3}, make).loaded
    assert len(calls) == 2 and not list(tmp_path.iterdir())
    assert generated_cache.cache_dir() is None


def test_default_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("CODIST_CACHE_DIR", "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert generated_cache.cache_dir() == tmp_path / "codist" / "generated"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert generated_cache.cache_dir() == tmp_path / ".cache" / "codist" / "generated"


# ------------------------------------------------------------------ the three generators, bit for bit


def fields(obj, names) -> dict:
    return {n: getattr(obj, n) for n in names}


def assert_equal_fields(a: dict, b: dict) -> None:
    for name in a:
        x, y = a[name], b[name]
        if isinstance(x, torch.Tensor):
            assert x.dtype == y.dtype and torch.equal(x, y), name
        elif isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y), name
        else:
            assert x == y, name


IMAGE_FIELDS = ("train_x", "train_y", "train_clean_y", "val_x", "val_y", "val_clean_y", "mean", "std")
CTR_FIELDS = ("train_inputs", "train_labels", "train_p", "val_inputs", "val_labels", "val_p")
LM_FIELDS = ("val_seqs", "count_sample", "bayes_val_loss", "unigram_entropy")


def embedded_images_small():
    return embedded_images.generate(classes=3, train_size=60, val_size=20, data_seed=2)


def ctr_small():
    return ctr_embedded.generate_embedded.__wrapped__(300, 100, 20, 1)   # past the in-process cache


def lm_small():
    return EmbeddedData(LmConfig(vocab=24, states=6, val_tokens=512, val_seq_len=32, doc_len=256))


@pytest.mark.parametrize("build, names, was_cached", [
    (embedded_images_small, IMAGE_FIELDS, lambda d: d.cached),
    (ctr_small, CTR_FIELDS, lambda d: d.cached),
    (lm_small, LM_FIELDS, lambda d: d.generated.loaded),
], ids=["embedded_images", "ctr", "lm"])
def test_generators_give_the_same_data_with_and_without_the_cache(cache, monkeypatch, build, names, was_cached):
    first, second = build(), build()
    assert not was_cached(first) and was_cached(second)
    monkeypatch.setenv("CODIST_CACHE_DIR", "off")
    uncached = build()
    assert not was_cached(uncached)
    for other in (second, uncached):
        assert_equal_fields(fields(first, names), fields(other, names))
