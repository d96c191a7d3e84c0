"""The target + drafter pairs tests serve.

`demo_pair()`: what dflashctl ships. The SmolLM2-135M-Instruct target (set up once by
`dflashctl.demo_target` into the cache; `./bin/test` does it before the tests) and the drafter
trained against it on an H200 (`dflashctl/assets/demo/drafter`).

Tests that only need some speculating pair write a tiny one: here (`write_tiny_pair`, written with
the engine's own modules) or tests/support/tiny_checkpoints.py (written by transformers, for the
engine tests).

`write_tiny_pair(root)` writes `root/target` (config.json, generation_config.json, a byte-level
`tokenizers` tokenizer with `<|endoftext|>`, `<|im_start|>`, `<|im_end|>`, `<|mask|>`, a chat
template, model.safetensors) and `root/drafter` (a DFlash config.json + model.safetensors). Weights
are random (seeded), so the drafter accepts almost nothing: the collapse path; special tokens are
never generated, so answers run to max_tokens. The modules are the engine's own
(dflashctl/engine/model.py, drafter.py), so names and shapes are exactly what `Engine.load` expects.
Writing takes well under a second on CPU. `write_accepting_pair(root)`: the same pair made to accept
every drafted token.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DEMO_DRAFTER = REPO / "dflashctl" / "assets" / "demo" / "drafter"
DEMO_PROMPTS = REPO / "dflashctl" / "assets" / "demo" / "eval_prompts.json"

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|mask|>"]
HIDDEN = 64
LAYERS = 2
HEADS, KV_HEADS, HEAD_DIM = 4, 2, 16
INTERMEDIATE = 128
BLOCK_SIZE = 4  # num_speculative_tokens 3

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _tokenizer(target: Path) -> dict[str, int]:
    """Byte-level BPE with no merges: 256 byte symbols, then the special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(alphabet))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(SPECIALS)
    tok.save(str(target / "tokenizer.json"))
    ids = {s: tok.token_to_id(s) for s in SPECIALS}
    (target / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "chat_template": CHAT_TEMPLATE,
                "eos_token": "<|im_end|>",
                "pad_token": "<|endoftext|>",
                "model_max_length": 4096,
            },
            indent=2,
        )
    )
    return {**ids, "vocab_size": tok.get_vocab_size()}


def _save(module: Any, path: Path, prefix: str = "", keep: tuple[str, ...] = ()) -> None:
    from safetensors.torch import save_file

    state = {
        (k if k.startswith(keep) else prefix + k): v.detach().contiguous()
        for k, v in module.state_dict().items()
    }
    save_file(state, str(path), metadata={"format": "pt"})


def write_tiny_pair(root: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """Write the pair under `root`; returns (target_dir, drafter_dir)."""
    import torch

    from dflashctl.engine.drafter import Drafter, DrafterArgs
    from dflashctl.engine.model import ModelArgs, Transformer

    target, drafter = root / "target", root / "drafter"
    target.mkdir(parents=True, exist_ok=True)
    drafter.mkdir(parents=True, exist_ok=True)
    ids = _tokenizer(target)
    vocab = ids["vocab_size"]
    t_cfg = {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "vocab_size": vocab,
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "max_position_embeddings": 4096,
        "tie_word_embeddings": False,
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "torch_dtype": "float32",
    }
    (target / "config.json").write_text(json.dumps(t_cfg, indent=2))
    (target / "generation_config.json").write_text(
        json.dumps({"eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]]}, indent=2)
    )
    d_cfg = {
        "architectures": ["DFlashDraftModel"],
        "model_type": "qwen3",
        "vocab_size": vocab,
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": 1,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "max_position_embeddings": 4096,
        "num_target_layers": LAYERS,
        "block_size": BLOCK_SIZE,
        "layer_types": ["full_attention"],
        "dflash_config": {"mask_token_id": ids["<|mask|>"], "target_layer_ids": [0, 1]},
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
    }
    (drafter / "config.json").write_text(json.dumps(d_cfg, indent=2))

    torch.manual_seed(seed)
    model = Transformer(ModelArgs.from_hf_config(t_cfg))
    with torch.no_grad():
        model.embed_tokens.weight.normal_(0.0, 1.0)
        # Special tokens get a zero logit, so greedy decoding never picks one: answers run to
        # max_tokens (enough drafted tokens for the collapse alarm to have evidence).
        for tid in (ids[s] for s in SPECIALS):
            model.lm_head.weight[tid].zero_()
    _save(model, target / "model.safetensors", prefix="model.", keep=("lm_head.",))
    draft = Drafter(DrafterArgs.from_hf_config(d_cfg, LAYERS))
    _save(draft, drafter / "model.safetensors")
    return target, drafter


def demo_target() -> Path:
    from dflashctl.demo_target import ensure

    return ensure()


def demo_pair() -> tuple[Path, Path]:
    return demo_target(), DEMO_DRAFTER


def write_accepting_pair(root: Path) -> tuple[Path, Path]:
    """The tiny pair (`write_tiny_pair`) with the target's and the drafter's final norm weights
    zeroed: all logits are 0, greedy picks token 0 on both, so every drafted token is accepted."""
    from safetensors.torch import load_file, save_file

    target, drafter = write_tiny_pair(root)
    for path, name in ((target, "model.norm.weight"), (drafter, "norm.weight")):
        f = path / "model.safetensors"
        state = load_file(str(f))
        state[name] = state[name] * 0
        save_file(state, str(f), metadata={"format": "pt"})
    return target, drafter


if __name__ == "__main__":  # python tests/support/pairs.py DIR
    import sys

    print(*write_tiny_pair(Path(sys.argv[1])))
