"""The communication meter: every collective of a run goes through it.

Per rank it counts bytes sent and received, per category and per link tier, using the
bandwidth-optimal algorithm of each collective (p = group size, B = payload bytes):

  all_reduce (ring)      sends 2(p-1)/p * B, receives the same
  broadcast (direct)     root sends (p-1) * B, each other rank receives B
  all_gather (ring)      B = one rank's contribution; sends (p-1) * B, receives the same
  reduce_scatter (ring)  B = the full input; sends (p-1)/p * B, receives the same
  send / recv            the sender sends B, the receiver receives B
  barrier                0

Our own collectives call the meter's methods (which call torch.distributed); the
collectives DeepSpeed's engine issues internally go through `deepspeed.comm`, whose
functions `install_deepspeed_hooks` wraps so they are counted under the current category.

Tiers: a collective whose group lies inside one model's data-parallel group travels on
fast links ("within"); one whose group spans several models' groups travels between
groups ("between", the slow links of a cluster).
"""
from __future__ import annotations

import contextlib
import functools
from collections import defaultdict
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

CATEGORIES = (
    "grad_allreduce",       # gradient all-reduce inside a model's group, every update
    "param_exchange",       # codistillation checkpoint exchange between groups
    "prediction_exchange",  # codistillation prediction exchange
    "model_average",        # MA-DNN / local SGD parameter averaging, EC-DNN ensembling
    "eval",                 # evaluation sums
    "setup",                # initial parameter broadcast and engine setup
    "control",              # bookkeeping (gathering these counters, barriers)
)
#: categories that are the algorithm's own training traffic (what "bytes per update" compares)
TRAINING_CATEGORIES = ("grad_allreduce", "param_exchange", "prediction_exchange", "model_average")


def ring_all_reduce_bytes(payload: int, p: int) -> int:
    """Bytes each rank sends (and receives) in a ring all-reduce of `payload` bytes over p ranks."""
    return 2 * (p - 1) * payload // p if p > 1 else 0


def tensor_bytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


@dataclass
class _PairGroup:
    """The two ends of a point-to-point transfer (for the tier), not a process group."""
    ranks: list[int]


@dataclass
class Counter:
    sent: int = 0
    recv: int = 0
    calls: int = 0


@dataclass
class CommMeter:
    """Counts one rank's traffic. `model_of[r]` is the model (group) index of global rank r."""
    rank: int
    model_of: list[int]
    counts: dict = field(default_factory=lambda: defaultdict(Counter))  # (category, tier) -> Counter
    current: str = "setup"

    # ------------------------------------------------------------ bookkeeping
    @contextlib.contextmanager
    def category(self, name: str):
        if name not in CATEGORIES:
            raise ValueError(f"unknown communication category {name!r}; allowed: {CATEGORIES}")
        previous, self.current = self.current, name
        try:
            yield
        finally:
            self.current = previous

    def _ranks(self, group) -> list[int]:
        if isinstance(group, _PairGroup):
            return group.ranks
        if group is None or group is dist.GroupMember.WORLD:
            return list(range(len(self.model_of)))
        return dist.get_process_group_ranks(group)

    def _tier(self, ranks: list[int]) -> str:
        return "within" if len({self.model_of[r] for r in ranks}) <= 1 else "between"

    def record(self, op: str, payload: int, group=None, src: int | None = None, category: str | None = None):
        """Count one collective of `payload` bytes over `group` (global `src` for broadcast)."""
        ranks = self._ranks(group)
        p = len(ranks)
        if op == "all_reduce":
            sent = recv = ring_all_reduce_bytes(payload, p)
        elif op == "broadcast":
            sent, recv = ((p - 1) * payload, 0) if self.rank == src else (0, payload)
        elif op == "all_gather":
            sent = recv = (p - 1) * payload
        elif op == "reduce_scatter":
            sent = recv = (p - 1) * payload // p
        elif op == "send":
            sent, recv = payload, 0
        elif op == "recv":
            sent, recv = 0, payload
        elif op == "barrier":
            sent = recv = 0
        else:
            raise ValueError(f"the meter has no byte formula for collective {op!r}")
        c = self.counts[(category or self.current, self._tier(ranks))]
        c.sent += sent
        c.recv += recv
        c.calls += 1

    # ------------------------------------------------------------ our collectives
    def all_reduce(self, tensor, group=None, op=dist.ReduceOp.SUM, category=None, async_op=False):
        self.record("all_reduce", tensor_bytes(tensor), group, category=category)
        return dist.all_reduce(tensor, op=op, group=group, async_op=async_op)

    def broadcast(self, tensor, src: int, group=None, category=None, async_op=False):
        self.record("broadcast", tensor_bytes(tensor), group, src=src, category=category)
        return dist.broadcast(tensor, src=src, group=group, async_op=async_op)

    def all_gather(self, tensor_list, tensor, group=None, category=None, async_op=False):
        self.record("all_gather", tensor_bytes(tensor), group, category=category)
        return dist.all_gather(tensor_list, tensor, group=group, async_op=async_op)

    def exchange(self, send: torch.Tensor, dst: int, recv: torch.Tensor, src: int, category=None) -> None:
        """Point-to-point: send `send` to global rank dst while receiving `recv` from src."""
        pair = lambda peer: _PairGroup([self.rank, peer])
        self.record("send", tensor_bytes(send), pair(dst), category=category)
        self.record("recv", tensor_bytes(recv), pair(src), category=category)
        reqs = [dist.isend(send, dst), dist.irecv(recv, src)]
        for r in reqs:
            r.wait()

    def barrier(self, group=None, category="control"):
        self.record("barrier", 0, group, category=category)
        return dist.barrier(group=group)

    # ------------------------------------------------------------ DeepSpeed's collectives
    def install_deepspeed_hooks(self) -> None:
        """Route `deepspeed.comm` collectives through the meter (counted, then executed)."""
        import deepspeed.comm as dscomm
        import deepspeed.comm.comm as dscomm_impl

        def payload_first(name, op):
            original = getattr(dscomm_impl, name)

            @functools.wraps(original)
            def wrapped(tensor, *args, **kwargs):
                group = kwargs.get("group")
                src = kwargs.get("src", args[0] if op == "broadcast" and args else None)
                if op == "all_reduce_coalesced":
                    self.record("all_reduce", sum(tensor_bytes(t) for t in tensor), group)
                else:
                    self.record(op, tensor_bytes(tensor), group, src=src)
                return original(tensor, *args, **kwargs)
            return wrapped

        def gather_like(name, op):
            original = getattr(dscomm_impl, name)

            @functools.wraps(original)
            def wrapped(output, input_, *args, **kwargs):
                group = kwargs.get("group", args[0] if args else None)
                # all_gather(list, tensor): payload is the input; *_tensor variants: also the input
                payload = tensor_bytes(input_) if op == "all_gather" else sum(
                    tensor_bytes(t) for t in (input_ if isinstance(input_, (list, tuple)) else [input_]))
                self.record(op, payload, group)
                return original(output, input_, *args, **kwargs)
            return wrapped

        def barrier(name):
            original = getattr(dscomm_impl, name)

            @functools.wraps(original)
            def wrapped(*args, **kwargs):
                self.record("barrier", 0, kwargs.get("group"), category="control")
                return original(*args, **kwargs)
            return wrapped

        patches = {
            "all_reduce": payload_first("all_reduce", "all_reduce"),
            "inference_all_reduce": payload_first("inference_all_reduce", "all_reduce"),
            "all_reduce_coalesced": payload_first("all_reduce_coalesced", "all_reduce_coalesced"),
            "broadcast": payload_first("broadcast", "broadcast"),
            "all_gather": gather_like("all_gather", "all_gather"),
            "all_gather_into_tensor": gather_like("all_gather_into_tensor", "all_gather"),
            "reduce_scatter_tensor": gather_like("reduce_scatter_tensor", "reduce_scatter"),
            "barrier": barrier("barrier"),
        }
        for name, fn in patches.items():
            setattr(dscomm, name, fn)
            setattr(dscomm_impl, name, fn)

    # ------------------------------------------------------------ reporting
    def sent_bytes(self, categories=TRAINING_CATEGORIES, tier: str | None = None) -> int:
        return sum(c.sent for (cat, t), c in self.counts.items()
                   if cat in categories and (tier is None or t == tier))

    def as_tensor(self) -> torch.Tensor:
        """[category, tier, (sent, recv, calls)] int64, for summing over ranks."""
        out = torch.zeros(len(CATEGORIES), 2, 3, dtype=torch.int64)
        for (cat, tier), c in self.counts.items():
            out[CATEGORIES.index(cat), ("within", "between").index(tier)] = torch.tensor([c.sent, c.recv, c.calls])
        return out


def summarize(totals: torch.Tensor, world_size: int, updates: int) -> dict:
    """summary.json's comm section from the counters summed over all ranks."""
    by_cat = {}
    for i, cat in enumerate(CATEGORIES):
        within, between = totals[i, 0].tolist(), totals[i, 1].tolist()
        sent = within[0] + between[0]
        if sent == 0 and within[2] + between[2] == 0:
            continue
        by_cat[cat] = {
            "sent_bytes_all_ranks": sent,
            "recv_bytes_all_ranks": within[1] + between[1],
            "within_group_sent_bytes": within[0],
            "between_group_sent_bytes": between[0],
            "calls_all_ranks": within[2] + between[2],
            "sent_bytes_per_rank_per_update": sent / world_size / updates,
        }
    train = [by_cat[c] for c in TRAINING_CATEGORIES if c in by_cat]
    total = sum(c["sent_bytes_all_ranks"] for c in train)
    between = sum(c["between_group_sent_bytes"] for c in train)
    return {
        "training_sent_bytes_all_ranks": total,
        "training_sent_bytes_per_rank_per_update": total / world_size / updates,
        "between_group_sent_bytes_per_rank_per_update": between / world_size / updates,
        "by_category": by_cat,
    }
