"""`codist data fake --root DIR`: a miniature of every data set the full scale reads, in the real
on-disk format, for rehearsing the full-scale runs without the real data.

    codist data fake --root /tmp/fake-data                 # all of them (seconds, ~12 MB)
    codist data fake --root /tmp/fake-data --only criteo cifar
    codist run CONFIG --data-root /tmp/fake-data           # a full-scale config reads the copies

Each data set is written under the name the full-scale configs give it (`workload.data_dir`),
by the format's own tool where one exists: PIL's JPEG encoder for the ImageFolder, pickle
(protocol 2, bytes as Python 2 str, as the originals) for CIFAR's python batches, fairseq-preprocess for the translation
pairs; WARC/1.0 records written here for the WET shards (no WARC library is installed) and
plain TSV for Criteo. The content is random (seeded: the same seed writes the same bytes), sized
so that the workloads' readers accept it unchanged (see each module's sizes and why).

Every folder written holds a `CODIST_FAKE_DATA` file saying what it is. An existing folder of
the same name is replaced only if it holds that file, and a root where any data set's folder
lacks it (a real data root) is refused as a whole, so fake and real data never share a root.
Each data set is built in a hidden folder beside it and renamed into place.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Callable

from . import cifar, criteo, fairseq_pairs, imagenet, wet

#: the file that marks a folder as written by `codist data fake`
MARKER = "CODIST_FAKE_DATA"

# name under the root (= the full-scale configs' workload.data_dir) -> (what, writer, needs).
# A writer takes (destination folder, seed, root) and returns a one-line summary; `needs` are
# data sets it reads from (written first: the quarter links the full copy's images).
DATA_SETS: dict[str, tuple[str, Callable[[Path, int, Path], str], tuple[str, ...]]] = {
    "imagenet": ("ImageNet-1k ImageFolder of JPEGs (Anil, Sodhani, Sun)", imagenet.write_imagenet, ()),
    "imagenet_quarter": ("a quarter of each class's ImageNet training images (Sodhani Fig. 6)",
                         imagenet.write_quarter, ("imagenet",)),
    "cifar": ("CIFAR-10 and CIFAR-100 python pickles (Sun)", cifar.write_cifar, ()),
    "wmt16_en_de_bpe32k": ("WMT'16 En-De, fairseq-preprocess output, joined dictionary (Sodhani Fig. 5)",
                           fairseq_pairs.write_wmt16, ()),
    "iwslt14_de_en": ("IWSLT'14 De-En, fairseq-preprocess output (Sodhani Sec. 4)", fairseq_pairs.write_iwslt14, ()),
    "criteo": ("Criteo Kaggle TSV (Anil Table 1)", criteo.write_criteo, ()),
    "common_crawl_wet": ("Common Crawl WET shards (Anil's LM)", wet.write_wet, ()),
}


class Refused(Exception):
    """A destination exists and is not fake data: nothing is written over it."""


def _marker_text(name: str, seed: int) -> str:
    return (f"{name}: written by `codist data fake` (seed {seed}): a miniature in the real on-disk format "
            f"with random content, for rehearsing runs. It is not the real data set: results trained on it "
            f"mean nothing.\n")


def _size(folder: Path) -> tuple[int, int]:
    files = [p for p in folder.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def write(root: str | os.PathLike, names=None, seed: int = 0, log=print) -> dict[str, str]:
    """Write the data sets `names` (default all, in DATA_SETS order; the ones they need are
    added) under `root`; returns {name: summary}. Raises Refused before writing anything if a
    destination exists without the marker."""
    root = Path(root)
    wanted = list(DATA_SETS) if not names else list(names)
    unknown = [n for n in wanted if n not in DATA_SETS]
    if unknown:
        raise ValueError(f"unknown data set(s) {', '.join(unknown)}: expected some of {', '.join(DATA_SETS)}")
    for n in list(wanted):
        wanted += [d for d in DATA_SETS[n][2] if d not in wanted]
    order = [n for n in DATA_SETS if n in wanted]
    for n in DATA_SETS:   # all of them: a root holding a real data set is no place for fake ones beside it
        dest = root / n
        if dest.exists() and not (dest / MARKER).is_file():
            raise Refused(f"{dest}: exists and is not fake data (no {MARKER} file in it); refusing to write in "
                          f"{root}: expected an empty or new --root, or one written by codist data fake")
    root.mkdir(parents=True, exist_ok=True)
    done = {}
    for n in order:
        dest, t0 = root / n, time.perf_counter()
        tmp = root / f".{n}.fake-{os.getpid()}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            summary = DATA_SETS[n][1](tmp, seed, root)
            (tmp / MARKER).write_text(_marker_text(n, seed))
            if dest.exists():
                shutil.rmtree(dest)
            os.replace(tmp, dest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        files, size = _size(dest)
        done[n] = summary
        log(f"{dest}: {summary}; {files:,} files, {size / 1e6:.1f} MB, {time.perf_counter() - t0:.1f} s")
    return done


def main(argv=None) -> int:
    """`codist data fake ...`; exit 0 written, 1 a writer failed, 2 bad input or refused."""
    names = "\n".join(f"  {n:<20} {what}" for n, (what, _, _) in DATA_SETS.items())
    p = argparse.ArgumentParser(
        prog="codist data fake", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Write a miniature of every data set the full scale reads, in the real on-disk format\n"
                    "(random content, about 12 MB), under the names the full-scale configs use; then\n"
                    "`codist data check --config PRESET --data-root DIR` or `codist run CONFIG --data-root DIR`.",
        epilog=f"data sets (folder under --root):\n{names}\n\nAn existing folder is replaced only if it holds "
               f"a {MARKER} file (written by this command); real data are never written over.")
    p.add_argument("--root", required=True, metavar="DIR", help="the data root to write into (created if missing)")
    p.add_argument("--only", nargs="+", metavar="NAME", choices=list(DATA_SETS),
                   help="only these data sets (and the ones they need: imagenet_quarter links imagenet's images)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random content (default 0)")
    args = p.parse_args(argv)
    try:
        write(args.root, args.only, args.seed)
    except Refused as e:
        print(f"codist data fake: {e}", file=sys.stderr)
        return 2
    except (ImportError, OSError, RuntimeError, ValueError) as e:
        print(f"codist data fake: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0
