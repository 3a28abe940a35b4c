"""The rank side: what each rank runs once its process has started (imports nothing itself).

- `train`: the rank's entry point (`python -m codist.rank.train`) as phases: set up, resume,
  train, finish.
- `distributed` (process groups, srun tasks' variables), `engine` (DeepSpeed engines),
  `optim`, `precision`, `cuda_defaults`: what set-up builds.
- `data` (per-rank batches), `evaluation` (sharded evaluation), `checkpoint`,
  `probes`: what the loop and the algorithms call.
- `comm` (the communication meter), `heartbeat` (what the hang watchdog reads), `progress`.

The strategies (codist.algorithms) and the models and data (codist.workloads) also run here;
their torch-free configs belong to the config layer (docs/architecture.md, "Layers").
"""
