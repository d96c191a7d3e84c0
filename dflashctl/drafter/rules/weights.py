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
            k for k in own if vocab and hidden and not _vocab_by_hidden(k, tensors, vocab, hidden)
        ]
        c.add(
            "weights: embed_tokens/lm_head",
            "mismatch" if bad else "ok",
            [f"{k} {list(tensors[k].shape)}" for k in own],
            f"[vocab, {hidden}]",
            "the drafter ships its own " + " and ".join(k.split(".")[0] for k in own),
        )
    elif not _reduced_vocab(c):  # a reduced vocabulary without its lm_head: the row below
        c.add(
            "weights: embed_tokens/lm_head",
            "ok",
            "shared with the target",
            None,
            "vLLM logs 'Detected EAGLE model without its own lm_head in the checkpoint. Sharing "
            "target model lm_head weights with the draft model.'",
        )
    check_vocab_ownership(c, tensors, hidden)
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


def _vocab_by_hidden(name: str, tensors: dict[str, Any], vocab: int, hidden: int) -> bool:
    """Whether `name` is a [rows, hidden] matrix whose rows fit: embed_tokens embeds the target's
    ids (vocab rows); an own lm_head's rows are checked against the vocabulary below."""
    shape = list(tensors[name].shape)
    if len(shape) != 2 or shape[1] != hidden:
        return False
    return name != "embed_tokens.weight" or shape[0] == vocab


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


# What an engine does with a draft vocabulary read through the wrong lm_head or map: the
# drafter proposes the wrong token ids, every one is rejected, and the text stays right.
WRONG_VOCAB = (
    "the engine then shows mean acceptance length 1.00 with every position at 0.000 while the "
    "text stays right (vllm-ascend#11374, local-inference-lab/vllm#54)"
)


def _reduced_vocab(c: Ctx) -> bool:
    """The config declares a draft vocabulary smaller or larger than the target's."""
    t_vocab = c.target.get("vocab_size") if c.target is not None else None
    vocab = t_vocab if is_int(t_vocab) else c.r.vocab_size
    n = c.cfg.get("draft_vocab_size")
    return is_int(n) and n > 0 and n != vocab


def check_vocab_ownership(c: Ctx, tensors: dict[str, Any], hidden: Any) -> None:
    """`draft_vocab_size`, `d2t`, `t2d` and `lm_head.weight` against each other (header shapes).

    A reduced draft vocabulary of N tokens (speculators: `draft_vocab_size` N below the
    target's V) needs the drafter's own lm_head [N, H] and a d2t map [N] (draft id + d2t[id] =
    target id; t2d, when shipped, marks the V target ids); a drafter without its own lm_head
    shares the target's, so its vocabulary must be the target's."""
    cfg, r = c.cfg, c.r
    t_vocab = c.target.get("vocab_size") if c.target is not None else None
    vocab = t_vocab if is_int(t_vocab) else r.vocab_size
    where = "the target's vocab_size" if is_int(t_vocab) else "vocab_size"
    n = cfg.get("draft_vocab_size")
    n = n if is_int(n) and n > 0 else None

    def shape(name: str) -> list[int] | None:
        info = tensors.get(name)
        return list(info.shape) if info is not None else None

    lm, d2t, t2d = shape("lm_head.weight"), shape("d2t"), shape("t2d")
    h = hidden if is_int(hidden) else "H"
    rows_before = len(c.checks)
    if n is not None and n != vocab:
        if lm is None:
            c.add(
                "weights: lm_head.weight",
                "missing",
                "shared with the target",
                [n, h],
                f"draft_vocab_size {n} needs the drafter's own lm_head [{n}, {h}]; without one "
                f"vLLM shares the target's ({vocab} rows of target ids) and the d2t map sends "
                f"each proposal to another token: {WRONG_VOCAB}",
            )
        elif lm[0] != n or (is_int(hidden) and lm[-1] != hidden):
            c.add(
                "weights: lm_head.weight",
                "mismatch",
                lm,
                [n, h],
                f"the lm_head's rows are the draft vocabulary: draft_vocab_size says {n} (the "
                f"weights do not load, or the ids are read through the wrong table: "
                f"{WRONG_VOCAB})",
            )
        if d2t is None:
            c.add(
                "weights: d2t",
                "missing",
                None,
                [n],
                f"a draft vocabulary of {n} tokens needs the d2t map to target ids; without it "
                f"draft ids are taken as target ids: {WRONG_VOCAB}",
            )
        elif d2t != [n]:
            c.add(
                "weights: d2t",
                "mismatch",
                d2t,
                [n],
                f"one d2t entry per draft token: draft_vocab_size says {n}",
            )
        if t2d is not None and is_int(vocab) and t2d != [vocab]:
            c.add(
                "weights: t2d",
                "mismatch",
                t2d,
                [vocab],
                f"t2d marks which target ids the draft vocabulary holds: one entry per target "
                f"token ({where} {vocab})",
            )
        if len(c.checks) == rows_before:
            c.add(
                "weights: draft vocabulary",
                "ok",
                f"{n} of {vocab} tokens: own lm_head {lm}, d2t {d2t}"
                + (f", t2d {t2d}" if t2d else ""),
                None,
                "draft ids go through the drafter's own lm_head and back to target ids via d2t",
            )
        return
    # no reduced vocabulary in the config: the weights must not carry one either
    if d2t is not None and is_int(vocab) and d2t[0] != vocab:
        c.add(
            "weights: d2t",
            "mismatch",
            d2t,
            f"draft_vocab_size {d2t[0]} in the config",
            f"the weights carry a d2t map for a {d2t[0]}-token draft vocabulary but the config "
            f"gives none (draft_vocab_size {'absent' if n is None else n}): the engine reads "
            f"draft ids as target ids: {WRONG_VOCAB}",
        )
    elif lm is not None and is_int(vocab) and lm[0] != vocab:
        c.add(
            "weights: lm_head.weight",
            "mismatch",
            lm,
            [vocab, h],
            f"its own lm_head has {lm[0]} rows, {where} is {vocab}, and no draft_vocab_size / "
            f"d2t says how its ids map to target ids: {WRONG_VOCAB}",
        )
