"""Rules on the safetensors header against the config: every tensor the config implies, with
its shape and dtype."""

from __future__ import annotations

import re
from typing import Any

from dflashctl.drafter.config import is_int
from dflashctl.drafter.header import FLOAT_DTYPES, Header
from dflashctl.drafter.rules.base import Ctx, plural

_ALIASES = (
    (re.compile(r"^model\."), ""),
    (re.compile(r"^midlayer\."), "layers.0."),
    (re.compile(r"^encoder\.fc\."), "fc."),
    (re.compile(r"^encoder\.output_norm_enc\."), "hidden_norm."),
)


def norm_name(name: str) -> str:
    for pattern, repl in _ALIASES:
        name = pattern.sub(repl, name)
    return name


def _human_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1000
    return f"{n} B"


def check_weights(c: Ctx, header: Header) -> None:
    cfg, r = c.cfg, c.r
    tensors = {norm_name(name): info for name, info in header.tensors.items()}
    files = ", ".join(p.name for p in header.files)
    float_dtypes = sorted({i.dtype for i in tensors.values() if i.dtype in FLOAT_DTYPES})
    c.add(
        "weights",
        "ok",
        f"{files}: {len(tensors)} tensors, {'/'.join(float_dtypes) or 'no float'}, "
        f"{_human_bytes(header.total_bytes)}",
        None,
        "read from the safetensors header only",
    )
    hidden = r.hidden_size
    heads = cfg.get("num_attention_heads")
    kv = cfg.get("num_key_value_heads") or heads
    head_dim = cfg.get("head_dim")
    if head_dim is None and is_int(heads) and heads and is_int(hidden):
        head_dim = hidden // heads
    inter = cfg.get("intermediate_size")

    def shape(name: str) -> list[int] | None:
        info = tensors.get(name)
        return list(info.shape) if info is not None else None

    # fc: [H, T * n]
    fc = shape("fc.weight")
    t_hidden = r.target_hidden_size
    if r.use_aux_hidden_state:
        want = [hidden, r.fc_input_size] if hidden and r.fc_input_size else None
        if fc is None:
            c.add(
                "weights: fc.weight",
                "missing",
                None,
                want,
                "the checkpoint has no fc; vLLM builds one and fails to load it",
            )
        elif want is not None and fc != want:
            hint = (
                f"vLLM: AssertionError: Tried to load weights of size torch.Size({fc}) to a "
                f"parameter of size torch.Size({want})"
            )
            if t_hidden and len(fc) == 2 and fc[1] % t_hidden == 0:
                taps = fc[1] // t_hidden
                hint = (
                    f"the checkpoint was trained with {taps} target layers, the config lists "
                    f"{r.fc_num_features} ({r.fc_source or 'num_hidden_layers'}); " + hint
                )
            c.add("weights: fc.weight", "mismatch", fc, want, hint)
        else:
            c.add(
                "weights: fc.weight",
                "ok",
                fc,
                want,
                f"[hidden, target_hidden × {r.fc_num_features} target layers]",
            )

    # layer count
    layer_ids = sorted(
        {int(m.group(1)) for name in tensors if (m := re.match(r"layers\.(\d+)\.", name))}
    )
    n = r.num_hidden_layers
    if n is not None:
        if layer_ids != list(range(n)):
            c.add(
                "weights: layers",
                "mismatch",
                len(layer_ids),
                n,
                f"the weights hold layers {layer_ids[:8]}{'…' if len(layer_ids) > 8 else ''}, "
                f"the config says num_hidden_layers {n}",
            )
        else:
            c.add("weights: layers", "ok", len(layer_ids), n)

    # attention and MLP shapes per layer
    if is_int(hidden) and is_int(heads) and is_int(kv) and is_int(head_dim):
        want_shapes = {
            "self_attn.q_proj.weight": [heads * head_dim, hidden],
            "self_attn.k_proj.weight": [kv * head_dim, hidden],
            "self_attn.v_proj.weight": [kv * head_dim, hidden],
            "self_attn.o_proj.weight": [hidden, heads * head_dim],
            "self_attn.q_norm.weight": [head_dim],
            "self_attn.k_norm.weight": [head_dim],
        }
        _shape_row(
            c,
            "weights: attention",
            tensors,
            layer_ids,
            want_shapes,
            note=f"heads {heads}/{kv}, head_dim {head_dim}",
        )
    if is_int(hidden) and is_int(inter):
        _shape_row(
            c,
            "weights: mlp",
            tensors,
            layer_ids,
            {
                "mlp.gate_proj.weight": [inter, hidden],
                "mlp.up_proj.weight": [inter, hidden],
                "mlp.down_proj.weight": [hidden, inter],
            },
        )
    if is_int(hidden):
        norms = {
            "input_layernorm.weight": [hidden],
            "post_attention_layernorm.weight": [hidden],
        }
        _shape_row(c, "weights: norms", tensors, layer_ids, norms, top=("hidden_norm", "norm"))

    # biases
    bias = cfg.get("attention_bias", False)
    has_bias = any(name.endswith(("q_proj.bias", "k_proj.bias", "v_proj.bias")) for name in tensors)
    if isinstance(bias, bool) and has_bias != bias:
        c.add(
            "weights: attention bias",
            "mismatch",
            has_bias,
            bias,
            "attention_bias in the config must match whether q/k/v_proj.bias are in the weights",
        )

    # dtype
    wanted_dtype = cfg.get("torch_dtype") or cfg.get("dtype")
    st_name = {"bfloat16": "BF16", "float16": "F16", "float32": "F32"}.get(str(wanted_dtype))
    if len(float_dtypes) > 1:
        c.add(
            "weights: dtype",
            "warning",
            float_dtypes,
            st_name,
            "mixed float dtypes: every tensor is cast to the serving dtype on load",
        )
    elif st_name and float_dtypes and float_dtypes[0] != st_name:
        c.add(
            "weights: dtype",
            "warning",
            float_dtypes[0],
            st_name,
            f"the config says {wanted_dtype}"
            + ("; fp16 in place of bf16 has collapsed acceptance" if st_name == "BF16" else ""),
        )
    elif float_dtypes:
        c.add("weights: dtype", "ok", float_dtypes[0], st_name)

    # tensors that must not / may be there
    if any("mask_hidden" in name for name in tensors):
        c.add(
            "weights: mask_hidden",
            "invalid",
            "present",
            "absent",
            "vLLM asserts: DFlash embeds masked slots via mask_token_id; it should not ship a "
            "mask_hidden weight",
        )
    vocab = r.vocab_size
    own = [k for k in ("embed_tokens.weight", "lm_head.weight") if k in tensors]
    if own:
        bad = [
            f"{k} {list(tensors[k].shape)}"
            for k in own
            if vocab and hidden and list(tensors[k].shape)[-1:] != [hidden]
        ]
        c.add(
            "weights: embed_tokens/lm_head",
            "mismatch" if bad else "ok",
            [f"{k} {list(tensors[k].shape)}" for k in own],
            f"[vocab, {hidden}]",
            "the drafter ships its own " + " and ".join(k.split(".")[0] for k in own),
        )
    else:
        c.add(
            "weights: embed_tokens/lm_head",
            "ok",
            "shared with the target",
            None,
            "vLLM logs 'Detected EAGLE model without its own lm_head in the checkpoint. Sharing "
            "target model lm_head weights with the draft model.'",
        )
    if r.architecture == "DFlash2DraftModel" and not any(
        name.startswith("candidate_selector.") for name in tensors
    ):
        c.add(
            "weights: candidate_selector",
            "missing",
            None,
            "candidate_selector.*",
            "a DFlash 2 checkpoint carries the candidate selector's codebooks",
        )


def _shape_row(
    c: Ctx,
    label: str,
    tensors: dict[str, Any],
    layer_ids: list[int],
    per_layer: dict[str, list[int]],
    top: tuple[str, ...] = (),
    note: str | None = None,
) -> None:
    problems: list[str] = []
    missing: list[str] = []
    for i in layer_ids:
        for suffix, want in per_layer.items():
            name = f"layers.{i}.{suffix}"
            info = tensors.get(name)
            if info is None:
                missing.append(name)
            elif list(info.shape) != want:
                problems.append(f"{name} {list(info.shape)} (expected {want})")
    want_top = next(iter(per_layer.values()), None)
    for base in top:
        name = f"{base}.weight"
        info = tensors.get(name)
        if info is None:
            missing.append(name)
        elif want_top is not None and list(info.shape) != want_top:
            problems.append(f"{name} {list(info.shape)} (expected {want_top})")
    if problems:
        c.add(
            label,
            "mismatch",
            problems[0],
            None,
            f"{plural(len(problems), 'tensor')} with a shape the config does not describe",
        )
    elif missing:
        c.add(
            label,
            "missing",
            missing[0],
            None,
            f"{plural(len(missing), 'tensor')} missing, e.g. {missing[0]}",
        )
    else:
        count = len(layer_ids) * len(per_layer) + len(top)
        c.add(
            label,
            "ok",
            f"{count} tensors",
            None,
            "shapes match the config" + (f" ({note})" if note else ""),
        )
