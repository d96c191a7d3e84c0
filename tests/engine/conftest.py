"""Engine tests run tiny models: one torch thread is faster for them than several, and keeps a
busy two-core machine (CI, or a training run beside the tests) from oversubscribing. `pair`: a
tiny random target and DFlash drafter (tests/support/tiny_checkpoints.py), one per module."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.tiny_checkpoints import write_drafter, write_target


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread():
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("pair")
    write_target(root / "target", seed=5)
    write_drafter(root / "drafter", seed=6)
    return root / "target", root / "drafter"
