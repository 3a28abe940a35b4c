"""Benchmarks (`python benchmarks/<name>.py`, results in results/bench/), imported as a package:
installed with codist by the editable install (pyproject's package list). A leaf: its modules import
each other, analysis/ and codist, and nothing but the tests imports them (what the analysis shares
with a benchmark, such as the alpha-beta network model, lives in analysis/)."""
