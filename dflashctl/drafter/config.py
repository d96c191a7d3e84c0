"""A DFlash drafter's config.json: what the file says, and what engines make of it.

Owns reading the file (both dialects: legacy top-level fields and the newer nested
`dflash_config`), the transformers `Qwen3Config` rewrites applied on load, and the resolution of
each field the way vLLM 0.32 does it (docs: shared dflash-facts.md §2–§3, §5–§6). Pure: no
printing, no network. The bundled engine reads configs through `resolve()` too, so a stale file
breaks it exactly the way it breaks vLLM.

vLLM sources mirrored here (paths inside the `vllm` 0.32 package):
- mask token: `v1/spec_decode/llm_base_proposer.py` `_init_parallel_drafting_params`;
- layers that size `fc` and that the V2 runner captures:
  `v1/worker/gpu/spec_decode/eagle/eagle3_utils.py` `get_eagle3_aux_layers_from_config`;
- layers the V1 runner captures: `v1/worker/gpu_model_runner.py`
  `_get_eagle3_aux_layers_from_config`, else the model default `(2, L // 2, L - 3)`;
- capture points: `model_executor/models/qwen2.py` records index 0 (embeddings) and `idx + 1`
  after decoder layer `idx`, so indices `0 .. L` exist and others are dropped silently;
- per-layer attention: `model_executor/models/qwen3_dflash.py` `_resolve_layer_attention`,
  `_dflash_layer_causal`, `_get_dflash_fc_input_size`;
- V1 refusals: `config/vllm.py` `_get_v1_model_runner_unsupported_features`.
"""

from __future__ import annotations

import json
import math
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from dflashctl.errors import InputError
from dflashctl.files import read_bounded

SLIDING = "sliding_attention"
FULL = "full_attention"
KNOWN_LAYER_TYPES = (SLIDING, FULL)
KNOWN_ARCHITECTURES = ("DFlashDraftModel", "DFlash2DraftModel")
# Architectures vLLM 0.32 serves only on the V2 model runner ("DFlash candidate-head drafts").
CANDIDATE_HEAD_ARCHITECTURES = ("DFlash2DraftModel", "LiLiCorrDraftModel")

# transformers' Qwen3Config defaults that matter for the rewrite on load.
QWEN3_DEFAULT_SLIDING_WINDOW = 4096
QWEN3_DEFAULT_MAX_WINDOW_LAYERS = 28
# transformers 5.x `ALLOWED_ATTN_LAYER_TYPES` (configuration_utils.py): anything else in
# `layer_types` makes the config fail to load.
TRANSFORMERS_LAYER_TYPES = (
    "full_attention",
    "sliding_attention",
    "chunked_attention",
    "window_attention",
    "indexed_attention",
    "compressed_sparse_attention",
    "heavily_compressed_attention",
    "minimax_m3_sparse",
    "conv",
    "moe",
    "hybrid",
    "hybrid_sliding",
    "linear_attention",
)
# transformers `_LEGACY_LAYER_TYPE_REMAP`: old names rewritten on load.
TRANSFORMERS_LAYER_TYPE_REMAP = {
    "mamba": "linear_attention",
    "attention": "full_attention",
    "deepseek_sparse_attention": "indexed_attention",
    "qwen_sparse_attention": "indexed_attention",
}

MASK_KEYS = (
    ("dflash_config", "mask_token_id"),
    ("", "mask_token_id"),
    ("", "dspark_noise_token_id"),
    ("", "pard_token"),
    ("", "ptd_token_id"),
)

MAX_CONFIG_BYTES = 16 * 1024 * 1024
# No drafter has more layers than this; a larger num_hidden_layers is treated as absent rather
# than expanded into a per-layer table (a hostile 10**12 would exhaust memory).
MAX_DRAFT_LAYERS = 4096

V1_UNSUPPORTED = "Model Runner V1 does not support: "


def read_json_bytes(path: Path, what: str = "config") -> tuple[bytes, dict[str, Any]]:
    """Read `path` (a directory means its config.json): the raw bytes and the JSON object.

    Every way the file can be missing or broken becomes a one-line `InputError`.
    """
    try:
        if stat.S_ISDIR(os.stat(path).st_mode):
            path = path / "config.json"
        size = path.stat().st_size
    except FileNotFoundError:
        raise InputError(
            f"{what} file not found: {path}", "pass a drafter directory or its config.json"
        ) from None
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror}") from None
    if size > MAX_CONFIG_BYTES:
        raise InputError(f"{path} is {size} bytes: too large to be a model config")
    # Only a regular file, and never more than the cap (a link to /dev/zero, a FIFO).
    raw = read_bounded(path, MAX_CONFIG_BYTES, f"{what} file")
    return raw, parse_json_object(raw, path, what)


class _Unreadable:
    """A JSON number no engine reads (NaN, Infinity, 1e999, an integer beyond int64)."""

    def __init__(self, what: str) -> None:
        self.what = what


class UnreadableValue(ValueError):
    def __init__(self, key: str | None, what: str) -> None:
        super().__init__(what)
        self.key, self.what = key, what


MAX_INT_DIGITS = 19  # int64: every integer a config holds fits


def _parse_int(s: str) -> int | _Unreadable:
    digits = len(s.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        return _Unreadable(f"an integer of {digits} digits")
    return int(s)


def _parse_float(s: str) -> float | _Unreadable:
    v = float(s)
    return v if math.isfinite(v) else _Unreadable(f"{s[:20]}, beyond any float")


def _find_unreadable(value: Any) -> _Unreadable | None:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, _Unreadable):
            return v
        if isinstance(v, list):
            stack.extend(v)
    return None


def _checked_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    for key, value in pairs:
        bad = _find_unreadable(value)
        if bad is not None:
            raise UnreadableValue(key, bad.what)
    return dict(pairs)


def loads_strict(text: str) -> Any:
    """json.loads, refusing NaN, Infinity, overflowing floats and integers beyond int64 with
    `UnreadableValue` (a ValueError naming the key) instead of taking them, or failing with a
    traceback on Python's 4300-digit limit."""
    data = json.loads(
        text,
        parse_int=_parse_int,
        parse_float=_parse_float,
        parse_constant=lambda s: _Unreadable(s),
        object_pairs_hook=_checked_pairs,
    )
    bad = _find_unreadable(data)
    if bad is not None:
        raise UnreadableValue(None, bad.what)
    return data


def parse_json_object(raw: bytes, path: Path, what: str = "config") -> dict[str, Any]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{path} is not UTF-8 text (binary file?)") from None
    if not text.strip():
        raise InputError(f"{path} is empty")
    try:
        data = loads_strict(text)
    except json.JSONDecodeError as e:
        # Cut short: the error is at the very end, or a string never closes.
        truncated = e.pos >= len(text.rstrip()) - 1 or e.msg.startswith("Unterminated string")
        why = "truncated JSON" if truncated else "malformed JSON"
        raise InputError(
            f"{path}: {why} at line {e.lineno}, column {e.colno}: {e.msg}",
            "the file may be cut short by an interrupted download or edit; fetch it again",
        ) from None
    except UnreadableValue as e:
        where = f"{e.key} is " if e.key is not None else "a value is "
        raise InputError(
            f"{path}: {where}{e.what}: no {what} value can be that",
            "fix the value by hand (or fetch the published config.json again)",
        ) from None
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deeply") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object, found {type(data).__name__}")
    return data


def read_json_object(path: Path, what: str = "config") -> dict[str, Any]:
    """Read a JSON object from `path`, turning every way it can be broken into an InputError."""
    return read_json_bytes(path, what)[1]


def config_path(path: Path) -> Path:
    try:
        is_dir = stat.S_ISDIR(os.stat(path).st_mode)
    except FileNotFoundError:
        is_dir = False
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror}") from None
    return path / "config.json" if is_dir else path


def get(cfg: dict[str, Any], section: str, key: str) -> Any:
    """cfg[section][key] for a nested section ('' = top level); None when absent."""
    if not section:
        return cfg.get(key)
    sub = cfg.get(section)
    return sub.get(key) if isinstance(sub, dict) else None


def dflash_section(cfg: dict[str, Any]) -> dict[str, Any]:
    sub = cfg.get("dflash_config")
    return sub if isinstance(sub, dict) else {}


def is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


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
    i >= max_window_layers when a window survived; legacy layer type names are renamed
    (`"attention"` becomes `"full_attention"`).
    """
    view = dict(cfg)
    use = bool(cfg.get("use_sliding_window", False))
    window = cfg.get("sliding_window", QWEN3_DEFAULT_SLIDING_WINDOW) if use else None
    view["sliding_window"] = window
    layer_types = cfg.get("layer_types")
    if layer_types is None:
        n = cfg.get("num_hidden_layers")
        mwl = cfg.get("max_window_layers", QWEN3_DEFAULT_MAX_WINDOW_LAYERS)
        if is_int(n) and is_int(mwl) and 0 <= n <= MAX_DRAFT_LAYERS:
            view["layer_types"] = [
                SLIDING if window is not None and i >= mwl else FULL for i in range(n)
            ]
    elif isinstance(layer_types, list):
        view["layer_types"] = [
            TRANSFORMERS_LAYER_TYPE_REMAP.get(t, t) if isinstance(t, str) else t
            for t in layer_types
        ]
    return view


def transformers_load_errors(cfg: dict[str, Any]) -> list[str]:
    """Why transformers' (strict) Qwen3Config would refuse to load `cfg`; [] when it loads.

    Covers the fields this module reads: `layer_types`, `num_hidden_layers`,
    `sliding_window`, `use_sliding_window`, `max_window_layers`.
    """
    errors: list[str] = []
    n = cfg.get("num_hidden_layers")
    if "num_hidden_layers" in cfg and not is_int(n):
        errors.append(f"Field 'num_hidden_layers' expected int, got {type(n).__name__}")
    use = cfg.get("use_sliding_window", False)
    if not isinstance(use, bool):
        errors.append(f"Field 'use_sliding_window' expected bool, got {type(use).__name__}")
    window = cfg.get("sliding_window")
    if window is not None and not is_int(window):
        errors.append(f"Field 'sliding_window' expected int or null, got {type(window).__name__}")
    mwl = cfg.get("max_window_layers", QWEN3_DEFAULT_MAX_WINDOW_LAYERS)
    if not is_int(mwl):
        errors.append(f"Field 'max_window_layers' expected int, got {type(mwl).__name__}")
    layer_types = cfg.get("layer_types")
    if layer_types is not None:
        if not isinstance(layer_types, list) or not all(isinstance(t, str) for t in layer_types):
            errors.append("Field 'layer_types' expected a list of strings")
        else:
            remapped = [TRANSFORMERS_LAYER_TYPE_REMAP.get(str(t), str(t)) for t in layer_types]
            bad = sorted({t for t in remapped if t not in TRANSFORMERS_LAYER_TYPES})
            if bad:
                errors.append(f"The `layer_types` entries must be known attention types, got {bad}")
            elif is_int(n) and n != len(layer_types):
                errors.append(
                    f"`num_hidden_layers` ({n}) must be equal to the number of `layer_types` "
                    f"({len(layer_types)})"
                )
    return errors


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
    # what the runner captures (already +1: residual at the input of that layer)
    captured_layers: list[int] | None
    captured_source: str
    # 0-based "output of layer L" ids the drafter really receives on that runner
    effective_target_layer_ids: list[int] | None
    layers: list[LayerSpec] = field(default_factory=list)
    block_size: int | None = None
    block_size_source: str | None = None
    rope_theta: float | None = None
    engine_errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # Added fields (defaults keep older constructors working).
    runner: str = "v1"
    # the raw value at `mask_source` (may be a non-int the engine would still take)
    mask_token_raw: Any = None
    # `fc` input features = len(aux layers) or, with no layer ids at all, num_hidden_layers
    fc_num_features: int | None = None
    use_aux_hidden_state: bool = True
    # the window sliding layers get, and where it comes from
    sliding_window: int | None = None
    sliding_window_source: str | None = None
    # what transformers' Qwen3Config makes of the file, and why it would refuse it
    transformers_layer_types: list[str] | None = None
    transformers_errors: list[str] = field(default_factory=list)

    @property
    def num_speculative_tokens(self) -> int | None:
        return self.block_size - 1 if self.block_size else None

    @property
    def mixed_sliding_full(self) -> bool:
        kinds = {layer.sliding for layer in self.layers}
        return len(kinds) > 1

    @property
    def fc_input_size(self) -> int | None:
        if not self.use_aux_hidden_state or self.fc_num_features is None:
            return None
        t = self.target_hidden_size
        return t * self.fc_num_features if t else None


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
    if isinstance(params, dict) and is_finite_number(params.get("rope_theta")):
        return float(params["rope_theta"])
    theta = cfg.get("rope_theta")
    return float(theta) if is_finite_number(theta) else None


def partial_rotary_factor(cfg: dict[str, Any]) -> tuple[float | None, str | None]:
    """The RoPE fraction a config declares and where: `rope_parameters.partial_rotary_factor`
    (transformers 5), `rope_scaling.…` or the top-level key; (None, None) when none is."""
    for section in ("rope_parameters", "rope_scaling"):
        params = cfg.get(section)
        if isinstance(params, dict) and is_finite_number(params.get("partial_rotary_factor")):
            return float(params["partial_rotary_factor"]), f"{section}.partial_rotary_factor"
    value = cfg.get("partial_rotary_factor")
    if is_finite_number(value):
        return float(value), "partial_rotary_factor"
    return None, None


def mask_token_raw(cfg: dict[str, Any]) -> tuple[Any, str | None]:
    """The mask token vLLM takes, as written (any type), and its key; (None, None) if none.

    `dflash_config.mask_token_id` wins whenever the key exists (even null), then a non-null
    top-level `mask_token_id`, then any present `dspark_noise_token_id`, `pard_token`,
    `ptd_token_id` (vLLM uses `hasattr`).
    """
    dfc = cfg.get("dflash_config")
    if isinstance(dfc, dict) and "mask_token_id" in dfc:
        return dfc["mask_token_id"], "dflash_config.mask_token_id"
    if cfg.get("mask_token_id") is not None:
        return cfg["mask_token_id"], "mask_token_id"
    for key in ("dspark_noise_token_id", "pard_token", "ptd_token_id"):
        if key in cfg:
            return cfg[key], key
    return None, None


def mask_token(cfg: dict[str, Any]) -> tuple[int | None, str | None]:
    value, source = mask_token_raw(cfg)
    return (value if is_int(value) else None), source


def _plus_one(values: Any) -> list[Any] | None:
    """[i + 1 for i in values] as vLLM does it; None where that would raise a TypeError."""
    if not isinstance(values, list | tuple):
        return None
    if not all(is_int(v) for v in values):
        return None
    return [v + 1 for v in values]


def aux_layers_eagle3(cfg: dict[str, Any]) -> tuple[list[Any] | None, str | None]:
    """`get_eagle3_aux_layers_from_config`: capture indices that size `fc` (and that the V2
    runner captures), with the source key; (None, None) when no source gives any."""
    src = "eagle_aux_hidden_state_layer_ids"
    layer_ids: Any = cfg.get("eagle_aux_hidden_state_layer_ids")
    dfc = cfg.get("dflash_config")
    if not layer_ids and dfc and isinstance(dfc, dict):
        src = "dflash_config.target_layer_ids"
        layer_ids = _plus_one(dfc.get("target_layer_ids") or [])
    if not layer_ids:
        dspark = cfg.get("dspark_target_layer_ids")
        if dspark:
            src = "dspark_target_layer_ids"
            if cfg.get("model_type") == "deepseek_v41":
                layer_ids = list(dspark) if isinstance(dspark, list | tuple) else None
            else:
                layer_ids = _plus_one(dspark)
    if not layer_ids:
        top = cfg.get("target_layer_ids")
        if top:
            src = "target_layer_ids"
            layer_ids = _plus_one(top)
    if not layer_ids:
        for name in ("dflash_config", "eagle_config"):
            sub = cfg.get(name)
            if sub and isinstance(sub, dict):
                layer_ids = sub.get("layer_ids")
                if layer_ids:
                    src = f"{name}.layer_ids"
                    break
    if layer_ids and isinstance(layer_ids, list | tuple):
        return list(layer_ids), src
    return None, None


def aux_layers_v1(cfg: dict[str, Any]) -> tuple[list[Any] | None, str | None]:
    """The V1 runner's own copy (`GPUModelRunner._get_eagle3_aux_layers_from_config`): top-level
    `eagle_aux_hidden_state_layer_ids`, else `dflash_config.target_layer_ids` (+1), and a
    non-empty `eagle_config` dict then overrides with its own key (even when that is absent)."""
    src = "eagle_aux_hidden_state_layer_ids"
    layer_ids: Any = cfg.get("eagle_aux_hidden_state_layer_ids")
    if not layer_ids:
        dfc = cfg.get("dflash_config")
        eagle = cfg.get("eagle_config")
        if dfc and isinstance(dfc, dict):
            src = "dflash_config.target_layer_ids (+1)"
            layer_ids = _plus_one(dfc.get("target_layer_ids") or [])
        if eagle and isinstance(eagle, dict):
            src = "eagle_config.eagle_aux_hidden_state_layer_ids"
            layer_ids = eagle.get("eagle_aux_hidden_state_layer_ids")
    if layer_ids and isinstance(layer_ids, list | tuple):
        return list(layer_ids), src
    return None, None


def default_aux_layers(num_target_layers: int) -> list[int]:
    """`SupportsEagle3.get_eagle3_default_aux_hidden_state_layers`."""
    n = num_target_layers
    return [2, n // 2, n - 3]


def resolve(
    cfg: dict[str, Any], num_target_layers: int | None = None, runner: str = "v1"
) -> Resolved:
    """Resolve `cfg` the way vLLM 0.32 does after HF AutoConfig has loaded it.

    `num_target_layers` is the target's `num_hidden_layers` (for the runner's default layers
    and to find ids that do not exist); `runner` is "v1" (the CPU build and the default) or "v2"
    (`VLLM_USE_V2_MODEL_RUNNER=1`).
    """
    view = transformers_view(cfg)
    raw_dfc = cfg.get("dflash_config")
    dfc = dflash_section(cfg)
    errors: list[str] = []
    notes: list[str] = []
    v1_unsupported: list[str] = []
    if raw_dfc is not None and not isinstance(raw_dfc, dict):
        errors.append(
            f"AttributeError: dflash_config is a {type(raw_dfc).__name__}, not an object "
            "(vLLM calls dflash_config.get(...))"
        )
    t_errors = transformers_load_errors(cfg)

    archs = cfg.get("architectures")
    arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None

    mask_raw, mask_src = mask_token_raw(cfg)
    mask = mask_raw if is_int(mask_raw) else None
    if mask_src is None:
        errors.append(
            "ValueError: For parallel drafting, the draft model config must have "
            "`dflash_config.mask_token_id`, `mask_token_id`, `dspark_noise_token_id`, "
            "`pard_token`, or `ptd_token_id` specified in its config.json."
        )

    # Layer ids that size fc (eagle3_utils order), in DFlash "output of layer L" semantics.
    eagle3_ids, eagle3_src = aux_layers_eagle3(cfg)
    fc_ids: list[int] | None = None
    if eagle3_ids is not None and all(is_int(i) for i in eagle3_ids):
        fc_ids = [i - 1 for i in eagle3_ids]
    fc_src = eagle3_src

    drafter_cfg: dict[str, Any] = {}
    for name in ("eagle_config", "dflash_config"):
        sub = cfg.get(name)
        if isinstance(sub, dict):
            drafter_cfg.update(sub)
    use_aux = bool(drafter_cfg.get("use_aux_hidden_state", cfg.get("use_aux_hidden_state", True)))

    n_raw = cfg.get("num_hidden_layers")
    n_layers = n_raw if is_int(n_raw) and 0 < n_raw <= MAX_DRAFT_LAYERS else None
    if is_int(n_raw) and n_layers is None:
        errors.append(f"num_hidden_layers {n_raw} is not a plausible drafter layer count")
    fc_features = len(eagle3_ids) if eagle3_ids else n_layers

    # What the runner really captures.
    captured: list[Any] | None
    if runner == "v1":
        captured, found_src = aux_layers_v1(cfg)
    else:
        captured, found_src = eagle3_ids, eagle3_src
    captured_src = found_src or "model default (2, L//2, L-3)"
    if captured is None and num_target_layers is not None:
        captured = default_aux_layers(num_target_layers)
    if runner == "v1" and fc_src == "target_layer_ids" and found_src is None:
        notes.append(
            "target_layer_ids is only at the top level: vLLM's V1 runner ignores it and captures "
            "its default layers (2, L//2, L-3); no 'Using auxiliary layers' line is logged"
        )
    effective: list[int] | None = None
    if captured is not None:
        # The target records the residual at the input of layer i (index 0 = embeddings,
        # i == n = the final pre-norm state), each once, in layer order; other indices are
        # dropped silently at capture.
        kept = sorted(
            {
                i
                for i in captured
                if is_int(i) and i >= 0 and (num_target_layers is None or i <= num_target_layers)
            }
        )
        effective = [i - 1 for i in kept]
        t_hidden = cfg.get("target_hidden_size") or cfg.get("hidden_size")
        if use_aux and fc_features is not None and len(kept) != fc_features and is_int(t_hidden):
            errors.append(
                f"ValueError: DFlash drafter expects {t_hidden * fc_features} concatenated aux "
                f"hidden features but received {t_hidden * len(kept)} (on the first request; "
                "/health still answers 200)"
            )

    # Per-layer causality and sliding windows (`_resolve_layer_attention`).
    layer_types = view.get("layer_types")
    use_swa = dfc.get("use_swa", False)
    window_src: str | None
    if "swa_window_size" in dfc:
        window_raw, window_src = dfc["swa_window_size"], "dflash_config.swa_window_size"
    else:
        window_raw = view.get("sliding_window")
        window_src = "sliding_window" if window_raw is not None else None
    window = window_raw if is_int(window_raw) else None
    top_causal = cfg.get("is_causal")
    dfc_causal = dfc.get("causal")
    layers: list[LayerSpec] = []
    types: list[Any] = layer_types if isinstance(layer_types, list) else []
    if n_layers is not None:
        any_sliding = any(t == SLIDING for t in types)
        for i in range(n_layers):
            lt = types[i] if i < len(types) and isinstance(types[i], str) else FULL
            if top_causal is not None:
                causal = bool(top_causal)
            elif dfc_causal is not None:
                causal = bool(dfc_causal)
            else:
                causal = bool(types) and lt == SLIDING
            if layer_types is None or (use_swa and not any_sliding):
                sliding = bool(use_swa)
            else:
                sliding = lt == SLIDING
            layers.append(LayerSpec(i, lt, causal, sliding, window if sliding else None))
        if any(layer.sliding for layer in layers) and window_raw is None:
            errors.append(
                "ValueError: DFlash sliding attention requires a window size configured in "
                "dflash_config.swa_window_size or the top-level sliding_window."
            )
            if is_int(cfg.get("sliding_window")) and cfg.get("use_sliding_window") is not True:
                notes.append(
                    "the top-level sliding_window is dropped by transformers' Qwen3Config because "
                    "use_sliding_window is not true; put it in dflash_config.swa_window_size"
                )
        if len(types) < n_layers:
            notes.append(
                f"layer_types has {len(types)} entries for {n_layers} layers: transformers "
                "refuses to load it; missing entries are shown as full_attention"
            )
    num_sliding_types = sum(t == SLIDING for t in types)
    if 0 < num_sliding_types < len(types):
        v1_unsupported.append("mixed sliding/full dflash drafts")
    if arch in CANDIDATE_HEAD_ARCHITECTURES or (
        isinstance(archs, list) and set(archs) & set(CANDIDATE_HEAD_ARCHITECTURES)
    ):
        v1_unsupported.append("DFlash candidate-head drafts")
    if runner == "v1" and v1_unsupported:
        errors.append(
            V1_UNSUPPORTED + ", ".join(v1_unsupported) + " (relaunch with "
            "VLLM_USE_V2_MODEL_RUNNER=1 on a GPU build)"
        )

    block, block_src = None, None
    for src, value in (
        ("dflash_config.block_size", dfc.get("block_size")),
        ("block_size", cfg.get("block_size")),
    ):
        if is_int(value):
            block, block_src = value, src
            break

    def _int(key: str) -> int | None:
        v = cfg.get(key)
        return v if is_int(v) else None

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
        runner=runner,
        mask_token_raw=mask_raw,
        fc_num_features=fc_features,
        use_aux_hidden_state=use_aux,
        sliding_window=window,
        sliding_window_source=window_src,
        transformers_layer_types=(
            [t for t in types if isinstance(t, str)] if isinstance(layer_types, list) else None
        ),
        transformers_errors=t_errors,
    )


def target_text_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """A target config's language-model part (multimodal configs nest it under text_config)."""
    text = cfg.get("text_config")
    return text if isinstance(text, dict) else cfg


def is_finite_number(x: Any) -> TypeGuard[int | float]:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
