"""The Snakemake workflow's Python side (the plan of runs and the frontier's, its config keys, the
budget's command, the rehearsal, compare, verify, figures): imported as `workflows.<name>` by the
Snakefile, benchmarks/ and the tests (installed with codist by the editable install, pyproject's
package list), never by analysis/ or codist, which sit below it (tests/test_layers.py); the scripts
among them run as `python workflows/<name>.py`."""
