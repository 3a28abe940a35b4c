"""What a rank's training runs on, below both the loop (codist.rank) and its plug-ins
(codist.algorithms, codist.workloads), which import it; it imports neither (imports nothing itself).

- `distributed` (process groups, srun tasks' variables), `engine` (DeepSpeed engines), `optim`,
  `precision`, `cuda_defaults`: what set-up builds and the strategies step.
- `data`: per-rank batch streams and evaluation batches, which the workloads serve and the loop
  and strategies move to the device.
- `comm` (the communication meter every collective goes through), `heartbeat` (what the hang
  watchdog reads; the data readers report their progress to it).
"""
