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
averagers and DDP comm hooks all pass; each is counted under the current category. The wrappers
go in before `deepspeed.init_distributed` (codist.runtime.distributed.init), which caches two of them;
collectives before the rank's meter exists are counted as setup. What the meter did not see is
flagged: each gloo process group numbers its collectives, and `unseen_calls` is that number minus
the calls the meter counted on the group (summary.json: comm.unseen_collectives_all_ranks).

Every tensor a collective gets must be on the run's device (`CommMeter.device`): NCCL has no CPU
backend, so a CPU tensor that gloo accepts here would stop a GPU run. The hooks check it for every
collective once the rank's meter exists, and raise one line naming the category and the caller.

Tiers: a collective whose group lies inside one model's data-parallel group travels on
fast links ("within"); one whose group spans several models' groups travels between
groups ("between", the slow links of a cluster).
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import os
import sys
import threading
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
    "unseen",               # calls only: collectives the process groups ran that the meter did not see
)
#: categories that are the algorithm's own training traffic (what "bytes per update" compares)
TRAINING_CATEGORIES = ("grad_allreduce", "param_exchange", "prediction_exchange", "model_average")


def ring_all_reduce_bytes(payload: int, p: int) -> int:
    """Bytes each rank sends (and receives) in a ring all-reduce of `payload` bytes over p ranks."""
    return 2 * (p - 1) * payload // p if p > 1 else 0


def tensor_bytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


@dataclass
class Counter:
    sent: int = 0
    recv: int = 0
    calls: int = 0


@dataclass
class CommMeter:
    """Counts one rank's traffic. `model_of[r]` is the model (group) index of global rank r;
    `device`: the run's device, where every tensor of a collective must live."""
    rank: int
    model_of: list[int]
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    counts: dict = field(default_factory=lambda: defaultdict(Counter))  # (category, tier) -> Counter
    current: str = "setup"
    seen: dict = field(default_factory=lambda: defaultdict(int))  # process group -> collectives counted on it

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
        if group is None or group is dist.GroupMember.WORLD:
            return list(range(len(self.model_of)))
        return dist.get_process_group_ranks(group)

    def _tier(self, ranks: list[int]) -> str:
        return "within" if len({self.model_of[r] for r in ranks}) <= 1 else "between"

    def record(self, op: str, payload: int, group=None, src: int | None = None, category: str | None = None,
               peer: int | None = None, collectives: int = 1):
        """Count one collective of `payload` bytes over `group` (global `src` for broadcast; the
        global `peer` of a send or recv, whose tier is that of the two ranks). `collectives`: how
        many the process group ran for it (a coalesced broadcast runs one per dtype bucket)."""
        ranks = [self.rank, peer] if peer is not None else self._ranks(group)
        self.seen[_process_group(group)] += collectives
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
        """Point-to-point: send `send` to global rank dst while receiving `recv` from src, as one
        batch (`batch_isend_irecv`): NCCL can deadlock on separate isend/irecv calls whose peers
        post them in another order; each op is still counted by the isend/irecv hooks."""
        with self.category(category or self.current):
            reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, send, dst), dist.P2POp(dist.irecv, recv, src)])
        for r in reqs:
            r.wait()

    def barrier(self, group=None, category="control"):
        with self.category(category):
            return dist.barrier(group=group)

    # ------------------------------------------------------------ the hooks
    def install_hooks(self) -> None:
        """Make this the meter every collective of this process is counted by (the hooks
        themselves go in before DeepSpeed starts: codist.runtime.distributed.init calls install_hooks());
        collectives counted before, while setting up the process groups, are counted as setup."""
        global _active
        install_hooks()
        _refuse_unmetered_deepspeed_cache()
        _active = self
        pending, _pending[:] = list(_pending), []
        for op, payload, group, src, peer, collectives in pending:
            self.record(op, payload, group, src=src, category="setup", peer=peer, collectives=collectives)

    def check_device(self, op: str, tensors) -> None:
        """Raise (one line: category, collective, the caller's file:line) if a tensor of this
        collective is not on the run's device."""
        for t in tensors:
            d = t.device
            if d.type != self.device.type or (self.device.index is not None and d.index != self.device.index):
                raise CollectiveDeviceError(
                    f"codist: a '{self.current}' {op} at {_caller()} got a tensor on {d}, but this run's "
                    f"collectives need the run's device {self.device} (NCCL has no CPU backend)")

    def unseen_calls(self) -> int:
        """Collectives this process ran that the meter did not count: per gloo process group, the
        group's own sequence number minus the calls counted on it (0 where nothing bypassed it)."""
        if not dist.is_available() or not dist.is_initialized():
            return 0
        c10d = dist.distributed_c10d
        unseen = 0
        for group in list(c10d._world.pg_map):
            if c10d.get_backend(group) != "gloo":   # NCCL numbers point-to-point ops apart: not compared
                continue
            unseen += max(0, group._get_sequence_number_for_group() - self.seen.get(group, 0))
        return unseen

    # ------------------------------------------------------------ reporting
    def sent_bytes(self, categories=TRAINING_CATEGORIES, tier: str | None = None) -> int:
        return sum(c.sent for (cat, t), c in self.counts.items()
                   if cat in categories and (tier is None or t == tier))

    def load_tensor(self, t: torch.Tensor) -> None:
        """Restore counters saved with `as_tensor` (resuming from a checkpoint)."""
        self.counts.clear()
        for i, cat in enumerate(CATEGORIES[:len(t)]):   # a checkpoint from before "unseen" has one row fewer
            for j, tier in enumerate(("within", "between")):
                sent, recv, calls = (int(v) for v in t[i, j])
                if sent or recv or calls:
                    self.counts[(cat, tier)] = Counter(sent, recv, calls)

    def as_tensor(self) -> torch.Tensor:
        """[category, tier, (sent, recv, calls)] int64, for summing over ranks."""
        out = torch.zeros(len(CATEGORIES), 2, 3, dtype=torch.int64)
        for (cat, tier), c in self.counts.items():
            out[CATEGORIES.index(cat), ("within", "between").index(tier)] = torch.tensor([c.sent, c.recv, c.calls])
        out[CATEGORIES.index("unseen"), 0, 2] += self.unseen_calls()   # this process's, on top of a checkpoint's
        return out


class CollectiveDeviceError(RuntimeError):
    """A collective got a tensor that is not on the run's device."""


_HERE = os.path.abspath(__file__)
_TORCH_WRAPPERS = (os.path.join("torch", "distributed", "distributed_c10d.py"),
                   os.path.join("torch", "distributed", "c10d_logger.py"))


def _caller() -> str:
    """file:line of the first frame outside this module and torch's collective wrappers (the call
    site that built the tensor), as its last two path components (rank/train.py:93)."""
    f = sys._getframe(1)
    while f is not None and (os.path.abspath(f.f_code.co_filename) == _HERE
                             or f.f_code.co_filename.endswith(_TORCH_WRAPPERS)):
        f = f.f_back
    if f is None:
        return "an unknown caller"
    parts = os.path.normpath(f.f_code.co_filename).split(os.sep)
    return f"{'/'.join(parts[-2:])}:{f.f_lineno}"


# ---------------------------------------------------------------- the hooks, once per process
_active: CommMeter | None = None   # the rank's meter, once it exists
_pending: list[tuple] = []          # (op, payload, group, src, peer, collectives) counted before it existed
_inside = threading.local()         # a metered call made by a metered call (send -> isend) counts once


def _process_group(group):
    """The process group a collective ran on (None and WORLD are the default group)."""
    if group is None or group is dist.GroupMember.WORLD:
        return dist.distributed_c10d._get_default_group()
    return group


def _count(op: str, payload: int, group, src, peer, collectives: int = 1, tensors=()) -> None:
    if _active is not None:
        _active.check_device(op, tensors)   # before the collective runs (and before it is counted)
    if _active is None:
        _pending.append((op, payload, group, src, peer, collectives))
    else:
        _active.record(op, payload, group, src=src, peer=peer, collectives=collectives)


def install_hooks() -> None:
    """Wrap torch.distributed's collectives (in torch.distributed and in distributed_c10d, where
    torch's own helpers such as broadcast_object_list look them up), once per process.

    Call it before `deepspeed.init_distributed`: DeepSpeed's torch backend keeps references to
    all_gather_into_tensor and reduce_scatter_tensor (ZeRO's collectives) made at that moment.
    torch.distributed is the one choke point: our wrappers, DeepSpeed's engine, torch's model
    averagers and DDP comm hooks all go through it (DDP's own C++ all-reduce does not: DDP-based
    algorithms register a Python comm hook; what still bypasses shows in `unseen_calls`).
    """
    c10d = dist.distributed_c10d

    def hook(name, op, payload_of, tensors_of):
        original = getattr(c10d, name)
        if getattr(original, "_codist_metered", False):
            return
        sig = inspect.signature(original)

        @functools.wraps(original)
        def wrapped(*args, **kwargs):
            if getattr(_inside, "depth", 0):
                return original(*args, **kwargs)
            a = sig.bind(*args, **kwargs).arguments
            peer = _peer(a) if op in ("send", "recv") else None
            _count(op, payload_of(a), a.get("group"), None if peer is not None else a.get("src"), peer,
                   tensors=tensors_of(a))
            _inside.depth = 1
            try:
                return original(*args, **kwargs)
            finally:
                _inside.depth = 0
        wrapped._codist_metered = True
        setattr(c10d, name, wrapped)
        setattr(dist, name, wrapped)

    first = lambda key: (lambda a: tensor_bytes(a[key]))
    every = lambda key: (lambda a: sum(tensor_bytes(t) for t in a[key]))

    def tensors(*keys):   # every tensor the collective reads or writes
        return lambda a: [t for k in keys for t in (a[k] if isinstance(a.get(k), (list, tuple)) else [a[k]])]
    hook("all_reduce", "all_reduce", first("tensor"), tensors("tensor"))
    hook("all_reduce_coalesced", "all_reduce", every("tensors"), tensors("tensors"))
    hook("broadcast", "broadcast", first("tensor"), tensors("tensor"))
    hook("all_gather", "all_gather", first("tensor"), tensors("tensor_list", "tensor"))
    hook("all_gather_into_tensor", "all_gather", first("input_tensor"), tensors("output_tensor", "input_tensor"))
    hook("reduce_scatter_tensor", "reduce_scatter", first("input"), tensors("output", "input"))
    for name, op in (("send", "send"), ("isend", "send"), ("recv", "recv"), ("irecv", "recv")):
        hook(name, op, first("tensor"), tensors("tensor"))
    hook("barrier", "barrier", lambda a: 0, lambda a: [])
    _hook_broadcast_coalesced()
    _hook_verify_params()


def _peer(a: dict) -> int | None:
    """The global rank at the other end of a send or recv: `dst` / `src`, or `group_dst` /
    `group_src` (a rank of `group`; batch_isend_irecv passes those)."""
    for key in ("dst", "src"):
        if a.get(key) is not None:
            return a[key]
        if a.get(f"group_{key}") is not None:
            return dist.get_global_rank(_process_group(a.get("group")), a[f"group_{key}"])
    return None


def _hook_verify_params() -> None:
    """DDP's set-up check that every rank holds the same parameter shapes
    (dist._verify_params_across_processes, C++): its collectives carry shape metadata only, a few
    bytes per parameter. They are counted as control calls of 0 bytes (no byte formula reaches
    inside the binding), so they are not flagged as unseen; the byte counts leave them out."""
    original = dist._verify_params_across_processes
    if getattr(original, "_codist_metered", False):
        return

    def wrapped(process_group, params, logger=None):
        if _active is not None:
            _active.check_device("_verify_params_across_processes", params)
        out, ran = _numbered(process_group, lambda: original(process_group, params, logger))
        for _ in range(ran or 0):
            _count("barrier", 0, process_group, None, None)   # a 0-byte call
        return out
    wrapped._codist_metered = True
    dist._verify_params_across_processes = wrapped


def _hook_broadcast_coalesced() -> None:
    """DDP syncs parameters at setup and buffers (BatchNorm statistics) before every forward with
    dist._broadcast_coalesced, a C++ binding without a Python signature: counted as one broadcast
    of all its tensors from `src` (a rank of `group`)."""
    original = dist._broadcast_coalesced
    if getattr(original, "_codist_metered", False):
        return

    def wrapped(group, tensors, buffer_size, src=0):
        # it runs one broadcast per bucket of one dtype (BatchNorm: float statistics, an int64
        # counter), each numbered by the group: take that count from the group itself
        if _active is not None:
            _active.check_device("_broadcast_coalesced", tensors)
        out, ran = _numbered(group, lambda: original(group, tensors, buffer_size, src))
        _count("broadcast", sum(tensor_bytes(t) for t in tensors), group, dist.get_global_rank(group, src), None,
               max(1, ran or 1))
        return out
    wrapped._codist_metered = True
    dist._broadcast_coalesced = wrapped


def _numbered(group, call):
    """(call()'s result, how many collectives `group` ran for it), counted by the group itself;
    None for the count where the group does not number its collectives (gloo groups do)."""
    def number():
        try:
            return _process_group(group)._get_sequence_number_for_group()
        except (AttributeError, RuntimeError):
            return None
    before = number()
    out = call()
    return out, None if before is None else number() - before


def _refuse_unmetered_deepspeed_cache() -> None:
    """DeepSpeed's torch backend (made by deepspeed.init_distributed) holds its own references to
    two collectives; made before install_hooks, they would bypass the meter: refuse that."""
    ds_comm = sys.modules.get("deepspeed.comm.comm")
    backend = getattr(ds_comm, "cdb", None)
    for attr in ("all_gather_function", "reduce_scatter_function"):
        fn = getattr(backend, attr, None)
        if fn is not None and not getattr(fn, "_codist_metered", False):
            raise RuntimeError(f"deepspeed.init_distributed ran before the communication meter's hooks: DeepSpeed's "
                               f"{attr} ({fn.__name__}) would go uncounted; call codist.runtime.comm.install_hooks() first "
                               f"(codist.runtime.distributed.init does)")


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
    unseen = int(totals[CATEGORIES.index("unseen"), :, 2].sum())
    if unseen:
        print(f"codist: the communication meter did not see {unseen} collective call(s) (summed over ranks): "
              f"the byte counts leave them out (comm.unseen_collectives_all_ranks)", file=sys.stderr)
    return {
        "training_sent_bytes_all_ranks": total,
        "training_sent_bytes_per_rank_per_update": total / world_size / updates,
        "between_group_sent_bytes_per_rank_per_update": between / world_size / updates,
        "unseen_collectives_all_ranks": unseen,
        "by_category": by_cat,
    }
