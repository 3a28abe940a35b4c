"""One run: its config file (fixed by its id), its data prepared where a job of its own does that
(an LM on text: `lm_data`), then `codist run` on it.

A run declared by several figures has one id, hence one config file and one output
directory: it trains once. The config text is a param, so a changed launch section (not
part of the id) rewrites the file and retrains; a key added to the config later is written only
away from its default (codist.config.TEXT_UNLESS), so adding one retrains nothing. Cheap rules use `shell:` (printf), not
`run:`: Snakemake spawns each `run:` job as a process that re-parses the workflow, which
imports torch through codist.config (seconds per job).
"""


rule run_config:
    """The resolved config of one run, as the file `codist run` reads (written atomically)."""
    output:
        f"{RESULTS}/{{scale}}/configs/{{run_id}}.yaml",
    log:
        f"{RESULTS}/{{scale}}/logs/configs/{{run_id}}.log",
    params:
        text=lambda wc: PLAN.config_text(wc.run_id),
    conda: CONDA_ENV
    localrule: True
    shell:
        "(printf '%s' {params.text:q} > {output:q}.tmp && mv {output:q}.tmp {output:q}) 2> {log:q}"


rule lm_data:
    """An LM's text tokenised, and its SentencePiece model trained, into workload.cache_dir (shared by
    every run of the same shards and tokenizer: the first job builds it under a lock, the others find
    it) before the run's job, on CPUs: the ranks only read the cache."""
    input:
        config=f"{RESULTS}/{{scale}}/configs/{{run_id}}.yaml",
    output:
        touch(f"{RESULTS}/{{scale}}/lm_data/{{run_id}}.done"),
    log:
        f"{RESULTS}/{{scale}}/logs/lm_data/{{run_id}}.log",
    params:
        python=PYTHON,
    threads: 8   # SentencePiece's training threads (lm_data.SPM_SETTINGS); capped at the cores given
    resources:
        # a SLURM job's CPUs are its cpus_per_task (the slurm profile's default, 1, would override
        # the threads); memory and time limit from the corpus; the partition is the profile's
        # (set-resources lm_data: slurm_partition), a CPU one: nothing here uses a GPU
        cpus_per_task=lambda wc, threads: threads,
        mem_mb=lambda wc: PLAN.data_resources(wc.run_id)["mem_mb"],
        runtime=lambda wc: PLAN.data_resources(wc.run_id)["runtime"],
    conda: CONDA_ENV
    shell:
        "{params.python:q} -m codist.cli data prepare --config {input.config:q} > {log:q} 2>&1"


# The train job's command. A diverged run (exit 4) fails for good: a retry (the slurm profile's retries,
# meant for preemption and time limits, exit 3) would resume from its checkpoint and diverge again, so a
# retry finding RUN/.diverged from an earlier attempt stops at once; a new Snakemake invocation (attempt 1)
# trains. With `--config ledger=keep|commit` (workflows/run_ledger.py) the ledger's copy of the run is
# restored instead, and a run that finishes is copied there (and committed); off, the command is the plain
# one, so the default leaves Snakemake's record of the rule's code as it was.
_TRAIN = ("if [ {resources.attempt} -gt 1 ] && [ -e {params.out:q}/.diverged ]; then"
          " echo 'codist: this run diverged on an earlier attempt (exit 4); not retried' >> {log:q}; exit 4; fi;"
          " rm -f {params.out:q}/.diverged;"
          " {params.python:q} -m codist.cli run {input.config:q} --out {params.out:q}"
          " --set launch.threads_per_rank={params.threads_per_rank} > {log:q} 2>&1"
          " || {{ rc=$?; if [ $rc -eq 4 ]; then touch {params.out:q}/.diverged; fi; exit $rc; }}")
if CONFIG.ledger == "off":
    TRAIN_SHELL, LEDGER_PARAMS = _TRAIN, {}
else:   # runs whose models another run reads (two-phase teachers) are neither kept nor restored: models never are
    from workflows.run_ledger import RESTORED
    _TEACHERS = {u for rid in PLAN.configs for u in PLAN.upstream(rid)}
    LEDGER_PARAMS = {"teacher": lambda wc: int(wc.run_id in _TEACHERS)}
    _LEDGER = "{params.python:q} %s ACTION --run {wildcards.run_id} --out {params.out:q} --ledger %s" % (
        shlex.quote(str(Path(workflow.basedir) / "workflows" / "run_ledger.py")),
        shlex.quote(CONFIG.ledger_dir or str(Path(workflow.basedir) / "results" / SCALE / "ledger")))
    _SAVE = " ".join([_LEDGER.replace("ACTION", "save", 1), "--teacher {params.teacher}",
                      "--commit" if CONFIG.ledger == "commit" else ""])
    TRAIN_SHELL = "; ".join([
        # a teacher is never restored either: the ledger holds no models, and its student reads them
        "if [ {params.teacher} -eq 0 ] && %s > {log:q} 2>&1; then exit 0; fi" % _LEDGER.replace("ACTION", "restore", 1),
        # training over an earlier restore (the run became a teacher): its marker would misname the new run
        "rm -f {params.out:q}/%s" % RESTORED,
        _TRAIN.replace("> {log:q} 2>&1", ">> {log:q} 2>&1"),
        "%s >> {log:q} 2>&1 || echo 'codist ledger: run {wildcards.run_id} finished but was not kept (its log "
        "says why)' >&2" % _SAVE])


rule train:
    """All ranks of one run. threads = ranks x threads per rank, capped at the cores
    Snakemake has (a 4-rank oversubscribed run still schedules on -c2); each rank then
    gets its share of the threads granted. `ranks` is for cluster profiles."""
    input:
        config=f"{RESULTS}/{{scale}}/configs/{{run_id}}.yaml",
        # runs this one reads (a two-phase distillation's teachers) train first
        upstream=lambda wc: [f"{RESULTS}/{wc.scale}/runs/{u}/summary.json" for u in PLAN.upstream(wc.run_id)],
        prepared=prepared_data,
    output:
        summary=f"{RESULTS}/{{scale}}/runs/{{run_id}}/summary.json",
        metrics=f"{RESULTS}/{{scale}}/runs/{{run_id}}/metrics.jsonl",
        manifest=f"{RESULTS}/{{scale}}/runs/{{run_id}}/manifest.json",
    log:
        f"{RESULTS}/{{scale}}/logs/train/{{run_id}}.log",
    # wall time, peak memory and CPU time of the whole run (all ranks are children of codist run)
    benchmark:
        f"{RESULTS}/{{scale}}/logs/train/{{run_id}}.benchmark.tsv"
    threads: lambda wc: PLAN.threads(wc.run_id, workflow.cores)
    resources:
        ranks=lambda wc: PLAN.config(wc.run_id).parallel.world_size,
        # what a SLURM job asks for, derived from the run config (codist.launching.cluster.job_resources):
        # nodes x tasks_per_node srun tasks (one per rank) when mpi is set, else one task
        nodes=lambda wc: PLAN.resources(wc.run_id)["nodes"],
        tasks_per_node=lambda wc: PLAN.resources(wc.run_id)["tasks_per_node"],
        mpi=lambda wc: PLAN.resources(wc.run_id)["mpi"],
        cpus_per_task=lambda wc: PLAN.resources(wc.run_id)["cpus_per_task"],
        mem_mb=lambda wc: PLAN.resources(wc.run_id)["mem_mb"],
        runtime=lambda wc: PLAN.resources(wc.run_id)["runtime"],
        gres=lambda wc: PLAN.resources(wc.run_id)["gres"],
        attempt=lambda wc, attempt: attempt,   # (not a SLURM resource: the shell's retry check reads it)
    params:
        python=PYTHON,
        out=lambda wc, output: str(Path(output.summary).parent),
        threads_per_rank=lambda wc, threads: max(1, threads // PLAN.config(wc.run_id).parallel.world_size),
        **LEDGER_PARAMS,
    conda: CONDA_ENV
    shell:
        TRAIN_SHELL
