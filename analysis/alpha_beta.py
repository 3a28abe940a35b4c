"""The alpha-beta cost of an algorithm's update on a two-tier network: bytes and seconds per update
of all-reduce, codistillation, MA-DNN and EC-DNN on p workers in two groups (`project`), used by
benchmarks/projected_walltime.py (8-256 workers, measured and published compute) and by
analysis/frontier_walltime.py (a frontier run at its own 2 workers).

Layout. p workers (one rank each, fixed per-worker batch: weak scaling) in n = 2 groups of
m = p/2. Links inside a group are fast (alpha_f, beta_f); between the groups they are slow
(alpha_s, beta_s), in one of two ways (`net["shared"]` picks one):
  per-worker  each worker has its own slow link to its counterpart in the other group
              (a NIC per GPU): the m cross-group transfers of a collective run side by side;
  shared      the groups are joined by one slow link (two pods or sites): those m transfers
              share it, so it carries m times the bytes (written `copies = m` below).
codistillation (n = 2 models), MA-DNN and EC-DNN (K = 2 workers, each worker a group of m
ranks) put one model per group: its gradients are all-reduced inside the group every update,
and only the exchange crosses the slow links. All-reduce trains one model over all p
workers, so its traffic crosses the slow links. codist's exchanges run one per cross-group
(rank j of one group with rank j of the other), so every rank of a group sends the same
state: m identical copies cross between the groups per exchange. With per-worker links this
costs no time; on a shared link it costs m times one copy.

Cost of one collective (bytes B, q ranks, links (alpha, beta); a ring waits for its slowest hop):
  ring all-reduce    T_ar(B, q)     = 2(q-1) alpha + 2(q-1)/q * B / beta
  broadcast          T_bc(B, q)     = (q-1) (alpha + B / beta)      (root sends to each receiver)
  ring all-gather    T_ag(B, q)     = (q-1) (alpha + B / beta)      (B = one rank's share)

Per update (P = gradient bytes, S = state bytes; C = compute time per update of that
algorithm; the exchange cost is spread over its period):
  all-reduce, flat ring       T_ar_slow(P, p)                            (the ring waits for its 2
                                                                          cross-group hops, which run
                                                                          in opposite directions)
  all-reduce, hierarchical    T_ar_fast(P, m) + T_ar_slow(copies P/m, 2) (reduce-scatter + all-gather
                                                                          inside the group, the 1/m
                                                                          shards all-reduced between
                                                                          groups: NCCL-like, the
                                                                          strongest baseline here)
  codistill n=2, period k     T_ar_fast(P, m) + 2 T_bc_slow(copies S, 2) / k   (codist broadcasts each
                                                                          model's state in turn)
  MA-DNN K=2, period tau      T_ar_fast(P, m) + T_ar_slow(copies S, 2) / tau
  EC-DNN K=2, period tau      T_ar_fast(P, m) + T_ag_slow(copies S, 2) / tau
  step time, serial           C + communication
  step time, overlapped       max(C, per-update gradient all-reduce) + periodic exchange
                              (gradient buckets overlap the backward pass; the periodic exchange
                              does not overlap in codist)

Bytes per rank and update, reported separately: `bytes_total` (everything a rank sends),
`bytes_within` (fast links) and `bytes_between` (slow links). Codistillation's within-group
all-reduce still sends 2(m-1)/m * P every update; its saving is the between-group part.
For the flat ring, `bytes_between` is the per-rank average of what crosses groups (2 of the p
hops), but its time is set by those hops, as the formula says.
"""
from __future__ import annotations


def t_allreduce(b: float, q: int, alpha: float, beta: float) -> float:
    return 0.0 if q <= 1 else 2 * (q - 1) * alpha + 2 * (q - 1) / q * b / beta


def t_broadcast(b: float, q: int, alpha: float, beta: float) -> float:
    return (q - 1) * (alpha + b / beta)


def t_allgather(b: float, q: int, alpha: float, beta: float) -> float:
    return (q - 1) * (alpha + b / beta)


def ring_bytes(b: float, q: int) -> float:
    return 0.0 if q <= 1 else 2 * (q - 1) / q * b


def project(algo: str, period: int, p: int, P: float, S: float, C: float, net: dict) -> dict:
    """Bytes and seconds per update of `algo` on p workers (2 groups of p/2).

    net["shared"]: the m = p/2 cross-group transfers that run side by side (one per worker pair)
    share one slow link instead of each having its own, so they carry m times the bytes."""
    af, bf, as_, bs = net["alpha_f"], net["beta_f"], net["alpha_s"], net["beta_s"]
    m = p // 2
    copies = m if net["shared"] else 1
    if algo == "allreduce_flat":
        grad = t_allreduce(P, p, as_, bs)             # 2 hops cross the groups, in opposite directions
        exch, fast_s, slow_s = 0.0, 0.0, grad
        total = ring_bytes(P, p)
        between = 2 / p * total                       # 2 of the p ring hops cross groups
        within = total - between
    elif algo == "allreduce_hier":
        fast_s, slow_s = t_allreduce(P, m, af, bf), t_allreduce(P / m * copies, 2, as_, bs)
        grad, exch = fast_s + slow_s, 0.0
        within, between = ring_bytes(P, m), ring_bytes(P / m, 2)
        total = within + between
    else:
        grad = fast_s = t_allreduce(P, m, af, bf)
        within = ring_bytes(P, m)
        if algo == "codistill":
            slow_s = 2 * t_broadcast(S * copies, 2, as_, bs) / period     # each model's state in turn
            between = S / period                                         # each rank sends its state once
        elif algo == "model_average":
            slow_s = t_allreduce(S * copies, 2, as_, bs) / period
            between = ring_bytes(S, 2) / period
        elif algo == "ensemble_compress":
            slow_s = t_allgather(S * copies, 2, as_, bs) / period
            between = S / period
        else:
            raise ValueError(algo)
        exch = slow_s
        total = within + between
    return {"bytes_total": total, "bytes_within": within, "bytes_between": between,
            "bytes_between_all_ranks": between * p,
            "comm_fast_s": fast_s, "comm_slow_s": slow_s,
            "step_serial_s": C + grad + exch, "step_overlap_s": max(C, grad) + exch}
