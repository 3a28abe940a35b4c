"""make mutation's private copy (benchmarks/mutation.py copy_checkout): it carries the checkout's git
history (tests/test_preregistration.py reads the design history of the real papers from git), the
files of HEAD or of the working tree, and nothing done in it reaches the checkout's repository. On
a throw-away repository standing for the checkout."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from benchmarks import mutation


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True,
                          capture_output=True, text=True).stdout


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """Two commits; then a tracked file changed, one deleted, one untracked and one ignored."""
    root = tmp_path / "checkout"
    root.mkdir()
    git(root, "init", "-q")
    (root / ".gitignore").write_text("ignored.txt\n")
    (root / "a.txt").write_text("a1\n")
    (root / "gone.txt").write_text("g\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first")
    (root / "a.txt").write_text("a2\n")
    git(root, "commit", "-q", "-am", "second")
    (root / "a.txt").write_text("a3 (uncommitted)\n")
    (root / "gone.txt").unlink()
    (root / "new.txt").write_text("n\n")
    (root / "ignored.txt").write_text("i\n")
    monkeypatch.setattr(mutation, "ROOT", root)
    return root


def test_the_copy_of_head_carries_its_history_and_head_s_files(checkout, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    copied = mutation.copy_checkout(work, worktree=False)
    tree = work / "tree"
    assert copied == git(checkout, "rev-parse", "--short", "HEAD").strip()
    assert git(tree, "rev-parse", "HEAD") == git(checkout, "rev-parse", "HEAD")
    assert git(tree, "log", "--format=%s").split() == ["second", "first"]       # the whole history
    assert git(tree, "rev-parse", "--is-shallow-repository").strip() == "false"
    assert (tree / "a.txt").read_text() == "a2\n" and (tree / "gone.txt").exists()
    assert not (tree / "new.txt").exists() and not (tree / "ignored.txt").exists()


def test_the_copy_of_the_working_tree_has_its_files_over_head_s_history(checkout, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    assert mutation.copy_checkout(work, worktree=True).endswith("+worktree")
    tree = work / "tree"
    assert git(tree, "log", "--format=%s").split() == ["second", "first"]
    assert (tree / "a.txt").read_text() == "a3 (uncommitted)\n" and (tree / "new.txt").read_text() == "n\n"
    assert not (tree / "gone.txt").exists() and not (tree / "ignored.txt").exists()


def test_nothing_done_in_the_copy_reaches_the_checkout_s_repository(checkout, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    mutation.copy_checkout(work, worktree=False)
    tree = work / "tree"
    refs, status = git(checkout, "show-ref"), git(checkout, "status", "--porcelain")
    assert git(tree, "remote") == ""                                     # no remote to push to
    (tree / "a.txt").write_text("a mutant\n")
    git(tree, "commit", "-q", "-am", "in the copy")
    made = git(tree, "rev-parse", "HEAD").strip()
    git(tree, "gc", "-q", "--prune=now")
    assert subprocess.run(["git", "cat-file", "-e", made], cwd=checkout).returncode != 0   # not in its objects
    assert (git(checkout, "show-ref"), git(checkout, "status", "--porcelain")) == (refs, status)
    assert (checkout / "a.txt").read_text() == "a3 (uncommitted)\n"
    assert git(checkout, "log", "--format=%s").split() == ["second", "first"]
