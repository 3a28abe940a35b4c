"""The communication meter: every collective of a run goes through it.

Per rank it counts bytes sent and received, per category and per link tier, using the
bandwidth-optimal algorithm of each collective (p = group size, B = payload bytes):

  all_reduce (ring)      sends 2(p-1)/p * B, receives the same
  broadcast (direct)     root sends (p-1) * B, each other rank receives B
  all_gather (ring)      B = one rank's contribution; sends (p-1) * B, receives the same
  reduce_scatter (ring)  B = the full input; sends (p-1)/p * B, receives the same
  send / recv            the sender sends B, the receiver receives B
  barrier                0

`install_hooks` wraps torch.distributed's collectives, the one choke point through which
our own calls, DeepSpeed's engine (deepspeed.comm calls torch.distributed) and torch's
averagers and DDP comm hooks all pass; each is counted under the current category.

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
            category = category or "control"
        else:
            raise ValueError(f"the meter has no byte formula for collective {op!r}")
        c = self.counts[(category or self.current, self._tier(ranks))]
        c.sent += sent
        c.recv += recv
        c.calls += 1

    # ------------------------------------------------------------ collectives
    # Convenience wrappers: run a torch.distributed collective under a category. The
    # counting itself happens in the hooks below, which see every caller alike.
    def all_reduce(self, tensor, group=None, op=dist.ReduceOp.SUM, category=None, async_op=False):
        with self.category(category or self.current):
            return dist.all_reduce(tensor, op=op, group=group, async_op=async_op)

    def broadcast(self, tensor, src: int, group=None, category=None, async_op=False):
        with self.category(category or self.current):
            return dist.broadcast(tensor, src=src, group=group, async_op=async_op)

    def all_gather(self, tensor_list, tensor, group=None, category=None, async_op=False):
        with self.category(category or self.current):
            return dist.all_gather(tensor_list, tensor, group=group, async_op=async_op)

    def exchange(self, send: torch.Tensor, dst: int, recv: torch.Tensor, src: int, category=None) -> None:
        """Point-to-point: send `send` to global rank dst while receiving `recv` from src."""
        with self.category(category or self.current):
            reqs = [dist.isend(send, dst), dist.irecv(recv, src)]
        for r in reqs:
            r.wait()

    def barrier(self, group=None, category="control"):
        with self.category(category):
            return dist.barrier(group=group)

    # ------------------------------------------------------------ the hooks
    def install_hooks(self) -> None:
        """Count every torch.distributed collective of this process under the current category.

        torch.distributed is the one choke point: our wrappers above, DeepSpeed's engine
        (deepspeed.comm calls torch.distributed.*), torch's model averagers and DDP comm hooks
        all go through it. (DDP's built-in C++ all-reduce does not: DDP-based algorithms
        register a Python comm hook.)
        """
        import inspect

        def hook(name, op, payload_of):
            original = getattr(dist, name)
            if getattr(original, "_codist_metered", False):
                return
            sig = inspect.signature(original)

            @functools.wraps(original)
            def wrapped(*args, **kwargs):
                a = sig.bind(*args, **kwargs).arguments
                group = a.get("group")
                if op in ("send", "recv"):
                    peer = a.get("dst", a.get("src"))
                    group = _PairGroup([self.rank, peer])
                self.record(op, payload_of(a), group, src=a.get("src"))
                return original(*args, **kwargs)
            wrapped._codist_metered = True
            setattr(dist, name, wrapped)

        first = lambda key: (lambda a: tensor_bytes(a[key]))
        every = lambda key: (lambda a: sum(tensor_bytes(t) for t in a[key]))
        hook("all_reduce", "all_reduce", first("tensor"))
        hook("all_reduce_coalesced", "all_reduce", every("tensors"))
        hook("broadcast", "broadcast", first("tensor"))
        hook("all_gather", "all_gather", first("tensor"))
        hook("all_gather_into_tensor", "all_gather", first("input_tensor"))
        hook("reduce_scatter_tensor", "reduce_scatter", first("input"))
        hook("send", "send", first("tensor"))
        hook("isend", "send", first("tensor"))
        hook("recv", "recv", first("tensor"))
        hook("irecv", "recv", first("tensor"))
        hook("barrier", "barrier", lambda a: 0)
        self._hook_broadcast_coalesced()

    def _hook_broadcast_coalesced(self) -> None:
        """DDP syncs parameters at setup and buffers (BatchNorm statistics) before every forward
        with dist._broadcast_coalesced, a C++ binding without a signature: counted as one
        broadcast of all the tensors from the group's `src` (a rank of that group)."""
        original = dist._broadcast_coalesced
        if getattr(original, "_codist_metered", False):
            return

        def wrapped(group, tensors, buffer_size, src=0):
            ranks = self._ranks(group)
            self.record("broadcast", sum(tensor_bytes(t) for t in tensors), group, src=ranks[src])
            return original(group, tensors, buffer_size, src)
        wrapped._codist_metered = True
        dist._broadcast_coalesced = wrapped

    # ------------------------------------------------------------ reporting
    def sent_bytes(self, categories=TRAINING_CATEGORIES, tier: str | None = None) -> int:
        return sum(c.sent for (cat, t), c in self.counts.items()
                   if cat in categories and (tier is None or t == tier))

    def load_tensor(self, t: torch.Tensor) -> None:
        """Restore counters saved with `as_tensor` (resuming from a checkpoint)."""
        self.counts.clear()
        for i, cat in enumerate(CATEGORIES):
            for j, tier in enumerate(("within", "between")):
                sent, recv, calls = (int(v) for v in t[i, j])
                if sent or recv or calls:
                    self.counts[(cat, tier)] = Counter(sent, recv, calls)

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
