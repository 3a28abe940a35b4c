"""Communication claims as accounting identities at the papers' own periods and sizes.

The bytes a run measures per exchange (summary.json, via the figure's table) fix the model's
parameter bytes P and state bytes S; the closed forms of benchmarks/comm_volume.py then give
bytes per rank per update at the paper's worker counts and periods:
  all-reduce, p ranks          2(p-1)/p x P                every update
  codistill, n models          (n-1) x S / k               between model groups
  MA-DNN, K models             2(K-1)/K x S / tau          ring all-reduce of the states
  EC-DNN, K models             (K-1) x S / tau             ring all-gather of the states
A ratio (b's bytes / a's) is the same on every seed: no interval, no verdict rule beyond >= t.

A claim's `identity:` names the paper's setting, e.g.
  {a: {algorithm: codistill, models: 2, period: 2500}, b: {algorithm: allreduce, ranks: 16}}
  {a: {algorithm: ensemble_compress, models: 8, period: 4000}, b: {algorithm: model_average, models: 8, period: 16}}
"""
from __future__ import annotations

COLUMN = {"allreduce": "comm_sent_bytes_per_rank_per_update",
          "codistill": "between_group_sent_bytes_per_rank_per_update",
          "model_average": "comm_sent_bytes_per_rank_per_update",
          "ensemble_compress": "comm_sent_bytes_per_rank_per_update"}


class IdentityError(ValueError):
    pass


def factor(alg: str, ranks: int = 1, models: int = 1) -> float:
    """Bytes per exchange / (P or S) for one rank (the closed forms above)."""
    if alg == "allreduce":
        return 2 * (ranks - 1) / ranks
    if alg == "codistill":
        return models - 1
    if alg == "model_average":
        return 2 * (models - 1) / models
    if alg == "ensemble_compress":
        return models - 1
    raise IdentityError(f"identity: algorithm {alg!r}; allowed: {sorted(COLUMN)}")


def unit_bytes(run_cfg: dict, bytes_per_update: float) -> float:
    """P (all-reduce) or S (the others) from one run's measured bytes per update."""
    a, p = run_cfg["algorithm"], run_cfg["parallel"]
    alg = a["name"]
    period = 1 if alg == "allreduce" else int(a.get("tau") or a.get("exchange_every"))
    f = factor(alg, ranks=p["world_size"] // p.get("models", 1), models=p.get("models", 1))
    if f == 0:
        raise IdentityError(f"{alg} at world {p['world_size']} sends nothing: cannot infer its message size")
    return bytes_per_update * period / f


def at_paper(setting: dict, unit: float) -> float:
    """Bytes per rank per update at the paper's setting, from P or S."""
    alg = setting["algorithm"]
    f = factor(alg, ranks=int(setting.get("ranks", 1)), models=int(setting.get("models", 1)))
    return f * unit / int(setting.get("period", 1))


def ratio(identity: dict, table, configs: dict, a: str, b: str) -> tuple[float, str]:
    """(b's bytes / a's bytes per rank per update at the paper's setting, how it was computed)."""
    out = {}
    for key, series in (("a", a), ("b", b)):
        cfg, setting = configs[series], identity[key]
        if setting["algorithm"] != cfg["algorithm"]["name"]:
            raise IdentityError(f"identity.{key}: algorithm {setting['algorithm']!r} but series {series!r} "
                                f"runs {cfg['algorithm']['name']!r}")
        measured = float(table.loc[table["series"] == series, COLUMN[setting["algorithm"]]].iloc[0])
        unit = unit_bytes(cfg, measured)
        out[key] = (at_paper(setting, unit), unit)
    r = out["b"][0] / out["a"][0]
    how = (f"identity at {identity['b']} vs {identity['a']}: {out['b'][0]:.4g} / {out['a'][0]:.4g} B per rank-update "
           f"(measured message {out['b'][1]:.4g} / {out['a'][1]:.4g} B)")
    return r, how
