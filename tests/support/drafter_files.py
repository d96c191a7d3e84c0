"""Small DFlash drafter directories for tests: a config.json and a safetensors file whose
`k_norm` weights hold real values (bf16, f16 or f32), written without torch or numpy."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

from .safetensors_files import header_bytes

HEAD_DIM = 32
HIDDEN = 128


def encode(values: list[float], dtype: str) -> bytes:
    if dtype == "F32":
        return struct.pack(f"<{len(values)}f", *values)
    if dtype == "F16":
        return struct.pack(f"<{len(values)}e", *values)
    if dtype == "BF16":  # the top half of the f32 bits (values chosen to be exact in bf16)
        return b"".join(
            struct.pack("<I", struct.unpack("<I", struct.pack("<f", v))[0])[2:] for v in values
        )
    raise ValueError(dtype)


def write_checkpoint(path: Path, tensors: dict[str, tuple[str, list[float]]]) -> Path:
    """A safetensors file with 1-D tensors of the given values."""
    spec = {name: (dtype, [len(vals)]) for name, (dtype, vals) in tensors.items()}
    head, _size = header_bytes(spec, {"format": "pt"})
    data = b"".join(encode(vals, dtype) for dtype, vals in tensors.values())
    path.write_bytes(head + data)
    return path


def drafter_config(layers: int = 2, **overrides: Any) -> dict[str, Any]:
    """The demo-like drafter: Qwen3 dimensions of the tiny target, block 8, ids [0, 2]."""
    cfg: dict[str, Any] = {
        "architectures": ["DFlashDraftModel"],
        "model_type": "qwen3",
        "hidden_size": HIDDEN,
        "num_hidden_layers": layers,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": HEAD_DIM,
        "intermediate_size": 256,
        "vocab_size": 1024,
        "block_size": 8,
        "num_target_layers": 4,
        "target_hidden_size": HIDDEN,
        "rope_theta": 1000000.0,
        "layer_types": ["full_attention"] * layers,
        "dflash_config": {"mask_token_id": 3, "target_layer_ids": [0, 2]},
    }
    cfg.update(overrides)
    return cfg


def write_drafter(
    directory: Path,
    k_norm: list[float] | list[list[float]] | None,
    *,
    layers: int = 2,
    dtype: str = "BF16",
    cfg: dict[str, Any] | None = None,
) -> Path:
    """A drafter directory. `k_norm`: one value per layer (filled across head_dim), a full
    vector per layer, or None for a checkpoint without k_norm tensors."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(cfg or drafter_config(layers)))
    tensors: dict[str, tuple[str, list[float]]] = {"hidden_norm.weight": (dtype, [1.0] * HIDDEN)}
    for i in range(layers):
        tensors[f"layers.{i}.self_attn.q_norm.weight"] = (dtype, [1.0] * HEAD_DIM)
        if k_norm is not None:
            v = k_norm[i]
            vec = list(v) if isinstance(v, list) else [float(v)] * HEAD_DIM
            tensors[f"layers.{i}.self_attn.k_norm.weight"] = (dtype, vec)
    write_checkpoint(directory / "model.safetensors", tensors)
    return directory
