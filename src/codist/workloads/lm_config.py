"""The `workload:` section for `name: lm` (Anil et al. 2018's Common Crawl LSTM language model).

Only pydantic and the standard library are imported here, so that `codist.config` can
validate a run config without loading torch; the workload itself is in `lm.py`.

Two data sets:
- `embedded` (the default): a known stochastic language (a hidden Markov model with Zipfian
  emissions, `lm_data.HmmLanguage`), streamed fresh and never repeated, so the Bayes-optimal
  cross-entropy of the validation set is known exactly and `val_bayes_gap` is reported.
- `text`: plain-text shards or Common Crawl WET files under `data_dir`, tokenised once with
  SentencePiece (Anil: 24,006 word-pieces) or as UTF-8 bytes, and cached (`codist data prepare`,
  a workflow job of its own before the run's; a run that finds no cache does it itself).

Model sizes default to a tiny LSTM that learns the embedded language on one CPU thread in
under a minute; Anil's model is `layers: 2, hidden: 1024, embedding: 256` with
`tokenizer: sentencepiece` and `vocab_size: 24006`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, StrictInt, model_validator

from . import DataNeeds, register
from .schema import WorkloadSection

#: files under `data_dir` read as shards (recursively, sorted by path; hidden folders skipped)
TEXT_SHARD_PATTERNS = ("*.txt", "*.txt.gz", "*.wet", "*.wet.gz")

#: what `data_dir` must hold, for error messages
TEXT_LAYOUT = (
    "a folder (searched recursively) of plain-text shards *.txt / *.txt.gz (one paragraph per line) "
    "and/or Common Crawl WET files *.warc.wet / *.wet / *.warc.wet.gz (the payloads of their "
    "'WARC-Type: conversion' records are read, one paragraph per line)"
)

#: Anil et al. 2018, Sec. 3.1: "24,006 word-pieces"
ANIL_VOCAB_SIZE = 24006

#: the bytes tokenizer's vocabulary: the 256 byte values and one end-of-paragraph id
BYTES_VOCAB_SIZE = 257


class LmConfig(WorkloadSection):
    """The `workload:` section for `name: lm`.

    Keys of the other data set are ignored (as in `cifar`): `vocab`, `states`, `zipf`,
    `transition_alpha`, `doc_len`, `data_seed` shape the embedded language only;
    `data_dir`, `cache_dir`, `tokenizer`, `vocab_size`, `tokenizer_model` and `target` the
    text data only. `seq_len`, `val_seq_len`, `val_tokens` and the model keys apply to both.
    """


    name: Literal["lm"] = "lm"
    dataset: Literal["embedded", "text"] = "embedded"

    # ---------------------------------------------------------------- text data
    data_dir: str | None = Field(None, description=f"dataset=text: {TEXT_LAYOUT}")
    cache_dir: str | None = Field(
        None, description="where a trained SentencePiece model and the tokenised corpus are cached "
        "(default <data_dir>/.codist_cache); files are named by a hash of the shards' names, sizes and "
        "modification times and of the tokenizer settings, so a changed corpus is never served stale")
    tokenizer: Literal["sentencepiece", "bytes"] = Field(
        "sentencepiece", description="sentencepiece: word-pieces (Anil); bytes: UTF-8 bytes + end of paragraph")
    vocab_size: StrictInt | None = Field(
        None, ge=8, description=f"SentencePiece vocabulary to train (default {ANIL_VOCAB_SIZE}, Anil's); "
        f"with tokenizer_model, the model's own size (set it only to check it); bytes: always {BYTES_VOCAB_SIZE}")
    tokenizer_model: str | None = Field(
        None, description="an existing SentencePiece .model file to use instead of training one on the shards")
    target: float | None = Field(
        None, gt=0, description="dataset=text: the val_loss target (nats/token) for time-to-target; "
        "the embedded target is derived from the Bayes optimum")

    # ---------------------------------------------------------------- model (Anil: 2 x 1024, 256-d embeddings)
    layers: StrictInt = Field(2, ge=1, description="stacked LSTM layers (Anil: 2)")
    hidden: StrictInt = Field(64, ge=1, description="LSTM units per layer (Anil: 1024)")
    embedding: StrictInt = Field(32, ge=1, description="input embedding size (Anil: 256)")
    layer_norm: bool = Field(True, description="LayerNorm on each LSTM layer's outputs (Anil: 'layer norm')")
    lstm: Literal["fused", "unrolled"] = Field(
        "fused", description="the LSTM layers' kernel: 'fused' (torch.nn.LSTM: cuDNN / oneDNN) or 'unrolled' "
                            "(the same cell and parameters as torch code over the segment's steps, which "
                            "train.compile can fuse; torch.compile refuses nn.LSTM): the same model, other "
                            "floating-point order, so a run id of its own (benchmarks/lm_levers.py)")

    # ---------------------------------------------------------------- segments and validation
    seq_len: StrictInt = Field(32, ge=1, description="tokens per training segment; hidden state is carried "
                         "from one segment to the next (Anil: 32)")
    val_seq_len: StrictInt = Field(128, ge=1, description="tokens per validation sequence, each evaluated "
                             "from a zero state")
    val_tokens: StrictInt = Field(32768, ge=2, description="validation tokens (embedded: generated; text: the "
                            "last val_tokens tokens of the corpus, held out of training)")

    # ---------------------------------------------------------------- embedded language
    vocab: StrictInt = Field(256, ge=2, le=65536, description="embedded: vocabulary size")
    states: StrictInt = Field(64, ge=1, description="embedded: hidden states of the HMM")
    zipf: float = Field(1.5, gt=0, description="embedded: exponent s of each state's emission law p(rank r) ~ r^-s")
    transition_alpha: float = Field(0.02, gt=0, description="embedded: Dirichlet concentration of each state's "
                                    "transition row (small: few likely successors, so context matters)")
    doc_len: StrictInt = Field(1024, ge=2, description="embedded: tokens per document; a training stream is a "
                         "concatenation of independent documents")
    data_seed: StrictInt = Field(0, ge=0, description="embedded: seed of the language and of the validation set")

    @model_validator(mode="after")
    def _check(self) -> "LmConfig":
        if self.dataset == "text" and not self.data_dir:
            raise ValueError(f"workload.data_dir is required for workload.dataset='text': {TEXT_LAYOUT}")
        if self.dataset == "embedded" and self.data_dir is not None:
            raise ValueError("workload.data_dir is set but workload.dataset is 'embedded', which generates "
                             "its data; set workload.dataset to 'text' to read shards from data_dir")
        if self.tokenizer == "bytes":
            if self.vocab_size is not None and self.vocab_size != BYTES_VOCAB_SIZE:
                raise ValueError(f"workload.vocab_size={self.vocab_size} with workload.tokenizer='bytes': the "
                                 f"bytes vocabulary is always {BYTES_VOCAB_SIZE} (256 bytes + end of paragraph); "
                                 f"leave vocab_size unset")
            if self.tokenizer_model is not None:
                raise ValueError("workload.tokenizer_model is a SentencePiece model but workload.tokenizer is "
                                 "'bytes'; set tokenizer: sentencepiece or drop tokenizer_model")
        if self.val_tokens <= self.val_seq_len:
            raise ValueError(f"workload.val_tokens={self.val_tokens} must exceed workload.val_seq_len="
                             f"{self.val_seq_len} (at least one validation sequence)")
        return self

    @property
    def prepared_by_job(self) -> bool:
        """Text is tokenised (and a SentencePiece model trained) into the cache by a job of its own
        before the run's (`codist data prepare`; the workflow's lm_data rule), not by the ranks."""
        return self.dataset == "text"

    @property
    def spm_vocab_size(self) -> int:
        """The SentencePiece vocabulary to train when no `tokenizer_model` is given."""
        return self.vocab_size or ANIL_VOCAB_SIZE


def data_needs(w: LmConfig, root: Path) -> DataNeeds:
    shards = any(p.is_file() for pattern in TEXT_SHARD_PATTERNS for p in root.rglob(pattern))
    return DataNeeds([], [], TEXT_LAYOUT,
                     None if shards else f"workload.data_dir: {str(root)!r} holds no text shards; expected {TEXT_LAYOUT}")


register("lm", LmConfig, "codist.workloads.lm:LmWorkload",
         metrics={"val_loss": False, "val_ppl": False, "val_bayes_gap": False},
         data_needs=data_needs, data_check="codist.datacheck:check_text",
         throughput_model=lambda w: "lstm_lm", units_per_sample=lambda w, table: float(w.seq_len))   # tokens
