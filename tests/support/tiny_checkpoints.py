"""Tiny random checkpoints for the engine tests, written the way real ones are.

- `write_target`: a `Qwen3ForCausalLM` built and saved by transformers itself (`save_pretrained`,
  optionally sharded with `model.safetensors.index.json`), with `rope_parameters` or the legacy
  top-level `rope_theta`, tied or untied embeddings, GQA; plus a byte-level tokenizer, a chat
  template and `generation_config.json`, so the server can load it.
- `write_drafter`: a DFlash drafter checkpoint (`config.json` + `model.safetensors`) with z-lab's
  weight names (no `model.` prefix, no embedding or lm_head) and random weights.

Weights are drawn larger than transformers' init (std 0.02 makes every logit nearly equal, which
would hide mistakes), and every RMSNorm weight is perturbed away from 1.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

VOCAB = 300  # model rows; the tokenizer uses 256 bytes + 4 specials, the rest is padding
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|mask|>"]
ENDOFTEXT, IM_START, IM_END, MASK = 256, 257, 258, 259

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def randomize_(module: torch.nn.Module, seed: int, std: float = 0.3) -> None:
    """Redraw every parameter: matrices ~ N(0, std/sqrt(fan_in)·4), norms ~ 1 + N(0, 0.1)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.ndim == 1 and "norm" in name:
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
            elif p.ndim == 1:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            elif "embed" in name:
                p.copy_(torch.randn(p.shape, generator=g))
            else:
                p.copy_(std * torch.randn(p.shape, generator=g) * (4 / p.shape[1]) ** 0.5)


def write_tokenizer(out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(SPECIALS)
    assert tok.token_to_id("<|mask|>") == MASK
    tok.save(str(out / "tokenizer.json"))
    (out / "chat_template.jinja").write_text(CHAT_TEMPLATE)


def target_config(**over: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "vocab_size": VOCAB,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 3,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "max_position_embeddings": 512,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": False,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
        "eos_token_id": IM_END,
        "pad_token_id": ENDOFTEXT,
    }
    cfg.update(over)
    return cfg


def build_hf_target(cfg: dict[str, Any], seed: int = 0, arch: str = "qwen3") -> Any:
    """A transformers `{Qwen3,Llama,Qwen2}ForCausalLM` with the test's random weights, in eval
    mode."""
    import transformers

    prefix = {"qwen3": "Qwen3", "llama": "Llama", "qwen2": "Qwen2", "qwen3_moe": "Qwen3Moe",
              "mistral": "Mistral"}[arch]  # fmt: skip
    config_cls = getattr(transformers, f"{prefix}Config")
    model_cls = getattr(transformers, f"{prefix}ForCausalLM")
    model = model_cls(config_cls(**cfg))
    randomize_(model, seed)
    if cfg.get("tie_word_embeddings"):
        model.tie_weights()
    return model.eval()


def write_target(
    out: Path,
    *,
    seed: int = 0,
    rope_form: str = "parameters",
    max_shard_size: str | None = None,
    arch: str = "qwen3",
    **over: Any,
) -> Any:
    """Save a random Qwen3 (or Llama, Qwen2: `arch`) target with transformers; returns the HF
    model (for oracles).

    rope_form: "parameters" (transformers v5 `rope_parameters`) or "theta" (legacy top-level
    `rope_theta`, rewritten into config.json after saving).
    """
    cfg = target_config(**over)
    model = build_hf_target(cfg, seed, arch)
    out.mkdir(parents=True, exist_ok=True)
    kwargs = {"max_shard_size": max_shard_size} if max_shard_size else {}
    model.save_pretrained(out, **kwargs)
    if rope_form == "theta":
        path = out / "config.json"
        saved = json.loads(path.read_text())
        theta = saved.pop("rope_parameters")["rope_theta"]
        saved["rope_theta"] = theta
        path.write_text(json.dumps(saved, indent=2))
    write_tokenizer(out)
    return model


# ------------------------------------------------------------------------------------ drafter


def drafter_config(**over: Any) -> dict[str, Any]:
    """A legacy-dialect DFlash config (dflash-facts.md §2) for the tiny target; an override of
    None removes the key."""
    cfg: dict[str, Any] = {
        "architectures": ["DFlashDraftModel"],
        "model_type": "qwen3",
        "vocab_size": VOCAB,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "hidden_act": "silu",
        "max_position_embeddings": 512,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "attention_bias": False,
        "block_size": 5,
        "num_target_layers": 3,
        "dflash_config": {"mask_token_id": MASK, "target_layer_ids": [0, 2]},
        "layer_types": ["full_attention", "full_attention"],
        "sliding_window": None,
        "use_sliding_window": False,
        "tie_word_embeddings": False,
    }
    cfg.update(over)
    return {k: v for k, v in cfg.items() if not (k in over and v is None)}


def drafter_state(cfg: dict[str, Any], seed: int = 1) -> dict[str, torch.Tensor]:
    """Random drafter weights with z-lab's names and shapes (dflash-facts.md §7)."""
    h, inter = cfg["hidden_size"], cfg["intermediate_size"]
    nh, nkv, d = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    dfc = cfg.get("dflash_config") or {}
    n_taps = len(dfc.get("target_layer_ids") or cfg.get("target_layer_ids") or [])
    t_hidden = cfg.get("target_hidden_size") or h
    g = torch.Generator().manual_seed(seed)

    def mat(rows: int, cols: int) -> torch.Tensor:
        return 0.3 * torch.randn(rows, cols, generator=g) * (4 / cols) ** 0.5

    def norm(n: int) -> torch.Tensor:
        return 1 + 0.1 * torch.randn(n, generator=g)

    state = {"fc.weight": mat(h, t_hidden * n_taps), "hidden_norm.weight": norm(h)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"layers.{i}."
        state |= {
            p + "input_layernorm.weight": norm(h),
            p + "post_attention_layernorm.weight": norm(h),
            p + "self_attn.q_proj.weight": mat(nh * d, h),
            p + "self_attn.k_proj.weight": mat(nkv * d, h),
            p + "self_attn.v_proj.weight": mat(nkv * d, h),
            p + "self_attn.o_proj.weight": mat(h, nh * d),
            p + "self_attn.q_norm.weight": norm(d),
            p + "self_attn.k_norm.weight": norm(d),
            p + "mlp.gate_proj.weight": mat(inter, h),
            p + "mlp.up_proj.weight": mat(inter, h),
            p + "mlp.down_proj.weight": mat(h, inter),
        }
    state["norm.weight"] = norm(h)
    return state


def write_drafter(
    out: Path, *, seed: int = 1, state: dict[str, torch.Tensor] | None = None, **over: Any
) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    from safetensors.torch import save_file

    cfg = drafter_config(**over)
    state = state if state is not None else drafter_state(cfg, seed)
    out.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in state.items()}, str(out / "model.safetensors"))
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    return cfg, state


# ------------------------------------------------------------------------------ accepting pair

ACCEPT_CHAT = [{"role": "user", "content": "Write a function is_prime."}]


def write_accepting_pair(root: Path) -> tuple[Path, Path]:
    """A random pair whose drafter is sometimes right, so speculation really accepts tokens.

    The random target (seed 6) falls into repeating one token on ACCEPT_CHAT. The drafter's
    attention and MLP outputs are zeroed, so each slot keeps the mask token's embedding and
    proposes argmax(lm_head(norm(embed(mask)))): the mask token is chosen among the vocabulary
    so that this is the target's repeated token. Proposals are wrong before the repetition
    starts and right after it, through the real drafter, verifier and caches.
    """
    from dflashctl.engine.generate import Engine

    t_dir, d_dir = root / "target", root / "drafter"
    write_target(t_dir, seed=6, max_position_embeddings=8192)
    plain = Engine.load(t_dir, None, max_model_len=512)
    plain.eos_ids = set()
    chat = plain.generate(plain.tokenizer.apply_chat_template(ACCEPT_CHAT), 200).tokens
    fixed = chat[-1]
    assert set(chat[-60:]) == {fixed}, "the target no longer repeats a token on ACCEPT_CHAT"

    cfg = drafter_config()
    state = drafter_state(cfg, seed=1)
    for key in state:
        if key.endswith(("o_proj.weight", "down_proj.weight")):
            state[key].zero_()
    write_drafter(d_dir, state=state)
    probe = Engine.load(t_dir, d_dir, max_model_len=64)
    with torch.no_grad():
        proposal = probe.target.lm_head(probe.drafter.norm(probe.target.embed_tokens.weight))
    masks = [m for m in range(VOCAB) if int(proposal[m].argmax()) == fixed]
    assert masks, "no mask token makes the drafter propose the repeated token"
    dfc = {"mask_token_id": masks[0], "target_layer_ids": [0, 2]}
    write_drafter(d_dir, state=state, dflash_config=dfc)
    return t_dir, d_dir
