"""The drafter's training loss (training/linear_ce.py): the chunked lm_head cross-entropy gives
the loss, the gradient and the argmax that the whole-logits computation gives."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from training.linear_ce import linear_cross_entropy  # noqa: E402


@pytest.mark.parametrize("chunk", [1, 64, 4096])
def test_chunked_loss_matches_whole_logits(chunk: int) -> None:
    gen = torch.Generator().manual_seed(0)
    m, h, v = 300, 32, 1000
    x = torch.randn(m, h, dtype=torch.float64, generator=gen, requires_grad=True)
    weight = torch.randn(v, h, dtype=torch.float64, generator=gen) * 0.3
    labels = torch.randint(0, v, (m,), generator=gen)
    labels[::7] = -100  # past a sequence's end: no loss, no gradient
    row_weight = torch.rand(m, dtype=torch.float64, generator=gen)

    loss, argmax = linear_cross_entropy(x, weight, labels, row_weight, chunk=chunk)
    loss.backward()
    grad = x.grad.clone()
    x.grad = None

    logits = x @ weight.T
    ce = F.cross_entropy(logits, labels, reduction="none", ignore_index=-100)
    expected = (ce * row_weight * (labels != -100)).sum()
    expected.backward()

    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
    assert torch.allclose(grad, x.grad, atol=1e-6)
    assert grad[::7].abs().max() == 0
    assert torch.equal(argmax, logits.argmax(-1))
