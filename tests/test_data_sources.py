"""The data-source seam of the workloads (issue 15): each workload reaches its data only through
`SOURCES[workload.dataset]`, and the embedded generator and the real-format reader of a workload
serve one interface, so the same workload code runs on either. Real formats on the small files
the workload tests write. (The LM's own check: test_lm_workload's data-source test.)"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from test_cifar_workload import write_cifar10
from test_ctr_workload import criteo_line, write_criteo
from test_imagenet_workload import write_imagefolder
from test_translation_workload import SMALL as TRANSLATION_SMALL
from test_translation_workload import write_fairseq

from codist.runtime.data import PrefetchStream
from codist.workloads import build_workload, cifar, ctr, ctr_embedded, embedded_images, imagenet
from codist.workloads import translation_data
from codist.workloads.cifar_config import CifarConfig
from codist.workloads.ctr_config import CtrConfig
from codist.workloads.imagenet_config import ImagenetConfig
from codist.workloads.translation_config import TranslationConfig

WORKLOADS = Path(cifar.__file__).parent

# what each workload asks of its source (the rest of a source is its own business)
INTERFACE = {
    "cifar": ("splits", "target", "facts"),
    "imagenet": ("splits", "num_classes", "train_labels", "target", "loader_workers"),
    "ctr": ("splits", "target", "bayes_log_loss", "eval_extras", "facts"),
    "translation": ("folder", "target", "facts"),
}


def serves_the_interface(w, sources: dict, source_class: type) -> None:
    """`w` holds the source SOURCES makes for its dataset, and that source has all the workload asks."""
    assert isinstance(w.data, source_class) and isinstance(sources[w.cfg.dataset](w.cfg), source_class)
    missing = [name for name in INTERFACE[w.cfg.name] if not hasattr(w.data, name)]
    assert not missing, f"{type(w.data).__name__} lacks {missing}"


def test_generic_workload_code_has_no_dataset_branches():
    """Only the configs' validators may ask which data set a config names."""
    branch = re.compile(r"dataset\s*(==|!=)|dataset\s+in\s")
    for path in sorted(WORKLOADS.glob("*.py")):
        if path.name.endswith("_config.py"):
            continue
        hits = [f"{path.name}:{i}" for i, line in enumerate(path.read_text().splitlines(), 1) if branch.search(line)]
        assert not hits, hits


def test_cifar_sources(tmp_path):
    write_cifar10(tmp_path)
    embedded = CifarConfig(train_size=40, val_size=20, width=4)
    real = CifarConfig(dataset="cifar10", data_dir=str(tmp_path), width=4)
    for cfg, source, sizes in ((embedded, embedded_images.EmbeddedImageSource, (40, 20)),
                               (real, cifar.CifarFiles, (15, 4))):
        w = cifar.CifarWorkload(cfg, seed=0)
        serves_the_interface(w, cifar.SOURCES, source)
        assert (len(w.train_dataset()), len(w.val_dataset())) == sizes
        x, y = w.train_dataset()[0]
        assert x.dim() == 3 and x.dtype == torch.float32 and 0 <= int(y) < w.num_classes
        assert w.class_counts().shape == (w.num_classes,) and int(w.class_counts().sum()) == sizes[0]
        assert 0 < w.metric.target < 1 and w.describe()["dataset"] == cfg.dataset
    assert cifar.CifarWorkload(real, 0).metric.target == round(cifar.CIFAR_TARGETS["cifar10"], 4)
    assert "bayes_accuracy_upper_bound" in cifar.CifarWorkload(embedded, 0).describe()


def test_imagenet_sources(tmp_path):
    root = write_imagefolder(tmp_path / "imnet")
    embedded = ImagenetConfig(classes=3, train_size=30, val_size=9, width=4)
    real = ImagenetConfig(dataset="imagefolder", data_dir=str(root), arch="resnet18", image_size=16,
                          val_resize=16, loader_workers=1)
    for cfg, source, classes in ((embedded, embedded_images.EmbeddedImageSource, 3),
                                 (real, imagenet.ImageFolderData, 2)):
        w = build_workload(cfg, 0)
        serves_the_interface(w, imagenet.SOURCES, source)
        assert w.num_classes == classes and len(w.val_dataset()) > 0
        assert w.class_counts().shape == (classes,) and int(w.class_counts().sum()) == len(w.train_dataset())
        stream = w.train_stream("same", 0, 1, 2, 1, 0, seed=0)
        assert isinstance(stream, PrefetchStream) == (cfg.dataset == "imagefolder")   # decoding needs workers
    assert build_workload(real, 0).metric.target is None                  # known for ResNet-50 only
    assert 0 < build_workload(embedded, 0).metric.target < 1


def test_ctr_sources(tmp_path):
    rng = torch.Generator().manual_seed(0)
    write_criteo(tmp_path / "train.txt", [criteo_line(rng) for _ in range(10)])
    embedded = CtrConfig(train_size=200, val_size=50, hidden=[8], embedding_dim=4)
    real = CtrConfig(dataset="criteo", data_dir=str(tmp_path), hash_buckets=97, hidden=[8], embedding_dim=4,
                     val_fraction=0.2)
    for cfg, source in ((embedded, ctr_embedded.EmbeddedCtrSource), (real, ctr.CriteoFiles)):
        w = ctr.CtrWorkload(cfg, seed=0)
        serves_the_interface(w, ctr.SOURCES, source)
        x, y = w.train_dataset().tensors
        assert x.shape[1] == ctr.INPUT_WIDTH and len(w.val_dataset()) > 0
        metrics = w.finalize_eval(w.eval_sums(torch.zeros(len(y), 2), y))
        extras = {"val_bayes_gap"} if source is ctr_embedded.EmbeddedCtrSource else set()
        assert set(metrics) == {"val_log_loss", "val_loss", "val_accuracy", "val_pred_ctr", "val_ctr"} | extras
        assert (w.bayes_log_loss is None) == (source is ctr.CriteoFiles)
        assert w.describe()["dataset"] == cfg.dataset
    assert ctr.CtrWorkload(real, 0).metric.target == ctr.ANIL_DNN_LOG_LOSS
    assert ctr.bayes_log_loss(embedded) == ctr.CtrWorkload(embedded, 0).bayes_log_loss
    with pytest.raises(ValueError, match="embedded' only"):
        ctr.bayes_log_loss(real)


def test_translation_sources(tmp_path):
    folder = write_fairseq(tmp_path)
    embedded = TranslationConfig(cache_dir=str(tmp_path / "cache"), **TRANSLATION_SMALL)
    real = TranslationConfig(dataset="fairseq", data_dir=str(folder), source_lang="de", target_lang="en")
    for cfg, source in ((embedded, translation_data.EmbeddedCorpus), (real, translation_data.FairseqFolder)):
        w = build_workload(cfg, 0)
        serves_the_interface(w, translation_data.SOURCES, source)
        assert len(w.train_dataset()) > 0 and len(w.val_dataset()) > 0
        inputs, targets = w.train_stream("same", 0, 1, 2, 1, 0, seed=0).batch(0)
        assert set(inputs) == {"src_tokens", "src_lengths", "prev_output_tokens"} and targets.shape[0] == 2
        assert w.class_counts().shape == (w.num_classes,) == (len(w.tgt_dict),)
        facts = w.describe()
        assert facts["dataset"] == cfg.dataset and facts["data_dir"] == str(w.data_dir)
        assert ("bayes_val_nll" in facts) == (source is translation_data.EmbeddedCorpus)
    targets = []
    for cfg in (embedded, real):
        w = build_workload(cfg, 0)
        w.train_dataset()   # the target is known once the folder is
        targets.append((w.metric.target, w.describe().get("bayes_val_nll")))
    (embedded_target, bayes), (real_target, _) = targets
    assert embedded_target == round(bayes + translation_data.EMBEDDED_TARGET_MARGIN, 4) and real_target is None
