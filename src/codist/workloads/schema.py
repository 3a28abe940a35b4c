"""What every section of the run-config schema shares (pydantic only: no torch)."""
from __future__ import annotations

from pydantic import ConfigDict

# extra="forbid": an unknown (e.g. misspelt) key is an error, not silently ignored.
# allow_inf_nan=False: .inf and .nan are refused for every float (lr = .inf trained on NaN loss
# and "finished" normally). Counts are typed pydantic.StrictInt, so `steps: true` or `steps: 2.0`
# is refused instead of read as 1 or 2.
SECTION_CONFIG = ConfigDict(extra="forbid", allow_inf_nan=False)
