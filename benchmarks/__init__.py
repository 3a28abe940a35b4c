"""Benchmarks (`python benchmarks/<name>.py`, results in results/bench/) and the cost models the
analysis shares (`benchmarks.projected_walltime`), imported as a package: installed with codist by
the editable install (pyproject's package list)."""
