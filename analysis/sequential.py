"""A claim's pre-registered group-sequential design: more seeds at planned looks, never chosen after
seeing an outcome (issue 23, item 6).

A claim opts in, in its experiments file, with `sequential: {looks: [3, 5, 8]}` (schema.Sequential;
part of its design for analysis/preregistration.py): the seed counts at its L planned looks. The
first look is the figure's declared seeds; the seeds the later looks add are fixed in advance by
`continued`: the declared seeds (shifted by make replicate SEEDS=N), then the integers after the
largest of them, in order.

Error control (Bonferroni over the planned looks): every look's one-sided bounds are at level
1 - 0.05 / L, so by the union bound a claim whose true effect sits at its threshold reads "holds"
at any of its looks with probability at most L x 0.05 / L = 0.05 (and "does not hold" likewise),
whatever the dependence between the looks (they share seeds). Why not Pocock or O'Brien-Fleming:
their boundaries come from the looks' joint distribution (independent increments of a z statistic,
alpha-spending tables or numerical integration), which the t intervals of 3 to 10 seeds, the
censored speedups' upper bounds and the churn jackknife do not have; Bonferroni needs no table and
is valid for every measure, at the price of wider bounds (t(0.983, 2) = 5.34 at L = 3, against
t(0.95, 2) = 2.92 at one fixed look).

The stopping rule (`decide_looks`), looks in order, each on the first n_j seeds of the list:
  holds / does not hold               final at look j;
  inconclusive, j < L                 the next look: its seeds if the figure holds them, else the
                                      claim asks for them (the state's seeds_needed);
  inconclusive at j = L               final as it stands ("underpowered" where its margin is below
                                      what the last look's seeds resolve at that level);
  anything else (a failed regime check, a lost seed, "underpowered" before the runs)
                                      final at look j: more seeds are asked only of a statistical
                                      non-result.

The state (`sequential.csv` beside a paper's claims.csv, written by analysis/claims.py when the paper
has a sequential claim): one row per sequential claim, with `seeds_needed` (the seeds its figure
must hold: the look's it stopped at, or the next look's when it asks for more). workflows/experiments.py
reads it from the results root it plans for and extends the figure's seed list to the largest
seeds_needed of its claims; `repeat` (make replicate-sequential, make verify) reruns a pass until
`pending` finds no claim asking for seeds its figure does not hold.

    python analysis/sequential.py pending results-local/embedded   # exit 3: a claim asks for more
    python analysis/sequential.py repeat results-local/embedded -- make replicate
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from analysis.schema import TIERS
from codist.runlog import atomic_write_text

STATE = "sequential.csv"
FIELDS = ["paper", "id", "figure", "looks", "look", "n", "confidence", "status", "seeds_needed", "verdict"]
NEXT, FINAL = "next look", "final"
PENDING_EXIT = 3   # `pending`: a claim asks for seeds its figure does not hold yet
MAX_PASSES = 20    # `repeat`: passes after the first, at most


class SequentialError(ValueError):
    """A state file or manifest that contradicts the design; the message names the file and the claim."""


def continued(declared: list[int], n: int) -> list[int]:
    """The first n seeds of a sequential claim: the declared ones, then max(declared) + 1, + 2, ..."""
    declared = list(declared)
    return (declared + list(range(max(declared) + 1, max(declared) + 1 + n - len(declared))))[:n]


def confidence(looks: int) -> float:
    """Each one-sided bound's level at every look: 1 - alpha / L (Bonferroni; module docstring)."""
    from analysis.stats import CONFIDENCE   # the plan reads this module without scipy
    return 1 - (1 - CONFIDENCE) / looks


@dataclass(frozen=True)
class Look:
    index: int              # 1-based
    looks: tuple[int, ...]  # the planned seed counts
    seeds: tuple[int, ...]  # the first looks[index - 1] seeds of the continued list

    @property
    def n(self) -> int:
        return self.looks[self.index - 1]

    @property
    def last(self) -> bool:
        return self.index == len(self.looks)

    @property
    def n_max(self) -> int:
        return self.looks[-1]

    @property
    def confidence(self) -> float:
        return confidence(len(self.looks))


def decide_looks(looks: list[int], declared: list[int], held: set, judge_at: Callable[[Look], dict]) -> tuple[dict, Look, int]:
    """(the verdict fields of the look the rule stops at, that look, seeds_needed). `held`: the seeds
    the figure's tables hold; `judge_at(look)`: the claim's verdict fields on that look's seeds at its
    level (analysis/claims.py judge). seeds_needed > look.n: the claim asks for the next look."""
    if looks[0] != len(declared):
        raise SequentialError(f"sequential.looks: the first look is the figure's {len(declared)} declared seeds "
                              f"{list(declared)}; got {list(looks)}")
    for j in range(1, len(looks) + 1):
        look = Look(j, tuple(looks), tuple(continued(declared, looks[j - 1])))
        fields = judge_at(look)
        if look.last or fields["verdict"] != "inconclusive":
            return fields, look, look.n
        if not set(continued(declared, looks[j])) <= held:
            return fields, look, looks[j]
    raise AssertionError("unreachable: the last look returns")


def describe(look: Look, seeds_needed: int) -> str:
    """claims.csv's `sequential` column: the look, its seeds and level, and whether it is final."""
    head = (f"look {look.index} of {len(look.looks)} (looks at {', '.join(map(str, look.looks))} seeds): n = {look.n}, "
            f"seeds {', '.join(map(str, look.seeds))}; one-sided bounds at {look.confidence:.4g} "
            f"(Bonferroni: 0.05 / {len(look.looks)} looks)")
    return head + (f"; the next look needs {seeds_needed} seeds (make replicate-sequential)"
                   if seeds_needed > look.n else "; final")


def state_row(paper: str, claim_id: str, figure: str, look: Look, seeds_needed: int, verdict: str) -> dict:
    return {"paper": paper, "id": claim_id, "figure": figure, "looks": " ".join(map(str, look.looks)),
            "look": look.index, "n": look.n, "confidence": f"{look.confidence:.6g}",
            "status": NEXT if seeds_needed > look.n else FINAL, "seeds_needed": seeds_needed, "verdict": verdict}


def write_state(path: Path, rows: list[dict]) -> None:
    out = io.StringIO()
    w = csv.DictWriter(out, FIELDS, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    atomic_write_text(path, out.getvalue())


def read_state(path: Path) -> list[dict]:
    """The rows of a state file, checked: every field there, looks increasing, seeds_needed a look."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        if set(FIELDS) - set(reader.fieldnames or []):
            raise SequentialError(f"{path}: expected columns {', '.join(FIELDS)}; got {reader.fieldnames}")
        rows = list(reader)
    for i, r in enumerate(rows, 2):
        try:
            r["looks"] = [int(x) for x in r["looks"].split()]
            r["seeds_needed"] = int(r["seeds_needed"])
        except ValueError:
            raise SequentialError(f"{path}: line {i} (claim {r['id']!r}): looks and seeds_needed must be integers; "
                                  f"got {r['looks']!r}, {r['seeds_needed']!r}") from None
        if r["seeds_needed"] not in r["looks"]:
            raise SequentialError(f"{path}: line {i} (claim {r['id']!r}): seeds_needed {r['seeds_needed']} is not one "
                                  f"of its looks {r['looks']}")
    return rows


def figure_seeds(manifest: dict) -> list[int]:
    """The seeds a figure's _runs.json holds, in plan order."""
    return list(dict.fromkeys(r["seed"] for r in manifest["runs"]))


def pending(scale_dir: Path) -> list[str]:
    """One line per sequential claim under `scale_dir` (<results>/<scale>) that asks for seeds its
    figure's _runs.json does not hold yet. A claim that asks for seeds its figure already holds
    contradicts the rule (the claims table is older than the figure): SequentialError, so that a
    loop over `make replicate` can never spin."""
    out = []
    for path in sorted(Path(scale_dir).glob(f"*/{STATE}")):
        for r in read_state(path):
            if r["status"] != NEXT:
                continue
            runs = path.parent / f"{r['figure']}_runs.json"
            held = len(figure_seeds(json.loads(runs.read_text()))) if runs.exists() else 0
            if held >= r["seeds_needed"]:
                raise SequentialError(f"{path}: claim {r['id']!r} asks for {r['seeds_needed']} seeds and {runs} holds "
                                      f"{held}: its claims table is older than the figure (rerun the claims rule)")
            out.append(f"{r['paper']} {r['id']}: look {r['look']} of {len(r['looks'])} inconclusive at n = {r['n']}; "
                       f"figure {r['figure']} needs {r['seeds_needed']} seeds (holds {held})")
    return out


def repeat(run_pass: Callable[[], int], scale_dir: Path, passes: int = MAX_PASSES) -> None:
    """Run a pass (`run_pass()`: its exit status), then again while a sequential claim under
    `scale_dir` asks for seeds its figure does not hold. Each pass must add some of the seeds asked
    (else a pass would repeat itself: a figure of another tier than the one asked); SequentialError
    when a pass fails, adds none, or `passes` more passes leave claims asking."""
    asked = None
    for _ in range(passes + 1):
        if run_pass() != 0:
            raise SequentialError("a pass failed (its output above)")
        asked, before = pending(scale_dir), asked
        if not asked:
            return
        print("\n".join(asked), flush=True)
        if asked == before:
            raise SequentialError("the last pass added none of the seeds asked (a figure of another tier needs "
                                  f"TIER=<its tier>: {' or '.join(TIERS[1:])})")
    raise SequentialError(f"sequential claims still ask for more seeds after {passes} more passes")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    q = sub.add_parser("pending", help=f"exit {PENDING_EXIT} if a sequential claim asks for more seeds, else 0")
    q.add_argument("scale_dir", type=Path, help="<results>/<scale>, e.g. results-local/embedded")
    r = sub.add_parser("repeat", help="run COMMAND, then again while a sequential claim asks for more seeds")
    r.add_argument("scale_dir", type=Path, help="<results>/<scale> that COMMAND writes")
    r.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- COMMAND ...")
    args = p.parse_args(argv)
    try:
        if args.command == "repeat":
            cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
            if not cmd:
                p.error("repeat: a command to run is required after --")
            repeat(lambda: subprocess.run(cmd).returncode, args.scale_dir)
            return 0
        lines = pending(args.scale_dir)
    except SequentialError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print("\n".join(lines) if lines else f"{args.scale_dir}: no sequential claim asks for more seeds")
    return PENDING_EXIT if lines else 0


if __name__ == "__main__":
    sys.exit(main())
