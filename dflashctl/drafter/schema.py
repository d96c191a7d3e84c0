"""The JSON types config.json must have before any rule reads it (one clear error, not a
traceback)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dflashctl.drafter.config import is_int
from dflashctl.errors import InputError

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
