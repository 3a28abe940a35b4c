"""benchmarks/mutation.py's tables: a rerun replaces its modules' rows, and a row of a module that
left mutation_targets (a file that moved) does not outlive it."""
from __future__ import annotations

import csv
from pathlib import Path

from benchmarks.mutation import SUMMARY_FIELDS, merge_csv
from benchmarks.mutation_targets import TARGETS

ROOT = Path(__file__).resolve().parents[1]
FIRST, SECOND = list(TARGETS)[:2]


def _row(module: str, score: str) -> dict:
    return {f: "" for f in SUMMARY_FIELDS} | {"module": module, "score": score}


def _write(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, SUMMARY_FIELDS)
        w.writeheader()
        w.writerows(rows)


def test_a_rerun_replaces_its_modules_rows_keeps_the_others_and_drops_a_moved_modules(tmp_path, capsys):
    path = tmp_path / "mutation_summary.csv"
    _write(path, [_row("src/codist/old_place/moved.py", "0.5"), _row(SECOND, "0.9"), _row(FIRST, "0.8")])
    merge_csv(path, SUMMARY_FIELDS, [_row(FIRST, "1.0")], {FIRST})
    rows = list(csv.DictReader(path.open()))
    assert [(r["module"], r["score"]) for r in rows] == [(FIRST, "1.0"), (SECOND, "0.9")]
    assert "dropped the rows of src/codist/old_place/moved.py" in capsys.readouterr().err


def test_every_row_of_the_committed_summary_names_a_measured_module_that_exists():
    rows = list(csv.DictReader((ROOT / "results/bench/mutation_summary.csv").open()))
    stale = [r["module"] for r in rows if r["module"] not in TARGETS or not (ROOT / r["module"]).is_file()]
    assert not stale, f"rows of modules that moved or left benchmarks/mutation_targets.py: {stale}"



def test_a_last_lines_mutant_is_its_one_changed_line_and_matches_its_review():
    """A mutant of a file's last line (the mutant drops the final newline) diffs with an extra blank line;
    the changed lines are the code alone, so the reviewed reason finds it, padded or not."""
    from benchmarks import mutation
    from benchmarks.mutation_reasons import REASONS
    module, operator, old, new, status, reason = next(r for r in REASONS if "1001.0 * se" in r[3])
    diff = f"--- a/{module}\n+++ b/{module}\n@@ -224 +224 @@\n-    {old}\n-\n+    {new}\n\\ No newline at end of file\n"
    assert mutation.changed_lines(diff) == (old, new)
    assert mutation.reason_for(module, "core/" + operator, *mutation.changed_lines(diff)) == (status, reason)
    assert mutation.reason_for(module, "core/" + operator, "  " + old, new + " ") == (status, reason)
    assert mutation.reason_for(module, "core/" + operator, old, new + " x") is None
