"""Where a real data set's prepared form (Criteo parsed, an ImageFolder's file list) is cached, made
once for every rank and run: `workload.cache_dir`, default <data_dir>/.codist_cache (the LM's
tokens live there too); and `staged`, a node-local copy of such files for the node's ranks to
memory-map (a cluster's cache often lies on a shared file system)."""
from __future__ import annotations

import os
import stat
import sys
from collections.abc import Mapping
from pathlib import Path

from ..owner import UntrustedPath, open_private, private_dir
from ..runlog import file_lock
from ..runtime import heartbeat


def cache_folder(cache_dir: str | None, data_dir: str, what: str) -> Path | None:
    """The folder, created; None (with one line on stderr) when it cannot be: then every rank
    prepares the data itself, as before there was a cache."""
    folder = Path(cache_dir) if cache_dir else Path(data_dir) / ".codist_cache"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        return folder
    except OSError as e:
        print(f"codist: cannot create the {what} cache folder {str(folder)!r} ({e}); every rank prepares the data "
              f"itself (set workload.cache_dir to a writable folder)", file=sys.stderr)
        return None


#: where a node copies a prepared data set before mapping it (`node_scratch`): a folder, or "off"
STAGE_ENV = "CODIST_STAGE_DIR"
_CHUNK = 64 << 20   # bytes copied between two heartbeats


def node_scratch(environ: Mapping[str, str] = os.environ) -> Path | None:
    """The node-local folder a prepared data set is copied to before every rank of the node maps it:
    $CODIST_STAGE_DIR ("off" or empty: none), else in a SLURM job its $SLURM_TMPDIR, else its $TMPDIR
    (a node's own disk on most clusters); none outside a SLURM job, where the cache is mapped in place."""
    chosen = environ.get(STAGE_ENV)
    if chosen is not None:
        return Path(chosen) if chosen not in ("", "off") else None
    if environ.get("SLURM_JOB_ID"):
        for name in ("SLURM_TMPDIR", "TMPDIR"):
            if environ.get(name):
                return Path(environ[name])
    return None


def same_file_system(a: Path, b: Path) -> bool:
    return os.stat(a).st_dev == os.stat(b).st_dev


def staged(files: list[Path], scratch: Path | None) -> list[Path]:
    """`files` (a prepared data set, written once and never changed) as copies in this user's private
    folder under node-local `scratch`, made once per node: the ranks of a node map the local copies,
    so their page faults read the node's disk, not a shared file system. The copying process holds a
    lock file while the others wait (its heartbeat keeps the run alive); each file is copied under a
    temporary name, its size checked and renamed into place; a copy is used only if its size and
    modification time are its source's (a truncated or stale one is copied again). `files` themselves
    without `scratch`, when it is on their file system, or when the copy fails (one line)."""
    if scratch is None or not files:
        return files
    try:
        if same_file_system(scratch, files[0]):
            return files
        # a folder another user could have made first (a shared /tmp) is never used
        folder = private_dir(scratch / f"codist-stage-{os.geteuid()}")
        copies = [folder / f.name for f in files]
        with file_lock(folder / f"{files[0].name}.lock"):
            for source, copy in zip(files, copies):
                if not _copied(source, copy):
                    _copy(source, copy)
        return copies
    except (OSError, UntrustedPath) as e:
        print(f"codist: cannot stage {files[0].name} in {str(scratch)!r} ({e}); every rank maps it where it is "
              f"(set ${STAGE_ENV}=off to say so)", file=sys.stderr)
        return files


def _copied(source: Path, copy: Path) -> bool:
    """`copy` is a whole copy of `source`: a regular file (not a link) of its size and modification time."""
    try:
        st, ct = os.stat(source), os.lstat(copy)
    except FileNotFoundError:
        return False
    return stat.S_ISREG(ct.st_mode) and (ct.st_size, ct.st_mtime_ns) == (st.st_size, st.st_mtime_ns)


def _copy(source: Path, copy: Path) -> None:
    tmp = copy.with_name(f".{copy.name}.{os.getpid()}.tmp")
    st = os.stat(source)
    try:
        fd = open_private(tmp, os.O_WRONLY | os.O_TRUNC)
        with open(source, "rb") as src, os.fdopen(fd, "wb") as dst:
            while chunk := src.read(_CHUNK):
                dst.write(chunk)
                heartbeat.progress()
            dst.flush()
            written = os.fstat(dst.fileno()).st_size
        if written != st.st_size:
            raise OSError(f"copied {written} of {source}'s {st.st_size} bytes")
        os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.replace(tmp, copy)
    finally:
        tmp.unlink(missing_ok=True)
