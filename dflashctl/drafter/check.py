"""Is a DFlash drafter's config.json right, and will the engine read it right?

`check_drafter()` is pure: it compares a config (and optionally the safetensors header and the
target's config) with the registry's canonical values and with the rules that need no registry,
and returns one `Check` per row; a failed check is data, not an exception. `run_verify()` reads
the files, picks the registry entry, runs the checks, applies `--fix` through `drafter.fix`, and
returns a `VerifyReport`. Nothing here prints or exits. Facts: shared dflash-facts.md §2–§8;
field resolution mirrors vLLM 0.32 through `dflash_config.resolve()`.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dflashctl.drafter.config import (
    FULL,
    KNOWN_ARCHITECTURES,
    KNOWN_LAYER_TYPES,
    MAX_DRAFT_LAYERS,
    SLIDING,
    TRANSFORMERS_LAYER_TYPE_REMAP,
    TRANSFORMERS_LAYER_TYPES,
    Resolved,
    build_target_layer_ids,
    config_path,
    dflash_section,
    is_int,
    read_json_bytes,
    read_json_object,
    resolve,
    rope_theta,
    target_text_config,
    transformers_view,
)
from dflashctl.drafter.header import FLOAT_DTYPES, Header
from dflashctl.drafter.registry import LOCK_NAME, DrafterEntry, Identification
from dflashctl.errors import InputError, UsageError

STATUSES = ("ok", "mismatch", "missing", "invalid", "warning")
FAILING = frozenset({"mismatch", "missing", "invalid"})
ENGINES = ("vllm", "sglang", "local")
DFLASH2_REQUIRED = ("conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k")
V2_HINT = (
    "needs vLLM's V2 model runner (VLLM_USE_V2_MODEL_RUNNER=1; 0.32 picks V2 by default only "
    "where Triton is available, so never on the CPU build)"
)


@dataclass(frozen=True)
class Check:
    """One row of the verdict: a field, its status, what was found, what was expected, why."""

    field: str
    status: str
    found: Any = None
    expected: Any = None
    hint: str | None = None

    @property
    def failed(self) -> bool:
        return self.status in FAILING

    def to_json(self) -> dict[str, Any]:
        return {
            "field": self.field,
            "status": self.status,
            "found": self.found,
            "expected": self.expected,
            "hint": self.hint,
        }


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _runs(types: list[str] | tuple[str, ...]) -> str:
    """['sliding', 'sliding', 'full'] -> '2 × sliding_attention + 1 × full_attention'."""
    parts: list[str] = []
    prev, count = None, 0
    for t in [*types, None]:
        if t == prev:
            count += 1
            continue
        if prev is not None:
            parts.append(f"{count} × {prev}")
        prev, count = t, 1
    return " + ".join(parts) if parts else "none"


def _evenly_spaced(ids: list[int]) -> bool:
    """Spaced by one step, give or take rounding or a last id clamped to the final layer."""
    gaps = [b - a for a, b in itertools.pairwise(ids)]
    if len(gaps) < 2 or min(gaps) <= 0:
        return False
    return max(gaps) - min(gaps) <= max(2, sum(gaps) / len(gaps) * 0.15)


def ids_pattern(found: list[int], expected: list[int], n_target: int | None) -> str:
    """Name the known way `found` differs from the published `expected` ids."""
    if len(found) != len(expected):
        return (
            f"{len(found)} ids where the published drafter has {len(expected)}: "
            "fc.weight's width is fixed by the count it was trained with"
        )
    diffs = {f - e for f, e in zip(found, expected, strict=True)}
    if diffs == {1}:
        return (
            "ids shifted by one layer from the published ones (each id + 1): engines already add "
            "1 when capturing, so this taps the layer after the one it was trained on"
        )
    if diffs == {-1}:
        return (
            "ids shifted by one layer from the published ones (each id − 1): the drafter reads "
            "the layer before the one it was trained on"
        )
    if sorted(found) == sorted(expected):
        return "the published ids in another order: engines hand the features to fc in layer order"
    formula = build_target_layer_ids(n_target, len(found)) if n_target else None
    if formula is not None and found == formula:
        return "the generic formula (build_target_layer_ids), not this checkpoint's published ids"
    if _evenly_spaced(found):
        step = found[1] - found[0]
        return (
            f"evenly spaced guess (about every {step} layers from {found[0]} to {found[-1]}), "
            "not the published ids"
        )
    same = sum(f == e for f, e in zip(found, expected, strict=True))
    return f"{len(found) - same} of {len(found)} ids differ from the published ones"


def mask_pattern(found: int, expected: int) -> str:
    d = found - expected
    story = " (the field story: 248064 vs 248070)" if (found, expected) == (248064, 248070) else ""
    return (
        f"off by {abs(d)}{story}: a wrong mask id collapses acceptance while the output stays "
        "coherent"
    )


# ---- the checks ------------------------------------------------------------------------------


@dataclass
class _Ctx:
    cfg: dict[str, Any]
    entry: DrafterEntry | None
    target: dict[str, Any] | None
    header: Header | None
    engine: str
    n_target: int | None
    n_target_source: str | None
    r: Resolved  # the engine's reading (vLLM: V1 runner, the one with the traps)
    r_v2: Resolved
    checks: list[Check] = field(default_factory=list)

    def add(
        self,
        name: str,
        status: str,
        found: Any = None,
        expected: Any = None,
        hint: str | None = None,
    ) -> None:
        assert status in STATUSES, status
        self.checks.append(Check(name, status, found, expected, hint))

    def canon(
        self,
        name: str,
        found: Any,
        key: str,
        *,
        expected: Any = None,
        hint_bad: str | None = None,
        hint_ok: str | None = None,
        hint_missing: str | None = None,
    ) -> bool:
        """Compare `found` with the registry's value for `key`; False when there is none."""
        if self.entry is None:
            return False
        if expected is None:
            expected = getattr(self.entry, key.replace("target.", ""), None)
            if key.startswith("target."):
                expected = getattr(self.entry.target, key[len("target.") :], None)
        if expected is None:
            return False
        if isinstance(expected, tuple):
            expected = list(expected)
        unconfirmed = self.entry.is_unconfirmed(key)
        if found is None:
            status, hint = "missing", hint_missing or hint_bad
        elif found == expected:
            status, hint = "ok", hint_ok
        else:
            status, hint = "mismatch", hint_bad
        if unconfirmed and status != "ok":
            status = "warning"
            hint = f"the registry value is unconfirmed ({self.entry.source})" + (
                f"; {hint}" if hint else ""
            )
        self.add(name, status, found, expected, hint)
        return True


def _n_target_layers(
    cfg: dict[str, Any], target: dict[str, Any] | None, entry: DrafterEntry | None
) -> tuple[int | None, str | None]:
    if target is not None and is_int(target.get("num_hidden_layers")):
        return target["num_hidden_layers"], "target config"
    for value, source in (
        (dflash_section(cfg).get("num_target_layers"), "dflash_config.num_target_layers"),
        (cfg.get("num_target_layers"), "num_target_layers"),
    ):
        if is_int(value) and value > 0:
            return value, f"drafter {source}"
    if entry is not None and entry.target.num_hidden_layers is not None:
        return entry.target.num_hidden_layers, f"registry ({entry.repo})"
    return None, None


def check_drafter(
    cfg: dict[str, Any],
    *,
    entry: DrafterEntry | None = None,
    target: dict[str, Any] | None = None,
    header: Header | None = None,
    engine: str = "vllm",
) -> list[Check]:
    """All checks of one drafter config (pure). `target` is the target's config (its text part
    is used), `header` the drafter's safetensors tensor table, `engine` vllm|sglang|local."""
    return _context(cfg, entry=entry, target=target, header=header, engine=engine).checks


def _context(
    cfg: dict[str, Any],
    *,
    entry: DrafterEntry | None,
    target: dict[str, Any] | None,
    header: Header | None,
    engine: str,
) -> _Ctx:
    if engine not in ENGINES:
        raise UsageError(f"unknown engine '{engine}'", f"use one of: {', '.join(ENGINES)}")
    text = target_text_config(target) if target is not None else None
    n_target, n_src = _n_target_layers(cfg, text, entry)
    r_v1 = resolve(cfg, num_target_layers=n_target, runner="v1")
    r_v2 = resolve(cfg, num_target_layers=n_target, runner="v2")
    c = _Ctx(
        cfg=cfg,
        entry=entry,
        target=text,
        header=header,
        engine=engine,
        n_target=n_target,
        n_target_source=n_src,
        r=r_v1 if engine == "vllm" else r_v2,
        r_v2=r_v2,
    )
    _check_structure(c)
    _check_mask(c)
    _check_layer_ids(c)
    _check_layers(c)
    _check_transformers(c)
    _check_block(c)
    _check_misc(c)
    if header is not None:
        _check_weights(c, header)
    if text is not None:
        _check_target(c, text, target is not text)
    _check_engine(c)
    return c


def _check_structure(c: _Ctx) -> None:
    cfg, entry = c.cfg, c.entry
    archs = cfg.get("architectures")
    if not (isinstance(archs, list) and archs and all(isinstance(a, str) for a in archs)):
        c.add(
            "architectures",
            "missing" if archs is None else "invalid",
            archs,
            list(entry.architectures) if entry else ["DFlashDraftModel"],
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


def _check_mask(c: _Ctx) -> None:
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
            "dflash_config.mask_token_id" if "dflash" in r.mask_source else r.mask_source,
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


def _check_layer_ids(c: _Ctx) -> None:
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
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        problems.append(
            f"duplicate ids {dupes}: each layer is captured once, so fc receives fewer "
            "features than it was sized for"
        )
    if ids != sorted(ids) and not dupes:
        problems.append(
            "not ascending: engines capture in layer order, so fc gets its features in another "
            "order than it was trained with (silently)"
        )
    if c.n_target is not None:
        bad = [i for i in ids if not 0 <= i < c.n_target]
        if bad:
            problems.append(
                f"ids {bad} do not exist in a {c.n_target}-layer target ({c.n_target_source}): "
                "dropped silently at start-up, then the first request dies with 'DFlash drafter "
                "expects X concatenated aux hidden features but received Y'"
            )
    if problems:
        c.add(name, "invalid", ids, expected, "; ".join(problems))
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
            f"all below the target's {c.n_target} layers ({c.n_target_source})"
            if c.n_target is not None
            else "target layer count unknown: pass --target DIR to check the range",
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

    _check_aux(c)


def _aux_text(layers: list[Any] | None) -> str | None:
    return "(" + ", ".join(str(i) for i in layers) + ")" if layers is not None else None


def _check_aux(c: _Ctx) -> None:
    """What the runner captures versus what fc was sized for (vLLM's two runners)."""
    readings = [("vllm V1", c.r), ("vllm V2", c.r_v2)] if c.engine == "vllm" else [(c.engine, c.r)]
    for label, r in readings:
        if not r.use_aux_hidden_state or r.captured_layers is None or r.fc_layer_ids is None:
            continue
        wanted = [i + 1 for i in r.fc_layer_ids]
        errors = [e for e in r.engine_errors if "concatenated aux" in e]
        captured = _aux_text(r.captured_layers)
        if errors:
            c.add(
                f"aux layers ({label})",
                "invalid",
                f"{captured} from {r.captured_source}",
                _aux_text(wanted),
                errors[0],
            )
        elif r.captured_layers != wanted:
            c.add(
                f"aux layers ({label})",
                "invalid",
                f"{captured} from {r.captured_source}",
                _aux_text(wanted),
                "the counts match by accident: the drafter gets the wrong target layers, with no "
                "error",
            )
        elif label in ("vllm V1", c.engine):
            c.add(
                "aux layers",
                "ok",
                captured,
                _aux_text(wanted),
                f"vLLM logs 'Using auxiliary layers from speculative config: {captured}'",
            )


def _check_layers(c: _Ctx) -> None:
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
                    hint = f"{_runs(view_types)} instead of {_runs(expected)}"
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
            c.add(name, "ok", raw, None, _runs(raw))

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
            c.add(w_name, "invalid", None, "a positive integer", f"{r.sliding_window_source}")
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


def _check_transformers(c: _Ctx) -> None:
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
            f"{_runs(r.transformers_layer_types)} (sliding only for layers >= "
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


def _check_block(c: _Ctx) -> None:
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


def _check_misc(c: _Ctx) -> None:
    cfg, r, entry = c.cfg, c.r, c.entry
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
    if draft_vocab is not None and draft_vocab != cfg.get("vocab_size"):
        has_d2t = c.header is not None and "d2t" in {_norm(n) for n in c.header.tensors}
        c.add(
            "draft_vocab_size",
            "ok" if has_d2t else "warning",
            draft_vocab,
            cfg.get("vocab_size"),
            "a draft vocabulary different from the target's needs a d2t table in the weights"
            + ("" if has_d2t else " (none seen)"),
        )


# ---- weights ---------------------------------------------------------------------------------

_ALIASES = (
    (re.compile(r"^model\."), ""),
    (re.compile(r"^midlayer\."), "layers.0."),
    (re.compile(r"^encoder\.fc\."), "fc."),
    (re.compile(r"^encoder\.output_norm_enc\."), "hidden_norm."),
)


def _norm(name: str) -> str:
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


def _check_weights(c: _Ctx, header: Header) -> None:
    cfg, r = c.cfg, c.r
    tensors = {_norm(name): info for name, info in header.tensors.items()}
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
    c: _Ctx,
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
            f"{_plural(len(problems), 'tensor')} with a shape the config does not describe",
        )
    elif missing:
        c.add(
            label,
            "missing",
            missing[0],
            None,
            f"{_plural(len(missing), 'tensor')} missing, e.g. {missing[0]}",
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


# ---- target ----------------------------------------------------------------------------------


def _check_target(c: _Ctx, text: dict[str, Any], nested: bool) -> None:
    cfg, r, entry = c.cfg, c.r, c.entry
    where = "target text_config" if nested else "target config"
    n = text.get("num_hidden_layers")
    if not is_int(n) or n <= 0:
        c.add(
            "target: num_hidden_layers",
            "invalid" if n is not None else "missing",
            n,
            "a positive integer",
            where,
        )
    else:
        drafter_n = c.cfg.get("num_target_layers", dflash_section(cfg).get("num_target_layers"))
        if entry is not None and entry.target.num_hidden_layers is not None:
            c.canon(
                "target: num_hidden_layers",
                n,
                "target.num_hidden_layers",
                hint_bad=f"the drafter was trained for a {entry.target.num_hidden_layers}-layer "
                "target; this is another model",
            )
        elif is_int(drafter_n) and drafter_n != n:
            c.add(
                "target: num_hidden_layers",
                "mismatch",
                n,
                drafter_n,
                "the drafter's num_target_layers names another target",
            )
        else:
            c.add("target: num_hidden_layers", "ok", n, None, where)
    vocab = text.get("vocab_size")
    mask = r.mask_token_id
    if is_int(vocab):
        if mask is not None and mask >= vocab:
            c.add(
                "target: vocab_size",
                "invalid",
                vocab,
                f"> mask_token_id {mask}",
                "the mask token has no row in the target's embedding table",
            )
        elif r.vocab_size is not None and r.vocab_size != vocab:
            c.add(
                "target: vocab_size",
                "mismatch",
                vocab,
                r.vocab_size,
                "the drafter shares the target's embed_tokens and lm_head: vocab sizes must agree",
            )
        elif not c.canon("target: vocab_size", vocab, "target.vocab_size"):
            c.add(
                "target: vocab_size",
                "ok",
                vocab,
                None,
                f"mask_token_id {mask} is inside it" if mask is not None else None,
            )
    hidden = text.get("hidden_size")
    if is_int(hidden):
        t_hidden = r.target_hidden_size
        if t_hidden is not None and t_hidden != hidden:
            c.add(
                "target: hidden_size",
                "mismatch",
                hidden,
                t_hidden,
                "fc expects target_hidden_size × n features; the target's hidden states are "
                f"{hidden} wide",
            )
        elif r.hidden_size is not None and r.hidden_size != hidden:
            c.add(
                "target: hidden_size",
                "mismatch",
                hidden,
                r.hidden_size,
                "the drafter embeds with the target's embed_tokens, so its hidden_size must match",
            )
        elif not c.canon("target: hidden_size", hidden, "target.hidden_size"):
            c.add("target: hidden_size", "ok", hidden, None)
    t_theta = rope_theta(text)
    d_theta = rope_theta(cfg)
    if t_theta is not None and d_theta is not None and t_theta != d_theta:
        c.add(
            "target: rope_theta",
            "warning",
            t_theta,
            d_theta,
            "the drafter and target use different RoPE theta: fine only if the drafter was "
            "trained that way",
        )


# ---- engine-specific -------------------------------------------------------------------------


def _check_engine(c: _Ctx) -> None:
    r = c.r
    v1_errors = [e for e in c.r.engine_errors if e.startswith("Model Runner V1")]
    if c.engine == "vllm":
        if v1_errors:
            c.add(
                "vllm: model runner",
                "warning",
                "V2 only",
                None,
                f"{V2_HINT}; the V1 runner exits with '{v1_errors[0].split(' (')[0]}'",
            )
        else:
            c.add("vllm: model runner", "ok", "V1 and V2", None)
    elif c.engine == "local":
        if r.architecture == "DFlash2DraftModel":
            c.add(
                "local: architecture",
                "warning",
                r.architecture,
                "DFlashDraftModel",
                "the bundled engine implements DFlash (DFlashDraftModel)",
            )
        if r.mixed_sliding_full:
            c.add(
                "local: mixed sliding/full",
                "ok",
                _runs([layer.layer_type for layer in r.layers]),
                None,
                "the bundled engine reads the config like vLLM and supports mixed layers",
            )
    elif c.engine == "sglang":
        ids = dflash_section(c.cfg).get("target_layer_ids", c.cfg.get("target_layer_ids"))
        if c.n_target is not None and isinstance(ids, list) and c.n_target - 1 in ids:
            c.add(
                "sglang: last target layer",
                "warning",
                c.n_target - 1,
                None,
                "capturing the target's last layer raised IndexError in sglang (sglang#32204, "
                "fixed by #32206): use a release with the fix",
            )
        if (
            any(layer.sliding for layer in r.layers)
            and transformers_view(c.cfg).get("sliding_window") is None
        ):
            c.add(
                "sglang: sliding_window",
                "invalid",
                None,
                "sliding_window with use_sliding_window: true",
                "sglang reads the window from the loaded config's sliding_window, not "
                "dflash_config.swa_window_size: 'DFLASH sliding_attention layers require "
                "config.sliding_window.'",
            )


# ---- the command -----------------------------------------------------------------------------


@dataclass
class VerifyReport:
    """Everything verify-config found; `ok` is False when any check failed."""

    path: Path
    engine: str
    checks: list[Check]
    entry: DrafterEntry | None
    identification: Identification | None
    resolved: Resolved
    layers: list[dict[str, Any]]
    num_target_layers: int | None
    num_target_layers_source: str | None
    weights: Path | None = None
    target: Path | None = None
    fix: Any = None  # drafter.fix.FixResult
    checks_before: list[Check] | None = None

    @property
    def ok(self) -> bool:
        return not any(check.failed for check in self.checks)

    @property
    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(STATUSES, 0)
        for check in self.checks:
            counts[check.status] += 1
        return counts

    @property
    def num_speculative_tokens(self) -> int | None:
        block = (
            self.entry.block_size if self.entry and self.entry.block_size else None
        ) or self.resolved.block_size
        return block - 1 if block else None

    def to_json(self) -> dict[str, Any]:
        r = self.resolved
        entry = self.entry
        data: dict[str, Any] = {
            "ok": self.ok,
            "checks": [check.to_json() for check in self.checks],
            "path": str(self.path),
            "engine": self.engine,
            "counts": self.counts,
            "registry": None,
            "num_speculative_tokens": self.num_speculative_tokens,
            "block_size": r.block_size,
            "mask_token_id": r.mask_token_id,
            "aux_layers": {
                "fc_source": r.fc_source,
                "target_layer_ids": r.fc_layer_ids,
                "captured": r.captured_layers,
                "captured_source": r.captured_source,
                "effective_target_layer_ids": r.effective_target_layer_ids,
            },
            "num_target_layers": self.num_target_layers,
            "num_target_layers_source": self.num_target_layers_source,
            "layers": self.layers,
            "engine_errors": r.engine_errors,
            "weights": str(self.weights) if self.weights else None,
            "target": str(self.target) if self.target else None,
            "fix": self.fix.to_json() if self.fix is not None else None,
        }
        if entry is not None:
            acc = entry.expected_acceptance
            data["registry"] = {
                "name": entry.name,
                "repo": entry.repo,
                "revision": entry.revision,
                "confidence": entry.confidence,
                "identified_by": self.identification.how if self.identification else None,
                "expected_acceptance": (
                    {"min": acc.min, "max": acc.max, "source": acc.source} if acc else None
                ),
            }
        if self.checks_before is not None:
            data["checks_before"] = [check.to_json() for check in self.checks_before]
        return data


def layer_table(cfg: dict[str, Any], r: Resolved) -> list[dict[str, Any]]:
    """Per layer: what the file says, what transformers loads, what the engine uses."""
    raw = cfg.get("layer_types")
    loaded = r.transformers_layer_types or []
    rows = []
    for layer in r.layers:
        i = layer.index
        rows.append(
            {
                "layer": i,
                "file": raw[i] if isinstance(raw, list) and i < len(raw) else None,
                "loaded": loaded[i] if i < len(loaded) else None,
                "attention": "sliding" if layer.sliding else "full",
                "window": layer.window,
                "causal": layer.causal,
            }
        )
    return rows


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _read_lock(directory: Path) -> dict[str, Any] | None:
    lock = directory / LOCK_NAME
    if not lock.is_file():
        return None
    return read_json_object(lock, what="lock")


def _revision_from_path(directory: Path) -> str | None:
    parts = directory.resolve().parts
    for i, part in enumerate(parts[:-1]):
        if part == "snapshots" and re.fullmatch(r"[0-9a-f]{40}", parts[i + 1]):
            return parts[i + 1]
    return None


def _registry_rows(
    directory: Path,
    config_file: Path,
    entry: DrafterEntry | None,
    ident: Identification | None,
    lock: dict[str, Any] | None,
) -> list[Check]:
    rows: list[Check] = []
    if entry is None:
        if ident is not None and ident.candidates:
            rows.append(
                Check(
                    "registry",
                    "warning",
                    None,
                    list(ident.candidates),
                    f"{ident.how}: checked by rules only; pass --drafter NAME to compare with "
                    "canonical values",
                )
            )
        else:
            rows.append(
                Check(
                    "registry",
                    "ok",
                    None,
                    None,
                    "no registry entry matches: checked by rules only (pass --drafter NAME to "
                    "compare with canonical values)",
                )
            )
        return rows
    how = ident.how if ident is not None else "--drafter"
    rows.append(Check("registry", "ok", entry.repo, None, f"{how}; confidence {entry.confidence}"))
    revision = (lock or {}).get("revision") or _revision_from_path(directory)
    if entry.revision is not None and isinstance(revision, str) and revision != entry.revision:
        rows.append(
            Check(
                "revision",
                "warning",
                revision,
                entry.revision,
                "not the pinned revision: the published files may differ",
            )
        )
    for spec in entry.files:
        if spec.path == config_file.name and spec.sha256:
            digest = _sha256(config_file)
            rows.append(
                Check(
                    f"sha256 {spec.path}",
                    "ok" if digest == spec.sha256 else "warning",
                    digest,
                    spec.sha256,
                    None
                    if digest == spec.sha256
                    else "not the pinned bytes (the values are checked one by one above)",
                )
            )
    return rows


# JSON types of the fields the checks read: anything else means the file is not a usable
# config at all, which is "could not run" (exit 2) rather than a finding.
_INT = ("an integer", lambda v: is_int(v))
_INT_OR_NULL = ("an integer or null", lambda v: v is None or is_int(v))
_BOOL = ("true or false", lambda v: isinstance(v, bool))
_BOOL_OR_NULL = ("true, false or null", lambda v: v is None or isinstance(v, bool))
_NUMBER = ("a number", lambda v: isinstance(v, int | float) and not isinstance(v, bool))
_STR = ("a string", lambda v: isinstance(v, str))
_OBJECT_OR_NULL = ("an object or null", lambda v: v is None or isinstance(v, dict))
_STR_LIST = (
    "a list of strings",
    lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
)
_STR_LIST_OR_NULL = (
    "a list of strings or null",
    lambda v: v is None or (isinstance(v, list) and all(isinstance(x, str) for x in v)),
)
_INT_LIST_OR_NULL = (
    "a list of integers or null",
    lambda v: v is None or (isinstance(v, list) and all(is_int(x) for x in v)),
)
FIELD_TYPES: dict[str, tuple[str, Any]] = {
    "architectures": _STR_LIST,
    "model_type": _STR,
    "num_hidden_layers": _INT,
    "hidden_size": _INT,
    "vocab_size": _INT,
    "intermediate_size": _INT,
    "num_attention_heads": _INT,
    "num_key_value_heads": _INT_OR_NULL,
    "head_dim": _INT_OR_NULL,
    "target_hidden_size": _INT_OR_NULL,
    "num_target_layers": _INT_OR_NULL,
    "block_size": _INT_OR_NULL,
    "max_window_layers": _INT,
    "sliding_window": _INT_OR_NULL,
    "use_sliding_window": _BOOL,
    "attention_bias": _BOOL,
    "is_causal": _BOOL_OR_NULL,
    "layer_types": _STR_LIST_OR_NULL,
    "target_layer_ids": _INT_LIST_OR_NULL,
    "mask_token_id": _INT_OR_NULL,
    "rope_theta": _NUMBER,
    "rope_parameters": _OBJECT_OR_NULL,
    "dflash_config": ("an object", lambda v: isinstance(v, dict)),
    "dflash_config.mask_token_id": _INT_OR_NULL,
    "dflash_config.target_layer_ids": _INT_LIST_OR_NULL,
    "dflash_config.block_size": _INT_OR_NULL,
    "dflash_config.swa_window_size": _INT_OR_NULL,
    "dflash_config.use_swa": _BOOL,
    "dflash_config.causal": _BOOL_OR_NULL,
    "dflash_config.num_target_layers": _INT_OR_NULL,
}


def require_types(cfg: dict[str, Any], path: Path) -> None:
    """Raise InputError (exit 2) for the first field whose JSON type no engine could use."""
    for dotted, (words, ok) in FIELD_TYPES.items():
        section, _, key = dotted.rpartition(".")
        holder = cfg.get(section) if section else cfg
        if not isinstance(holder, dict) or key not in holder:
            continue
        value = holder[key]
        if not ok(value):
            shown = json.dumps(value)
            if len(shown) > 60:
                shown = shown[:57] + "..."
            raise InputError(
                f"{path}: {dotted} must be {words}, found {type(value).__name__} {shown}",
                "fix the value by hand (or fetch the published config.json again)",
            )


def verify_local(
    path: Path,
    *,
    drafter: str | None = None,
    target: Path | None = None,
    engine: str = "vllm",
    fix: bool = False,
) -> VerifyReport:
    """Read the drafter at `path` on this machine (a directory or its config.json), check it,
    optionally fix it (`drafter.verify.run_verify` also reaches a serving host).

    Raises `DflashError`s (exit 2) when it cannot run; failed checks are in the report.
    """
    if engine not in ENGINES:
        raise UsageError(f"unknown engine '{engine}'", f"use one of: {', '.join(ENGINES)}")
    from dflashctl.drafter import registry
    from dflashctl.drafter.header import find_checkpoint, read_header

    cfg_file = config_path(path)
    directory = cfg_file.parent
    if fix:
        from dflashctl.drafter.fix import read_for_fix

        original, stat0 = read_for_fix(cfg_file)
        cfg = _parse(original, cfg_file)
    else:
        original, cfg = read_json_bytes(cfg_file)
        stat0 = None

    require_types(cfg, cfg_file)
    lock = _read_lock(directory)
    ident: Identification | None
    if drafter:
        entry: DrafterEntry | None = registry.get_entry(drafter)
        ident = Identification(entry, f"--drafter {drafter}")
    else:
        ident = registry.identify_explained(cfg, lock, path=cfg_file)
        entry = ident.entry

    checkpoint = find_checkpoint(directory)
    header = read_header(checkpoint) if checkpoint is not None else None

    target_cfg = None
    target_file = None
    if target is not None:
        target_file = config_path(target)
        target_cfg = read_json_object(target_file, what="target config")

    def evaluate(data: dict[str, Any]) -> tuple[list[Check], _Ctx]:
        ctx = _context(data, entry=entry, target=target_cfg, header=header, engine=engine)
        rows = _registry_rows(directory, cfg_file, entry, ident, lock)
        if header is None:
            rows.append(
                Check(
                    "weights",
                    "warning",
                    None,
                    "model.safetensors",
                    "no safetensors beside the config: weight shapes not checked",
                )
            )
        return rows + ctx.checks, ctx

    checks, ctx = evaluate(cfg)
    report = VerifyReport(
        path=cfg_file,
        engine=engine,
        checks=checks,
        entry=entry,
        identification=ident,
        resolved=ctx.r,
        layers=layer_table(cfg, ctx.r),
        num_target_layers=ctx.n_target,
        num_target_layers_source=ctx.n_target_source,
        weights=checkpoint,
        target=target_file,
    )
    if not fix:
        return report

    from dflashctl.drafter.fix import apply_fix

    assert stat0 is not None
    result = apply_fix(cfg_file, original, stat0, cfg, entry, checks)
    if not result.written:
        report.fix = result
        return report
    # The proof the write landed: read the file again from disk and check it again.
    _raw, fresh = read_json_bytes(cfg_file)
    after, ctx_after = evaluate(fresh)
    report.checks_before = checks
    report.checks = after
    report.resolved = ctx_after.r
    report.layers = layer_table(fresh, ctx_after.r)
    report.fix = result
    return report


def _parse(raw: bytes, path: Path) -> dict[str, Any]:
    from dflashctl.drafter.config import parse_json_object

    return parse_json_object(raw, path)
