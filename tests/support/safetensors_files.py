"""Real safetensors files for tests, written without torch or numpy.

`write_safetensors` writes the 8-byte header length, the JSON header (padded with spaces to a
multiple of 8, as the format's writers do) and then only *extends* the file to its full size, so
a 3.4 GB checkpoint is a sparse file that takes no disk space and is never read.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

from dflashctl.drafter.header import DTYPE_BITS

TensorSpec = dict[str, tuple[str, list[int]]]


def header_bytes(tensors: TensorSpec, metadata: dict[str, str] | None = None) -> tuple[bytes, int]:
    """(8-byte length + padded JSON header, size of the data section)."""
    header: dict[str, object] = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    offset = 0
    for name, (dtype, shape) in tensors.items():
        nbytes = math.prod(shape) * DTYPE_BITS[dtype] // 8
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw, offset


def write_safetensors(path: Path, tensors: TensorSpec, *, fill: bool = False) -> Path:
    """Write a valid safetensors file; the data is a hole (zeros) unless `fill` writes bytes."""
    head, data_size = header_bytes(tensors, {"format": "pt"})
    with path.open("wb") as f:
        f.write(head)
        if fill:
            f.write(b"\x00" * data_size)
        else:
            f.truncate(len(head) + data_size)
    return path


def dflash_tensors(
    *,
    layers: int,
    hidden: int,
    intermediate: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    taps: int,
    target_hidden: int | None = None,
    dtype: str = "BF16",
) -> TensorSpec:
    """The tensor names and shapes of a DFlash drafter (dflash-facts.md §7)."""
    t = target_hidden or hidden
    spec: TensorSpec = {"fc.weight": (dtype, [hidden, t * taps])}
    spec["hidden_norm.weight"] = (dtype, [hidden])
    for i in range(layers):
        p = f"layers.{i}."
        spec[p + "input_layernorm.weight"] = (dtype, [hidden])
        spec[p + "post_attention_layernorm.weight"] = (dtype, [hidden])
        spec[p + "self_attn.q_proj.weight"] = (dtype, [heads * head_dim, hidden])
        spec[p + "self_attn.k_proj.weight"] = (dtype, [kv_heads * head_dim, hidden])
        spec[p + "self_attn.v_proj.weight"] = (dtype, [kv_heads * head_dim, hidden])
        spec[p + "self_attn.o_proj.weight"] = (dtype, [hidden, heads * head_dim])
        spec[p + "self_attn.q_norm.weight"] = (dtype, [head_dim])
        spec[p + "self_attn.k_norm.weight"] = (dtype, [head_dim])
        spec[p + "mlp.gate_proj.weight"] = (dtype, [intermediate, hidden])
        spec[p + "mlp.up_proj.weight"] = (dtype, [intermediate, hidden])
        spec[p + "mlp.down_proj.weight"] = (dtype, [hidden, intermediate])
    spec["norm.weight"] = (dtype, [hidden])
    return spec


def qwen36_27b_tensors(dtype: str = "BF16") -> TensorSpec:
    """z-lab/Qwen3.6-27B-DFlash: 5 layers, hidden 5120, 32/8/128 heads, 17408 MLP, 5 taps."""
    return dflash_tensors(
        layers=5,
        hidden=5120,
        intermediate=17408,
        heads=32,
        kv_heads=8,
        head_dim=128,
        taps=5,
        dtype=dtype,
    )
