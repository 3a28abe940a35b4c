"""`launch.allocator`: reuse serves large tensors from glibc's heap instead of fresh mappings, and
moves no number of a run (codist.runtime.allocator)."""
import json
import subprocess
import sys

import pytest
from conftest import comparable, launch_run, read_rows

from codist import config
from codist.runtime import allocator

# what a 64 MiB tensor adds to this process's malloc statistics: bytes in mmap'd blocks (hblkhd) and
# in the heap (arena)
PROBE = """
import ctypes, json, sys, torch
from codist.runtime import allocator
allocator.apply(sys.argv[1])
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]
libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = Info
before = libc.mallinfo2()
t = torch.empty(16 * 2 ** 20).fill_(1.0)   # 64 MiB
after = libc.mallinfo2()
print(json.dumps({"mmapped": after.hblkhd - before.hblkhd, "heap": after.arena - before.arena}))
"""

needs_glibc = pytest.mark.skipif(allocator.glibc() is None, reason="launch.allocator=reuse is glibc's")


def probe(mode: str) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@needs_glibc
def test_reuse_serves_a_large_tensor_from_the_heap_and_system_maps_it():
    system, reuse = probe("system"), probe("reuse")
    assert system["mmapped"] >= 64 * 2 ** 20        # glibc's default: a fresh mapping for the tensor
    assert system["heap"] < 2 ** 20
    assert reuse["mmapped"] == 0                    # reuse: no new mapping ...
    assert reuse["heap"] >= 64 * 2 ** 20            # ... the tensor lives in the heap


def test_the_setting_is_validated_and_stays_out_of_the_run_id_and_the_config_text():
    with pytest.raises(config.ConfigError, match="allocator"):
        config.validate({"launch": {"allocator": "jemalloc"}})
    system = config.validate({})
    reuse = config.validate({"launch": {"allocator": "reuse"}})
    assert reuse.run_id() == system.run_id()
    assert "allocator" not in config.to_text_dict(system)["launch"]           # runs planned before it keep their text
    assert config.to_text_dict(reuse)["launch"]["allocator"] == "reuse"
    with pytest.raises(ValueError, match="expected 'system' or 'reuse'"):
        allocator.apply("tcmalloc")


@needs_glibc
@pytest.mark.slow
def test_a_run_with_reuse_gives_the_same_rows_as_with_the_system_allocator(tmp_path):
    system = launch_run(tmp_path / "system", {})
    reuse = launch_run(tmp_path / "reuse", {"launch": {"allocator": "reuse"}})
    assert comparable(read_rows(reuse)) == comparable(read_rows(system))
