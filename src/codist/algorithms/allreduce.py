"""Synchronous data parallel: the DeepSpeed engine (or, with `parallel.grad_reduction: ddp`, torch DDP)
all-reduces gradients every update. The base `Algorithm` is exactly this; the class exists to give it
its name."""
from .base import Algorithm


class AllReduce(Algorithm):
    pass
