"""verify-config's rules (dflashctl/drafter/rules/config.py, target.py, weights.py) case by
case: the published Qwen3.6-27B drafter's config with one edit, and every row that edit
changes, asserted whole (name, status, found, expected, hint). The base is the same config
with the same registry entry, engine, target config and weights, unedited; `-` rows leave it,
`+` rows come in. Real configs, real safetensors headers written by the test, no stand-ins."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from support.safetensors_files import qwen36_27b_tensors, write_safetensors

from dflashctl.drafter import registry
from dflashctl.drafter.check import check_drafter
from dflashctl.drafter.header import read_header
from dflashctl.report import Row

DATA = Path(__file__).resolve().parent / "data"
ENTRY = registry.get_entry("qwen3.6-27b-dflash")
DEL = object()
SLIDING, FULL = "sliding_attention", "full_attention"
TARGET = {
    "architectures": ["Qwen3_5ForConditionalGeneration"],
    "text_config": {"num_hidden_layers": 64, "hidden_size": 5120, "vocab_size": 248320},
}


def published() -> dict[str, Any]:
    return json.loads((DATA / "qwen3.6-27b-dflash" / "config.json").read_text())


def edit(doc: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    for path, value in changes.items():
        *parents, last = path.split("/")
        node = out
        for p in parents:
            node = node.setdefault(p, {})
        if value is DEL:
            node.pop(last, None)
        else:
            node[last] = value
    return out


def row(r: Row) -> tuple[Any, ...]:
    return (r.name, r.status, r.found, r.expected, r.hint)


def changed(case: dict[str, Any], tmp: Path) -> list[tuple[Any, ...]]:
    """The rows the case's edit adds (+) and removes (-) against the unedited base (the same
    entry, engine, target and weights; `base` names what the base has otherwise)."""
    engine = case.get("engine", "vllm")
    entry = ENTRY if case.get("entry", True) else None
    target_edit, tensors = case.get("target"), case.get("tensors")
    header = None
    base_header = None
    if tensors is not None:
        spec = qwen36_27b_tensors()
        (tmp / "base").mkdir()
        base_header = read_header(write_safetensors(tmp / "base" / "model.safetensors", spec))
        for name, value in tensors.items():
            if value is DEL:
                spec.pop(name, None)
            else:
                spec[name] = value
        (tmp / "case").mkdir()
        header = read_header(write_safetensors(tmp / "case" / "model.safetensors", spec))
    other = case.get("base", {})
    base = check_drafter(
        published(),
        entry=entry,
        engine=other.get("engine", engine),
        target=None if target_edit is None or "no target" in other else TARGET,
        header=None if "no header" in other else base_header,
    )
    got = check_drafter(
        edit(published(), case.get("cfg", {})),
        entry=entry,
        engine=engine,
        target=edit(TARGET, target_edit) if target_edit is not None else None,
        header=header,
    )
    a, b = [row(r) for r in base], [row(r) for r in got]
    return [("-", *r) for r in a if r not in b] + [("+", *r) for r in b if r not in a]


CASES: dict[str, dict[str, Any]] = {
    # structure
    "architectures missing": {"cfg": {"architectures": DEL}},
    "architectures not a list": {"cfg": {"architectures": "DFlashDraftModel"}, "entry": False},
    "architectures empty": {"cfg": {"architectures": []}, "entry": False},
    "architectures of another family": {"cfg": {"architectures": ["DFlash2DraftModel"]}},
    "architectures unknown, no entry": {"cfg": {"architectures": ["Qwen3Drafter"]}, "entry": False},
    "architectures known, no entry": {
        "cfg": {"architectures": ["DFlash2DraftModel"]},
        "entry": False,
    },
    "model_type missing": {"cfg": {"model_type": DEL}},
    "model_type missing, no entry": {"cfg": {"model_type": DEL}, "entry": False},
    "model_type a number": {"cfg": {"model_type": 3}, "entry": False},
    "model_type llama, no entry": {"cfg": {"model_type": "llama"}, "entry": False},
    "model_type llama": {"cfg": {"model_type": "llama"}},
    "num_hidden_layers 0": {"cfg": {"num_hidden_layers": 0}, "entry": False},
    "num_hidden_layers 65": {"cfg": {"num_hidden_layers": 65, "layer_types": DEL}, "entry": False},
    "num_hidden_layers 64": {"cfg": {"num_hidden_layers": 64, "layer_types": DEL}, "entry": False},
    "hidden_size missing": {"cfg": {"hidden_size": DEL}, "entry": False},
    "hidden_size other": {"cfg": {"hidden_size": 4096}},
    "vocab_size a string": {"cfg": {"vocab_size": "248320"}, "entry": False},
    "num_target_layers 0": {"cfg": {"num_target_layers": 0}, "entry": False},
    "dflash num_target_layers -1": {"cfg": {"dflash_config/num_target_layers": -1}, "entry": False},
    "intermediate_size 0": {"cfg": {"intermediate_size": 0}},
    "head_dim other": {"cfg": {"head_dim": 64}},
    "attention_bias a string": {"cfg": {"attention_bias": "no"}},
    "attention_bias true": {"cfg": {"attention_bias": True}},
    "head_dim missing, heads do not divide": {
        "cfg": {"head_dim": DEL, "num_attention_heads": 48},
        "entry": False,
    },
    "head_dim missing, heads divide": {"cfg": {"head_dim": DEL}, "entry": False},
    # mask
    "mask missing": {"cfg": {"dflash_config/mask_token_id": DEL}},
    "mask missing, sglang": {"cfg": {"dflash_config/mask_token_id": DEL}, "engine": "sglang"},
    "mask negative": {"cfg": {"dflash_config/mask_token_id": -1}},
    "mask negative, no entry": {"cfg": {"dflash_config/mask_token_id": -1}, "entry": False},
    "mask top level only, a string": {
        "cfg": {"dflash_config/mask_token_id": DEL, "mask_token_id": "x"},
        "entry": False,
    },
    "mask at vocab_size": {"cfg": {"dflash_config/mask_token_id": 248320}},
    "mask at vocab_size, no entry": {
        "cfg": {"dflash_config/mask_token_id": 248320},
        "entry": False,
    },
    "mask just under vocab_size, no entry": {
        "cfg": {"dflash_config/mask_token_id": 248319},
        "entry": False,
    },
    "mask off by one": {"cfg": {"dflash_config/mask_token_id": 248071}},
    "mask top level differs": {"cfg": {"mask_token_id": 248064}},
    "mask top level same": {"cfg": {"mask_token_id": 248070}},
    # layer ids
    "ids top level only": {
        "cfg": {"dflash_config/target_layer_ids": DEL, "target_layer_ids": [1, 16, 31, 46, 61]}
    },
    "ids top level only, sglang": {
        "cfg": {"dflash_config/target_layer_ids": DEL, "target_layer_ids": [1, 16, 31, 46, 61]},
        "engine": "sglang",
    },
    "ids top level differs": {"cfg": {"target_layer_ids": [1, 2, 3, 4, 5]}},
    "ids missing": {"cfg": {"dflash_config/target_layer_ids": DEL}},
    "ids missing, no entry": {"cfg": {"dflash_config/target_layer_ids": DEL}, "entry": False},
    "ids missing, eagle aux ids": {
        "cfg": {"dflash_config/target_layer_ids": DEL, "eagle_aux_hidden_state_layer_ids": [1, 2]},
        "entry": False,
    },
    "ids empty": {"cfg": {"dflash_config/target_layer_ids": []}, "entry": False},
    "ids not ints": {"cfg": {"dflash_config/target_layer_ids": [1, "x"]}},
    "ids twelve duplicates": {
        "cfg": {"dflash_config/target_layer_ids": [i // 2 for i in range(24)] + [30]},
        "entry": False,
    },
    "ids unsorted": {
        "cfg": {"dflash_config/target_layer_ids": [16, 1, 31, 46, 61]},
        "entry": False,
    },
    "ids at the target's depth": {
        "cfg": {"dflash_config/target_layer_ids": [0, 16, 31, 46, 64]},
        "entry": False,
    },
    "ids at the last layer": {"cfg": {"dflash_config/target_layer_ids": [1, 16, 31, 46, 63]}},
    "ids unknown depth": {
        "cfg": {"num_target_layers": DEL, "dflash_config/target_layer_ids": [1, 2, 3, 4, 5]},
        "entry": False,
    },
    "ids the formula": {
        "cfg": {"dflash_config/target_layer_ids": [1, 16, 31, 46, 61]},
        "entry": False,
    },
    "ids other, no entry": {
        "cfg": {"dflash_config/target_layer_ids": [2, 16, 31, 46, 61]},
        "entry": False,
    },
    "ids for a 3-layer target": {
        "cfg": {
            "num_target_layers": 3,
            "dflash_config/target_layer_ids": [0, 1, 2],
            "num_hidden_layers": 3,
            "layer_types": DEL,
        },
        "entry": False,
    },
    "ids for a 4-layer target": {
        "cfg": {
            "num_target_layers": 4,
            "dflash_config/target_layer_ids": [0, 1, 2],
            "num_hidden_layers": 3,
            "layer_types": DEL,
        },
        "entry": False,
    },
    "aux counts match by accident": {
        "cfg": {"dflash_config/target_layer_ids": DEL, "target_layer_ids": [1, 16, 31]},
        "entry": False,
    },
    # layers and window
    "layer_types not a list": {"cfg": {"layer_types": "sliding"}},
    "layer_types short, no entry": {"cfg": {"layer_types": [SLIDING] * 4}, "entry": False},
    "layer_types all full": {"cfg": {"layer_types": [FULL] * 5}},
    "layer_types other runs": {"cfg": {"layer_types": [FULL] + [SLIDING] * 4}},
    "layer_types unknown allowed": {
        "cfg": {"layer_types": [SLIDING] * 4 + ["chunked_attention"]},
        "entry": False,
    },
    "layer_types unknown refused": {
        "cfg": {"layer_types": [SLIDING] * 4 + ["foo"]},
        "entry": False,
    },
    "layer_types missing": {"cfg": {"layer_types": DEL}},
    "layer_types missing, no entry": {"cfg": {"layer_types": DEL}, "entry": False},
    "window dropped": {"cfg": {"use_sliding_window": False}},
    "window zero": {"cfg": {"sliding_window": 0}},
    "window other": {"cfg": {"sliding_window": 4096}},
    "window in swa_window_size": {
        "cfg": {
            "use_sliding_window": False,
            "sliding_window": None,
            "dflash_config/swa_window_size": 1024,
        },
        "entry": False,
    },
    "window default 4096": {"cfg": {"sliding_window": DEL}, "entry": False},
    "is_causal a string": {"cfg": {"is_causal": "yes"}},
    "dflash causal a number": {"cfg": {"dflash_config/causal": 0}},
    "non-causal layers": {"cfg": {"is_causal": False}, "entry": False},
    # block, misc
    "block 1": {"cfg": {"block_size": 1}},
    "block a string": {"cfg": {"block_size": "16"}},
    "block 2": {"cfg": {"block_size": 2}, "entry": False},
    "block missing": {"cfg": {"block_size": DEL}, "entry": False},
    "block in dflash_config": {
        "cfg": {"block_size": DEL, "dflash_config/block_size": 8},
        "entry": False,
    },
    "sglang": {"engine": "sglang", "base": {"engine": "vllm"}},
    "local": {"engine": "local", "base": {"engine": "vllm"}},
    "rope theta float": {"cfg": {"rope_parameters/rope_theta": 10000000.0}},
    "rope theta missing": {"cfg": {"rope_parameters": DEL}},
    "rope theta fractional": {"cfg": {"rope_parameters/rope_theta": 10000.5}},
    "dflash2 without its fields": {"cfg": {"architectures": ["DFlash2DraftModel"]}, "entry": False},
    "dflash2 conv group": {
        "cfg": {"architectures": ["DFlash2DraftModel"], "dflash_config/conv_group_size": 3},
        "entry": False,
    },
    "no aux hidden state": {"cfg": {"use_aux_hidden_state": False}, "entry": False},
    "draft vocab": {"cfg": {"draft_vocab_size": 32000}, "entry": False},
    "draft vocab same": {"cfg": {"draft_vocab_size": 248320}, "entry": False},
    # target
    "target": {"target": {}, "base": {"no target": True}},
    "target, no entry": {"target": {}, "entry": False, "base": {"no target": True}},
    "target layers 0": {"target": {"text_config/num_hidden_layers": 0}},
    "target layers missing": {"target": {"text_config/num_hidden_layers": DEL}},
    "target layers 48": {"target": {"text_config/num_hidden_layers": 48}},
    "target layers 48, no entry": {"target": {"text_config/num_hidden_layers": 48}, "entry": False},
    "target layers 48, no drafter count": {
        "target": {"text_config/num_hidden_layers": 48},
        "cfg": {"num_target_layers": DEL},
        "entry": False,
    },
    "target vocab at the mask": {"target": {"text_config/vocab_size": 248070}},
    "target vocab just over the mask": {"target": {"text_config/vocab_size": 248071}},
    "target vocab other, no entry": {"target": {"text_config/vocab_size": 248400}, "entry": False},
    "target vocab, no entry": {"target": {}, "cfg": {"vocab_size": DEL}, "entry": False},
    "target hidden other": {"target": {"text_config/hidden_size": 4096}},
    "target hidden vs target_hidden_size": {
        "target": {"text_config/hidden_size": 4096},
        "cfg": {"target_hidden_size": 4096},
    },
    "target hidden other than the fc's": {"target": {}, "cfg": {"target_hidden_size": 4096}},
    "target hidden, no entry": {"target": {"text_config/hidden_size": 5120}, "entry": False},
    "target rope differs": {"target": {"text_config/rope_theta": 1000000}},
    "target rope same": {"target": {"text_config/rope_theta": 10000000}},
    "target flat": {"target": {"text_config": DEL, "num_hidden_layers": 64, "vocab_size": 248320}},
    # engines
    "sglang last layer": {
        "cfg": {"dflash_config/target_layer_ids": [1, 16, 31, 46, 63]},
        "engine": "sglang",
        "entry": False,
    },
    "sglang no window": {
        "cfg": {
            "use_sliding_window": False,
            "sliding_window": None,
            "dflash_config/swa_window_size": 1024,
        },
        "engine": "sglang",
        "entry": False,
    },
    "local dflash2": {
        "cfg": {"architectures": ["DFlash2DraftModel"]},
        "engine": "local",
        "entry": False,
    },
    "vllm all full": {"cfg": {"layer_types": [FULL] * 5}, "entry": False},
    # weights
    "weights": {"tensors": {}, "base": {"no header": True}},
    "weights, no entry": {"tensors": {}, "entry": False, "base": {"no header": True}},
    "weights, fc for 4 taps": {"tensors": {"fc.weight": ("BF16", [5120, 5120 * 4])}},
    "weights, no fc": {"tensors": {"fc.weight": DEL}},
    "weights, F32 norm": {"tensors": {"norm.weight": ("F32", [5120])}},
    "weights, an extra layer": {"tensors": {"layers.5.input_layernorm.weight": ("BF16", [5120])}},
    "weights, a missing q_proj": {"tensors": {"layers.0.self_attn.q_proj.weight": DEL}},
    "weights, mlp other": {"tensors": {"layers.1.mlp.up_proj.weight": ("BF16", [1000, 5120])}},
    "weights, lm_head": {"tensors": {"lm_head.weight": ("BF16", [248320, 5120])}},
    "weights, embed_tokens": {"tensors": {"embed_tokens.weight": ("BF16", [248320, 5120])}},
    "weights, mask_hidden": {"tensors": {"mask_hidden": ("BF16", [1, 5120])}},
    "weights, model. prefix": {
        "tensors": {"model.norm.weight": ("BF16", [5120]), "norm.weight": DEL}
    },
    "weights, draft vocab": {
        "tensors": {"lm_head.weight": ("BF16", [32000, 5120]), "d2t": ("I64", [32000])},
        "cfg": {"draft_vocab_size": 32000},
    },
    "weights, draft vocab without d2t": {
        "tensors": {"lm_head.weight": ("BF16", [32000, 5120])},
        "cfg": {"draft_vocab_size": 32000},
    },
    "weights, draft vocab without lm_head": {"tensors": {}, "cfg": {"draft_vocab_size": 32000}},
    "weights, q_proj bias": {"tensors": {"layers.0.self_attn.q_proj.bias": ("BF16", [4096])}},
    "weights, bias in the config only": {"tensors": {}, "cfg": {"attention_bias": True}},
    "weights, config says float16": {"tensors": {}, "cfg": {"dtype": "float16"}},
    "weights, config says float32 (torch_dtype)": {
        "tensors": {},
        "cfg": {"torch_dtype": "float32"},
    },
    "weights, config dtype unknown": {"tensors": {}, "cfg": {"dtype": "int8"}},
    "weights, midlayer and encoder names": {
        "tensors": {
            "layers.0.input_layernorm.weight": DEL,
            "midlayer.input_layernorm.weight": ("BF16", [5120]),
            "fc.weight": DEL,
            "encoder.fc.weight": ("BF16", [5120, 25600]),
            "hidden_norm.weight": DEL,
            "encoder.output_norm_enc.weight": ("BF16", [5120]),
        }
    },
    "weights, nine layers": {
        "tensors": {f"layers.{i}.input_layernorm.weight": ("BF16", [5120]) for i in range(5, 10)}
    },
    "weights, hidden_norm wrong": {"tensors": {"hidden_norm.weight": ("BF16", [4096])}},
    "weights, lm_head of another width": {"tensors": {"lm_head.weight": ("BF16", [248320, 4096])}},
    "weights, fc with an odd width": {"tensors": {"fc.weight": ("BF16", [5120, 25601])}},
    "weights, dflash2 without a selector": {
        "tensors": {},
        "cfg": {"architectures": ["DFlash2DraftModel"]},
        "entry": False,
    },
    "weights, dflash2 with a selector": {
        "tensors": {"candidate_selector.codebook": ("BF16", [16, 5120])},
        "cfg": {"architectures": ["DFlash2DraftModel"]},
        "entry": False,
    },
    "weights, no aux hidden state": {
        "tensors": {},
        "cfg": {"use_aux_hidden_state": False},
        "entry": False,
    },
    "weights, heads from hidden": {"tensors": {}, "cfg": {"head_dim": DEL}, "entry": False},
    "weights, no kv heads": {"tensors": {}, "cfg": {"num_key_value_heads": DEL}, "entry": False},
    "weights, no intermediate size": {
        "tensors": {},
        "cfg": {"intermediate_size": DEL},
        "entry": False,
    },
    "weights, draft vocab with a target": {
        "tensors": {"lm_head.weight": ("BF16", [32000, 5120]), "d2t": ("I64", [32000])},
        "cfg": {"draft_vocab_size": 32000},
        "target": {},
    },
}


EXPECTED: dict[str, object] = {
    "architectures missing": [
        ("-", "architectures", "ok", ["DFlashDraftModel"], ["DFlashDraftModel"], None),
        (
            "+",
            "architectures",
            "missing",
            None,
            ["DFlashDraftModel"],
            "vLLM picks the drafter class from architectures (DFlashDraftModel → qwen3_dflash, "
            "DFlash2DraftModel → qwen3_dflash2)",
        ),
    ],
    "architectures not a list": [
        ("-", "architectures", "ok", ["DFlashDraftModel"], None, None),
        (
            "+",
            "architectures",
            "invalid",
            "DFlashDraftModel",
            ["DFlashDraftModel"],
            "vLLM picks the drafter class from architectures (DFlashDraftModel → qwen3_dflash, "
            "DFlash2DraftModel → qwen3_dflash2)",
        ),
    ],
    "architectures empty": [
        ("-", "architectures", "ok", ["DFlashDraftModel"], None, None),
        (
            "+",
            "architectures",
            "invalid",
            [],
            ["DFlashDraftModel"],
            "vLLM picks the drafter class from architectures (DFlashDraftModel → qwen3_dflash, "
            "DFlash2DraftModel → qwen3_dflash2)",
        ),
    ],
    "architectures of another family": [
        ("-", "architectures", "ok", ["DFlashDraftModel"], ["DFlashDraftModel"], None),
        (
            "-",
            "vllm: model runner",
            "warning",
            "V2 only",
            None,
            "needs vLLM's V2 model runner (VLLM_USE_V2_MODEL_RUNNER=1; 0.32 picks"
            " V2 by default only "
            "where Triton is available, so never on the CPU build); the V1 runner"
            " exits with 'Model "
            "Runner V1 does not support: mixed sliding/full dflash drafts'",
        ),
        (
            "+",
            "architectures",
            "mismatch",
            ["DFlash2DraftModel"],
            ["DFlashDraftModel"],
            "a different drafter family than the registry entry: the weights decide this",
        ),
        (
            "+",
            "dflash_config (DFlash 2)",
            "invalid",
            ["conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k"],
            ["conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k"],
            "vLLM's qwen3_dflash2 reads dflash_config['conv_kernel_size'] (KeyError)",
        ),
        (
            "+",
            "vllm: model runner",
            "warning",
            "V2 only",
            None,
            "needs vLLM's V2 model runner (VLLM_USE_V2_MODEL_RUNNER=1; 0.32 picks"
            " V2 by default only "
            "where Triton is available, so never on the CPU build); the V1 runner"
            " exits with 'Model "
            "Runner V1 does not support: mixed sliding/full dflash drafts, DFlash candidate-head "
            "drafts'",
        ),
    ],
    "architectures unknown, no entry": [
        ("-", "architectures", "ok", ["DFlashDraftModel"], None, None),
        (
            "+",
            "architectures",
            "warning",
            ["Qwen3Drafter"],
            None,
            "vLLM renames it DFlashQwen3Drafter; only DFlashDraftModel and"
            " DFlash2DraftModel map to the "
            "DFlash models here",
        ),
    ],
    "architectures known, no entry": [
        ("-", "architectures", "ok", ["DFlashDraftModel"], None, None),
        (
            "-",
            "vllm: model runner",
            "warning",
            "V2 only",
            None,
            "needs vLLM's V2 model runner (VLLM_USE_V2_MODEL_RUNNER=1; 0.32 picks"
            " V2 by default only "
            "where Triton is available, so never on the CPU build); the V1 runner"
            " exits with 'Model "
            "Runner V1 does not support: mixed sliding/full dflash drafts'",
        ),
        ("+", "architectures", "ok", ["DFlash2DraftModel"], None, None),
        (
            "+",
            "dflash_config (DFlash 2)",
            "invalid",
            ["conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k"],
            ["conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k"],
            "vLLM's qwen3_dflash2 reads dflash_config['conv_kernel_size'] (KeyError)",
        ),
        (
            "+",
            "vllm: model runner",
            "warning",
            "V2 only",
            None,
            "needs vLLM's V2 model runner (VLLM_USE_V2_MODEL_RUNNER=1; 0.32 picks"
            " V2 by default only "
            "where Triton is available, so never on the CPU build); the V1 runner"
            " exits with 'Model "
            "Runner V1 does not support: mixed sliding/full dflash drafts, DFlash candidate-head "
            "drafts'",
        ),
    ],
    "model_type missing": [
        ("-", "model_type", "ok", "qwen3", "qwen3", None),
        (
            "+",
            "model_type",
            "missing",
            None,
            "qwen3",
            "transformers' AutoConfig cannot load a config without a model_type string",
        ),
    ],
    "model_type missing, no entry": [
        (
            "+",
            "model_type",
            "missing",
            None,
            "qwen3",
            "transformers' AutoConfig cannot load a config without a model_type string",
        )
    ],
    "model_type a number": [
        (
            "+",
            "model_type",
            "invalid",
            3,
            "qwen3",
            "transformers' AutoConfig cannot load a config without a model_type string",
        )
    ],
    "model_type llama, no entry": [
        (
            "+",
            "model_type",
            "warning",
            "llama",
            None,
            "transformers loads it with another config class than Qwen3Config; the"
            " rewrite checks below "
            "assume Qwen3Config",
        )
    ],
    "model_type llama": [
        ("-", "model_type", "ok", "qwen3", "qwen3", None),
        ("+", "model_type", "mismatch", "llama", "qwen3", None),
    ],
    "num_hidden_layers 0": [
        ("-", "sliding_window", "ok", 2048, None, "read from sliding_window"),
        (
            "-",
            "attention (per layer)",
            "ok",
            "4 sliding, 1 full; 4 causal, 1 non-causal",
            None,
            "non-causal layers need an attention backend with non-causal support",
        ),
        ("+", "num_hidden_layers", "invalid", 0, "a positive integer", None),
        (
            "+",
            "transformers (load)",
            "invalid",
            None,
            None,
            "transformers' Qwen3Config refuses the file: `num_hidden_layers` (0)"
            " must be equal to the "
            "number of `layer_types` (5)",
        ),
    ],
    "num_hidden_layers 65": [
        (
            "-",
            "layer_types",
            "ok",
            [
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "full_attention",
            ],
            None,
            "4 × sliding_attention + 1 × full_attention",
        ),
        (
            "-",
            "attention (per layer)",
            "ok",
            "4 sliding, 1 full; 4 causal, 1 non-causal",
            None,
            "non-causal layers need an attention backend with non-causal support",
        ),
        (
            "+",
            "attention (per layer)",
            "ok",
            "60 sliding, 5 full; 60 causal, 5 non-causal",
            None,
            "non-causal layers need an attention backend with non-causal support",
        ),
        (
            "+",
            "transformers: layer_types",
            "warning",
            None,
            [
                "full_attention",
                "full_attention",
                "full_attention",
                "full_attention",
                "full_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
            ],
            "found = the file (no layer_types), expected = what Qwen3Config fills in: 5 × "
            "full_attention + 60 × sliding_attention (sliding only for layers >="
            " max_window_layers when "
            "a window survives)",
        ),
    ],
    "num_hidden_layers 64": [
        (
            "-",
            "layer_types",
            "ok",
            [
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "full_attention",
            ],
            None,
            "4 × sliding_attention + 1 × full_attention",
        ),
        (
            "-",
            "attention (per layer)",
            "ok",
            "4 sliding, 1 full; 4 causal, 1 non-causal",
            None,
            "non-causal layers need an attention backend with non-causal support",
        ),
        (
            "+",
            "attention (per layer)",
            "ok",
            "59 sliding, 5 full; 59 causal, 5 non-causal",
            None,
            "non-causal layers need an attention backend with non-causal support",
        ),
        (
            "+",
            "transformers: layer_types",
            "warning",
            None,
            [
                "full_attention",
                "full_attention",
                "full_attention",
                "full_attention",
                "full_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
            ],
            "found = the file (no layer_types), expected = what Qwen3Config fills in: 5 × "
            "full_attention + 59 × sliding_attention (sliding only for layers >="
            " max_window_layers when "
            "a window survives)",
        ),
    ],
    "hidden_size missing": [
        ("+", "hidden_size", "missing", None, "a positive integer", "required by every engine")
    ],
    "hidden_size other": [
        ("-", "hidden_size", "ok", 5120, 5120, None),
        (
            "+",
            "hidden_size",
            "mismatch",
            4096,
            5120,
            "the weights decide this: a different checkpoint, not a stale field",
        ),
    ],
    "vocab_size a string": [("+", "vocab_size", "invalid", "248320", "a positive integer", None)],
    "num_target_layers 0": [
        (
            "-",
            "dflash_config.target_layer_ids",
            "ok",
            [1, 16, 31, 46, 61],
            None,
            "all below the target's 64 layers (drafter num_target_layers)",
        ),
        (
            "-",
            "dflash_config.target_layer_ids (formula)",
            "ok",
            [1, 16, 31, 46, 61],
            [1, 16, 31, 46, 61],
            None,
        ),
        (
            "+",
            "num_target_layers",
            "invalid",
            0,
            "the target's num_hidden_layers (a positive integer)",
            "an engine that reads it sizes the target taps from it",
        ),
        (
            "+",
            "dflash_config.target_layer_ids",
            "ok",
            [1, 16, 31, 46, 61],
            None,
            "target layer count unknown: pass --target DIR to check the range",
        ),
    ],
    "dflash num_target_layers -1": [
        (
            "+",
            "dflash_config.num_target_layers",
            "invalid",
            -1,
            "the target's num_hidden_layers (a positive integer)",
            "an engine that reads it sizes the target taps from it",
        )
    ],
    "intermediate_size 0": [
        ("-", "intermediate_size", "ok", 17408, 17408, None),
        ("+", "intermediate_size", "invalid", 0, "a positive integer", None),
    ],
    "head_dim other": [
        ("-", "head_dim", "ok", 128, 128, None),
        (
            "+",
            "head_dim",
            "mismatch",
            64,
            128,
            "the weights decide this: a different checkpoint, not a stale field",
        ),
    ],
    "attention_bias a string": [("+", "attention_bias", "invalid", "no", "true or false", None)],
    "attention_bias true": [],
    "head_dim missing, heads do not divide": [
        (
            "+",
            "head_dim",
            "invalid",
            None,
            "head_dim, or hidden_size divisible by num_attention_heads",
            "hidden_size 5120 is not a multiple of 48 heads",
        )
    ],
    "head_dim missing, heads divide": [],
    "mask missing": [
        (
            "-",
            "dflash_config.mask_token_id",
            "ok",
            248070,
            248070,
            "read from dflash_config.mask_token_id",
        ),
        (
            "+",
            "dflash_config.mask_token_id",
            "missing",
            None,
            248070,
            "vLLM: ValueError: For parallel drafting, the draft model config must have "
            "`dflash_config.mask_token_id` ... specified in its config.json",
        ),
    ],
    "mask missing, sglang": [
        (
            "-",
            "dflash_config.mask_token_id",
            "ok",
            248070,
            248070,
            "read from dflash_config.mask_token_id",
        ),
        (
            "+",
            "dflash_config.mask_token_id",
            "warning",
            None,
            248070,
            "sglang falls back to the tokenizer's <|MASK|> token, which may not exist",
        ),
    ],
    "mask negative": [
        (
            "-",
            "dflash_config.mask_token_id",
            "ok",
            248070,
            248070,
            "read from dflash_config.mask_token_id",
        ),
        (
            "+",
            "dflash_config.mask_token_id",
            "invalid",
            -1,
            248070,
            "dflash_config.mask_token_id is not a non-negative integer; the engine"
            " would feed it as the "
            "mask token",
        ),
    ],
    "mask negative, no entry": [
        (
            "-",
            "dflash_config.mask_token_id",
            "ok",
            248070,
            None,
            "read from dflash_config.mask_token_id",
        ),
        (
            "+",
            "dflash_config.mask_token_id",
            "invalid",
            -1,
            "an integer token id",
            "dflash_config.mask_token_id is not a non-negative integer; the engine"
            " would feed it as the "
            "mask token",
        ),
    ],
    "mask top level only, a string": [
        (
            "-",
            "dflash_config.mask_token_id",
            "ok",
            248070,
            None,
            "read from dflash_config.mask_token_id",
        ),
        (
            "+",
            "mask_token_id",
            "invalid",
            "x",
            "an integer token id",
            (
                "mask_token_id is not a non-negative integer; the engine would feed it"
                " as the mask token"
            ),
        ),
    ],
    "mask at vocab_size": [
        (
            "-",
            "dflash_config.mask_token_id",
            "ok",
            248070,
            248070,
            "read from dflash_config.mask_token_id",
        ),
        (
            "+",
            "dflash_config.mask_token_id",
            "invalid",
            248320,
            248070,
            "read from dflash_config.mask_token_id: not below vocab_size 248320, so"
            " it has no embedding "
            "row",
        ),
    ],
    "mask at vocab_size, no entry": [
        (
            "-",
            "dflash_config.mask_token_id",
            "ok",
            248070,
            None,
            "read from dflash_config.mask_token_id",
        ),
        (
            "+",
            "dflash_config.mask_token_id",
            "invalid",
            248320,
            "< vocab_size 248320",
            "read from dflash_config.mask_token_id: not below vocab_size 248320, so"
            " it has no embedding "
            "row",
        ),
    ],
    "mask just under vocab_size, no entry": [
        (
            "-",
            "dflash_config.mask_token_id",
            "ok",
            248070,
            None,
            "read from dflash_config.mask_token_id",
        ),
        (
            "+",
            "dflash_config.mask_token_id",
            "ok",
            248319,
            None,
            "read from dflash_config.mask_token_id",
        ),
    ],
    "mask off by one": [
        (
            "-",
            "dflash_config.mask_token_id",
            "ok",
            248070,
            248070,
            "read from dflash_config.mask_token_id",
        ),
        (
            "+",
            "dflash_config.mask_token_id",
            "mismatch",
            248071,
            248070,
            "off by 1: a wrong mask id collapses acceptance while the output stays"
            " coherent; read from "
            "dflash_config.mask_token_id",
        ),
    ],
    "mask top level differs": [
        (
            "+",
            "mask_token_id (top level)",
            "warning",
            248064,
            248070,
            "differs from dflash_config.mask_token_id, which vLLM and sglang use;"
            " older readers take "
            "the top-level one",
        )
    ],
    "mask top level same": [],
    "ids top level only": [
        (
            "-",
            "aux layers",
            "ok",
            "(2, 17, 32, 47, 62)",
            "(2, 17, 32, 47, 62)",
            "vLLM logs 'Using auxiliary layers from speculative config: (2, 17, 32, 47, 62)'",
        ),
        (
            "+",
            "dflash_config.target_layer_ids (location)",
            "missing",
            "top level only",
            "inside dflash_config",
            "vLLM's V1 runner ignores a top-level target_layer_ids: it captures its"
            " default layers (2, "
            "L//2, L-3) and logs no 'Using auxiliary layers' line, so the drafter gets the wrong "
            "features or dies on the first request; move it into dflash_config"
            " (verify-config --fix "
            "does)",
        ),
        (
            "+",
            "aux layers (vllm V1)",
            "invalid",
            "(2, 32, 61) from model default (2, L//2, L-3)",
            "(2, 17, 32, 47, 62)",
            "ValueError: DFlash drafter expects 25600 concatenated aux hidden"
            " features but received "
            "15360 (on the first request; /health still answers 200)",
        ),
    ],
    "ids top level only, sglang": [
        (
            "+",
            "dflash_config.target_layer_ids (location)",
            "warning",
            "top level only",
            "inside dflash_config",
            "sglang reads the top-level copy; vLLM's V1 runner ignores it (CPU build, "
            "VLLM_USE_V2_MODEL_RUNNER=0)",
        )
    ],
    "ids top level differs": [
        (
            "+",
            "target_layer_ids (top level)",
            "warning",
            [1, 2, 3, 4, 5],
            [1, 16, 31, 46, 61],
            "differs from dflash_config.target_layer_ids, which engines read first",
        )
    ],
    "ids missing": [
        (
            "-",
            "dflash_config.target_layer_ids",
            "ok",
            [1, 16, 31, 46, 61],
            [1, 16, 31, 46, 61],
            None,
        ),
        (
            "-",
            "dflash_config.target_layer_ids (formula)",
            "ok",
            [1, 16, 31, 46, 61],
            [1, 16, 31, 46, 61],
            None,
        ),
        (
            "-",
            "aux layers",
            "ok",
            "(2, 17, 32, 47, 62)",
            "(2, 17, 32, 47, 62)",
            "vLLM logs 'Using auxiliary layers from speculative config: (2, 17, 32, 47, 62)'",
        ),
        (
            "+",
            "dflash_config.target_layer_ids",
            "missing",
            None,
            [1, 16, 31, 46, 61],
            "vLLM then sizes fc by num_hidden_layers and captures its default"
            " layers; sglang and z-lab "
            "fall back to the formula [1, 16, 31, 46, 61], which need not be what the drafter was "
            "trained on",
        ),
    ],
    "ids missing, no entry": [
        (
            "-",
            "dflash_config.target_layer_ids",
            "ok",
            [1, 16, 31, 46, 61],
            None,
            "all below the target's 64 layers (drafter num_target_layers)",
        ),
        (
            "-",
            "dflash_config.target_layer_ids (formula)",
            "ok",
            [1, 16, 31, 46, 61],
            [1, 16, 31, 46, 61],
            None,
        ),
        (
            "-",
            "aux layers",
            "ok",
            "(2, 17, 32, 47, 62)",
            "(2, 17, 32, 47, 62)",
            "vLLM logs 'Using auxiliary layers from speculative config: (2, 17, 32, 47, 62)'",
        ),
        (
            "+",
            "dflash_config.target_layer_ids",
            "missing",
            None,
            [1, 16, 31, 46, 61],
            "vLLM then sizes fc by num_hidden_layers and captures its default"
            " layers; sglang and z-lab "
            "fall back to the formula [1, 16, 31, 46, 61], which need not be what the drafter was "
            "trained on",
        ),
    ],
    "ids missing, eagle aux ids": [
        (
            "-",
            "dflash_config.target_layer_ids",
            "ok",
            [1, 16, 31, 46, 61],
            None,
            "all below the target's 64 layers (drafter num_target_layers)",
        ),
        (
            "-",
            "dflash_config.target_layer_ids (formula)",
            "ok",
            [1, 16, 31, 46, 61],
            [1, 16, 31, 46, 61],
            None,
        ),
        (
            "-",
            "aux layers",
            "ok",
            "(2, 17, 32, 47, 62)",
            "(2, 17, 32, 47, 62)",
            "vLLM logs 'Using auxiliary layers from speculative config: (2, 17, 32, 47, 62)'",
        ),
    ],
    "ids empty": [
        (
            "-",
            "dflash_config.target_layer_ids",
            "ok",
            [1, 16, 31, 46, 61],
            None,
            "all below the target's 64 layers (drafter num_target_layers)",
        ),
        (
            "-",
            "dflash_config.target_layer_ids (formula)",
            "ok",
            [1, 16, 31, 46, 61],
            [1, 16, 31, 46, 61],
            None,
        ),
        (
            "-",
            "aux layers",
            "ok",
            "(2, 17, 32, 47, 62)",
            "(2, 17, 32, 47, 62)",
            "vLLM logs 'Using auxiliary layers from speculative config: (2, 17, 32, 47, 62)'",
        ),
        (
            "+",
            "dflash_config.target_layer_ids",
            "invalid",
            [],
            "a non-empty list of layer ids",
            None,
        ),
    ],
    "ids not ints": [
        (
            "-",
            "dflash_config.target_layer_ids",
            "ok",
            [1, 16, 31, 46, 61],
            [1, 16, 31, 46, 61],
            None,
        ),
        (
            "-",
            "dflash_config.target_layer_ids (formula)",
            "ok",
            [1, 16, 31, 46, 61],
            [1, 16, 31, 46, 61],
            None,
        ),
        (
            "-",
            "aux layers",
            "ok",
            "(2, 17, 32, 47, 62)",
            "(2, 17, 32, 47, 62)",
            "vLLM logs 'Using auxiliary layers from speculative config: (2, 17, 32, 47, 62)'",
        ),
        ("+", "dflash_config.target_layer_ids", "invalid", [1, "x"], [1, 16, 31, 46, 61], None),
    ],
    "ids twelve duplicates": [
        (
            "-",
            "dflash_config.target_layer_ids",
            "ok",
            [1, 16, 31, 46, 61],
            None,
            "all below the target's 64 layers (drafter num_target_layers)",
        ),
        (
            "-",
            "dflash_config.target_layer_ids (formula)",
            "ok",
            [1, 16, 31, 46, 61],
            [1, 16, 31, 46, 61],
            None,
        ),
        (
            "-",
            "aux layers",
            "ok",
            "(2, 17, 32, 47, 62)",
            "(2, 17, 32, 47, 62)",
            "vLLM logs 'Using auxiliary layers from speculative config: (2, 17, 32, 47, 62)'",
        ),
        (
            "+",
            "dflash_config.target_layer_ids",
            "invalid",
            [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 30],
            None,
            "duplicate ids [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, … 12 in all]: each layer"
            " is captured once, so "
            "fc receives fewer features than it was sized for",
        ),
    ],
    "ids unsorted": [
        (
            "-",
            "dflash_config.target_layer_ids",
            "ok",
            [1, 16, 31, 46, 61],
            None,
            "all below the target's 64 layers (drafter num_target_layers)",
        ),
        (
            "-",
            "dflash_config.target_layer_ids (formula)",
            "ok",
            [1, 16, 31, 46, 61],
            [1, 16, 31, 46, 61],
            None,
        ),
        (
            "-",
            "aux layers",
            "ok",
            "(2, 17, 32, 47, 62)",
            "(2, 17, 32, 47, 62)",
            "vLLM logs 'Using auxiliary layers from speculative config: (2, 17, 32, 47, 62)'",
        ),
        (
            "+",
            "dflash_config.target_layer_ids",
            "invalid",
            [16, 1, 31, 46, 61],
            None,
            "not ascending: engines capture in layer order, so fc gets its features"
            " in another order "
            "than it was trained with (silently)",
        ),
    ],
    "ids at the target's depth": [
        (
            "-",
            "dflash_config.target_layer_ids",
            "ok",
            [1, 16, 31, 46, 61],
            None,
            "all below the target's 64 layers (drafter num_target_layers)",
        ),
        (
            "-",
            "dflash_config.target_layer_ids (formula)",
            "ok",
            [1, 16, 31, 46, 61],
            [1, 16, 31, 46, 61],
            None,
        ),
        (
            "-",
            "aux layers",
            "ok",
            "(2, 17, 32, 47, 62)",
            "(2, 17, 32, 47, 62)",
            "vLLM logs 'Using auxiliary layers from speculative config: (2, 17, 32, 47, 62)'",
        ),
        (
            "+",
            "dflash_config.target_layer_ids",
            "invalid",
            [0, 16, 31, 46, 64],
            None,
            "ids [64] name no layer of a 64-layer target (drafter num_target_layers; engines "
            "capture id + 1, so ids -1 … 63 exist): dropped silently at start-up, then the first "
            "request dies with 'DFlash drafter expects X concatenated aux hidden features but "
            "received Y'",
        ),
        (
            "+",
            "aux layers (vllm V1)",
            "invalid",
            "(1, 17, 32, 47, 65) from dflash_config.target_layer_ids (+1)",
            "(1, 17, 32, 47, 65)",
            "ValueError: DFlash drafter expects 25600 concatenated aux hidden features but "
            "received 20480 (on the first request; /health still answers 200)",
        ),
        (
            "+",
            "aux layers (vllm V2)",
            "invalid",
            "(1, 17, 32, 47, 65) from dflash_config.target_layer_ids",
            "(1, 17, 32, 47, 65)",
            "ValueError: DFlash drafter expects 25600 concatenated aux hidden features but "
            "received 20480 (on the first request; /health still answers 200)",
        ),
    ],
    "ids at the last layer": [
        (
            "-",
            "dflash_config.target_layer_ids",
            "ok",
            [1, 16, 31, 46, 61],
            [1, 16, 31, 46, 61],
            None,
        ),
        (
            "-",
            "dflash_config.target_layer_ids (formula)",
            "ok",
            [1, 16, 31, 46, 61],
            [1, 16, 31, 46, 61],
            None,
        ),
        (
            "-",
            "aux layers",
            "ok",
            "(2, 17, 32, 47, 62)",
            "(2, 17, 32, 47, 62)",
            "vLLM logs 'Using auxiliary layers from speculative config: (2, 17, 32, 47, 62)'",
        ),
        (
            "+",
            "dflash_config.target_layer_ids",
            "mismatch",
            [1, 16, 31, 46, 63],
            [1, 16, 31, 46, 61],
            "evenly spaced guess (about every 15 layers from 1 to 63), not the"
            " published ids; 63 is the "
            "target's last layer (sglang#32204)",
        ),
        (
            "+",
            "dflash_config.target_layer_ids (formula)",
            "warning",
            [1, 16, 31, 46, 63],
            [1, 16, 31, 46, 61],
            "not build_target_layer_ids(64, 5); fine if the checkpoint was trained on these ids",
        ),
        (
            "+",
            "aux layers",
            "ok",
            "(2, 17, 32, 47, 64)",
            "(2, 17, 32, 47, 64)",
            "vLLM logs 'Using auxiliary layers from speculative config: (2, 17, 32, 47, 64)'",
        ),
    ],
    "ids unknown depth": [
        (
            "-",
            "dflash_config.target_layer_ids",
            "ok",
            [1, 16, 31, 46, 61],
            None,
            "all below the target's 64 layers (drafter num_target_layers)",
        ),
        (
            "-",
            "dflash_config.target_layer_ids (formula)",
            "ok",
            [1, 16, 31, 46, 61],
            [1, 16, 31, 46, 61],
            None,
        ),
        (
            "-",
            "aux layers",
            "ok",
            "(2, 17, 32, 47, 62)",
            "(2, 17, 32, 47, 62)",
            "vLLM logs 'Using auxiliary layers from speculative config: (2, 17, 32, 47, 62)'",
        ),
        (
            "+",
            "dflash_config.target_layer_ids",
            "ok",
            [1, 2, 3, 4, 5],
            None,
            "target layer count unknown: pass --target DIR to check the range",
        ),
        (
            "+",
            "aux layers",
            "ok",
            "(2, 3, 4, 5, 6)",
            "(2, 3, 4, 5, 6)",
            "vLLM logs 'Using auxiliary layers from speculative config: (2, 3, 4, 5, 6)'",
        ),
    ],
    "ids the formula": [],
    "ids other, no entry": [
        (
            "-",
            "dflash_config.target_layer_ids",
            "ok",
            [1, 16, 31, 46, 61],
            None,
            "all below the target's 64 layers (drafter num_target_layers)",
        ),
        (
            "-",
            "dflash_config.target_layer_ids (formula)",
            "ok",
            [1, 16, 31, 46, 61],
            [1, 16, 31, 46, 61],
            None,
        ),
        (
            "-",
            "aux layers",
            "ok",
            "(2, 17, 32, 47, 62)",
            "(2, 17, 32, 47, 62)",
            "vLLM logs 'Using auxiliary layers from speculative config: (2, 17, 32, 47, 62)'",
        ),
        (
            "+",
            "dflash_config.target_layer_ids",
            "ok",
            [2, 16, 31, 46, 61],
            None,
            "all below the target's 64 layers (drafter num_target_layers)",
        ),
        (
            "+",
            "dflash_config.target_layer_ids (formula)",
            "warning",
            [2, 16, 31, 46, 61],
            [1, 16, 31, 46, 61],
            "not build_target_layer_ids(64, 5); fine if the checkpoint was trained on these ids",
        ),
        (
            "+",
            "aux layers",
            "ok",
            "(3, 17, 32, 47, 62)",
            "(3, 17, 32, 47, 62)",
            "vLLM logs 'Using auxiliary layers from speculative config: (3, 17, 32, 47, 62)'",
        ),
    ],
    "ids for a 3-layer target": [
        (
            "-",
            "dflash_config.target_layer_ids",
            "ok",
            [1, 16, 31, 46, 61],
            None,
            "all below the target's 64 layers (drafter num_target_layers)",
        ),
        (
            "-",
            "dflash_config.target_layer_ids (formula)",
            "ok",
            [1, 16, 31, 46, 61],
            [1, 16, 31, 46, 61],
            None,
        ),
        (
            "-",
            "aux layers",
            "ok",
            "(2, 17, 32, 47, 62)",
            "(2, 17, 32, 47, 62)",
            "vLLM logs 'Using auxiliary layers from speculative config: (2, 17, 32, 47, 62)'",
        ),
        (
            "-",
            "layer_types",
            "ok",
            [
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "full_attention",
            ],
            None,
            "4 × sliding_attention + 1 × full_attention",
        ),
        ("-", "sliding_window", "ok", 2048, None, "read from sliding_window"),
        (
            "-",
            "attention (per layer)",
            "ok",
            "4 sliding, 1 full; 4 causal, 1 non-causal",
            None,
            "non-causal layers need an attention backend with non-causal support",
        ),
        (
            "-",
            "vllm: model runner",
            "warning",
            "V2 only",
            None,
            "needs vLLM's V2 model runner (VLLM_USE_V2_MODEL_RUNNER=1; 0.32 picks"
            " V2 by default only "
            "where Triton is available, so never on the CPU build); the V1 runner"
            " exits with 'Model "
            "Runner V1 does not support: mixed sliding/full dflash drafts'",
        ),
        (
            "+",
            "dflash_config.target_layer_ids",
            "ok",
            [0, 1, 2],
            None,
            "all below the target's 3 layers (drafter num_target_layers)",
        ),
        (
            "+",
            "aux layers",
            "ok",
            "(1, 2, 3)",
            "(1, 2, 3)",
            "vLLM logs 'Using auxiliary layers from speculative config: (1, 2, 3)'",
        ),
        (
            "+",
            "attention (per layer)",
            "ok",
            "0 sliding, 3 full; 0 causal, 3 non-causal",
            None,
            "non-causal layers need an attention backend with non-causal support",
        ),
        (
            "+",
            "transformers: layer_types",
            "warning",
            None,
            ["full_attention", "full_attention", "full_attention"],
            "found = the file (no layer_types), expected = what Qwen3Config fills in: 3 × "
            "full_attention (sliding only for layers >= max_window_layers when a window survives)",
        ),
        ("+", "vllm: model runner", "ok", "V1 and V2", None, None),
    ],
    "ids for a 4-layer target": [
        (
            "-",
            "dflash_config.target_layer_ids",
            "ok",
            [1, 16, 31, 46, 61],
            None,
            "all below the target's 64 layers (drafter num_target_layers)",
        ),
        (
            "-",
            "dflash_config.target_layer_ids (formula)",
            "ok",
            [1, 16, 31, 46, 61],
            [1, 16, 31, 46, 61],
            None,
        ),
        (
            "-",
            "aux layers",
            "ok",
            "(2, 17, 32, 47, 62)",
            "(2, 17, 32, 47, 62)",
            "vLLM logs 'Using auxiliary layers from speculative config: (2, 17, 32, 47, 62)'",
        ),
        (
            "-",
            "layer_types",
            "ok",
            [
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "full_attention",
            ],
            None,
            "4 × sliding_attention + 1 × full_attention",
        ),
        ("-", "sliding_window", "ok", 2048, None, "read from sliding_window"),
        (
            "-",
            "attention (per layer)",
            "ok",
            "4 sliding, 1 full; 4 causal, 1 non-causal",
            None,
            "non-causal layers need an attention backend with non-causal support",
        ),
        (
            "-",
            "vllm: model runner",
            "warning",
            "V2 only",
            None,
            "needs vLLM's V2 model runner (VLLM_USE_V2_MODEL_RUNNER=1; 0.32 picks"
            " V2 by default only "
            "where Triton is available, so never on the CPU build); the V1 runner"
            " exits with 'Model "
            "Runner V1 does not support: mixed sliding/full dflash drafts'",
        ),
        (
            "+",
            "dflash_config.target_layer_ids",
            "ok",
            [0, 1, 2],
            None,
            "all below the target's 4 layers (drafter num_target_layers)",
        ),
        (
            "+",
            "dflash_config.target_layer_ids (formula)",
            "warning",
            [0, 1, 2],
            [1, 1, 1],
            "not build_target_layer_ids(4, 3); fine if the checkpoint was trained on these ids",
        ),
        (
            "+",
            "aux layers",
            "ok",
            "(1, 2, 3)",
            "(1, 2, 3)",
            "vLLM logs 'Using auxiliary layers from speculative config: (1, 2, 3)'",
        ),
        (
            "+",
            "attention (per layer)",
            "ok",
            "0 sliding, 3 full; 0 causal, 3 non-causal",
            None,
            "non-causal layers need an attention backend with non-causal support",
        ),
        (
            "+",
            "transformers: layer_types",
            "warning",
            None,
            ["full_attention", "full_attention", "full_attention"],
            "found = the file (no layer_types), expected = what Qwen3Config fills in: 3 × "
            "full_attention (sliding only for layers >= max_window_layers when a window survives)",
        ),
        ("+", "vllm: model runner", "ok", "V1 and V2", None, None),
    ],
    "aux counts match by accident": [
        (
            "-",
            "dflash_config.target_layer_ids",
            "ok",
            [1, 16, 31, 46, 61],
            None,
            "all below the target's 64 layers (drafter num_target_layers)",
        ),
        (
            "-",
            "dflash_config.target_layer_ids (formula)",
            "ok",
            [1, 16, 31, 46, 61],
            [1, 16, 31, 46, 61],
            None,
        ),
        (
            "-",
            "aux layers",
            "ok",
            "(2, 17, 32, 47, 62)",
            "(2, 17, 32, 47, 62)",
            "vLLM logs 'Using auxiliary layers from speculative config: (2, 17, 32, 47, 62)'",
        ),
        (
            "+",
            "dflash_config.target_layer_ids (location)",
            "missing",
            "top level only",
            "inside dflash_config",
            "vLLM's V1 runner ignores a top-level target_layer_ids: it captures its"
            " default layers (2, "
            "L//2, L-3) and logs no 'Using auxiliary layers' line, so the drafter gets the wrong "
            "features or dies on the first request; move it into dflash_config"
            " (verify-config --fix "
            "does)",
        ),
        (
            "+",
            "dflash_config.target_layer_ids",
            "ok",
            [1, 16, 31],
            None,
            "all below the target's 64 layers (drafter num_target_layers)",
        ),
        (
            "+",
            "dflash_config.target_layer_ids (formula)",
            "warning",
            [1, 16, 31],
            [1, 31, 61],
            "not build_target_layer_ids(64, 3); fine if the checkpoint was trained on these ids",
        ),
        (
            "+",
            "aux layers (vllm V1)",
            "invalid",
            "(2, 32, 61) from model default (2, L//2, L-3)",
            "(2, 17, 32)",
            "the counts match by accident: the drafter gets the wrong target layers, with no error",
        ),
    ],
    "layer_types not a list": [
        (
            "-",
            "layer_types",
            "ok",
            [
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "full_attention",
            ],
            [
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "full_attention",
            ],
            None,
        ),
        (
            "-",
            "attention (per layer)",
            "ok",
            "4 sliding, 1 full; 4 causal, 1 non-causal",
            None,
            "non-causal layers need an attention backend with non-causal support",
        ),
        (
            "-",
            "vllm: model runner",
            "warning",
            "V2 only",
            None,
            "needs vLLM's V2 model runner (VLLM_USE_V2_MODEL_RUNNER=1; 0.32 picks"
            " V2 by default only "
            "where Triton is available, so never on the CPU build); the V1 runner"
            " exits with 'Model "
            "Runner V1 does not support: mixed sliding/full dflash drafts'",
        ),
        (
            "+",
            "layer_types",
            "invalid",
            "sliding",
            [
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "full_attention",
            ],
            None,
        ),
        (
            "+",
            "attention (per layer)",
            "ok",
            "0 sliding, 5 full; 0 causal, 5 non-causal",
            None,
            "non-causal layers need an attention backend with non-causal support",
        ),
        (
            "+",
            "transformers (load)",
            "invalid",
            None,
            None,
            "transformers' Qwen3Config refuses the file: Field 'layer_types' expected a list of "
            "strings",
        ),
        ("+", "vllm: model runner", "ok", "V1 and V2", None, None),
    ],
    "layer_types short, no entry": [
        (
            "-",
            "layer_types",
            "ok",
            [
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "full_attention",
            ],
            None,
            "4 × sliding_attention + 1 × full_attention",
        ),
        (
            "-",
            "vllm: model runner",
            "warning",
            "V2 only",
            None,
            "needs vLLM's V2 model runner (VLLM_USE_V2_MODEL_RUNNER=1; 0.32 picks"
            " V2 by default only "
            "where Triton is available, so never on the CPU build); the V1 runner"
            " exits with 'Model "
            "Runner V1 does not support: mixed sliding/full dflash drafts'",
        ),
        (
            "+",
            "layer_types",
            "invalid",
            ["sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention"],
            "5 entries",
            "4 entries for 5 layers: transformers refuses to load it"
            " (`num_hidden_layers` (5) must be "
            "equal to the number of `layer_types` (4))",
        ),
        (
            "+",
            "transformers (load)",
            "invalid",
            None,
            None,
            "transformers' Qwen3Config refuses the file: `num_hidden_layers` (5)"
            " must be equal to the "
            "number of `layer_types` (4)",
        ),
        ("+", "vllm: model runner", "ok", "V1 and V2", None, None),
    ],
    "layer_types all full": [
        (
            "-",
            "layer_types",
            "ok",
            [
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "full_attention",
            ],
            [
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "full_attention",
            ],
            None,
        ),
        (
            "-",
            "attention (per layer)",
            "ok",
            "4 sliding, 1 full; 4 causal, 1 non-causal",
            None,
            "non-causal layers need an attention backend with non-causal support",
        ),
        (
            "-",
            "vllm: model runner",
            "warning",
            "V2 only",
            None,
            "needs vLLM's V2 model runner (VLLM_USE_V2_MODEL_RUNNER=1; 0.32 picks"
            " V2 by default only "
            "where Triton is available, so never on the CPU build); the V1 runner"
            " exits with 'Model "
            "Runner V1 does not support: mixed sliding/full dflash drafts'",
        ),
        (
            "+",
            "layer_types",
            "mismatch",
            [
                "full_attention",
                "full_attention",
                "full_attention",
                "full_attention",
                "full_attention",
            ],
            [
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "full_attention",
            ],
            "all full_attention where the published drafter has 4 sliding_attention"
            " layers: sliding "
            "layers run as full attention lose long-context acceptance (vLLM PR #40898)",
        ),
        (
            "+",
            "attention (per layer)",
            "ok",
            "0 sliding, 5 full; 0 causal, 5 non-causal",
            None,
            "non-causal layers need an attention backend with non-causal support",
        ),
        ("+", "vllm: model runner", "ok", "V1 and V2", None, None),
    ],
    "layer_types other runs": [
        (
            "-",
            "layer_types",
            "ok",
            [
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "full_attention",
            ],
            [
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "full_attention",
            ],
            None,
        ),
        (
            "+",
            "layer_types",
            "mismatch",
            [
                "full_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
            ],
            [
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "full_attention",
            ],
            "1 × full_attention + 4 × sliding_attention instead of 4 × sliding_attention + 1 × "
            "full_attention",
        ),
    ],
    "layer_types unknown allowed": [
        (
            "-",
            "layer_types",
            "ok",
            [
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "full_attention",
            ],
            None,
            "4 × sliding_attention + 1 × full_attention",
        ),
        (
            "+",
            "layer_types",
            "warning",
            [
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "chunked_attention",
            ],
            "sliding_attention or full_attention",
            "['chunked_attention']: vLLM's DFlash treats every type but sliding_attention as full "
            "attention",
        ),
    ],
    "layer_types unknown refused": [
        (
            "-",
            "layer_types",
            "ok",
            [
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "full_attention",
            ],
            None,
            "4 × sliding_attention + 1 × full_attention",
        ),
        (
            "+",
            "layer_types",
            "invalid",
            [
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "foo",
            ],
            "sliding_attention or full_attention",
            "['foo']: vLLM's DFlash treats every type but sliding_attention as full attention; "
            "transformers refuses unknown attention types",
        ),
        (
            "+",
            "transformers (load)",
            "invalid",
            None,
            None,
            "transformers' Qwen3Config refuses the file: The `layer_types` entries must be known "
            "attention types, got ['foo']",
        ),
    ],
    "layer_types missing": [
        (
            "-",
            "layer_types",
            "ok",
            [
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "full_attention",
            ],
            [
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "full_attention",
            ],
            None,
        ),
        (
            "-",
            "attention (per layer)",
            "ok",
            "4 sliding, 1 full; 4 causal, 1 non-causal",
            None,
            "non-causal layers need an attention backend with non-causal support",
        ),
        (
            "-",
            "vllm: model runner",
            "warning",
            "V2 only",
            None,
            "needs vLLM's V2 model runner (VLLM_USE_V2_MODEL_RUNNER=1; 0.32 picks"
            " V2 by default only "
            "where Triton is available, so never on the CPU build); the V1 runner"
            " exits with 'Model "
            "Runner V1 does not support: mixed sliding/full dflash drafts'",
        ),
        (
            "+",
            "layer_types",
            "mismatch",
            [
                "full_attention",
                "full_attention",
                "full_attention",
                "full_attention",
                "full_attention",
            ],
            [
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "full_attention",
            ],
            "all full_attention where the published drafter has 4 sliding_attention"
            " layers: sliding "
            "layers run as full attention lose long-context acceptance (vLLM PR"
            " #40898); the file has "
            "no layer_types, transformers filled them",
        ),
        (
            "+",
            "attention (per layer)",
            "ok",
            "0 sliding, 5 full; 0 causal, 5 non-causal",
            None,
            "non-causal layers need an attention backend with non-causal support",
        ),
        (
            "+",
            "transformers: layer_types",
            "warning",
            None,
            [
                "full_attention",
                "full_attention",
                "full_attention",
                "full_attention",
                "full_attention",
            ],
            "found = the file (no layer_types), expected = what Qwen3Config fills in: 5 × "
            "full_attention (sliding only for layers >= max_window_layers when a window survives)",
        ),
        ("+", "vllm: model runner", "ok", "V1 and V2", None, None),
    ],
    "layer_types missing, no entry": [
        (
            "-",
            "layer_types",
            "ok",
            [
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "full_attention",
            ],
            None,
            "4 × sliding_attention + 1 × full_attention",
        ),
        ("-", "sliding_window", "ok", 2048, None, "read from sliding_window"),
        (
            "-",
            "attention (per layer)",
            "ok",
            "4 sliding, 1 full; 4 causal, 1 non-causal",
            None,
            "non-causal layers need an attention backend with non-causal support",
        ),
        (
            "-",
            "vllm: model runner",
            "warning",
            "V2 only",
            None,
            "needs vLLM's V2 model runner (VLLM_USE_V2_MODEL_RUNNER=1; 0.32 picks"
            " V2 by default only "
            "where Triton is available, so never on the CPU build); the V1 runner"
            " exits with 'Model "
            "Runner V1 does not support: mixed sliding/full dflash drafts'",
        ),
        (
            "+",
            "attention (per layer)",
            "ok",
            "0 sliding, 5 full; 0 causal, 5 non-causal",
            None,
            "non-causal layers need an attention backend with non-causal support",
        ),
        (
            "+",
            "transformers: layer_types",
            "warning",
            None,
            [
                "full_attention",
                "full_attention",
                "full_attention",
                "full_attention",
                "full_attention",
            ],
            "found = the file (no layer_types), expected = what Qwen3Config fills in: 5 × "
            "full_attention (sliding only for layers >= max_window_layers when a window survives)",
        ),
        ("+", "vllm: model runner", "ok", "V1 and V2", None, None),
    ],
    "window dropped": [
        ("-", "sliding_window", "ok", 2048, 2048, "read from sliding_window"),
        (
            "+",
            "sliding_window",
            "invalid",
            None,
            2048,
            "4 sliding layers and no window after transformers loads the file: vLLM"
            " raises ValueError: "
            "DFlash sliding attention requires a window size configured in "
            "dflash_config.swa_window_size or the top-level sliding_window. (the top-level "
            "sliding_window is dropped by transformers' Qwen3Config because"
            " use_sliding_window is not "
            "true; put it in dflash_config.swa_window_size)",
        ),
        (
            "+",
            "transformers: sliding_window",
            "warning",
            2048,
            None,
            "found = the file, expected = what Qwen3Config holds after loading it: the window is "
            "dropped because use_sliding_window is not true; the sliding layers need it",
        ),
    ],
    "window zero": [
        ("-", "sliding_window", "ok", 2048, 2048, "read from sliding_window"),
        (
            "+",
            "sliding_window",
            "invalid",
            0,
            "a positive integer",
            "read from sliding_window: a sliding layer's window must hold at least one token",
        ),
    ],
    "window other": [
        ("-", "sliding_window", "ok", 2048, 2048, "read from sliding_window"),
        ("+", "sliding_window", "mismatch", 4096, 2048, "read from sliding_window"),
    ],
    "window in swa_window_size": [
        ("-", "sliding_window", "ok", 2048, None, "read from sliding_window"),
        ("+", "sliding_window", "ok", 1024, None, "read from dflash_config.swa_window_size"),
    ],
    "window default 4096": [
        ("-", "sliding_window", "ok", 2048, None, "read from sliding_window"),
        ("+", "sliding_window", "ok", 4096, None, "read from sliding_window"),
        (
            "+",
            "transformers: sliding_window",
            "warning",
            None,
            4096,
            "use_sliding_window without a sliding_window: Qwen3Config fills its default 4096",
        ),
    ],
    "is_causal a string": [
        (
            "-",
            "attention (per layer)",
            "ok",
            "4 sliding, 1 full; 4 causal, 1 non-causal",
            None,
            "non-causal layers need an attention backend with non-causal support",
        ),
        ("+", "is_causal", "invalid", "yes", "true or false", "vLLM takes bool('yes') = True"),
        (
            "+",
            "attention (per layer)",
            "ok",
            "4 sliding, 1 full; 5 causal, 0 non-causal",
            None,
            None,
        ),
    ],
    "dflash causal a number": [
        (
            "-",
            "attention (per layer)",
            "ok",
            "4 sliding, 1 full; 4 causal, 1 non-causal",
            None,
            "non-causal layers need an attention backend with non-causal support",
        ),
        ("+", "dflash_config.causal", "invalid", 0, "true or false", "vLLM takes bool(0) = False"),
        (
            "+",
            "attention (per layer)",
            "ok",
            "4 sliding, 1 full; 0 causal, 5 non-causal",
            None,
            "non-causal layers need an attention backend with non-causal support",
        ),
    ],
    "non-causal layers": [
        (
            "-",
            "attention (per layer)",
            "ok",
            "4 sliding, 1 full; 4 causal, 1 non-causal",
            None,
            "non-causal layers need an attention backend with non-causal support",
        ),
        (
            "+",
            "attention (per layer)",
            "ok",
            "4 sliding, 1 full; 0 causal, 5 non-causal",
            None,
            "non-causal layers need an attention backend with non-causal support",
        ),
    ],
    "block 1": [
        ("-", "block_size", "ok", 16, 16, "read from block_size"),
        (
            "-",
            "num_speculative_tokens",
            "ok",
            15,
            15,
            '--speculative-config \'{"method": "dflash", "num_speculative_tokens":'
            " 15}': vLLM never "
            "reads block_size; a smaller K works, a larger one asks for positions"
            " the drafter never "
            "trained",
        ),
        ("+", "block_size", "invalid", 1, "an integer >= 2", None),
    ],
    "block a string": [
        ("-", "block_size", "ok", 16, 16, "read from block_size"),
        (
            "-",
            "num_speculative_tokens",
            "ok",
            15,
            15,
            '--speculative-config \'{"method": "dflash", "num_speculative_tokens":'
            " 15}': vLLM never "
            "reads block_size; a smaller K works, a larger one asks for positions"
            " the drafter never "
            "trained",
        ),
        ("+", "block_size", "invalid", "16", "an integer >= 2", None),
    ],
    "block 2": [
        ("-", "block_size", "ok", 16, None, "read from block_size"),
        (
            "-",
            "num_speculative_tokens",
            "ok",
            15,
            15,
            '--speculative-config \'{"method": "dflash", "num_speculative_tokens":'
            " 15}': vLLM never "
            "reads block_size; a smaller K works, a larger one asks for positions"
            " the drafter never "
            "trained",
        ),
        ("+", "block_size", "ok", 2, None, "read from block_size"),
        (
            "+",
            "num_speculative_tokens",
            "ok",
            1,
            1,
            '--speculative-config \'{"method": "dflash", "num_speculative_tokens":'
            " 1}': vLLM never "
            "reads block_size; a smaller K works, a larger one asks for positions"
            " the drafter never "
            "trained",
        ),
    ],
    "block missing": [
        ("-", "block_size", "ok", 16, None, "read from block_size"),
        (
            "-",
            "num_speculative_tokens",
            "ok",
            15,
            15,
            '--speculative-config \'{"method": "dflash", "num_speculative_tokens":'
            " 15}': vLLM never "
            "reads block_size; a smaller K works, a larger one asks for positions"
            " the drafter never "
            "trained",
        ),
        (
            "+",
            "block_size",
            "warning",
            None,
            None,
            "not in the file: sglang then uses 16; vLLM never reads it (it needs "
            "num_speculative_tokens)",
        ),
    ],
    "block in dflash_config": [
        ("-", "block_size", "ok", 16, None, "read from block_size"),
        (
            "-",
            "num_speculative_tokens",
            "ok",
            15,
            15,
            '--speculative-config \'{"method": "dflash", "num_speculative_tokens":'
            " 15}': vLLM never "
            "reads block_size; a smaller K works, a larger one asks for positions"
            " the drafter never "
            "trained",
        ),
        ("+", "block_size", "ok", 8, None, "read from dflash_config.block_size"),
        (
            "+",
            "num_speculative_tokens",
            "ok",
            7,
            7,
            '--speculative-config \'{"method": "dflash", "num_speculative_tokens":'
            " 7}': vLLM never "
            "reads block_size; a smaller K works, a larger one asks for positions"
            " the drafter never "
            "trained",
        ),
    ],
    "sglang": [
        (
            "-",
            "num_speculative_tokens",
            "ok",
            15,
            15,
            '--speculative-config \'{"method": "dflash", "num_speculative_tokens":'
            " 15}': vLLM never "
            "reads block_size; a smaller K works, a larger one asks for positions"
            " the drafter never "
            "trained",
        ),
        (
            "-",
            "vllm: model runner",
            "warning",
            "V2 only",
            None,
            "needs vLLM's V2 model runner (VLLM_USE_V2_MODEL_RUNNER=1; 0.32 picks"
            " V2 by default only "
            "where Triton is available, so never on the CPU build); the V1 runner"
            " exits with 'Model "
            "Runner V1 does not support: mixed sliding/full dflash drafts'",
        ),
        (
            "+",
            "num_speculative_tokens",
            "ok",
            15,
            15,
            "--speculative-num-draft-tokens 16 (the block, anchor included)",
        ),
    ],
    "local": [
        (
            "-",
            "num_speculative_tokens",
            "ok",
            15,
            15,
            '--speculative-config \'{"method": "dflash", "num_speculative_tokens":'
            " 15}': vLLM never "
            "reads block_size; a smaller K works, a larger one asks for positions"
            " the drafter never "
            "trained",
        ),
        (
            "-",
            "vllm: model runner",
            "warning",
            "V2 only",
            None,
            "needs vLLM's V2 model runner (VLLM_USE_V2_MODEL_RUNNER=1; 0.32 picks"
            " V2 by default only "
            "where Triton is available, so never on the CPU build); the V1 runner"
            " exits with 'Model "
            "Runner V1 does not support: mixed sliding/full dflash drafts'",
        ),
        (
            "+",
            "num_speculative_tokens",
            "ok",
            15,
            15,
            "K = 15 proposals per step (block 16 minus the anchor)",
        ),
        (
            "+",
            "local: mixed sliding/full",
            "ok",
            "4 × sliding_attention + 1 × full_attention",
            None,
            "the bundled engine reads the config like vLLM and supports mixed layers",
        ),
    ],
    "rope theta float": [],
    "rope theta missing": [
        ("-", "rope_theta", "ok", 10000000, 10000000, None),
        ("+", "rope_theta", "missing", None, 10000000, "absent: vLLM defaults to 1e6"),
    ],
    "rope theta fractional": [
        ("-", "rope_theta", "ok", 10000000, 10000000, None),
        (
            "+",
            "rope_theta",
            "mismatch",
            10000.5,
            10000000,
            "a RoPE theta mismatch is silent: acceptance just drops",
        ),
    ],
    "dflash2 without its fields": [
        ("-", "architectures", "ok", ["DFlashDraftModel"], None, None),
        (
            "-",
            "vllm: model runner",
            "warning",
            "V2 only",
            None,
            "needs vLLM's V2 model runner (VLLM_USE_V2_MODEL_RUNNER=1; 0.32 picks"
            " V2 by default only "
            "where Triton is available, so never on the CPU build); the V1 runner"
            " exits with 'Model "
            "Runner V1 does not support: mixed sliding/full dflash drafts'",
        ),
        ("+", "architectures", "ok", ["DFlash2DraftModel"], None, None),
        (
            "+",
            "dflash_config (DFlash 2)",
            "invalid",
            ["conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k"],
            ["conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k"],
            "vLLM's qwen3_dflash2 reads dflash_config['conv_kernel_size'] (KeyError)",
        ),
        (
            "+",
            "vllm: model runner",
            "warning",
            "V2 only",
            None,
            "needs vLLM's V2 model runner (VLLM_USE_V2_MODEL_RUNNER=1; 0.32 picks"
            " V2 by default only "
            "where Triton is available, so never on the CPU build); the V1 runner"
            " exits with 'Model "
            "Runner V1 does not support: mixed sliding/full dflash drafts, DFlash candidate-head "
            "drafts'",
        ),
    ],
    "dflash2 conv group": [
        ("-", "architectures", "ok", ["DFlashDraftModel"], None, None),
        (
            "-",
            "vllm: model runner",
            "warning",
            "V2 only",
            None,
            "needs vLLM's V2 model runner (VLLM_USE_V2_MODEL_RUNNER=1; 0.32 picks"
            " V2 by default only "
            "where Triton is available, so never on the CPU build); the V1 runner"
            " exits with 'Model "
            "Runner V1 does not support: mixed sliding/full dflash drafts'",
        ),
        ("+", "architectures", "ok", ["DFlash2DraftModel"], None, None),
        (
            "+",
            "dflash_config (DFlash 2)",
            "invalid",
            ["conv_kernel_size", "selector_rank", "selector_top_k"],
            ["conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k"],
            "vLLM's qwen3_dflash2 reads dflash_config['conv_kernel_size'] (KeyError)",
        ),
        (
            "+",
            "dflash_config.conv_group_size",
            "invalid",
            3,
            "a divisor of hidden_size 5120",
            "vLLM: conv_group_size=3 must divide hidden_size=5120.",
        ),
        (
            "+",
            "vllm: model runner",
            "warning",
            "V2 only",
            None,
            "needs vLLM's V2 model runner (VLLM_USE_V2_MODEL_RUNNER=1; 0.32 picks"
            " V2 by default only "
            "where Triton is available, so never on the CPU build); the V1 runner"
            " exits with 'Model "
            "Runner V1 does not support: mixed sliding/full dflash drafts, DFlash candidate-head "
            "drafts'",
        ),
    ],
    "no aux hidden state": [
        (
            "-",
            "aux layers",
            "ok",
            "(2, 17, 32, 47, 62)",
            "(2, 17, 32, 47, 62)",
            "vLLM logs 'Using auxiliary layers from speculative config: (2, 17, 32, 47, 62)'",
        ),
        (
            "+",
            "use_aux_hidden_state",
            "warning",
            False,
            True,
            "no fc: the drafter ignores the target's hidden states",
        ),
    ],
    "draft vocab": [
        (
            "+",
            "draft_vocab_size",
            "warning",
            32000,
            248320,
            "a draft vocabulary of 32000 tokens needs the drafter's own lm_head"
            " [32000, hidden] and a "
            "d2t map [32000] in the weights; none were read, so neither is checked",
        )
    ],
    "draft vocab same": [],
    "target": [
        ("+", "target: num_hidden_layers", "ok", 64, 64, None),
        ("+", "target: vocab_size", "ok", 248320, 248320, None),
        ("+", "target: hidden_size", "ok", 5120, 5120, None),
    ],
    "target, no entry": [
        (
            "-",
            "dflash_config.target_layer_ids",
            "ok",
            [1, 16, 31, 46, 61],
            None,
            "all below the target's 64 layers (drafter num_target_layers)",
        ),
        (
            "+",
            "dflash_config.target_layer_ids",
            "ok",
            [1, 16, 31, 46, 61],
            None,
            "all below the target's 64 layers (target config)",
        ),
        ("+", "target: num_hidden_layers", "ok", 64, None, "target text_config"),
        ("+", "target: vocab_size", "ok", 248320, None, "mask_token_id 248070 is inside it"),
        ("+", "target: hidden_size", "ok", 5120, None, None),
    ],
    "target layers 0": [
        (
            "-",
            "dflash_config.target_layer_ids",
            "ok",
            [1, 16, 31, 46, 61],
            [1, 16, 31, 46, 61],
            None,
        ),
        (
            "-",
            "dflash_config.target_layer_ids (formula)",
            "ok",
            [1, 16, 31, 46, 61],
            [1, 16, 31, 46, 61],
            None,
        ),
        (
            "-",
            "aux layers",
            "ok",
            "(2, 17, 32, 47, 62)",
            "(2, 17, 32, 47, 62)",
            "vLLM logs 'Using auxiliary layers from speculative config: (2, 17, 32, 47, 62)'",
        ),
        ("-", "target: num_hidden_layers", "ok", 64, 64, None),
        (
            "+",
            "dflash_config.target_layer_ids",
            "invalid",
            [1, 16, 31, 46, 61],
            [1, 16, 31, 46, 61],
            "ids [1, 16, 31, 46, 61] name no layer of a 0-layer target (target config; engines "
            "capture id + 1, so only -1 exists): dropped silently at start-up, then the first "
            "request dies with 'DFlash drafter expects X concatenated aux hidden features but "
            "received Y'",
        ),
        (
            "+",
            "aux layers (vllm V1)",
            "invalid",
            "(2, 17, 32, 47, 62) from dflash_config.target_layer_ids (+1)",
            "(2, 17, 32, 47, 62)",
            "ValueError: DFlash drafter expects 25600 concatenated aux hidden features but "
            "received 0 (on the first request; /health still answers 200)",
        ),
        (
            "+",
            "aux layers (vllm V2)",
            "invalid",
            "(2, 17, 32, 47, 62) from dflash_config.target_layer_ids",
            "(2, 17, 32, 47, 62)",
            "ValueError: DFlash drafter expects 25600 concatenated aux hidden features but "
            "received 0 (on the first request; /health still answers 200)",
        ),
        (
            "+",
            "target: num_hidden_layers",
            "invalid",
            0,
            "a positive integer",
            "target text_config",
        ),
    ],
    "target layers missing": [
        ("-", "target: num_hidden_layers", "ok", 64, 64, None),
        (
            "+",
            "target: num_hidden_layers",
            "missing",
            None,
            "a positive integer",
            "target text_config",
        ),
    ],
    "target layers 48": [
        (
            "-",
            "dflash_config.target_layer_ids",
            "ok",
            [1, 16, 31, 46, 61],
            [1, 16, 31, 46, 61],
            None,
        ),
        (
            "-",
            "dflash_config.target_layer_ids (formula)",
            "ok",
            [1, 16, 31, 46, 61],
            [1, 16, 31, 46, 61],
            None,
        ),
        (
            "-",
            "aux layers",
            "ok",
            "(2, 17, 32, 47, 62)",
            "(2, 17, 32, 47, 62)",
            "vLLM logs 'Using auxiliary layers from speculative config: (2, 17, 32, 47, 62)'",
        ),
        ("-", "target: num_hidden_layers", "ok", 64, 64, None),
        (
            "+",
            "dflash_config.target_layer_ids",
            "invalid",
            [1, 16, 31, 46, 61],
            [1, 16, 31, 46, 61],
            "ids [61] name no layer of a 48-layer target (target config; engines capture id + 1, "
            "so ids -1 … 47 exist): dropped silently at start-up, then the first request dies with "
            "'DFlash drafter expects X concatenated aux hidden features but received Y'",
        ),
        (
            "+",
            "aux layers (vllm V1)",
            "invalid",
            "(2, 17, 32, 47, 62) from dflash_config.target_layer_ids (+1)",
            "(2, 17, 32, 47, 62)",
            "ValueError: DFlash drafter expects 25600 concatenated aux hidden features but "
            "received 20480 (on the first request; /health still answers 200)",
        ),
        (
            "+",
            "aux layers (vllm V2)",
            "invalid",
            "(2, 17, 32, 47, 62) from dflash_config.target_layer_ids",
            "(2, 17, 32, 47, 62)",
            "ValueError: DFlash drafter expects 25600 concatenated aux hidden features but "
            "received 20480 (on the first request; /health still answers 200)",
        ),
        (
            "+",
            "target: num_hidden_layers",
            "mismatch",
            48,
            64,
            "the drafter was trained for a 64-layer target; this is another model",
        ),
    ],
    "target layers 48, no entry": [
        (
            "-",
            "dflash_config.target_layer_ids",
            "ok",
            [1, 16, 31, 46, 61],
            None,
            "all below the target's 64 layers (target config)",
        ),
        (
            "-",
            "dflash_config.target_layer_ids (formula)",
            "ok",
            [1, 16, 31, 46, 61],
            [1, 16, 31, 46, 61],
            None,
        ),
        (
            "-",
            "aux layers",
            "ok",
            "(2, 17, 32, 47, 62)",
            "(2, 17, 32, 47, 62)",
            "vLLM logs 'Using auxiliary layers from speculative config: (2, 17, 32, 47, 62)'",
        ),
        ("-", "target: num_hidden_layers", "ok", 64, None, "target text_config"),
        (
            "+",
            "dflash_config.target_layer_ids",
            "invalid",
            [1, 16, 31, 46, 61],
            None,
            "ids [61] name no layer of a 48-layer target (target config; engines capture id + 1, "
            "so ids -1 … 47 exist): dropped silently at start-up, then the first request dies with "
            "'DFlash drafter expects X concatenated aux hidden features but received Y'",
        ),
        (
            "+",
            "aux layers (vllm V1)",
            "invalid",
            "(2, 17, 32, 47, 62) from dflash_config.target_layer_ids (+1)",
            "(2, 17, 32, 47, 62)",
            "ValueError: DFlash drafter expects 25600 concatenated aux hidden features but "
            "received 20480 (on the first request; /health still answers 200)",
        ),
        (
            "+",
            "aux layers (vllm V2)",
            "invalid",
            "(2, 17, 32, 47, 62) from dflash_config.target_layer_ids",
            "(2, 17, 32, 47, 62)",
            "ValueError: DFlash drafter expects 25600 concatenated aux hidden features but "
            "received 20480 (on the first request; /health still answers 200)",
        ),
        (
            "+",
            "target: num_hidden_layers",
            "mismatch",
            48,
            64,
            "the drafter's num_target_layers names another target",
        ),
    ],
    "target layers 48, no drafter count": [
        (
            "-",
            "dflash_config.target_layer_ids",
            "ok",
            [1, 16, 31, 46, 61],
            None,
            "all below the target's 64 layers (target config)",
        ),
        (
            "-",
            "dflash_config.target_layer_ids (formula)",
            "ok",
            [1, 16, 31, 46, 61],
            [1, 16, 31, 46, 61],
            None,
        ),
        (
            "-",
            "aux layers",
            "ok",
            "(2, 17, 32, 47, 62)",
            "(2, 17, 32, 47, 62)",
            "vLLM logs 'Using auxiliary layers from speculative config: (2, 17, 32, 47, 62)'",
        ),
        ("-", "target: num_hidden_layers", "ok", 64, None, "target text_config"),
        (
            "+",
            "dflash_config.target_layer_ids",
            "invalid",
            [1, 16, 31, 46, 61],
            None,
            "ids [61] name no layer of a 48-layer target (target config; engines capture id + 1, "
            "so ids -1 … 47 exist): dropped silently at start-up, then the first request dies with "
            "'DFlash drafter expects X concatenated aux hidden features but received Y'",
        ),
        (
            "+",
            "aux layers (vllm V1)",
            "invalid",
            "(2, 17, 32, 47, 62) from dflash_config.target_layer_ids (+1)",
            "(2, 17, 32, 47, 62)",
            "ValueError: DFlash drafter expects 25600 concatenated aux hidden features but "
            "received 20480 (on the first request; /health still answers 200)",
        ),
        (
            "+",
            "aux layers (vllm V2)",
            "invalid",
            "(2, 17, 32, 47, 62) from dflash_config.target_layer_ids",
            "(2, 17, 32, 47, 62)",
            "ValueError: DFlash drafter expects 25600 concatenated aux hidden features but "
            "received 20480 (on the first request; /health still answers 200)",
        ),
        ("+", "target: num_hidden_layers", "ok", 48, None, "target text_config"),
    ],
    "target vocab at the mask": [
        ("-", "target: vocab_size", "ok", 248320, 248320, None),
        (
            "+",
            "target: vocab_size",
            "invalid",
            248070,
            "> mask_token_id 248070",
            "the mask token has no row in the target's embedding table",
        ),
    ],
    "target vocab just over the mask": [
        ("-", "target: vocab_size", "ok", 248320, 248320, None),
        (
            "+",
            "target: vocab_size",
            "mismatch",
            248071,
            248320,
            "the drafter shares the target's embed_tokens and lm_head: vocab sizes must agree",
        ),
    ],
    "target vocab other, no entry": [
        ("-", "target: vocab_size", "ok", 248320, None, "mask_token_id 248070 is inside it"),
        (
            "+",
            "target: vocab_size",
            "mismatch",
            248400,
            248320,
            "the drafter shares the target's embed_tokens and lm_head: vocab sizes must agree",
        ),
    ],
    "target vocab, no entry": [
        ("+", "vocab_size", "missing", None, "a positive integer", "required by every engine")
    ],
    "target hidden other": [
        ("-", "target: hidden_size", "ok", 5120, 5120, None),
        (
            "+",
            "target: hidden_size",
            "mismatch",
            4096,
            5120,
            "fc expects target_hidden_size × n features; the target's hidden states are 4096 wide",
        ),
    ],
    "target hidden vs target_hidden_size": [
        ("-", "target: hidden_size", "ok", 5120, 5120, None),
        (
            "+",
            "target: hidden_size",
            "mismatch",
            4096,
            5120,
            "the drafter embeds with the target's embed_tokens, so its hidden_size must match",
        ),
    ],
    "target hidden other than the fc's": [
        ("-", "target: hidden_size", "ok", 5120, 5120, None),
        (
            "+",
            "target: hidden_size",
            "mismatch",
            5120,
            4096,
            "fc expects target_hidden_size × n features; the target's hidden states are 5120 wide",
        ),
    ],
    "target hidden, no entry": [],
    "target rope differs": [
        (
            "+",
            "target: rope_theta",
            "warning",
            1000000.0,
            10000000.0,
            "the drafter and target use different RoPE theta: fine only if the"
            " drafter was trained that "
            "way",
        )
    ],
    "target rope same": [],
    "target flat": [("-", "target: hidden_size", "ok", 5120, 5120, None)],
    "sglang last layer": [
        (
            "-",
            "dflash_config.target_layer_ids",
            "ok",
            [1, 16, 31, 46, 61],
            None,
            "all below the target's 64 layers (drafter num_target_layers)",
        ),
        (
            "-",
            "dflash_config.target_layer_ids (formula)",
            "ok",
            [1, 16, 31, 46, 61],
            [1, 16, 31, 46, 61],
            None,
        ),
        (
            "-",
            "aux layers",
            "ok",
            "(2, 17, 32, 47, 62)",
            "(2, 17, 32, 47, 62)",
            "vLLM logs 'Using auxiliary layers from speculative config: (2, 17, 32, 47, 62)'",
        ),
        (
            "+",
            "dflash_config.target_layer_ids",
            "ok",
            [1, 16, 31, 46, 63],
            None,
            "all below the target's 64 layers (drafter num_target_layers)",
        ),
        (
            "+",
            "dflash_config.target_layer_ids (formula)",
            "warning",
            [1, 16, 31, 46, 63],
            [1, 16, 31, 46, 61],
            "not build_target_layer_ids(64, 5); fine if the checkpoint was trained on these ids",
        ),
        (
            "+",
            "aux layers",
            "ok",
            "(2, 17, 32, 47, 64)",
            "(2, 17, 32, 47, 64)",
            "vLLM logs 'Using auxiliary layers from speculative config: (2, 17, 32, 47, 64)'",
        ),
        (
            "+",
            "sglang: last target layer",
            "warning",
            63,
            None,
            "sglang captures id + 1, and the last layer has no next one: on Qwen3.5 the server "
            "dies at start-up with IndexError (sglang#32204, closed unfixed; #32206 not merged); "
            "on other models that capture is silently missing",
        ),
    ],
    "sglang no window": [
        ("-", "sliding_window", "ok", 2048, None, "read from sliding_window"),
        ("+", "sliding_window", "ok", 1024, None, "read from dflash_config.swa_window_size"),
        (
            "+",
            "sglang: sliding_window",
            "invalid",
            None,
            "sliding_window with use_sliding_window: true",
            "sglang reads the window from the loaded config's sliding_window, not "
            "dflash_config.swa_window_size: 'DFLASH sliding_attention layers require "
            "config.sliding_window.'",
        ),
    ],
    "local dflash2": [
        ("-", "architectures", "ok", ["DFlashDraftModel"], None, None),
        ("+", "architectures", "ok", ["DFlash2DraftModel"], None, None),
        (
            "+",
            "dflash_config (DFlash 2)",
            "invalid",
            ["conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k"],
            ["conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k"],
            "vLLM's qwen3_dflash2 reads dflash_config['conv_kernel_size'] (KeyError)",
        ),
        (
            "+",
            "local: architecture",
            "warning",
            "DFlash2DraftModel",
            "DFlashDraftModel",
            "the bundled engine implements DFlash (DFlashDraftModel)",
        ),
    ],
    "vllm all full": [
        (
            "-",
            "layer_types",
            "ok",
            [
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "full_attention",
            ],
            None,
            "4 × sliding_attention + 1 × full_attention",
        ),
        ("-", "sliding_window", "ok", 2048, None, "read from sliding_window"),
        (
            "-",
            "attention (per layer)",
            "ok",
            "4 sliding, 1 full; 4 causal, 1 non-causal",
            None,
            "non-causal layers need an attention backend with non-causal support",
        ),
        (
            "-",
            "vllm: model runner",
            "warning",
            "V2 only",
            None,
            "needs vLLM's V2 model runner (VLLM_USE_V2_MODEL_RUNNER=1; 0.32 picks"
            " V2 by default only "
            "where Triton is available, so never on the CPU build); the V1 runner"
            " exits with 'Model "
            "Runner V1 does not support: mixed sliding/full dflash drafts'",
        ),
        (
            "+",
            "layer_types",
            "ok",
            [
                "full_attention",
                "full_attention",
                "full_attention",
                "full_attention",
                "full_attention",
            ],
            None,
            "5 × full_attention",
        ),
        (
            "+",
            "attention (per layer)",
            "ok",
            "0 sliding, 5 full; 0 causal, 5 non-causal",
            None,
            "non-causal layers need an attention backend with non-causal support",
        ),
        ("+", "vllm: model runner", "ok", "V1 and V2", None, None),
    ],
    "weights": [
        (
            "+",
            "weights",
            "ok",
            "model.safetensors: 58 tensors, BF16, 3.46 GB",
            None,
            "read from the safetensors header only",
        ),
        (
            "+",
            "weights: fc.weight",
            "ok",
            [5120, 25600],
            [5120, 25600],
            "[hidden, target_hidden × 5 target layers]",
        ),
        ("+", "weights: layers", "ok", 5, 5, None),
        (
            "+",
            "weights: attention",
            "ok",
            "30 tensors",
            None,
            "shapes match the config (heads 32/8, head_dim 128)",
        ),
        ("+", "weights: mlp", "ok", "15 tensors", None, "shapes match the config"),
        ("+", "weights: norms", "ok", "12 tensors", None, "shapes match the config"),
        ("+", "weights: dtype", "ok", "BF16", "BF16", None),
        (
            "+",
            "weights: embed_tokens/lm_head",
            "ok",
            "shared with the target",
            None,
            "vLLM logs 'Detected EAGLE model without its own lm_head in the"
            " checkpoint. Sharing target "
            "model lm_head weights with the draft model.'",
        ),
    ],
    "weights, no entry": [
        (
            "+",
            "weights",
            "ok",
            "model.safetensors: 58 tensors, BF16, 3.46 GB",
            None,
            "read from the safetensors header only",
        ),
        (
            "+",
            "weights: fc.weight",
            "ok",
            [5120, 25600],
            [5120, 25600],
            "[hidden, target_hidden × 5 target layers]",
        ),
        ("+", "weights: layers", "ok", 5, 5, None),
        (
            "+",
            "weights: attention",
            "ok",
            "30 tensors",
            None,
            "shapes match the config (heads 32/8, head_dim 128)",
        ),
        ("+", "weights: mlp", "ok", "15 tensors", None, "shapes match the config"),
        ("+", "weights: norms", "ok", "12 tensors", None, "shapes match the config"),
        ("+", "weights: dtype", "ok", "BF16", "BF16", None),
        (
            "+",
            "weights: embed_tokens/lm_head",
            "ok",
            "shared with the target",
            None,
            "vLLM logs 'Detected EAGLE model without its own lm_head in the"
            " checkpoint. Sharing target "
            "model lm_head weights with the draft model.'",
        ),
    ],
    "weights, fc for 4 taps": [
        (
            "-",
            "weights",
            "ok",
            "model.safetensors: 58 tensors, BF16, 3.46 GB",
            None,
            "read from the safetensors header only",
        ),
        (
            "-",
            "weights: fc.weight",
            "ok",
            [5120, 25600],
            [5120, 25600],
            "[hidden, target_hidden × 5 target layers]",
        ),
        (
            "+",
            "weights",
            "ok",
            "model.safetensors: 58 tensors, BF16, 3.41 GB",
            None,
            "read from the safetensors header only",
        ),
        (
            "+",
            "weights: fc.weight",
            "mismatch",
            [5120, 20480],
            [5120, 25600],
            "the checkpoint was trained with 4 target layers, the config lists 5 "
            "(dflash_config.target_layer_ids); vLLM: AssertionError: Tried to load weights of size "
            "torch.Size([5120, 20480]) to a parameter of size torch.Size([5120, 25600])",
        ),
    ],
    "weights, no fc": [
        (
            "-",
            "weights",
            "ok",
            "model.safetensors: 58 tensors, BF16, 3.46 GB",
            None,
            "read from the safetensors header only",
        ),
        (
            "-",
            "weights: fc.weight",
            "ok",
            [5120, 25600],
            [5120, 25600],
            "[hidden, target_hidden × 5 target layers]",
        ),
        (
            "+",
            "weights",
            "ok",
            "model.safetensors: 57 tensors, BF16, 3.20 GB",
            None,
            "read from the safetensors header only",
        ),
        (
            "+",
            "weights: fc.weight",
            "missing",
            None,
            [5120, 25600],
            "the checkpoint has no fc; vLLM builds one and fails to load it",
        ),
    ],
    "weights, F32 norm": [
        (
            "-",
            "weights",
            "ok",
            "model.safetensors: 58 tensors, BF16, 3.46 GB",
            None,
            "read from the safetensors header only",
        ),
        ("-", "weights: dtype", "ok", "BF16", "BF16", None),
        (
            "+",
            "weights",
            "ok",
            "model.safetensors: 58 tensors, BF16/F32, 3.46 GB",
            None,
            "read from the safetensors header only",
        ),
        (
            "+",
            "weights: dtype",
            "warning",
            ["BF16", "F32"],
            "BF16",
            "mixed float dtypes: every tensor is cast to the serving dtype on load",
        ),
    ],
    "weights, an extra layer": [
        (
            "-",
            "weights",
            "ok",
            "model.safetensors: 58 tensors, BF16, 3.46 GB",
            None,
            "read from the safetensors header only",
        ),
        ("-", "weights: layers", "ok", 5, 5, None),
        (
            "-",
            "weights: attention",
            "ok",
            "30 tensors",
            None,
            "shapes match the config (heads 32/8, head_dim 128)",
        ),
        ("-", "weights: mlp", "ok", "15 tensors", None, "shapes match the config"),
        ("-", "weights: norms", "ok", "12 tensors", None, "shapes match the config"),
        (
            "+",
            "weights",
            "ok",
            "model.safetensors: 59 tensors, BF16, 3.46 GB",
            None,
            "read from the safetensors header only",
        ),
        (
            "+",
            "weights: layers",
            "mismatch",
            6,
            5,
            "the weights hold layers [0, 1, 2, 3, 4, 5], the config says num_hidden_layers 5",
        ),
        (
            "+",
            "weights: attention",
            "missing",
            "layers.5.self_attn.q_proj.weight",
            None,
            "6 tensors missing, e.g. layers.5.self_attn.q_proj.weight",
        ),
        (
            "+",
            "weights: mlp",
            "missing",
            "layers.5.mlp.gate_proj.weight",
            None,
            "3 tensors missing, e.g. layers.5.mlp.gate_proj.weight",
        ),
        (
            "+",
            "weights: norms",
            "missing",
            "layers.5.post_attention_layernorm.weight",
            None,
            "1 tensor missing, e.g. layers.5.post_attention_layernorm.weight",
        ),
    ],
    "weights, a missing q_proj": [
        (
            "-",
            "weights",
            "ok",
            "model.safetensors: 58 tensors, BF16, 3.46 GB",
            None,
            "read from the safetensors header only",
        ),
        (
            "-",
            "weights: attention",
            "ok",
            "30 tensors",
            None,
            "shapes match the config (heads 32/8, head_dim 128)",
        ),
        (
            "+",
            "weights",
            "ok",
            "model.safetensors: 57 tensors, BF16, 3.42 GB",
            None,
            "read from the safetensors header only",
        ),
        (
            "+",
            "weights: attention",
            "missing",
            "layers.0.self_attn.q_proj.weight",
            None,
            "1 tensor missing, e.g. layers.0.self_attn.q_proj.weight",
        ),
    ],
    "weights, mlp other": [
        (
            "-",
            "weights",
            "ok",
            "model.safetensors: 58 tensors, BF16, 3.46 GB",
            None,
            "read from the safetensors header only",
        ),
        ("-", "weights: mlp", "ok", "15 tensors", None, "shapes match the config"),
        (
            "+",
            "weights",
            "ok",
            "model.safetensors: 58 tensors, BF16, 3.29 GB",
            None,
            "read from the safetensors header only",
        ),
        (
            "+",
            "weights: mlp",
            "mismatch",
            "layers.1.mlp.up_proj.weight [1000, 5120] (expected [17408, 5120])",
            None,
            "1 tensor with a shape the config does not describe",
        ),
    ],
    "weights, lm_head": [
        (
            "-",
            "weights",
            "ok",
            "model.safetensors: 58 tensors, BF16, 3.46 GB",
            None,
            "read from the safetensors header only",
        ),
        (
            "-",
            "weights: embed_tokens/lm_head",
            "ok",
            "shared with the target",
            None,
            "vLLM logs 'Detected EAGLE model without its own lm_head in the"
            " checkpoint. Sharing target "
            "model lm_head weights with the draft model.'",
        ),
        (
            "+",
            "weights",
            "ok",
            "model.safetensors: 59 tensors, BF16, 6.00 GB",
            None,
            "read from the safetensors header only",
        ),
        (
            "+",
            "weights: embed_tokens/lm_head",
            "ok",
            ["lm_head.weight [248320, 5120]"],
            "[vocab, 5120]",
            "the drafter ships its own lm_head",
        ),
    ],
    "weights, embed_tokens": [
        (
            "-",
            "weights",
            "ok",
            "model.safetensors: 58 tensors, BF16, 3.46 GB",
            None,
            "read from the safetensors header only",
        ),
        (
            "-",
            "weights: embed_tokens/lm_head",
            "ok",
            "shared with the target",
            None,
            "vLLM logs 'Detected EAGLE model without its own lm_head in the"
            " checkpoint. Sharing target "
            "model lm_head weights with the draft model.'",
        ),
        (
            "+",
            "weights",
            "ok",
            "model.safetensors: 59 tensors, BF16, 6.00 GB",
            None,
            "read from the safetensors header only",
        ),
        (
            "+",
            "weights: embed_tokens/lm_head",
            "ok",
            ["embed_tokens.weight [248320, 5120]"],
            "[vocab, 5120]",
            "the drafter ships its own embed_tokens",
        ),
    ],
    "weights, mask_hidden": [
        (
            "-",
            "weights",
            "ok",
            "model.safetensors: 58 tensors, BF16, 3.46 GB",
            None,
            "read from the safetensors header only",
        ),
        (
            "+",
            "weights",
            "ok",
            "model.safetensors: 59 tensors, BF16, 3.46 GB",
            None,
            "read from the safetensors header only",
        ),
        (
            "+",
            "weights: mask_hidden",
            "invalid",
            "present",
            "absent",
            "vLLM asserts: DFlash embeds masked slots via mask_token_id; it should not ship a "
            "mask_hidden weight",
        ),
    ],
    "weights, model. prefix": [],
    "weights, draft vocab": [
        (
            "-",
            "weights",
            "ok",
            "model.safetensors: 58 tensors, BF16, 3.46 GB",
            None,
            "read from the safetensors header only",
        ),
        (
            "-",
            "weights: embed_tokens/lm_head",
            "ok",
            "shared with the target",
            None,
            "vLLM logs 'Detected EAGLE model without its own lm_head in the"
            " checkpoint. Sharing target "
            "model lm_head weights with the draft model.'",
        ),
        (
            "+",
            "weights",
            "ok",
            "model.safetensors: 60 tensors, BF16, 3.79 GB",
            None,
            "read from the safetensors header only",
        ),
        (
            "+",
            "weights: embed_tokens/lm_head",
            "ok",
            ["lm_head.weight [32000, 5120]"],
            "[vocab, 5120]",
            "the drafter ships its own lm_head",
        ),
        (
            "+",
            "weights: draft vocabulary",
            "ok",
            "32000 of 248320 tokens: own lm_head [32000, 5120], d2t [32000]",
            None,
            "draft ids go through the drafter's own lm_head and back to target ids via d2t",
        ),
    ],
    "weights, draft vocab without d2t": [
        (
            "-",
            "weights",
            "ok",
            "model.safetensors: 58 tensors, BF16, 3.46 GB",
            None,
            "read from the safetensors header only",
        ),
        (
            "-",
            "weights: embed_tokens/lm_head",
            "ok",
            "shared with the target",
            None,
            "vLLM logs 'Detected EAGLE model without its own lm_head in the"
            " checkpoint. Sharing target "
            "model lm_head weights with the draft model.'",
        ),
        (
            "+",
            "weights",
            "ok",
            "model.safetensors: 59 tensors, BF16, 3.79 GB",
            None,
            "read from the safetensors header only",
        ),
        (
            "+",
            "weights: embed_tokens/lm_head",
            "ok",
            ["lm_head.weight [32000, 5120]"],
            "[vocab, 5120]",
            "the drafter ships its own lm_head",
        ),
        (
            "+",
            "weights: d2t",
            "missing",
            None,
            [32000],
            "a draft vocabulary of 32000 tokens needs the d2t map to target ids;"
            " without it draft ids "
            "are taken as target ids: the engine then shows mean acceptance length 1.00 with every "
            "position at 0.000 while the text stays right (vllm-ascend#11374, "
            "local-inference-lab/vllm#54)",
        ),
    ],
    "weights, draft vocab without lm_head": [
        (
            "-",
            "weights: embed_tokens/lm_head",
            "ok",
            "shared with the target",
            None,
            "vLLM logs 'Detected EAGLE model without its own lm_head in the"
            " checkpoint. Sharing target "
            "model lm_head weights with the draft model.'",
        ),
        (
            "+",
            "weights: lm_head.weight",
            "missing",
            "shared with the target",
            [32000, 5120],
            "draft_vocab_size 32000 needs the drafter's own lm_head [32000, 5120];"
            " without one vLLM "
            "shares the target's (248320 rows of target ids) and the d2t map sends"
            " each proposal to "
            "another token: the engine then shows mean acceptance length 1.00 with"
            " every position at "
            "0.000 while the text stays right (vllm-ascend#11374, local-inference-lab/vllm#54)",
        ),
        (
            "+",
            "weights: d2t",
            "missing",
            None,
            [32000],
            "a draft vocabulary of 32000 tokens needs the d2t map to target ids;"
            " without it draft ids "
            "are taken as target ids: the engine then shows mean acceptance length 1.00 with every "
            "position at 0.000 while the text stays right (vllm-ascend#11374, "
            "local-inference-lab/vllm#54)",
        ),
    ],
    "weights, q_proj bias": [
        (
            "-",
            "weights",
            "ok",
            "model.safetensors: 58 tensors, BF16, 3.46 GB",
            None,
            "read from the safetensors header only",
        ),
        (
            "+",
            "weights",
            "ok",
            "model.safetensors: 59 tensors, BF16, 3.46 GB",
            None,
            "read from the safetensors header only",
        ),
        (
            "+",
            "weights: attention bias",
            "mismatch",
            True,
            False,
            "attention_bias in the config must match whether q/k/v_proj.bias are in the weights",
        ),
    ],
    "weights, bias in the config only": [
        (
            "+",
            "weights: attention bias",
            "mismatch",
            False,
            True,
            "attention_bias in the config must match whether q/k/v_proj.bias are in the weights",
        )
    ],
    "weights, config says float16": [
        ("-", "weights: dtype", "ok", "BF16", "BF16", None),
        ("+", "weights: dtype", "warning", "BF16", "F16", "the config says float16"),
    ],
    "weights, config says float32 (torch_dtype)": [
        ("-", "weights: dtype", "ok", "BF16", "BF16", None),
        ("+", "weights: dtype", "warning", "BF16", "F32", "the config says float32"),
    ],
    "weights, config dtype unknown": [
        ("-", "weights: dtype", "ok", "BF16", "BF16", None),
        ("+", "weights: dtype", "ok", "BF16", None, None),
    ],
    "weights, midlayer and encoder names": [],
    "weights, nine layers": [
        (
            "-",
            "weights",
            "ok",
            "model.safetensors: 58 tensors, BF16, 3.46 GB",
            None,
            "read from the safetensors header only",
        ),
        ("-", "weights: layers", "ok", 5, 5, None),
        (
            "-",
            "weights: attention",
            "ok",
            "30 tensors",
            None,
            "shapes match the config (heads 32/8, head_dim 128)",
        ),
        ("-", "weights: mlp", "ok", "15 tensors", None, "shapes match the config"),
        ("-", "weights: norms", "ok", "12 tensors", None, "shapes match the config"),
        (
            "+",
            "weights",
            "ok",
            "model.safetensors: 63 tensors, BF16, 3.46 GB",
            None,
            "read from the safetensors header only",
        ),
        (
            "+",
            "weights: layers",
            "mismatch",
            10,
            5,
            (
                "the weights hold layers [0, 1, 2, 3, 4, 5, 6, 7]…, the config says"
                " num_hidden_layers 5"
            ),
        ),
        (
            "+",
            "weights: attention",
            "missing",
            "layers.5.self_attn.q_proj.weight",
            None,
            "30 tensors missing, e.g. layers.5.self_attn.q_proj.weight",
        ),
        (
            "+",
            "weights: mlp",
            "missing",
            "layers.5.mlp.gate_proj.weight",
            None,
            "15 tensors missing, e.g. layers.5.mlp.gate_proj.weight",
        ),
        (
            "+",
            "weights: norms",
            "missing",
            "layers.5.post_attention_layernorm.weight",
            None,
            "5 tensors missing, e.g. layers.5.post_attention_layernorm.weight",
        ),
    ],
    "weights, hidden_norm wrong": [
        ("-", "weights: norms", "ok", "12 tensors", None, "shapes match the config"),
        (
            "+",
            "weights: norms",
            "mismatch",
            "hidden_norm.weight [4096] (expected [5120])",
            None,
            "1 tensor with a shape the config does not describe",
        ),
    ],
    "weights, lm_head of another width": [
        (
            "-",
            "weights",
            "ok",
            "model.safetensors: 58 tensors, BF16, 3.46 GB",
            None,
            "read from the safetensors header only",
        ),
        (
            "-",
            "weights: embed_tokens/lm_head",
            "ok",
            "shared with the target",
            None,
            "vLLM logs 'Detected EAGLE model without its own lm_head in the"
            " checkpoint. Sharing target "
            "model lm_head weights with the draft model.'",
        ),
        (
            "+",
            "weights",
            "ok",
            "model.safetensors: 59 tensors, BF16, 5.49 GB",
            None,
            "read from the safetensors header only",
        ),
        (
            "+",
            "weights: embed_tokens/lm_head",
            "mismatch",
            ["lm_head.weight [248320, 4096]"],
            "[vocab, 5120]",
            "the drafter ships its own lm_head",
        ),
    ],
    "weights, fc with an odd width": [
        (
            "-",
            "weights: fc.weight",
            "ok",
            [5120, 25600],
            [5120, 25600],
            "[hidden, target_hidden × 5 target layers]",
        ),
        (
            "+",
            "weights: fc.weight",
            "mismatch",
            [5120, 25601],
            [5120, 25600],
            "vLLM: AssertionError: Tried to load weights of size torch.Size([5120, 25601]) to a "
            "parameter of size torch.Size([5120, 25600])",
        ),
    ],
    "weights, dflash2 without a selector": [
        ("-", "architectures", "ok", ["DFlashDraftModel"], None, None),
        (
            "-",
            "vllm: model runner",
            "warning",
            "V2 only",
            None,
            "needs vLLM's V2 model runner (VLLM_USE_V2_MODEL_RUNNER=1; 0.32 picks"
            " V2 by default only "
            "where Triton is available, so never on the CPU build); the V1 runner"
            " exits with 'Model "
            "Runner V1 does not support: mixed sliding/full dflash drafts'",
        ),
        ("+", "architectures", "ok", ["DFlash2DraftModel"], None, None),
        (
            "+",
            "dflash_config (DFlash 2)",
            "invalid",
            ["conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k"],
            ["conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k"],
            "vLLM's qwen3_dflash2 reads dflash_config['conv_kernel_size'] (KeyError)",
        ),
        (
            "+",
            "weights: candidate_selector",
            "missing",
            None,
            "candidate_selector.*",
            "a DFlash 2 checkpoint carries the candidate selector's codebooks",
        ),
        (
            "+",
            "vllm: model runner",
            "warning",
            "V2 only",
            None,
            "needs vLLM's V2 model runner (VLLM_USE_V2_MODEL_RUNNER=1; 0.32 picks"
            " V2 by default only "
            "where Triton is available, so never on the CPU build); the V1 runner"
            " exits with 'Model "
            "Runner V1 does not support: mixed sliding/full dflash drafts, DFlash candidate-head "
            "drafts'",
        ),
    ],
    "weights, dflash2 with a selector": [
        ("-", "architectures", "ok", ["DFlashDraftModel"], None, None),
        (
            "-",
            "weights",
            "ok",
            "model.safetensors: 58 tensors, BF16, 3.46 GB",
            None,
            "read from the safetensors header only",
        ),
        (
            "-",
            "vllm: model runner",
            "warning",
            "V2 only",
            None,
            "needs vLLM's V2 model runner (VLLM_USE_V2_MODEL_RUNNER=1; 0.32 picks"
            " V2 by default only "
            "where Triton is available, so never on the CPU build); the V1 runner"
            " exits with 'Model "
            "Runner V1 does not support: mixed sliding/full dflash drafts'",
        ),
        ("+", "architectures", "ok", ["DFlash2DraftModel"], None, None),
        (
            "+",
            "dflash_config (DFlash 2)",
            "invalid",
            ["conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k"],
            ["conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k"],
            "vLLM's qwen3_dflash2 reads dflash_config['conv_kernel_size'] (KeyError)",
        ),
        (
            "+",
            "weights",
            "ok",
            "model.safetensors: 59 tensors, BF16, 3.46 GB",
            None,
            "read from the safetensors header only",
        ),
        (
            "+",
            "vllm: model runner",
            "warning",
            "V2 only",
            None,
            "needs vLLM's V2 model runner (VLLM_USE_V2_MODEL_RUNNER=1; 0.32 picks"
            " V2 by default only "
            "where Triton is available, so never on the CPU build); the V1 runner"
            " exits with 'Model "
            "Runner V1 does not support: mixed sliding/full dflash drafts, DFlash candidate-head "
            "drafts'",
        ),
    ],
    "weights, no aux hidden state": [
        (
            "-",
            "aux layers",
            "ok",
            "(2, 17, 32, 47, 62)",
            "(2, 17, 32, 47, 62)",
            "vLLM logs 'Using auxiliary layers from speculative config: (2, 17, 32, 47, 62)'",
        ),
        (
            "-",
            "weights: fc.weight",
            "ok",
            [5120, 25600],
            [5120, 25600],
            "[hidden, target_hidden × 5 target layers]",
        ),
        (
            "+",
            "use_aux_hidden_state",
            "warning",
            False,
            True,
            "no fc: the drafter ignores the target's hidden states",
        ),
    ],
    "weights, heads from hidden": [
        (
            "-",
            "weights: attention",
            "ok",
            "30 tensors",
            None,
            "shapes match the config (heads 32/8, head_dim 128)",
        ),
        (
            "+",
            "weights: attention",
            "mismatch",
            "layers.0.self_attn.q_proj.weight [4096, 5120] (expected [5120, 5120])",
            None,
            "30 tensors with a shape the config does not describe",
        ),
    ],
    "weights, no kv heads": [
        (
            "-",
            "weights: attention",
            "ok",
            "30 tensors",
            None,
            "shapes match the config (heads 32/8, head_dim 128)",
        ),
        (
            "+",
            "weights: attention",
            "mismatch",
            "layers.0.self_attn.k_proj.weight [1024, 5120] (expected [4096, 5120])",
            None,
            "10 tensors with a shape the config does not describe",
        ),
    ],
    "weights, no intermediate size": [
        ("-", "weights: mlp", "ok", "15 tensors", None, "shapes match the config")
    ],
    "weights, draft vocab with a target": [
        (
            "-",
            "weights",
            "ok",
            "model.safetensors: 58 tensors, BF16, 3.46 GB",
            None,
            "read from the safetensors header only",
        ),
        (
            "-",
            "weights: embed_tokens/lm_head",
            "ok",
            "shared with the target",
            None,
            "vLLM logs 'Detected EAGLE model without its own lm_head in the"
            " checkpoint. Sharing target "
            "model lm_head weights with the draft model.'",
        ),
        (
            "+",
            "weights",
            "ok",
            "model.safetensors: 60 tensors, BF16, 3.79 GB",
            None,
            "read from the safetensors header only",
        ),
        (
            "+",
            "weights: embed_tokens/lm_head",
            "ok",
            ["lm_head.weight [32000, 5120]"],
            "[vocab, 5120]",
            "the drafter ships its own lm_head",
        ),
        (
            "+",
            "weights: draft vocabulary",
            "ok",
            "32000 of 248320 tokens: own lm_head [32000, 5120], d2t [32000]",
            None,
            "draft ids go through the drafter's own lm_head and back to target ids via d2t",
        ),
    ],
}


@pytest.mark.parametrize("name", list(CASES))
def test_the_rows_an_edit_changes(name: str, tmp_path: Path) -> None:
    assert changed(CASES[name], tmp_path) == EXPECTED[name]


def test_the_published_config_row_by_row() -> None:
    """The base itself, whole: every row the unedited drafter gets with its registry entry."""
    assert [row(r) for r in check_drafter(published(), entry=ENTRY)] == BASE_ROWS


BASE_ROWS = [
    ("architectures", "ok", ["DFlashDraftModel"], ["DFlashDraftModel"], None),
    ("model_type", "ok", "qwen3", "qwen3", None),
    ("num_hidden_layers", "ok", 5, 5, None),
    ("hidden_size", "ok", 5120, 5120, None),
    ("vocab_size", "ok", 248320, 248320, None),
    ("intermediate_size", "ok", 17408, 17408, None),
    ("num_attention_heads", "ok", 32, 32, None),
    ("num_key_value_heads", "ok", 8, 8, None),
    ("head_dim", "ok", 128, 128, None),
    ("dflash_config.mask_token_id", "ok", 248070, 248070, "read from dflash_config.mask_token_id"),
    ("dflash_config.target_layer_ids", "ok", [1, 16, 31, 46, 61], [1, 16, 31, 46, 61], None),
    (
        "dflash_config.target_layer_ids (formula)",
        "ok",
        [1, 16, 31, 46, 61],
        [1, 16, 31, 46, 61],
        None,
    ),
    (
        "aux layers",
        "ok",
        "(2, 17, 32, 47, 62)",
        "(2, 17, 32, 47, 62)",
        "vLLM logs 'Using auxiliary layers from speculative config: (2, 17, 32, 47, 62)'",
    ),
    (
        "layer_types",
        "ok",
        [
            "sliding_attention",
            "sliding_attention",
            "sliding_attention",
            "sliding_attention",
            "full_attention",
        ],
        [
            "sliding_attention",
            "sliding_attention",
            "sliding_attention",
            "sliding_attention",
            "full_attention",
        ],
        None,
    ),
    ("sliding_window", "ok", 2048, 2048, "read from sliding_window"),
    (
        "attention (per layer)",
        "ok",
        "4 sliding, 1 full; 4 causal, 1 non-causal",
        None,
        "non-causal layers need an attention backend with non-causal support",
    ),
    ("block_size", "ok", 16, 16, "read from block_size"),
    (
        "num_speculative_tokens",
        "ok",
        15,
        15,
        '--speculative-config \'{"method": "dflash", "num_speculative_tokens": 15}\': vLLM never '
        "reads block_size; a smaller K works, a larger one asks for positions the drafter never "
        "trained",
    ),
    ("rope_theta", "ok", 10000000, 10000000, None),
    (
        "vllm: model runner",
        "warning",
        "V2 only",
        None,
        "needs vLLM's V2 model runner (VLLM_USE_V2_MODEL_RUNNER=1; 0.32 picks V2 by default only "
        "where Triton is available, so never on the CPU build); the V1 runner exits with 'Model "
        "Runner V1 does not support: mixed sliding/full dflash drafts'",
    ),
]
