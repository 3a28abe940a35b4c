"""benchmarks/mutation_targets.py names what exists (issue 52): every module `make mutation` mutates is a
file of the checkout (modules have moved: src/codist/rank/{comm,optim,distill}.py went to
src/codist/runtime/ and src/codist/algorithms/distillation_loss.py), every test file (and test function
of a path::name) that judges it exists, and every `functions` entry is a top-level function or class
of its module, so a run never fails, or silently judges nothing, on a stale name."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from benchmarks.mutation_targets import TARGETS

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("module", list(TARGETS))
def test_every_target_and_its_tests_exist(module):
    spec = TARGETS[module]
    assert (ROOT / module).is_file(), f"{module}: no such module"
    assert spec["tests"], f"{module}: no tests judge it"
    for test in spec["tests"]:
        path, _, name = test.partition("::")
        assert (ROOT / "tests" / path).is_file(), f"{module}: no test file tests/{path}"
        if name:
            defined = {n.name for n in ast.parse((ROOT / "tests" / path).read_text()).body
                       if isinstance(n, ast.FunctionDef)}
            assert name in defined, f"{module}: tests/{path} has no test {name}"
    top = {n.name for n in ast.parse((ROOT / module).read_text()).body
           if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    missing = [f for f in spec.get("functions", []) if f not in top]
    assert not missing, f"{module}: no top-level function or class {missing}"
    assert set(spec) <= {"tests", "functions", "k", "marks"}, f"{module}: unknown keys {set(spec) - {'tests', 'functions', 'k', 'marks'}}"
