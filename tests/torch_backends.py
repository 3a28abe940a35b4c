"""A fixture for tests that set torch's process-wide math flags (TF32, cuDNN autotuning) as a GPU
run does: the flags as they were are put back afterwards, for the tests that follow."""
import pytest
import torch


@pytest.fixture
def restore_backends():
    before = (torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark)
    yield
    torch.set_float32_matmul_precision(before[0])
    torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark = before[1:]
