# Two commands on a fresh Linux x86_64 machine with Python 3.11 + pip (the lock's platform: any
# other stops with one line from env/check_platform.sh before pip starts):
#   make replicate   # venv + pinned deps, then the default replication (embedded scale)
#   make test        # venv + pinned deps, then the test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Snakemake cores for `make replicate`: the machine's cores, never more. The embedded runs use
# the warm launcher (start-up ~0.5 s, not the ~5 s of imports that once made two jobs per core
# worth it), so a rank alive always has a core of its own.
CORES  ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: install lock test test-fast test-slurm replicate verify figures dry-run bench clean-results budget gpu-check gpu-anil

# env/install.sh is the install of every documented route (the lock, then fairseq-fixed without
# build isolation, then codist, then Fashion-MNIST's Debian package where apt is: env/install_data.sh);
# make runs it in a fresh venv. CUDA=12: torch's CUDA 12 build for NVIDIA drivers older than 580
# and Volta GPUs (env/requirements-cu12.txt; docs/full-scale.md).
$(STAMP): env/install.sh env/install_data.sh env/check_platform.sh env/requirements.lock env/requirements-fairseq.txt pyproject.toml
	sh env/check_platform.sh $(PYTHON)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	PIP_QUIET=1 CUDA=$(CUDA) sh env/install.sh $(BIN)/python
	touch $(STAMP)

install: $(STAMP)

# env/requirements.lock from env/requirements*.txt, at the versions installed in .venv (so the lock
# is the tested environment; edit a pin, install it, then `make lock`). Needs uv (`pip install uv`).
# Resolves for this platform (Linux x86_64, Python 3.11); fairseq-fixed's metadata is built with
# .venv's torch, and fairseq-fixed itself is left out (env/install.sh builds it after the lock).
# Then env/environment.yml is rewritten from the lock.
lock:
	$(BIN)/pip freeze --all --exclude-editable | grep -v '^fairseq-fixed==' > $(VENV)/installed.txt
	uv pip compile -q --python $(BIN)/python --constraint $(VENV)/installed.txt \
		--no-build-isolation-package fairseq-fixed --no-emit-package fairseq-fixed \
		--custom-compile-command "make lock" --no-annotate \
		env/requirements.txt env/requirements-build.txt env/requirements-fairseq.txt -o env/requirements.lock
	$(BIN)/python env/conda_env.py   # env/environment.yml: the lock's pins inline

# Two pytest-xdist workers, a test file per worker at a time (a file's module fixtures, its second
# user, its warm servers stay in one process): in one process the quiet suite took 657 s at a load
# average of about 1.3 on 2 cores, a core idle about a third of the time. XDIST= runs it in one process.
XDIST ?= -n 2 --dist loadfile
test: $(STAMP)
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/python -m pytest -q $(XDIST)

test-fast: $(STAMP)
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/python -m pytest -q $(XDIST) -m "not slow"

# The cluster path on a live scheduler: a throw-away two-node SLURM cluster (tests/slurm/cluster.py:
# slurm-wlm and munge from apt if missing; each slurmd in network and UTS namespaces of its own on a
# bridge; config, state and logs in a temp dir; daemons stopped by pid, namespaces deleted at the
# end), then the tests marked slurm (one node: tests/test_slurm.py; across both nodes:
# tests/test_slurm_two_nodes.py; the full-scale rehearsal's CI subset through the slurm profile,
# one run of each workload and algorithm family: tests/test_slurm_rehearsal.py, ~600 CPU s).
# Needs root (apt, the daemons, the namespaces).
test-slurm: $(STAMP)
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/python tests/slurm/cluster.py run -- \
		$(BIN)/python -m pytest -q -m slurm tests/test_slurm.py tests/test_slurm_two_nodes.py \
		tests/test_slurm_rehearsal.py

# Your replication: its results go to $(RESULTS) (default results-local/, git-ignored), never over
# the committed reference results/; a fresh clone has no results-local/, so every run of the default
# tier trains (Snakemake then reuses what is up to date there; FRESH=1 retrains everything). It ends
# with workflows/compare.py: every table and claim beside the reference's (bit-identical, within seed
# noise, different, not run in this tier), written to $(RESULTS)/embedded/comparison.md. TARGETS="sun2016/cifar10.csv ..."
# (relative to $(RESULTS)/embedded/) makes only those. RESULTS=results regenerates the reference.
# TIER=paper adds the paper-tier figures (--config tier=paper), TIER=decisive the decisive tier's (the pilots
# and the runs that decide whether a verdict is an artefact of the stand-in), TIER=real the real tier's (Sodhani's
# designs on Fashion-MNIST and their pilots), TIER=real-sun Sun's on Fashion-MNIST, TIER=real-sun-k8 Sun's K = 8 there, TIER=anil Anil's Fig. 1a and 2a where sync has saturated, TIER=anil-ablations the rest of Anil's LM design there (with anil's figures, restored with LEDGER=keep), each without the others' (the tiers: analysis/schema.py TIERS). SEEDS=N adds N to every seed list
# (--config seed_offset=N: fresh seeds, new run ids, into results-seeds+N; the claims say so). LEDGER=keep restores
# the runs results/embedded/ledger holds instead of training them and keeps each run that finishes there,
# LEDGER=commit also commits each (workflows/run_ledger.py: a long tier resumes on another machine); LEDGER_DIR=
# puts the ledger elsewhere (a tier run from a git worktree commits its runs into the main checkout's).
RESULTS ?= $(if $(SEEDS),results-seeds+$(SEEDS),results-local)
replicate: $(STAMP)
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/snakemake $(addprefix $(RESULTS)/embedded/,$(TARGETS)) \
		--profile env/profiles/local --cores $(CORES) $(if $(FRESH),--forceall) --config results=$(RESULTS) \
		$(if $(TIER),tier=$(TIER)) $(if $(SEEDS),seed_offset=$(SEEDS)) $(if $(LEDGER),ledger=$(LEDGER)) \
		$(if $(LEDGER_DIR),ledger_dir=$(abspath $(LEDGER_DIR)))
	$(BIN)/python workflows/compare.py --results $(RESULTS) --reference results

# Claims with a pre-registered sequential design (`sequential: {looks: [...]}`, analysis/sequential.py):
# make replicate, then again while a claim's look is inconclusive and its next look's seeds are not yet
# in $(RESULTS) (each pass continues those figures' seeds from $(RESULTS)/embedded/<paper>/sequential.csv);
# it stops with an error when a pass adds none of the seeds asked (a figure of another tier: TIER=<its tier>), a
# claim asks for seeds its figure already holds, or 20 more passes did not end it.
.PHONY: replicate-sequential
replicate-sequential: $(STAMP)
	$(BIN)/python analysis/sequential.py repeat $(RESULTS)/embedded -- $(MAKE) --no-print-directory replicate

# Regenerates the replication in a temporary folder and compares every committed table with it:
# fails unless every non-timing column is bit-identical (and says, per table, whether a difference
# is within seed noise); TARGETS="sun2016/cifar10.csv ..." checks only those; TIER=paper (or decisive) for a
# table of that tier.
verify: $(STAMP)
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/python workflows/verify.py --cores $(CORES) $(if $(TIER),--tier $(TIER)) $(TARGETS)

# Every figure and claims table redrawn from the tables under $(FROM)/embedded/ (default the committed
# results/), without training (workflows/figures.py: only the rules that draw from tables run).
FROM ?= results
figures: $(STAMP)
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/python workflows/figures.py --results $(FROM) --cores $(CORES)

dry-run: $(STAMP)
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/snakemake --profile env/profiles/local -n

bench: $(STAMP)
	$(BIN)/python benchmarks/harness_overhead.py

# Mutation score of the modules that decide published numbers (benchmarks/mutation.py; not in CI:
# hours on 2 cores). cosmic-ray runs from its own environment, .venv/cosmic-ray, pinned by
# env/requirements-mutation.txt (a tool, kept out of the lock). MODULES="analysis/stats.py ..."
# measures only those; SURVIVORS=1 skips what the last run killed: its survivors run again (after adding
# tests), and the mutants a partial run did not reach.
.PHONY: mutation
$(VENV)/cosmic-ray/bin/cosmic-ray: env/requirements-mutation.txt
	$(PYTHON) -m venv $(VENV)/cosmic-ray
	$(VENV)/cosmic-ray/bin/pip install -q -r env/requirements-mutation.txt
mutation: $(STAMP) $(VENV)/cosmic-ray/bin/cosmic-ray
	nice -n 10 $(BIN)/python benchmarks/mutation.py $(if $(MODULES),--modules $(MODULES)) $(if $(SURVIVORS),--survivors)

# GPU-hours of `--config scale=full` per figure and paper (workflows/budget.py reads the plan, src/codist/budget.py
# prices it): prints the table and rewrites the budget block of docs/full-scale.md ("What it costs") and
# results/bench/full_scale_budget.csv.
budget: $(STAMP)
	$(BIN)/python workflows/budget.py --readme docs/full-scale.md --csv results/bench/full_scale_budget.csv

# codist's own loop on the GPU (benchmarks/gpu_codist_check.py: per workload family a 2-rank
# codist run over NCCL, codistillation / EC-DNN exchanges, evaluation, stop checks, a checkpoint,
# SIGTERM and the resume; one model of one rank with a single GPU), then every full-scale model's
# tf32/bf16 throughput and peak memory on one GPU (benchmarks/gpu_check.py,
# results/bench/gpu_throughput.csv) and the NCCL checks with >= 2 GPUs, then the tests marked cuda.
# On a CPU-only machine the same script runs tiny runs on the CPU and says so (~1-2 min).
gpu-check: $(STAMP)
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/python benchmarks/gpu_codist_check.py
	$(BIN)/python -m pytest -q -m cuda tests/test_gpu_check.py

# Anil's saturated LM design on this machine's GPU (issue 50 item 4): the anil and anil-ablations tiers'
# runs (the same run ids) launched on CUDA (--config device=cuda: workflows/on_gpu.py) into $(GPU_RESULTS),
# its claims (claims_saturated.csv; machine.json names the GPU: the snakemake rule would plan every
# figure's runs), then compared with the CPU reference. Not yet run on a GPU.
GPU_RESULTS ?= results-gpu
GPU_ANIL_FIGURES = fig2a_saturated fig2a_smoothing_saturated fig2b_saturated fig4_saturated sec3_4_1_saturated
GPU_ANIL_CLAIMS = fig1-saturated fig2a-loss-saturated fig2a-steps-saturated fig2a-ensemble-saturated \
	fig2a-smoothing-saturated fig2b-saturated fig4-saturated sec3.4.1-saturated
gpu-anil: $(STAMP)
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/snakemake \
		$(foreach f,$(GPU_ANIL_FIGURES),$(GPU_RESULTS)/embedded/anil2018/$(f).png $(GPU_RESULTS)/embedded/anil2018/$(f).csv) \
		--profile env/profiles/local --cores $(CORES) --config results=$(GPU_RESULTS) tier=anil-ablations device=cuda
	$(BIN)/python workflows/machine.py --out $(GPU_RESULTS)/embedded/machine.json $(GPU_RESULTS)/embedded/runs/*/manifest.json
	$(BIN)/python analysis/claims.py --paper replications/anil2018/experiments.yaml \
		--figures $(GPU_RESULTS)/embedded/anil2018 --costs results/bench/regime_cost.csv --claims $(GPU_ANIL_CLAIMS) \
		--csv $(GPU_RESULTS)/embedded/anil2018/claims_saturated.csv --markdown $(GPU_RESULTS)/embedded/anil2018/claims_saturated.md
	$(BIN)/python workflows/compare.py --results $(GPU_RESULTS) --reference results

# The full-scale rehearsal (workflows/rehearsal.py, docs/full-scale.md "The rehearsal"): a miniature of
# every full-scale data set (codist data fake), then every run `snakemake --config scale=full` plans,
# through the same workflow with `rehearsal=true`: its full-scale model, optimizer, schedule, precision
# and algorithm on the CPU for a few updates (periods, ranks per group, per-rank batch, ImageNet's validation
# slice and the launch section shrunk, each shrink recorded), then the ledger: results/rehearsal/full/runs.local.csv
# (git-ignored, starting from the committed rows); REFERENCE=1 writes the committed runs.csv. It prints how many
# rows it measured now and how many it carried. RUNS="id ..." runs only those (the ledger still lists every planned run). Each run's time is the
# ledger's job_s (ImageNet 47-148 s a job with its validation slice, on 2 shared cores).
REHEARSAL_DATA ?= results/rehearsal/data
.PHONY: rehearse
rehearse: $(STAMP)
	$(BIN)/codist data fake --root $(REHEARSAL_DATA)
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/python workflows/rehearsal.py run --data-root $(REHEARSAL_DATA) \
		--cores $(CORES) $(if $(RUNS),--only $(RUNS)) $(if $(REFERENCE),--reference)
