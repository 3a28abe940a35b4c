"""The analysis of the runs (tables, figures, claims, the frontier): scripts the workflow's rules run
(`python analysis/<name>.py`) and modules they share, imported as `analysis.<name>`. Installed with
codist by the editable install (pyproject's package list), so workflows/, benchmarks/, the
notebooks and codist.budget import it as a package, never through sys.path."""
