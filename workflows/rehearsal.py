"""The full-scale rehearsal (issue 24): every planned full-scale run, shrunk only where allowed.

`snakemake --config scale=full rehearsal=true data_root=FAKE` plans the full scale with the same
code as a real run (workflows/experiments.py), then `rehearse` replaces each resolved config by its
rehearsal, a recorded transformation of it. A rehearsal may change only (ALLOWED):

  updates     train.steps                  a few updates, enough for every event below
  periods     the algorithm's period (registry `period`), algorithm.burn_in / alpha_ramp_steps,
              schedule.warmup_steps / milestones / weight_decay_changes, train.eval_every /
              checkpoint_every: each event keeps its order, moved to the first updates, so every
              exchange, averaging or compression round and phase change happens at least once
  ranks       parallel.world_size: ranks per model group, at most 2 and at least 2 where the
              full run has more than 1 (the in-group all-reduce runs); models unchanged
  batch       train.batch_per_rank and train.eval_batch, capped where a CPU's memory forces it
  evaluation  train.eval_size: the one evaluation on a slice of the validation set (EVAL_SIZE)
  launch      the launch section (device, launcher, oversubscription, threads, timeouts)

Any other difference fails `check` (RehearsalError), so the rest (model, optimizer, schedule
shape, precision, algorithm, data) is the full run's. Results go under <results>/rehearsal/
(never into a real results tree), run directories keyed by the planned run id (the rehearsal's
config has another id: its own fields differ); `run` removes a finished run's checkpoint/ (disk).
`ledger` writes <results>/rehearsal/full/runs.local.csv (git-ignored), or with --reference the
committed runs.csv (a run rehearsed under an earlier rehearsal config is "stale": its summary holds
another id); a run that left nothing here keeps its row of the ledger already written (`run` writes
the ledger too, so rerunning some runs keeps the others' rows), with the commit and date it was
measured at, and the line printed says how many rows were measured now and how many carried.

    python workflows/rehearsal.py plan                  # every planned run's shrinks (no run)
    python workflows/rehearsal.py run --data-root D [--only ID ... | --ci] [--cores N | --profile P]
    python workflows/rehearsal.py ledger --data-root D [--reference]  # the ledger from what the runs left
    python workflows/rehearsal.py figures --data-root D # the figures whose runs are all rehearsed,
                                                        # stamped, and full/FIGURES.md listing them,
                                                        # those drawn before from the same runs, the rest
    python workflows/rehearsal.py redraw --data-root D  # the figures drawn before, from their tables
                                                        # (no run), stamped

Everything the figures' rules write for a rehearsal says "rehearsal: not a result": across each PNG,
in its title and legend (analysis/figure_data.stamped), as a last column `stamp` of each CSV and a
line under each Markdown file's heading (stamp_tables).
"""
from __future__ import annotations

import argparse
import copy
import functools
import csv
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
from workflows.experiments import Plan, load_plan  # noqa: E402

from codist.algorithms import registry as algorithm_registry  # noqa: E402
from codist.config import ConfigError, RunConfig, to_dict, validate  # noqa: E402
from codist.runlog import metrics_record  # noqa: E402

#: per-rank batch (training, evaluation) a CPU rank of each workload holds beside the others here
#: (23 GB shared by up to 8 ranks): the full-scale batch where it fits, else the cap
CPU_BATCH = {"imagenet": (4, 25), "translation": (8, 16), "lm": (32, 16), "ctr": (128, 1024),
             "cifar": (128, 500)}
#: validation examples the one evaluation reads (train.eval_size), where the whole split would
#: dominate the job: ImageNet's 1,000 images of the miniature root (one a class, the least an
#: ImageFolder of 1,000 classes holds; a real root's 50,000) are 72-80% of a CPU job (ResNet-50's
#: forward: 180 ms an image on a thread); 100, evenly spaced, reach 100 classes
EVAL_SIZE = {"imagenet": 100}
#: the plan's tier: every full-scale figure (the paper tier holds the default tier's runs and more)
TIER = "paper"
PERIOD = 2          # updates between exchanges in a rehearsal (at most the planned period)
RANKS = 2           # ranks per model group in a rehearsal (at most the planned)
LAUNCH = {"device": "cpu", "launcher": "fork", "oversubscribe": True, "master_port": None,
          "start_timeout_s": 3600, "collective_timeout_s": 3600, "hang_timeout_s": 3600}

#: the rehearsal subset `make test-slurm` runs through the slurm profile on its two-node cluster
#: (tests/test_slurm_rehearsal.py): one run of every workload and every algorithm family of the
#: full plan, each the cheapest of the committed ledger's live runs for what it covers by the whole
#: job's CPU seconds (Snakemake's benchmark cpu_time, load 30-70 here), and one whose measured bytes
#: equal the closed form; 593 CPU s together
CI_SUBSET = {
    "7ee35bc47268": "cifar, model_average (Sun CIFAR-10 MA-DNN, K = 4): 16 CPU s",
    "d76b5d814667": "cifar, ensemble_compress (Sun CIFAR-10 EC-DNN, K = 4): 24 CPU s",
    "a7d99327b459": "ctr, codistill (Anil Table 1): 63 CPU s, the cheapest codistillation",
    "5b6bcfe6ace7": "imagenet, allreduce (Sodhani Fig. 1, ResNet-50): 100 CPU s, ImageNet's cheapest",
    "52c5396b46f7": "translation, allreduce (Sodhani Sec. 4, Transformer-big): 73 CPU s (its codistillation "
                    "is dearer)",
    "b2adfcdd4bb8": "lm, label_smoothing (Anil Fig. 2a): 50 CPU s, the family's only workload",
    "5a92c3b8c46d": "lm, ensemble (Anil Sec. 3.4.1): 213 CPU s; the distillation's teacher, so it also "
                    "covers the ensemble family (CTR's ensemble, 88 CPU s, would be a ninth run)",
    "21bee1213fb4": "lm, distill (Anil Sec. 3.4.1, teacher 5a92c3b8c46d): 54 CPU s, the family's only workload",
}
PERIOD_KEYS = ("algorithm.burn_in", "algorithm.alpha_ramp_steps", "schedule.warmup_steps",
               "schedule.milestones", "schedule.weight_decay_changes", "train.eval_every",
               "train.checkpoint_every")
ALLOWED = {"updates": ("train.steps",), "periods": PERIOD_KEYS, "ranks": ("parallel.world_size",),
           "batch": ("train.batch_per_rank", "train.eval_batch"), "evaluation": ("train.eval_size",),
           "launch": ("launch.",)}


class RehearsalError(ValueError):
    """A rehearsal config that differs from its full run outside ALLOWED (or the wrong way)."""


@dataclass(frozen=True)
class Shrink:
    category: str
    key: str
    planned: object
    used: object

    def __str__(self):
        return f"{self.key}: {self.planned} -> {self.used}"


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and k != "weight_decay_changes":
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def category(key: str, algorithm: str) -> str | None:
    """The ALLOWED category of a dotted key (the algorithm's own period field counts as a period)."""
    period = algorithm_registry.spec(algorithm).period
    if period and key == f"algorithm.{period}":
        return "periods"
    for cat, keys in ALLOWED.items():
        if any(key == k or (k.endswith(".") and key.startswith(k)) for k in keys):
            return cat
    return None


def check(planned: RunConfig, used: RunConfig) -> list[Shrink]:
    """Every difference of `used` from `planned`, each in ALLOWED and in the allowed direction;
    else RehearsalError naming the key, both values and what a rehearsal may change."""
    a, b = _flat(to_dict(planned)), _flat(to_dict(used))
    shrinks, errors = [], []
    for key in sorted(set(a) | set(b)):
        if a.get(key) == b.get(key):
            continue
        cat = category(key, planned.algorithm.name)
        if cat is None:
            errors.append(f"{key}: {a.get(key)!r} -> {b.get(key)!r} is not a rehearsal shrink; allowed: "
                          + "; ".join(f"{c} ({', '.join(k)})" for c, k in ALLOWED.items()))
            continue
        if cat in ("updates", "batch", "periods") and isinstance(a.get(key), int) and b.get(key) > a.get(key):
            errors.append(f"{key}: {a[key]} -> {b[key]}: a rehearsal only shrinks it")
        if cat == "evaluation" and (b[key] == 0 or 0 < a[key] < b[key]):   # 0: the whole set
            errors.append(f"{key}: {a[key]} -> {b[key]}: a rehearsal evaluates a slice of the planned set")
        if cat == "periods" and isinstance(a.get(key), (list, dict)) and len(a[key]) != len(b[key]):
            errors.append(f"{key}: {a[key]} -> {b[key]}: every event of the full run must stay")
        if key == "schedule.weight_decay_changes" and list(a[key].values()) != list(b[key].values()):
            errors.append(f"{key}: the weight decays must stay ({list(a[key].values())})")
        shrinks.append(Shrink(cat, key, a.get(key), b.get(key)))
    p, q = planned.parallel, used.parallel
    per, per_used = p.world_size // p.models, q.world_size // q.models
    if per_used > per or per_used < min(per, RANKS):
        errors.append(f"parallel.world_size: {p.world_size} -> {q.world_size}: ranks per model group {per} -> "
                      f"{per_used}; allowed: at most {per}, at least {min(per, RANKS)}")
    if errors:
        raise RehearsalError(f"run {planned.run_id()} ({planned.name}): " + "\n  ".join(errors))
    return shrinks


def shrink(cfg: RunConfig, device: str = "cpu") -> RunConfig:
    """The rehearsal of one full-scale run config (see the module docstring)."""
    d = copy.deepcopy(to_dict(cfg))
    alg, sch, tr = d["algorithm"], d["schedule"], d["train"]
    period = algorithm_registry.spec(alg["name"]).period
    burn, ramp = alg.get("burn_in", 0), alg.get("alpha_ramp_steps", 0)
    sch["weight_decay_changes"] = {int(k): v for k, v in sch["weight_decay_changes"].items()}
    # every phase change at the first updates, in the full run's order (equal updates stay equal)
    events = sorted({v for v in [sch["warmup_steps"], *sch["milestones"], *sch["weight_decay_changes"],
                                 burn, burn + ramp] if v > 0})
    at = {0: 0, **{v: i + 1 for i, v in enumerate(events)}}
    sch["warmup_steps"] = at[sch["warmup_steps"]]
    sch["milestones"] = [at[m] for m in sch["milestones"]]
    sch["weight_decay_changes"] = {at[k]: v for k, v in sch["weight_decay_changes"].items()}
    if "burn_in" in alg:
        alg["burn_in"] = at[burn]
    if ramp:
        alg["alpha_ramp_steps"] = at[burn + ramp] - at[burn]
    last = max(at.values())
    if period:   # two rounds after the last phase change: one exchange, then updates that use it
        alg[period] = min(alg[period], PERIOD)
        steps = last + 2 * alg[period] + 1
    else:
        steps = last + 2
    tr["steps"] = min(tr["steps"], steps)
    tr["eval_every"] = tr["steps"]
    # one checkpoint before the last update (the loop writes none at the end): the full state's write
    tr["checkpoint_every"] = max(1, tr["steps"] - 1) if tr["checkpoint_every"] else 0
    p = d["parallel"]
    p["world_size"] = p["models"] * min(p["world_size"] // p["models"], RANKS)
    if device == "cpu":
        train_cap, eval_cap = CPU_BATCH.get(d["workload"]["name"], (tr["batch_per_rank"], tr["eval_batch"]))
        tr["batch_per_rank"] = min(tr["batch_per_rank"], train_cap)
        tr["eval_batch"] = min(tr["eval_batch"], eval_cap)
        d["launch"].update(LAUNCH)
    if d["workload"]["name"] in EVAL_SIZE:
        size = EVAL_SIZE[d["workload"]["name"]]
        tr["eval_size"] = min(tr["eval_size"], size) if tr["eval_size"] else size
    try:
        return validate(d, source=f"rehearsal of {cfg.run_id()}")
    except ConfigError as e:
        raise RehearsalError(str(e)) from None


#: written across every figure drawn from rehearsal runs
STAMP = "rehearsal: not a result"


@dataclass
class RehearsalPlan(Plan):
    """A plan whose configs are rehearsals: each run directory keeps its planned run id, while the
    summary inside holds the rehearsal config's own id; a figure's manifest names that id (which the
    analysis checks against the summary) and the planned one beside it, and carries the stamp the
    figure is drawn with (analysis/figure_data.finish)."""

    def figure_manifest(self, paper: str, figure: str, results: str) -> dict:
        manifest = {**super().figure_manifest(paper, figure, results), "stamp": STAMP}
        for run in manifest["runs"]:
            run["planned_run_id"], run["run_id"] = run["run_id"], self.configs[run["run_id"]].run_id()
        return manifest


def rehearse(plan: Plan, device: str = "cpu") -> tuple[Plan, dict[str, list[Shrink]]]:
    """The plan with each run's config replaced by its rehearsal (run ids, figures and teacher
    references unchanged), and each run's recorded shrinks (checked against ALLOWED)."""
    configs, shrinks = {}, {}
    for rid, cfg in plan.configs.items():
        configs[rid] = shrink(cfg, device)
        shrinks[rid] = check(cfg, configs[rid])
    return RehearsalPlan(**{**{f.name: getattr(plan, f.name) for f in fields(plan)}, "configs": configs}), shrinks


# ------------------------------------------------------------------ the ledger

COLUMNS = ["run_id", "figures", "workload", "model", "parameters", "algorithm", "precision",
           "ranks_planned", "ranks_used", "batch_per_rank_planned", "batch_per_rank_used", "updates_planned",
           "updates_done", "exchanges_done", "exchange_calls_all_ranks", "bytes_per_rank_per_update_measured",
           "bytes_per_rank_per_update_closed_form_used", "bytes_per_rank_per_update_closed_form_planned",
           "peak_pss_mb_per_rank", "s_per_update", "setup_s", "job_s", "checkpoints", "status", "first_error",
           "commit", "date", "shrinks"]
#: the columns a rehearsal run measures (a row whose values here changed was measured again)
MEASURED = ("updates_done", "exchanges_done", "exchange_calls_all_ranks", "bytes_per_rank_per_update_measured",
            "peak_pss_mb_per_rank", "s_per_update", "setup_s", "job_s", "checkpoints", "status", "first_error",
            "shrinks")


def model_name(cfg: RunConfig, dictionaries: tuple[int, int] | None = None) -> str:
    w = to_dict(cfg.workload)
    if dictionaries:   # a Transformer's size is its dictionaries'
        src, tgt = dictionaries
        return f"{w['arch']}-dict{src}" + ("" if w["share_embeddings"] == "all" else f"x{tgt}")
    if w["name"] == "lm":
        return f"lstm{w['layers']}x{w['hidden']}-vocab{w['vocab_size']}"
    if w["name"] == "ctr":
        return "mlp" + "-".join(map(str, w["hidden"])) + f"-emb{w['embedding_dim']}x{w['hash_buckets']}"
    return str(w.get("arch") or w.get("model") or w["name"])


def closed_form(cfg: RunConfig, params: int, state: int, steps: int, norm: int = 0) -> float:
    """Training bytes each rank sends per update over `steps` updates, by codist.runtime.comm's accounting
    (ring all-reduce 2(p-1)/p of the payload; a broadcast's root sends it to each receiver; a ring
    all-gather (K-1) payloads), fp32: the in-group gradient all-reduce of the `params` parameters
    plus, per exchange the algorithm's rule makes, the `state` floats (parameters and buffers)
    between the groups (codistill (n-1) S, MA-DNN 2(K-1)/K S, EC-DNN (K-1) S, as
    analysis/comm_identity.py), and before each exchange the `norm` BatchNorm statistics averaged
    inside a group of several ranks (Algorithm.sync_norm_statistics: a ring all-reduce)."""
    a, p = cfg.algorithm, cfg.parallel
    per = p.world_size // p.models
    out = 2 * (per - 1) / per * 4 * params if per > 1 else 0.0
    per_exchange = {"codistill": p.models - 1, "model_average": 2 * (p.models - 1) / p.models,
                    "ensemble_compress": p.models - 1}.get(a.name, 0)
    sync = 2 * (per - 1) / per * 4 * norm if per_exchange and per > 1 else 0.0
    return out + (per_exchange * 4 * state + sync) * scheduled_exchanges(cfg, steps) / steps


def _metrics_record(path: Path) -> dict | None:
    """metrics.jsonl's record as summary.json holds it (None without the file)."""
    return metrics_record(path.read_bytes()) if path.exists() else None


ERROR_MARKS = ("Error", "error:", "Traceback", "failed", "Killed", "exit code", "exited with")


def _first_error(log: Path) -> str:
    """The first line of a run's log that reports an error ("" if none does)."""
    for line in log.read_text(errors="replace").splitlines():
        if any(m in line for m in ERROR_MARKS) and "Warning" not in line:
            return line.strip()[:300]
    return ""


def scheduled_exchanges(cfg: RunConfig, steps: int) -> int:
    """Exchanges (codistillation checkpoint exchanges, averaging / ensembling rounds) the
    algorithm's rule makes in `steps` updates (codist.algorithms: codistill before update s >=
    burn_in with (s - burn_in) % k == 0; the tau algorithms after update s with (s + 1) % tau == 0)."""
    a = cfg.algorithm
    period = algorithm_registry.exchange_period(a)
    if not period:
        return 0
    if a.name == "codistill":
        return 0 if a.exchange != "checkpoint" else sum(
            1 for s in range(steps) if s >= a.burn_in and (s - a.burn_in) % period == 0)
    return steps // period


EXCHANGE_CATEGORIES = ("param_exchange", "prediction_exchange", "model_average")


def _run_facts(run: Path, used: RunConfig) -> dict:
    """What a finished rehearsal run measured: its summary (updates, traffic, time) and, where the
    run saved its models, the parameter count of model 0."""
    s = json.loads((run / "summary.json").read_text())
    by_cat = s["comm"]["by_category"]
    calls = sum(by_cat.get(c, {}).get("calls_all_ranks", 0) for c in EXCHANGE_CATEGORIES)
    facts = {"updates_done": s["steps"], "s_per_update": round(s["wall_s"] / max(1, s["steps"]), 3),
             "setup_s": s.get("setup_s"), "exchange_calls_all_ranks": calls, "checkpoints": s.get("checkpoints"),
             "exchanges_done": scheduled_exchanges(used, s["steps"]) if calls else 0,
             "bytes_per_rank_per_update_measured": round(s["comm"]["training_sent_bytes_per_rank_per_update"])}
    model = run / "model_0.pt"
    if model.exists():
        facts["parameters"], facts["state"], facts["norm"] = model_size(model)
    return facts


def provenance(run: Path) -> dict:
    """The commit of the code that ran a run (with "+dirty" when its tree had uncommitted changes)
    and when it started (UTC), from its manifest.json (written at each start: a resumed run's last)."""
    path = run / "manifest.json"
    m = json.loads(path.read_text()) if path.exists() else {}
    git, started = m.get("git") or {}, m.get("started_unix")
    commit = (git["commit"][:12] + ("+dirty" if git.get("dirty") else "")) if git.get("commit") else "unknown"
    date = (datetime.fromtimestamp(started, timezone.utc).isoformat(timespec="seconds") if started is not None
            else "unknown")
    return {"commit": commit, "date": date}


def recorded_in(path: Path) -> dict[str, dict]:
    """For each run id of a ledger committed to git without commit and date columns: the commit that
    recorded its measured values as they stand now (the last commit of `path` that changed them) as
    {"commit": "unknown: recorded in <commit>", "date": "by <that commit's date>"}. The code that ran
    the run is not known (it ran at that commit's parent or before, maybe with uncommitted changes);
    it was measured no later than the commit. {} outside git or for a path git does not track."""
    def git(*args, cwd=path.parent):
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    top = git("rev-parse", "--show-toplevel") if path.exists() else None
    if top is None or top.returncode:
        return {}
    top = Path(top.stdout.strip()).resolve()
    git = functools.partial(git, cwd=top)
    rel = path.resolve().relative_to(top).as_posix()
    history = git("log", "--reverse", "--format=%h %cI", "--", rel).stdout.split()
    out, last = {}, {}
    for commit, date in zip(history[::2], history[1::2]):
        text = git("show", f"{commit}:{rel}").stdout
        for row in csv.DictReader(text.splitlines()):
            values, before = {k: row[k] for k in MEASURED if k in row}, last.get(row["run_id"])
            # first seen, or measured again here (a column added later is no new measurement)
            if before is None or any(before[k] != v for k, v in values.items() if k in before):
                last[row["run_id"]] = values
                out[row["run_id"]] = {"commit": f"unknown: recorded in {commit}", "date": f"by {date}"}
    return out


BUFFERS = ("running_mean", "running_var", ".version")   # BatchNorm statistics, fairseq's version markers


def model_size(path: Path) -> tuple[int, int, int]:
    """(parameters, floats of the whole state, BatchNorm running statistics) of a saved model,
    each tied tensor once (a Transformer's output projection is its decoder embedding)."""
    import torch
    state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    seen, params, floats, norm = set(), 0, 0, 0
    for key, t in state.items():
        if not (torch.is_tensor(t) and t.is_floating_point()) or t.untyped_storage().data_ptr() in seen:
            continue
        seen.add(t.untyped_storage().data_ptr())
        floats += t.numel()
        params += 0 if key.endswith(BUFFERS) else t.numel()
        norm += t.numel() if key.endswith(BUFFERS[:2]) else 0
    return params, floats, norm


#: the planned data sets' dictionary sizes (fairseq-preprocess's counts, with their source)
THROUGHPUT = ROOT / "replications" / "throughput.yaml"


def planned_dictionaries(cfg: RunConfig, throughput: Path = THROUGHPUT) -> tuple[int, int] | None:
    """(source, target) dictionary types of a translation run's planned data set, from the
    throughput table's `translation:` entry of its language pair; None for other workloads."""
    w = cfg.workload
    if w.name != "translation":
        return None
    from codist.budget import load_throughput
    pair = f"{w.source_lang}-{w.target_lang}"
    facts = load_throughput(throughput).translation.get(pair)
    if not facts or not all(isinstance(facts.get(k), int) for k in ("source_dict", "target_dict")):
        raise RehearsalError(f"{throughput}: translation.{pair} needs source_dict and target_dict (the planned "
                             f"data set's dictionary types) for the planned Transformer's size")
    return facts["source_dict"], facts["target_dict"]


def planned_size(cfg: RunConfig, dictionaries: tuple[int, int]) -> tuple[int, int, int]:
    """(parameters, floats of the exchanged state, BatchNorm statistics) of a translation run's
    planned model: built on the meta device (no memory) with the planned dictionaries, where the
    rehearsal's model_0.pt has the miniature root's (1,264 joined types for WMT'16, 792 in both of
    IWSLT'14's: the planned Transformer-big has 18% and 8.5% more parameters). Counted as model_size
    counts a saved model (tied tensors once, persistent buffers: what an exchange sends)."""
    import torch
    from codist.algorithms.state import norm_statistics, state_tensors
    from codist.workloads.translation import TranslationWorkload
    with torch.device("meta"):
        model = TranslationWorkload.with_dictionaries(cfg.workload, *dictionaries).build_model()
    return (sum(p.numel() for p in model.parameters()), sum(t.numel() for t in state_tensors(model)),
            sum(t.numel() for t in norm_statistics(model)))


def _planned_counts(row: dict, cfg: RunConfig, size: tuple[int, int, int]) -> None:
    """A translation row's parameters and planned closed form from the planned model's `size`
    (the closed form at the rehearsal's world size stays the rehearsal model's: its bytes are what
    was measured)."""
    n, state, norm = size
    row["parameters"] = n
    row["bytes_per_rank_per_update_closed_form_planned"] = round(closed_form(cfg, n, state, cfg.train.steps, norm))


def ledger(plan: Plan, rehearsal: Plan, shrinks: dict, results: Path, written: dict | None = None,
           throughput: Path = THROUGHPUT) -> list[dict]:
    """One row per planned run, from what its run directory and log hold here. A run that left
    neither here keeps its row of the ledger already `written` (rehearsed on another machine, or
    before this one's scratch was wiped: run directories are scratch, the ledger is the record) when
    that row's shrinks are the plan's, which fix the rehearsal config (check() records every field
    it changes, and the planned run id fixes the rest); a row of another rehearsal is stale. A
    translation row's parameters and planned bytes are the planned model's (planned_size), also in a
    row carried."""
    written = written or {}
    planned = {}   # a translation workload section -> its planned model's size
    figures = {}
    for (paper, fig), f in plan.figures.items():
        for r in f.runs:
            figures.setdefault(r.run_id, []).append(f"{paper}/{fig}")
    rows, sizes = [], {}   # a workload section -> (parameters, state) of a run that saved its model 0
    for rid, cfg in plan.configs.items():
        model = results / "full" / "runs" / rid / "model_0.pt"
        if model.exists() and (results / "full" / "runs" / rid / "summary.json").exists():
            sizes.setdefault(cfg.workload.model_dump_json(), model_size(model))
    for rid, cfg in plan.configs.items():
        used = rehearsal.configs[rid]
        run, log = results / "full" / "runs" / rid, results / "full" / "logs" / "train" / f"{rid}.log"
        dictionaries = planned_dictionaries(cfg, throughput)
        if dictionaries and cfg.workload.model_dump_json() not in planned:
            planned[cfg.workload.model_dump_json()] = planned_size(cfg, dictionaries)
        row = {"run_id": rid, "figures": " ".join(dict.fromkeys(figures.get(rid, []))),
               "workload": cfg.workload.name, "model": model_name(cfg, dictionaries), "algorithm": cfg.algorithm.name,
               "precision": f"{cfg.train.precision} (cpu: {used.train.precision}, no autocast)"
               if cfg.train.precision != "fp32" else "fp32",
               "ranks_planned": cfg.parallel.world_size, "ranks_used": used.parallel.world_size,
               "batch_per_rank_planned": cfg.train.batch_per_rank, "batch_per_rank_used": used.train.batch_per_rank,
               "updates_planned": cfg.train.steps, "shrinks": "; ".join(map(str, shrinks[rid]))}
        summary = json.loads((run / "summary.json").read_text()) if (run / "summary.json").exists() else {}
        held = summary.get("run_id")
        if held is not None or log.exists():   # read here now: the run's own commit and start
            row.update(provenance(run), _from="measured")
        if held is not None and held != used.run_id():   # rehearsed before the plan's rehearsal changed
            row.update(status="stale", first_error=f"summary.json is rehearsal {held}; the plan's is "
                                                   f"{used.run_id()}: rerun it")
        elif held is not None and summary.get("metrics") != _metrics_record(run / "metrics.jsonl"):
            # what analysis/aggregate.py refuses to draw (a summary from before the record, or
            # metrics.jsonl rows the run did not finish with) is not an ok rehearsal
            row.update(status="stale", first_error="summary.json's metrics record (rows, last step, digest) is "
                                                   "missing or does not match metrics.jsonl: rerun it")
        elif held is not None:
            row.update(_run_facts(run, used), status="ok")
            bench = results / "full" / "logs" / "train" / f"{rid}.benchmark.tsv"
            if bench.exists():
                rec = next(csv.DictReader(bench.open(), delimiter="\t"))
                row["peak_pss_mb_per_rank"] = round(float(rec["max_pss"]) / used.parallel.world_size)
                row["job_s"] = round(float(rec["s"]))   # the whole job: start-up, updates, evaluation
            if "parameters" not in row and cfg.workload.model_dump_json() in sizes:   # a run saving no model
                row["parameters"], row["state"], row["norm"] = sizes[cfg.workload.model_dump_json()]
            if row.get("parameters"):
                n, state, norm = row["parameters"], row.pop("state"), row.pop("norm")
                row["bytes_per_rank_per_update_closed_form_used"] = round(closed_form(used, n, state, row["updates_done"],
                                                                                      norm))
                row["bytes_per_rank_per_update_closed_form_planned"] = round(closed_form(cfg, n, state, cfg.train.steps,
                                                                                         norm))
                if dictionaries:
                    _planned_counts(row, cfg, planned[cfg.workload.model_dump_json()])
        elif log.exists():   # a log without an error line: the run was stopped, or still runs
            error = _first_error(log)
            row.update(status="failed" if error else "incomplete (no summary.json, no error line)",
                       first_error=error)
        elif rid in written and written[rid]["shrinks"] == row["shrinks"]:
            row = {**written[rid], "model": row["model"], "_from": "carried"}
            if dictionaries and row.get("parameters"):   # counted from the plan, not measured
                _planned_counts(row, cfg, planned[cfg.workload.model_dump_json()])
        elif rid in written and written[rid]["status"] != "not run (time)":
            row.update(status="stale", first_error="the ledger's row was rehearsed with other shrinks "
                                                   f"({written[rid]['shrinks']}): rerun it", _from="carried",
                       commit=written[rid].get("commit", ""), date=written[rid].get("date", ""))
        else:
            row.update(status="not run (time)", _from="not run")
        rows.append(row)
    return rows


# ------------------------------------------------------------------ the figures

#: the rules that draw a figure from its runs (no run is trained or its config rewritten)
FIGURE_RULES = ("figure_runs", "aggregate", "paper_table", "plot")


def figure_status(plan: Plan, results: Path) -> tuple[list[tuple[str, str]], dict[tuple[str, str], tuple[int, int]]]:
    """The full-scale figures whose every run finished its rehearsal, and for the others
    (runs whose summary.json is here, runs planned)."""
    done = {rid for rid in plan.configs if (results / "full" / "runs" / rid / "summary.json").exists()}
    ready, waiting = [], {}
    for key, f in plan.figures.items():
        ids = set(r.run_id for r in f.runs)
        if ids <= done:
            ready.append(key)
        else:
            waiting[key] = (len(ids & done), len(ids))
    return ready, waiting


def drawn_before(plan: Plan, rehearsal: Plan, results: Path, key: tuple[str, str]) -> bool:
    """Whether a figure's PNG was drawn, by an earlier figures run, from exactly the rehearsal runs
    the plan holds now (its manifest's planned and rehearsal run ids): it stays drawn when those
    runs' directories are gone (scratch), and is redrawn only once they are all here again."""
    paper, fig = key
    png, manifest = results / "full" / paper / f"{fig}.png", results / "full" / paper / f"{fig}_runs.json"
    if not (png.exists() and manifest.exists()):
        return False
    held = {(r.get("planned_run_id"), r["run_id"]) for r in json.loads(manifest.read_text())["runs"]}
    return held == {(r.run_id, rehearsal.configs[r.run_id].run_id()) for r in plan.figure(paper, fig).runs}


def figure_targets(plan: Plan, results: Path, ready) -> list[str]:
    """A figure's PNG, and a table figure's table of the paper's numbers beside ours."""
    out = []
    for paper, fig in ready:
        out.append(f"{results}/full/{paper}/{fig}.png")
        if plan.figure(paper, fig).kind == "table":
            out.append(f"{results}/full/{paper}/{fig}_paper.csv")
    return out


def figures_note(plan: Plan, ready, waiting, undrawn=(), rc: int = 0) -> str:
    """results/rehearsal/full/FIGURES.md: which figures were drawn from rehearsal runs, which wait."""
    lines = ["# Full-scale figures drawn from rehearsal runs", "",
             "Rehearsal: not a result. Each figure below was drawn by the workflow's own analysis rules "
             "(`python workflows/rehearsal.py figures`) from runs of a few updates on miniature random data "
             "(`codist data fake`), and says so across itself; it shows that the pipeline from the full-scale "
             "runs to the figure works, nothing about the papers.", "", "## Drawn", ""]
    lines += [f"- `{p}/{f}.png`: {plan.figure(p, f).title} (all {len(set(r.run_id for r in plan.figure(p, f).runs))} "
              f"runs rehearsed)" for p, f in ready] or ["- none yet"]
    if undrawn:
        # not always the analysis: snakemake also stops before any rule (e.g. the results root in use)
        lines += ["", f"## Not drawn: every run rehearsed, but the figure rules did not draw them (snakemake "
                  f"exit {rc}; its output, or the rule's log under logs/<paper>/, says why)", ""]
        lines += [f"- `{p}/{f}`: {plan.figure(p, f).title}" for p, f in undrawn]
    lines += ["", "## Not drawn: not every run's directory is here (`make rehearse` runs them; runs.csv "
              "lists each run's status, also of runs rehearsed before and gone from here)", ""]
    lines += [f"- `{p}/{f}`: {plan.figure(p, f).title}: {n} of {m} runs here" for (p, f), (n, m) in waiting.items()]
    return "\n".join(lines) + "\n"


def draw_figures(plan: Plan, rehearsal: Plan, results_root: str, data_root: str, cores: int) -> int:
    """Every full-scale figure whose runs are all rehearsed, through the workflow's analysis rules
    (`--config scale=full rehearsal=true`: the figures carry the rehearsal stamp), and FIGURES.md
    (listing as drawn, too, a figure drawn before from the same rehearsal runs: drawn_before)."""
    results = Path(results_root) / "rehearsal"
    ready, waiting = figure_status(plan, results)
    before = [k for k in waiting if drawn_before(plan, rehearsal, results, k)]
    waiting = {k: v for k, v in waiting.items() if k not in before}
    rc = 0
    if ready:
        cmd = [str(Path(sys.executable).parent / "snakemake"), "--cores", str(cores), "--nolock",
               "--allowed-rules", *FIGURE_RULES, "--rerun-triggers", "mtime", "--forcerun", "figure_runs",
               "--config", "scale=full", f"tier={TIER}", "rehearsal=true", f"results={results_root}",
               f"data_root={data_root}",
               "--", *figure_targets(plan, results, ready)]
        rc = subprocess.call(cmd, cwd=ROOT)
    drawn = [k for k in ready if (results / "full" / k[0] / f"{k[1]}.png").exists()]
    undrawn = [k for k in ready if k not in drawn]
    stamp_tables(results, drawn)
    drawn = [k for k in plan.figures if k in drawn or k in before]   # the plan's order
    (results / "full" / "FIGURES.md").write_text(figures_note(plan, drawn, waiting, undrawn, rc))
    print(f"rehearsal figures: {len(drawn) - len(before)} of {len(ready)} drawn now, {len(before)} drawn before "
          f"from the same runs, {len(waiting)} waiting for runs (snakemake exit {rc})", file=sys.stderr)
    return rc


#: the tables a figure's rules write beside its PNG (analysis/aggregate.py, paper_table.py)
TABLES = ("{figure}.csv", "{figure}_curves.csv", "{figure}_values.csv", "{figure}_paper.csv", "{figure}.md",
          "{figure}_paper.md")
STAMP_COLUMN = "stamp"
STAMP_LINE = ("> **{stamp}.** Drawn from the full-scale runs' rehearsals: a few updates on miniature random data "
              "(results/rehearsal/full/FIGURES.md); it shows that the pipeline works, nothing about the papers.")


def stamp_tables(results: Path, keys) -> int:
    """Stamp every table of the figures `keys` drawn from rehearsal runs, as their PNGs are: a CSV
    gets a last column `stamp` (every reader here reads columns by name; a comment line would stop
    pandas.read_csv), a Markdown file a line under its heading. Idempotent; each file keeps its
    modification time, so Snakemake sees no newer input. Returns the files stamped now."""
    n = 0
    for paper, fig in keys:
        for name in TABLES:
            path = results / "full" / paper / name.format(figure=fig)
            if not path.exists():
                continue
            stat = path.stat()
            text = path.read_text()
            if path.suffix == ".csv":
                rows = list(csv.reader(text.splitlines()))
                if not rows or STAMP_COLUMN in rows[0]:
                    continue
                rows = [rows[0] + [STAMP_COLUMN]] + [r + [STAMP] for r in rows[1:]]
                tmp = path.with_name(path.name + ".tmp")
                with tmp.open("w", newline="") as f:
                    csv.writer(f, lineterminator="\n").writerows(rows)
            else:
                line = STAMP_LINE.format(stamp=STAMP[0].upper() + STAMP[1:])
                if line in text:
                    continue
                head, _, rest = text.partition("\n")
                tmp = path.with_name(path.name + ".tmp")
                tmp.write_text(f"{head}\n\n{line}\n{rest}")
            os.replace(tmp, path)
            os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
            n += 1
    return n


def redraw_figures(plan: Plan, results_root: str, data_root: str, cores: int) -> int:
    """Every rehearsal figure drawn before, redrawn from its committed tables and manifest without
    its runs (the PNG from <figure>.csv and _curves.csv, a table figure's _paper tables from
    _values.csv), then its tables stamped. The manifest (_runs.json) is not rewritten: it names the
    runs the tables were made from, which a plan changed since would not."""
    results = Path(results_root) / "rehearsal"
    drawn = [(p, f) for p, f in plan.figures if (results / "full" / p / f"{f}.png").exists()
             and (results / "full" / p / f"{f}.csv").exists()]
    stamp_tables(results, drawn)   # before the redraw: the plots and _paper tables read them
    rules = ("plot", "paper_table_redraw")
    targets = figure_targets(plan, results, drawn)
    targets += [t.replace("_paper.csv", "_paper.md") for t in targets if t.endswith("_paper.csv")]
    cmd = [str(Path(sys.executable).parent / "snakemake"), "--cores", str(cores), "--nolock",
           "--allowed-rules", *rules, "--forcerun", *rules, "--rerun-triggers", "mtime",
           "--config", "scale=full", f"tier={TIER}", "rehearsal=true", f"results={results_root}",
           f"data_root={data_root}", "--", *targets]
    rc = subprocess.call(cmd, cwd=ROOT) if drawn else 0
    stamp_tables(results, drawn)
    print(f"rehearsal figures: {len(drawn)} redrawn from their tables (snakemake exit {rc})", file=sys.stderr)
    return rc


def prune_checkpoints(results: Path, ids) -> None:
    """Remove the checkpoint/ of each finished run (its write was the rehearsal; summary.json counts
    it): kept, 94 runs' took 49 GB and filled this machine's disk (ENOSPC, up to 1.7 GB a run). Teachers are
    read from model_<name>.pt, which stays; an unfinished run keeps its checkpoint to resume from."""
    for rid in ids:
        run = results / "full" / "runs" / rid
        if (run / "summary.json").exists() and (run / "checkpoint").is_dir():
            shutil.rmtree(run / "checkpoint")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=["plan", "run", "ledger", "figures", "redraw"])
    ap.add_argument("--replications", default=str(ROOT / "replications"))
    ap.add_argument("--results", default="results", help="the rehearsal writes under RESULTS/rehearsal/")
    ap.add_argument("--data-root", help="the data root: a miniature one (codist data fake --root DIR) or your own")
    ap.add_argument("--only", nargs="*", help="run ids to run (default: every planned run)")
    ap.add_argument("--ci", action="store_true", help="run CI_SUBSET (make test-slurm's runs)")
    ap.add_argument("--cores", type=int, default=2, help="local cores (without --profile)")
    ap.add_argument("--profile", help="a Snakemake profile for the runs, e.g. env/profiles/slurm (default: local)")
    ap.add_argument("--reference", action="store_true",
                    help=f"write the ledger to RESULTS/rehearsal/full/{REFERENCE} (the committed record) instead "
                         f"of {LOCAL} (git-ignored), which starts from the reference's rows")
    args = ap.parse_args(argv)
    plan = load_plan(args.replications, "full", args.data_root, TIER)
    rehearsal, shrinks = rehearse(plan)
    results = Path(args.results) / "rehearsal"
    if args.command == "figures":
        return draw_figures(plan, rehearsal, args.results, args.data_root, args.cores)
    if args.command == "redraw":
        return redraw_figures(plan, args.results, args.data_root, args.cores)
    if args.command == "plan":
        for rid, cfg in plan.configs.items():
            print(f"{rid} {cfg.name}: " + "; ".join(map(str, shrinks[rid])))
        return 0
    if args.command == "run":
        ids = args.only or (list(CI_SUBSET) if args.ci else list(plan.configs))
        targets = [f"{results}/full/runs/{i}/summary.json" for i in ids]
        where = ["--profile", args.profile] if args.profile else ["--cores", str(args.cores)]
        cmd = [str(Path(sys.executable).parent / "snakemake"), *where, "--nolock", "--keep-going",
               "--rerun-incomplete", "--config", "scale=full", f"tier={TIER}", "rehearsal=true",
               f"results={args.results}", f"data_root={args.data_root}", "--", *targets]
        rc = subprocess.call(cmd, cwd=ROOT)
        print(f"rehearsal: snakemake exit {rc}", file=sys.stderr)
        prune_checkpoints(results, ids)
    reference, out = results / "full" / REFERENCE, results / "full" / (REFERENCE if args.reference else LOCAL)
    source = out if out.exists() else reference
    rows = ledger(plan, rehearsal, shrinks, results, read_ledger(source), Path(args.replications) / "throughput.yaml")
    write_ledger(out, rows, source)
    return 0


#: the committed ledger, and the one a rehearsal writes unless told to write the reference (git-ignored:
#: a local `make rehearse` leaves the record alone)
REFERENCE, LOCAL = "runs.csv", "runs.local.csv"


def read_ledger(path: Path) -> dict[str, dict]:
    """The rows of a ledger already written, by run id; a row from before the commit and date columns
    gets them from the git history of the file (recorded_in)."""
    if not path.exists():
        return {}
    rows = {r["run_id"]: r for r in csv.DictReader(path.open())}
    if any(not r.get("commit") for r in rows.values()):
        history = recorded_in(path)
        for rid, r in rows.items():
            if not r.get("commit") and r["status"] != "not run (time)":
                r.update(history.get(rid, {"commit": "unknown", "date": "unknown"}))
    return rows


def write_ledger(out: Path, rows: list[dict], source: Path) -> None:
    """The ledger, and one line: its statuses and how many rows were measured now (read from a run
    directory or log here) and how many were carried from the ledger already written."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS, extrasaction="ignore")   # ledger()'s _from: this line only
        w.writeheader()
        w.writerows(rows)
    counts, by_source = {}, {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
        by_source[r["_from"]] = by_source.get(r["_from"], 0) + 1
    print(f"{out}: {len(rows)} planned runs: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
          + f"; {by_source.get('measured', 0)} measured now (their run directories or logs are here), "
          f"{by_source.get('carried', 0)} carried from {source} (measured before: see their commit and date), "
          f"{by_source.get('not run', 0)} never run")


if __name__ == "__main__":
    sys.exit(main())
