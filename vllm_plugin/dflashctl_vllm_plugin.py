"""vLLM general plugin shipped by dflashctl (installed into the vLLM venv by bin/setup-vllm).

vLLM 0.32's `DFlashQwen3Model._normalize_context_k` normalises the precomputed context keys of
all drafter layers in one `ops.rms_norm` call with a stacked [num_layers, head_dim] weight. The
CPU kernel applies row 0 of that weight to every layer, so layers 1..L-1 scale their context keys
with layer 0's `k_norm` (shared docs: vllm-cpu.md §6b). The fix normalises layer by layer.

vLLM loads general plugins in every process it starts; this one patches only when
DFLASHCTL_VLLM_KNORM_FIX=1 is set, so the same install serves patched and unpatched runs.
"""

import os


def register() -> None:
    if os.environ.get("DFLASHCTL_VLLM_KNORM_FIX") != "1":
        return
    import torch
    from vllm import _custom_ops as ops
    from vllm.logger import init_logger
    from vllm.model_executor.models import qwen3_dflash

    def _normalize_context_k_per_layer(self, all_k: torch.Tensor) -> torch.Tensor:
        # all_k: [L, num_ctx, nkv, hd]; weights: [L, hd] -> one rms_norm per layer
        out = torch.empty_like(all_k)
        for i in range(all_k.shape[0]):
            ops.rms_norm(out[i], all_k[i].contiguous(), self._k_norm_weights[i], self._rms_norm_eps)
        return out

    qwen3_dflash.DFlashQwen3Model._normalize_context_k = _normalize_context_k_per_layer
    init_logger("vllm.dflashctl_plugin").info(
        "dflashctl: applied the DFlash context k_norm fix (per-layer RMSNorm of context keys)"
    )
