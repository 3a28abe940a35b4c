"""Communication claims as accounting identities at the papers' own periods and sizes.

The bytes a run measures per exchange (summary.json, via the figure's table) fix the model's
parameter bytes P and state bytes S; the closed forms of benchmarks/comm_volume.py then give
bytes per rank per update at the paper's worker counts and periods:
  all-reduce, p ranks          2(p-1)/p x P                every update
  codistill, n models          (n-1) x S / k               between model groups
  MA-DNN, K models             2(K-1)/K x S / tau          ring all-reduce of the states
  EC-DNN, K models             (K-1) x S / tau             ring all-gather of the states
(each algorithm's form, its period and the bytes that measure it are its registration's: `comm`,
`period`, codist.algorithms.registry). A ratio (b's bytes / a's) is the same on every seed: no
interval, no verdict rule beyond >= t.

A claim's `identity:` names the paper's setting, e.g.
  {a: {algorithm: codistill, models: 2, period: 2500}, b: {algorithm: allreduce, ranks: 16}}
  {a: {algorithm: ensemble_compress, models: 8, period: 4000}, b: {algorithm: model_average, models: 8, period: 16}}
"""
from __future__ import annotations

from codist.algorithms.registry import lookup, period_of


class IdentityError(ValueError):
    pass


def column(alg: str) -> str:
    """The summary's bytes per rank per update that measure `alg`'s traffic (its registration's)."""
    return _form(alg).column


def _form(alg: str):
    try:
        form = lookup(alg).comm
    except KeyError as e:
        raise IdentityError(f"identity: {e.args[0]}") from None
    if form is None or form.factor is None:
        raise IdentityError(f"identity: algorithm {alg!r} registers no closed form of its bytes (comm=CommForm(..., "
                            f"factor=...)); algorithms with one: {', '.join(with_closed_form())}")
    return form


def with_closed_form() -> list[str]:
    from codist.algorithms.registry import specs
    return sorted(n for n, s in specs().items() if s.comm is not None and s.comm.factor is not None)


def factor(alg: str, ranks: int = 1, models: int = 1) -> float:
    """Bytes per exchange / (P or S) for one rank (the closed forms above, as registered)."""
    return _form(alg).factor(ranks, models)


def unit_bytes(run_cfg: dict, bytes_per_update: float) -> float:
    """P (all-reduce) or S (the others) from one run's measured bytes per update."""
    a, p = run_cfg["algorithm"], run_cfg["parallel"]
    alg = a["name"]
    f = factor(alg, ranks=p["world_size"] // p.get("models", 1), models=p.get("models", 1))
    if f == 0:
        raise IdentityError(f"{alg} at world {p['world_size']} sends nothing: cannot infer its message size")
    return bytes_per_update * period_of(a) / f


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
        measured = float(table.loc[table["series"] == series, column(setting["algorithm"])].iloc[0])
        unit = unit_bytes(cfg, measured)
        out[key] = (at_paper(setting, unit), unit)
    r = out["b"][0] / out["a"][0]
    how = (f"identity at {identity['b']} vs {identity['a']}: {out['b'][0]:.4g} / {out['a'][0]:.4g} B per rank-update "
           f"(measured message {out['b'][1]:.4g} / {out['a'][1]:.4g} B)")
    return r, how
