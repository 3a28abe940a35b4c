"""`launch.allocator`: how a rank's C library hands out and takes back memory (CPU tensors).

glibc's malloc serves a block above its mmap threshold (128 KiB, rising with use to at most 32 MiB)
with freshly mapped pages and unmaps them on free. A CPU tensor is such a block, so every large
activation or gradient is mapped, faulted in page by page, zeroed by the kernel and unmapped again,
once per update. The LM at batch 8,192 allocates several 268 MB tensors an update (one layer's
gates over a 32-token segment): on an AMD EPYC, quiet, its update took 6.49 s with glibc's defaults
and 3.23 s with `reuse` (16,384: 13.93 and 6.54 s; results/bench/lm_levers.csv). `reuse` sets
glibc's own knob (mallopt(3): M_MMAP_MAX 0) so every block comes from the heap, where a freed block
is reused by the next update's allocation of its size: the same arithmetic on pages already
mapped. The price is peak memory: the heap fragments and gives back only its top (peak RSS 1.5x at
batch 8,192, 1.9x at 16,384, in the same table; a 2 GiB M_TRIM_THRESHOLD as well was no faster in a
scratch test, at more memory). jemalloc or tcmalloc would need an extra package and an LD_PRELOAD
before the interpreter starts, which forked ranks (codist.launching.fork) cannot have; jemalloc
with its decay off was no faster in a scratch test under load. Not part of the run id: it moves no
number (tests/test_allocator.py), only time and memory.
"""
from __future__ import annotations

import ctypes
import ctypes.util

M_MMAP_MAX = -4   # glibc's <malloc.h>


def glibc():
    """The process's C library if it is glibc, else None."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.gnu_get_libc_version   # glibc's alone (musl's mallopt exists and does nothing)
        libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        return libc
    except (OSError, AttributeError):
        return None


def apply(mode: str) -> None:
    """Set this process's allocator to `mode` ("system": leave it; "reuse": see the module). "reuse"
    on a C library other than glibc is refused (exit with one line)."""
    if mode == "system":
        return
    if mode != "reuse":
        raise ValueError(f"launch.allocator: expected 'system' or 'reuse', got {mode!r}")
    libc = glibc()
    if libc is None:
        raise SystemExit("codist: launch.allocator=reuse needs glibc's mallopt, which this C library lacks; "
                         "use launch.allocator=system")
    if libc.mallopt(M_MMAP_MAX, 0) != 1:
        raise SystemExit("codist: launch.allocator=reuse: glibc's mallopt refused M_MMAP_MAX=0")
