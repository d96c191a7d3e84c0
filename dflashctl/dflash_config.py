"""A DFlash drafter's config.json: what the file says, and what engines make of it.

Owns reading the file (both dialects: legacy top-level fields and the newer nested
`dflash_config`), the transformers `Qwen3Config` rewrites applied on load, and the resolution of
each field the way vLLM 0.32 does it (docs: shared dflash-facts.md §2–§3, §5–§6). Pure: no
printing, no network. The bundled engine reads configs through `resolve()` too, so a stale file
breaks it exactly the way it breaks vLLM.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dflashctl.errors import InputError

SLIDING = "sliding_attention"
FULL = "full_attention"
KNOWN_LAYER_TYPES = (SLIDING, FULL)
KNOWN_ARCHITECTURES = ("DFlashDraftModel", "DFlash2DraftModel")

# transformers' Qwen3Config defaults that matter for the rewrite on load.
QWEN3_DEFAULT_SLIDING_WINDOW = 4096
QWEN3_DEFAULT_MAX_WINDOW_LAYERS = 28

MASK_KEYS = (
    ("dflash_config", "mask_token_id"),
    ("", "mask_token_id"),
    ("", "dspark_noise_token_id"),
    ("", "pard_token"),
    ("", "ptd_token_id"),
)

MAX_CONFIG_BYTES = 16 * 1024 * 1024


def read_json_object(path: Path, what: str = "config") -> dict[str, Any]:
    """Read a JSON object from `path`, turning every way it can be broken into an InputError."""
    if path.is_dir():
        path = path / "config.json"
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise InputError(
            f"{what} file not found: {path}", "pass a drafter directory or its config.json"
        ) from None
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror}") from None
    if size > MAX_CONFIG_BYTES:
        raise InputError(f"{path} is {size} bytes: too large to be a model config")
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{path} is not UTF-8 text (binary file?)") from None
    if not text.strip():
        raise InputError(f"{path} is empty")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        truncated = e.pos >= len(text.rstrip()) - 1
        why = "truncated JSON" if truncated else "malformed JSON"
        raise InputError(
            f"{path}: {why} at line {e.lineno}, column {e.colno}: {e.msg}",
            "the file may be cut short by an interrupted download or edit; fetch it again",
        ) from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object, found {type(data).__name__}")
    return data


def config_path(path: Path) -> Path:
    return path / "config.json" if path.is_dir() else path


def get(cfg: dict[str, Any], section: str, key: str) -> Any:
    """cfg[section][key] for a nested section ('' = top level); None when absent."""
    if not section:
        return cfg.get(key)
    sub = cfg.get(section)
    return sub.get(key) if isinstance(sub, dict) else None


def dflash_section(cfg: dict[str, Any]) -> dict[str, Any]:
    sub = cfg.get("dflash_config")
    return sub if isinstance(sub, dict) else {}


def build_target_layer_ids(num_target_layers: int, num_taps: int) -> list[int]:
    """The published formula (z-lab/dflash, SpecForge, sglang): evenly spaced from 1 to n-3."""
    if num_taps == 1:
        return [num_target_layers // 2]
    start, end = 1, num_target_layers - 3
    span = end - start
    return [round(start + i * span / (num_taps - 1)) for i in range(num_taps)]


def transformers_view(cfg: dict[str, Any]) -> dict[str, Any]:
    """What transformers' Qwen3Config holds after loading `cfg` (the fields it rewrites).

    `sliding_window` is forced to None unless `use_sliding_window` is true (and defaults to 4096
    when the flag is set without a value); `layer_types` is always filled, sliding for layers
    i >= max_window_layers when a window survived.
    """
    view = dict(cfg)
    use = bool(cfg.get("use_sliding_window", False))
    window = cfg.get("sliding_window", QWEN3_DEFAULT_SLIDING_WINDOW) if use else None
    view["sliding_window"] = window
    if cfg.get("layer_types") is None:
        n = cfg.get("num_hidden_layers")
        mwl = cfg.get("max_window_layers", QWEN3_DEFAULT_MAX_WINDOW_LAYERS)
        if isinstance(n, int) and isinstance(mwl, int):
            view["layer_types"] = [
                SLIDING if window is not None and i >= mwl else FULL for i in range(n)
            ]
    return view


@dataclass(frozen=True)
class LayerSpec:
    """Effective attention of one drafter layer: causal block or not, window or full."""

    index: int
    layer_type: str
    causal: bool
    sliding: bool
    window: int | None


@dataclass
class Resolved:
    """One drafter config as an engine resolves it (vLLM 0.32 semantics)."""

    architecture: str | None
    num_hidden_layers: int | None
    hidden_size: int | None
    target_hidden_size: int | None
    vocab_size: int | None
    mask_token_id: int | None
    mask_source: str | None
    # ids that size `fc` (first non-empty source) and their source key
    fc_layer_ids: list[int] | None
    fc_source: str | None
    # what vLLM's V1 runner captures (already +1: residual at the input of that layer)
    captured_layers: list[int] | None
    captured_source: str
    # 0-based "output of layer L" ids the drafter really receives on the V1 runner
    effective_target_layer_ids: list[int] | None
    layers: list[LayerSpec] = field(default_factory=list)
    block_size: int | None = None
    block_size_source: str | None = None
    rope_theta: float | None = None
    engine_errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def num_speculative_tokens(self) -> int | None:
        return self.block_size - 1 if self.block_size else None

    @property
    def mixed_sliding_full(self) -> bool:
        kinds = {layer.sliding for layer in self.layers}
        return len(kinds) > 1


def _int_list(value: Any) -> list[int] | None:
    if (
        isinstance(value, list)
        and value
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        return list(value)
    return None


def rope_theta(cfg: dict[str, Any]) -> float | None:
    params = cfg.get("rope_parameters")
    if isinstance(params, dict) and isinstance(params.get("rope_theta"), int | float):
        return float(params["rope_theta"])
    theta = cfg.get("rope_theta")
    return float(theta) if isinstance(theta, int | float) else None


def mask_token(cfg: dict[str, Any]) -> tuple[int | None, str | None]:
    for section, key in MASK_KEYS:
        value = get(cfg, section, key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value, f"{section}.{key}" if section else key
    return None, None


def resolve(
    cfg: dict[str, Any], num_target_layers: int | None = None, runner: str = "v1"
) -> Resolved:
    """Resolve `cfg` the way vLLM 0.32 does after HF AutoConfig has loaded it.

    `num_target_layers` is the target's `num_hidden_layers` (for the V1 runner's default layers
    and to find ids that do not exist); `runner` is "v1" (the CPU build and the default) or "v2"
    (`VLLM_USE_V2_MODEL_RUNNER=1`).
    """
    view = transformers_view(cfg)
    dfc = dflash_section(cfg)
    errors: list[str] = []
    notes: list[str] = []

    archs = cfg.get("architectures")
    arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None

    mask, mask_src = mask_token(cfg)
    if mask is None:
        errors.append(
            "ValueError: For parallel drafting, the draft model config must have "
            "`dflash_config.mask_token_id`, `mask_token_id`, `dspark_noise_token_id`, "
            "`pard_token`, or `ptd_token_id` specified in its config.json."
        )

    # Layer ids that size fc (eagle3_utils order).
    fc_ids: list[int] | None = None
    fc_src: str | None = None
    for src, value, plus_one in (
        ("eagle_aux_hidden_state_layer_ids", cfg.get("eagle_aux_hidden_state_layer_ids"), False),
        ("dflash_config.target_layer_ids", dfc.get("target_layer_ids"), True),
        ("dspark_target_layer_ids", cfg.get("dspark_target_layer_ids"), True),
        ("target_layer_ids", cfg.get("target_layer_ids"), True),
        ("dflash_config.layer_ids", dfc.get("layer_ids"), False),
        ("eagle_config.layer_ids", get(cfg, "eagle_config", "layer_ids"), False),
    ):
        ids = _int_list(value)
        if ids is not None:
            fc_ids = ids if plus_one else [i - 1 for i in ids]
            fc_src = src
            break

    # What the V1 runner really captures.
    captured: list[int] | None
    top_aux = _int_list(cfg.get("eagle_aux_hidden_state_layer_ids"))
    dfc_ids = _int_list(dfc.get("target_layer_ids"))
    eagle_cfg = cfg.get("eagle_config")
    eagle_ids = (
        _int_list(eagle_cfg.get("eagle_aux_hidden_state_layer_ids"))
        if isinstance(eagle_cfg, dict)
        else None
    )
    if eagle_ids is not None:
        captured, captured_src = eagle_ids, "eagle_config.eagle_aux_hidden_state_layer_ids"
    elif top_aux is not None:
        captured, captured_src = top_aux, "eagle_aux_hidden_state_layer_ids"
    elif dfc_ids is not None:
        captured, captured_src = [i + 1 for i in dfc_ids], "dflash_config.target_layer_ids (+1)"
    elif num_target_layers is not None:
        n = num_target_layers
        captured, captured_src = [2, n // 2, n - 3], "model default (2, L//2, L-3)"
    else:
        captured, captured_src = None, "model default (2, L//2, L-3)"
    if runner == "v1" and dfc_ids is None and top_aux is None and fc_src == "target_layer_ids":
        notes.append(
            "target_layer_ids is only at the top level: vLLM's V1 runner ignores it and captures "
            "its default layers (2, L//2, L-3); no 'Using auxiliary layers' line is logged"
        )
    effective: list[int] | None = None
    if captured is not None:
        # The target records the residual at the input of layer i; i == n is the final
        # pre-norm state. Ids beyond that are dropped silently at capture.
        kept = [
            i for i in sorted(set(captured)) if num_target_layers is None or i <= num_target_layers
        ]
        effective = [i - 1 for i in kept]
        if fc_ids is not None and len(kept) != len(fc_ids):
            t_hidden = cfg.get("target_hidden_size") or cfg.get("hidden_size")
            if isinstance(t_hidden, int):
                errors.append(
                    f"ValueError: DFlash drafter expects {t_hidden * len(fc_ids)} concatenated aux "
                    f"hidden features but received {t_hidden * len(kept)} (on the first request; "
                    "/health still answers 200)"
                )

    # Per-layer causality and sliding windows.
    n_raw = cfg.get("num_hidden_layers")
    n_layers = n_raw if isinstance(n_raw, int) and not isinstance(n_raw, bool) else None
    layer_types = view.get("layer_types")
    use_swa = bool(dfc.get("use_swa", False))
    window = dfc.get("swa_window_size")
    if not isinstance(window, int):
        window = view.get("sliding_window") if isinstance(view.get("sliding_window"), int) else None
    top_causal = cfg.get("is_causal")
    dfc_causal = dfc.get("causal")
    layers: list[LayerSpec] = []
    if n_layers is not None:
        types = layer_types if isinstance(layer_types, list) else []
        any_sliding = any(t == SLIDING for t in types)
        for i in range(n_layers):
            lt = types[i] if i < len(types) and isinstance(types[i], str) else FULL
            if isinstance(top_causal, bool):
                causal = top_causal
            elif isinstance(dfc_causal, bool):
                causal = dfc_causal
            else:
                causal = bool(types) and lt == SLIDING
            # transformers always fills layer_types, so use_swa only forces SWA on drafts
            # without any sliding layer (vLLM `_resolve_layer_attention`).
            sliding = True if use_swa and not any_sliding else lt == SLIDING
            layers.append(LayerSpec(i, lt, causal, sliding, window if sliding else None))
        if any(layer.sliding for layer in layers) and window is None:
            errors.append(
                "ValueError: DFlash sliding attention requires a window size configured in "
                "dflash_config.swa_window_size or the top-level sliding_window."
            )
            if isinstance(cfg.get("sliding_window"), int) and not cfg.get("use_sliding_window"):
                notes.append(
                    "the top-level sliding_window is dropped by transformers' Qwen3Config because "
                    "use_sliding_window is not true; put it in dflash_config.swa_window_size"
                )
        num_sliding_types = sum(t == SLIDING for t in types)
        if 0 < num_sliding_types < len(types) and runner == "v1":
            errors.append(
                "Model Runner V1 does not support: mixed sliding/full dflash drafts "
                "(relaunch with VLLM_USE_V2_MODEL_RUNNER=1 on a GPU build)"
            )

    if arch == "DFlash2DraftModel" and runner == "v1":
        errors.append("DFlash2DraftModel runs only on vLLM's V2 model runner")

    block, block_src = None, None
    for src, value in (
        ("dflash_config.block_size", dfc.get("block_size")),
        ("block_size", cfg.get("block_size")),
    ):
        if isinstance(value, int) and not isinstance(value, bool):
            block, block_src = value, src
            break

    def _int(key: str) -> int | None:
        v = cfg.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    return Resolved(
        architecture=arch,
        num_hidden_layers=n_layers,
        hidden_size=_int("hidden_size"),
        target_hidden_size=_int("target_hidden_size") or _int("hidden_size"),
        vocab_size=_int("vocab_size"),
        mask_token_id=mask,
        mask_source=mask_src,
        fc_layer_ids=fc_ids,
        fc_source=fc_src,
        captured_layers=captured,
        captured_source=captured_src,
        effective_target_layer_ids=effective,
        layers=layers,
        block_size=block,
        block_size_source=block_src,
        rope_theta=rope_theta(cfg) or 1e6,
        engine_errors=errors,
        notes=notes,
    )


def target_text_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """A target config's language-model part (multimodal configs nest it under text_config)."""
    text = cfg.get("text_config")
    return text if isinstance(text, dict) else cfg


def is_finite_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
