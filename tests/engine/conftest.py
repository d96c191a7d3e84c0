"""Engine tests run tiny models: one torch thread is faster for them than several, and keeps a
busy two-core machine (CI, or a training run beside the tests) from oversubscribing."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread():
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
