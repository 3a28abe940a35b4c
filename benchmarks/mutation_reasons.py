"""Reviewed surviving mutants of `make mutation` (benchmarks/mutation.py): each is either
equivalent (no input the module can receive tells it from the real code: left out of the score)
or accepted (a real difference the tests do not catch, and why that is tolerable: kept in the
score as a survivor). Matched on module, operator and the changed line (old, new: stripped), not
on line numbers.

(module, operator, old line, new line, "equivalent" | "accepted", one-line reason)
"""
from __future__ import annotations

# stats.detectable's root search: a mutant of its bracket only
_BRACKET = ("only the bracket brentq searches moves: power - target changes sign once inside both brackets (power rises from 0 to 1 with the margin or effect), so the root is the same to brentq's tolerance (2e-12), far below the 3 digits a table prints")

# schema._where: a location of "figures" alone (figures not a mapping) under the mutant reads loc[1], whose
# IndexError the function catches, and returns the plain location as the real code does
_FIGURES_ALONE = ("loc == ['figures'] alone passes the mutant's test and then loc[1] raises IndexError, which _where "
                  "catches and answers with the plain location, as the real code does without reading loc[1]")

# regime.evaluate's settle text: its sd guard
_SD_ZERO = ("an sd of 0 gives low = high (the half-width is 0), which _state calls shown or refuted, never not "
            "established, so this branch never sees sd = 0; NaN compares false under every form of the guard")

REASONS: list[tuple[str, str, str, str, str, str]] = [
    ('analysis/stats.py', 'ReplaceBinaryOperator_Div_Mul',
     'se = sd / math.sqrt(n)',
     'se = sd * math.sqrt(n)', "equivalent",
     _BRACKET),
    ('analysis/stats.py', 'NumberReplacer',
     'return float(brentq(lambda w: power(n, sd, neutral, neutral, within=w) - target, 1e-12 * se, 1e3 * se))',
     'return float(brentq(lambda w: power(n, sd, neutral, neutral, within=w) - target, -0.999999999999 * se, 1e3 * se))', "equivalent",
     _BRACKET),
    ('analysis/stats.py', 'NumberReplacer',
     'return float(brentq(lambda w: power(n, sd, neutral, neutral, within=w) - target, 1e-12 * se, 1e3 * se))',
     'return float(brentq(lambda w: power(n, sd, neutral, neutral, within=w) - target, 1e-12 * se, 999.0 * se))', "equivalent",
     _BRACKET),
    ('analysis/stats.py', 'NumberReplacer',
     'return float(brentq(lambda d: power(n, sd, d, neutral, at_least=t) - target, t, t + 1e3 * se))',
     'return float(brentq(lambda d: power(n, sd, d, neutral, at_least=t) - target, t, t + 1001.0 * se))', "equivalent",
     _BRACKET),
    ('analysis/stats.py', 'NumberReplacer',
     'return float(brentq(lambda d: power(n, sd, d, neutral, at_least=t) - target, t, t + 1e3 * se))',
     'return float(brentq(lambda d: power(n, sd, d, neutral, at_least=t) - target, t, t + 999.0 * se))', "equivalent",
     _BRACKET),
    ("workflows/compare.py", "ReplaceOrWithAnd", "if pd.isna(nr) or pd.isna(nl):", "if pd.isna(nr) and pd.isna(nl):",
     "equivalent", "a seed count column is a fixed column of a table of means: judge_table names a count that differs "
                   "(NaN on one side only) before mean_cells runs, so here both are NaN or neither is"),
    ("benchmarks/regime_cost.py", "NumberReplacer", "r, lo = reuse_rates(levers, cpus[0])",
     "r, lo = reuse_rates(levers, cpus[ -1])", "equivalent",
     "rate_tables raises above on more than one CPU, so cpus holds one name here and its first is its last"),
    ("analysis/aggregate.py", "ReplaceFalseWithTrue", 'g = table.groupby("series", sort=False)',
     'g = table.groupby("series", sort=True)', "equivalent",
     "series_means reindexes its result by the figure's series order after the groupby, so the groupby's own order never shows"),
    ("analysis/aggregate.py", "NumberReplacer", 'metric = table["metric"].iloc[0]', 'metric = table["metric"].iloc[ -1]',
     "accepted", "every run of a figure is one workload and reports its one headline metric, so the first and the last row "
                 "name the same metric; a table mixing metrics never comes from the plan"),
    ("analysis/stats.py", "NumberReplacer",
     "half = t_quantile(n) * sd / math.sqrt(n) if n > 1 else math.nan",
     "half = t_quantile(n) * sd / math.sqrt(n) if n > 0 else math.nan", "equivalent",
     "n = 1: sd is NaN (ddof=1), so t_quantile(1) x NaN = NaN, as the else branch gives"),
    ("analysis/stats.py", "NumberReplacer", "if n < 3 or len(loo) < n:", "if n < 2 or len(loo) < n:", "equivalent",
     "2 seeds make one pair holding both, so no leave-one-out value exists: len(loo) = 0 < n gives the same NaN interval"),
    ("analysis/stats.py", "ReplaceComparisonOperator_Gt_GtE",
     "half = t_quantile(n) * sd / math.sqrt(n) if n > 1 else math.nan",
     "half = t_quantile(n) * sd / math.sqrt(n) if n >= 1 else math.nan", "equivalent",
     "n = 1: sd is NaN (ddof=1), so t_quantile(1) x NaN = NaN, as the else branch gives; n = 0 takes the else branch in both"),
    ("analysis/stats.py", "ReplaceComparisonOperator_Gt_GtE",
     "sd = float(x.std(ddof=1)) if n > 1 else math.nan", "sd = float(x.std(ddof=1)) if n >= 1 else math.nan",
     "equivalent", "n = 1: pandas' std with ddof=1 of one value is NaN, as the else branch; n = 0 takes the else branch"),
    ("analysis/stats.py", "NumberReplacer",
     "sd = float(x.std(ddof=1)) if n > 1 else math.nan", "sd = float(x.std(ddof=1)) if n > 0 else math.nan",
     "equivalent", "n = 1: pandas' std with ddof=1 of one value is NaN, as the else branch; n = 0 takes the else branch"),
    ("analysis/stats.py", "NumberReplacer",
     "frac = (target - v0) / (v1 - v0) if v1 != v0 else 1.0", "frac = (target - v0) / (v1 - v0) if v1 != v0 else 2.0",
     "equivalent", "unreachable: at the first evaluation that reaches the target the one before did not, so v1 != v0"),
    ("analysis/stats.py", "NumberReplacer",
     "frac = (target - v0) / (v1 - v0) if v1 != v0 else 1.0", "frac = (target - v0) / (v1 - v0) if v1 != v0 else 0.0",
     "equivalent", "unreachable: at the first evaluation that reaches the target the one before did not, so v1 != v0"),
    ("analysis/stats.py", "NumberReplacer",
     'return {tuple(k.split("-", 1)): v for k, v in values.items()}',
     'return {tuple(k.split("-", 2)): v for k, v in values.items()}', "equivalent",
     "pair labels are 'a-b' of two non-negative integer seeds (paper_table.py): no second dash to split at"),
    ("analysis/claims.py", "NumberReplacer",
     'text = f"{reached} of {len(r)} seeds reached {r[\'target\'].iloc[0]:.4g}" if len(r) else ""',
     'text = f"{reached} of {len(r)} seeds reached {r[\'target\'].iloc[ -1]:.4g}" if len(r) else ""', "equivalent",
     "regime.speedups computes one target level per call and writes it into every seed's row: first row = last row"),
    ("analysis/claims.py", "NumberReplacer", "return math.nan, 0.0", "return math.nan, -1.0", "equivalent",
     "the floor sd is used only in margin_needed (with -1: a negative need, below every margin >= 0, so no "
     "'underpowered') and as max(measured sd >= 0, floor): -1 acts as 0"),
    ("analysis/regime.py", "ReplaceAndWithOr", 'if name == "ctr" and ds == "criteo":',
     'if name == "ctr" or ds == "criteo":', "equivalent",
     "reached only when dataset is not 'embedded'; ctr's datasets are embedded and criteo (ctr_config.py) and no "
     "other workload's Literal has criteo, so here name == 'ctr' exactly when ds == 'criteo'"),
    ("analysis/regime.py", "NumberReplacer", "raise RegimeError(e.args[0]) from None",
     "raise RegimeError(e.args[ -1]) from None", "equivalent",
     "registry.lookup raises KeyError(message) with one argument: args[0] is args[-1]"),
    ("src/codist/rank/norm_stats.py", "RemoveDecorator", "@torch.no_grad()", "", "equivalent",
     "_to_saved touches only BatchNorm's running statistics, buffers that never require grad: no autograd graph is "
     "recorded with or without no_grad, and the values are the same"),
    ("src/codist/algorithms/updates.py", "NumberReplacer",
     "def clip_as_deepspeed(model: nn.Module, max_norm: float, group=None, ranks: int = 1) -> None:",
     "def clip_as_deepspeed(model: nn.Module, max_norm: float, group=None, ranks: int = 0) -> None:", "equivalent",
     "only LocalUpdate (a group of one rank) leaves `ranks` to its default, and 0 and 1 both skip the average"),
    ("src/codist/algorithms/updates.py", "ReplaceBinaryOperator_Mul_Div", "norm = norm * 1.0 / float(ranks)",
     "norm = norm / 1.0 / float(ranks)", "equivalent", "x * 1.0 and x / 1.0 are x exactly in floating point"),
    # schema.py (the survivors of the run at 2cb39e9 that no input tells apart)
    ("analysis/schema.py", "ReplaceTrueWithFalse", 'model_config = ConfigDict(extra="forbid", populate_by_name=True)',
     'model_config = ConfigDict(extra="forbid", populate_by_name=False)', "equivalent",
     "populate_by_name matters only for a field with an alias, and no model of schema.py declares one"),
    ("analysis/schema.py", "NumberReplacer", 'elif loc[:1] == ["figures"] and len(loc) > 1:',
     'elif loc[:1] == ["figures"] and len(loc) > 0:', "equivalent", _FIGURES_ALONE),
    ("analysis/schema.py", "ReplaceComparisonOperator_Gt_GtE", 'elif loc[:1] == ["figures"] and len(loc) > 1:',
     'elif loc[:1] == ["figures"] and len(loc) >= 1:', "equivalent", _FIGURES_ALONE),
    ("analysis/schema.py", "ReplaceAndWithOr", 'elif loc[:1] == ["figures"] and len(loc) > 1:',
     'elif loc[:1] == ["figures"] or len(loc) > 1:', "equivalent",
     "a Paper's only nested keys are figures and claims; a claims location of two or more parts has a list index, "
     "which the branch above takes (or its caught exception answers with the plain path), so no location of two or "
     "more parts reaches this test with another first key"),
    ("analysis/schema.py", "ReplaceContinueWithBreak", "continue   # a check without an `over` (the pair's last item)",
     "break   # a check without an `over` (the pair's last item)", "equivalent",
     "the loop's two items are the check (never None) and its over: a None over is the last item, so break ends the "
     "loop where continue would"),
    # regime.seeds_to_settle and evaluate's settle text (the survivors of the run at ebf9cc2)
    ("analysis/regime.py", "ReplaceOrWithAnd", "if not (sd > 0) or mean == 0 or math.isnan(mean):",
     "if not (sd > 0) or mean == 0 and math.isnan(mean):", "equivalent",
     "a NaN mean or a mean of 0 that passes the guard fails every `bound < abs(mean)` of the loop (NaN compares "
     "false, the bound is > 0), which then returns None as the guard does"),
    ("analysis/regime.py", "NumberReplacer", "for m in range(max(n, 2), MAX_SEEDS_ASKED + 1):",
     "for m in range(max(n, 1), MAX_SEEDS_ASKED + 1):", "equivalent",
     "stats.t_quantile(1) is inf, so m = 1 never clears the mean and the search goes on at 2"),
    ("analysis/regime.py", "ReplaceBinaryOperator_Mul_Div",
     'contrast = [(side, stats.t_interval(both["v"] - t * sign * both["o"])) for side, t in sides]',
     'contrast = [(side, stats.t_interval(both["v"] - t / sign * both["o"])) for side, t in sides]', "equivalent",
     "sign is 1.0 or -1.0, and t x sign equals t / sign exactly in floating point"),
    ("analysis/regime.py", "NumberReplacer",
     'if iv.sd > 0 and iv.mean != 0 else "no number of seeds would settle it: the mean sits on the bound")',
     'if iv.sd > -1 and iv.mean != 0 else "no number of seeds would settle it: the mean sits on the bound")',
     "equivalent", _SD_ZERO),
    ("analysis/regime.py", "ReplaceComparisonOperator_Gt_GtE",
     'if iv.sd > 0 and iv.mean != 0 else "no number of seeds would settle it: the mean sits on the bound")',
     'if iv.sd >= 0 and iv.mean != 0 else "no number of seeds would settle it: the mean sits on the bound")',
     "equivalent", _SD_ZERO),
    ("analysis/regime.py", "ReplaceComparisonOperator_GtE_Gt", 'sign = 1.0 if both["o"].mean() >= 0 else -1.0',
     'sign = 1.0 if both["o"].mean() > 0 else -1.0', "accepted",
     "only a measured `over` whose mean is exactly 0 tells them apart: the ratio is then NaN and neither orientation "
     "of o is the positive one, so which the contrast takes is a tie-break, not a rule a test could pin as right"),
    ("analysis/claims.py", "ReplaceOrWithAnd", "if not v or math.isnan(v):", "if not v and math.isnan(v):",
     "equivalent", "data_sizes never gives a validation size of 0 (val_size or NaN; DATA_SETS > 0; criteo's held-out "
     "lines or NaN); for NaN the mutant's floor sd is NaN: margin_needed gives a NaN need (margin < NaN is false) and "
     "max(sd, NaN) returns sd, as the floor 0 does"),
    ("src/codist/rank/checkpoint.py", "NumberReplacer",
     "NONE, FAILED = -1, -2   # what rank 0 broadcasts when there is no checkpoint, or none it can use",
     "NONE, FAILED = -1, - 3   # what rank 0 broadcasts when there is no checkpoint, or none it can use", "equivalent",
     "FAILED is only compared with the broadcast flag: any value other than NONE (-1) and every step (>= 0) acts "
     "alike, and -3 is one"),
    # a line to stderr that ends in a newline is written at once: sys.stderr is line-buffered (Python >= 3.9,
    # redirected too), so flush=True adds nothing
    *[("src/codist/rank/checkpoint.py", "ReplaceTrueWithFalse", line, line.replace("flush=True", "flush=False"),
       "equivalent", "sys.stderr is line-buffered (Python >= 3.9, also when redirected to a file): a printed line "
       "ending in a newline reaches the file at once, flushed or not")
      for line in ('f"step {entry[\'step\']} resumed unverified", file=sys.stderr, flush=True)',
                   "file=sys.stderr, flush=True)")],
    ("src/codist/rank/checkpoint.py", "NumberReplacer", 'key = e.args[0] if e.args else "key"',
     'key = e.args[ -1] if e.args else "key"', "equivalent",
     "the KeyError of a dict lookup (the algorithm reading a state key) carries one argument: args[0] is args[-1]"),
    ("analysis/comm_identity.py", "NumberReplacer", 'raise IdentityError(f"identity: {e.args[0]}") from None',
     'raise IdentityError(f"identity: {e.args[ -1]}") from None', "equivalent",
     "registry.lookup raises KeyError(message) with one argument: args[0] is args[-1]"),
    ("analysis/comm_identity.py", "NumberReplacer",
     'measured = float(table.loc[table["series"] == series, column(setting["algorithm"])].iloc[0])',
     'measured = float(table.loc[table["series"] == series, column(setting["algorithm"])].iloc[ -1])', "equivalent",
     "a series' rows are its seeds, whose bytes per rank-update are the same (the traffic follows from the config, "
     "not the seed: claims.py's 'bytes are the same on every seed'), so the first row's value is the last's"),
    ("src/codist/runtime/comm.py", "ReplaceComparisonOperator_Gt_GtE",
     "return 2 * (p - 1) * payload // p if p > 1 else 0", "return 2 * (p - 1) * payload // p if p >= 1 else 0",
     "equivalent", "p = 1: 2 x 0 x payload // 1 = 0, as the else branch; a group has at least one rank, so p >= 1"),
    ("src/codist/runtime/comm.py", "ReplaceOrWithAnd", "if sent or recv or calls:", "if sent and recv or calls:",
     "equivalent", "record adds 1 call with every byte it counts, so a row with bytes has calls >= 1: calls alone "
     "decides both conditions"),
    ("src/codist/runtime/comm.py", "NumberReplacer", 'hook("barrier", "barrier", lambda a: 0, lambda a: [])',
     'hook("barrier", "barrier", lambda a: 1, lambda a: [])', "equivalent",
     "record's barrier branch sets sent = recv = 0 whatever the payload it is given"),
    ("src/codist/runtime/comm.py", "ReplaceContinueWithBreak", "continue", "break", "accepted",
     "unseen_calls skips groups of other backends (NCCL); every process group a CPU machine can make here is gloo, "
     "so which of continue or break ends the skip cannot show; a GPU run's mixed gloo/NCCL groups would"),
    ("src/codist/runtime/comm.py", "NumberReplacer", "max(1, ran or 1))", "max(1, ran or 2))", "accepted",
     "differs only where the group ran no collective for the call (an empty tensor list, which DDP never passes) or "
     "does not number its collectives (NCCL): the group's seen count then grows by 2, not 1, which only lowers a "
     "later unseen count already clamped there; DDP's calls always run at least one numbered broadcast"),
    ("src/codist/runtime/comm.py", "NumberReplacer", "return 2 * (p - 1) * payload // p if p > 1 else 0",
     "return 2 * (p - 1) * payload // p if p > 0 else 0", "equivalent",
     "p = 1: 2 x 0 x payload // 1 = 0, as the else branch; a group has at least one rank, so p >= 1"),
    ("src/codist/runtime/comm.py", "ReplaceOrWithAnd", "if group is None or group is dist.GroupMember.WORLD:",
     "if group is None and group is dist.GroupMember.WORLD:", "equivalent",
     "get_process_group_ranks(None or WORLD) gives the world's ranks 0..n-1, which is range(len(model_of)): model_of "
     "has one entry per global rank"),
    ("src/codist/runtime/comm.py", "ReplaceAndWithOr", 'if d.type != self.device.type or (self.device.index is not None and d.index != self.device.index):',
     'if d.type != self.device.type or (self.device.index is not None or d.index != self.device.index):', *('accepted', 'CPU and meta tensors carry no device index (cpu:0 and meta:1 report none), so the index comparison can only show between indexed devices of one type (cuda:0 and cuda:1): not on a CPU machine')),
    ("src/codist/runtime/comm.py", "ReplaceComparisonOperator_IsNot_Is", 'if d.type != self.device.type or (self.device.index is not None and d.index != self.device.index):',
     'if d.type != self.device.type or (self.device.index is None and d.index != self.device.index):', *('accepted', 'CPU and meta tensors carry no device index (cpu:0 and meta:1 report none), so the index comparison can only show between indexed devices of one type (cuda:0 and cuda:1): not on a CPU machine')),
    ("src/codist/runtime/comm.py", "ReplaceComparisonOperator_NotEq_Eq", 'if d.type != self.device.type or (self.device.index is not None and d.index != self.device.index):',
     'if d.type != self.device.type or (self.device.index is not None and d.index == self.device.index):', *('accepted', 'CPU and meta tensors carry no device index (cpu:0 and meta:1 report none), so the index comparison can only show between indexed devices of one type (cuda:0 and cuda:1): not on a CPU machine')),
    ("src/codist/runtime/comm.py", "NumberReplacer",
     "unseen += max(0, group._get_sequence_number_for_group() - self.seen.get(group, 0))",
     "unseen += max( -1, group._get_sequence_number_for_group() - self.seen.get(group, 0))", "accepted",
     "differs only for a group on which the meter counted more calls than the group numbered (a counted call that "
     "raised before running, or a coalesced call that ran none): no test world has one"),
    ("src/codist/runtime/comm.py", "NumberReplacer", "_inside.depth = 1", "_inside.depth = 2", "equivalent",
     "depth is only tested for truth (getattr(_inside, 'depth', 0)): 2 is as true as 1"),
    ("src/codist/runtime/comm.py", "NumberReplacer", "for _ in range(ran or 0):", "for _ in range(ran or 1):", "accepted",
     "differs only where the group does not number its collectives (ran None: NCCL) or the check ran none: one "
     "0-byte control call more; DDP's check on gloo always runs numbered collectives"),
    ("src/codist/runtime/comm.py", "NumberReplacer", "max(1, ran or 1))", "max(1, ran or 0))", "equivalent",
     "under max(1, .) 'ran or 0' and 'ran or 1' both give 1 when ran is None or 0, and ran otherwise"),
    ("src/codist/runtime/comm.py", "NumberReplacer", "f = sys._getframe(1)", "f = sys._getframe( 2)", "equivalent",
     "_caller is called only by check_device, a frame of this module: the loop skips frame 1 anyway, so starting at "
     "frame 2 finds the same caller"),
    ("src/codist/runtime/comm.py", "NumberReplacer", 'hook("barrier", "barrier", lambda a: 0, lambda a: [])',
     'hook("barrier", "barrier", lambda a: -1, lambda a: [])', "equivalent",
     "record's barrier branch sets sent = recv = 0 whatever the payload it is given"),
    ("src/codist/runtime/comm.py", "NumberReplacer", "for _ in range(ran or 0):", "for _ in range(ran or -1):",
     "equivalent", "range(-1) is as empty as range(0)"),
    ("src/codist/runtime/comm.py", "ReplaceOrWithAnd", "if not dist.is_available() or not dist.is_initialized():",
     "if not dist.is_available() and not dist.is_initialized():", "equivalent",
     "torch.distributed is available in every torch this project runs (Linux builds); uninitialized, c10d's pg_map "
     "is empty, so the loop below also gives 0"),
    ("src/codist/runtime/comm.py", "NumberReplacer", '_count("barrier", 0, process_group, None, None)   # a 0-byte call',
     '_count("barrier", 1, process_group, None, None)   # a 0-byte call', "equivalent",
     "record's barrier branch sets sent = recv = 0 whatever the payload it is given"),
    ("src/codist/runtime/comm.py", "NumberReplacer", "f = sys._getframe(1)", "f = sys._getframe( 0)", "equivalent",
     "frame 0 is _caller itself, a frame of this module that the loop skips, as it skips check_device's"),
    ("src/codist/runtime/comm.py", "NumberReplacer", '_count("barrier", 0, process_group, None, None)   # a 0-byte call',
     '_count("barrier", -1, process_group, None, None)   # a 0-byte call', "equivalent",
     "record's barrier branch sets sent = recv = 0 whatever the payload it is given"),
    ("src/codist/runtime/comm.py", "NumberReplacer", "max(1, ran or 1))", "max( 0, ran or 1))", "equivalent",
     "'ran or 1' is at least 1 (ran is None or a count >= 0), so max(0, .) and max(1, .) both give it"),
    ("src/codist/algorithms/model_average.py", "ReplaceAndWithOr", 'if torch.is_tensor(v) and v.is_floating_point() and v.dim() > 0]',
     'if torch.is_tensor(v) or v.is_floating_point() and v.dim() > 0]', "equivalent", "the tensors it adds are the optimizers' 0-d step counters (Adam, Adagrad; SGD keeps no counter), equal on every model since all take the same updates: their mean over the models is themselves, exactly"),
    ("src/codist/algorithms/model_average.py", "ReplaceComparisonOperator_Gt_GtE", 'if torch.is_tensor(v) and v.is_floating_point() and v.dim() > 0]', 'if torch.is_tensor(v) and v.is_floating_point() and v.dim() >= 0]',
     "equivalent", "the tensors it adds are the optimizers' 0-d step counters (Adam, Adagrad; SGD keeps no counter), equal on every model since all take the same updates: their mean over the models is themselves, exactly"),
    ("src/codist/algorithms/model_average.py", "NumberReplacer", "self.rounds += 1", "self.rounds += 0", "equivalent",
     "model_average's rounds is only saved in the checkpoint and restored: nothing reads it"),
    ("src/codist/algorithms/model_average.py", "NumberReplacer", "self.rounds += 1", "self.rounds += 2", "equivalent",
     "model_average's rounds is only saved in the checkpoint and restored: nothing reads it"),
    ("src/codist/algorithms/model_average.py", "ReplaceAndWithOr", 'if torch.is_tensor(v) and v.is_floating_point() and v.dim() > 0]',
     'if torch.is_tensor(v) and v.is_floating_point() or v.dim() > 0]', "equivalent", "every state value of the optimizers the configs allow (SGD's momentum buffer; Adam's and Adagrad's step, moments, sums) is a float tensor, so integer and non-tensor values never reach the filter"),
    ("src/codist/algorithms/model_average.py", "NumberReplacer", 'if torch.is_tensor(v) and v.is_floating_point() and v.dim() > 0]', 'if torch.is_tensor(v) and v.is_floating_point() and v.dim() > -1]', "equivalent",
     "the tensors it adds are the optimizers' 0-d step counters (Adam, Adagrad; SGD keeps no counter), equal on every "
     "model since all take the same updates: their mean over the models is themselves, exactly"),
    ("src/codist/algorithms/model_average.py", "NumberReplacer", "self.rounds = 0", "self.rounds = 1", "equivalent",
     "model_average's rounds is only saved in the checkpoint and restored: nothing reads it"),
    ("src/codist/algorithms/model_average.py", "NumberReplacer", "self.rounds = 0", "self.rounds = -1", "equivalent",
     "model_average's rounds is only saved in the checkpoint and restored: nothing reads it"),
    ("src/codist/algorithms/state.py", "ReplaceTrueWithFalse",
     "def state_tensors(model: nn.Module, buffers: bool = True) -> list[torch.Tensor]:",
     "def state_tensors(model: nn.Module, buffers: bool = False) -> list[torch.Tensor]:", "equivalent",
     "state_tensors' only callers, flat_state and load_flat_state, always pass buffers on: its default is never used"),
    ("src/codist/algorithms/diloco.py", "ReplaceAndWithOr", "previous = momentum.clone() if mu and not nesterov else None",
     "previous = momentum.clone() if mu or not nesterov else None", "equivalent",
     "previous is read only under 'if mu' and only without Nesterov, where both conditions give the same clone; "
     "elsewhere the mutant's extra clone is never read"),
    ("src/codist/algorithms/diloco.py", "NumberReplacer", "if lr != 1:", "if lr != 0:", "equivalent",
     "the outer lr is > 0 (diloco_config: gt=0), so the mutant also adds (1 - lr) x delta at lr 1: 0 x delta, the "
     "same values (delta is finite: a difference of finite parameters)"),
    ("src/codist/algorithms/diloco.py", "NumberReplacer", "self.rounds = 0", "self.rounds = 1", "equivalent", "diloco's rounds is only saved in the checkpoint and restored: nothing reads it"),
    ("src/codist/algorithms/diloco.py", "NumberReplacer", "self.rounds = 0", "self.rounds = -1", "equivalent", "diloco's rounds is only saved in the checkpoint and restored: nothing reads it"),
    ("src/codist/algorithms/diloco.py", "NumberReplacer", "self.rounds += 1", "self.rounds += 2", "equivalent", "diloco's rounds is only saved in the checkpoint and restored: nothing reads it"),
    ("src/codist/algorithms/diloco.py", "NumberReplacer", "self.rounds += 1", "self.rounds += 0", "equivalent", "diloco's rounds is only saved in the checkpoint and restored: nothing reads it"),
    ("src/codist/algorithms/updates.py", "RemoveDecorator", "@torch.no_grad()", "", "equivalent",
     "LocalUpdate.clip scales the .grad tensors, which never require grad: without no_grad the same in-place "
     "products run and record no graph"),
    # rebuilt_buckets and bucket_layout: in ddp_baselines.py until issue 51 moved them to updates.py
    ("src/codist/algorithms/updates.py", 'ReplaceAndWithOr', 'if ddp._has_rebuilt_buckets and not data.get("has_rebuilt_buckets"):',
     'if ddp._has_rebuilt_buckets or not data.get("has_rebuilt_buckets"):', 'equivalent',
     "the extra case (not yet rebuilt) only refreshes DDP's logging data once more, which still reports no rebuild: [] either way"),
    ("src/codist/algorithms/updates.py", 'NumberReplacer', 'return [list(b) for b in reversed(buckets)], [limits[-1]] * len(buckets)',
     'return [list(b) for b in reversed(buckets)], [limits[- 0]] * len(buckets)', 'equivalent',
     "the per-bucket limits only label the given buckets (the layout is given, the rebuild uses its own limits); on gloo PowerSGD's two limits are equal"),
    ("src/codist/algorithms/ddp_baselines.py", 'NumberReplacer', 'return {"bucket_cap_mb": grad_bytes / 2**20 + 1}',
     'return {"bucket_cap_mb": grad_bytes / 1**20 + 1}', 'equivalent',
     "a cap above the model's gradient bytes still holds the whole model in one bucket"),
    ("src/codist/algorithms/ddp_baselines.py", 'NumberReplacer', 'return {"bucket_cap_mb": grad_bytes / 2**20 + 1}',
     'return {"bucket_cap_mb": grad_bytes / 2** 19 + 1}', 'equivalent',
     "a cap above the model's gradient bytes still holds the whole model in one bucket"),
    ("src/codist/algorithms/ddp_baselines.py", 'NumberReplacer', 'return {"bucket_cap_mb": grad_bytes / 2**20 + 1}',
     'return {"bucket_cap_mb": grad_bytes / 2**20 + 2}', 'equivalent',
     "a cap above the model's gradient bytes still holds the whole model in one bucket"),
    ("src/codist/algorithms/ddp_baselines.py", 'ReplaceBinaryOperator_Div_Mul', 'return {"bucket_cap_mb": grad_bytes / 2**20 + 1}',
     'return {"bucket_cap_mb": grad_bytes * 2**20 + 1}', 'equivalent',
     "a cap above the model's gradient bytes still holds the whole model in one bucket"),
    ("src/codist/algorithms/ddp_baselines.py", 'NumberReplacer', 'return {"bucket_cap_mb": grad_bytes / 2**20 + 1}',
     'return {"bucket_cap_mb": grad_bytes / 2**20 + 0}', 'equivalent',
     "a cap of exactly the model's gradient bytes: DDP closes a bucket when it reaches its cap, at the last parameter, so still one bucket (test_powersgd_gloo at 4.5 MiB: checked by hand)"),
    ("src/codist/algorithms/base.py", 'RemoveDecorator', '@torch.no_grad()', '', 'equivalent',
     'initial_parameters detaches and clones every parameter (building a model records no graph); '
     'sync_norm_statistics touches only BatchNorm buffers, which never require grad: no graph either way'),
    ("workflows/compare.py", "ReplaceComparisonOperator_Gt_GtE", "if abs(ml - mr) > half:",
     "if abs(ml - mr) >= half:", "equivalent",
     "a difference exactly at the half-width (a t quantile times a root, > 0: cells with no spread never reach it) "
     "has no input that hits it; the tests pin the rule at 0.99x / 1.01x of it"),
    ("workflows/compare.py", "NumberReplacer", "for digits in range(4, 18):", "for digits in range(4, 19):", "equivalent",
     "17 significant digits tell any two different doubles apart, so the loop never reaches 18"),
    ("analysis/sequential.py", "NumberReplacer",
     "return (declared + list(range(max(declared) + 1, max(declared) + 1 + n - len(declared))))[:n]",
     "return (declared + list(range(max(declared) + 1, max(declared) + 2 + n - len(declared))))[:n]", "equivalent",
     "the list is cut to its first n seeds ([:n]): a longer run of integers after the declared ones leaves the same n"),
    ("analysis/sequential.py", "ReplaceBinaryOperator_Sub_Add",
     "return (declared + list(range(max(declared) + 1, max(declared) + 1 + n - len(declared))))[:n]",
     "return (declared + list(range(max(declared) + 1, max(declared) + 1 + n + len(declared))))[:n]", "equivalent",
     "the list is cut to its first n seeds ([:n]): a longer run of integers after the declared ones leaves the same n"),
    ("analysis/sequential.py", "NumberReplacer", "for j in range(1, len(looks) + 1):",
     "for j in range(1, len(looks) + 2):", "equivalent",
     "the last look (j = len(looks)) always returns, so the loop never reaches j = len(looks) + 1"),
    ("analysis/preregistration.py", "RemoveDecorator", " / @functools.lru_cache(maxsize=None)", "", "equivalent",
     "a cache of reads that give the same answer within one History (a fixed commit's file, the log at HEAD, a "
     "preset): without it the same values are read again"),
    ("analysis/preregistration.py", "ReplaceAndWithOr", "if looks and seeds:   # a sequential claim's later looks' "
     "seeds are fixed in advance: part of its design", "if looks or seeds:   # a sequential claim's later looks' seeds "
     "are fixed in advance: part of its design", "equivalent",
     "with looks or seeds missing (None) or empty, continued() raises TypeError or ValueError (max of nothing), which "
     "the next line catches: no continued_seeds either way"),
    ("analysis/preregistration.py", "NumberReplacer",
     'p = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=60)',
     'p = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout= 59)', "accepted",
     "the exact git timeout (60 s, a guard against a hung git): no git read here comes near it, and no test waits a minute to pin it"),
    ("analysis/preregistration.py", "NumberReplacer",
     'p = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=60)',
     'p = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout= 61)', "accepted",
     "the exact git timeout (60 s, a guard against a hung git): no git read here comes near it, and no test waits a minute to pin it"),
    ("src/codist/datacheck.py", "NumberReplacer", "raise ValueError(e.args[0]) from None",
     "raise ValueError(e.args[ -1]) from None", "equivalent",
     "workloads.spec raises KeyError(message) with one argument: args[0] is args[-1]"),
    ("src/codist/datacheck.py", "ReplaceFalseWithTrue",
     'sub.add_parser("fake", add_help=False, help="write a miniature of every full-scale data set in its real "',
     'sub.add_parser("fake", add_help=True, help="write a miniature of every full-scale data set in its real "',
     "accepted", "the fake subcommand is listed for `codist data --help` only: codist.cli hands every `codist data "
     "fake ...` to codist.fake_data's own parser before this one is built, so its -h shows only when "
     "datacheck.main(['fake', '-h']) is called directly, which no command does"),
    ("analysis/schema.py", "RemoveDecorator", "@classmethod", "", "equivalent",
     "each @classmethod of schema.py is under a pydantic @field_validator whose function's first parameter is cls, "
     "and field_validator itself wraps such a function in classmethod (pydantic's "
     "_decorators.ensure_classmethod_based_on_signature): the same validator; tried: without any @classmethod the "
     "committed experiments files and 14,555 copies with a key set to a bad value give the same models and lines"),
    ("analysis/schema.py", "ReplaceAndWithOr", 'if loc[:1] == ["figures"] and len(loc) > 1:',
     'if loc[:1] == ["figures"] or len(loc) > 1:', "equivalent",
     "a Paper error location of two or more keys starts with figures or claims (paper and source are strings, an "
     "unknown key is one), and a claims location has left the try at the `if` above (returned, or raised into the "
     "except); a bare ('figures',) makes the mutant's loc[1] raise IndexError into the same except; tried: the "
     "same lines on the committed experiments files and 14,555 copies with a key (figures, claims included) set to a "
     "bad value"),
    ("analysis/stats.py", "NumberReplacer", "if iv.n < 2 or math.isnan(iv.sd):", "if iv.n < 1 or math.isnan(iv.sd):",
     "equivalent", "differs only at n = 1 with a finite sd, and every interval of under 2 seeds that reaches "
     "at_confidence has sd NaN (t_interval, upper_bound_interval: ddof=1; jackknife_interval below 3 seeds; claims' "
     "'b never reached'); the sd-0 comm_ratio intervals never do (schema refuses a sequential comm_ratio); tried: "
     "t_interval([1]), upper_bound_interval([1]) and a 1-pair jackknife come back the same under the mutant"),
    ("analysis/stats.py", "ReplaceOrWithAnd", "if iv.n < 2 or math.isnan(iv.sd):", "if iv.n < 2 and math.isnan(iv.sd):",
     "accepted", "n < 2 comes with a NaN sd (above); n >= 2 with a NaN sd: the jackknife's 2 seeds and claims' 'b "
     "never reached' come back the same (bounds NaN, no t term in the method); only t_interval over an infinite "
     "per-seed effect (a diverged run) differs: bounds NaN in both, the mutant's method names the look's level "
     "(t(0.975, 2) = 4.3) where the real code keeps t(0.95, 2), on an interval that decides nothing"),
    ("analysis/stats.py", "NumberReplacer",
     "return float(brentq(lambda w: power(n, sd, neutral, neutral, within=w) - target, 1e-12 * se, 1e3 * se))",
     "return float(brentq(lambda w: power(n, sd, neutral, neutral, within=w) - target, 1.000000000001 * se, 1e3 * se))",
     "equivalent", "the 80% TOST margin is over 2.9 se at every n (its normal limit: (1.645 + 1.282) se), so [se, "
     "1e3 se] still brackets the one root of the monotone power: the same root to brentq's tolerance (2e-12 + 4 eps "
     "x the margin); tried: n = 2..1000 at sd 1 agree to 2.3e-12 relative, n = 2..59, 100, 200, 500, 1000 at sd "
     "1e-6..1e3 within 1.9e-12"),
    ("analysis/stats.py", "NumberReplacer",
     "return float(brentq(lambda w: power(n, sd, neutral, neutral, within=w) - target, 1e-12 * se, 1e3 * se))",
     "return float(brentq(lambda w: power(n, sd, neutral, neutral, within=w) - target, 1e-12 * se, 1001.0 * se))",
     "equivalent", "the 80% TOST margin is at most 10.6 se (2 seeds), far below either upper bracket: the same root "
     "to brentq's tolerance (2e-12 + 4 eps x the margin); tried: n = 2..1000 at sd 1 agree to 3.7e-13 relative, "
     "n = 2..59, 100, 200, 500, 1000 at sd 1e-6..1e3 within 6.4e-12 (a margin of 7,400 at sd 1e3)"),
]
