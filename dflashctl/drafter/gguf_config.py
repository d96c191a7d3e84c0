"""A llama.cpp DFlash drafter (GGUF) read as the native config view verify-config judges.

Only the metadata and the tensor table are read, with the `gguf` library (as the safetensors
header is for a checkpoint): `general.architecture` must be `dflash`; the drafter's shape from
`dflash.block_count`, `dflash.embedding_length`, `dflash.attention.head_count(_kv)`,
`dflash.attention.key_length`, `dflash.feed_forward_length`, `dflash.vocab_size`,
`dflash.rope.freq_base`; `dflash.block_size`; the mask token from
`tokenizer.ggml.mask_token_id` (or a fork's `dflash.mask_token_id`).

Target layers: llama.cpp's converter writes `dflash.target_layers` in capture indexing, the
input of layer i (z-lab's `target_layer_ids` plus one: [2, 7, 12, …] for z-lab's [1, 6, 11,
…]), the same shift as the speculators format (`formats.SPECULATORS_AUX_SHIFT`); a fork's
`dflash.target_layer_ids` is taken as z-lab's own. GGUF files converted before 2026-08-27 must be
reconverted for DFlash2 (llama.cpp#27342): a DFlash2 file (`dflash.selector_rank`) without
`dflash.rope.dimension_sections` is flagged. No printing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dflashctl.drafter.formats import SPECULATORS_AUX_SHIFT, Reading
from dflashctl.errors import InputError

_SHAPE_KEYS = {
    "dflash.block_count": "num_hidden_layers",
    "dflash.embedding_length": "hidden_size",
    "dflash.attention.head_count": "num_attention_heads",
    "dflash.attention.head_count_kv": "num_key_value_heads",
    "dflash.attention.key_length": "head_dim",
    "dflash.feed_forward_length": "intermediate_size",
    "dflash.vocab_size": "vocab_size",
    "dflash.rope.freq_base": "rope_theta",
    "dflash.attention.layer_norm_rms_epsilon": "rms_norm_eps",
    "dflash.block_size": "block_size",
    "dflash.draft_vocab_size": "draft_vocab_size",
}
_DFLASH2_KEYS = {
    "dflash.conv_kernel_size": "conv_kernel_size",
    "dflash.conv_group_size": "conv_group_size",
    "dflash.selector_rank": "selector_rank",
    "dflash.selector_top_k": "selector_top_k",
}


def is_gguf(path: Path) -> bool:
    if not path.is_file():
        return False
    with path.open("rb") as f:
        return f.read(4) == b"GGUF"


def _fields(path: Path) -> tuple[dict[str, Any], list[str]]:
    try:
        import gguf
    except ImportError:
        raise InputError(
            f"{path} is a GGUF drafter, and reading it needs the gguf library",
            "pip install 'gguf>=0.17' (./bin/dflashctl installs it)",
        ) from None
    try:
        reader = gguf.GGUFReader(str(path))
    except (ValueError, OSError, IndexError, KeyError) as e:
        raise InputError(f"{path}: not a readable GGUF file ({str(e)[:120]})") from None
    values = {}
    for key, fld in reader.fields.items():
        try:
            values[key] = fld.contents()
        except (ValueError, IndexError, UnicodeDecodeError):
            continue
    return values, [str(t.name) for t in reader.tensors]


def read_gguf(path: Path) -> Reading:
    """The native view of a GGUF drafter, with what reading it found."""
    kv, tensors = _fields(path)
    arch = kv.get("general.architecture")
    native: dict[str, Any] = {}
    r = Reading(native, "GGUF (llama.cpp)")
    if arch != "dflash":
        r.problems.append(
            (
                "general.architecture",
                "invalid",
                arch,
                "dflash",
                "llama.cpp loads a DFlash drafter only under architecture dflash",
            )
        )
    dflash2 = any(k in kv for k in _DFLASH2_KEYS)
    native["architectures"] = ["DFlash2DraftModel" if dflash2 else "DFlashDraftModel"]
    native["model_type"] = "qwen3"
    for key, name in _SHAPE_KEYS.items():
        if key in kv:
            native[name] = kv[key]
    layers = native.get("num_hidden_layers")
    pattern = kv.get("dflash.attention.sliding_window_pattern")
    if isinstance(pattern, list) and pattern:
        native["layer_types"] = ["sliding_attention" if p else "full_attention" for p in pattern]
        if "dflash.attention.sliding_window" in kv:
            native["sliding_window"] = kv["dflash.attention.sliding_window"]
            native["use_sliding_window"] = True
    elif isinstance(layers, int) and layers > 0:
        native["layer_types"] = ["full_attention"] * layers  # no pattern: every layer full
    dfc: dict[str, Any] = {}
    mask = kv.get("tokenizer.ggml.mask_token_id", kv.get("dflash.mask_token_id"))
    if mask is None:
        r.problems.append(
            (
                "tokenizer.ggml.mask_token_id",
                "missing",
                None,
                "the mask token id",
                "llama.cpp drafts from the vocabulary's mask token: without it every "
                "block slot is a wrong token",
            )
        )
    else:
        dfc["mask_token_id"] = mask
    taps = kv.get("dflash.target_layers")
    if isinstance(taps, list) and taps:
        dfc["target_layer_ids"] = [int(i) - SPECULATORS_AUX_SHIFT for i in taps]
        native["eagle_aux_hidden_state_layer_ids"] = [int(i) for i in taps]
        r.notes.append(
            (
                "dflash.target_layers",
                "ok",
                taps,
                f"capture indices; z-lab's target_layer_ids {dfc['target_layer_ids']} "
                f"(each minus {SPECULATORS_AUX_SHIFT})",
            )
        )
    elif isinstance(kv.get("dflash.target_layer_ids"), list):
        dfc["target_layer_ids"] = [int(i) for i in kv["dflash.target_layer_ids"]]
        r.notes.append(
            (
                "dflash.target_layer_ids",
                "ok",
                dfc["target_layer_ids"],
                "a fork's key, taken as z-lab's indexing",
            )
        )
    else:
        r.problems.append(
            (
                "dflash.target_layers",
                "missing",
                None,
                "the trained target layers",
                "llama.cpp asserts 'DFlash model has no target_layer_ids' at start-up",
            )
        )
    if "dflash.sample_from_anchor" in kv:
        dfc["sample_from_anchor"] = kv["dflash.sample_from_anchor"]
    for key, name in _DFLASH2_KEYS.items():
        if key in kv:
            dfc[name] = kv[key]
    if dflash2 and "dflash.rope.dimension_sections" not in kv:
        r.problems.append(
            (
                "dflash.rope.dimension_sections",
                "missing",
                None,
                "present",
                "DFlash2 GGUFs converted before 2026-08-27 lack it and must be "
                "reconverted (llama.cpp#27342, z-lab/dflash#170)",
            )
        )
    native["dflash_config"] = dfc
    in_file = sum(1 for t in tensors if t.startswith("blk.") and t.endswith(".attn_norm.weight"))
    if isinstance(layers, int) and in_file and in_file != layers:
        r.problems.append(
            (
                "dflash.block_count",
                "mismatch",
                layers,
                in_file,
                f"the file holds {in_file} layers' attention norms",
            )
        )
    return r
