"""DFlash drafter: one pass proposes a whole block from the target's hidden states.

Semantics (shared docs dflash-facts.md §1, §6; vLLM 0.32 `qwen3_dflash.py`):
- context: concat of target taps -> `fc` -> `hidden_norm`; per layer K/V = k_norm(k_proj(ctx)),
  v_proj(ctx), RoPE at the context positions; the context skips `input_layernorm`. Only context
  K/V is cached (positions < start); each draft writes the newly committed positions.
- block: embed([anchor, mask x (B-1)]) at positions start..start+B-1 -> Qwen3 layers whose keys
  are [cached context ; block] -> `norm` -> the target's `lm_head`. Slot k predicts the token at
  start+k; the anchor slot predicts nothing.
- per layer: causal or bidirectional block, full or sliding window (a key at position j is seen
  from position i iff i - j < window, and j - i < window in a bidirectional block), as
  `dflash_config.resolve()` says.
The drafter owns no embedding or lm_head: `Drafter.forward` takes the target's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from dflashctl.drafter.config import LayerSpec, Resolved, resolve
from dflashctl.engine.model import MLP, RMSNorm, apply_rope, attend, rope_cache, write_slots
from dflashctl.errors import EngineError


@dataclass
class DrafterArgs:
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    target_hidden_size: int
    num_taps: int
    mask_token_id: int
    block_size: int
    layers: list[LayerSpec]
    captured_layers: list[int]
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1e6
    max_position_embeddings: int = 4096
    attention_bias: bool = False

    @classmethod
    def from_hf_config(
        cls, cfg: dict[str, Any], num_target_layers: int, block_size: int | None = None
    ) -> DrafterArgs:
        """Read the config the way vLLM 0.32 does (a stale config breaks it the same way)."""
        r: Resolved = resolve(cfg, num_target_layers=num_target_layers, runner="v2")
        fatal = [e for e in r.engine_errors if "concatenated aux" not in e]
        if fatal:
            raise EngineError(f"drafter config rejected: {fatal[0]}")
        if r.mask_token_id is None or r.fc_layer_ids is None or r.captured_layers is None:
            raise EngineError("drafter config has no mask token or no target layer ids")
        heads = cfg["num_attention_heads"]
        block = block_size or r.block_size
        if not block:
            raise EngineError(
                "drafter config has no block_size",
                "pass --num-speculative-tokens (block size - 1)",
            )
        kept = [i for i in sorted(set(r.captured_layers)) if i <= num_target_layers]
        return cls(
            hidden_size=cfg["hidden_size"],
            intermediate_size=cfg["intermediate_size"],
            num_hidden_layers=cfg["num_hidden_layers"],
            num_attention_heads=heads,
            num_key_value_heads=cfg.get("num_key_value_heads") or heads,
            head_dim=cfg.get("head_dim") or cfg["hidden_size"] // heads,
            target_hidden_size=r.target_hidden_size or cfg["hidden_size"],
            num_taps=len(r.fc_layer_ids),
            mask_token_id=r.mask_token_id,
            block_size=block,
            layers=r.layers,
            captured_layers=kept,
            rms_norm_eps=cfg.get("rms_norm_eps", 1e-6),
            rope_theta=r.rope_theta or 1e6,
            max_position_embeddings=cfg.get("max_position_embeddings", 4096),
            attention_bias=bool(cfg.get("attention_bias", False)),
        )


class DrafterAttention(nn.Module):
    def __init__(self, a: DrafterArgs, spec: LayerSpec) -> None:
        super().__init__()
        self.n_head, self.n_kv, self.head_dim = (
            a.num_attention_heads,
            a.num_key_value_heads,
            a.head_dim,
        )
        self.causal, self.window = spec.causal, spec.window
        h = a.hidden_size
        self.q_proj = nn.Linear(h, self.n_head * self.head_dim, bias=a.attention_bias)
        self.k_proj = nn.Linear(h, self.n_kv * self.head_dim, bias=a.attention_bias)
        self.v_proj = nn.Linear(h, self.n_kv * self.head_dim, bias=a.attention_bias)
        self.o_proj = nn.Linear(self.n_head * self.head_dim, h, bias=a.attention_bias)
        self.q_norm = RMSNorm(self.head_dim, a.rms_norm_eps)
        self.k_norm = RMSNorm(self.head_dim, a.rms_norm_eps)

    def context_kv(self, ctx: Tensor, cos: Tensor, sin: Tensor) -> tuple[Tensor, Tensor]:
        # ctx: [B, C, H] (already fc + hidden_norm) -> k, v: [B, nkv, C, D]
        bsz, c, _ = ctx.shape
        k = self.k_norm(self.k_proj(ctx).view(bsz, c, self.n_kv, self.head_dim)).transpose(1, 2)
        v = self.v_proj(ctx).view(bsz, c, self.n_kv, self.head_dim).transpose(1, 2)
        return apply_rope(k, cos, sin), v

    def mask(self, q_pos: Tensor, k_pos: Tensor, block_start: Tensor | int) -> Tensor:
        """[S, K] bool: keys before the block are context; block keys obey `causal`. A window
        limits keys behind the query (i - j < window) and, for a bidirectional block, ahead of
        it too (j - i < window), as vLLM widens flash-attn's (w-1, 0) to (w-1, w-1)."""
        qp, kp = q_pos[:, None], k_pos[None, :]
        in_block = kp >= block_start
        allowed = torch.ones(qp.shape[0], kp.shape[1], dtype=torch.bool, device=q_pos.device)
        return self._limit(allowed, qp, kp, in_block)

    def _limit(self, allowed: Tensor, qp: Tensor, kp: Tensor, in_block: Tensor) -> Tensor:
        """The layer's causality inside the block and its window, on top of `allowed`."""
        if self.causal:
            allowed = allowed & (~in_block | (kp <= qp))
        if self.window is not None:
            allowed = allowed & (qp - kp < self.window)
            if not self.causal:
                allowed = allowed & (kp - qp < self.window)
        return allowed

    def mask_static(self, q_pos: Tensor, k_pos: Tensor, start: Tensor, s: int) -> Tensor:
        """`mask` over a fixed span of cache slots k_pos [L] that also holds the block itself at
        start..start+s-1 (`forward_cached`); slots from start+s on are not seen."""
        qp, kp = q_pos[:, None], k_pos[None, :]
        in_block = (kp >= start) & (kp < start + s)
        allowed = ((kp < start) | in_block).expand(qp.shape[0], -1)  # [S, L]
        return self._limit(allowed, qp, kp, in_block)

    def forward_cached(
        self,
        x: Tensor,
        cos: Tensor,
        sin: Tensor,
        cache_k: Tensor,
        cache_v: Tensor,
        q_pos: Tensor,
        mask: Tensor,
    ) -> Tensor:
        """`forward` without a `cat`: the block's K/V go into the cache at q_pos (slots past the
        committed context, which the next `write_context` overwrites) and attention reads the
        first mask.shape[-1] slots. x: [B, S, H]; cache_k/v: [B, nkv, max_seq, D]; mask: [S, L]"""
        bsz, s, _ = x.shape
        q = self.q_norm(self.q_proj(x).view(bsz, s, self.n_head, self.head_dim)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(bsz, s, self.n_kv, self.head_dim)).transpose(1, 2)
        v = self.v_proj(x).view(bsz, s, self.n_kv, self.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        write_slots(cache_k, q_pos, k)
        write_slots(cache_v, q_pos, v)
        n = mask.shape[-1]
        group = self.n_head // self.n_kv
        q = q.reshape(bsz, self.n_kv, group * s, self.head_dim)  # query heads folded per kv head
        y = attend(q, cache_k[:, :, :n], cache_v[:, :, :n], mask.repeat(group, 1))
        y = y.reshape(bsz, self.n_head, s, self.head_dim)  # a copy where the kernel wrote BSHD
        return self.o_proj(y.transpose(1, 2).reshape(bsz, s, -1))

    def forward(
        self, x: Tensor, cos: Tensor, sin: Tensor, ctx_k: Tensor, ctx_v: Tensor, mask: Tensor
    ) -> Tensor:
        # x: [B, S, H] block; ctx_k/v: [B, nkv, C, D]; mask: [S, C + S]
        bsz, s, _ = x.shape
        q = self.q_norm(self.q_proj(x).view(bsz, s, self.n_head, self.head_dim)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(bsz, s, self.n_kv, self.head_dim)).transpose(1, 2)
        v = self.v_proj(x).view(bsz, s, self.n_kv, self.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        k = torch.cat([ctx_k, k], dim=2)  # [B, nkv, C+S, D]
        v = torch.cat([ctx_v, v], dim=2)
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, enable_gqa=self.n_head != self.n_kv
        )
        return self.o_proj(y.transpose(1, 2).reshape(bsz, s, -1))


class DrafterLayer(nn.Module):
    def __init__(self, a: DrafterArgs, spec: LayerSpec) -> None:
        super().__init__()
        self.self_attn = DrafterAttention(a, spec)
        self.mlp = MLP(a.hidden_size, a.intermediate_size)
        self.input_layernorm = RMSNorm(a.hidden_size, a.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(a.hidden_size, a.rms_norm_eps)


class Drafter(nn.Module):
    """DFlashDraftModel. Weight names as in the checkpoint (`fc`, `hidden_norm`, `layers.i.*`)."""

    rope_cos: Tensor
    rope_sin: Tensor

    def __init__(self, a: DrafterArgs) -> None:
        super().__init__()
        self.args = a
        self.fc = nn.Linear(a.target_hidden_size * a.num_taps, a.hidden_size, bias=False)
        self.hidden_norm = RMSNorm(a.hidden_size, a.rms_norm_eps)
        specs = a.layers or [
            LayerSpec(i, "full_attention", False, False, None) for i in range(a.num_hidden_layers)
        ]
        self.layers = cast(
            list[DrafterLayer], nn.ModuleList(DrafterLayer(a, spec) for spec in specs)
        )
        self.norm = RMSNorm(a.hidden_size, a.rms_norm_eps)
        cos, sin = rope_cache(a.head_dim, a.max_position_embeddings, a.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.ctx_k: list[Tensor] = []
        self.ctx_v: list[Tensor] = []

    def setup_caches(self, max_seq: int, batch: int = 1, dtype: torch.dtype | None = None) -> None:
        dtype = dtype or self.fc.weight.dtype
        dev = self.fc.weight.device
        shape = (batch, self.args.num_key_value_heads, max_seq, self.args.head_dim)
        self.ctx_k = [torch.zeros(shape, dtype=dtype, device=dev) for _ in self.layers]
        self.ctx_v = [torch.zeros(shape, dtype=dtype, device=dev) for _ in self.layers]

    def project_context(self, taps: list[Tensor]) -> Tensor:
        # taps: n x [B, C, T] -> [B, C, H]
        feats = torch.cat(taps, dim=-1)
        if feats.shape[-1] != self.fc.in_features:
            raise EngineError(
                f"DFlash drafter expects {self.fc.in_features} concatenated aux hidden features "
                f"but received {feats.shape[-1]}. The drafter's target_layer_ids reference layers "
                "the target does not have, or were read from the wrong place.",
                "check the drafter with: dflashctl verify-config DRAFTER --target TARGET",
            )
        return self.hidden_norm(self.fc(feats))

    def write_context(self, taps: list[Tensor], positions: Tensor) -> None:
        """Append committed positions' context K/V to every layer's cache. positions: [C]."""
        ctx = self.project_context(taps)
        cos, sin = self.rope_cos[positions], self.rope_sin[positions]
        for i, layer in enumerate(self.layers):
            k, v = layer.self_attn.context_kv(ctx, cos, sin)
            write_slots(self.ctx_k[i], positions, k)
            write_slots(self.ctx_v[i], positions, v)

    def forward(
        self, block_ids: Tensor, start: int, embed: nn.Embedding, lm_head: nn.Module
    ) -> Tensor:
        """block_ids: [B, S] = [anchor, mask...] at positions start..start+S-1, with the context
        cache filled for positions < start. Returns logits [B, S-1, V] for slots 1..S-1."""
        s = block_ids.shape[1]
        dev = block_ids.device
        q_pos = torch.arange(start, start + s, device=dev)
        k_pos = torch.arange(0, start + s, device=dev)
        cos, sin = self.rope_cos[q_pos], self.rope_sin[q_pos]
        x = embed(block_ids)
        for i, layer in enumerate(self.layers):
            attn = layer.self_attn
            mask = attn.mask(q_pos, k_pos, start)
            h = layer.input_layernorm(x)
            x = x + attn(
                h, cos, sin, self.ctx_k[i][:, :, :start], self.ctx_v[i][:, :, :start], mask
            )
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        return lm_head(self.norm(x[:, 1:]))

    def forward_static(
        self, block_ids: Tensor, start: Tensor, length: int, embed: nn.Module, lm_head: nn.Module
    ) -> Tensor:
        """`forward` with no host synchronisation and static shapes (what a CUDA graph can
        capture): `start` is a 0-d device tensor, attention spans the first `length` cache
        slots (length >= start + S), one mask per distinct layer kind, no `cat`.
        block_ids: [B, S] -> logits [B, S-1, V]"""
        s = block_ids.shape[1]
        dev = block_ids.device
        q_pos = start + torch.arange(s, device=dev)  # [S]
        k_pos = torch.arange(length, device=dev)  # [L]
        cos, sin = self.rope_cos[q_pos], self.rope_sin[q_pos]
        masks: dict[tuple[bool, int | None], Tensor] = {}
        x = embed(block_ids)
        for i, layer in enumerate(self.layers):
            attn = layer.self_attn
            kind = (attn.causal, attn.window)
            if kind not in masks:
                masks[kind] = attn.mask_static(q_pos, k_pos, start, s)
            h = layer.input_layernorm(x)
            x = x + attn.forward_cached(
                h, cos, sin, self.ctx_k[i], self.ctx_v[i], q_pos, masks[kind]
            )
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        return lm_head(self.norm(x[:, 1:]))
