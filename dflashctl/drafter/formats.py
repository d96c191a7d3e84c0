"""Drafter config formats: z-lab's native `config.json` and vLLM's `speculators` format, read as
one native view so that every verify-config rule judges both.

A speculators config (`speculators_model_type: dflash | dflash2 | dspark`) keeps the drafter's
transformer in `transformer_layer_config` and names the target layers it reads as
`aux_hidden_state_layer_ids`, in the runner's *capture* indexing (index i = the input of target
layer i). z-lab's `target_layer_ids` index layer *outputs*; vLLM maps one to the other by
subtracting one (`update_dflash` / `update_dspark` in
vllm/transformers_utils/configs/speculators/algos.py, since vllm-project/vllm#40727). That
shift is `SPECULATORS_AUX_SHIFT`, here and nowhere else. K comes from
`speculators_config.proposal_methods[0].speculative_tokens`. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dflashctl.drafter.config import is_int

SPECULATORS_AUX_SHIFT = 1  # target_layer_ids = aux_hidden_state_layer_ids - 1 (vLLM #40727)
SPECULATORS_TYPES = {
    "dflash": "DFlashDraftModel",
    "dflash2": "DFlash2DraftModel",
    "dspark": "Qwen3DSparkModel",
}
DFLASH2_KEYS = ("conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k")


@dataclass
class Reading:
    """The native view of a config and what reading it found."""

    native: dict[str, Any]
    format: str  # "z-lab native" | "speculators dflash" | …
    problems: list[tuple[str, str, Any, Any, str]] = field(default_factory=list)
    # (check name, status, found, expected, hint), added to verify-config's rows
    notes: list[tuple[str, str, Any, str]] = field(
        default_factory=list
    )  # (name, status, found, hint)
    speculative_tokens: int | None = None

    @property
    def is_speculators(self) -> bool:
        return self.format.startswith("speculators")


def read_format(cfg: dict[str, Any]) -> Reading:
    """The native view of `cfg` (itself when it is native)."""
    kind = cfg.get("speculators_model_type")
    if kind is None:
        return Reading(cfg, "z-lab native")
    return _speculators(cfg, str(kind))


def _speculators(cfg: dict[str, Any], kind: str) -> Reading:
    layer = cfg.get("transformer_layer_config")
    native: dict[str, Any] = dict(layer) if isinstance(layer, dict) else {}
    r = Reading(native, f"speculators {kind}")
    if kind not in SPECULATORS_TYPES:
        r.problems.append(
            (
                "speculators_model_type",
                "invalid",
                kind,
                sorted(SPECULATORS_TYPES),
                "not a DFlash-family speculators type: vLLM loads it as something else",
            )
        )
    if not isinstance(layer, dict):
        r.problems.append(
            (
                "transformer_layer_config",
                "missing",
                layer,
                "an object",
                "vLLM refuses a speculators config without it (validate_speculators_config)",
            )
        )
    native["architectures"] = [SPECULATORS_TYPES.get(kind, "DFlashDraftModel")]
    aux = cfg.get("aux_hidden_state_layer_ids")
    mask = cfg.get("mask_token_id")
    dfc: dict[str, Any] = {}
    if mask is not None:
        dfc["mask_token_id"] = mask
    else:
        r.problems.append(
            (
                "mask_token_id",
                "missing",
                None,
                "the target's mask token id",
                "required by vLLM's speculators loader (a KeyError at start-up)",
            )
        )
    if isinstance(aux, list) and aux and all(is_int(i) for i in aux):
        target_ids = [i - SPECULATORS_AUX_SHIFT for i in aux]
        dfc["target_layer_ids"] = target_ids
        native["eagle_aux_hidden_state_layer_ids"] = list(aux)
        r.notes.append(
            (
                "aux_hidden_state_layer_ids",
                "ok",
                aux,
                f"capture indices; vLLM reads target_layer_ids {target_ids} "
                f"(each minus {SPECULATORS_AUX_SHIFT}, vllm#40727)",
            )
        )
    else:
        r.problems.append(
            (
                "aux_hidden_state_layer_ids",
                "missing" if aux is None else "invalid",
                aux,
                "a list of target layer indices",
                "required by vLLM's speculators loader: without it the drafter has no "
                "target features",
            )
        )
    sample = cfg.get("sample_from_anchor", False)
    dfc["sample_from_anchor"] = sample
    for key in ("draft_vocab_size", "target_hidden_size", "block_size"):
        if cfg.get(key) is not None:
            native[key] = cfg[key]
    if kind == "dflash2":
        for key in DFLASH2_KEYS:
            if cfg.get(key) is not None:
                dfc[key] = cfg[key]
        if sample:
            r.problems.append(
                (
                    "sample_from_anchor",
                    "mismatch",
                    sample,
                    False,
                    "DFlash2 requires sample_from_anchor false (vllm#52816, "
                    "speculators#1006): the anchor is the bonus token",
                )
            )
    if kind == "dspark":
        native["target_layer_ids"] = dfc.pop("target_layer_ids", None)
        for key in ("markov_rank", "markov_head_type", "enable_confidence_head"):
            if cfg.get(key) is not None:
                native[key] = cfg[key]
    native["dflash_config"] = dfc
    r.speculative_tokens = _proposal_tokens(cfg, r)
    block = native.get("block_size")
    k = r.speculative_tokens
    if is_int(k) and is_int(block) and k > block - 1:
        r.problems.append(
            (
                "speculative_tokens",
                "mismatch",
                k,
                f"≤ {block - 1}",
                f"block_size {block} drafts at most {block - 1} tokens (the anchor "
                "takes a slot): speculators configs saved K = block size by mistake "
                "(speculators#456)",
            )
        )
    return r


def _proposal_tokens(cfg: dict[str, Any], r: Reading) -> int | None:
    spec = cfg.get("speculators_config")
    methods = spec.get("proposal_methods") if isinstance(spec, dict) else None
    first = methods[0] if isinstance(methods, list) and methods else None
    k = first.get("speculative_tokens") if isinstance(first, dict) else None
    if not is_int(k) or k < 1:
        r.problems.append(
            (
                "speculators_config",
                "missing" if k is None else "invalid",
                k,
                "proposal_methods[0].speculative_tokens ≥ 1",
                "vLLM takes num_speculative_tokens from it and refuses the config without it",
            )
        )
        return None
    return k
