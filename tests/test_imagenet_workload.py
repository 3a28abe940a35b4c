"""The imagenet workload: ImageFolder files written by the test, clear layout errors, models."""
import numpy as np
import pytest
import torch
from PIL import Image

from codist import config
from codist.runtime.data import BatchStream, PrefetchStream
from codist.workloads import build_workload
from codist.workloads.imagenet import check_imagefolder


def write_imagefolder(root, classes=("n01", "n02"), per_class=3, size=40):
    rng = np.random.default_rng(0)
    for split in ("train", "val"):
        for c in classes:
            d = root / split / c
            d.mkdir(parents=True)
            for i in range(per_class):
                Image.fromarray(rng.integers(0, 255, (size, size + 8, 3), dtype=np.uint8)).save(d / f"{i}.JPEG")
    return root


def workload(extra):
    return build_workload(config.validate({"workload": {"name": "imagenet", **extra}}).workload, 0)


def test_imagefolder_reads_real_files(tmp_path):
    root = write_imagefolder(tmp_path / "imnet")
    w = workload({"dataset": "imagefolder", "data_dir": str(root), "arch": "resnet18", "image_size": 32,
                  "val_resize": 36})
    assert w.num_classes == 2 and len(w.train_dataset()) == 6 and len(w.val_dataset()) == 6
    x, y = w.val_dataset()[4]
    assert x.shape == (3, 32, 32) and y == 1                 # sorted class folders: n02 is class 1
    assert w.class_counts().tolist() == [3, 3]
    out = w.build_model().eval()(x[None])
    assert out.shape == (1, 2)


def test_prefetch_stream_serves_the_same_samples_as_the_plain_stream(tmp_path):
    root = write_imagefolder(tmp_path / "imnet", per_class=4)
    w = workload({"dataset": "imagefolder", "data_dir": str(root), "arch": "resnet18", "image_size": 16,
                  "val_resize": 16})
    plain = BatchStream(w.val_dataset(), 2, 1, 0, seed=3)    # val: no random augmentation
    fetched = PrefetchStream(BatchStream(w.val_dataset(), 2, 1, 0, seed=3), workers=1)
    for step in (0, 1, 5, 2):                                  # out of order: the loader restarts
        a, b = plain.batch(step), fetched.batch(step)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_layout_errors_name_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"train: missing; expected .*ImageFolder"):
        check_imagefolder(tmp_path)
    (tmp_path / "train" / "a").mkdir(parents=True)
    (tmp_path / "val" / "b").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match=r"hold no images"):
        check_imagefolder(tmp_path)
    (tmp_path / "train" / "a" / "x.JPEG").write_bytes(b"")
    (tmp_path / "val" / "b" / "x.JPEG").write_bytes(b"")
    with pytest.raises(ValueError, match="different class folders"):
        check_imagefolder(tmp_path)


def test_full_preset_model_is_torchvision_resnet50():
    w = workload({"dataset": "imagefolder", "data_dir": "/nonexistent", "arch": "resnet50"})
    torch.manual_seed(0)
    import torchvision
    n = sum(p.numel() for p in torchvision.models.resnet50(num_classes=1000).parameters())
    assert n == 25_557_032           # the published ResNet-50 size
    assert w.metric.target == pytest.approx(0.7643)


def test_embedded_default_is_small_and_learnable_shape():
    w = workload({})
    x, y = w.train_dataset().tensors
    assert x.shape[1:] == (3, 24, 24) and int(y.max()) < 20
    assert w.build_model()(x[:4]).shape == (4, 20)
    big = workload({"arch": "resnet50"})            # the real model on cheap data (communication benchmarks)
    assert big.build_model().eval()(x[:2]).shape == (2, 20)


class _RecordsDecoder(torch.utils.data.Dataset):
    """A dataset whose every item read leaves a file named by the reading process's pid."""

    def __init__(self, inner, folder):
        self.inner, self.folder = inner, folder

    def __len__(self):
        return len(self.inner)

    def __getitem__(self, k):
        import os
        (self.folder / f"{os.getpid()}-{k}").touch()
        return self.inner[k]


def test_evaluation_of_image_files_is_decoded_by_loader_workers_with_the_same_sums(tmp_path):
    """Issue 51: a rank's evaluation shard of real images is decoded by the workload's DataLoader
    workers (as its training batches are), not in the rank's thread; the same batches in the same
    order, so every sum is the in-thread one exactly (BatchNorm in eval mode: a batch's items alone
    decide its outputs)."""
    import os
    from types import SimpleNamespace

    from codist.rank.evaluation import Evaluator
    root = write_imagefolder(tmp_path / "imnet", classes=("n01", "n02", "n03"), per_class=5)
    sums, readers = {}, {}
    for workers in (0, 2):
        cfg = config.validate({"workload": {"name": "imagenet", "dataset": "imagefolder", "data_dir": str(root),
                                            "arch": "cifar_resnet8", "width": 4, "image_size": 16, "val_resize": 18,
                                            "loader_workers": workers},
                               "train": {"eval_batch": 4}})
        w = build_workload(cfg.workload, 0)
        read = tmp_path / f"read-{workers}"
        read.mkdir()
        w.data._splits = (w.data.splits()[0], _RecordsDecoder(w.data.splits()[1], read))
        torch.manual_seed(0)
        model = w.build_model()
        algo = SimpleNamespace(eval_names=lambda: ["0"], eval_models=lambda: {"0": model})
        topo = SimpleNamespace(ranks_per_model=2, dp_rank=1)   # rank 1's strided shard: items 1, 3, ..., 13
        ctx = SimpleNamespace(cfg=cfg, topo=topo, workload=w, device=torch.device("cpu"))
        with torch.no_grad():
            sums[workers] = Evaluator(ctx, algo).score()
        readers[workers] = {tuple(map(int, p.name.split("-"))) for p in read.iterdir()}
    assert sums[2] == sums[0] and sums[0]["0"]["count"] == 7.0
    assert {k for _, k in readers[2]} == {k for _, k in readers[0]} == set(range(1, 15, 2))
    assert {pid for pid, _ in readers[0]} == {os.getpid()}            # in-thread: the rank decodes
    assert os.getpid() not in {pid for pid, _ in readers[2]}          # workers: none in the rank
