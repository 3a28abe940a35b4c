"""The experiments files mean the same under every PyYAML release: no YAML merge whose result depends
on the merge order. PyYAML 6.0.4 (the lock's) changed it (yaml/pyyaml#953): in a list merge a key that
two sources set comes from the later source (the YAML spec and 6.0.3: the earlier one), and a mapping
merged from a mapping that itself merges and overrides a one-letter key (`b`, `a`) keeps the inner
value. Either can silently change a run config or a regime check, so neither may appear."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from yaml.nodes import MappingNode, SequenceNode

ROOT = Path(__file__).resolve().parents[1]
FILES = sorted((ROOT / "replications").glob("*/experiments.yaml")) + sorted((ROOT / "replications").glob("*/*.yaml"))


def _merges(node):
    for k, v in node.value:
        if k.tag == "tag:yaml.org,2002:merge":
            yield from (v.value if isinstance(v, SequenceNode) else [v])


def _own(node) -> set:
    return {k.value for k, _ in node.value if k.tag != "tag:yaml.org,2002:merge"}


def _keys(node) -> set:
    return _own(node).union(*(_keys(s) for s in _merges(node)))


def order_dependent_merges(text: str) -> list[str]:
    """Each merge of the document whose result depends on the merge order (module docstring)."""
    out, seen, todo = [], set(), [yaml.compose(text)]
    while todo:
        n = todo.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, SequenceNode):
            todo += n.value
        if not isinstance(n, MappingNode):
            continue
        where = f"line {n.start_mark.line + 1}"
        sources = list(_merges(n))
        counts: dict = {}
        for s in sources:
            for k in _keys(s):
                counts[k] = counts.get(k, 0) + 1
        shared = sorted(k for k, c in counts.items() if c > 1 and k not in _own(n))
        if shared:
            out.append(f"{where}: a list merge whose sources share {shared} (write them out in the mapping)")
        for s in sources:
            for inner in _merges(s):
                short = sorted(k for k in _own(s) & _keys(inner) if len(k) == 1)
                if short:
                    out.append(f"{where}: merges the mapping of line {s.start_mark.line + 1}, which overrides "
                               f"one-letter key(s) {short} of its own merge (write it out without a merge)")
        todo += [v for _, v in n.value]
    return out


@pytest.mark.parametrize("path", sorted(set(FILES)), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_merge_depends_on_its_order(path):
    assert order_dependent_merges(path.read_text()) == [], path


def test_the_check_finds_both_kinds():
    nested = "a: &a {x: 1, b: A}\nb: &b {<<: *a, b: B}\nc: {<<: *b, f: 1}\n"
    assert order_dependent_merges(nested) == [
        "line 3: merges the mapping of line 2, which overrides one-letter key(s) ['b'] of its own merge "
        "(write it out without a merge)"]
    listed = "p: &p {m: [1], k: 1}\nq: &q {m: [2]}\nr: {<<: [*p, *q]}\ns: {<<: [*p, *q], m: [3]}\n"
    assert order_dependent_merges(listed) == [
        "line 3: a list merge whose sources share ['m'] (write them out in the mapping)"]
