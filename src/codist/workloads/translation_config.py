"""The `workload:` section for `name: translation` (pydantic only: `import codist.config` needs
neither torch nor fairseq).

Sodhani et al. 2020 Fig. 5 (Transformer-big 6+6 on WMT'16 En-De, the Ott et al. 2018 setup) and
Sec. 4 (IWSLT'14 De-En) train fairseq Transformers on fairseq-binarized data. `dataset: fairseq`
reads such data from `data_dir`; `dataset: embedded` generates a parallel corpus from a known
transduction (see `translation_data.py`), binarizes it with fairseq-preprocess and then reads it
exactly like real fairseq data.

Defaults that depend on the data set are filled in before validation (as in `ctr_config`): for
`embedded`, `arch` defaults to `transformer_tiny`, `max_len` to 16 and generation length to the
source length plus 5; for `fairseq`, `arch` defaults to `transformer_vaswani_wmt_en_de_big`,
`max_len` to 1022 (fairseq's 1024 positions) and generation length to fairseq-generate's
defaults (max_len_a 0, max_len_b 200). The filled-in values are
ordinary field values, so the resolved config (run id, manifest) shows what was built.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, StrictInt, model_validator

from . import DataNeeds, register
from .schema import WorkloadSection

#: what `data_dir` must hold for `dataset: fairseq` (fairseq-preprocess's output folder)
FAIRSEQ_LAYOUT = (
    "the output folder of fairseq-preprocess (--destdir) for the pair <src>-<tgt>: "
    "dict.<src>.txt, dict.<tgt>.txt, train.<src>-<tgt>.<src>.{bin,idx}, "
    "train.<src>-<tgt>.<tgt>.{bin,idx}, valid.<src>-<tgt>.<src>.{bin,idx}, "
    "valid.<src>-<tgt>.<tgt>.{bin,idx} (the default mmap format)"
)

#: fairseq architectures offered (all registered by fairseq.models.transformer); transformer_tiny
#: is fairseq's own `transformer_tiny` preset with two documented overrides (see translation.py)
ARCHS = ("transformer_vaswani_wmt_en_de_big", "transformer_iwslt_de_en", "transformer_tiny")

# max_len 1022: model positions 1024, fairseq's --max-source/target-positions default
EMBEDDED_DEFAULTS = {"arch": "transformer_tiny", "gen_max_len_a": 1.0, "gen_max_len_b": 5, "max_len": 16}
FAIRSEQ_DEFAULTS = {"arch": "transformer_vaswani_wmt_en_de_big", "gen_max_len_a": 0.0, "gen_max_len_b": 200,
                    "max_len": 1022}


class TranslationConfig(WorkloadSection):
    """The `workload:` section for `name: translation`.

    Training batches hold `train.batch_per_rank` sentence pairs each (not a token budget like
    fairseq's --max-tokens): codist's data splitting and step-pure batches are defined over
    samples. `max_tokens` only bounds the chunks in which beam search runs.

    `pairs`, `val_pairs`, `vocab`, `min_len`, `synonym_fraction`, `synonym_prob` and
    `data_seed` shape the embedded corpus only; they never depend on the run seed.
    """
    needs_fairseq = True   # fairseq models, data and generation

    name: Literal["translation"] = "translation"
    dataset: Literal["embedded", "fairseq"] = "embedded"
    data_dir: str | None = Field(None, description=f"for dataset fairseq: {FAIRSEQ_LAYOUT}")
    source_lang: str = Field("src", min_length=1, description="language suffix of the source files (e.g. de)")
    target_lang: str = Field("tgt", min_length=1, description="language suffix of the target files (e.g. en)")
    arch: Literal["transformer_vaswani_wmt_en_de_big", "transformer_iwslt_de_en", "transformer_tiny"]
    share_embeddings: Literal["none", "decoder", "all"] = Field(
        "decoder", description="none; decoder (--share-decoder-input-output-embed); all "
                               "(--share-all-embeddings: needs one joined dictionary, as in Ott et al. 2018)")
    dropout: float | None = Field(None, ge=0.0, lt=1.0,
                                  description="None: the architecture preset's (big 0.3; iwslt 0.1, whose fairseq "
                                              "recipe passes --dropout 0.3; tiny 0.1)")
    label_smoothing: float = Field(0.1, ge=0.0, lt=1.0, description="epsilon of the training loss (Ott et al. 2018)")
    max_len: StrictInt = Field(ge=1, le=1022,
                         description="longest sentence kept, in tokens without eos (pairs with a longer side are "
                                     "left out of train and valid, as fairseq filters by size); embedded: the "
                                     "longest generated sentence; also the model's max positions minus 2")
    max_tokens: StrictInt = Field(4096, ge=16, description="beam search runs in chunks of at most this many source tokens")
    # BLEU (sacrebleu corpus BLEU on detokenized text, beam search with fairseq's SequenceGenerator)
    bleu_every_eval: bool = Field(False, description="add val_bleu to every evaluation (beam search on the val set)")
    beam: StrictInt = Field(4, ge=1, description="beam size (Ott et al. 2018: 4)")
    lenpen: float = Field(0.6, description="length penalty (Ott et al. 2018: 0.6)")
    gen_max_len_a: float = Field(ge=0.0, description="generate at most a*src_len + b tokens")
    gen_max_len_b: StrictInt = Field(ge=1)
    bleu_max_sentences: StrictInt | None = Field(None, ge=1, description="Workload.bleu(): score the first N val pairs")
    post_process: Literal["none", "subword_nmt", "sentencepiece"] = Field(
        "none", description="remove BPE before scoring (fairseq --post-process / --remove-bpe)")
    bleu_tokenize: Literal["13a", "none", "intl"] = Field(
        "13a", description="sacrebleu tokenizer; 'none' scores text as it is (tokenized BLEU on tokenized data, "
                           "as Ott et al. 2018 report for WMT En-De)")
    # embedded corpus
    pairs: StrictInt = Field(4000, ge=1, description="embedded: training sentence pairs")
    val_pairs: StrictInt = Field(500, ge=1, description="embedded: validation sentence pairs")
    vocab: StrictInt = Field(100, ge=8, description="embedded: source vocabulary (words)")
    min_len: StrictInt = Field(3, ge=1, description="embedded: shortest source sentence (words)")
    synonym_fraction: float = Field(0.3, ge=0.0, le=1.0,
                                    description="embedded: fraction of source words with two target translations")
    synonym_prob: float = Field(0.25, ge=0.0, le=0.5, description="embedded: probability of the minority translation")
    data_seed: StrictInt = Field(0, ge=0)
    cache_dir: str | None = Field(None, description="embedded: where the binarized corpus is cached "
                                                    "(default $CODIST_CACHE/translation or ~/.cache/codist/translation)")

    @model_validator(mode="before")
    @classmethod
    def _fill_defaults(cls, data: Any) -> Any:
        if isinstance(data, dict):
            defaults = FAIRSEQ_DEFAULTS if data.get("dataset") == "fairseq" else EMBEDDED_DEFAULTS
            data = {**defaults, **{k: v for k, v in data.items() if v is not None or k not in defaults}}
        return data

    @model_validator(mode="after")
    def _check(self) -> "TranslationConfig":
        if self.dataset == "fairseq" and not self.data_dir:
            raise ValueError(f"workload.data_dir is required for workload.dataset='fairseq': {FAIRSEQ_LAYOUT}")
        if self.dataset == "embedded":
            if self.data_dir is not None:
                raise ValueError("workload.data_dir is set but workload.dataset is 'embedded', which generates its "
                                 "data; set workload.dataset to 'fairseq' to read binarized data from data_dir")
            if self.min_len > self.max_len:
                raise ValueError(f"workload.min_len={self.min_len} > workload.max_len={self.max_len}")
            if self.source_lang == self.target_lang:
                raise ValueError("workload.source_lang and workload.target_lang must differ")
        return self


def required_files(src: str, tgt: str, splits=("train", "valid")) -> list[str]:
    """The files fairseq-preprocess writes for a language pair (FAIRSEQ_LAYOUT)."""
    files = [f"dict.{src}.txt", f"dict.{tgt}.txt"]
    for split in splits:
        for lang in (src, tgt):
            files += [f"{split}.{src}-{tgt}.{lang}.bin", f"{split}.{src}-{tgt}.{lang}.idx"]
    return files


def data_needs(w: TranslationConfig, root: Path) -> DataNeeds:
    return DataNeeds([], [root / f for f in required_files(w.source_lang, w.target_lang)], FAIRSEQ_LAYOUT)


def target_tokens_per_sentence(w: TranslationConfig, table) -> float:
    """Sentences -> tokens for the budget: the pair's mean target length (the throughput table's
    `translation:` section)."""
    pair = f"{w.source_lang}-{w.target_lang}"
    if pair not in table.translation:
        raise LookupError(f"translation.{pair}: missing (the mean target sentence length of the {pair} data is "
                          f"needed to turn sentences into tokens)")
    return float(table.translation[pair]["target_tokens_per_sentence"])


register("translation", TranslationConfig, "codist.workloads.translation:TranslationWorkload",
         metrics={"val_nll": False, "val_loss": False, "val_nll_bits": False, "val_ppl": False,
                  "val_token_accuracy": True, "val_bleu": True},
         data_needs=data_needs, data_check="codist.datacheck:check_fairseq",
         throughput_model=lambda w: w.arch, units_per_sample=target_tokens_per_sentence)
