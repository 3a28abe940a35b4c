"""The process side: how `codist run` starts a run, top-down (imports nothing itself).

- `launch`: `codist run` once its config is valid: the run checked against this machine, its
  directory claimed (codist.launching.rundir), a `LaunchPlan`, the process tree picked (`pick`), started.
- `supervise`: the one supervisor every tree goes through: stop signals passed on, the hang
  watchdog, the whole tree waited for, the end mapped to one exit code and said in one line.
- `launchers`: one class per process tree behind one `Launcher` interface (deepspeed, torchrun,
  the lone rank, fork, warm) and `named`, the one place a launcher's name is read;
  `cluster`: SLURM's job resources and the srun tree (`SrunLauncher`: stop signals reach srun as SIGUSR1).
- `cuda_fit`, `inputs`: the checks before launch (the GPUs and torch's CUDA build; the data
  a config names); `rundir`: a run owns its directory (the lock, another run's files refused).
- `fork`: the fork launcher's process (imports once, forks the ranks); `warm_server` and
  `warm_client`: the same from a server that keeps the imports between runs.

What both sides share is in base modules: codist.exits (exit codes), codist.owner (who waits for
a run), codist.rank_env (the ranks' environment); what each rank runs is codist.rank.train.
"""
