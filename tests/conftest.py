"""Shared fixtures."""
import pytest


@pytest.fixture
def one_torch_thread():
    """Small tensors: one intra-op thread avoids spinning against other jobs on 2 cores."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
