"""Workload capabilities: generic code (engine, fork launcher) asks the workload's config class
what the workload needs instead of checking its name. Real imports in a fresh interpreter."""
import subprocess
import sys

import pytest
import yaml

from codist import config
from codist.workloads import REGISTRY

PRELOAD = """
import sys
from codist.launching import fork
import yaml; fork.preload(yaml.safe_load(open(sys.argv[1]))["workload"]["name"])
print("fairseq" in sys.modules and sys.modules["fairseq"] is not None)
"""


def test_only_translation_needs_fairseq_and_capabilities_are_not_in_the_run_id():
    assert {name for name, (cls, _) in REGISTRY.items() if cls.needs_fairseq} == {"translation"}
    cfg = config.validate({"workload": {"name": "translation"}})
    assert "needs_fairseq" not in config.to_dict(cfg)["workload"]


@pytest.mark.slow
@pytest.mark.parametrize("workload, imported", [("lm", False), ("translation", True)])
def test_fork_launcher_preloads_fairseq_only_for_a_workload_that_needs_it(tmp_path, workload, imported):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"workload": {"name": workload}}))
    out = subprocess.run([sys.executable, "-c", PRELOAD, str(path)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == str(imported)
