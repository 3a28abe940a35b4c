"""Reviewed surviving mutants of `make mutation` (benchmarks/mutation.py): each is either
equivalent (no input the module can receive tells it from the real code: left out of the score)
or accepted (a real difference the tests do not catch, and why that is tolerable: kept in the
score as a survivor). Matched on module, operator and the changed line (old, new: stripped), not
on line numbers.

(module, operator, old line, new line, "equivalent" | "accepted", one-line reason)
"""
from __future__ import annotations

REASONS: list[tuple[str, str, str, str, str, str]] = [
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
    ("analysis/claims.py", "ReplaceOrWithAnd", "if not v or math.isnan(v):", "if not v and math.isnan(v):",
     "equivalent", "data_sizes never gives a validation size of 0 (val_size or NaN; DATA_SETS > 0; criteo's held-out "
     "lines or NaN); for NaN the mutant's floor sd is NaN: margin_needed gives a NaN need (margin < NaN is false) and "
     "max(sd, NaN) returns sd, as the floor 0 does"),
    ("src/codist/rank/checkpoint.py", "NumberReplacer",
     "NONE, FAILED = -1, -2   # what rank 0 broadcasts when there is no checkpoint, or it could not read the index",
     "NONE, FAILED = -1, - 3   # what rank 0 broadcasts when there is no checkpoint, or it could not read the index",
     "equivalent", "FAILED is only compared with the broadcast flag: any value other than NONE (-1) and every step "
     "(>= 0) acts alike, and -3 is one"),
    ("analysis/comm_identity.py", "NumberReplacer", 'raise IdentityError(f"identity: {e.args[0]}") from None',
     'raise IdentityError(f"identity: {e.args[ -1]}") from None', "equivalent",
     "registry.lookup raises KeyError(message) with one argument: args[0] is args[-1]"),
    ("analysis/comm_identity.py", "NumberReplacer",
     'measured = float(table.loc[table["series"] == series, column(setting["algorithm"])].iloc[0])',
     'measured = float(table.loc[table["series"] == series, column(setting["algorithm"])].iloc[ -1])', "equivalent",
     "a series' rows are its seeds, whose bytes per rank-update are the same (the traffic follows from the config, "
     "not the seed: claims.py's 'bytes are the same on every seed'), so the first row's value is the last's"),
    ("src/codist/rank/comm.py", "ReplaceComparisonOperator_Gt_GtE",
     "return 2 * (p - 1) * payload // p if p > 1 else 0", "return 2 * (p - 1) * payload // p if p >= 1 else 0",
     "equivalent", "p = 1: 2 x 0 x payload // 1 = 0, as the else branch; a group has at least one rank, so p >= 1"),
    ("src/codist/rank/comm.py", "ReplaceOrWithAnd", "if sent or recv or calls:", "if sent and recv or calls:",
     "equivalent", "record adds 1 call with every byte it counts, so a row with bytes has calls >= 1: calls alone "
     "decides both conditions"),
    ("src/codist/rank/comm.py", "NumberReplacer", 'hook("barrier", "barrier", lambda a: 0, lambda a: [])',
     'hook("barrier", "barrier", lambda a: 1, lambda a: [])', "equivalent",
     "record's barrier branch sets sent = recv = 0 whatever the payload it is given"),
    ("src/codist/rank/comm.py", "ReplaceContinueWithBreak", "continue", "break", "accepted",
     "unseen_calls skips groups of other backends (NCCL); every process group a CPU machine can make here is gloo, "
     "so which of continue or break ends the skip cannot show; a GPU run's mixed gloo/NCCL groups would"),
    ("src/codist/rank/comm.py", "NumberReplacer", "max(1, ran or 1))", "max(1, ran or 2))", "accepted",
     "differs only where the group ran no collective for the call (an empty tensor list, which DDP never passes) or "
     "does not number its collectives (NCCL): the group's seen count then grows by 2, not 1, which only lowers a "
     "later unseen count already clamped there; DDP's calls always run at least one numbered broadcast"),
    ("src/codist/rank/comm.py", "NumberReplacer", "return 2 * (p - 1) * payload // p if p > 1 else 0",
     "return 2 * (p - 1) * payload // p if p > 0 else 0", "equivalent",
     "p = 1: 2 x 0 x payload // 1 = 0, as the else branch; a group has at least one rank, so p >= 1"),
    ("src/codist/rank/comm.py", "ReplaceOrWithAnd", "if group is None or group is dist.GroupMember.WORLD:",
     "if group is None and group is dist.GroupMember.WORLD:", "equivalent",
     "get_process_group_ranks(None or WORLD) gives the world's ranks 0..n-1, which is range(len(model_of)): model_of "
     "has one entry per global rank"),
    ("src/codist/rank/comm.py", "ReplaceAndWithOr", 'if d.type != self.device.type or (self.device.index is not None and d.index != self.device.index):',
     'if d.type != self.device.type or (self.device.index is not None or d.index != self.device.index):', *('accepted', 'CPU and meta tensors carry no device index (cpu:0 and meta:1 report none), so the index comparison can only show between indexed devices of one type (cuda:0 and cuda:1): not on a CPU machine')),
    ("src/codist/rank/comm.py", "ReplaceComparisonOperator_IsNot_Is", 'if d.type != self.device.type or (self.device.index is not None and d.index != self.device.index):',
     'if d.type != self.device.type or (self.device.index is None and d.index != self.device.index):', *('accepted', 'CPU and meta tensors carry no device index (cpu:0 and meta:1 report none), so the index comparison can only show between indexed devices of one type (cuda:0 and cuda:1): not on a CPU machine')),
    ("src/codist/rank/comm.py", "ReplaceComparisonOperator_NotEq_Eq", 'if d.type != self.device.type or (self.device.index is not None and d.index != self.device.index):',
     'if d.type != self.device.type or (self.device.index is not None and d.index == self.device.index):', *('accepted', 'CPU and meta tensors carry no device index (cpu:0 and meta:1 report none), so the index comparison can only show between indexed devices of one type (cuda:0 and cuda:1): not on a CPU machine')),
    ("src/codist/rank/comm.py", "NumberReplacer",
     "unseen += max(0, group._get_sequence_number_for_group() - self.seen.get(group, 0))",
     "unseen += max( -1, group._get_sequence_number_for_group() - self.seen.get(group, 0))", "accepted",
     "differs only for a group on which the meter counted more calls than the group numbered (a counted call that "
     "raised before running, or a coalesced call that ran none): no test world has one"),
    ("src/codist/rank/comm.py", "NumberReplacer", "_inside.depth = 1", "_inside.depth = 2", "equivalent",
     "depth is only tested for truth (getattr(_inside, 'depth', 0)): 2 is as true as 1"),
    ("src/codist/rank/comm.py", "NumberReplacer", "for _ in range(ran or 0):", "for _ in range(ran or 1):", "accepted",
     "differs only where the group does not number its collectives (ran None: NCCL) or the check ran none: one "
     "0-byte control call more; DDP's check on gloo always runs numbered collectives"),
    ("src/codist/rank/comm.py", "NumberReplacer", "max(1, ran or 1))", "max(1, ran or 0))", "equivalent",
     "under max(1, .) 'ran or 0' and 'ran or 1' both give 1 when ran is None or 0, and ran otherwise"),
    ("src/codist/rank/comm.py", "NumberReplacer", "f = sys._getframe(1)", "f = sys._getframe( 2)", "equivalent",
     "_caller is called only by check_device, a frame of this module: the loop skips frame 1 anyway, so starting at "
     "frame 2 finds the same caller"),
    ("src/codist/rank/comm.py", "NumberReplacer", 'hook("barrier", "barrier", lambda a: 0, lambda a: [])',
     'hook("barrier", "barrier", lambda a: -1, lambda a: [])', "equivalent",
     "record's barrier branch sets sent = recv = 0 whatever the payload it is given"),
    ("src/codist/rank/comm.py", "NumberReplacer", "for _ in range(ran or 0):", "for _ in range(ran or -1):",
     "equivalent", "range(-1) is as empty as range(0)"),
    ("src/codist/rank/comm.py", "ReplaceOrWithAnd", "if not dist.is_available() or not dist.is_initialized():",
     "if not dist.is_available() and not dist.is_initialized():", "equivalent",
     "torch.distributed is available in every torch this project runs (Linux builds); uninitialized, c10d's pg_map "
     "is empty, so the loop below also gives 0"),
    ("src/codist/rank/comm.py", "NumberReplacer", '_count("barrier", 0, process_group, None, None)   # a 0-byte call',
     '_count("barrier", 1, process_group, None, None)   # a 0-byte call', "equivalent",
     "record's barrier branch sets sent = recv = 0 whatever the payload it is given"),
    ("src/codist/algorithms/ensemble_compress.py", "NumberReplacer", "self.rounds += 1", "self.rounds += 2",
     "equivalent", "rounds is only compared with 0 (and checkpointed for that comparison): 2 per round is as "
     "non-zero as 1, and no output reports it"),
    ("src/codist/rank/comm.py", "NumberReplacer", "f = sys._getframe(1)", "f = sys._getframe( 0)", "equivalent",
     "frame 0 is _caller itself, a frame of this module that the loop skips, as it skips check_device's"),
    ("src/codist/rank/comm.py", "NumberReplacer", '_count("barrier", 0, process_group, None, None)   # a 0-byte call',
     '_count("barrier", -1, process_group, None, None)   # a 0-byte call', "equivalent",
     "record's barrier branch sets sent = recv = 0 whatever the payload it is given"),
    ("src/codist/algorithms/ensemble_compress.py", "ReplaceComparisonOperator_Eq_NotEq",
     'return {"G": self.global_model} if self.topo.model_index == 0 else {}',
     'return {"G": self.global_model} if self.topo.model_index != 0 else {}', "accepted",
     "G is the same gathered ensemble on every rank, and the evaluation table is summed over ranks then divided: "
     "model 1's ranks scoring it give model 0's row (K = 2 exactly; K > 2: K-1 groups' sums, the same means up to "
     "float rounding); only who spends the evaluation differs"),
    ("src/codist/rank/comm.py", "NumberReplacer", "max(1, ran or 1))", "max( 0, ran or 1))", "equivalent",
     "'ran or 1' is at least 1 (ran is None or a count >= 0), so max(0, .) and max(1, .) both give it"),
    ("src/codist/algorithms/ensemble_compress.py", "AddNot", 'return {"G": self.global_model} if self.topo.model_index == 0 else {}',
     'return {"G": self.global_model} if not self.topo.model_index == 0 else {}', "accepted",
     "as model_index != 0: G is the same gathered ensemble on every rank and the evaluation table is summed over "
     "ranks then divided, so the other models' ranks give model 0's row (K > 2: up to float rounding)"),
    ("src/codist/algorithms/ensemble_compress.py", "NumberReplacer", 'return {"G": self.global_model} if self.topo.model_index == 0 else {}',
     'return {"G": self.global_model} if self.topo.model_index == 1 else {}', "equivalent",
     "EC-DNN has K >= 2 models (min_models 2): model 1's group has as many ranks as model 0's, on the same "
     "validation shards, and G is the same gathered ensemble on every rank, so its row is the same"),
    ("src/codist/algorithms/ensemble_compress.py", "ReplaceUnaryOperator_Delete_USub",
     "target = torch.softmax(self.global_model(x) / a.temperature, dim=-1)",
     "target = torch.softmax(self.global_model(x) / a.temperature, dim=1)", "accepted",
     "dim 1 is the last dimension of the image and CTR workloads' 2-D logits; the LM's 3-D logits would tell them "
     "apart, and no test runs EC-DNN on the LM workload (a gap: EC-DNN is Sun's image method here)"),
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
]
