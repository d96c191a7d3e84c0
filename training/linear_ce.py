"""Weighted cross-entropy through a frozen lm_head, a chunk of rows at a time; optionally mixed
with the KL divergence from the target's whole next-token distribution (distillation).

The drafter's loss reads B-1 predictions for each of N*A blocks (61,440 rows at the GPU preset)
against a 49,152-token vocabulary: materialised at once, the logits are 6 GB in bf16 and 12 GB
once cast to float32, and moving them costs more than the matrix products. Here the logits of a
chunk live only inside the forward and, recomputed, inside the backward; what is kept for the
backward is the log-sum-exp of each row. The teacher's logits (the target's own normed hidden
state at the position before each label, through the same lm_head) are made the same way.

    loss_row = (1 - alpha) * ce(label) + alpha * KL(p_teacher || softmax(logits))
    d loss_row / d logits = softmax(logits) - (1 - alpha) * one_hot(label) - alpha * p_teacher
"""

from __future__ import annotations

import torch


def _logits(rows: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return (rows.to(weight.dtype) @ weight.T).float()  # [c, V]


class LinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(  # type: ignore[override]
        ctx,
        x: torch.Tensor,  # [M, H] the drafter's normed hidden states
        weight: torch.Tensor,  # [V, H] the target's lm_head (frozen: no gradient is computed)
        labels: torch.Tensor,  # [M] token ids (any value where row_weight is 0)
        row_weight: torch.Tensor,  # [M] float32: each row's share of the loss
        chunk: int,
        teacher: torch.Tensor | None,  # [M, H] the target's normed hidden states, or None
        alpha: float,  # the KL's share of each row's loss (0 without a teacher)
    ) -> tuple[torch.Tensor, torch.Tensor]:
        m = x.shape[0]
        lse = torch.empty(m, device=x.device, dtype=torch.float32)
        loss = torch.empty(m, device=x.device, dtype=torch.float32)
        argmax = torch.empty(m, device=x.device, dtype=torch.long)
        for lo in range(0, m, chunk):
            hi = min(lo + chunk, m)
            logits = _logits(x[lo:hi], weight)
            lse[lo:hi] = torch.logsumexp(logits, -1)
            ce = lse[lo:hi] - logits.gather(1, labels[lo:hi, None]).squeeze(1)
            if teacher is not None:
                log_pt = torch.log_softmax(_logits(teacher[lo:hi], weight), -1)
                # KL(pt || q) = sum pt (log pt - logits + lse)
                kl = (log_pt.exp() * (log_pt - logits)).sum(-1) + lse[lo:hi]
                ce = (1 - alpha) * ce + alpha * kl
            loss[lo:hi] = ce
            argmax[lo:hi] = logits.argmax(-1)
        ctx.save_for_backward(x, weight, labels, row_weight, lse, teacher)
        ctx.chunk, ctx.alpha = chunk, alpha
        ctx.mark_non_differentiable(argmax)
        return (loss * row_weight).sum(), argmax

    @staticmethod
    def backward(ctx, grad: torch.Tensor, _argmax_grad: torch.Tensor | None):  # type: ignore[override]
        x, weight, labels, row_weight, lse, teacher = ctx.saved_tensors
        hard = 1.0 - ctx.alpha if teacher is not None else 1.0
        dx = torch.empty_like(x)
        for lo in range(0, x.shape[0], ctx.chunk):
            hi = min(lo + ctx.chunk, x.shape[0])
            p = torch.exp_(_logits(x[lo:hi], weight).sub_(lse[lo:hi, None]))  # softmax, in place
            rows = torch.arange(hi - lo, device=x.device)
            p[rows, labels[lo:hi]] -= hard  # d ce / d logits = softmax - one_hot
            if teacher is not None:
                p.sub_(torch.softmax(_logits(teacher[lo:hi], weight), -1), alpha=ctx.alpha)
            p.mul_((row_weight[lo:hi] * grad)[:, None])
            dx[lo:hi] = (p.to(weight.dtype) @ weight).to(x.dtype)  # [c, H]
        return dx, None, None, None, None, None, None


def linear_cross_entropy(
    x: torch.Tensor,
    weight: torch.Tensor,
    labels: torch.Tensor,
    row_weight: torch.Tensor,
    chunk: int = 8192,
    teacher: torch.Tensor | None = None,
    alpha: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """x [M, H], weight [V, H], labels [M] (-100: no loss), row_weight [M] -> (sum over rows of
    row_weight * loss, argmax [M]): the logits of at most `chunk` rows exist at a time. The
    loss is the cross-entropy on `labels`, or with `teacher` [M, H] (the target's normed hidden
    states that predicted each label) and alpha > 0 that mixed with KL(teacher || drafter)."""
    keep = labels != -100
    row_weight = torch.where(keep, row_weight.float(), 0.0)
    if teacher is not None and alpha <= 0.0:
        teacher = None
    return LinearCrossEntropy.apply(
        x, weight, labels.clamp(min=0), row_weight, chunk, teacher, alpha
    )
