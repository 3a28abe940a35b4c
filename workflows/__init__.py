"""The Snakemake workflow's Python side (the plan of runs and the frontier's, its config keys, the
rehearsal, compare, verify, figures): imported as `workflows.<name>` by the Snakefile, codist.budget
(installed with codist by the editable install, pyproject's package list); the scripts among them
run as `python workflows/<name>.py`."""
