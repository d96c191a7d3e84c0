"""Rules on the drafter's config.json itself: structure, mask token, target layer ids and aux
layers, layer types, the transformers view, block size, the rest."""

from __future__ import annotations

from collections import Counter
from typing import Any

from dflashctl.drafter.config import (
    FULL,
    KNOWN_ARCHITECTURES,
    KNOWN_LAYER_TYPES,
    MAX_DRAFT_LAYERS,
    SLIDING,
    TRANSFORMERS_LAYER_TYPE_REMAP,
    TRANSFORMERS_LAYER_TYPES,
    build_target_layer_ids,
    dflash_section,
    is_int,
    partial_rotary_factor,
    rope_theta,
    transformers_view,
)
from dflashctl.drafter.rules.base import DFLASH2_REQUIRED, Ctx, ids_pattern, mask_pattern, runs


def check_structure(c: Ctx) -> None:
    cfg, entry = c.cfg, c.entry
    if entry is not None and entry.not_published:
        c.add(
            "registry: not published",
            "ok",
            sorted(entry.not_published),
            None,
            f"{entry.name}'s sources give no value for these: nothing here is checked against "
            "the registry for them, only the rules that need no published value",
        )
    archs = cfg.get("architectures")
    if not (isinstance(archs, list) and archs and all(isinstance(a, str) for a in archs)):
        c.add(
            "architectures",
            "missing" if archs is None else "invalid",
            archs,
            list(entry.architectures) if entry and entry.architectures else ["DFlashDraftModel"],
            "vLLM picks the drafter class from architectures (DFlashDraftModel → "
            "qwen3_dflash, DFlash2DraftModel → qwen3_dflash2)",
        )
    elif not c.canon(
        "architectures",
        archs,
        "architectures",
        hint_bad="a different drafter family than the registry entry: the weights decide this",
    ):
        known = archs[0] in KNOWN_ARCHITECTURES
        c.add(
            "architectures",
            "ok" if known else "warning",
            archs,
            None,
            None
            if known
            else f"vLLM renames it DFlash{archs[0]}; only DFlashDraftModel and "
            "DFlash2DraftModel map to the DFlash models here",
        )

    model_type = cfg.get("model_type")
    if not isinstance(model_type, str):
        c.add(
            "model_type",
            "missing" if model_type is None else "invalid",
            model_type,
            entry.model_type if entry and entry.model_type else "qwen3",
            "transformers' AutoConfig cannot load a config without a model_type string",
        )
    elif not c.canon("model_type", model_type, "model_type") and model_type != "qwen3":
        c.add(
            "model_type",
            "warning",
            model_type,
            None,
            "transformers loads it with another config class than Qwen3Config; the rewrite "
            "checks below assume Qwen3Config",
        )

    weights_hint = "the weights decide this: a different checkpoint, not a stale field"
    for key in ("num_hidden_layers", "hidden_size", "vocab_size"):
        value = cfg.get(key)
        if value is not None and (not is_int(value) or value <= 0):
            c.add(key, "invalid", value, "a positive integer")
        elif key == "num_hidden_layers" and value is not None and value > MAX_DRAFT_LAYERS:
            c.add(key, "invalid", value, f"at most {MAX_DRAFT_LAYERS}", "not a drafter layer count")
        elif not c.canon(key, value, key, hint_bad=weights_hint) and value is None:
            c.add(key, "missing", None, "a positive integer", "required by every engine")
    for key, value in (
        ("num_target_layers", cfg.get("num_target_layers")),
        ("dflash_config.num_target_layers", dflash_section(cfg).get("num_target_layers")),
    ):  # the target's depth, when the drafter states it: a count of layers, never 0
        if value is not None and (not is_int(value) or value <= 0):
            c.add(
                key,
                "invalid",
                value,
                "the target's num_hidden_layers (a positive integer)",
                "an engine that reads it sizes the target taps from it",
            )
    for key in ("intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim"):
        value = cfg.get(key)
        if value is not None and (not is_int(value) or value <= 0):
            c.add(key, "invalid", value, "a positive integer")
        else:
            c.canon(key, value, key, hint_bad=weights_hint)
    bias = cfg.get("attention_bias", False)
    if not isinstance(bias, bool):
        c.add("attention_bias", "invalid", bias, "true or false")
    else:
        c.canon("attention_bias", bias, "attention_bias", hint_bad=weights_hint)
    heads, hidden = cfg.get("num_attention_heads"), cfg.get("hidden_size")
    if (
        is_int(heads)
        and is_int(hidden)
        and heads > 0
        and cfg.get("head_dim") is None
        and hidden % heads
    ):
        c.add(
            "head_dim",
            "invalid",
            None,
            "head_dim, or hidden_size divisible by num_attention_heads",
            f"hidden_size {hidden} is not a multiple of {heads} heads",
        )


def check_mask(c: Ctx) -> None:
    r, cfg = c.r, c.cfg
    vocab = cfg.get("vocab_size")
    expected = c.entry.mask_token_id if c.entry else None
    if r.mask_source is None:
        hint = (
            "vLLM: ValueError: For parallel drafting, the draft model config must have "
            "`dflash_config.mask_token_id` ... specified in its config.json"
        )
        if c.engine == "sglang":
            hint = "sglang falls back to the tokenizer's <|MASK|> token, which may not exist"
        status = "warning" if c.engine == "sglang" else "missing"
        c.add("dflash_config.mask_token_id", status, None, expected, hint)
        return
    raw = r.mask_token_raw
    if not is_int(raw) or raw < 0:
        c.add(
            r.mask_source,  # the key read: dflash_config.mask_token_id, mask_token_id, …
            "invalid",
            raw,
            expected if expected is not None else "an integer token id",
            f"{r.mask_source} is not a non-negative integer; the engine would feed it as the "
            "mask token",
        )
        return
    field_name = "dflash_config.mask_token_id"
    where = f"read from {r.mask_source}"
    if is_int(vocab) and raw >= vocab:
        c.add(
            field_name,
            "invalid",
            raw,
            expected if expected is not None else f"< vocab_size {vocab}",
            f"{where}: not below vocab_size {vocab}, so it has no embedding row",
        )
        return
    bad_hint = mask_pattern(raw, expected) if expected is not None else None
    if not c.canon(
        field_name,
        raw,
        "mask_token_id",
        hint_bad=f"{bad_hint}; {where}" if bad_hint else where,
        hint_ok=where,
    ):
        c.add(field_name, "ok", raw, None, where)
    top = cfg.get("mask_token_id")
    if r.mask_source == "dflash_config.mask_token_id" and top is not None and top != raw:
        c.add(
            "mask_token_id (top level)",
            "warning",
            top,
            raw,
            "differs from dflash_config.mask_token_id, which vLLM and sglang use; older readers "
            "take the top-level one",
        )


def check_layer_ids(c: Ctx) -> None:
    cfg, entry = c.cfg, c.entry
    dfc = dflash_section(cfg)
    in_dfc = dfc.get("target_layer_ids")
    top = cfg.get("target_layer_ids")
    others = cfg.get("eagle_aux_hidden_state_layer_ids") or dfc.get("layer_ids")
    expected = list(entry.target_layer_ids) if entry and entry.target_layer_ids else None
    ids: Any = in_dfc if in_dfc is not None else top
    name = "dflash_config.target_layer_ids"

    # Where it lives.
    if in_dfc is None and top is not None:
        if c.engine == "sglang":
            c.add(
                f"{name} (location)",
                "warning",
                "top level only",
                "inside dflash_config",
                "sglang reads the top-level copy; vLLM's V1 runner ignores it (CPU build, "
                "VLLM_USE_V2_MODEL_RUNNER=0)",
            )
        else:
            c.add(
                f"{name} (location)",
                "missing",
                "top level only",
                "inside dflash_config",
                "vLLM's V1 runner ignores a top-level target_layer_ids: it captures its default "
                "layers (2, L//2, L-3) and logs no 'Using auxiliary layers' line, so the drafter "
                "gets the wrong features or dies on the first request; move it into "
                "dflash_config (verify-config --fix does)",
            )
    elif in_dfc is not None and top is not None and top != in_dfc:
        c.add(
            "target_layer_ids (top level)",
            "warning",
            top,
            in_dfc,
            "differs from dflash_config.target_layer_ids, which engines read first",
        )

    if ids is None:
        if others:
            return
        formula = (
            build_target_layer_ids(c.n_target, c.r.num_hidden_layers)
            if c.n_target and c.r.num_hidden_layers
            else None
        )
        c.add(
            name,
            "missing",
            None,
            expected if expected is not None else formula,
            "vLLM then sizes fc by num_hidden_layers and captures its default layers; sglang "
            "and z-lab fall back to the formula"
            + (f" {formula}" if formula is not None else "")
            + ", which need not be what the drafter was trained on",
        )
        return
    if not (isinstance(ids, list) and ids and all(is_int(i) for i in ids)):
        c.add(name, "invalid", ids, expected or "a non-empty list of layer ids")
        return

    # Shape of the list itself.
    problems: list[str] = []
    counts = Counter(ids)  # linear: 100k ids take milliseconds, not minutes
    dupes = sorted(i for i, n in counts.items() if n > 1)
    if dupes:
        shown = f"{dupes[:10]}"[:-1] + (f", … {len(dupes)} in all]" if len(dupes) > 10 else "]")
        problems.append(
            f"duplicate ids {shown}: each layer is captured once, so fc receives fewer "
            "features than it was sized for"
        )
    if ids != sorted(ids) and not dupes:
        problems.append(
            "not ascending: engines capture in layer order, so fc gets its features in another "
            "order than it was trained with (silently)"
        )
    # depth unknown: engines capture layer id + 1, so ids below -1 name no layer at all
    negative = [i for i in ids if i < -1] if c.n_target is None else []
    if negative:
        problems.append(
            f"ids {negative} name no target layer (ids below -1; the target's depth is not "
            "known here, pass --target DIR to check the range); each engine's row below says "
            "what it does with them"
        )
    # depth known: engines capture the input of layer id + 1, so -1 is the embeddings and
    # n_target - 1 the last layer's output; anything outside names no capture point
    bad = [i for i in ids if not -1 <= i < c.n_target] if c.n_target is not None else []
    if bad:
        assert c.n_target is not None
        span = f"ids -1 … {c.n_target - 1} exist" if c.n_target else "only -1 exists"
        problems.append(
            f"ids {bad} name no layer of a {c.n_target}-layer target ({c.n_target_source}; "
            f"engines capture id + 1, so {span}): "
            + (
                "sglang refuses them at start-up (its row below)"
                if c.engine == "sglang"
                else "dropped silently at start-up, then the first request dies with 'DFlash "
                "drafter expects X concatenated aux hidden features but received Y'"
            )
        )
    if problems:
        c.add(name, "invalid", ids, expected, "; ".join(problems))
        if negative or bad:
            check_aux(c)
        return

    if expected is not None:
        assert entry is not None
        pattern = ids_pattern(ids, expected, c.n_target)
        if c.n_target is not None and c.n_target - 1 in ids and c.n_target - 1 not in expected:
            pattern += f"; {c.n_target - 1} is the target's last layer (sglang#32204)"
        c.canon(name, ids, "target_layer_ids", hint_bad=pattern)
    else:
        c.add(
            name,
            "ok",
            ids,
            None,
            (
                f"all below the target's {c.n_target} layers ({c.n_target_source})"
                if c.n_target is not None
                else "target layer count unknown: pass --target DIR to check the range"
            )
            + (
                "; -1 reads the target's embeddings (layer 0's input), not a layer's output"
                if -1 in ids
                else ""
            ),
        )

    # The formula is a plausibility check, never an error.
    if c.n_target is not None and c.n_target >= 4:
        formula = build_target_layer_ids(c.n_target, len(ids))
        if ids == formula:
            c.add(f"{name} (formula)", "ok", ids, formula)
        elif expected is not None and ids == expected:
            c.add(
                f"{name} (formula)",
                "ok",
                ids,
                formula,
                "the published ids differ from the formula; the checkpoint wins",
            )
        else:
            c.add(
                f"{name} (formula)",
                "warning",
                ids,
                formula,
                f"not build_target_layer_ids({c.n_target}, {len(ids)}); fine if the checkpoint "
                "was trained on these ids",
            )

    check_aux(c)


def aux_text(layers: list[Any]) -> str:
    return "(" + ", ".join(str(i) for i in layers) + ")"


def check_aux(c: Ctx) -> None:
    """What the runner captures versus what fc was sized for (vLLM's two runners)."""
    readings = [("vllm V1", c.r), ("vllm V2", c.r_v2)] if c.engine == "vllm" else [(c.engine, c.r)]
    for label, r in readings:
        if not r.use_aux_hidden_state or r.captured_layers is None or r.fc_layer_ids is None:
            continue
        wanted = [i + 1 for i in r.fc_layer_ids]
        errors = [e for e in r.engine_errors if "concatenated aux" in e]
        captured = aux_text(r.captured_layers)
        if errors:
            c.add(
                f"aux layers ({label})",
                "invalid",
                f"{captured} from {r.captured_source}",
                aux_text(wanted),
                errors[0],
            )
        elif r.captured_layers != wanted:
            c.add(
                f"aux layers ({label})",
                "invalid",
                f"{captured} from {r.captured_source}",
                aux_text(wanted),
                "the counts match by accident: the drafter gets the wrong target layers, with no "
                "error",
            )
        elif label in ("vllm V1", c.engine):
            c.add(
                "aux layers",
                "ok",
                captured,
                aux_text(wanted),
                f"vLLM logs 'Using auxiliary layers from speculative config: {captured}'",
            )


def check_layers(c: Ctx) -> None:
    cfg, entry, r = c.cfg, c.entry, c.r
    raw = cfg.get("layer_types")
    view_types = r.transformers_layer_types
    n = r.num_hidden_layers
    name = "layer_types"
    expected = list(entry.layer_types) if entry and entry.layer_types else None
    if raw is not None and not (isinstance(raw, list) and all(isinstance(t, str) for t in raw)):
        c.add(name, "invalid", raw, expected or "a list of layer type names")
    elif raw is not None and n is not None and len(raw) != n:
        c.add(
            name,
            "invalid",
            raw,
            expected or f"{n} entries",
            f"{len(raw)} entries for {n} layers: transformers refuses to load it "
            f"(`num_hidden_layers` ({n}) must be equal to the number of `layer_types` "
            f"({len(raw)}))",
        )
    else:
        unknown = sorted({t for t in raw or [] if t not in KNOWN_LAYER_TYPES})
        shown = view_types if raw is None else raw
        if expected is not None and view_types is not None:
            hint = None
            if view_types != expected:
                n_exp = expected.count(SLIDING)
                n_got = view_types.count(SLIDING)
                if n_got == 0 and n_exp:
                    hint = (
                        f"all full_attention where the published drafter has {n_exp} "
                        "sliding_attention layers: sliding layers run as full attention lose "
                        "long-context acceptance (vLLM PR #40898)"
                    )
                elif n_got and not n_exp:
                    hint = "sliding layers where the published drafter attends fully"
                else:
                    hint = f"{runs(view_types)} instead of {runs(expected)}"
                if raw is None:
                    hint += "; the file has no layer_types, transformers filled them"
            c.canon(name, shown, "layer_types", hint_bad=hint)
        elif unknown:
            allowed = [
                t
                for t in unknown
                if TRANSFORMERS_LAYER_TYPE_REMAP.get(t, t) in TRANSFORMERS_LAYER_TYPES
            ]
            c.add(
                name,
                "warning" if len(allowed) == len(unknown) else "invalid",
                raw,
                f"{SLIDING} or {FULL}",
                f"{unknown}: vLLM's DFlash treats every type but {SLIDING} as full attention"
                + (
                    ""
                    if len(allowed) == len(unknown)
                    else "; transformers refuses unknown attention types"
                ),
            )
        elif raw is not None:
            c.add(name, "ok", raw, None, runs(raw))

    # The window sliding layers get.
    sliding_layers = [layer for layer in r.layers if layer.sliding]
    wants_window = bool(sliding_layers) or bool(entry and entry.has_sliding_layers)
    if wants_window:
        w_name = "sliding_window"
        window_errors = [e for e in r.engine_errors if "requires a window size" in e]
        if window_errors and sliding_layers:
            note = next((n for n in r.notes if "dropped by transformers" in n), None)
            c.add(
                w_name,
                "invalid",
                None,
                entry.sliding_window if entry else "a window for the sliding layers",
                f"{len(sliding_layers)} sliding layers and no window after transformers loads "
                "the file: vLLM raises " + window_errors[0] + (f" ({note})" if note else ""),
            )
        elif r.sliding_window_source is not None and (
            r.sliding_window is None or r.sliding_window <= 0
        ):
            c.add(
                w_name,
                "invalid",
                r.sliding_window,
                "a positive integer",
                f"read from {r.sliding_window_source}: a sliding layer's window must hold at "
                "least one token",
            )
        elif not c.canon(
            w_name,
            r.sliding_window,
            "sliding_window",
            hint_ok=f"read from {r.sliding_window_source}",
            hint_bad=f"read from {r.sliding_window_source}" if r.sliding_window_source else None,
            hint_missing="no window survives transformers' load (set sliding_window with "
            "use_sliding_window: true, or dflash_config.swa_window_size)",
        ):
            c.add(w_name, "ok", r.sliding_window, None, f"read from {r.sliding_window_source}")

    for key, value in (("is_causal", cfg.get("is_causal")), ("dflash_config.causal", None)):
        if key == "dflash_config.causal":
            value = dflash_section(cfg).get("causal")
        if value is not None and not isinstance(value, bool):
            c.add(
                key,
                "invalid",
                value,
                "true or false",
                f"vLLM takes bool({value!r}) = {bool(value)}",
            )
    if entry is not None and entry.is_causal is not None:
        c.canon(
            "is_causal",
            cfg.get("is_causal"),
            "is_causal",
            hint_bad="the causality the drafter was trained with",
        )
    non_causal = sum(not layer.causal for layer in r.layers)
    if r.layers:
        c.add(
            "attention (per layer)",
            "ok",
            f"{sum(layer.sliding for layer in r.layers)} sliding, "
            f"{sum(not layer.sliding for layer in r.layers)} full; "
            f"{len(r.layers) - non_causal} causal, {non_causal} non-causal",
            None,
            "non-causal layers need an attention backend with non-causal support"
            if non_causal
            else None,
        )


def check_transformers(c: Ctx) -> None:
    cfg, r = c.cfg, c.r
    for err in r.transformers_errors:
        c.add(
            "transformers (load)",
            "invalid",
            None,
            None,
            f"transformers' Qwen3Config refuses the file: {err}",
        )
    if r.transformers_errors:
        return
    view = transformers_view(cfg)
    file_window = cfg.get("sliding_window")
    loaded_window = view.get("sliding_window")
    if "sliding_window" in cfg and file_window != loaded_window:
        used = any(layer.sliding for layer in r.layers) and "swa_window_size" not in (
            dflash_section(cfg)
        )
        c.add(
            "transformers: sliding_window",
            "warning",
            file_window,
            loaded_window,
            "found = the file, expected = what Qwen3Config holds after loading it: the window "
            "is dropped because use_sliding_window is not true"
            + (
                "; the sliding layers need it"
                if used
                else "; put it in dflash_config.swa_window_size if sliding layers need it"
            ),
        )
    elif cfg.get("use_sliding_window") is True and "sliding_window" not in cfg:
        c.add(
            "transformers: sliding_window",
            "warning",
            None,
            loaded_window,
            "use_sliding_window without a sliding_window: Qwen3Config fills its default 4096",
        )
    raw = cfg.get("layer_types")
    if raw is None and r.transformers_layer_types is not None:
        c.add(
            "transformers: layer_types",
            "warning",
            None,
            r.transformers_layer_types,
            "found = the file (no layer_types), expected = what Qwen3Config fills in: "
            f"{runs(r.transformers_layer_types)} (sliding only for layers >= "
            "max_window_layers when a window survives)",
        )
    elif isinstance(raw, list) and r.transformers_layer_types not in (None, raw):
        c.add(
            "transformers: layer_types",
            "warning",
            raw,
            r.transformers_layer_types,
            "legacy layer type names are renamed on load",
        )


def check_block(c: Ctx) -> None:
    r, entry = c.r, c.entry
    dfc = dflash_section(c.cfg)
    raw = dfc.get("block_size", c.cfg.get("block_size"))
    if raw is not None and (not is_int(raw) or raw < 2):
        c.add("block_size", "invalid", raw, "an integer >= 2")
        return
    if not c.canon(
        "block_size",
        r.block_size,
        "block_size",
        hint_ok=f"read from {r.block_size_source}" if r.block_size_source else None,
        hint_missing="not in the file: sglang then uses 16; vLLM needs num_speculative_tokens",
    ):
        if r.block_size is None:
            c.add(
                "block_size",
                "warning",
                None,
                None,
                "not in the file: sglang then uses 16; vLLM never reads it (it needs "
                "num_speculative_tokens)",
            )
        else:
            c.add("block_size", "ok", r.block_size, None, f"read from {r.block_size_source}")
    block = (entry.block_size if entry and entry.block_size else None) or r.block_size
    if block:
        k = block - 1
        if c.engine == "sglang":
            flag = f"--speculative-num-draft-tokens {block} (the block, anchor included)"
        elif c.engine == "local":
            flag = f"K = {k} proposals per step (block {block} minus the anchor)"
        else:
            flag = (
                f'--speculative-config \'{{"method": "dflash", "num_speculative_tokens": {k}}}\': '
                "vLLM never reads block_size; a smaller K works, a larger one asks for positions "
                "the drafter never trained"
            )
        c.add("num_speculative_tokens", "ok", k, block - 1, flag)


def check_partial_rotary(c: Ctx) -> None:
    """A declared partial RoPE: vLLM's DFlash layer passes the drafter config's rope_parameters
    to get_rope (models/qwen3_dflash.py), so it rotates head_dim × factor of each q/k head. A
    trainer that copied the target's factor into the config but rotated the whole head
    (speculators before #733, DeepSpec's DSpark, deepseek-ai/DeepSpec#71) leaves weights that
    collapse under it (vllm-project/speculators#613). The weights cannot tell which rotation
    they learned, so this is a warning to confirm, never an error."""
    factor, key = partial_rotary_factor(c.cfg)
    if factor is None or key is None:
        return
    if not 0 < factor <= 1:
        c.add(key, "invalid", factor, "a fraction in (0, 1]", "the share of each head RoPE rotates")
        return
    if factor == 1:
        return
    head = c.cfg.get("head_dim")
    dims = f" ({int(head * factor)} of {head} dims)" if is_int(head) and head > 0 else ""
    target = partial_rotary_factor(c.target)[0] if c.target is not None else None
    copied = (
        f"; the target declares {target:g} too: the pattern of a copied value"
        if (target == factor)
        else ""
    )
    c.add(
        f"rope: {key}",
        "warning",
        factor,
        None,
        f"vLLM rotates only head_dim × {factor:g} of each drafter q/k head{dims}, as this config "
        "says; right only if the drafter was trained that way. Trainers that copied the target's "
        "factor but rotated the whole head (speculators before PR #733, DeepSpec's DSpark, "
        "deepseek-ai/DeepSpec#71) give a silent collapse (vllm-project/speculators#613: mean "
        "acceptance ~1.2); if yours did, set it to 1.0 (DeepSpec#72: 1.4 → 2.59)" + copied,
    )


def check_misc(c: Ctx) -> None:
    cfg, r, entry = c.cfg, c.r, c.entry
    check_partial_rotary(c)
    if entry is not None and entry.rope_theta is not None:
        theta = rope_theta(cfg)
        c.canon(
            "rope_theta",
            int(theta) if theta is not None and float(theta).is_integer() else theta,
            "rope_theta",
            expected=int(entry.rope_theta)
            if float(entry.rope_theta).is_integer()
            else entry.rope_theta,
            hint_bad="a RoPE theta mismatch is silent: acceptance just drops",
            hint_missing="absent: vLLM defaults to 1e6",
        )
    is_v2 = r.architecture == "DFlash2DraftModel" or bool(entry and entry.kind == "dflash2")
    dfc = dflash_section(cfg)
    if is_v2:
        missing = [k for k in DFLASH2_REQUIRED if k not in dfc]
        if missing:
            c.add(
                "dflash_config (DFlash 2)",
                "invalid",
                missing,
                list(DFLASH2_REQUIRED),
                f"vLLM's qwen3_dflash2 reads dflash_config[{missing[0]!r}] (KeyError)",
            )
        group, hidden = dfc.get("conv_group_size"), cfg.get("hidden_size")
        if is_int(group) and is_int(hidden) and group > 0 and hidden % group:
            c.add(
                "dflash_config.conv_group_size",
                "invalid",
                group,
                f"a divisor of hidden_size {hidden}",
                f"vLLM: conv_group_size={group} must divide hidden_size={hidden}.",
            )
    if entry is not None:
        for key, value in entry.dflash_config:
            c.canon(f"dflash_config.{key}", dfc.get(key), key, expected=value)
    if not r.use_aux_hidden_state:
        c.add(
            "use_aux_hidden_state",
            "warning",
            False,
            True,
            "no fc: the drafter ignores the target's hidden states",
        )
    draft_vocab = cfg.get("draft_vocab_size")
    c.canon(
        "draft_vocab_size",
        draft_vocab,
        "draft_vocab_size",
        hint_bad="another draft vocabulary than the published drafter's: its lm_head and d2t "
        "in the weights decide which",
        hint_missing="the published drafter has its own, reduced draft vocabulary; a config "
        "without draft_vocab_size does not say so",
    )
    if draft_vocab is not None and draft_vocab != cfg.get("vocab_size") and c.header is None:
        # with the safetensors header, weights.check_vocab_ownership checks the shapes
        c.add(
            "draft_vocab_size",
            "warning",
            draft_vocab,
            cfg.get("vocab_size"),
            f"a draft vocabulary of {draft_vocab} tokens needs the drafter's own lm_head "
            f"[{draft_vocab}, hidden] and a d2t map [{draft_vocab}] in the weights; none were "
            "read, so neither is checked",
        )
