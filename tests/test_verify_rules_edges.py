"""verify-config's rules at their edges (issue 31: the mutants tests/test_verify_rules_table.py
left alive in dflashctl/drafter/rules/config.py, target.py and weights.py). Same method as that
file: the published Qwen3.6-27B drafter's config with one edit, and the rows the edit changes
against the unedited base, asserted whole (name, status, found, expected, hint). Here the
registry entry can be edited too (a field the published one leaves empty, another value), and
`only` keeps the rows of the rule the case is about. Rows compare by value and by repr: `--json`
prints 10000000 and 10000000.0 differently. Real configs, real safetensors headers written by
the test (one file, or shards with an index)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from support.safetensors_files import qwen36_27b_tensors, write_safetensors
from test_verify_rules_table import DEL, ENTRY, TARGET, edit, published, row

from dflashctl.drafter.check import check_drafter
from dflashctl.drafter.header import Header, read_header, read_index
from dflashctl.drafter.rules.weights import _human_bytes

SLIDING, FULL = "sliding_attention", "full_attention"
IDS = [1, 16, 31, 46, 61]  # the published target_layer_ids (and build_target_layer_ids(64, 5))
VOCAB_ROWS = (
    "draft_vocab_size",
    "weights: embed_tokens/lm_head",
    "weights: lm_head.weight",
    "weights: d2t",
    "weights: t2d",
    "weights: draft vocabulary",
)
AUX_ROWS = ("aux layers", "aux layers (sglang)", "aux layers (vllm V1)", "aux layers (vllm V2)")
ROPE_ROWS = tuple(
    f"{prefix}{key}"
    for prefix in ("", "rope: ")
    for key in (
        "rope_parameters.partial_rotary_factor",
        "rope_scaling.partial_rotary_factor",
        "partial_rotary_factor",
    )
)
TOP_ONLY = {"dflash_config/target_layer_ids": DEL}  # with "target_layer_ids" at the top level


def entry(**fields: Any) -> Any:
    return dataclasses.replace(ENTRY, **fields)


def header_of(folder: Path, spec: dict[str, Any], shards: int) -> Header:
    folder.mkdir()
    if shards == 1:
        return read_header(write_safetensors(folder / "model.safetensors", spec))
    names = list(spec)
    weight_map: dict[str, str] = {}
    for k in range(shards):
        file = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: spec[n] for n in names[k::shards]}
        write_safetensors(folder / file, part)
        weight_map.update(dict.fromkeys(part, file))
    index = folder / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return read_index(index)


def changed(case: dict[str, Any], tmp: Path) -> list[tuple[Any, ...]]:
    """The rows the case's edit adds (+) and removes (-) against the unedited config with the
    same entry (`entry`: the published one, None, or an edited one), engine, target (`target`:
    an edit of the target config, or no target) and weights (`tensors`: an edit of the
    published tensors, `dtype` theirs, `shards` files; or no header). `all`: every row of the
    edited config, marked "=", in place of the difference; `only`: the rows of those names."""
    engine = case.get("engine", "vllm")
    ent = case.get("entry", ENTRY)
    target_edit, tensors = case.get("target"), case.get("tensors")
    header = base_header = None
    if tensors is not None:
        base_header = header_of(tmp / "base", qwen36_27b_tensors(), 1)
        spec = qwen36_27b_tensors(case.get("dtype", "BF16"))
        for name, value in tensors.items():
            if value is DEL:
                spec.pop(name, None)
            else:
                spec[name] = value
        header = header_of(tmp / "case", spec, case.get("shards", 1))
    base = check_drafter(
        published(),
        entry=ent,
        engine=engine,
        target=None if target_edit is None else TARGET,
        header=base_header,
    )
    got = check_drafter(
        edit(published(), case.get("cfg", {})),
        entry=ent,
        engine=engine,
        target=None if target_edit is None else edit(TARGET, target_edit),
        header=header,
    )
    a, b = [row(r) for r in base], [row(r) for r in got]
    out = [("-", *r) for r in a if r not in b] + [("+", *r) for r in b if r not in a]
    if case.get("all"):  # the rows themselves, those the base has too included
        out = [("=", *r) for r in b]
    only = case.get("only")
    return [r for r in out if r[1] in only] if only else out


CASES: dict[str, dict[str, Any]] = {
    # structure
    "architectures missing, an entry of another family": {
        "cfg": {"architectures": DEL},
        "entry": entry(architectures=("DFlash2DraftModel",)),
        "only": ("architectures",),
    },
    "model_type missing, an entry of another type": {
        "cfg": {"model_type": DEL},
        "entry": entry(model_type="llama"),
        "only": ("model_type",),
    },
    "num_hidden_layers 1": {
        "cfg": {"num_hidden_layers": 1, "layer_types": DEL},
        "entry": None,
        "only": ("num_hidden_layers",),
    },
    "num_hidden_layers 4096": {
        "cfg": {"num_hidden_layers": 4096, "layer_types": DEL},
        "entry": None,
        "only": ("num_hidden_layers",),
    },
    "num_hidden_layers 4097": {
        "cfg": {"num_hidden_layers": 4097, "layer_types": DEL},
        "entry": None,
        "only": ("num_hidden_layers",),
    },
    "num_target_layers 1": {
        "cfg": {"num_target_layers": 1},
        "entry": None,
        "only": ("num_target_layers",),
    },
    "dflash num_target_layers 1": {
        "cfg": {"dflash_config/num_target_layers": 1},
        "entry": None,
        "only": ("dflash_config.num_target_layers",),
    },
    "intermediate_size 1": {"cfg": {"intermediate_size": 1}, "entry": None},
    "attention_bias missing, entry false": {
        "cfg": {"attention_bias": DEL},
        "entry": entry(attention_bias=False),
    },
    "attention_bias true, entry true": {
        "entry": entry(attention_bias=True),
        "cfg": {"attention_bias": True},
    },
    "heads 0, no head_dim": {
        "cfg": {"num_attention_heads": 0, "head_dim": DEL},
        "entry": None,
        "only": ("num_attention_heads", "head_dim"),
    },
    "heads do not divide, head_dim given": {
        "cfg": {"num_attention_heads": 48},
        "entry": None,
        "only": ("head_dim",),
    },
    # mask
    "mask 0": {"cfg": {"dflash_config/mask_token_id": 0}, "only": ("dflash_config.mask_token_id",)},
    # layer ids
    "ids missing, dflash_config layer_ids": {
        "cfg": {"dflash_config/target_layer_ids": DEL, "dflash_config/layer_ids": [2, 17]},
        "entry": None,
        "only": ("dflash_config.target_layer_ids",),
    },
    "ids missing, an entry other than the formula": {
        "cfg": {"dflash_config/target_layer_ids": DEL},
        "entry": entry(target_layer_ids=(1, 10, 31, 46, 61)),
        "only": ("dflash_config.target_layer_ids",),
    },
    "ids missing, target depth unknown": {
        "cfg": {"dflash_config/target_layer_ids": DEL, "num_target_layers": DEL},
        "entry": None,
        "only": ("dflash_config.target_layer_ids",),
    },
    "ids ten duplicates": {
        "cfg": {"dflash_config/target_layer_ids": [i // 2 for i in range(20)] + [30]},
        "entry": None,
        "only": ("dflash_config.target_layer_ids",),
    },
    "ids eleven duplicates": {
        "cfg": {"dflash_config/target_layer_ids": [i // 2 for i in range(22)] + [30]},
        "entry": None,
        "only": ("dflash_config.target_layer_ids",),
    },
    "ids unsorted and too deep": {
        "cfg": {"dflash_config/target_layer_ids": [16, 1, 70]},
        "entry": None,
        "only": ("dflash_config.target_layer_ids",),
    },
    "ids the entry's, not the formula": {
        "entry": entry(target_layer_ids=(1, 10, 31, 46, 61)),
        "cfg": {"dflash_config/target_layer_ids": [1, 10, 31, 46, 61]},
        "only": ("dflash_config.target_layer_ids", "dflash_config.target_layer_ids (formula)"),
    },
    "ids shifted by one": {
        "cfg": {"dflash_config/target_layer_ids": [2, 17, 32, 47, 62]},
        "only": ("dflash_config.target_layer_ids",),
    },
    "ids shifted by one, target depth unknown": {
        "cfg": {"dflash_config/target_layer_ids": [2, 17, 32, 47, 62], "num_target_layers": DEL},
        "entry": entry(target=dataclasses.replace(ENTRY.target, num_hidden_layers=None)),
        "only": ("dflash_config.target_layer_ids",),
    },
    "ids other, both with the last layer": {
        "entry": entry(target_layer_ids=(1, 16, 31, 46, 63)),
        "cfg": {"dflash_config/target_layer_ids": [1, 16, 31, 47, 63]},
        "only": ("dflash_config.target_layer_ids",),
    },
    # aux layers
    "aux ids not ints, eagle key": {
        "cfg": {"eagle_aux_hidden_state_layer_ids": ["x"]},
        "entry": None,
        "only": AUX_ROWS,
    },
    "aux drops a negative id, sglang": {
        "cfg": {**TOP_ONLY, "target_layer_ids": [-2, 1, 2, 3, 4], "num_target_layers": DEL},
        "entry": None,
        "engine": "sglang",
        "only": AUX_ROWS,
    },
    "aux V2 drops a negative id, V1 captures nothing": {
        "cfg": {**TOP_ONLY, "target_layer_ids": [-2, 1, 2, 3, 4], "num_target_layers": DEL},
        "entry": None,
        "only": AUX_ROWS,
    },
    # layer types and window
    "layer_types not a list, no entry": {
        "cfg": {"layer_types": "sliding"},
        "entry": None,
        "only": ("layer_types",),
    },
    "layer_types with a legacy name": {
        "cfg": {"layer_types": [SLIDING] * 4 + ["attention"]},
        "only": ("layer_types", "transformers: layer_types"),
    },
    "layer_types with a legacy name, no entry": {
        "cfg": {"layer_types": [SLIDING] * 4 + ["attention"]},
        "entry": None,
        "only": ("layer_types", "transformers: layer_types"),
    },
    "layer_types sliding, entry all full": {
        "cfg": {"layer_types": [SLIDING] * 5},
        "entry": entry(layer_types=(FULL,) * 5),
        "only": ("layer_types",),
    },
    "window absent, not used, no entry": {
        "cfg": {"sliding_window": DEL, "use_sliding_window": False},
        "entry": None,
        "only": ("sliding_window",),
    },
    "window 1": {"cfg": {"sliding_window": 1}, "only": ("sliding_window",)},
    "all full, no window, entry sliding": {
        "cfg": {"layer_types": [FULL] * 5, "sliding_window": DEL, "use_sliding_window": False},
        "only": ("sliding_window",),
    },
    "window dropped, swa_window_size kept": {
        "cfg": {"use_sliding_window": False, "dflash_config/swa_window_size": 2048},
        "entry": None,
        "only": ("transformers: sliding_window",),
    },
    "is_causal false, entry true": {
        "cfg": {"is_causal": False},
        "entry": entry(is_causal=True),
        "only": ("is_causal",),
    },
    # block
    "block 1 in dflash_config": {
        "cfg": {"dflash_config/block_size": 1},
        "entry": None,
        "only": ("block_size",),
    },
    "block missing, entry 16": {
        "cfg": {"block_size": DEL},
        "only": ("block_size", "num_speculative_tokens"),
    },
    "block 8, entry 16": {
        "cfg": {"block_size": 8},
        "only": ("block_size", "num_speculative_tokens"),
    },
    # rope, DFlash 2, dflash_config
    "rope theta other, unconfirmed": {
        "cfg": {"rope_parameters/rope_theta": 1000000},
        "entry": entry(unconfirmed=frozenset({"rope_theta"})),
        "only": ("rope_theta",),
    },
    "rope theta fractional, entry fractional": {
        "cfg": {"rope_parameters/rope_theta": 10000.5},
        "entry": entry(rope_theta=10000.5),
        "only": ("rope_theta",),
    },
    "rope theta fractional, entry other fraction": {
        "cfg": {"rope_parameters/rope_theta": 10000.25},
        "entry": entry(rope_theta=10000.5),
        "only": ("rope_theta",),
    },
    "dflash2 by the entry's kind": {
        "cfg": {"dflash_config/conv_kernel_size": 4},
        "entry": entry(kind="dflash2"),
        "only": ("dflash_config (DFlash 2)",),
    },
    "dflash2 conv group 0": {
        "cfg": {"architectures": ["DFlash2DraftModel"], "dflash_config/conv_group_size": 0},
        "entry": None,
        "only": ("dflash_config.conv_group_size",),
    },
    "dflash2 conv group divides": {
        "cfg": {"architectures": ["DFlash2DraftModel"], "dflash_config/conv_group_size": 8},
        "entry": None,
        "only": ("dflash_config.conv_group_size",),
    },
    "dflash_config key other, unconfirmed": {
        "cfg": {"dflash_config/conv_kernel_size": 3},
        "entry": entry(
            dflash_config=(("conv_kernel_size", 4),), unconfirmed=frozenset({"conv_kernel_size"})
        ),
        "only": ("dflash_config.conv_kernel_size",),
    },
    "draft vocab other than the entry's": {
        "cfg": {"draft_vocab_size": 16000},
        "entry": entry(draft_vocab_size=32000),
        "only": ("draft_vocab_size",),
    },
    "dflash_config key same": {
        "cfg": {"dflash_config/conv_kernel_size": 4},
        "entry": entry(dflash_config=(("conv_kernel_size", 4),)),
        "only": ("dflash_config.conv_kernel_size",),
    },
    # target
    "target flat, no entry": {
        "target": {"text_config": DEL, "num_hidden_layers": 64, "vocab_size": 248320},
        "entry": None,
        "only": ("target: num_hidden_layers",),
    },
    "target flat, 0 layers": {
        "target": {"text_config": DEL, "num_hidden_layers": 0, "vocab_size": 248320},
        "only": ("target: num_hidden_layers",),
    },
    "target 1 layer, no entry": {
        "target": {"text_config/num_hidden_layers": 1},
        "entry": None,
        "only": ("target: num_hidden_layers",),
    },
    "target layers 48, drafter count in dflash_config": {
        "target": {"text_config/num_hidden_layers": 48},
        "cfg": {"num_target_layers": DEL, "dflash_config/num_target_layers": 64},
        "entry": None,
        "only": ("target: num_hidden_layers",),
    },
    "target vocab, no mask": {
        "target": {},
        "cfg": {"dflash_config/mask_token_id": DEL},
        "entry": None,
        "only": ("target: vocab_size",),
    },
    "sglang last layer, top level only": {
        "cfg": {**TOP_ONLY, "target_layer_ids": [1, 16, 31, 46, 63]},
        "engine": "sglang",
        "entry": None,
        "only": ("sglang: last target layer",),
    },
    # weights
    "weights in two shards": {"tensors": {}, "shards": 2, "only": ("weights",)},
    "weights with no float": {"tensors": {}, "dtype": "I32", "only": ("weights",)},
    "weights F16, config bfloat16": {"tensors": {}, "dtype": "F16", "only": ("weights: dtype",)},
    "weights, no norm.weight": {"tensors": {"norm.weight": DEL}, "only": ("weights: norms",)},
    "weights, eight layers": {
        "tensors": {f"layers.{i}.input_layernorm.weight": ("BF16", [5120]) for i in (5, 6, 7)},
        "only": ("weights: layers",),
    },
    "weights, nine layers": {
        "tensors": {f"layers.{i}.input_layernorm.weight": ("BF16", [5120]) for i in range(5, 9)},
        "only": ("weights: layers",),
    },
    "weights, fc without layer ids": {
        "tensors": {"fc.weight": ("BF16", [5120, 5120 * 4])},
        "cfg": {"dflash_config/target_layer_ids": DEL},
        "entry": None,
        "only": ("weights: fc.weight",),
    },
    "weights, fc without hidden_size": {
        "tensors": {},
        "cfg": {"hidden_size": DEL, "target_hidden_size": 5120},
        "entry": None,
        "only": ("weights: fc.weight",),
    },
    "weights, kv heads a string": {
        "tensors": {},
        "cfg": {"num_key_value_heads": "8"},
        "entry": None,
        "only": ("weights: attention",),
    },
    "weights, heads a string": {
        "tensors": {},
        "cfg": {"num_attention_heads": "32"},
        "entry": None,
        "only": ("weights: attention",),
    },
    "weights, no hidden_size": {
        "tensors": {},
        "cfg": {"hidden_size": DEL},
        "entry": None,
        "only": ("weights: attention",),
    },
    "weights, q_proj bias, no attention_bias": {
        "tensors": {"layers.0.self_attn.q_proj.bias": ("BF16", [4096])},
        "cfg": {"attention_bias": DEL},
        "only": ("weights: attention bias",),
    },
    "weights, no bias, no attention_bias": {
        "tensors": {},
        "cfg": {"attention_bias": DEL},
        "only": ("weights: attention bias",),
    },
    "weights, k_proj bias": {
        "tensors": {"layers.0.self_attn.k_proj.bias": ("BF16", [1024])},
        "only": ("weights: attention bias",),
    },
    "weights, v_proj bias": {
        "tensors": {"layers.0.self_attn.v_proj.bias": ("BF16", [1024])},
        "only": ("weights: attention bias",),
    },
    "weights, embed_tokens 1-D": {
        "tensors": {"embed_tokens.weight": ("BF16", [5120])},
        "only": ("weights: embed_tokens/lm_head",),
    },
    "weights, embed_tokens rows not the vocab": {
        "tensors": {"embed_tokens.weight": ("BF16", [151936, 5120])},
        "only": ("weights: embed_tokens/lm_head",),
    },
    "weights, embed_tokens and lm_head": {
        "tensors": {
            "embed_tokens.weight": ("BF16", [248320, 5120]),
            "lm_head.weight": ("BF16", [248320, 5120]),
        },
        "only": ("weights: embed_tokens/lm_head",),
    },
    # draft vocabulary
    "draft vocab the target's, vocab_size other": {
        "tensors": {},
        "cfg": {"draft_vocab_size": 32000},
        "target": {"text_config/vocab_size": 32000},
        "entry": None,
        "only": VOCAB_ROWS,
    },
    "draft vocab the vocab_size, no target": {
        "tensors": {},
        "cfg": {"draft_vocab_size": 248320},
        "only": VOCAB_ROWS,
    },
    "draft vocab 0, a d2t": {
        "tensors": {"d2t": ("I64", [32000])},
        "cfg": {"draft_vocab_size": 0},
        "only": VOCAB_ROWS,
    },
    "draft vocab 1": {"tensors": {}, "cfg": {"draft_vocab_size": 1}, "only": VOCAB_ROWS},
    "draft vocab, lm_head of another width": {
        "tensors": {"lm_head.weight": ("BF16", [32000, 4096]), "d2t": ("I64", [32000])},
        "cfg": {"draft_vocab_size": 32000},
        "only": VOCAB_ROWS,
    },
    "draft vocab, lm_head 1-D": {
        "tensors": {"lm_head.weight": ("BF16", [32000]), "d2t": ("I64", [32000])},
        "cfg": {"draft_vocab_size": 32000},
        "only": VOCAB_ROWS,
    },
    "draft vocab, d2t other": {
        "tensors": {"lm_head.weight": ("BF16", [32000, 5120]), "d2t": ("I64", [1000])},
        "cfg": {"draft_vocab_size": 32000},
        "only": VOCAB_ROWS,
    },
    "draft vocab, t2d other, a target": {
        "tensors": {
            "lm_head.weight": ("BF16", [32000, 5120]),
            "d2t": ("I64", [32000]),
            "t2d": ("BOOL", [1000]),
        },
        "cfg": {"draft_vocab_size": 32000},
        "target": {},
        "only": VOCAB_ROWS,
    },
    "draft vocab, t2d of the drafter's vocab, a target of another": {
        "tensors": {
            "lm_head.weight": ("BF16", [32000, 5120]),
            "d2t": ("I64", [32000]),
            "t2d": ("BOOL", [248320]),
        },
        "cfg": {"draft_vocab_size": 32000},
        "target": {"text_config/vocab_size": 250000},
        "entry": None,
        "only": VOCAB_ROWS,
    },
    "draft vocab, t2d other, no target": {
        "tensors": {
            "lm_head.weight": ("BF16", [32000, 5120]),
            "d2t": ("I64", [32000]),
            "t2d": ("BOOL", [1000]),
        },
        "cfg": {"draft_vocab_size": 32000},
        "only": VOCAB_ROWS,
    },
    "draft vocab with a t2d": {
        "tensors": {
            "lm_head.weight": ("BF16", [32000, 5120]),
            "d2t": ("I64", [32000]),
            "t2d": ("BOOL", [248320]),
        },
        "cfg": {"draft_vocab_size": 32000},
        "only": VOCAB_ROWS,
    },
    "draft vocab without lm_head, no hidden_size": {
        "tensors": {"d2t": ("I64", [32000])},
        "cfg": {"draft_vocab_size": 32000, "hidden_size": DEL},
        "entry": None,
        "only": VOCAB_ROWS,
    },
    "a d2t, no draft vocab": {"tensors": {"d2t": ("I64", [32000])}, "only": VOCAB_ROWS},
    "a d2t, draft vocab the vocab_size": {
        "tensors": {"d2t": ("I64", [32000])},
        "cfg": {"draft_vocab_size": 248320},
        "only": VOCAB_ROWS,
    },
    "an lm_head of 32000 rows, no draft vocab": {
        "tensors": {"lm_head.weight": ("BF16", [32000, 5120])},
        "only": VOCAB_ROWS,
    },
    # registry fields with no published value, partial RoPE
    "registry fields not published": {
        "entry": entry(not_published=frozenset({"sliding_window", "block_size"})),
        "all": True,
        "only": ("registry: not published",),
    },
    "rope partial 0.25": {
        "cfg": {"rope_parameters/partial_rotary_factor": 0.25},
        "only": ROPE_ROWS,
    },
    "rope partial 0.3, the target's 0.3": {
        "cfg": {"rope_parameters/partial_rotary_factor": 0.3},
        "target": {"text_config/rope_parameters": {"partial_rotary_factor": 0.3}},
        "only": ROPE_ROWS,
    },
    "rope partial 0.25, the target's 0.5": {
        "cfg": {"rope_parameters/partial_rotary_factor": 0.25},
        "target": {"text_config/partial_rotary_factor": 0.5},
        "only": ROPE_ROWS,
    },
    "rope partial 0.5 in rope_scaling, no head_dim": {
        "cfg": {"rope_scaling": {"partial_rotary_factor": 0.5}, "head_dim": DEL},
        "only": ROPE_ROWS,
    },
    "rope partial 0.5 at the top, head_dim 0": {
        "cfg": {"partial_rotary_factor": 0.5, "head_dim": 0},
        "entry": None,
        "only": ROPE_ROWS,
    },
    "rope partial 0.5, head_dim 1": {
        "cfg": {"partial_rotary_factor": 0.5, "head_dim": 1},
        "entry": None,
        "only": ROPE_ROWS,
    },
    "rope partial 1": {"cfg": {"rope_parameters/partial_rotary_factor": 1}, "only": ROPE_ROWS},
    "rope partial 0": {"cfg": {"rope_parameters/partial_rotary_factor": 0}, "only": ROPE_ROWS},
    "rope partial 1.01": {
        "cfg": {"rope_parameters/partial_rotary_factor": 1.01},
        "only": ROPE_ROWS,
    },
}


EXPECTED: dict[str, list[tuple[Any, ...]]] = {
    "architectures missing, an entry of another family": [
        (
            "-",
            "architectures",
            "mismatch",
            ["DFlashDraftModel"],
            ["DFlash2DraftModel"],
            "a different drafter family than the registry entry: the weights decide this",
        ),
        (
            "+",
            "architectures",
            "missing",
            None,
            ["DFlash2DraftModel"],
            (
                "vLLM picks the drafter class from architectures (DFlashDraftModel → "
                "qwen3_dflash, DFlash2DraftModel → qwen3_dflash2)"
            ),
        ),
    ],
    "model_type missing, an entry of another type": [
        (
            "-",
            "model_type",
            "mismatch",
            "qwen3",
            "llama",
            None,
        ),
        (
            "+",
            "model_type",
            "missing",
            None,
            "llama",
            "transformers' AutoConfig cannot load a config without a model_type string",
        ),
    ],
    "num_hidden_layers 1": [],
    "num_hidden_layers 4096": [],
    "num_hidden_layers 4097": [
        (
            "+",
            "num_hidden_layers",
            "invalid",
            4097,
            "at most 4096",
            "not a drafter layer count",
        ),
    ],
    "num_target_layers 1": [],
    "dflash num_target_layers 1": [],
    "intermediate_size 1": [],
    "attention_bias missing, entry false": [],
    "attention_bias true, entry true": [
        (
            "-",
            "attention_bias",
            "mismatch",
            False,
            True,
            "the weights decide this: a different checkpoint, not a stale field",
        ),
        (
            "+",
            "attention_bias",
            "ok",
            True,
            True,
            None,
        ),
    ],
    "heads 0, no head_dim": [
        (
            "+",
            "num_attention_heads",
            "invalid",
            0,
            "a positive integer",
            None,
        ),
    ],
    "heads do not divide, head_dim given": [],
    "mask 0": [
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
            0,
            248070,
            (
                "off by 248070: a wrong mask id collapses acceptance while the output"
                " stays coherent; read from dflash_config.mask_token_id"
            ),
        ),
    ],
    "ids missing, dflash_config layer_ids": [
        (
            "-",
            "dflash_config.target_layer_ids",
            "ok",
            [1, 16, 31, 46, 61],
            None,
            "all below the target's 64 layers (drafter num_target_layers)",
        ),
    ],
    "ids missing, an entry other than the formula": [
        (
            "-",
            "dflash_config.target_layer_ids",
            "mismatch",
            [1, 16, 31, 46, 61],
            [1, 10, 31, 46, 61],
            "the generic formula (build_target_layer_ids), not this checkpoint's published ids",
        ),
        (
            "+",
            "dflash_config.target_layer_ids",
            "missing",
            None,
            [1, 10, 31, 46, 61],
            (
                "vLLM then sizes fc by num_hidden_layers and captures its default "
                "layers; sglang and z-lab fall back to the formula [1, 16, 31, 46, "
                "61], which need not be what the drafter was trained on"
            ),
        ),
    ],
    "ids missing, target depth unknown": [
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
            "missing",
            None,
            None,
            (
                "vLLM then sizes fc by num_hidden_layers and captures its default "
                "layers; sglang and z-lab fall back to the formula, which need not be"
                " what the drafter was trained on"
            ),
        ),
    ],
    "ids ten duplicates": [
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
            "invalid",
            [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 30],
            None,
            (
                "duplicate ids [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]: each layer is captured"
                " once, so fc receives fewer features than it was sized for"
            ),
        ),
    ],
    "ids eleven duplicates": [
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
            "invalid",
            [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 30],
            None,
            (
                "duplicate ids [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, … 11 in all]: each "
                "layer is captured once, so fc receives fewer features than it was "
                "sized for"
            ),
        ),
    ],
    "ids unsorted and too deep": [
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
            "invalid",
            [16, 1, 70],
            None,
            "not ascending: engines capture in layer order, so fc gets its features in another "
            "order than it was trained with (silently); ids [70] name no layer of a 64-layer "
            "target (drafter num_target_layers; engines capture id + 1, so ids -1 … 63 exist): "
            "dropped silently at start-up, then the first request dies with 'DFlash drafter "
            "expects X concatenated aux hidden features but received Y'",
        ),
    ],
    "ids the entry's, not the formula": [
        (
            "-",
            "dflash_config.target_layer_ids",
            "mismatch",
            [1, 16, 31, 46, 61],
            [1, 10, 31, 46, 61],
            "the generic formula (build_target_layer_ids), not this checkpoint's published ids",
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
            "dflash_config.target_layer_ids",
            "ok",
            [1, 10, 31, 46, 61],
            [1, 10, 31, 46, 61],
            None,
        ),
        (
            "+",
            "dflash_config.target_layer_ids (formula)",
            "ok",
            [1, 10, 31, 46, 61],
            [1, 16, 31, 46, 61],
            "the published ids differ from the formula; the checkpoint wins",
        ),
    ],
    "ids shifted by one": [
        (
            "-",
            "dflash_config.target_layer_ids",
            "ok",
            [1, 16, 31, 46, 61],
            [1, 16, 31, 46, 61],
            None,
        ),
        (
            "+",
            "dflash_config.target_layer_ids",
            "mismatch",
            [2, 17, 32, 47, 62],
            [1, 16, 31, 46, 61],
            (
                "ids shifted by one layer from the published ones (each id + 1): "
                "engines already add 1 when capturing, so this taps the layer after "
                "the one it was trained on"
            ),
        ),
    ],
    "ids shifted by one, target depth unknown": [
        (
            "-",
            "dflash_config.target_layer_ids",
            "ok",
            [1, 16, 31, 46, 61],
            [1, 16, 31, 46, 61],
            None,
        ),
        (
            "+",
            "dflash_config.target_layer_ids",
            "mismatch",
            [2, 17, 32, 47, 62],
            [1, 16, 31, 46, 61],
            (
                "ids shifted by one layer from the published ones (each id + 1): "
                "engines already add 1 when capturing, so this taps the layer after "
                "the one it was trained on"
            ),
        ),
    ],
    "ids other, both with the last layer": [
        (
            "-",
            "dflash_config.target_layer_ids",
            "mismatch",
            [1, 16, 31, 46, 61],
            [1, 16, 31, 46, 63],
            "the generic formula (build_target_layer_ids), not this checkpoint's published ids",
        ),
        (
            "+",
            "dflash_config.target_layer_ids",
            "mismatch",
            [1, 16, 31, 47, 63],
            [1, 16, 31, 46, 63],
            "evenly spaced guess (about every 15 layers from 1 to 63), not the published ids",
        ),
    ],
    "aux ids not ints, eagle key": [
        (
            "-",
            "aux layers",
            "ok",
            "(2, 17, 32, 47, 62)",
            "(2, 17, 32, 47, 62)",
            "vLLM logs 'Using auxiliary layers from speculative config: (2, 17, 32, 47, 62)'",
        ),
    ],
    "aux drops a negative id, sglang": [
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
            "aux layers (sglang)",
            "invalid",
            "(-1, 2, 3, 4, 5) from target_layer_ids",
            "(-1, 2, 3, 4, 5)",
            (
                "ValueError: DFlash drafter expects 25600 concatenated aux hidden "
                "features but received 20480 (on the first request; /health still "
                "answers 200)"
            ),
        ),
    ],
    "aux V2 drops a negative id, V1 captures nothing": [
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
            "aux layers (vllm V2)",
            "invalid",
            "(-1, 2, 3, 4, 5) from target_layer_ids",
            "(-1, 2, 3, 4, 5)",
            (
                "ValueError: DFlash drafter expects 25600 concatenated aux hidden "
                "features but received 20480 (on the first request; /health still "
                "answers 200)"
            ),
        ),
    ],
    "layer_types not a list, no entry": [
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
            "sliding",
            "a list of layer type names",
            None,
        ),
    ],
    "layer_types with a legacy name": [
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
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "attention",
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
            "transformers: layer_types",
            "warning",
            [
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "attention",
            ],
            [
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "full_attention",
            ],
            "legacy layer type names are renamed on load",
        ),
    ],
    "layer_types with a legacy name, no entry": [
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
                "attention",
            ],
            "sliding_attention or full_attention",
            (
                "['attention']: vLLM's DFlash treats every type but sliding_attention"
                " as full attention"
            ),
        ),
        (
            "+",
            "transformers: layer_types",
            "warning",
            [
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "attention",
            ],
            [
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "full_attention",
            ],
            "legacy layer type names are renamed on load",
        ),
    ],
    "layer_types sliding, entry all full": [
        (
            "-",
            "layer_types",
            "mismatch",
            [
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "full_attention",
            ],
            [
                "full_attention",
                "full_attention",
                "full_attention",
                "full_attention",
                "full_attention",
            ],
            "sliding layers where the published drafter attends fully",
        ),
        (
            "+",
            "layer_types",
            "mismatch",
            [
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
            ],
            [
                "full_attention",
                "full_attention",
                "full_attention",
                "full_attention",
                "full_attention",
            ],
            "sliding layers where the published drafter attends fully",
        ),
    ],
    "window absent, not used, no entry": [
        (
            "-",
            "sliding_window",
            "ok",
            2048,
            None,
            "read from sliding_window",
        ),
        (
            "+",
            "sliding_window",
            "invalid",
            None,
            "a window for the sliding layers",
            (
                "4 sliding layers and no window after transformers loads the file: "
                "vLLM raises ValueError: DFlash sliding attention requires a window "
                "size configured in dflash_config.swa_window_size or the top-level "
                "sliding_window."
            ),
        ),
    ],
    "window 1": [
        (
            "-",
            "sliding_window",
            "ok",
            2048,
            2048,
            "read from sliding_window",
        ),
        (
            "+",
            "sliding_window",
            "mismatch",
            1,
            2048,
            "read from sliding_window",
        ),
    ],
    "all full, no window, entry sliding": [
        (
            "-",
            "sliding_window",
            "ok",
            2048,
            2048,
            "read from sliding_window",
        ),
        (
            "+",
            "sliding_window",
            "missing",
            None,
            2048,
            (
                "no window survives transformers' load (set sliding_window with "
                "use_sliding_window: true, or dflash_config.swa_window_size)"
            ),
        ),
    ],
    "window dropped, swa_window_size kept": [
        (
            "+",
            "transformers: sliding_window",
            "warning",
            2048,
            None,
            (
                "found = the file, expected = what Qwen3Config holds after loading "
                "it: the window is dropped because use_sliding_window is not true; "
                "put it in dflash_config.swa_window_size if sliding layers need it"
            ),
        ),
    ],
    "is_causal false, entry true": [
        (
            "-",
            "is_causal",
            "missing",
            None,
            True,
            "the causality the drafter was trained with",
        ),
        (
            "+",
            "is_causal",
            "mismatch",
            False,
            True,
            "the causality the drafter was trained with",
        ),
    ],
    "block 1 in dflash_config": [
        (
            "-",
            "block_size",
            "ok",
            16,
            None,
            "read from block_size",
        ),
        (
            "+",
            "block_size",
            "invalid",
            1,
            "an integer >= 2",
            None,
        ),
    ],
    "block missing, entry 16": [
        (
            "-",
            "block_size",
            "ok",
            16,
            16,
            "read from block_size",
        ),
        (
            "+",
            "block_size",
            "missing",
            None,
            16,
            "not in the file: sglang then uses 16; vLLM needs num_speculative_tokens",
        ),
    ],
    "block 8, entry 16": [
        (
            "-",
            "block_size",
            "ok",
            16,
            16,
            "read from block_size",
        ),
        (
            "+",
            "block_size",
            "mismatch",
            8,
            16,
            None,
        ),
    ],
    "rope theta other, unconfirmed": [
        (
            "-",
            "rope_theta",
            "ok",
            10000000,
            10000000,
            None,
        ),
        (
            "+",
            "rope_theta",
            "warning",
            1000000,
            10000000,
            (
                "the registry value is unconfirmed (dflash-facts.md §4 (SpecForge + "
                "third party); acceptance: SPEC.md field story); a RoPE theta "
                "mismatch is silent: acceptance just drops"
            ),
        ),
    ],
    "rope theta fractional, entry fractional": [
        (
            "-",
            "rope_theta",
            "mismatch",
            10000000,
            10000.5,
            "a RoPE theta mismatch is silent: acceptance just drops",
        ),
        (
            "+",
            "rope_theta",
            "ok",
            10000.5,
            10000.5,
            None,
        ),
    ],
    "rope theta fractional, entry other fraction": [
        (
            "-",
            "rope_theta",
            "mismatch",
            10000000,
            10000.5,
            "a RoPE theta mismatch is silent: acceptance just drops",
        ),
        (
            "+",
            "rope_theta",
            "mismatch",
            10000.25,
            10000.5,
            "a RoPE theta mismatch is silent: acceptance just drops",
        ),
    ],
    "dflash2 by the entry's kind": [
        (
            "-",
            "dflash_config (DFlash 2)",
            "invalid",
            ["conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k"],
            ["conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k"],
            "vLLM's qwen3_dflash2 reads dflash_config['conv_kernel_size'] (KeyError)",
        ),
        (
            "+",
            "dflash_config (DFlash 2)",
            "invalid",
            ["conv_group_size", "selector_rank", "selector_top_k"],
            ["conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k"],
            "vLLM's qwen3_dflash2 reads dflash_config['conv_group_size'] (KeyError)",
        ),
    ],
    "dflash2 conv group 0": [],
    "dflash2 conv group divides": [],
    "dflash_config key other, unconfirmed": [
        (
            "-",
            "dflash_config.conv_kernel_size",
            "warning",
            None,
            4,
            (
                "the registry value is unconfirmed (dflash-facts.md §4 (SpecForge + "
                "third party); acceptance: SPEC.md field story)"
            ),
        ),
        (
            "+",
            "dflash_config.conv_kernel_size",
            "warning",
            3,
            4,
            (
                "the registry value is unconfirmed (dflash-facts.md §4 (SpecForge + "
                "third party); acceptance: SPEC.md field story)"
            ),
        ),
    ],
    "draft vocab other than the entry's": [
        (
            "-",
            "draft_vocab_size",
            "missing",
            None,
            32000,
            (
                "the published drafter has its own, reduced draft vocabulary; a "
                "config without draft_vocab_size does not say so"
            ),
        ),
        (
            "+",
            "draft_vocab_size",
            "mismatch",
            16000,
            32000,
            (
                "another draft vocabulary than the published drafter's: its lm_head "
                "and d2t in the weights decide which"
            ),
        ),
        (
            "+",
            "draft_vocab_size",
            "warning",
            16000,
            248320,
            (
                "a draft vocabulary of 16000 tokens needs the drafter's own lm_head "
                "[16000, hidden] and a d2t map [16000] in the weights; none were "
                "read, so neither is checked"
            ),
        ),
    ],
    "dflash_config key same": [
        (
            "-",
            "dflash_config.conv_kernel_size",
            "missing",
            None,
            4,
            None,
        ),
        (
            "+",
            "dflash_config.conv_kernel_size",
            "ok",
            4,
            4,
            None,
        ),
    ],
    "target flat, no entry": [
        (
            "-",
            "target: num_hidden_layers",
            "ok",
            64,
            None,
            "target text_config",
        ),
        (
            "+",
            "target: num_hidden_layers",
            "ok",
            64,
            None,
            "target config",
        ),
    ],
    "target flat, 0 layers": [
        (
            "-",
            "target: num_hidden_layers",
            "ok",
            64,
            64,
            None,
        ),
        (
            "+",
            "target: num_hidden_layers",
            "invalid",
            0,
            "a positive integer",
            "target config",
        ),
    ],
    "target 1 layer, no entry": [
        (
            "-",
            "target: num_hidden_layers",
            "ok",
            64,
            None,
            "target text_config",
        ),
        (
            "+",
            "target: num_hidden_layers",
            "mismatch",
            1,
            64,
            "the drafter's num_target_layers names another target",
        ),
    ],
    "target layers 48, drafter count in dflash_config": [
        (
            "-",
            "target: num_hidden_layers",
            "ok",
            64,
            None,
            "target text_config",
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
    "target vocab, no mask": [
        (
            "-",
            "target: vocab_size",
            "ok",
            248320,
            None,
            "mask_token_id 248070 is inside it",
        ),
        (
            "+",
            "target: vocab_size",
            "ok",
            248320,
            None,
            None,
        ),
    ],
    "sglang last layer, top level only": [
        (
            "+",
            "sglang: last target layer",
            "warning",
            63,
            None,
            (
                "sglang captures id + 1, and the last layer has no next one: on Qwen3.5 the "
                "server dies at start-up with IndexError (sglang#32204, closed unfixed; #32206 "
                "not merged); on other models that capture is silently missing"
            ),
        ),
    ],
    "weights in two shards": [
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
            (
                "model-00001-of-00002.safetensors, model-00002-of-00002.safetensors: "
                "58 tensors, BF16, 3.46 GB"
            ),
            None,
            "read from the safetensors header only",
        ),
    ],
    "weights with no float": [
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
            "model.safetensors: 58 tensors, no float, 6.92 GB",
            None,
            "read from the safetensors header only",
        ),
    ],
    "weights F16, config bfloat16": [
        (
            "-",
            "weights: dtype",
            "ok",
            "BF16",
            "BF16",
            None,
        ),
        (
            "+",
            "weights: dtype",
            "warning",
            "F16",
            "BF16",
            "the config says bfloat16; fp16 in place of bf16 has collapsed acceptance",
        ),
    ],
    "weights, no norm.weight": [
        (
            "-",
            "weights: norms",
            "ok",
            "12 tensors",
            None,
            "shapes match the config",
        ),
        (
            "+",
            "weights: norms",
            "missing",
            "norm.weight",
            None,
            "1 tensor missing, e.g. norm.weight",
        ),
    ],
    "weights, eight layers": [
        (
            "-",
            "weights: layers",
            "ok",
            5,
            5,
            None,
        ),
        (
            "+",
            "weights: layers",
            "mismatch",
            8,
            5,
            (
                "the weights hold layers [0, 1, 2, 3, 4, 5, 6, 7], the config says "
                "num_hidden_layers 5"
            ),
        ),
    ],
    "weights, nine layers": [
        (
            "-",
            "weights: layers",
            "ok",
            5,
            5,
            None,
        ),
        (
            "+",
            "weights: layers",
            "mismatch",
            9,
            5,
            (
                "the weights hold layers [0, 1, 2, 3, 4, 5, 6, 7]…, the config says "
                "num_hidden_layers 5"
            ),
        ),
    ],
    "weights, fc without layer ids": [
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
            [5120, 20480],
            [5120, 25600],
            (
                "the checkpoint was trained with 4 target layers, the config lists 5 "
                "(num_hidden_layers); vLLM: AssertionError: Tried to load weights of "
                "size torch.Size([5120, 20480]) to a parameter of size "
                "torch.Size([5120, 25600])"
            ),
        ),
    ],
    "weights, fc without hidden_size": [
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
            "ok",
            [5120, 25600],
            None,
            "[hidden, target_hidden × 5 target layers]",
        ),
    ],
    "weights, kv heads a string": [
        (
            "-",
            "weights: attention",
            "ok",
            "30 tensors",
            None,
            "shapes match the config (heads 32/8, head_dim 128)",
        ),
    ],
    "weights, heads a string": [
        (
            "-",
            "weights: attention",
            "ok",
            "30 tensors",
            None,
            "shapes match the config (heads 32/8, head_dim 128)",
        ),
    ],
    "weights, no hidden_size": [
        (
            "-",
            "weights: attention",
            "ok",
            "30 tensors",
            None,
            "shapes match the config (heads 32/8, head_dim 128)",
        ),
    ],
    "weights, q_proj bias, no attention_bias": [
        (
            "+",
            "weights: attention bias",
            "mismatch",
            True,
            False,
            "attention_bias in the config must match whether q/k/v_proj.bias are in the weights",
        ),
    ],
    "weights, no bias, no attention_bias": [],
    "weights, k_proj bias": [
        (
            "+",
            "weights: attention bias",
            "mismatch",
            True,
            False,
            "attention_bias in the config must match whether q/k/v_proj.bias are in the weights",
        ),
    ],
    "weights, v_proj bias": [
        (
            "+",
            "weights: attention bias",
            "mismatch",
            True,
            False,
            "attention_bias in the config must match whether q/k/v_proj.bias are in the weights",
        ),
    ],
    "weights, embed_tokens 1-D": [
        (
            "-",
            "weights: embed_tokens/lm_head",
            "ok",
            "shared with the target",
            None,
            (
                "vLLM logs 'Detected EAGLE model without its own lm_head in the "
                "checkpoint. Sharing target model lm_head weights with the draft "
                "model.'"
            ),
        ),
        (
            "+",
            "weights: embed_tokens/lm_head",
            "mismatch",
            ["embed_tokens.weight [5120]"],
            "[vocab, 5120]",
            "the drafter ships its own embed_tokens",
        ),
    ],
    "weights, embed_tokens rows not the vocab": [
        (
            "-",
            "weights: embed_tokens/lm_head",
            "ok",
            "shared with the target",
            None,
            (
                "vLLM logs 'Detected EAGLE model without its own lm_head in the "
                "checkpoint. Sharing target model lm_head weights with the draft "
                "model.'"
            ),
        ),
        (
            "+",
            "weights: embed_tokens/lm_head",
            "mismatch",
            ["embed_tokens.weight [151936, 5120]"],
            "[vocab, 5120]",
            "the drafter ships its own embed_tokens",
        ),
    ],
    "weights, embed_tokens and lm_head": [
        (
            "-",
            "weights: embed_tokens/lm_head",
            "ok",
            "shared with the target",
            None,
            (
                "vLLM logs 'Detected EAGLE model without its own lm_head in the "
                "checkpoint. Sharing target model lm_head weights with the draft "
                "model.'"
            ),
        ),
        (
            "+",
            "weights: embed_tokens/lm_head",
            "ok",
            ["embed_tokens.weight [248320, 5120]", "lm_head.weight [248320, 5120]"],
            "[vocab, 5120]",
            "the drafter ships its own embed_tokens and lm_head",
        ),
    ],
    "draft vocab the target's, vocab_size other": [],
    "draft vocab the vocab_size, no target": [],
    "draft vocab 0, a d2t": [
        (
            "+",
            "weights: d2t",
            "mismatch",
            [32000],
            "draft_vocab_size 32000 in the config",
            (
                "the weights carry a d2t map for a 32000-token draft vocabulary but "
                "the config gives none (draft_vocab_size absent): the engine reads "
                "draft ids as target ids: the engine then shows mean acceptance "
                "length 1.00 with every position at 0.000 while the text stays right "
                "(vllm-ascend#11374, local-inference-lab/vllm#54)"
            ),
        ),
    ],
    "draft vocab 1": [
        (
            "-",
            "weights: embed_tokens/lm_head",
            "ok",
            "shared with the target",
            None,
            (
                "vLLM logs 'Detected EAGLE model without its own lm_head in the "
                "checkpoint. Sharing target model lm_head weights with the draft "
                "model.'"
            ),
        ),
        (
            "+",
            "weights: lm_head.weight",
            "missing",
            "shared with the target",
            [1, 5120],
            (
                "draft_vocab_size 1 needs the drafter's own lm_head [1, 5120]; "
                "without one vLLM shares the target's (248320 rows of target ids) and"
                " the d2t map sends each proposal to another token: the engine then "
                "shows mean acceptance length 1.00 with every position at 0.000 while"
                " the text stays right (vllm-ascend#11374, "
                "local-inference-lab/vllm#54)"
            ),
        ),
        (
            "+",
            "weights: d2t",
            "missing",
            None,
            [1],
            (
                "a draft vocabulary of 1 tokens needs the d2t map to target ids; "
                "without it draft ids are taken as target ids: the engine then shows "
                "mean acceptance length 1.00 with every position at 0.000 while the "
                "text stays right (vllm-ascend#11374, local-inference-lab/vllm#54)"
            ),
        ),
    ],
    "draft vocab, lm_head of another width": [
        (
            "-",
            "weights: embed_tokens/lm_head",
            "ok",
            "shared with the target",
            None,
            (
                "vLLM logs 'Detected EAGLE model without its own lm_head in the "
                "checkpoint. Sharing target model lm_head weights with the draft "
                "model.'"
            ),
        ),
        (
            "+",
            "weights: embed_tokens/lm_head",
            "mismatch",
            ["lm_head.weight [32000, 4096]"],
            "[vocab, 5120]",
            "the drafter ships its own lm_head",
        ),
        (
            "+",
            "weights: lm_head.weight",
            "mismatch",
            [32000, 4096],
            [32000, 5120],
            (
                "the lm_head's rows are the draft vocabulary: draft_vocab_size says "
                "32000 (the weights do not load, or the ids are read through the "
                "wrong table: the engine then shows mean acceptance length 1.00 with "
                "every position at 0.000 while the text stays right "
                "(vllm-ascend#11374, local-inference-lab/vllm#54))"
            ),
        ),
    ],
    "draft vocab, lm_head 1-D": [
        (
            "-",
            "weights: embed_tokens/lm_head",
            "ok",
            "shared with the target",
            None,
            (
                "vLLM logs 'Detected EAGLE model without its own lm_head in the "
                "checkpoint. Sharing target model lm_head weights with the draft "
                "model.'"
            ),
        ),
        (
            "+",
            "weights: embed_tokens/lm_head",
            "mismatch",
            ["lm_head.weight [32000]"],
            "[vocab, 5120]",
            "the drafter ships its own lm_head",
        ),
        (
            "+",
            "weights: lm_head.weight",
            "mismatch",
            [32000],
            [32000, 5120],
            (
                "the lm_head's rows are the draft vocabulary: draft_vocab_size says "
                "32000 (the weights do not load, or the ids are read through the "
                "wrong table: the engine then shows mean acceptance length 1.00 with "
                "every position at 0.000 while the text stays right "
                "(vllm-ascend#11374, local-inference-lab/vllm#54))"
            ),
        ),
    ],
    "draft vocab, d2t other": [
        (
            "-",
            "weights: embed_tokens/lm_head",
            "ok",
            "shared with the target",
            None,
            (
                "vLLM logs 'Detected EAGLE model without its own lm_head in the "
                "checkpoint. Sharing target model lm_head weights with the draft "
                "model.'"
            ),
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
            "mismatch",
            [1000],
            [32000],
            "one d2t entry per draft token: draft_vocab_size says 32000",
        ),
    ],
    "draft vocab, t2d other, a target": [
        (
            "-",
            "weights: embed_tokens/lm_head",
            "ok",
            "shared with the target",
            None,
            (
                "vLLM logs 'Detected EAGLE model without its own lm_head in the "
                "checkpoint. Sharing target model lm_head weights with the draft "
                "model.'"
            ),
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
            "weights: t2d",
            "mismatch",
            [1000],
            [248320],
            (
                "t2d marks which target ids the draft vocabulary holds: one entry per"
                " target token (the target's vocab_size 248320)"
            ),
        ),
    ],
    "draft vocab, t2d of the drafter's vocab, a target of another": [
        (
            "-",
            "weights: embed_tokens/lm_head",
            "ok",
            "shared with the target",
            None,
            (
                "vLLM logs 'Detected EAGLE model without its own lm_head in the "
                "checkpoint. Sharing target model lm_head weights with the draft "
                "model.'"
            ),
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
            "weights: t2d",
            "mismatch",
            [248320],
            [250000],
            (
                "t2d marks which target ids the draft vocabulary holds: one entry per"
                " target token (the target's vocab_size 250000)"
            ),
        ),
    ],
    "draft vocab, t2d other, no target": [
        (
            "-",
            "weights: embed_tokens/lm_head",
            "ok",
            "shared with the target",
            None,
            (
                "vLLM logs 'Detected EAGLE model without its own lm_head in the "
                "checkpoint. Sharing target model lm_head weights with the draft "
                "model.'"
            ),
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
            "weights: t2d",
            "mismatch",
            [1000],
            [248320],
            (
                "t2d marks which target ids the draft vocabulary holds: one entry per"
                " target token (vocab_size 248320)"
            ),
        ),
    ],
    "draft vocab with a t2d": [
        (
            "-",
            "weights: embed_tokens/lm_head",
            "ok",
            "shared with the target",
            None,
            (
                "vLLM logs 'Detected EAGLE model without its own lm_head in the "
                "checkpoint. Sharing target model lm_head weights with the draft "
                "model.'"
            ),
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
            "32000 of 248320 tokens: own lm_head [32000, 5120], d2t [32000], t2d [248320]",
            None,
            "draft ids go through the drafter's own lm_head and back to target ids via d2t",
        ),
    ],
    "draft vocab without lm_head, no hidden_size": [
        (
            "-",
            "weights: embed_tokens/lm_head",
            "ok",
            "shared with the target",
            None,
            (
                "vLLM logs 'Detected EAGLE model without its own lm_head in the "
                "checkpoint. Sharing target model lm_head weights with the draft "
                "model.'"
            ),
        ),
        (
            "+",
            "weights: lm_head.weight",
            "missing",
            "shared with the target",
            [32000, "H"],
            (
                "draft_vocab_size 32000 needs the drafter's own lm_head [32000, H]; "
                "without one vLLM shares the target's (248320 rows of target ids) and"
                " the d2t map sends each proposal to another token: the engine then "
                "shows mean acceptance length 1.00 with every position at 0.000 while"
                " the text stays right (vllm-ascend#11374, "
                "local-inference-lab/vllm#54)"
            ),
        ),
    ],
    "a d2t, no draft vocab": [
        (
            "+",
            "weights: d2t",
            "mismatch",
            [32000],
            "draft_vocab_size 32000 in the config",
            (
                "the weights carry a d2t map for a 32000-token draft vocabulary but "
                "the config gives none (draft_vocab_size absent): the engine reads "
                "draft ids as target ids: the engine then shows mean acceptance "
                "length 1.00 with every position at 0.000 while the text stays right "
                "(vllm-ascend#11374, local-inference-lab/vllm#54)"
            ),
        ),
    ],
    "a d2t, draft vocab the vocab_size": [
        (
            "+",
            "weights: d2t",
            "mismatch",
            [32000],
            "draft_vocab_size 32000 in the config",
            (
                "the weights carry a d2t map for a 32000-token draft vocabulary but "
                "the config gives none (draft_vocab_size 248320): the engine reads "
                "draft ids as target ids: the engine then shows mean acceptance "
                "length 1.00 with every position at 0.000 while the text stays right "
                "(vllm-ascend#11374, local-inference-lab/vllm#54)"
            ),
        ),
    ],
    "an lm_head of 32000 rows, no draft vocab": [
        (
            "-",
            "weights: embed_tokens/lm_head",
            "ok",
            "shared with the target",
            None,
            (
                "vLLM logs 'Detected EAGLE model without its own lm_head in the "
                "checkpoint. Sharing target model lm_head weights with the draft "
                "model.'"
            ),
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
            "weights: lm_head.weight",
            "mismatch",
            [32000, 5120],
            [248320, 5120],
            (
                "its own lm_head has 32000 rows, vocab_size is 248320, and no "
                "draft_vocab_size / d2t says how its ids map to target ids: the "
                "engine then shows mean acceptance length 1.00 with every position at"
                " 0.000 while the text stays right (vllm-ascend#11374, "
                "local-inference-lab/vllm#54)"
            ),
        ),
    ],
    "registry fields not published": [
        (
            "=",
            "registry: not published",
            "ok",
            ["block_size", "sliding_window"],
            None,
            (
                "qwen3.6-27b-dflash's sources give no value for these: nothing here "
                "is checked against the registry for them, only the rules that need "
                "no published value"
            ),
        ),
    ],
    "rope partial 0.25": [
        (
            "+",
            "rope: rope_parameters.partial_rotary_factor",
            "warning",
            0.25,
            None,
            (
                "vLLM rotates only head_dim × 0.25 of each drafter q/k head (32 of "
                "128 dims), as this config says; right only if the drafter was "
                "trained that way. Trainers that copied the target's factor but "
                "rotated the whole head (speculators before PR #733, DeepSpec's "
                "DSpark, deepseek-ai/DeepSpec#71) give a silent collapse "
                "(vllm-project/speculators#613: mean acceptance ~1.2); if yours did, "
                "set it to 1.0 (DeepSpec#72: 1.4 → 2.59)"
            ),
        ),
    ],
    "rope partial 0.3, the target's 0.3": [
        (
            "+",
            "rope: rope_parameters.partial_rotary_factor",
            "warning",
            0.3,
            None,
            (
                "vLLM rotates only head_dim × 0.3 of each drafter q/k head (38 of 128"
                " dims), as this config says; right only if the drafter was trained "
                "that way. Trainers that copied the target's factor but rotated the "
                "whole head (speculators before PR #733, DeepSpec's DSpark, "
                "deepseek-ai/DeepSpec#71) give a silent collapse "
                "(vllm-project/speculators#613: mean acceptance ~1.2); if yours did, "
                "set it to 1.0 (DeepSpec#72: 1.4 → 2.59); the target declares 0.3 "
                "too: the pattern of a copied value"
            ),
        ),
    ],
    "rope partial 0.25, the target's 0.5": [
        (
            "+",
            "rope: rope_parameters.partial_rotary_factor",
            "warning",
            0.25,
            None,
            (
                "vLLM rotates only head_dim × 0.25 of each drafter q/k head (32 of "
                "128 dims), as this config says; right only if the drafter was "
                "trained that way. Trainers that copied the target's factor but "
                "rotated the whole head (speculators before PR #733, DeepSpec's "
                "DSpark, deepseek-ai/DeepSpec#71) give a silent collapse "
                "(vllm-project/speculators#613: mean acceptance ~1.2); if yours did, "
                "set it to 1.0 (DeepSpec#72: 1.4 → 2.59)"
            ),
        ),
    ],
    "rope partial 0.5 in rope_scaling, no head_dim": [
        (
            "+",
            "rope: rope_scaling.partial_rotary_factor",
            "warning",
            0.5,
            None,
            (
                "vLLM rotates only head_dim × 0.5 of each drafter q/k head, as this "
                "config says; right only if the drafter was trained that way. "
                "Trainers that copied the target's factor but rotated the whole head "
                "(speculators before PR #733, DeepSpec's DSpark, "
                "deepseek-ai/DeepSpec#71) give a silent collapse "
                "(vllm-project/speculators#613: mean acceptance ~1.2); if yours did, "
                "set it to 1.0 (DeepSpec#72: 1.4 → 2.59)"
            ),
        ),
    ],
    "rope partial 0.5 at the top, head_dim 0": [
        (
            "+",
            "rope: partial_rotary_factor",
            "warning",
            0.5,
            None,
            (
                "vLLM rotates only head_dim × 0.5 of each drafter q/k head, as this "
                "config says; right only if the drafter was trained that way. "
                "Trainers that copied the target's factor but rotated the whole head "
                "(speculators before PR #733, DeepSpec's DSpark, "
                "deepseek-ai/DeepSpec#71) give a silent collapse "
                "(vllm-project/speculators#613: mean acceptance ~1.2); if yours did, "
                "set it to 1.0 (DeepSpec#72: 1.4 → 2.59)"
            ),
        ),
    ],
    "rope partial 0.5, head_dim 1": [
        (
            "+",
            "rope: partial_rotary_factor",
            "warning",
            0.5,
            None,
            (
                "vLLM rotates only head_dim × 0.5 of each drafter q/k head (0 of 1 "
                "dims), as this config says; right only if the drafter was trained "
                "that way. Trainers that copied the target's factor but rotated the "
                "whole head (speculators before PR #733, DeepSpec's DSpark, "
                "deepseek-ai/DeepSpec#71) give a silent collapse "
                "(vllm-project/speculators#613: mean acceptance ~1.2); if yours did, "
                "set it to 1.0 (DeepSpec#72: 1.4 → 2.59)"
            ),
        ),
    ],
    "rope partial 1": [],
    "rope partial 0": [
        (
            "+",
            "rope_parameters.partial_rotary_factor",
            "invalid",
            0.0,
            "a fraction in (0, 1]",
            "the share of each head RoPE rotates",
        ),
    ],
    "rope partial 1.01": [
        (
            "+",
            "rope_parameters.partial_rotary_factor",
            "invalid",
            1.01,
            "a fraction in (0, 1]",
            "the share of each head RoPE rotates",
        ),
    ],
}


@pytest.mark.parametrize("name", list(CASES))
def test_the_rows_an_edit_changes(name: str, tmp_path: Path) -> None:
    got = changed(CASES[name], tmp_path)
    assert got == EXPECTED[name]
    assert repr(got) == repr(EXPECTED[name])  # an int where the JSON has a float is a bug


@pytest.mark.parametrize(
    ("n", "text"),
    [(0, "0 B"), (999, "999 B"), (1000, "1.00 KB"), (1001, "1.00 KB"), (999_499, "999.50 KB"),
     (1_000_000, "1.00 MB"), (3_456_789_012, "3.46 GB"), (2 * 10**12, "2.00 TB"),
     (5 * 10**15, "5000.00 TB")],
)  # fmt: skip
def test_human_bytes(n: int, text: str) -> None:
    assert _human_bytes(n) == text
