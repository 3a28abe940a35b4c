"""Where the file system refuses flock (Lustre or NFS without lock support answer ENOSYS or
EOPNOTSUPP). A monkeypatched fcntl.flock raising OSError(ENOSYS) stands in for such a file
system: the run directory refuses in one line naming the lock file and the errno; a data cache
warns in one line and is built without the lock (the real Criteo cache here)."""
import errno
import fcntl

import numpy as np
import pytest
import torch
from test_ctr_workload import criteo_line, write_criteo

from codist.config import ConfigError
from codist.launching.rundir import LOCK, RunDir


@pytest.fixture
def no_flock(monkeypatch):
    def refuse(fd, op):
        raise OSError(errno.ENOSYS, "Function not implemented")
    monkeypatch.setattr(fcntl, "flock", refuse)


def test_run_directory_without_working_locks_says_so_in_one_line(tmp_path, no_flock):
    with pytest.raises(ConfigError) as e:
        RunDir(tmp_path / "run")
    msg = str(e.value)
    assert "\n" not in msg and str(tmp_path / "run" / LOCK) in msg and "ENOSYS" in msg
    assert "file system" in msg


def test_a_cache_is_built_without_the_lock_with_a_warning(tmp_path, no_flock, capsys):
    from codist.workloads import ctr
    data = tmp_path / "train.txt"
    write_criteo(data, [criteo_line(torch.Generator().manual_seed(0)) for _ in range(20)])
    x, y = ctr.cached_criteo(data, 1000, None, tmp_path / "cache")
    x0, y0 = ctr.read_criteo(data, 1000)
    assert np.array_equal(x.numpy(), x0.numpy()) and np.array_equal(y.numpy(), y0.numpy())
    warning = [line for line in capsys.readouterr().err.splitlines() if "cannot lock" in line]
    assert len(warning) == 1 and "ENOSYS" in warning[0] and str(tmp_path / "cache") in warning[0]
