"""The `translation` workload: fairseq Transformers on fairseq-binarized parallel data (Sodhani et
al. 2020 Fig. 5, WMT'16 En-De Transformer-big in the Ott et al. 2018 setup; Sec. 4, IWSLT'14
De-En), or on the embedded corpus of `translation_data` (binarized the same way).

Model. `arch` names a fairseq architecture; the model is built by fairseq's own registry
(`ARCH_CONFIG_REGISTRY[arch]` fills the preset's hyper-parameters, `TransformerModel.build_model`
builds it from the dictionaries in the data folder), so the full presets are the real fairseq
architectures. `transformer_tiny` is fairseq's `transformer_tiny` preset (2+2 layers, dim 64)
with two overrides for the embedded scale: 4 attention heads (not 2) and FFN width 128 (not
64). Max source/target positions are `max_len + 2`. fairseq is imported only when a model or
the data are needed, so `import codist.workloads` stays cheap for the other workloads.

Batches. A training item is one sentence pair (source and target token ids, both ending in
eos, as fairseq-preprocess writes them). `train_stream` serves `train.batch_per_rank`
*sentences* per rank and update, chosen by `codist.runtime.data.BatchStream.indices` (so the data
splits of `codist.runtime.data.model_data` and the step-pure order hold), padded by `collate` as
fairseq's LanguagePairDataset does: source left-padded, target right-padded,
prev_output_tokens = eos + target without its eos. Sentences are never dropped to round batch
sizes; as everywhere in codist, an epoch's last incomplete global batch is skipped (a different
random remainder each epoch). Validation items are padded to the longest validation pair, so
`codist.runtime.data.eval_batches` (default_collate) can stack them; `forward` trims columns that are
padding in the whole batch, so this costs nothing.

Inputs and outputs. Batch inputs are dicts {src_tokens, src_lengths, prev_output_tokens};
`forward` returns the decoder's logits (B, T, V); targets (B, T) hold the pad index at padding.
The loss and every evaluation statistic skip target == pad; so do codist's distillation and
prior terms, which average over the positions `token_mask` marks as real (without it they
would average over padding too, scaling alpha by the batch's share of real tokens and
training the decoder to match the teacher after eos).

Metrics. val_nll (nats per target token, eos included, no smoothing: the headline),
val_loss (the same number), val_nll_bits (base 2: fairseq logs nll_loss in bits, which is the
unit of Sodhani et al.'s 2.31 / 2.37 on IWSLT), val_ppl, val_token_accuracy, and with
`bleu_every_eval` val_bleu: sacrebleu corpus BLEU of beam-search translations, computed from
n-gram statistics summed over the ranks' shards (exactly the corpus BLEU of the whole set).
"""
from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import Dataset

from . import translation_data as tdata
from .base import Metric, Workload
from .translation_config import TranslationConfig

#: overrides of fairseq's transformer_tiny preset (see the module docstring)
TINY_OVERRIDES = {"encoder_attention_heads": 4, "decoder_attention_heads": 4,
                  "encoder_ffn_embed_dim": 128, "decoder_ffn_embed_dim": 128}

BLEU_ORDER = 4


# --------------------------------------------------------------------------- data

class PairData(Dataset):
    """Sentence pairs of one split of fairseq-binarized data: items (source, target) LongTensors,
    each ending in eos. Pairs with a side longer than `max_len` tokens (eos not counted) are
    left out, as fairseq filters by --max-source/target-positions; `dropped` counts them."""

    def __init__(self, src, tgt, max_len: int, name: str):
        if len(src) != len(tgt):
            raise ValueError(f"{name}: {len(src)} source but {len(tgt)} target sentences")
        import numpy as np
        ok = (np.asarray(src.sizes) <= max_len + 1) & (np.asarray(tgt.sizes) <= max_len + 1)
        self.src, self.tgt = src, tgt
        self.keep = np.nonzero(ok)[0]
        self.dropped = int(len(ok) - len(self.keep))
        self.src_sizes = np.asarray(src.sizes)[self.keep]
        self.tgt_sizes = np.asarray(tgt.sizes)[self.keep]

    def __len__(self) -> int:
        return len(self.keep)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        k = int(self.keep[i])
        return self.src[k].long(), self.tgt[k].long()


def collate(samples: list[tuple[torch.Tensor, torch.Tensor]], pad: int, eos: int,
            src_len: int | None = None, tgt_len: int | None = None) -> tuple[dict, torch.Tensor]:
    """(inputs, targets) of a list of pairs, padded like fairseq's LanguagePairDataset (source
    left, target right); `src_len`/`tgt_len` pad to at least that many columns. Order is kept."""
    from fairseq.data.data_utils import collate_tokens
    srcs, tgts = [s for s, _ in samples], [t for _, t in samples]
    inputs = {
        "src_tokens": collate_tokens(srcs, pad, eos, left_pad=True, pad_to_length=src_len),
        "src_lengths": torch.tensor([s.numel() for s in srcs], dtype=torch.long),
        "prev_output_tokens": collate_tokens(tgts, pad, eos, left_pad=False, move_eos_to_beginning=True,
                                             pad_to_length=tgt_len),
    }
    return inputs, collate_tokens(tgts, pad, eos, left_pad=False, pad_to_length=tgt_len)


class PaddedPairs(Dataset):
    """Pairs padded to fixed lengths, so that default_collate (codist's Evaluator) stacks them."""

    def __init__(self, pairs: PairData, pad: int, eos: int):
        self.pairs, self.pad, self.eos = pairs, pad, eos
        self.src_len = int(pairs.src_sizes.max()) if len(pairs) else 1
        self.tgt_len = int(pairs.tgt_sizes.max()) if len(pairs) else 1

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, i: int) -> tuple[dict, torch.Tensor]:
        inputs, target = collate([self.pairs[i]], self.pad, self.eos, self.src_len, self.tgt_len)
        return {k: v[0] for k, v in inputs.items()}, target[0]


class TranslationStream:
    """This rank's training batches: `batch(step)` is a pure function of the step."""

    def __init__(self, dataset: Dataset, batch_per_rank: int, ranks: int, rank: int, seed: int, pad: int, eos: int):
        from ..runtime.data import BatchStream
        self.inner = BatchStream(dataset, batch_per_rank, ranks, rank, seed)
        self.dataset, self.pad, self.eos = dataset, pad, eos

    def indices(self, step: int) -> torch.Tensor:
        return self.inner.indices(step)

    def batch(self, step: int) -> tuple[dict, torch.Tensor]:
        return collate([self.dataset[int(k)] for k in self.inner.indices(step)], self.pad, self.eos)


def trim_source(src: torch.Tensor, pad: int) -> torch.Tensor:
    """A left-padded source batch without its leading all-padding columns."""
    used = src.ne(pad).any(0).nonzero()
    return src[:, int(used[0]):] if len(used) else src[:, -1:]


def trim(inputs: dict, pad: int) -> dict:
    """Drop columns that are padding in every row (leading ones of the left-padded source,
    trailing ones of prev_output_tokens): fixed-length validation batches cost no extra work,
    and the result is the same as for the tightly padded batch."""
    prev = inputs["prev_output_tokens"]
    used = prev.ne(pad).any(0).nonzero()
    last = int(used[-1]) + 1 if len(used) else 1
    return {"src_tokens": trim_source(inputs["src_tokens"], pad), "src_lengths": inputs["src_lengths"],
            "prev_output_tokens": prev[:, :last]}


# --------------------------------------------------------------------------- BLEU statistics

def bleu_stats(hyps: list[str], refs: list[str], tokenize: str = "13a") -> dict[str, float]:
    """sacrebleu's sufficient statistics of corpus BLEU (additive over disjoint sets of sentences)."""
    from sacrebleu.metrics import BLEU
    s = BLEU(tokenize=tokenize).corpus_score(hyps, [refs])
    out = {"bleu_sys_len": float(s.sys_len), "bleu_ref_len": float(s.ref_len)}
    for n in range(BLEU_ORDER):
        out[f"bleu_correct_{n + 1}"] = float(s.counts[n])
        out[f"bleu_total_{n + 1}"] = float(s.totals[n])
    return out


def bleu_from_stats(sums: dict[str, float]) -> float:
    """Corpus BLEU (sacrebleu's default 'exp' smoothing, as corpus_bleu) from summed statistics."""
    from sacrebleu.metrics import BLEU
    correct = [int(round(sums[f"bleu_correct_{n + 1}"])) for n in range(BLEU_ORDER)]
    total = [int(round(sums[f"bleu_total_{n + 1}"])) for n in range(BLEU_ORDER)]
    return float(BLEU.compute_bleu(correct, total, int(round(sums["bleu_sys_len"])),
                                   int(round(sums["bleu_ref_len"])), smooth_method="exp").score)


# --------------------------------------------------------------------------- the workload

class TranslationWorkload(Workload):
    """Transformer NMT through fairseq. Data load on first use and stay cached on the instance;
    they never depend on the run seed (`seed` is kept for the interface)."""

    metric = Metric("val_nll", higher_is_better=False)

    def __init__(self, cfg: TranslationConfig, seed: int):
        self.cfg, self.seed = cfg, seed
        self.data = tdata.SOURCES[cfg.dataset](cfg)   # the embedded corpus or a fairseq data folder
        self._data_dir: Path | None = None
        self.src_dict = self.tgt_dict = None
        self._train: PairData | None = None
        self._val: PaddedPairs | None = None
        self.metric = Metric("val_nll", higher_is_better=False)

    @classmethod
    def with_dictionaries(cls, cfg: TranslationConfig, source_types: int, target_types: int) -> TranslationWorkload:
        """The workload without its data, for its model alone: dictionaries of these sizes (fairseq's
        four special symbols included; one joined dictionary where every embedding is shared), so the
        planned model is built where the data are not at hand (the rehearsal's miniature root has
        dictionaries of about a thousand types, the real ones tens of thousands)."""
        from fairseq.data import Dictionary

        def dictionary(n: int) -> Dictionary:
            d = Dictionary()
            for i in range(n - len(d)):
                d.add_symbol(f"w{i}")
            return d
        w = cls(cfg, 0)
        w.src_dict = dictionary(source_types)
        w.tgt_dict = w.src_dict if cfg.share_embeddings == "all" else dictionary(target_types)
        w._train = ()   # nothing to load: build_model reads the dictionaries only
        return w

    # ---------------------------------------------------------------- data
    def _load(self) -> None:
        if self._train is not None:
            return
        cfg = self.cfg
        src, tgt = cfg.source_lang, cfg.target_lang
        root = self._data_dir = self.data.folder()
        target = self.data.target()   # known once the folder is (the embedded corpus's limits)
        self.metric = Metric("val_nll", higher_is_better=False, target=None if target is None else round(target, 4))
        src_dict = tdata.load_dictionary(root / f"dict.{src}.txt")
        tgt_dict = tdata.load_dictionary(root / f"dict.{tgt}.txt")
        if cfg.share_embeddings == "all":
            if src_dict != tgt_dict:
                raise ValueError(f"workload.share_embeddings='all' needs one joined dictionary, but "
                                 f"{root}/dict.{src}.txt and dict.{tgt}.txt differ (binarize with "
                                 f"fairseq-preprocess --joined-dictionary, or set share_embeddings to decoder)")
            tgt_dict = src_dict
        self.src_dict, self.tgt_dict = src_dict, tgt_dict

        def split(name: str) -> PairData:
            prefix = root / f"{name}.{src}-{tgt}"
            s, t = tdata.load_side(prefix, src, src_dict), tdata.load_side(prefix, tgt, tgt_dict)
            return PairData(s, t, cfg.max_len, str(prefix))

        train, val = split("train"), split("valid")
        for name, d in (("train", train), ("valid", val)):
            if len(d) == 0:
                raise ValueError(f"{root}: no {name} pair has both sides within workload.max_len={cfg.max_len} "
                                 f"tokens ({d.dropped} left out)")
        self._train, self._val = train, PaddedPairs(val, tgt_dict.pad(), tgt_dict.eos())

    @property
    def pad(self) -> int:
        self._load()
        return self.tgt_dict.pad()

    @property
    def num_classes(self) -> int:
        self._load()
        return len(self.tgt_dict)

    @property
    def data_dir(self) -> Path:
        self._load()
        return self._data_dir

    def train_dataset(self) -> Dataset:
        """Training pairs (variable length: batch them with `collate` or `train_stream`)."""
        self._load()
        return self._train

    def val_dataset(self) -> Dataset:
        """Validation pairs as fixed-length padded items ({src_tokens, src_lengths,
        prev_output_tokens}, target), for codist's Evaluator."""
        self._load()
        return self._val

    def train_stream(self, split, model, models, batch_per_rank, ranks, rank, seed):
        """Sentence-pair batches padded per batch; indices exactly as codist's BatchStream."""
        from ..runtime.data import model_data
        data, data_seed = model_data(self.train_dataset(), split, model, models, seed)
        return TranslationStream(data, batch_per_rank, ranks, rank, data_seed, self.tgt_dict.pad(),
                                 self.tgt_dict.eos())

    # ---------------------------------------------------------------- model
    def model_args(self):
        """The argparse namespace fairseq builds the model from (arch preset + our overrides)."""
        import argparse
        from fairseq.models import ARCH_CONFIG_REGISTRY
        cfg = self.cfg
        args = argparse.Namespace(arch=cfg.arch, max_source_positions=cfg.max_len + 2,
                                  max_target_positions=cfg.max_len + 2,
                                  share_all_embeddings=cfg.share_embeddings == "all",
                                  share_decoder_input_output_embed=cfg.share_embeddings != "none")
        if cfg.dropout is not None:
            args.dropout = cfg.dropout
        if cfg.arch == "transformer_tiny":
            for k, v in TINY_OVERRIDES.items():
                setattr(args, k, v)
        ARCH_CONFIG_REGISTRY[cfg.arch](args)
        return args

    def build_model(self) -> nn.Module:
        from fairseq.models import ARCH_MODEL_REGISTRY
        self._load()
        task = SimpleNamespace(source_dictionary=self.src_dict, target_dictionary=self.tgt_dict)
        return ARCH_MODEL_REGISTRY[self.cfg.arch].build_model(self.model_args(), task)

    def forward(self, model: nn.Module, inputs) -> torch.Tensor:
        """Logits (B, T, V). `model` is a fairseq model, or a DeepSpeed engine / DDP wrapping one
        (called with the three tensors, which they pass on), or a module that takes the whole
        batch and calls this method per member (codist's OutputEnsemble)."""
        from fairseq.models import FairseqEncoderDecoderModel
        inner = getattr(model, "module", model)
        if not isinstance(inner, FairseqEncoderDecoderModel):
            return model(inputs)
        x = trim(inputs, self.pad)
        return model(x["src_tokens"], x["src_lengths"], x["prev_output_tokens"], return_all_hiddens=False)[0]

    # ---------------------------------------------------------------- loss and evaluation
    def _align(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Targets cut to the logits' length (forward trims all-padding columns)."""
        t = outputs.size(1)
        if targets.size(1) < t:
            raise ValueError(f"logits have {t} positions but targets only {targets.size(1)}")
        if targets.size(1) > t:
            if targets[:, t:].ne(self.pad).any():
                raise ValueError("logits are shorter than the non-padding part of the targets")
            targets = targets[:, :t]
        return targets

    def token_mask(self, targets: torch.Tensor, outputs: torch.Tensor | None = None) -> torch.Tensor:
        """True at real target tokens (eos included), False at padding, shaped like `outputs`
        without its class dimension when given: the positions a distillation or prior term
        should average over. In a default-size embedded batch ~38% of positions are padding,
        which distill_loss leaves out through this mask."""
        if outputs is not None:
            targets = self._align(outputs, targets)
        return targets.ne(self.pad)

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Label-smoothed cross-entropy (fairseq's label_smoothed_cross_entropy: eps spread over the
        other V-1 classes), mean over this batch's non-padding target tokens."""
        targets = self._align(outputs, targets)
        lprobs = F.log_softmax(outputs.float(), dim=-1)
        mask = targets.ne(self.pad)
        nll = -lprobs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        eps = self.cfg.label_smoothing
        if eps > 0:
            eps_i = eps / (lprobs.size(-1) - 1)
            per_token = (1.0 - eps - eps_i) * nll - eps_i * lprobs.sum(-1)
        else:
            per_token = nll
        return per_token.masked_fill(~mask, 0.0).sum() / mask.sum().clamp_min(1)

    def eval_sums(self, outputs: torch.Tensor, targets: torch.Tensor) -> dict[str, float]:
        """Summed NLL (no smoothing), token count and correct argmax tokens over non-padding targets."""
        targets = self._align(outputs, targets)
        lprobs = F.log_softmax(outputs.float(), dim=-1)
        mask = targets.ne(self.pad)
        nll = -lprobs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        correct = (outputs.argmax(-1) == targets) & mask
        return {"nll_sum": float(nll.detach()[mask].sum()), "tokens": float(mask.sum()), "correct": float(correct.sum())}

    def eval_model_sums(self, model: nn.Module, inputs, targets: torch.Tensor) -> dict[str, float]:
        """eval_sums of `model` on one validation batch, plus BLEU statistics with bleu_every_eval.

        BLEU needs the model (beam search), not just teacher-forced logits, so codist's
        Evaluator must call this instead of `eval_sums(forward(model, x), y)`."""
        sums = self.eval_sums(self.forward(model, inputs), targets)
        if self.cfg.bleu_every_eval:
            sums.update(self.bleu_sums(model, inputs, targets))
        return sums

    def finalize_eval(self, sums: dict[str, float]) -> dict[str, float]:
        n = sums["tokens"]
        nll = sums["nll_sum"] / n
        out = {"val_nll": nll, "val_loss": nll, "val_nll_bits": nll / math.log(2),
               "val_ppl": math.exp(min(nll, 700.0)), "val_token_accuracy": sums["correct"] / n}
        if self.cfg.bleu_every_eval:
            if "bleu_sys_len" not in sums:
                raise RuntimeError("workload.bleu_every_eval is set but the evaluation sums carry no BLEU "
                                   "statistics: the evaluator must call TranslationWorkload.eval_model_sums")
            out["val_bleu"] = bleu_from_stats(sums)
        return out

    # ---------------------------------------------------------------- generation and BLEU
    def _models(self, model: nn.Module) -> list[nn.Module]:
        """The fairseq models behind `model`: itself, a wrapper's .module, or an ensemble's members
        (fairseq's SequenceGenerator averages members' probabilities, as OutputEnsemble does)."""
        from fairseq.models import FairseqEncoderDecoderModel
        inner = getattr(model, "module", model)
        if isinstance(inner, FairseqEncoderDecoderModel):
            return [inner]
        members = getattr(model, "members", None)
        if members is not None and all(isinstance(getattr(m, "module", m), FairseqEncoderDecoderModel)
                                       for m in members):
            return [getattr(m, "module", m) for m in members]
        raise TypeError(f"cannot generate with {type(model).__name__}: not a fairseq model or an ensemble of them")

    def _to_text(self, tokens: torch.Tensor, reference: bool) -> str:
        pp = None if self.cfg.post_process == "none" else self.cfg.post_process
        return self.tgt_dict.string(tokens, pp, escape_unk=reference, extra_symbols_to_ignore={self.tgt_dict.pad()})

    @torch.no_grad()
    def translate(self, model: nn.Module, inputs: dict) -> list[torch.Tensor]:
        """Best beam-search hypothesis (token ids, eos stripped) per sentence of the batch, in
        chunks of at most `max_tokens` padded source tokens. Models are left in the mode they were."""
        from fairseq.sequence_generator import SequenceGenerator
        cfg = self.cfg
        models = self._models(model)
        modes = [m.training for m in models]
        try:
            gen = SequenceGenerator(models, self.tgt_dict, beam_size=cfg.beam, len_penalty=cfg.lenpen,
                                    max_len_a=cfg.gen_max_len_a, max_len_b=cfg.gen_max_len_b)
            src, lengths = trim_source(inputs["src_tokens"], self.pad), inputs["src_lengths"]
            rows = max(1, cfg.max_tokens // src.size(1))
            out = []
            for s in range(0, src.size(0), rows):
                net_input = {"src_tokens": trim_source(src[s:s + rows], self.pad), "src_lengths": lengths[s:s + rows]}
                hypos = gen.generate(models, {"net_input": net_input})
                out.extend(h[0]["tokens"].cpu() for h in hypos)
            return out
        finally:
            for m, mode in zip(models, modes):
                m.train(mode)

    def bleu_sums(self, model: nn.Module, inputs: dict, targets: torch.Tensor) -> dict[str, float]:
        """BLEU sufficient statistics of `model`'s translations of one batch against its targets."""
        hyps = [self._to_text(h, reference=False) for h in self.translate(model, inputs)]
        refs = [self._to_text(t[t.ne(self.pad)].cpu(), reference=True) for t in targets]
        return bleu_stats(hyps, refs, self.cfg.bleu_tokenize)

    def bleu(self, model: nn.Module, max_sentences: int | None = None) -> float:
        """Corpus BLEU of `model` on the first `max_sentences` validation pairs (default
        `bleu_max_sentences`, else all), on this process alone (no sharding)."""
        from torch.utils.data._utils.collate import default_collate
        val = self.val_dataset()
        n = min(len(val), max_sentences or self.cfg.bleu_max_sentences or len(val))
        device = next(self._models(model)[0].parameters()).device
        sums: dict[str, float] = {}
        step = 256
        for s in range(0, n, step):
            inputs, targets = default_collate([val[i] for i in range(s, min(n, s + step))])
            inputs = {k: v.to(device) for k, v in inputs.items()}
            for k, v in self.bleu_sums(model, inputs, targets).items():
                sums[k] = sums.get(k, 0.0) + v
        return bleu_from_stats(sums)

    # ---------------------------------------------------------------- priors and facts
    def class_counts(self) -> torch.Tensor:
        """Target token counts over the training set (eos included, padding never): the unigram prior."""
        data = self.train_dataset()
        counts = torch.zeros(self.num_classes, dtype=torch.long)
        for i in range(len(data)):
            counts += torch.bincount(data.tgt[int(data.keep[i])].long(), minlength=self.num_classes)
        return counts

    def describe(self) -> dict:
        facts = super().describe()
        self._load()
        facts.update(dataset=self.cfg.dataset, arch=self.cfg.arch, data_dir=str(self._data_dir),
                     source_vocab=len(self.src_dict), target_vocab=len(self.tgt_dict),
                     train_pairs_dropped=self._train.dropped, val_pairs_dropped=self._val.pairs.dropped,
                     train_target_tokens=int(self._train.tgt_sizes.sum()), **self.data.facts())
        return facts
