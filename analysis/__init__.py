"""The analysis of the runs (tables, figures, claims, the frontier): scripts the workflow's rules run
(`python analysis/<name>.py`) and modules they share, imported as `analysis.<name>`. Installed with
codist by the editable install (pyproject's package list), so workflows/, benchmarks/ and the
notebooks import it as a package, never through sys.path. It imports codist, never workflows/ (the
plan parsers, the frontier's too, live there) nor benchmarks/ (tests/test_layers.py)."""
