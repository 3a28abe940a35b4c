"""The Snakemake workflow's Python side (the plan of runs, its config keys, the rehearsal, compare,
verify, figures): imported as `workflows.<name>` by the Snakefile, analysis/ and codist.budget
(installed with codist by the editable install, pyproject's package list); the scripts among them
run as `python workflows/<name>.py`."""
