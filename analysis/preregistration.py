"""When each claim's design was fixed, from git: pre-registration as a mechanism.

A claim's design at one scale is what decides its verdict, not its wording: its measure, metric,
series, models, offsets, margin (`at_least`, `within`), target, whether it is declared untestable
(`full_scale_only`, its presence), its sequential looks (`sequential`, with the seeds its later looks
add: analysis/sequential.py), its per-scale overrides, every regime check's numbers (quantity,
series, metric, fraction, steps, min, max, `over`, ...; not the check's name, source or why), and,
for every figure the claim or a check reads, the scale's seeds and the resolved run config (preset,
base, overrides; without what the run id leaves out) of every series they name (run lengths,
schedules, weight decay, ...). It is read at every commit of the paper's experiments file and of the
presets; a commit where it differs from the previous one is a design change. Then, per claim:

  design_commit      the last design change (HEAD's design was fixed there)
  relation           before / with / after results (below); "uncommitted" when the working tree's
                     design differs from HEAD's; "no results" when no figure of it has a table
  results_commit     the first commit holding a table of one of the figures the claim reads, or read
                     in any earlier version (results/<scale>/<paper>/<figure>_curves.csv): from then
                     on, outcomes had been seen
  design_results     the first commit at or after design_commit that changed one of those tables:
                     the results of this design
  after_results      the design changes made in a later commit than results_commit: each must be
                     declared, with why, in replications/design_changes.yaml (LEDGER: per paper, per
                     commit, optionally per claim), or tests/test_preregistration.py fails; claims.csv
                     carries them (changed_after_results)

A design change in the very commit that first committed results is "with results": its runs came
before the commit, so git cannot show it was fixed before them (docs/claims.md, "What was declared when", says so per claim).

    python analysis/preregistration.py replications/<paper>/experiments.yaml [--scale embedded]
"""
from __future__ import annotations

import argparse
import copy
import functools
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from analysis.sequential import continued
from codist.config import NOT_IN_RUN_ID

# libyaml's parser where PyYAML has it (the lock's wheel does): the same documents as yaml.safe_load
# (the same SafeConstructor, merges included), about 20x faster; a record parses every committed
# version of a paper's experiments file, and their number grows with the history
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _load(text: str):
    return yaml.load(text, Loader=_SAFE_LOADER)


TEXT_KEYS = {"claim", "source", "paper", "changed_after_results", "regime_cost"}   # wording and cost, not design
CHECK_TEXT_KEYS = {"check", "source", "why"}


class GitHistoryError(RuntimeError):
    """No git history to read (not a checkout, or git missing)."""


def _git(root: Path, *args: str) -> str:
    try:
        p = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise GitHistoryError(f"git {' '.join(args)}: {e}") from None
    if p.returncode != 0:
        raise GitHistoryError(f"git {' '.join(args)}: {p.stderr.strip()}")
    return p.stdout


def _deep_merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out


def _set_dotted(raw: dict, key: str, value) -> None:
    node = raw
    parts = str(key).split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            return
    node[parts[-1]] = copy.deepcopy(value)


def _series_config(sc: dict, series: str, read_preset) -> object:
    """A series' run config as declared (preset, base, overrides; not validated: an old commit's
    file may predate today's config schema); a series the scale does not have: None."""
    overrides = (sc.get("series") or {}).get(series)
    if overrides is None:
        return None
    raw = _deep_merge(read_preset(sc["preset"]) if sc.get("preset") else {}, sc.get("base") or {})
    for k, v in overrides.items():
        _set_dotted(raw, k, v)
    for key in NOT_IN_RUN_ID:   # what never changes a run's results (its id leaves them out too)
        *path, last = key.split(".")
        node = raw
        for part in path:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(last, None)
    return raw


def _named_series(claim: dict, scale: str) -> dict[str, set[str]]:
    """figure -> the series the claim (with its scale's overrides) and its checks name."""
    c = {**claim, **((claim.get("scales") or {}).get(scale) or {})}
    fig = c.get("figure")
    out: dict[str, set[str]] = {fig: {c[k] for k in ("a", "b", "a2", "b2") if c.get(k)}}
    if isinstance(c.get("b_offset"), str) and c["b_offset"].startswith("@"):
        out[fig].add(c["b_offset"][1:])
    for r in c.get("regime") or []:
        for q in (r, r.get("over")):
            if isinstance(q, dict):
                f = q.get("figure") or fig
                out.setdefault(f, set()).update({q.get("series") or c.get("a"), q.get("b") or c.get("b")} - {None})
    return out


def _strip_checks(checks) -> list:
    out = []
    for r in checks or []:
        r = {k: v for k, v in r.items() if k not in CHECK_TEXT_KEYS}
        if isinstance(r.get("over"), dict):
            r["over"] = {k: v for k, v in r["over"].items() if k not in CHECK_TEXT_KEYS}
        out.append(r)
    return out


def claim_design(doc: dict, claim_id: str, scale: str, read_preset) -> dict | None:
    """The design of one claim at `scale` from a parsed experiments file (None: no such claim)."""
    claim = next((c for c in doc.get("claims") or [] if c.get("id") == claim_id), None)
    if claim is None:
        return None
    design = {k: v for k, v in claim.items() if k not in TEXT_KEYS and k != "regime"}
    design["full_scale_only"] = bool(claim.get("full_scale_only"))
    design["regime"] = _strip_checks(claim.get("regime"))
    if isinstance(design.get("scales"), dict):
        design["scales"] = {s: ({**o, "regime": _strip_checks(o["regime"])} if "regime" in (o or {}) else o)
                            for s, o in design["scales"].items()}
    runs = {}
    for fig, names in _named_series(claim, scale).items():
        sc = (((doc.get("figures") or {}).get(fig) or {}).get("scales") or {}).get(scale)
        if sc is None:
            runs[fig] = None
            continue
        series, todo = {}, list(names)
        while todo:   # a series' "@other" value names another run it reads (a teacher): its design too
            s = todo.pop()
            if s in series:
                continue
            series[s] = _series_config(sc, s, read_preset)
            todo += [v[1:] for v in (sc.get("series") or {}).get(s, {}).values()
                     if isinstance(v, str) and v.startswith("@")]
        runs[fig] = {"seeds": sc.get("seeds"), "series": series}
    design["runs"] = runs
    seq = {**claim, **((claim.get("scales") or {}).get(scale) or {})}.get("sequential")
    looks = seq.get("looks") if isinstance(seq, dict) else None
    seeds = (runs.get(claim.get("figure")) or {}).get("seeds")
    if looks and seeds:   # a sequential claim's later looks' seeds are fixed in advance: part of its design
        try:
            runs[claim["figure"]]["continued_seeds"] = continued(seeds, max(looks))
        except (TypeError, ValueError):   # an old commit's malformed declaration: its keys already differ
            pass
    return design


@dataclass
class Record:
    """What git says about one claim's design at one scale (module docstring)."""
    claim: str
    design_commit: str = ""
    results_commit: str = ""
    relation: str = ""            # "before results", "with results", "after results", "no results", "uncommitted"
    design_results: str = ""      # the first commit after design_commit that changed one of the figures' tables
    after_results: list[str] = field(default_factory=list)   # design-changing commits after results_commit
    changes: dict[str, str] = field(default_factory=dict)     # commit -> what changed (design keys)


def _changed_keys(old, new, prefix="") -> list[str]:
    """The design keys that differ (dotted paths, the first few levels)."""
    if old == new:
        return []
    if isinstance(old, dict) and isinstance(new, dict) and prefix.count(".") < 6:
        out = []
        for k in sorted(set(old) | set(new), key=str):
            out += _changed_keys(old.get(k), new.get(k), f"{prefix}{k}.")
        return out
    return [prefix.rstrip(".") or "(claim added)"]


class History:
    """The git history of one paper's experiments file (and the presets) in the checkout holding it."""

    def __init__(self, paper_file: Path, scale: str = "embedded"):
        paper_file = Path(paper_file).resolve()
        self.root = Path(_git(paper_file.parent, "rev-parse", "--show-toplevel").strip())
        if _git(self.root, "rev-parse", "--is-shallow-repository").strip() == "true":
            raise GitHistoryError(f"{self.root}: a shallow clone holds only part of the design history")
        self.rel = paper_file.relative_to(self.root).as_posix()
        self.presets_dir = paper_file.parent.parent
        self.scale = scale
        self.paper = paper_file.parent.name
        self.order = {c: i for i, c in enumerate(_git(self.root, "rev-list", "--reverse", "HEAD").split())}
        presets = self.presets_dir.relative_to(self.root).as_posix() + "/presets"
        self.commits = _git(self.root, "log", "--reverse", "--format=%H", "--", self.rel, presets).split()
        self.working = _load(paper_file.read_text())

    @functools.lru_cache(maxsize=None)
    def _doc(self, commit: str):
        try:
            return _load(_git(self.root, "show", f"{commit}:{self.rel}"))
        except (GitHistoryError, yaml.YAMLError):
            return None

    @functools.lru_cache(maxsize=None)
    def _preset(self, commit: str | None, name: str):
        path = self.presets_dir / name
        try:
            text = (path.read_text() if commit is None else
                    _git(self.root, "show", f"{commit}:{path.relative_to(self.root).as_posix()}"))
            return _load(text) or {}
        except (OSError, GitHistoryError, yaml.YAMLError):
            return {"missing preset": name}

    def design_at(self, commit: str | None, claim_id: str):
        doc = self.working if commit is None else self._doc(commit)
        if not isinstance(doc, dict):
            return None
        return claim_design(doc, claim_id, self.scale, lambda name: self._preset(commit, name))

    @functools.lru_cache(maxsize=None)
    def results_commits(self, figure: str) -> tuple[str, ...]:
        """The commits that changed the figure's committed curves, oldest first."""
        path = f"results/{self.scale}/{self.paper}/{figure}_curves.csv"
        return tuple(_git(self.root, "log", "--reverse", "--format=%H", "--", path).split())

    def record(self, claim_id: str) -> Record:
        rec = Record(claim_id)
        prev, designs, figures = None, {}, set()
        for c in self.commits:
            d = self.design_at(c, claim_id)
            if d is not None and d != prev:
                designs[c] = (prev, d)
                rec.design_commit = c
            figures |= set((d or {}).get("runs") or {})
            prev = d
        now = self.design_at(None, claim_id)
        # every figure the claim has read, then or now: a claim moved to a new figure has still seen the old one's results
        figures = sorted(figures | set((now or {}).get("runs") or {}))
        commits = sorted({c for f in figures for c in self.results_commits(f)}, key=self.order.__getitem__)
        rec.results_commit = commits[0] if commits else ""
        if rec.design_commit:
            rec.design_results = next((c for c in commits if self.order[c] >= self.order[rec.design_commit]), "")
        for c, (old, new) in designs.items():
            if rec.results_commit and self.order[c] > self.order[rec.results_commit]:
                rec.after_results.append(c)
                rec.changes[c] = ", ".join(_changed_keys(old, new)[:6])
        if now != prev:
            rec.relation = "uncommitted"
        elif not rec.results_commit:
            rec.relation = "no results"
        elif not rec.design_commit:
            rec.relation = "uncommitted"
        else:
            d, r = self.order[rec.design_commit], self.order[rec.results_commit]
            rec.relation = "before results" if d < r else "with results" if d == r else "after results"
        return rec


LEDGER = "design_changes.yaml"   # beside the papers' folders: replications/design_changes.yaml
ENTRY_KEYS = {"commit", "why", "claims"}


class LedgerError(ValueError):
    """A malformed ledger entry; the message names the file, the paper and the entry."""


def ledger(replications: Path) -> dict[str, list[dict]]:
    """paper -> its declared post-results changes ({commit, why, claims or None}), checked."""
    path = Path(replications) / LEDGER
    if not path.exists():
        return {}
    doc = _load(path.read_text()) or {}
    if not isinstance(doc, dict):
        raise LedgerError(f"{path}: expected a mapping paper -> list of entries")
    for paper, entries in doc.items():
        for i, e in enumerate(entries or []):
            where = f"{path}: {paper}[{i}]"
            if not isinstance(e, dict) or set(e) - ENTRY_KEYS or not {"commit", "why"} <= set(e):
                raise LedgerError(f"{where}: expected keys commit, why (and optionally claims); got {e!r}")
            if not (isinstance(e["commit"], str) and len(e["commit"]) >= 7
                    and all(ch in "0123456789abcdef" for ch in e["commit"])):
                raise LedgerError(f"{where}: commit: at least 7 hex digits, quoted if all digits; got {e['commit']!r}")
            if not str(e["why"]).strip():
                raise LedgerError(f"{where}: why: say why the design changed after results")
    return {p: list(v or []) for p, v in doc.items()}


def declared_for(entries: list[dict], claim_id: str, commit: str) -> list[dict]:
    """The ledger entries that explain `commit` for `claim_id` (an entry without `claims` covers every claim)."""
    return [e for e in entries if commit.startswith(e["commit"]) and (e.get("claims") is None or claim_id in e["claims"])]


def undeclared(rec: Record, entries: list[dict]) -> list[str]:
    """The design changes after results that no ledger entry of the paper explains for this claim."""
    return [c for c in rec.after_results if not declared_for(entries, rec.claim, c)]


def row_note(rec: Record, entries: list[dict]) -> str:
    """claims.csv's changed_after_results: each post-results change, what it changed and why."""
    parts = []
    for c in rec.after_results:
        why = "; ".join(e["why"] for e in declared_for(entries, rec.claim, c)) or "NOT DECLARED"
        parts.append(f"{c[:7]} ({rec.changes[c]}): {why}")
    return " // ".join(parts)


def status_text(rec: Record) -> str:
    """claims.csv's design_status: when the design was fixed relative to the results."""
    if rec.relation in ("uncommitted", "no results", ""):
        return rec.relation or "no git history"
    text = f"{rec.relation} (first results {rec.results_commit[:7]})"
    return text + (f"; results of this design first committed at {rec.design_results[:7]}" if rec.design_results else "")


def records(paper_file: Path, scale: str = "embedded") -> dict[str, Record]:
    """claim id -> Record for every claim of the file; {} without git history."""
    try:
        h = History(paper_file, scale)
    except GitHistoryError:
        return {}
    return {c["id"]: h.record(c["id"]) for c in h.working.get("claims") or []}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("paper_file", type=Path)
    p.add_argument("--scale", default="embedded")
    args = p.parse_args(argv)
    entries = ledger(args.paper_file.resolve().parent.parent).get(args.paper_file.resolve().parent.name, [])
    for cid, r in records(args.paper_file, args.scale).items():
        print(f"{cid}: design {r.design_commit[:9]}: {status_text(r)}")
        for c in r.after_results:
            print(f"    after results: {c[:9]} changed {r.changes[c]}"
                  + ("" if declared_for(entries, cid, c) else f"  NOT DECLARED in {LEDGER}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
