"""The ctr workload (Anil et al. 2018's Criteo DNN): the Criteo TSV loader on tiny files written
in the real format, its errors, the config's errors and defaults, the embedded generator's
promises (deterministic, CTR ~0.25, Bayes log loss known and well below the base rate,
learnable), the 2-logit model and its log loss, and prediction churn."""
from __future__ import annotations

import math

import pytest
import torch
from pydantic import ValidationError
from torch.nn import functional as F

from codist.runtime.data import BatchStream, model_data
from codist.workloads import ctr as C
from codist.workloads.ctr_config import CtrConfig

# --------------------------------------------------------------------------- Criteo TSV files

# A line in the real format: label, I1..I13 (I3 negative, I12 empty), C1..C26 (C22 and C26 empty).
CATS = ("68fd1e64 80e26c9b fb936136 7b4723c4 25c83c98 7e0ccccf de7995b8 1f89b562 a73ee510 a8cd5504 b2cb9c98 "
        "37c9c164 2824a5f6 1adce6ef 8ba8b39a 891b62e7 e5ba7672 f54016b9 21ddcdc9 b1252a9d 07b5194c - 3a171ecb "
        "c5c50484 e8b83407 -").split()
INTS = ["1", "0", "-1", "5", "1382", "4", "15", "2", "181", "1", "2", "", "2"]
LINE = "\t".join(["1", *INTS, *("" if c == "-" else c for c in CATS)])
# The buckets of CATS with hash_buckets=1000: 1 + crc32 mod 999, 0 for empty. Written out, so a
# change of the hash (which would silently change every real data set) fails here.
BUCKETS_1000 = [653, 566, 890, 570, 690, 346, 814, 858, 343, 674, 409, 740, 657, 827, 772, 950, 43, 395, 457,
                704, 738, 0, 370, 291, 826, 0]


def criteo_line(rng: torch.Generator, label: int | None = None) -> str:
    """A random line in the Criteo format with some empty fields."""
    label = int(torch.randint(0, 2, (), generator=rng)) if label is None else label
    ints = [("" if torch.rand((), generator=rng) < 0.2 else str(int(torch.randint(-2, 500, (), generator=rng))))
            for _ in range(13)]
    cats = [("" if torch.rand((), generator=rng) < 0.2 else f"{int(torch.randint(0, 2**32, (), generator=rng)):08x}")
            for _ in range(26)]
    return "\t".join([str(label), *ints, *cats])


def write_criteo(path, lines: list[str], newline: str = "\n") -> None:
    path.write_text("".join(line + newline for line in lines))


def test_read_criteo_exact_row(tmp_path):
    rng = torch.Generator().manual_seed(0)
    write_criteo(tmp_path / "train.txt", [criteo_line(rng, 0), LINE, criteo_line(rng, 1)], newline="\r\n")
    x, y = C.read_criteo(tmp_path / "train.txt", hash_buckets=1000)
    assert x.shape == (3, 39) and x.dtype == torch.float32 and y.dtype == torch.int64
    assert y.tolist() == [0, 1, 1]
    dense = [math.log1p(max(int(v), 0)) if v else 0.0 for v in INTS]
    assert dense[2] == 0.0 and dense[11] == 0.0 and dense[0] == pytest.approx(math.log(2))
    expected = torch.tensor(dense + BUCKETS_1000, dtype=torch.float32)
    assert torch.equal(x[1], expected)
    assert C.category_bucket(b"", 1000) == 0 and C.category_bucket(b"68fd1e64", 1000) == 653


def test_read_criteo_max_lines_and_last_line_without_newline(tmp_path):
    rng = torch.Generator().manual_seed(1)
    lines = [criteo_line(rng) for _ in range(5)]
    (tmp_path / "t.txt").write_text("\n".join(lines))          # no final newline
    x, y = C.read_criteo(tmp_path / "t.txt", 64)
    assert len(y) == 5
    x3, y3 = C.read_criteo(tmp_path / "t.txt", 64, max_lines=3)
    assert torch.equal(x3, x[:3]) and torch.equal(y3, y[:3])
    assert int(x[:, 13:].max()) < 64 and int(x[:, 13:].min()) >= 0


@pytest.mark.parametrize("bad, lineno, words", [
    ("1\t2\t3", 3, ["got 3 field(s)", "40 tab-separated fields", "label (0 or 1)"]),
    (LINE.replace("1", "x", 1), 3, ["label (field 1) must be 0 or 1", "'x'"]),
    (LINE.replace("\t1382\t", "\t13.5\t"), 3, ["I5 (field 6)", "'13.5'", "not an integer"]),
    ("", 3, ["got 1 field(s)"]),
])
def test_read_criteo_malformed_line_names_file_and_line(tmp_path, bad, lineno, words):
    rng = torch.Generator().manual_seed(2)
    path = tmp_path / "train.txt"
    write_criteo(path, [criteo_line(rng), criteo_line(rng), bad, criteo_line(rng)])
    with pytest.raises(C.CriteoFormatError) as e:
        C.read_criteo(path, 100)
    msg = str(e.value)
    assert f"{path}:{lineno}:" in msg
    for w in words:
        assert w in msg


def test_missing_file_and_dir_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.txt.*40 tab-separated"):
        C.read_criteo(tmp_path / "nope.txt", 100)
    cfg = CtrConfig(dataset="criteo", data_dir=str(tmp_path / "absent"))
    with pytest.raises(FileNotFoundError, match="absent.*train.txt"):
        C.CtrWorkload(cfg, 0).train_dataset()
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(C.CriteoFormatError, match="empty"):
        C.read_criteo(tmp_path / "empty.txt", 100)


def test_criteo_workload_holds_out_last_lines_or_reads_val_file(tmp_path):
    rng = torch.Generator().manual_seed(3)
    lines = [criteo_line(rng) for _ in range(10)]
    write_criteo(tmp_path / "train.txt", lines)
    w = C.CtrWorkload(CtrConfig(dataset="criteo", data_dir=str(tmp_path), hash_buckets=97, hidden=[8],
                                embedding_dim=4, val_fraction=0.2), seed=0)
    x, y = C.read_criteo(tmp_path / "train.txt", 97)
    tr, va = w.train_dataset().tensors, w.val_dataset().tensors
    assert torch.equal(tr[0], x[:8]) and torch.equal(va[0], x[8:]) and torch.equal(va[1], y[8:])
    assert w.metric.name == "val_log_loss" and not w.metric.higher_is_better and w.metric.target == C.ANIL_DNN_LOG_LOSS
    assert w.bayes_log_loss is None and "val_bayes_gap" not in w.finalize_eval(w.eval_sums(torch.zeros(2, 2), y[:2]))

    write_criteo(tmp_path / "valid.txt", lines[:3])
    w2 = C.CtrWorkload(CtrConfig(dataset="criteo", data_dir=str(tmp_path), hash_buckets=97, hidden=[8],
                                 val_file="valid.txt"), seed=0)
    assert torch.equal(w2.train_dataset().tensors[0], x) and torch.equal(w2.val_dataset().tensors[0], x[:3])
    out = w2.forward(w2.build_model(), w2.val_dataset().tensors[0])
    assert out.shape == (3, 2)


# --------------------------------------------------------------------------- config


def test_config_errors_and_defaults():
    with pytest.raises(ValidationError, match=r"workload.data_dir is required.*train.txt.*40 tab-separated"):
        CtrConfig(dataset="criteo")
    with pytest.raises(ValidationError, match="workload.data_dir is set but workload.dataset is 'embedded'"):
        CtrConfig(data_dir="/tmp")
    with pytest.raises(ValidationError, match="hash_buckets=50 is too small.*101"):
        CtrConfig(hash_buckets=50)
    for bad in ({"hash_buckets": 2**24 + 1}, {"val_fraction": 1.0}, {"hidden": [64, 0]}, {"embedding_dim": 0},
                {"dataset": "kaggle"}, {"train_size": 0}, {"max_lines": 1}, {"vocab": 3}):
        with pytest.raises(ValidationError):
            CtrConfig(**bad)
    emb = CtrConfig()
    assert (emb.hidden, emb.embedding_dim, emb.hash_buckets) == ([64, 32], 8, emb.categories + 1)
    assert CtrConfig(categories=30).hash_buckets == 31
    full = CtrConfig(dataset="criteo", data_dir="/data/criteo")
    assert full.hidden == [2560, 1024, 256] and full.num_classes == 2
    # the resolved config validates to itself (manifests and run ids are stable)
    assert CtrConfig.model_validate(emb.model_dump()) == emb


# --------------------------------------------------------------------------- embedded data

SMALL = dict(train_size=20_000, val_size=5_000)


@pytest.fixture(autouse=True)
def one_thread():
    """One intra-op thread, as each rank trains (launch.threads_per_rank): this tiny model's backward
    is some 20x slower with 2 threads on a busy 2-core machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_embedded_deterministic_in_data_seed(monkeypatch):
    monkeypatch.setenv("CODIST_CACHE_DIR", "off")  # bypass the on-disk cache ...
    gen = C.generate_embedded.__wrapped__          # ... and the in-process one: really generate twice
    a, b = gen(2_000, 500, 100, 0), gen(2_000, 500, 100, 0)
    for f in ("train_inputs", "train_labels", "train_p", "val_inputs", "val_labels", "val_p"):
        assert torch.equal(getattr(a, f), getattr(b, f)), f
    c = gen(2_000, 500, 100, 1)
    assert not torch.equal(a.train_inputs, c.train_inputs) and not torch.equal(a.val_p, c.val_p)
    bigger = gen(3_000, 500, 100, 0)           # the validation split does not depend on train_size
    assert torch.equal(bigger.val_inputs, a.val_inputs) and torch.equal(bigger.val_p, a.val_p)
    ids = a.train_inputs[:, 13:]
    assert torch.equal(ids, ids.round()) and int(ids.min()) == 0 and int(ids.max()) <= 100


def test_embedded_bayes_below_base_rate_and_a_short_training_beats_base_rate():
    cfg = CtrConfig(**SMALL)
    w = C.CtrWorkload(cfg, seed=0)
    d = w.data.generated
    bayes, base = C.bayes_log_loss(cfg), d.base_rate_log_loss
    assert w.bayes_log_loss == bayes
    assert 0.22 < float(d.train_labels.double().mean()) < 0.28       # Criteo-like click rate
    assert bayes < base - 0.1                                          # the features carry a lot of signal
    assert bayes < w.metric.target < base and w.metric.name == "val_log_loss"

    torch.manual_seed(0)
    model = w.build_model()
    opt = torch.optim.Adagrad(model.parameters(), lr=0.03)
    stream = w.train_stream("same", 0, 1, 64, 1, 0, seed=0)
    for step in range(300):
        x, y = stream.batch(step)
        loss = w.loss(w.forward(model, x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    vx, vy = w.val_dataset().tensors
    with torch.no_grad():
        m = w.finalize_eval(w.eval_sums(w.forward(model, vx), vy))
    assert m["val_log_loss"] == m["val_loss"]
    assert m["val_bayes_gap"] == pytest.approx(m["val_log_loss"] - bayes)
    assert bayes < m["val_log_loss"] < base - 0.03, (m, bayes, base)
    assert abs(m["val_pred_ctr"] - m["val_ctr"]) < 0.05


def test_log_loss_of_two_logits_is_the_logistic_loss():
    w = C.CtrWorkload(CtrConfig(**SMALL), seed=0)
    logits = torch.randn(50, 2, generator=torch.Generator().manual_seed(0))
    y = torch.randint(0, 2, (50,), generator=torch.Generator().manual_seed(1))
    bce = F.binary_cross_entropy_with_logits((logits[:, 1] - logits[:, 0]).double(), y.double())
    m = w.finalize_eval(w.eval_sums(logits, y))
    assert m["val_log_loss"] == pytest.approx(float(bce), rel=1e-6)
    assert float(w.loss(logits, y)) == pytest.approx(float(bce), rel=1e-5)
    assert m["val_accuracy"] == float((logits.argmax(1) == y).double().mean())
    assert m["val_ctr"] == float(y.double().mean())


def test_model_shape_data_plumbing_and_class_counts():
    w = C.CtrWorkload(CtrConfig(**SMALL), seed=0)
    assert w.num_classes == 2
    model = w.build_model()
    assert model(w.val_dataset().tensors[0][:17]).shape == (17, 2)
    assert all("offsets" not in k for k in model.state_dict())        # only weights are saved
    part, _ = model_data(w.train_dataset(), "disjoint", 1, 2, seed=0)
    x, y = BatchStream(part, 64, 2, 1, seed=0).batch(3)
    assert x.shape == (64, 39) and x.dtype == torch.float32 and y.shape == (64,) and y.dtype == torch.int64
    counts = w.class_counts()
    assert counts.tolist() == torch.bincount(w.train_dataset().tensors[1], minlength=2).tolist()
    facts = w.describe()
    assert facts["train_size"] == 20_000 and facts["bayes_log_loss"] == w.bayes_log_loss


# --------------------------------------------------------------------------- churn


def test_prediction_churn(tmp_path):
    w = C.CtrWorkload(CtrConfig(**SMALL), seed=0)
    val = w.val_dataset()
    torch.manual_seed(0)
    a = w.build_model()
    torch.manual_seed(1)
    b = w.build_model()
    torch.save(a.state_dict(), tmp_path / "model_0.pt")
    a_again = C.load_model(w, tmp_path / "model_0.pt")
    assert C.prediction_churn(a, a_again, val, batch=1000) == 0.0
    churn = C.prediction_churn(a, b, val, batch=1000)
    assert 0.0 < churn < 1.0
    assert churn == pytest.approx(C.prediction_churn(b, a, val, batch=777), rel=1e-9)
    pa, pb = C.click_probabilities(a, val), C.click_probabilities(b, val)
    assert pa.shape == (len(val),)
    assert churn == pytest.approx(float((pa - pb).abs().mean()), rel=1e-9)
    assert a.training                                      # the model's mode is restored
