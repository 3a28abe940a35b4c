"""Where DeepSpeed builds its CPU communication op (issue 42): TORCH_EXTENSIONS_DIR defaults to
codist's cache unless the user set it, and a folder that cannot be written (a read-only HOME) is
one line before any rank starts, not DeepSpeed's traceback from every rank. The HOME is really
read-only: a read-only bind mount in a private user namespace when the tests run as root (root
writes through a 0555 folder), a 0555 folder otherwise."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import TINY, deep_update

from codist import config
from codist.launching import launch

CPU = deep_update(TINY, {"launch": {"launcher": "fork", "device": "cpu"}})


def test_the_default_is_codists_cache_and_the_users_choice_is_kept(tmp_path):
    assert launch.extensions_dir({"HOME": "/h"}) == (Path("/h/.cache/codist/torch_extensions"), False)
    assert launch.extensions_dir({"HOME": "/h", "XDG_CACHE_HOME": "/x"})[0] == Path("/x/codist/torch_extensions")
    assert launch.extensions_dir({"HOME": "/h", "TORCH_EXTENSIONS_DIR": "/mine"}) == (Path("/mine"), True)
    env = launch.launch_env(config.validate(CPU), "cpu", 1)
    assert env["TORCH_EXTENSIONS_DIR"] == str(launch.extensions_dir(os.environ)[0])


def test_ranks_build_with_this_environments_ninja_whatever_path_started_them(tmp_path):
    """The ranks' PATH starts with this interpreter's bin folder (its pip ninja), once, so a codist run
    started with or without the venv on PATH builds DeepSpeed's op with the same ninja: two ninjas'
    .ninja_log versions rebuilt it (~50 s) at every switch."""
    bin_dir = str(Path(sys.executable).parent)
    assert shutil.which("ninja", path=bin_dir), "the environment installs its own ninja (torch's JIT builds)"
    for start in ("/usr/bin:/bin", f"{bin_dir}:/usr/bin", f"/usr/bin:{bin_dir}:/bin"):
        env = launch.op_build_env({"HOME": str(tmp_path), "PATH": start})
        parts = env["PATH"].split(os.pathsep)
        assert parts[0] == bin_dir and parts.count(bin_dir) == 1 and set(parts) == set(start.split(":")) | {bin_dir}
        assert shutil.which("ninja", path=env["PATH"]) == str(Path(bin_dir) / "ninja")
        assert env["TORCH_EXTENSIONS_DIR"] == str(tmp_path / ".cache" / "codist" / "torch_extensions")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PATH", "/usr/bin:/bin")
        assert launch.launch_env(config.validate(CPU), "cpu", 1)["PATH"].split(os.pathsep)[0] == bin_dir
        # a system interpreter (no virtual environment): the user's PATH is left as it is, so a
        # module-loaded compiler ahead of /usr/bin stays ahead
        mp.setattr(sys, "prefix", sys.base_prefix)
        assert "PATH" not in launch.op_build_env({"HOME": str(tmp_path), "PATH": "/opt/gcc/bin:/usr/bin"})


def read_only_home(tmp_path, *command: str, env: dict) -> subprocess.CompletedProcess:
    """Run `command` with HOME an empty folder this user cannot write."""
    home = tmp_path / "home"
    home.mkdir()
    env = {**env, "HOME": str(home)}
    env.pop("XDG_CACHE_HOME", None)
    if os.geteuid() != 0:
        home.chmod(0o555)
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-rm", "true"]).returncode != 0:
        pytest.skip("running as root without user namespaces: no way to make HOME read-only for root")
    script = 'mount --bind -o ro "$HOME" "$HOME" && exec "$@"'
    return subprocess.run(["unshare", "-rm", "sh", "-c", script, "sh", *command], env=env, capture_output=True,
                          text=True, timeout=600)


def test_a_read_only_home_is_one_line_before_any_rank_starts(tmp_path):
    cfg, out = tmp_path / "run.yaml", tmp_path / "run"
    cfg.write_text(yaml.safe_dump(CPU))
    env = {k: v for k, v in os.environ.items() if k != "TORCH_EXTENSIONS_DIR"}
    done = read_only_home(tmp_path, sys.executable, "-m", "codist.cli", "run", str(cfg), "--out", str(out), env=env)
    home = tmp_path / "home"
    assert done.returncode == 2, done.stderr
    assert done.stderr == (f"codist: codist's default TORCH_EXTENSIONS_DIR (under XDG_CACHE_HOME or HOME) "
                           f"'{home}/.cache/codist/torch_extensions' cannot be written "
                           f"({'Read-only file system' if os.geteuid() == 0 else 'Permission denied'}): DeepSpeed "
                           f"builds its CPU communication op there; set TORCH_EXTENSIONS_DIR to a writable folder\n")
    assert not out.exists()


@pytest.mark.slow
def test_with_a_read_only_home_a_writable_torch_extensions_dir_runs(tmp_path):
    """The user's TORCH_EXTENSIONS_DIR (here the folder this machine's runs built the op in, so it
    is not built again) is where the ranks look: the run trains with HOME read-only."""
    cfg, out = tmp_path / "run.yaml", tmp_path / "run"
    cfg.write_text(yaml.safe_dump(CPU))
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(launch.extensions_dir(os.environ)[0])}
    done = read_only_home(tmp_path, sys.executable, "-m", "codist.cli", "run", str(cfg), "--out", str(out), env=env)
    assert done.returncode == 0, done.stderr
    assert (out / "summary.json").exists()
