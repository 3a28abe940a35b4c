"""The machines a replication ran on, from its runs' manifest.json (`hardware`, codist.runlog):

    python workflows/machine.py --out results/<scale>/machine.json MANIFEST ...

One entry per distinct (CPU model, torch's CPU capability, BLAS, threads, cores, platform, torch, and
for a run on CUDA the device and its GPUs) with its number of runs. Committed with the results (runs/ is not), so a comparison with another
machine's results (workflows/compare.py) can say on what each was made: AVX2 and AVX-512 kernels,
or another BLAS, sum floating-point numbers in another order.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

KEYS = ("cpu_model", "torch_cpu_capability", "blas", "torch_threads", "cpu_count", "platform")


class MachineError(ValueError):
    """A manifest that is not a run's record: one line naming the file, the key and what was expected."""


def summarize(manifests) -> list[dict]:
    found = Counter()
    for path in manifests:
        m = json.loads(Path(path).read_text())
        if not isinstance(m, dict):
            raise MachineError(f"{path}: a JSON {type(m).__name__}; expected an object (a run's manifest)")
        for key in ("hardware", "packages"):
            if not isinstance(m.get(key, {}), dict):
                raise MachineError(f"{path}: {key!r} is {m[key]!r:.80}; expected an object of {key} facts "
                                   + ("(cpu_model, torch_cpu_capability, blas, torch_threads, ...)"
                                      if key == "hardware" else "(package -> version)"))
        hw = m.get("hardware", {})
        entry = tuple((k, hw.get(k)) for k in KEYS if k in hw) + (("torch", m.get("packages", {}).get("torch")),)
        if str(m.get("device", "")).startswith("cuda"):   # a GPU run (cuda:<i>): its GPUs, not only the host's CPU
            entry += (("device", "cuda"), ("gpus", ", ".join(hw.get("gpus") or [])))
        found[entry] += 1
    return [{**dict(entry), "runs": n} for entry, n in found.items()]


def describe(machines: list[dict]) -> list[str]:
    """One line per machine: '<runs> run(s): cpu_model ..., torch_cpu_capability ...'."""
    return [f"{m.get('runs', 1)} run(s): " + ", ".join(f"{k} {v}" for k, v in m.items() if k != "runs")
            for m in machines]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("manifests", nargs="+", type=Path)
    args = p.parse_args(argv)
    text = json.dumps({"machines": summarize(args.manifests)}, indent=2) + "\n"
    tmp = args.out.with_suffix(".json.tmp")
    tmp.write_text(text)
    tmp.replace(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
