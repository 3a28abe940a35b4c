"""Communication per update, per algorithm, for the papers' models at the papers' worker counts:
measured by the meter in real 2-rank runs, checked against the closed form, and projected by
the closed form.

    python benchmarks/comm_volume.py [--skip-measured-lstm] [--out results/bench]

Models (parameters counted on the model codist builds, fp32 = 4 bytes each):
- ResNet-50: torchvision's, 1000 classes, through the imagenet workload (Sodhani; Sun's
  MA-DNN/EC-DNN periods are applied to it too, as the existing table did).
- Transformer-big: fairseq's `transformer_vaswani_wmt_en_de_big` with `--share-all-embeddings`,
  built by the translation workload (`dataset: fairseq`) from a folder this script writes: a
  joined dictionary of 32,768 entries (fairseq's WMT'16 En-De recipe,
  fairseq/examples/scaling_nmt/README.md: `--nwordssrc 32768 --nwordstgt 32768
  --joined-dictionary`; the count includes fairseq's 4 special symbols) and a two-sentence
  binarized corpus (only so that the folder is valid fairseq data; it is never trained on).
- Anil's LSTM LM: the lm workload's `LstmLM` with Anil's sizes (2 x 1024 LSTM, 256-d
  embeddings, 24,006 word-pieces, layer norm).

State = parameters + persistent floating-point buffers, what the state_dict holds and codist's
`flat_state` sends in a checkpoint exchange or a model average: ResNet-50's BatchNorm statistics;
Transformer-big's two 1-element `version` buffers (fairseq's sinusoidal position tables,
2 x 1026 x 1024 constants every rank builds, are non-persistent buffers, not sent since 9815eae).

Closed forms (per rank and update, bytes sent; P = parameter bytes, S = state bytes; p
workers; n models x m ranks each; k or tau the period):
  all-reduce, p workers           2(p-1)/p * P                  (ring; all inside one model's group)
  codistill, n x m, every k       2(m-1)/m * P  +  (n-1) * S / k   (within-group all-reduce + each rank
                                                                   broadcasts its state to its n-1
                                                                   counterparts, between groups)
  MA-DNN, K x 1, every tau        2(K-1)/K * S / tau            (ring all-reduce of the states)
  EC-DNN, K x 1, every tau        (K-1) * S / tau               (ring all-gather of the states)
codist's tiers are by model group, so all-reduce's bytes are all "within group" (one model);
on a physical network its ring crosses the slow links too: benchmarks/projected_walltime.py
models that. The ratio columns compare with the all-reduce baseline of the same paper
(`baseline`): total bytes per rank (codistill's within-group all-reduce still moves a
model-sized message every update, so this ratio is near 1) and between-group bytes (what
codistillation saves: Sodhani's "up to 1000x").

Measured: real 2-rank runs (torchrun, 1 thread per rank, batch 8, 4 updates, periods of 2) of each
algorithm on ResNet-50 (10 classes, tiny embedded images) and of all-reduce and codistillation
on Anil's LSTM (embedded language with Anil's 24,006-token vocabulary): the meter's bytes per
update (all-reduce) or per exchange (the others) must equal the closed form at 2 ranks, else
the script fails. Transformer-big is not run (about 4 GB per CPU rank with Adam and a teacher
copy); its bytes are the same closed forms applied to its exact parameter count.

Bytes are fp32. Ott et al. train Transformer-big in fp16, which halves every message on both
sides; the ratios do not change.

Writes results/bench/comm_volume.csv (one row per model and configuration).
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import pandas as pd

from codist import config
from codist.launching import launch
from codist.algorithms.state import flat_state
from codist.runtime.comm import ring_all_reduce_bytes
from codist.workloads import build_workload
from codist.workloads.lm import LstmLM
from codist.workloads.lm_config import ANIL_VOCAB_SIZE

STEPS = 4
WMT16_JOINED_DICT = 32768          # entries, fairseq's 4 specials included (scaling_nmt recipe)
ANIL_LSTM = {"layers": 2, "hidden": 1024, "embedding": 256, "layer_norm": True}


# --------------------------------------------------------------------------- the models

def sizes(net) -> tuple[int, int, int]:
    """(parameters, parameter bytes, state bytes) in fp32; shared parameters counted once."""
    params = sum(q.numel() for q in net.parameters())
    return params, params * 4, flat_state(net).numel() * 4


def resnet50(classes: int = 1000):
    cfg = config.validate({"workload": {"name": "imagenet", "arch": "resnet50", "classes": classes}})
    return build_workload(cfg.workload, 0).build_model()


def write_fairseq_folder(root: Path, entries: int, src: str = "en", tgt: str = "de") -> None:
    """A valid fairseq-preprocess output folder: a joined dictionary with `entries` entries
    (4 specials + entries-4 symbols, as fairseq's dict.txt lists only the symbols) and a
    two-sentence train and valid split in the mmap format."""
    import torch
    from fairseq.data import Dictionary, indexed_dataset
    root.mkdir(parents=True, exist_ok=True)
    lines = "".join(f"w{i} {entries - i}\n" for i in range(entries - 4))
    for lang in (src, tgt):
        (root / f"dict.{lang}.txt").write_text(lines)
    d = Dictionary.load(str(root / f"dict.{src}.txt"))
    assert len(d) == entries, (len(d), entries)
    for split in ("train", "valid"):
        for lang in (src, tgt):
            prefix = root / f"{split}.{src}-{tgt}.{lang}"
            b = indexed_dataset.make_builder(f"{prefix}.bin", impl="mmap", vocab_size=len(d))
            for sent in ([5, 6, 7], [8, 9]):
                b.add_item(torch.IntTensor(sent + [d.eos()]))
            b.finalize(f"{prefix}.idx")


def transformer_big():
    """fairseq transformer_vaswani_wmt_en_de_big, shared embeddings, WMT'16-size joined dictionary,
    built by codist's translation workload."""
    tmp = tempfile.mkdtemp(prefix="codist-wmt16-dict-")
    write_fairseq_folder(Path(tmp), WMT16_JOINED_DICT)
    cfg = config.validate({"workload": {"name": "translation", "dataset": "fairseq", "data_dir": tmp,
                                        "source_lang": "en", "target_lang": "de",
                                        "arch": "transformer_vaswani_wmt_en_de_big", "share_embeddings": "all"}})
    w = build_workload(cfg.workload, 0)
    net = w.build_model()
    assert len(w.src_dict) == WMT16_JOINED_DICT
    return net


def lstm_anil():
    return LstmLM(ANIL_VOCAB_SIZE, ANIL_LSTM["embedding"], ANIL_LSTM["hidden"], ANIL_LSTM["layers"],
                  ANIL_LSTM["layer_norm"])


# --------------------------------------------------------------------------- measured runs

def measure(workload: dict, extra: dict, category: str) -> int:
    """Bytes sent by all ranks in `category` during a real 2-rank run of STEPS updates. Batch 8 a rank:
    at 2, a fresh ResNet-50's evaluation after its few updates overflows to NaN (BatchNorm's running
    statistics are still near their initial values; with or without distillation, at LR 0.1 or 1e-4,
    measured 2026-12-04) and the run stops as diverged (exit 4) before its bytes are read. The bytes
    do not depend on the batch; the losses of these runs mean nothing."""
    raw = {"workload": workload,
           "train": {"steps": STEPS, "batch_per_rank": 8, "eval_every": STEPS, "eval_batch": 8, "save_model": False},
           "launch": {"launcher": "torchrun", "threads_per_rank": 1}, **extra}
    cfg = config.validate(raw, "benchmarks/comm_volume.py")
    with tempfile.TemporaryDirectory() as tmp:
        if launch.run(cfg, Path(tmp) / "run") != 0:
            raise SystemExit(f"comm_volume: the 2-rank run failed: {json.dumps(raw)}")
        by = json.loads((Path(tmp) / "run" / "summary.json").read_text())["comm"]["by_category"]
    return by[category]["sent_bytes_all_ranks"]


TWO = {"parallel": {"world_size": 2, "models": 2}}
CHECKS = {   # algorithm -> (config, category, divisor: sent_all_ranks / divisor = per rank per update or exchange)
    "allreduce": ({"parallel": {"world_size": 2}}, "grad_allreduce", 2 * STEPS),
    "codistill": ({**TWO, "algorithm": {"name": "codistill", "exchange_every": 2, "data": "same"}},
                  "param_exchange", 2 * (STEPS // 2)),
    "model_average": ({**TWO, "algorithm": {"name": "model_average", "tau": 2, "average_buffers": True}},
                      "model_average", 2 * (STEPS // 2)),
    "ensemble_compress": ({**TWO, "algorithm": {"name": "ensemble_compress", "tau": 2}},
                          "param_exchange", 2 * (STEPS // 2)),
}


def closed_2ranks(algorithm: str, p_bytes: int, s_bytes: int) -> int:
    """Per rank, at 2 ranks: per update (all-reduce) or per exchange/round (the others)."""
    return {"allreduce": ring_all_reduce_bytes(p_bytes, 2), "codistill": s_bytes,
            "model_average": ring_all_reduce_bytes(s_bytes, 2), "ensemble_compress": s_bytes}[algorithm]


def measured_rows(skip_lstm: bool) -> dict[tuple[str, str], dict]:
    """(model, algorithm) -> measured and closed-form bytes at 2 ranks."""
    out = {}
    small = resnet50(10)
    _, p2, s2 = sizes(small)
    rn = {"name": "imagenet", "arch": "resnet50", "classes": 10, "train_size": 64, "val_size": 8}
    for algo, (extra, cat, div) in CHECKS.items():
        m = measure(rn, extra, cat) / div
        out[("resnet50", algo)] = dict(measured_2ranks=m, closed_2ranks=closed_2ranks(algo, p2, s2),
                                       measured_on="resnet50, 10 classes, 2 ranks")
        print(algo, out[("resnet50", algo)], flush=True)
    if not skip_lstm:
        lm = {"name": "lm", "dataset": "embedded", "vocab": ANIL_VOCAB_SIZE, **ANIL_LSTM, "val_tokens": 512,
              "val_seq_len": 64}
        _, pl, sl = sizes(lstm_anil())
        for algo in ("allreduce", "codistill"):
            extra, cat, div = CHECKS[algo]
            m = measure(lm, extra, cat) / div
            out[("lstm_anil", algo)] = dict(measured_2ranks=m, closed_2ranks=closed_2ranks(algo, pl, sl),
                                            measured_on="Anil LSTM (2x1024, 24006 vocab), 2 ranks")
            print(algo, out[("lstm_anil", algo)], flush=True)
    return out


# --------------------------------------------------------------------------- the table

def paper_rows(model: str, p_bytes: int, s_bytes: int) -> list[dict]:
    """The papers' configurations of `model`, with bytes per rank per update."""
    def ar(p, paper):
        b = ring_all_reduce_bytes(p_bytes, p)
        return dict(algorithm="allreduce", config=f"p={p}", paper=paper, workers=p, models=1, ranks_per_model=p,
                    period=1, per_rank_per_update=b, within_group_per_rank_per_update=b,
                    between_groups_per_rank_per_update=0.0)

    def cd(n, m, k, paper):
        within, between = ring_all_reduce_bytes(p_bytes, m), (n - 1) * s_bytes / k
        return dict(algorithm="codistill", config=f"n={n} x {m}, k={k}", paper=paper, workers=n * m, models=n,
                    ranks_per_model=m, period=k, per_rank_per_update=within + between,
                    within_group_per_rank_per_update=within, between_groups_per_rank_per_update=between)

    def ma(K, tau, paper):
        b = ring_all_reduce_bytes(s_bytes, K) / tau
        return dict(algorithm="model_average", config=f"K={K}, tau={tau}", paper=paper, workers=K, models=K,
                    ranks_per_model=1, period=tau, per_rank_per_update=b, within_group_per_rank_per_update=0.0,
                    between_groups_per_rank_per_update=b)

    def ec(K, tau, paper):
        b = (K - 1) * s_bytes / tau
        return dict(algorithm="ensemble_compress", config=f"K={K}, tau={tau}", paper=paper, workers=K, models=K,
                    ranks_per_model=1, period=tau, per_rank_per_update=b, within_group_per_rank_per_update=0.0,
                    between_groups_per_rank_per_update=b)

    if model == "resnet50":
        rows = [ar(16, "Sodhani base: 16 GPUs x 32"),
                cd(2, 8, 50, "Anil's k=50 on Sodhani's 2 models x 8 GPUs"),
                cd(2, 8, 2500, "Sodhani: 2 models x 8 GPUs, k=2500"),
                ma(8, 16, "Sun: MA-DNN, K=8, tau=16"),
                ec(8, 4000, "Sun: EC-DNN, K=8, tau=4000 (CIFAR-10 period)")]
        baseline = "allreduce p=16"
    elif model == "transformer_big":
        rows = [ar(128, "Ott et al. 2018 / Sodhani Fig. 5: 128 GPUs"),
                cd(2, 64, 2500, "Sodhani: 2 models x 64 GPUs (device-matched), k=2500"),
                cd(2, 64, 50, "Anil's k=50 on 2 models x 64 GPUs")]
        baseline = "allreduce p=128"
    else:
        rows = [ar(128, "Anil Fig. 2a: sync SGD, 128 workers"),
                ar(256, "Anil Fig. 1: sync SGD, 256 workers"),
                cd(2, 128, 50, "Anil Fig. 2a: 2-way codistillation, 2 x 128 workers, k=50"),
                cd(2, 128, 250, "Anil Fig. 4: stalest teacher, k=250")]
        baseline = "allreduce p=128"
    base = next(r for r in rows if f"{r['algorithm']} {r['config']}" == baseline)["per_rank_per_update"]
    for r in rows:
        r["baseline"] = baseline
        r["allreduce_over_this_total"] = base / r["per_rank_per_update"]
        b = r["between_groups_per_rank_per_update"]
        r["allreduce_over_this_between_groups"] = base / b if b else None
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="results/bench")
    p.add_argument("--skip-measured-lstm", action="store_true",
                   help="only the ResNet-50 runs check measured == closed form (saves ~2 min)")
    args = p.parse_args()
    models = {"resnet50": ("torchvision ResNet-50, 1000 classes", resnet50()),
              "transformer_big": (f"fairseq transformer_vaswani_wmt_en_de_big, shared embeddings, "
                                  f"{WMT16_JOINED_DICT}-entry joined dictionary", transformer_big()),
              "lstm_anil": (f"LstmLM 2x1024, embedding 256, vocab {ANIL_VOCAB_SIZE}, layer norm", lstm_anil())}
    rows = []
    for name, (desc, net) in models.items():
        params, p_bytes, s_bytes = sizes(net)
        print(f"{name}: {params:,} parameters, {p_bytes:,} B parameters, {s_bytes:,} B state", flush=True)
        for r in paper_rows(name, p_bytes, s_bytes):
            rows.append({"model": name, "model_description": desc, "model_params": params,
                         "model_params_bytes": p_bytes, "model_state_bytes": s_bytes, **r})
    measured = measured_rows(args.skip_measured_lstm)
    for r in rows:
        m = measured.get((r["model"], r["algorithm"]))
        r.update(m or {"measured_2ranks": None, "closed_2ranks": None, "measured_on": None})
        r["measured_equals_closed_form"] = None if m is None else m["measured_2ranks"] == m["closed_2ranks"]
    df = pd.DataFrame(rows)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    df.to_csv(out / "comm_volume.csv", index=False)
    show = df[["model", "algorithm", "config", "per_rank_per_update", "between_groups_per_rank_per_update",
               "allreduce_over_this_total", "allreduce_over_this_between_groups", "measured_2ranks",
               "closed_2ranks", "measured_equals_closed_form"]]
    print(show.to_markdown(index=False, floatfmt=".4g"))
    checked = df.dropna(subset=["measured_2ranks"])
    bad = checked[~checked.measured_equals_closed_form.astype(bool)]
    if len(bad):
        raise SystemExit(f"the meter disagrees with the closed form:\n{bad.to_string()}")


if __name__ == "__main__":
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    main()
