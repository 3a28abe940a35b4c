"""The layering of src/codist (docs/architecture.md, "Layers"): no import cycle, and no module
imports a layer above its own. Every import statement counts, those inside functions too.

Layers are given by module-name patterns, first match wins, because the config classes of the
algorithms and workloads (`*_config.py`, `registry.py`, `sections.py`, `schema.py`) sit in the
same folders as the rank-side strategies and models: import-linter's layers contract takes whole
packages (or every module listed by name, which a new algorithm file would have to join), so a
small AST scan is used instead. A new module falls into a layer by its name; one that matches no
pattern fails the test until it is given one.
"""
from __future__ import annotations

import ast
import re
import subprocess
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

# top first: a module imports its own layer or lower
LAYERS = ("entry", "process", "rank", "plug-in", "runtime", "config", "base")
RULES = (   # (module pattern, layer), first match wins
    # entry: the command a user runs
    ("codist.__main__", "entry"), ("codist.cli", "entry"),
    # process side: check, start, supervise and own a run's processes and directory; the data commands
    ("codist.launching", "process"), ("codist.launching.*", "process"),
    ("codist.datacheck", "process"), ("codist.fake_data", "process"), ("codist.fake_data.*", "process"),
    # rank side, the loop: what one rank runs (set-up, train, evaluate, checkpoint), calling the plug-ins
    ("codist.rank", "rank"), ("codist.rank.*", "rank"),
    # config: the run schema and the registries (torch-free), the plan's budget
    ("codist.config", "config"), ("codist.data_root", "config"), ("codist.budget", "config"),
    ("codist.algorithms.registry", "config"), ("codist.algorithms.sections", "config"),
    ("codist.algorithms.*_config", "config"),
    ("codist.workloads", "config"), ("codist.workloads.schema", "config"), ("codist.workloads.metrics", "config"),
    ("codist.workloads.*_config", "config"),
    # rank side, the plug-ins: the strategies, models and data sources beside their configs
    ("codist.algorithms", "plug-in"), ("codist.algorithms.*", "plug-in"), ("codist.workloads.*", "plug-in"),
    # rank side, what the loop and the plug-ins run on: process groups, engines, optimizers, precision,
    # CUDA defaults, the communication meter, batch streams, the heartbeat
    ("codist.runtime", "runtime"), ("codist.runtime.*", "runtime"),
    # base: what both sides share and that imports nothing of codist's (the ranks' environment
    # contract, the run's owner, exit codes, atomic writes and logs)
    ("codist", "base"), ("codist.rank_env", "base"), ("codist.owner", "base"), ("codist.exits", "base"),
    ("codist.runlog", "base"),
)


def modules(root: Path) -> dict[str, Path]:
    found = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(root: Path, package: str) -> dict[str, set[str]]:
    """module -> the modules of `package` it imports (anywhere in its body), resolved to files."""
    mods = modules(root)
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = here.split(".")[:len(here.split(".")) - (node.level - 1)]
                    base = ".".join(parts + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            else:
                continue
            for target in targets:
                if target.split(".")[0] != package:
                    continue
                while target not in mods and "." in target:
                    target = target.rpartition(".")[0]
                if target != name:
                    edges[name].add(target)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def layer(module: str, rules=RULES) -> str | None:
    return next((layer for pattern, layer in rules if fnmatchcase(module, pattern)), None)


def upward(edges: dict[str, set[str]], rules=RULES) -> list[str]:
    rank = {name: i for i, name in enumerate(LAYERS)}
    return [f"{a} ({layer(a, rules)}) imports {b} ({layer(b, rules)})"
            for a in sorted(edges) for b in sorted(edges[a])
            if rank[layer(a, rules)] > rank[layer(b, rules)]]


def test_every_module_has_a_layer():
    unplaced = [m for m in modules(SRC) if m.startswith("codist") and layer(m) is None]
    assert unplaced == [], f"modules matching no rule of tests/test_layers.py RULES: {unplaced}"


def test_no_import_cycle():
    assert cycles(imports(SRC, "codist")) == []


def test_no_module_imports_a_layer_above_its_own():
    assert upward(imports(SRC, "codist")) == []


def in_package(module: str, *packages: str) -> bool:
    """`module` is one of codist's `packages` or a module inside one (codist.rank, not codist.rank_env)."""
    return module.split(".")[:2] in [["codist", p] for p in packages]


def test_the_plug_ins_never_import_the_training_loop():
    """codist.rank (the loop) imports the plug-ins (codist.algorithms, codist.workloads), never the
    reverse: what both need lives below them (codist.runtime), or with the plug-ins where only they
    use it (codist.algorithms.distillation_loss)."""
    edges = imports(SRC, "codist")
    assert [f"{a} imports {b}" for a in sorted(edges) for b in sorted(edges[a])
            if in_package(a, "algorithms", "workloads") and in_package(b, "rank")] == []


LAUNCHERS = {"deepspeed", "torchrun", "fork", "warm"}


def name_tests(root: Path) -> list[str]:
    """Every comparison (==, !=, in, not in) of a value with a launcher's name, as file:line."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Compare):
                values = [node.left, *node.comparators]
                values += [e for v in values if isinstance(v, (ast.Tuple, ast.List, ast.Set)) for e in v.elts]
                if any(isinstance(v, ast.Constant) and v.value in LAUNCHERS for v in values):
                    found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_a_launchers_name_is_read_in_one_place():
    """The process side asks a launcher what it does (codist.launching.launchers.named(cfg).forks,
    its command, stop and exit code) instead of testing its name."""
    assert name_tests(SRC / "codist") == []
    launchers = (SRC / "codist" / "launching" / "launchers.py").read_text()
    reads = [line for path in (SRC / "codist").rglob("*.py") for line in path.read_text().splitlines()
             if "NAMED[" in line]
    assert reads == ["    return NAMED[cfg.launch.launcher]"] and reads[0] in launchers


def test_the_process_side_is_one_package_read_top_down():
    """codist.launching holds the process side; its __init__ imports nothing (the ranks import the
    base modules, never this package) and names every module in it."""
    package = SRC / "codist" / "launching"
    init = (package / "__init__.py").read_text()
    assert not [n for n in ast.walk(ast.parse(init)) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert {p.stem for p in package.glob("*.py")} - {"__init__"} <= {
        w.strip("`:,.") for w in init.split() if w.startswith("`")}
    edges = imports(SRC, "codist")
    assert not [f"{a} imports {b}" for a in edges for b in edges[a]
                if b.startswith("codist.launching") and layer(a) not in ("entry", "process")]


def test_the_scan_finds_a_cycle_and_an_upward_import(tmp_path):
    """The checks above can fail: a package with a function-level upward import that closes a cycle."""
    pkg = tmp_path / "toy"
    (pkg / "algorithms").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "algorithms" / "__init__.py").write_text("")
    (pkg / "algorithms" / "toy_config.py").write_text("def f():\n    from ..launch import go\n")
    (pkg / "launch.py").write_text("from .algorithms import toy_config\n")
    rules = (("toy.launch", "process"), ("toy.algorithms.*_config", "config"), ("toy.algorithms", "rank"),
             ("toy", "base"))
    edges = imports(tmp_path, "toy")
    assert edges["toy.algorithms.toy_config"] == {"toy.launch"}
    assert cycles(edges) == [["toy.algorithms.toy_config", "toy.launch"]]
    assert upward(edges, rules) == ["toy.algorithms.toy_config (config) imports toy.launch (process)"]
    (pkg / "launch.py").write_text("def pick(cfg):\n    return 1 if cfg.launcher in ('fork', 'warm') else 2\n")
    assert name_tests(pkg) == ["launch.py:2"]


# ---------------------------------------------------------------- no sys.path glue (issue 25 item 4)

ROOT = SRC.parent
PACKAGES = ("analysis", "workflows", "benchmarks")   # installed beside codist (pyproject's package list)
SYS_PATH = re.compile(r"\bsys\.path\.(insert|append|extend)\(|\bsite\.addsitedir\(")
IMPORT = re.compile(r"^\s*(?:import|from)\s+([A-Za-z_]\w*)\b(?!\.)")   # a top-level module by its bare name


def tracked(root: Path) -> list[Path]:
    """The checkout's committed-or-added files outside tests/ (git's list: a file being written in
    the shared tree but not yet added is not judged)."""
    out = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, text=True, check=True).stdout
    return [root / p for p in out.split("\0") if p and not p.startswith("tests/")
            and (p.endswith((".py", ".smk")) or p == "Snakefile")]


def sys_path_glue(files: list[Path], root: Path) -> list[str]:
    """Every sys.path change, and every import of an analysis/, workflows/ or benchmarks/ module by
    its bare name (which works only with that folder on sys.path), as 'file:line: text'."""
    shared = {p.stem: d for d in PACKAGES for p in (root / d).glob("*.py") if p.stem != "__init__"}
    found = []
    for path in files:
        for i, line in enumerate(path.read_text().splitlines(), 1):
            bare = IMPORT.match(line)
            if SYS_PATH.search(line) or (bare and bare.group(1) in shared):
                found.append(f"{path.relative_to(root)}:{i}: {line.strip()}")
    return found


def test_no_sys_path_insert_outside_the_tests():
    """analysis/, workflows/ and benchmarks/ are packages: they import what they share as
    `analysis.x`, `workflows.x`, `benchmarks.x` (docs/architecture.md, "Packages"), not through sys.path."""
    assert sys_path_glue(tracked(ROOT), ROOT) == []


def test_the_glue_scan_finds_both_kinds(tmp_path):
    (tmp_path / "analysis").mkdir()
    (tmp_path / "analysis" / "stats.py").write_text("")
    (tmp_path / "analysis" / "plot.py").write_text(
        "import sys\nsys.path.insert(0, 'x')\nimport stats\nfrom stats import t\nfrom analysis import stats\n"
        "from scipy import stats\nimport numpy\n")
    assert sys_path_glue([tmp_path / "analysis" / "plot.py"], tmp_path) == [
        "analysis/plot.py:2: sys.path.insert(0, 'x')", "analysis/plot.py:3: import stats",
        "analysis/plot.py:4: from stats import t"]


# ---------------------------------------------------------------- the checkout's top level (issue 52)

def imports_of(folder: Path, package: str) -> list[str]:
    """Every import statement of `package` or a module in it (anywhere in a file's body) in the .py
    files under `folder`, as 'file:line'."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        lines = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            if any(n.split(".")[0] == package for n in names):
                lines.add(node.lineno)
        found += [f"{path.relative_to(folder.parent)}:{n}" for n in sorted(lines)]
    return found


# top first (docs/architecture.md, "Packages outside src/codist"): a package imports those below it,
# never one above it, and never benchmarks/, a leaf that imports anything and nothing imports
TOP_LEVEL = {"workflows": ROOT / "workflows", "analysis": ROOT / "analysis", "codist": SRC / "codist"}


@pytest.mark.parametrize("package", list(TOP_LEVEL))
def test_no_import_runs_back_up_the_top_level(package):
    """workflows/ imports analysis/ and codist, never benchmarks/; analysis/ imports neither
    workflows/ (the plan parsers live there, frontier_plan.py too) nor benchmarks/ (what the analysis
    shares with a benchmark, alpha_beta.py's network model, lives in analysis/); src/codist imports
    none of the three (the budget's command, which reads the plan, is workflows/budget.py). Every
    .py file under the package's folder, imports inside functions too (not the .smk files)."""
    above = [*list(TOP_LEVEL)[:list(TOP_LEVEL).index(package)], "benchmarks"]
    assert [line for name in above for line in imports_of(TOP_LEVEL[package], name)] == []


def test_the_import_scan_finds_every_form(tmp_path):
    (tmp_path / "analysis").mkdir()
    (tmp_path / "analysis" / "a.py").write_text(
        "import benchmarks\nimport benchmarks.x as y\nfrom benchmarks.x import f\nfrom benchmarks import x\n"
        "def g():\n    from benchmarks.projected_walltime import project\n"
        "import benchmarks_other\nfrom analysis import benchmarks\nfrom .benchmarks import z\n")
    assert imports_of(tmp_path / "analysis", "benchmarks") == [f"analysis/a.py:{n}" for n in (1, 2, 3, 4, 6)]
