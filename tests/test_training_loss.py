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


@pytest.mark.parametrize("chunk, alpha", [(1, 0.5), (64, 1.0), (4096, 0.25)])
def test_distillation_mixes_the_kl_from_the_teachers_distribution(chunk: int, alpha: float) -> None:
    """With the target's own hidden states as a teacher, each row's loss is (1 - alpha) * ce +
    alpha * KL(teacher's softmax || drafter's), and its gradient is that of the whole-logits
    computation; the teacher gets none (the target is frozen)."""
    gen = torch.Generator().manual_seed(1)
    m, h, v = 300, 32, 1000
    x = torch.randn(m, h, dtype=torch.float64, generator=gen, requires_grad=True)
    teacher = torch.randn(m, h, dtype=torch.float64, generator=gen)
    weight = torch.randn(v, h, dtype=torch.float64, generator=gen) * 0.3
    labels = torch.randint(0, v, (m,), generator=gen)
    labels[::5] = -100
    row_weight = torch.rand(m, dtype=torch.float64, generator=gen)

    loss, argmax = linear_cross_entropy(
        x, weight, labels, row_weight, chunk=chunk, teacher=teacher, alpha=alpha
    )
    loss.backward()
    grad = x.grad.clone()
    x.grad = None

    logits = x @ weight.T
    log_q = F.log_softmax(logits, -1)
    log_t = F.log_softmax(teacher @ weight.T, -1)
    kl = F.kl_div(log_q, log_t, log_target=True, reduction="none").sum(-1)
    ce = F.cross_entropy(logits, labels.clamp(min=0), reduction="none")
    keep = labels != -100
    expected = (((1 - alpha) * ce + alpha * kl) * row_weight * keep).sum()
    expected.backward()

    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
    assert torch.allclose(grad, x.grad, atol=1e-6)
    assert grad[::5].abs().max() == 0
    assert torch.equal(argmax, logits.argmax(-1))
    # the KL alone is zero where the drafter's rows are the teacher's, and so is its gradient
    same = teacher.clone().requires_grad_(True)
    only_kl, _ = linear_cross_entropy(same, weight, labels, row_weight, teacher=teacher, alpha=1.0)
    only_kl.backward()
    assert abs(only_kl.item()) < 1e-4 and same.grad.abs().max() < 1e-5  # float32 logits


def test_the_teacher_rows_are_what_the_target_predicted_each_label_from() -> None:
    """drafter_forward_train(teacher=True) on the real demo pair: through the lm_head, each
    label's teacher row gives the target's own logits at the position before that label (its
    next-token distribution there); the drafter's rows and the labels do not change."""
    from support.pairs import DEMO_DRAFTER, demo_target

    from dflashctl.engine.generate import Engine
    from training.demo_pair import drafter_forward_train

    eng = Engine.load(demo_target(), DEMO_DRAFTER, max_model_len=256)
    assert eng.drafter is not None
    text = "def is_prime(n):\n    return n > 1 and all(n % d for d in range(2, n))\n"
    seq = torch.tensor([eng.tokenizer.encode(text)])  # [1, S]
    s = seq.shape[1]
    lens, anchors = torch.tensor([s]), torch.tensor([[1, s - 8, s - 3]])  # the last runs past S
    with torch.no_grad():
        plain_h, plain_l, none = drafter_forward_train(eng.drafter, eng.target, seq, lens, anchors)
        hidden, labels, rows = drafter_forward_train(
            eng.drafter, eng.target, seq, lens, anchors, teacher=True
        )
        full = eng.target(seq)[0][0]  # [S, V] the target's logits at every position
    assert none is None and rows is not None and torch.equal(labels, plain_l)
    assert torch.allclose(hidden, plain_h)
    b = eng.drafter.args.block_size
    for a_i, anchor in enumerate(anchors[0].tolist()):
        for k in range(b - 1):
            p = anchor + 1 + k  # the label's position
            if p >= s:
                assert labels[0, a_i, k] == -100
                continue
            assert labels[0, a_i, k] == seq[0, p]
            got = eng.target.lm_head(rows[0, a_i, k])
            assert torch.allclose(got, full[p - 1], atol=1e-3), (anchor, k)
