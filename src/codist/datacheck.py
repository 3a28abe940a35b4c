"""`codist data check`: does a data folder hold what a workload's reader expects?

    codist data check imagenet /data/imagenet
    codist data check cifar /data/cifar --dataset cifar100
    codist data check translation /data/iwslt14_de_en --source-lang de --target-lang en
    codist data check --config replications/presets/translation_wmt16_sodhani.yaml

Each problem is one line naming the path and the expected layout (the layouts are the workloads'
own constants); exit 1 if there is any. The checks call the workloads' readers on a sample (one
image per split, every CIFAR batch, the first shard's first paragraph, the first lines of the
Criteo file, the fairseq dictionaries and indexed data), so what passes here is what a run reads.
How to prepare each data set: docs/full-scale.md.

`codist data prepare --config RUN.yaml` does the work a run would otherwise do in its ranks, once,
into the workload's cache: for an LM on text, training its SentencePiece model and tokenising the
shards (the workflow's lm_data rule runs it before the run's job, off the GPUs).
"""
from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
from pathlib import Path

from .workloads.cifar_config import CIFAR_CLASSES, CIFAR_LAYOUT, layout_text
from .workloads.ctr_config import CRITEO_LAYOUT, CtrConfig
from .workloads.imagenet_config import IMAGEFOLDER_LAYOUT
from .workloads.lm_config import TEXT_LAYOUT
from .workloads.translation_config import FAIRSEQ_LAYOUT

CRITEO_SAMPLE_LINES = 1000     # lines of the Criteo file parsed (the whole file is ~45M lines)
IMAGENET_CLASSES = 1000


def _folder(root: Path, layout: str) -> list[str]:
    return [] if root.is_dir() else [f"{root}: {'not a folder' if root.exists() else 'does not exist'}; "
                                     f"expected {layout}"]


def check_cifar(root: Path, dataset: str = "cifar10", **_) -> tuple[list[str], list[str]]:
    """The `cifar` workload's real data sets: CIFAR-10/100's pickled batches, or Fashion-MNIST's IDX files
    (codist.workloads.fashion_mnist.check_files)."""
    if dataset == "fashion_mnist":
        from .workloads.fashion_mnist import check_files
        return check_files(root)
    from .workloads.cifar import _check_batch, _unpickle, find_cifar_folder
    try:
        folder = find_cifar_folder(root, dataset)
    except FileNotFoundError as e:
        return [str(e)], []
    _, train, test, key = CIFAR_LAYOUT[dataset]
    problems, n = [], {}
    for name in train + test:
        try:
            x, _ = _check_batch(folder / name, _unpickle(folder / name), key, CIFAR_CLASSES[dataset])
            n[name] = len(x)
        except (OSError, ValueError) as e:
            problems.append(f"{e}; expected {layout_text(dataset)}")
    notes = [f"{dataset}: {sum(n.get(f, 0) for f in train):,} training and {sum(n.get(f, 0) for f in test):,} "
             f"test images in {folder}"]
    return problems, notes


BAD_IMAGES_LISTED = 5   # unreadable images named one by one; more are counted


def image_header_problem(path: Path) -> str | None:
    """What is wrong with an image's header (PIL opens it lazily: its size and format, no pixels),
    or None: a damaged file, or a decompression bomb (more pixels than PIL's limit), named by path.
    Every image's header is read: a bomb anywhere would stop a run at its first epoch."""
    from PIL import Image
    try:
        with Image.open(path):
            return None
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:
        return f"{path}: unreadable image ({type(e).__name__}: {e})"


def class_images(folder: Path, extensions: tuple[str, ...]) -> tuple[list[Path], list[Path]]:
    """A class folder's images in the order torchvision's ImageFolder reads them (make_dataset: every
    folder below it, links followed, sorted by folder, then by name; here only regular files, so that
    a named pipe is never opened), and the folder links to a folder already walked, which ImageFolder
    would walk again (forever, where the link points above itself): here each folder is walked once."""
    walked, seen, loops = [], set(), []
    for here, dirs, files in os.walk(folder, followlinks=True):
        if (real := os.path.realpath(here)) in seen:
            dirs[:] = []
            loops.append(Path(here))
            continue
        seen.add(real)
        walked.append((here, files))
    return [Path(here) / f for here, files in sorted(walked) for f in sorted(files)
            if f.lower().endswith(extensions) and (Path(here) / f).is_file()], loops


def check_imagefolder(root: Path, **_) -> tuple[list[str], list[str]]:
    from torchvision.datasets.folder import IMG_EXTENSIONS

    from .workloads.imagenet import load_image
    problems = _folder(root, IMAGEFOLDER_LAYOUT)
    if problems:
        return problems, []
    classes, notes = {}, []
    for split in ("train", "val"):
        d = root / split
        if not d.is_dir():
            problems.append(f"{d}: missing; expected {IMAGEFOLDER_LAYOUT}")
            continue
        loose = sorted(p.name for p in d.iterdir() if p.is_file())
        if loose:   # e.g. ILSVRC2012 val images not yet sorted into class folders
            problems.append(f"{d}: {len(loose):,} files directly in {split}/ (e.g. {loose[0]}), not in class "
                            f"folders; expected {IMAGEFOLDER_LAYOUT}")
        counts, first, bad = {}, None, []
        for c in sorted(p for p in d.iterdir() if p.is_dir()):
            # in ImageFolder's order, nested folders too: `first` is the first image a run decodes
            images, loops = class_images(c, IMG_EXTENSIONS)
            problems += [f"{loop}: a link to a folder already read (ImageFolder reads it again, forever if it "
                         f"points above itself); expected {IMAGEFOLDER_LAYOUT}" for loop in loops]
            counts[c.name] = len(images)
            first = first or (images[0] if images else None)
            bad += [(p, why) for p in images if (why := image_header_problem(p))]
        classes[split] = counts
        empty = [c for c, k in counts.items() if k == 0]
        if not counts:
            problems.append(f"{d}: no class folders; expected {IMAGEFOLDER_LAYOUT}")
        elif empty:
            problems.append(f"{d}: {len(empty)} class folder(s) without images ({', '.join(IMG_EXTENSIONS)}), "
                            f"e.g. {d / empty[0]}; expected {IMAGEFOLDER_LAYOUT}")
        problems += [f"{why}; expected {IMAGEFOLDER_LAYOUT}" for _, why in bad[:BAD_IMAGES_LISTED]]
        if len(bad) > BAD_IMAGES_LISTED:
            problems.append(f"{d}: {len(bad) - BAD_IMAGES_LISTED:,} more unreadable images; expected "
                            f"{IMAGEFOLDER_LAYOUT}")
        if first is not None and first not in dict(bad):   # its pixels too (a header can be whole, its data cut)
            try:
                load_image(str(first))
            except ValueError as e:
                problems.append(f"{e}; expected {IMAGEFOLDER_LAYOUT}")
        notes.append(f"{split}/: {len(counts):,} classes, {sum(counts.values()):,} images")
    if len(classes) == 2 and set(classes["train"]) != set(classes["val"]):
        diff = sorted(set(classes["train"]) ^ set(classes["val"]))
        problems.append(f"{root}: train/ and val/ hold different class folders ({len(diff)} differ, e.g. "
                        f"{diff[0]}); expected {IMAGEFOLDER_LAYOUT}")
    if classes.get("train") and len(classes["train"]) != IMAGENET_CLASSES:
        notes.append(f"note: {len(classes['train'])} classes, not ImageNet-1k's {IMAGENET_CLASSES} "
                     f"(the model's output size follows the folder)")
    return problems, notes


def check_text(root: Path, tokenizer_model: str | None = None, **_) -> tuple[list[str], list[str]]:
    from .workloads.lm_data import find_shards, read_paragraphs
    try:
        shards = find_shards(root)
    except FileNotFoundError as e:
        return [str(e)], []
    problems = []
    try:
        if next(iter(read_paragraphs(shards[0])), None) is None:
            problems.append(f"{shards[0]}: no paragraph in the first shard; expected {TEXT_LAYOUT}")
    except ValueError as e:
        problems.append(f"{e}; expected {TEXT_LAYOUT}")
    if tokenizer_model and not Path(tokenizer_model).is_file():
        problems.append(f"{tokenizer_model}: the SentencePiece model (workload.tokenizer_model) does not exist")
    size = sum(p.stat().st_size for p in shards)
    return problems, [f"{len(shards):,} shards, {size / 1e9:.2f} GB (first: {shards[0]})"]


def check_criteo(root: Path, train_file: str = "train.txt", val_file: str | None = None,
                 hash_buckets: int = CtrConfig.model_fields["hash_buckets"].default,   # the workload's own
                 **_) -> tuple[list[str], list[str]]:
    from .workloads.ctr import read_criteo
    problems = _folder(root, CRITEO_LAYOUT)
    if problems:
        return problems, []
    notes = []
    for name in filter(None, (train_file, val_file)):
        path = root / name
        if not path.is_file():
            problems.append(f"{path}: does not exist; expected {CRITEO_LAYOUT}")
            continue
        # the reader itself on the first lines (it counts the whole file first: ~45M lines for Kaggle's)
        with path.open("rb") as f, tempfile.NamedTemporaryFile(suffix=".txt") as head:
            head.write(b"".join(itertools.islice(f, CRITEO_SAMPLE_LINES)))
            head.flush()
            try:
                _, labels = read_criteo(head.name, hash_buckets)
                notes.append(f"{path}: first {len(labels):,} lines parse, click rate "
                             f"{float(labels.float().mean()):.3f}")
            except ValueError as e:
                problems.append(str(e).replace(head.name, str(path)))
    return problems, notes


def check_fairseq(root: Path, source_lang: str = "src", target_lang: str = "tgt", **_) -> tuple[list[str], list[str]]:
    src, tgt = source_lang, target_lang
    import numpy as np

    from .workloads import translation_data as tdata
    try:
        tdata.check_data_dir(root, src, tgt)
    except FileNotFoundError as e:
        return [str(e)], []
    problems, notes, dicts = [], [], {}
    for lang in (src, tgt):
        try:
            dicts[lang] = tdata.load_dictionary(root / f"dict.{lang}.txt")
            notes.append(f"dict.{lang}.txt: {len(dicts[lang]):,} entries")
        except ValueError as e:
            problems.append(f"{e}; expected {FAIRSEQ_LAYOUT}")
    if problems:
        return problems, notes
    for split in ("train", "valid"):
        sizes = {}
        for lang in (src, tgt):
            try:
                # held while .sizes is copied: it views the index's mmap, which closes with the dataset
                data = tdata.load_side(root / f"{split}.{src}-{tgt}", lang, dicts[lang])
                sizes[lang] = np.array(data.sizes)
                del data
            except (OSError, ValueError) as e:
                problems.append(f"{e}; expected {FAIRSEQ_LAYOUT}")
        if len(sizes) == 2:
            if len(sizes[src]) != len(sizes[tgt]):
                problems.append(f"{root / f'{split}.{src}-{tgt}'}.{{{src},{tgt}}}: {len(sizes[src]):,} source but "
                                f"{len(sizes[tgt]):,} target sentences; expected {FAIRSEQ_LAYOUT}")
            else:   # mean target length: what the budget planner turns sentences into tokens with
                notes.append(f"{split}: {len(sizes[tgt]):,} pairs, {sizes[tgt].mean():.2f} target tokens per "
                             f"sentence (eos included)")
    return problems, notes


def check(workload: str, data_dir: str | Path, **options) -> tuple[list[str], list[str]]:
    """(problems, notes) of `data_dir` for `workload`, by the check its registration names
    (`data_check`), given the workload section's options (dataset, source_lang, train_file, ...;
    None: the check's default); problems are one line each."""
    from .workloads import spec
    try:
        check_data = spec(workload).check_function()
    except KeyError as e:
        raise ValueError(e.args[0]) from None
    if check_data is None:
        return [], [f"workload {workload!r} registers no data check"]
    return check_data(Path(data_dir), **{k: v for k, v in options.items() if v is not None})


def _workloads() -> list[str]:
    """Every registered workload (CODIST_PLUGINS' too: codist.config imports them)."""
    from . import config  # noqa: F401
    from .workloads import specs
    return sorted(specs())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="codist data", description="data folders for the real data sets")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="check a data folder's layout for a workload")
    # listed for --help only: codist.cli hands `codist data fake ...` to codist.fake_data's own parser
    sub.add_parser("fake", add_help=False, help="write a miniature of every full-scale data set in its real "
                   "format, for rehearsals: codist data fake --root DIR (codist data fake --help)")
    c.add_argument("workload", nargs="?", choices=_workloads())
    c.add_argument("data_dir", nargs="?")
    c.add_argument("--config", help="instead: the workload section (data_dir and options) of a run config")
    c.add_argument("--data-root", metavar="DIR", help="with --config: the folder a relative workload.data_dir is "
                   "joined to (default: the config's launch.data_root, else $CODIST_DATA_ROOT)")
    c.add_argument("--dataset", choices=sorted(CIFAR_LAYOUT), help="cifar: cifar10 (default) or cifar100")
    c.add_argument("--source-lang", default="src")
    c.add_argument("--target-lang", default="tgt")
    c.add_argument("--train-file", default="train.txt")
    c.add_argument("--val-file")
    pr = sub.add_parser("prepare", help="before a run: tokenise its LM text (and train its SentencePiece "
                        "model) into workload.cache_dir, as the run's ranks would")
    pr.add_argument("--config", required=True, help="the run config (YAML)")
    pr.add_argument("--data-root", metavar="DIR", help="the folder a relative workload.data_dir is joined to")
    args = p.parse_args(argv)
    if args.command == "prepare":
        return prepare(args.config, args.data_root)
    if args.config:
        from .config import ConfigError, load
        from .data_root import with_data_root, workload_with_data
        try:
            w = workload_with_data(with_data_root(load(args.config), args.data_root))
        except ConfigError as e:
            print(f"codist data check: {e}", file=sys.stderr)
            return 2
        if getattr(w, "data_dir", None) is None:
            print(f"codist data check: {args.config}: workload.dataset {w.dataset!r} reads no data folder")
            return 0
        # the section's options: each check reads those it needs
        opts = {k: v for k, v in w.model_dump().items() if k not in ("name", "data_dir")}
        name, data_dir = w.name, w.data_dir
    elif args.workload and args.data_dir:
        opts = dict(dataset=args.dataset, source_lang=args.source_lang, target_lang=args.target_lang,
                    train_file=args.train_file, val_file=args.val_file)
        name, data_dir = args.workload, args.data_dir
    else:
        p.error("give WORKLOAD DATA_DIR or --config CONFIG")
    problems, notes = check(name, data_dir, **opts)
    for line in notes:
        print(f"  {line}")
    for line in problems:
        print(line, file=sys.stderr)
    print(f"{name} data in {data_dir}: " + (f"{len(problems)} problem(s)" if problems else "ok"))
    return 1 if problems else 0


def prepare(config_path: str, data_root: str | None = None) -> int:
    """`codist data prepare`: the run's data cache built now (LmConfig.prepared_by_job: an LM on text),
    one line saying what is there; nothing to do for other workloads. Exit 2 on a bad config, 1 when
    the data cannot be prepared (one line naming the file)."""
    from .config import ConfigError, load
    from .data_root import with_data_root, workload_with_data
    try:
        w = workload_with_data(with_data_root(load(config_path), data_root))
    except ConfigError as e:
        print(f"codist data prepare: {e}", file=sys.stderr)
        return 2
    if not getattr(w, "prepared_by_job", False):
        print(f"codist data prepare: {config_path}: nothing to prepare (workload {w.name!r})")
        return 0
    from .workloads.lm_data import TextCorpus
    try:
        corpus = TextCorpus(w)
    except (OSError, ValueError, RuntimeError) as e:
        print(f"codist data prepare: {e}", file=sys.stderr)
        return 1
    print(f"lm data in {w.data_dir}: {len(corpus.tokens)} tokens of {len(corpus.shards)} shard(s), "
          f"tokenizer {corpus.tokenizer.key}, cached in {corpus.cache_dir}")
    return 0
