"""Weighted cross-entropy through a frozen lm_head, a chunk of rows at a time.

The drafter's loss reads B-1 predictions for each of N*A blocks (61,440 rows at the GPU preset)
against a 49,152-token vocabulary: materialised at once, the logits are 6 GB in bf16 and 12 GB
once cast to float32, and moving them costs more than the matrix products. Here the logits of a
chunk live only inside the forward and, recomputed, inside the backward; what is kept for the
backward is the log-sum-exp of each row.
"""

from __future__ import annotations

import torch


class LinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(  # type: ignore[override]
        ctx,
        x: torch.Tensor,  # [M, H] the drafter's normed hidden states
        weight: torch.Tensor,  # [V, H] the target's lm_head (frozen: no gradient is computed)
        labels: torch.Tensor,  # [M] token ids (any value where row_weight is 0)
        row_weight: torch.Tensor,  # [M] float32: each row's share of the loss
        chunk: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        m = x.shape[0]
        lse = torch.empty(m, device=x.device, dtype=torch.float32)
        ce = torch.empty(m, device=x.device, dtype=torch.float32)
        argmax = torch.empty(m, device=x.device, dtype=torch.long)
        for lo in range(0, m, chunk):
            hi = min(lo + chunk, m)
            logits = (x[lo:hi].to(weight.dtype) @ weight.T).float()  # [c, V]
            lse[lo:hi] = torch.logsumexp(logits, -1)
            ce[lo:hi] = lse[lo:hi] - logits.gather(1, labels[lo:hi, None]).squeeze(1)
            argmax[lo:hi] = logits.argmax(-1)
        ctx.save_for_backward(x, weight, labels, row_weight, lse)
        ctx.chunk = chunk
        ctx.mark_non_differentiable(argmax)
        return (ce * row_weight).sum(), argmax

    @staticmethod
    def backward(ctx, grad: torch.Tensor, _argmax_grad: torch.Tensor | None):  # type: ignore[override]
        x, weight, labels, row_weight, lse = ctx.saved_tensors
        dx = torch.empty_like(x)
        for lo in range(0, x.shape[0], ctx.chunk):
            hi = min(lo + ctx.chunk, x.shape[0])
            logits = (x[lo:hi].to(weight.dtype) @ weight.T).float()  # [c, V]
            p = torch.exp_(logits.sub_(lse[lo:hi, None]))  # softmax, in place
            rows = torch.arange(hi - lo, device=x.device)
            p[rows, labels[lo:hi]] -= 1.0  # d ce / d logits = softmax - one_hot
            p.mul_((row_weight[lo:hi] * grad)[:, None])
            dx[lo:hi] = (p.to(weight.dtype) @ weight).to(x.dtype)  # [c, H]
        return dx, None, None, None, None


def linear_cross_entropy(
    x: torch.Tensor,
    weight: torch.Tensor,
    labels: torch.Tensor,
    row_weight: torch.Tensor,
    chunk: int = 8192,
) -> tuple[torch.Tensor, torch.Tensor]:
    """x [M, H], weight [V, H], labels [M] (-100: no loss), row_weight [M] -> (sum over rows of
    row_weight * ce, argmax [M]): the logits of at most `chunk` rows exist at a time."""
    keep = labels != -100
    row_weight = torch.where(keep, row_weight.float(), 0.0)
    return LinearCrossEntropy.apply(x, weight, labels.clamp(min=0), row_weight, chunk)
