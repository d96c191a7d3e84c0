"""Dense decoder-only target models, gpt-fast style: one config dataclass, a static KV cache,
small modules.

Three Hugging Face architectures differ here only in their attention projections (`ARCHS`):
- `qwen3` (`Qwen3ForCausalLM`): per-head RMSNorm on q and k (`q_norm`, `k_norm`), biases on all
  four projections iff `attention_bias`;
- `llama` (`LlamaForCausalLM`): no q/k norm, biases iff `attention_bias`, MLP bias iff `mlp_bias`;
- `qwen2` (`Qwen2ForCausalLM`): no q/k norm, biases on q/k/v always and never on o.
Parameter names follow Hugging Face minus the leading `model.` (see weights.py), so checkpoints
load with a near-identity map. `forward` also returns the hidden states a DFlash
drafter taps: `taps` are *capture indices* in vLLM's convention — index i is the residual stream
at the input of decoder layer i (i == num_layers: the final pre-norm state), i.e. the output of
0-based layer i-1 = HF `hidden_states[i]`.

References: transformers `modeling_qwen3.py`, `modeling_llama.py`, `modeling_qwen2.py`;
gpt-fast `model.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from dflashctl.errors import EngineError


class UnsupportedTarget(EngineError):
    """The engine has no native implementation of this target (generate.Engine then runs it
    through transformers, engine/reference.py)."""


# model_type -> the attention projections' biases: "flag" = all four iff `attention_bias`;
# "qkv" = q/k/v always, o never (Qwen2). qk_norm: per-head RMSNorm on q and k.
ARCHS: dict[str, dict[str, Any]] = {
    "qwen3": {"qk_norm": True, "bias": "flag", "class": "Qwen3ForCausalLM"},
    "llama": {"qk_norm": False, "bias": "flag", "class": "LlamaForCausalLM"},
    "qwen2": {"qk_norm": False, "bias": "qkv", "class": "Qwen2ForCausalLM"},
}
ROPE_TYPES = ("default", "linear", "llama3")


@dataclass
class ModelArgs:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1e6
    max_position_embeddings: int = 4096
    tie_word_embeddings: bool = False
    attention_bias: bool = False  # q/k/v bias
    o_bias: bool | None = None  # None: as attention_bias
    mlp_bias: bool = False
    qk_norm: bool = True
    model_type: str = "qwen3"
    rope_scaling: dict[str, Any] | None = None  # rope_parameters beyond theta (linear, llama3)
    eos_token_ids: list[int] = field(default_factory=list)

    @classmethod
    def from_hf_config(cls, cfg: dict[str, Any]) -> ModelArgs:
        text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else cfg
        assert isinstance(text, dict)
        model_type = model_type_of(cfg)
        arch = ARCHS[model_type]
        heads = text["num_attention_heads"]
        rope = text.get("rope_parameters") or text.get("rope_scaling") or {}
        theta = rope.get("rope_theta", text.get("rope_theta", 1e6))
        rope_type = rope.get("rope_type", rope.get("type", "default"))
        if rope_type not in ROPE_TYPES:
            raise UnsupportedTarget(
                f"RoPE type {rope_type!r} is not implemented by the bundled engine "
                f"(it implements {', '.join(ROPE_TYPES)})"
            )
        if text.get("use_sliding_window"):
            raise UnsupportedTarget(
                "sliding-window targets are not implemented natively by the bundled engine"
            )
        eos = text.get("eos_token_id", cfg.get("eos_token_id"))
        bias = bool(text.get("attention_bias", False))
        return cls(
            vocab_size=text["vocab_size"],
            hidden_size=text["hidden_size"],
            intermediate_size=text["intermediate_size"],
            num_hidden_layers=text["num_hidden_layers"],
            num_attention_heads=heads,
            num_key_value_heads=text.get("num_key_value_heads") or heads,
            head_dim=text.get("head_dim") or text["hidden_size"] // heads,
            rms_norm_eps=text.get("rms_norm_eps", 1e-6),
            rope_theta=float(theta or 1e6),
            max_position_embeddings=text.get("max_position_embeddings", 4096),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            attention_bias=True if arch["bias"] == "qkv" else bias,
            o_bias=False if arch["bias"] == "qkv" else bias,
            mlp_bias=bool(text.get("mlp_bias", False)),
            qk_norm=arch["qk_norm"],
            model_type=model_type,
            rope_scaling=dict(rope) if rope_type != "default" else None,
            eos_token_ids=[eos] if isinstance(eos, int) else list(eos or []),
        )


def model_type_of(cfg: dict[str, Any]) -> str:
    """The architecture a target config names (`model_type`, else its `architectures`)."""
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else cfg
    assert isinstance(text, dict)
    model_type = text.get("model_type") or cfg.get("model_type")
    if model_type not in ARCHS:
        by_class = {a["class"]: name for name, a in ARCHS.items()}
        archs = [a for a in cfg.get("architectures") or [] if a in by_class]
        if archs and model_type is None:
            return by_class[archs[0]]
        raise UnsupportedTarget(
            f"the bundled engine does not implement {model_type or 'this'!r} targets "
            f"(it implements {', '.join(sorted(ARCHS))})",
            "serve this target with vLLM or SGLang: dflashctl serve --engine vllm --model ...",
        )
    return str(model_type)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rope_cache(
    head_dim: int, max_pos: int, theta: float, scaling: dict[str, Any] | None = None
) -> tuple[Tensor, Tensor]:
    """cos/sin tables [max_pos, head_dim] for neox-style (rotate-half) RoPE, as all three
    architectures use; `scaling` is a `rope_parameters` mapping of type linear or llama3."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    kind = (scaling or {}).get("rope_type", (scaling or {}).get("type", "default"))
    if kind == "linear":
        inv_freq = inv_freq / float(scaling["factor"])  # type: ignore[index]
    elif kind == "llama3":
        inv_freq = _llama3_frequencies(inv_freq, scaling or {})
    t = torch.arange(max_pos, dtype=torch.float64)
    freqs = torch.outer(t, inv_freq)  # [max_pos, head_dim/2]
    emb = torch.cat([freqs, freqs], dim=-1)  # [max_pos, head_dim]
    return emb.cos().float(), emb.sin().float()


def _llama3_frequencies(inv_freq: Tensor, p: dict[str, Any]) -> Tensor:
    """Llama 3.1's frequency-dependent scaling: long wavelengths / factor, short ones kept, a
    smooth blend between (transformers `_compute_llama3_parameters`)."""
    factor, low = float(p["factor"]), float(p["low_freq_factor"])
    high = float(p["high_freq_factor"])
    old_len = float(p["original_max_position_embeddings"])
    wavelen = 2 * torch.pi / inv_freq
    scaled = torch.where(wavelen > old_len / low, inv_freq / factor, inv_freq)
    smooth = (old_len / wavelen - low) / (high - low)
    blended = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= old_len / high) & (wavelen <= old_len / low)
    return torch.where(medium, blended, scaled)


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    # x: [B, H, S, D]; cos/sin: [S, D]
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return (x * cos + rotated * sin).to(x.dtype)


class KVCache(nn.Module):
    """Static cache [B, n_kv, max_seq, D]; `update` writes at `input_pos` and returns the views."""

    k: Tensor
    v: Tensor

    def __init__(self, batch: int, n_kv: int, max_seq: int, head_dim: int, dtype: torch.dtype):
        super().__init__()
        shape = (batch, n_kv, max_seq, head_dim)
        self.register_buffer("k", torch.zeros(shape, dtype=dtype), persistent=False)
        self.register_buffer("v", torch.zeros(shape, dtype=dtype), persistent=False)

    def update(self, input_pos: Tensor, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        # input_pos: [S]; k, v: [B, n_kv, S, D]
        write_slots(self.k, input_pos, k)
        write_slots(self.v, input_pos, v)
        return self.k, self.v


def write_slots(cache: Tensor, slots: Tensor, x: Tensor) -> None:
    """cache[:, :, slots] = x in place. cache: [B, nkv, max_seq, D]; slots: [S]; x: [B, nkv, S, D].
    Under torch.compile an indexed store: one scatter into the cache, fused with what produced x
    (not a copy of the whole cache); eagerly `index_copy_`, which costs the host less."""
    if torch.compiler.is_compiling():
        cache[:, :, slots] = x.to(cache.dtype)
    else:
        cache.index_copy_(2, slots, x.to(cache.dtype))


def attend(q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> Tensor:
    """Attention of a few query rows over a span of cache slots.
    q: [B, nkv, R, D] (a kv head's query heads folded into its rows); k, v: [B, nkv, L, D];
    mask: [R, L] or [B, 1, R, L] bool (True = attend) -> [B, nkv, R, D].

    Eagerly: SDPA. Under torch.compile: the plain product form, which Inductor turns into two
    batched products reading K and V once and one fused mask + softmax, instead of a prefill
    kernel's 64 x 128 tiles for a handful of rows. The products in the cache's dtype (float32
    accumulation), the scaling and softmax in float32, as transformers' eager attention does:
    an upcast copy of K for a float32 product cost more than the product (H100 profile,
    docs/performance.md)."""
    if not torch.compiler.is_compiling():
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    scores = torch.matmul(q, k.transpose(-1, -2)).float() * q.shape[-1] ** -0.5
    probs = scores.masked_fill(~mask, float("-inf")).softmax(-1)  # [B, nkv, R, L]
    return torch.matmul(probs.to(v.dtype), v)


class Attention(nn.Module):
    def __init__(self, a: ModelArgs) -> None:
        super().__init__()
        self.n_head, self.n_kv, self.head_dim = (
            a.num_attention_heads,
            a.num_key_value_heads,
            a.head_dim,
        )
        o_bias = a.attention_bias if a.o_bias is None else a.o_bias
        self.q_proj = nn.Linear(a.hidden_size, self.n_head * self.head_dim, bias=a.attention_bias)
        self.k_proj = nn.Linear(a.hidden_size, self.n_kv * self.head_dim, bias=a.attention_bias)
        self.v_proj = nn.Linear(a.hidden_size, self.n_kv * self.head_dim, bias=a.attention_bias)
        self.o_proj = nn.Linear(self.n_head * self.head_dim, a.hidden_size, bias=o_bias)
        # Qwen3 only: per-head RMSNorm on q and k (Llama and Qwen2 have none)
        self.q_norm = RMSNorm(self.head_dim, a.rms_norm_eps) if a.qk_norm else nn.Identity()
        self.k_norm = RMSNorm(self.head_dim, a.rms_norm_eps) if a.qk_norm else nn.Identity()
        self.kv_cache: KVCache | None = None
        self.wqkv: nn.Linear | None = None  # q, k and v in one product, after `fuse()`

    def fuse(self) -> None:
        """Replace q/k/v_proj by one Linear (one matrix product per step instead of three)."""
        self.wqkv = cat_linears(self.q_proj, self.k_proj, self.v_proj)
        del self.q_proj, self.k_proj, self.v_proj

    def forward(
        self, x: Tensor, cos: Tensor, sin: Tensor, mask: Tensor | None, input_pos: Tensor | None
    ) -> Tensor:
        # x: [B, S, H]; cos/sin: [S, D] or [B, 1, S, D]; mask: [S, K] or [B, 1, S, K] bool
        # (True = attend), or None = causal
        bsz, seqlen, _ = x.shape
        if self.wqkv is not None:
            kv = self.n_kv * self.head_dim
            q, k, v = self.wqkv(x).split([self.n_head * self.head_dim, kv, kv], dim=-1)
        else:
            q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        q = q.view(bsz, seqlen, self.n_head, self.head_dim)
        k = k.view(bsz, seqlen, self.n_kv, self.head_dim)
        v = v.view(bsz, seqlen, self.n_kv, self.head_dim)
        q = self.q_norm(q).transpose(1, 2)  # [B, nh, S, D]
        k = self.k_norm(k).transpose(1, 2)  # [B, nkv, S, D]
        v = v.transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if self.kv_cache is not None and input_pos is not None:
            k, v = self.kv_cache.update(input_pos, k, v)
            assert mask is not None
            k, v = k[:, :, : mask.shape[-1]], v[:, :, : mask.shape[-1]]
        group = self.n_head // self.n_kv
        if mask is not None:
            # the query heads that share a kv head become extra query rows of it: no copy of
            # K/V per query head. q: [B, nkv, group*S, D]; row g*S + s is head kv*group + g.
            q = q.reshape(bsz, self.n_kv, group * seqlen, self.head_dim)
            if group > 1:
                mask = mask.repeat(group, 1) if mask.dim() == 2 else mask.repeat(1, 1, group, 1)
            y = attend(q, k, v, mask)
            y = y.reshape(bsz, self.n_head, seqlen, self.head_dim)  # a copy where SDPA wrote BSHD
        else:
            y = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, is_causal=mask is None, enable_gqa=group > 1
            )
        return self.o_proj(y.transpose(1, 2).reshape(bsz, seqlen, -1))


def cat_linears(*linears: nn.Linear) -> nn.Linear:
    """One Linear whose output is the outputs of `linears` side by side (same input)."""
    w = torch.cat([lin.weight.detach() for lin in linears])
    has_bias = linears[0].bias is not None
    out = nn.Linear(w.shape[1], w.shape[0], bias=has_bias, device=w.device, dtype=w.dtype)
    out.weight = nn.Parameter(w, requires_grad=False)
    if has_bias:
        out.bias = nn.Parameter(
            torch.cat([lin.bias.detach() for lin in linears if lin.bias is not None]),
            requires_grad=False,
        )
    return out


class MLP(nn.Module):
    def __init__(self, hidden: int, intermediate: int, bias: bool = False) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=bias)
        self.up_proj = nn.Linear(hidden, intermediate, bias=bias)
        self.down_proj = nn.Linear(intermediate, hidden, bias=bias)
        self.w13: nn.Linear | None = None  # gate and up in one product, after `fuse()`

    def fuse(self) -> None:
        self.w13 = cat_linears(self.gate_proj, self.up_proj)
        del self.gate_proj, self.up_proj

    def forward(self, x: Tensor) -> Tensor:
        if self.w13 is not None:
            gate, up = self.w13(x).chunk(2, dim=-1)
            return self.down_proj(F.silu(gate) * up)
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def fuse_projections(model: nn.Module) -> None:
    """Fuse every target attention's q/k/v and every MLP's gate/up (inference only: the
    weights are no longer trainable and the module names change)."""
    for module in list(model.modules()):
        if isinstance(module, Attention | MLP):
            module.fuse()


class DecoderLayer(nn.Module):
    def __init__(self, a: ModelArgs) -> None:
        super().__init__()
        self.self_attn = Attention(a)
        self.mlp = MLP(a.hidden_size, a.intermediate_size, a.mlp_bias)
        self.input_layernorm = RMSNorm(a.hidden_size, a.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(a.hidden_size, a.rms_norm_eps)

    def forward(
        self, x: Tensor, cos: Tensor, sin: Tensor, mask: Tensor | None, input_pos: Tensor | None
    ) -> Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask, input_pos)
        return x + self.mlp(self.post_attention_layernorm(x))


class Transformer(nn.Module):
    """Qwen3 / Llama / Qwen2 ForCausalLM (`ModelArgs.model_type`).
    `forward(ids [B,S], input_pos [S] | None)` -> (logits, taps)."""

    rope_cos: Tensor
    rope_sin: Tensor

    def __init__(self, a: ModelArgs) -> None:
        super().__init__()
        self.args = a
        self.embed_tokens = nn.Embedding(a.vocab_size, a.hidden_size)
        self.layers = cast(
            list[DecoderLayer], nn.ModuleList(DecoderLayer(a) for _ in range(a.num_hidden_layers))
        )
        self.norm = RMSNorm(a.hidden_size, a.rms_norm_eps)
        self.lm_head = nn.Linear(a.hidden_size, a.vocab_size, bias=False)
        if a.tie_word_embeddings:
            self.lm_head.weight = self.embed_tokens.weight
        cos, sin = rope_cache(a.head_dim, a.max_position_embeddings, a.rope_theta, a.rope_scaling)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.max_seq = 0

    def setup_caches(self, max_seq: int, batch: int = 1, dtype: torch.dtype | None = None) -> None:
        dtype = dtype or self.embed_tokens.weight.dtype
        device = self.embed_tokens.weight.device
        self.max_seq = max_seq
        for layer in self.layers:
            layer.self_attn.kv_cache = KVCache(
                batch, self.args.num_key_value_heads, max_seq, self.args.head_dim, dtype
            ).to(device)

    def forward(
        self,
        ids: Tensor,
        input_pos: Tensor | None = None,
        taps: tuple[int, ...] = (),
        mask: Tensor | None = None,
        rope_pos: Tensor | None = None,
        last_only: bool = False,
    ) -> tuple[Tensor, list[Tensor]]:
        """ids: [B, S]; input_pos: [S] positions = cache slots (None = training, no cache,
        causal).

        With a cache, `mask` [S, K] (or [B, 1, S, K]) says which of the first K cache slots each
        query sees; by default plain causal over positions. `rope_pos` [B, S] gives each row its
        own RoPE positions (left-padded batches; the cache slots stay `input_pos`). Returns logits
        [B, S, V] ([B, 1, V] for the last position only if `last_only`: a prefill's lm_head) and
        one [B, S, H] tensor per capture index in `taps` (vLLM order: the residual entering
        layer i).
        """
        x = self.embed_tokens(ids)
        if input_pos is None:
            positions = torch.arange(ids.shape[1], device=ids.device)
        else:
            positions = input_pos
            if mask is None:
                end = int(positions[-1]) + 1
                mask = torch.arange(end, device=ids.device)[None, :] <= positions[:, None]
        if rope_pos is not None:
            cos, sin = self.rope_cos[rope_pos][:, None], self.rope_sin[rope_pos][:, None]
        else:
            cos, sin = self.rope_cos[positions], self.rope_sin[positions]
        captured: dict[int, Tensor] = {}
        for i, layer in enumerate(self.layers):
            if i in taps:
                captured[i] = x
            x = layer(x, cos, sin, mask, input_pos)
        n = len(self.layers)
        if n in taps:
            captured[n] = x
        logits = self.lm_head(self.norm(x[:, -1:] if last_only else x))
        return logits, [captured[i] for i in taps if i in captured]
