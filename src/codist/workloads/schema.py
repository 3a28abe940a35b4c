"""What every section of the run-config schema shares (pydantic only: no torch)."""
from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict

# extra="forbid": an unknown (e.g. misspelt) key is an error, not silently ignored.
# allow_inf_nan=False: .inf and .nan are refused for every float (lr = .inf trained on NaN loss
# and "finished" normally). Counts are typed pydantic.StrictInt, so `steps: true` or `steps: 2.0`
# is refused instead of read as 1 or 2.
SECTION_CONFIG = ConfigDict(extra="forbid", allow_inf_nan=False)


class WorkloadSection(BaseModel):
    """Base of every `workload:` config class. Its class variables are the workload's
    capabilities, which generic code (engine, launchers) asks instead of the workload's name;
    they are not fields, so they are not part of the run id."""
    model_config = SECTION_CONFIG

    #: the ranks import fairseq (models, data); otherwise DeepSpeed's fairseq import is hidden
    needs_fairseq: ClassVar[bool] = False
    #: the model is convolutional: on a GPU it is kept in channels_last (NHWC), which cuDNN's
    #: convolutions run fastest in, especially under bf16/fp16 (codist.cuda_defaults)
    convnet: ClassVar[bool] = False
