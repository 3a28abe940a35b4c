"""The rank side's loop: what each rank runs once its process has started (imports nothing itself).

- `train`: the rank's entry point (`python -m codist.rank.train`) as phases: set up, resume,
  train, finish.
- `evaluation` (sharded evaluation, with `norm_stats` and `probes`), `checkpoint`, `progress`,
  `machine` (each row's throughput, MFU and peak memory): what the loop calls.

The loop calls the plug-ins, the strategies (codist.algorithms) and the models and data
(codist.workloads), which never import it; what both build on (process groups, engines,
optimizers, precision, batches, the communication meter, the heartbeat) is codist.runtime, below
them. The plug-ins' torch-free configs belong to the config layer (docs/architecture.md, "Layers").
"""
