"""A fixture for tests that set torch's process-wide math flags (TF32, cuDNN autotuning, deterministic
kernels and cuBLAS's workspace variable) as a GPU run does: the flags as they were are put back
afterwards, for the tests that follow."""
import os

import pytest
import torch


@pytest.fixture
def restore_backends():
    before = (torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark,
              torch.backends.cudnn.deterministic, torch.are_deterministic_algorithms_enabled(),
              os.environ.get("CUBLAS_WORKSPACE_CONFIG"))
    yield
    torch.set_float32_matmul_precision(before[0])
    torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = before[1:4]
    torch.use_deterministic_algorithms(before[4])
    if before[5] is None:
        os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
    else:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = before[5]
