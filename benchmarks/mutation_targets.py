"""What `make mutation` mutates and which tests judge each mutant (benchmarks/mutation.py reads it).

Each module is run against the test files that cover it, not the whole suite: a mutant of
analysis/stats.py is judged by the tests that call stats, in seconds. The order is the order of
measurement: the analysis modules first (their tests take seconds), with the benchmarks' and
src/codist's whose tests train nothing (the input and data checks), then src/codist's (their tests
train real runs: minutes a mutant), so a run cut short has measured the cheap ones.

`functions`: mutate only these top-level functions (the module's decision code).
`k`: a pytest -k expression (the tests of those files that reach the module).
`marks`: a pytest -m expression for that module's tests (the slow resume and geometry runs are
left to the modules whose behaviour only they reach).
"""
from __future__ import annotations

# module (relative to the checkout) -> test files (relative to tests/), pytest -m expression
TARGETS: dict[str, dict] = {
    # the statistics every claim uses: the survivors of the run at 220f478 (issue 52) on scipy's t and noncentral t
    # (test_stats_survivors, seconds, first), the verdict rules and the claims table, the power column and the
    # underpowered rule by hand (test_power_rule: power, seeds_for_power, detectable) and one sequential look's
    # bounds (at_confidence), not test_sequential's workflow and git-history tests
    "analysis/stats.py": {"tests": ["test_stats_survivors.py", "test_decision_rules.py", "test_claims.py",
                                    "test_power_rule.py",
                                    "test_sequential.py::test_each_look_is_at_one_minus_alpha_over_the_looks"]},
    "analysis/claims.py": {"tests": ["test_claims.py", "test_claims_summary.py", "test_decision_rules.py",
                                     # the design columns need a git history: this test's throw-away repository
                                     "test_preregistration.py::test_the_claims_table_carries_the_design_columns"],
                           # the decision code; the markdown rendering below it is compared byte for byte
                           # with the committed claims.md by test_claims_summary.py, not mutated here
                           "functions": ["effects", "offset_steps", "deterministic_verdict", "val_floor", "judge",
                                         "evaluate", "verdict_kind"]},
    # every regime quantity and the check rule on hand-made tables; the survivors of the run at ebf9cc2 first
    "analysis/regime.py": {"tests": ["test_regime_survivors.py", "test_regime.py", "test_decision_rules.py",
                                     "test_claims.py", "test_claims_summary.py"]},
    "analysis/comm_identity.py": {"tests": ["test_comm_identity_contract.py", "test_regime.py", "test_claims_summary.py"],
                                  "k": "identit or claims"},
    # make replicate's comparison (issue 42 s.3): its tests on small tables in the real formats (seconds); the
    # machine-record test there reaches codist.runlog, not compare.py
    "workflows/compare.py": {"tests": ["test_compare.py"], "k": "not records_the_machine"},
    # a sequential claim's looks and its state file (issue 42 s.3): small tables and a throw-away git history
    "analysis/sequential.py": {"tests": ["test_sequential.py"]},
    # each claim's design commit and its post-results changes, from a throw-away git repository, then the real
    # papers' history (the private copy is a git clone); a sequential claim's looks and continued seeds as design
    "analysis/preregistration.py": {"tests": ["test_preregistration.py",
                                              "test_sequential.py::test_the_looks_and_the_seeds_they_add_are_part_of_the_design",
                                              "test_sequential.py::test_declaring_looks_after_results_is_a_design_change_to_declare"]},
    # runs -> the per-figure tables (mean over seeds, reached k of n, the headline model's step_to_target)
    "analysis/aggregate.py": {"tests": ["test_analysis.py"]},
    # the experiments.yaml schema (issue 52, mutant S03 and the survivors of the partial run at 645b0d6): each bad
    # value's exact line, the values at each rule's edge and check_references' lines (test_schema_survivors, a
    # few seconds, first), every regime quantity on hand-made tables (test_regime), the claims and their YAML
    # errors, CostRuns' defaults and bounds (test_regime_cost), the committed papers' thresholds parsed
    # (test_regime_thresholds); then one bad sequential declaration and one typo in a paper-tier claim (the plan's
    # own validation), not those files' workflow and repeat-run tests
    "analysis/schema.py": {"tests": ["test_schema_survivors.py", "test_regime.py", "test_claims.py",
                                     "test_regime_cost.py", "test_regime_thresholds.py",
                                     "test_sequential.py::test_a_bad_declaration_is_one_line_naming_the_file_the_claim_and_the_key",
                                     "test_tiers_seeds.py::test_a_typo_in_a_paper_tier_claim_still_fails_the_paper_tier_plan"]},
    # what an untested claim's regime costs (issue 52, mutants P01-P09): the pricing rules on hand-made rates and a
    # one-paper replications folder (~10 s), then the committed regime_cost.csv rebuilt cell for cell and the
    # claims' column from it (~12 s)
    "benchmarks/regime_cost.py": {"tests": ["test_regime_cost.py", "test_regime_cost_rebuild.py"]},
    # the quiet-machine rule every benchmark's rows pass (a timing under load is never written), the replacement of
    # a table's measured rows and write_quiet's exit code; `functions`: run (launches a real run: only the
    # benchmarks reach it), preset, loadavg and write_csv are plumbing, and QUIET_LOAD (a constant, outside any
    # function) is left out with them; -k: those files' other tests do not reach benchlib
    "benchmarks/benchlib.py": {"tests": ["test_efficiency.py", "test_exit_codes_on_failure.py", "test_regime_cost.py"],
                               "functions": ["quiet", "refuse_loaded", "replace_rows", "write_quiet"],
                               "k": "refuse or under_load or levers or refused or quiet"},
    # `codist data check` on hand-made data sets of every layout (test_datacheck, ~20 s, first), under a data root,
    # and `codist data prepare`'s exit code; -k: the other tests of those files do not reach datacheck
    "src/codist/datacheck.py": {"tests": ["test_datacheck.py", "test_data_root.py", "test_exit_codes_on_failure.py"],
                                "marks": "not slow",
                                "k": "not (test_data_root or test_exit_codes_on_failure) or input_checks or prepare"},
    # the input checks before any process starts: every missing, unreadable or damaged path named (test_inputs,
    # seconds, first), a batch larger than an embedded training set or a translation's pairs refused, the data
    # root; -k: test_bad_inputs' and test_data_root's other tests do not reach inputs.py (some train)
    "src/codist/launching/inputs.py": {"tests": ["test_inputs.py", "test_bad_inputs.py", "test_data_root.py"],
                                       "marks": "not slow",
                                       "k": "not (test_bad_inputs or test_data_root) or batch_larger or translation_batch "
                                            "or input_checks"},
    "src/codist/algorithms/distillation_loss.py": {"tests": ["test_distill.py"]},
    "src/codist/runtime/optim.py": {"tests": ["test_schedule.py"]},
    # the byte formulas at p = 3, 4, every hook, unseen calls and the summary on one forked 4-rank world
    # (test_comm_accounting, ~4 s of CPU) first, so most mutants stop there (-x); then test_comm (2-rank
    # formulas, DeepSpeed's cache refused; its slow DeepSpeed-logger run left out). The device check on two
    # spawned ranks (test_device_collectives, 18 s: what a survivor costs, doubled) judges the survivors'
    # rerun only (tests are only ever added between a run and its survivors' rerun)
    "src/codist/runtime/comm.py": {"tests": ["test_comm_accounting.py", "test_comm.py", "test_device_collectives.py"],
                                "marks": "not slow"},
    # test_fault_tolerance.py is all slow (deselected: it judged nothing here); the not-slow tests that reach
    # checkpoint.py: its contract on real files (3 s, first: most mutants stop there), resume agreement
    # (agreed_step over 2 ranks, load, a real 2-rank run's save/resume, 16 s) and the rank RNG (1 s)
    "src/codist/rank/checkpoint.py": {"tests": ["test_checkpoint_contract.py", "test_resume_agreement.py",
                                                "test_rank_rng.py"], "marks": "not slow"},
    # every update's loss by hand on a forked 3 x 2-rank world, both topologies and exchanges (test_codistill_steps,
    # ~15 s: first, so most mutants stop there), stale teachers (2 spawned ranks), resume of a real run; the
    # real runs at the papers' geometries (test_geometries' 3 x 2 and ring of 4, test_algorithms' closed forms:
    # minutes) judge the survivors' rerun only
    "src/codist/algorithms/codistill.py": {"tests": ["test_codistill_steps.py", "test_codistill_teachers.py",
                                                     "test_resume_every_algorithm.py"], "k": "codistill"},
    # who builds and scores G on a forked 2 x 2-rank world (test_global_model_ranks, ~8 s) first; then the tests
    # whose runs train MA-DNN (each launch ~8-15 s): 2-model closed forms and torch's PeriodicModelAverager
    # (test_algorithms), 4 models over groups (test_geometries), resume; not the others' runs
    "src/codist/algorithms/model_average.py": {"tests": ["test_global_model_ranks.py", "test_algorithms.py",
                                                         "test_geometries.py", "test_resume_every_algorithm.py"],
                                               "k": "model_average"},
    # who scores G (forked world) and EC-DNN on the LM's 3-D logits (forked, ~7 s each); then the tests whose
    # runs train EC-DNN (each launch ~15 s): the 2-model closed forms and compression (test_algorithms), 4
    # models tempered (test_geometries), resume (test_resume_every_algorithm); the other algorithms' runs in
    # those files do not reach it
    "src/codist/algorithms/ensemble_compress.py": {"tests": ["test_global_model_ranks.py", "test_ec_dnn_lm.py",
                                                             "test_ec_dnn_equivalences.py", "test_algorithms.py",
                                                             "test_geometries.py", "test_resume_every_algorithm.py"],
                                                   "k": "(ec_dnn or compression or ensemble_compress) and not powersgd"},
    # the loss of every update by hand and the teacher-file errors on one forked rank (~7 s) first; then the real
    # student runs (test_two_phase) and the distill resume; -k: the resume file's other runs do not reach it
    "src/codist/algorithms/two_phase.py": {"tests": ["test_single_model_losses.py", "test_two_phase.py",
                                                     "test_resume_every_algorithm.py"],
                                           "k": "(two_phase or teacher or distill) and not codistill"},
    # both priors' losses by hand on one forked rank first; then the real run's first update and the resume
    "src/codist/algorithms/label_smoothing.py": {"tests": ["test_single_model_losses.py", "test_algorithms.py",
                                                           "test_resume_every_algorithm.py"], "k": "label_smoothing"},
    # who scores the ensemble (forked world) first; then the real run's row by hand and the resume
    "src/codist/algorithms/ensemble.py": {"tests": ["test_global_model_ranks.py", "test_algorithms.py",
                                                    "test_resume_every_algorithm.py"],
                                          "k": "ensemble and not ec_dnn and not ensemble_compress and not compression"},
    # what is exchanged (flat states, BatchNorm statistics, frozen copies, the output ensemble): frozen teachers and
    # the ensemble's underflow (test_algorithm_state, no world; added for the survivors' rerun), EC-DNN on the LM's
    # 3-D logits and codistillation's every update by hand (forked, seconds) first, then who scores G and its row
    # (forked), then a group's statistics averaged and resumed (test_bn_sync: 4 spawned ranks and a real run)
    "src/codist/algorithms/state.py": {"tests": ["test_algorithm_state.py", "test_ec_dnn_lm.py", "test_codistill_steps.py",
                                                 "test_global_model_ranks.py", "test_bn_sync.py"]},
    # the outer step by hand and against torch's SGD (seconds), who builds and scores G (forked world), then the
    # real runs: lr 1 / mu 0 as model averaging, the resumed outer momentum, the resume of every algorithm;
    # test_averaging_rounds (a group's statistics in a round, lr > 1) joined for the survivors' rerun
    "src/codist/algorithms/diloco.py": {"tests": ["test_diloco.py", "test_averaging_rounds.py",
                                                  "test_global_model_ranks.py", "test_resume_every_algorithm.py"],
                                        "k": "diloco"},
    # the interface every algorithm runs through: its parts alone (the objective's weights, which update a group
    # gets, which groups all-reduce their BatchNorm statistics, what a rank checkpoints apart: a second, first),
    # the objective's weights and each update's loss by hand (forked
    # single ranks, then a 3 x 2 world: seconds), who evaluates which model (forked 2 x 2), each model's
    # seed and the global RNG (test_rank_rng), a group's BatchNorm statistics (spawned ranks and a real run), the
    # one-rank update against the engine's, fp16's loss scale checkpointed, the init-distance probe, then the
    # resume of every algorithm (the checkpoint states)
    "src/codist/algorithms/base.py": {"tests": ["test_algorithm_base_parts.py", "test_single_model_losses.py",
                                                "test_codistill_steps.py",
                                                "test_global_model_ranks.py", "test_rank_rng.py", "test_bn_sync.py",
                                                "test_local_update.py", "test_precision.py", "test_train_phases.py",
                                                "test_resume_every_algorithm.py"]},
    # the update mechanics: the one-rank update bit for bit against the engine's, clipping included (first), the
    # losses by hand through it (forked), fp16's scaled step, then DDP's update under PowerSGD and post-local SGD
    # (their gloo runs and closed-form bytes; -k: test_algorithms' other runs do not reach DDPUpdate)
    # the DDP parts driven in a forked 2-rank world (issue 52: the clip's group average, whose norm statistics a
    # forward leaves, a relayout keeping the ranks' parameters; seconds, first) and the DDP option's bucketed
    # reduction (test_overlap_update's forked test: its real runs are slow), then LocalUpdate and the baselines
    "src/codist/algorithms/updates.py": {"tests": ["test_ddp_update_parts.py", "test_overlap_update.py",
                                                   "test_local_update.py", "test_single_model_losses.py",
                                                   "test_precision.py", "test_powersgd_gloo.py", "test_algorithms.py"],
                                         "k": "not test_algorithms or powersgd or post_local or unseen"},
    # PowerSGD's and post-local SGD's own tests: the residuals per rank and on the run's device, the one gloo
    # bucket and the rebuilt layout a resumed DDP is given (seconds each), their bytes' closed forms, the resume
    # of both to the uninterrupted run's rows and weights
    "src/codist/algorithms/ddp_baselines.py": {"tests": ["test_post_local_sgd_init.py", "test_powersgd_checkpoint.py",
                                                         "test_powersgd_gloo.py", "test_algorithms.py", "test_resume_every_algorithm.py"],
                                               "k": "powersgd or post_local or unseen or saved_bucket"},
    # a 2-rank model evaluated as saved (the group's BatchNorm statistics, each rank's own lent back): only real
    # 2-rank runs reach it (test_evaluation_norm_stats, all slow: its own test, first), then a group's statistics
    # averaged and resumed (test_bn_sync: spawned ranks and a real run); minutes a mutant, so last
    # the lending on its own in a forked world of 2 models x 2 ranks and its no-op cases (seconds, first: issue
    # 52, the multi-model path), then real runs' last rows against their saved models, and the group's mean
    "src/codist/rank/norm_stats.py": {"tests": ["test_norm_stats_lending.py", "test_evaluation_norm_stats.py",
                                                "test_bn_sync.py"]},
}

# cosmic-ray's operators left out (regular expressions matched at the start of the operator's name).
# Kept: + and - into each other, * and / into each other; comparisons into their boundary twin
# (< <=, > >=) and their negation (< >=, == !=, is / is not); unary minus and not dropped; and/or,
# True/False, numbers +/- 1, zero-iteration loops, exception types, removed decorators,
# break/continue, an added not. Left out: the other arithmetic swaps (+ into * or /: a mutant that
# - into + already exercises), bitwise, shift, ** and % targets, comparisons turned into 'is' or an
# unrelated order, ~ and unary +, and the variable replacer/inserter (random names). On this
# 2-core machine a mutant of an analysis module costs 5-30 s, so the set is kept to these.
EXCLUDE_OPERATORS = [
    r"core/ReplaceBinaryOperator_\w+_(Pow|Mod|FloorDiv|RShift|LShift|BitOr|BitAnd|BitXor)$",
    r"core/ReplaceBinaryOperator_(Add|Sub)_(Mul|Div)$", r"core/ReplaceBinaryOperator_(Mul|Div)_(Add|Sub)$",
    r"core/ReplaceBinaryOperator_(Pow|Mod|FloorDiv|RShift|LShift|BitOr|BitAnd|BitXor)_\w+$",
    r"core/ReplaceComparisonOperator_(Eq|NotEq|Lt|LtE|Gt|GtE)_(Is|IsNot)$",
    r"core/ReplaceComparisonOperator_(Is|IsNot)_(Eq|NotEq|Lt|LtE|Gt|GtE)$",
    r"core/ReplaceComparisonOperator_(Eq|NotEq)_(Lt|LtE|Gt|GtE)$",
    r"core/ReplaceComparisonOperator_(Lt|LtE|Gt|GtE)_(Eq|NotEq)$",
    r"core/ReplaceComparisonOperator_Lt_Gt$", r"core/ReplaceComparisonOperator_Gt_Lt$",
    r"core/ReplaceComparisonOperator_LtE_GtE$", r"core/ReplaceComparisonOperator_GtE_LtE$",
    r"core/ReplaceUnaryOperator_\w*(Invert|UAdd)\w*$", r"core/ReplaceUnaryOperator_USub_Not$",
    r"core/VariableReplacer", r"core/VariableInserter",
]

# third-party modules the fork server (benchmarks/mutation_server.py) imports once; never the project's
PRELOAD = ["numpy", "pandas", "scipy.stats", "yaml", "pytest", "torch", "matplotlib.pyplot"]
