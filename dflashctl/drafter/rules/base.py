"""verify-config's statuses and JSON keys for its rows (`dflashctl.report.Row`), and the context
every rule writes into (`Ctx`: the config, the registry entry, the target, the header, the
engine's reading)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from dflashctl.drafter.config import (
    Resolved,
    build_target_layer_ids,
)
from dflashctl.drafter.header import Header
from dflashctl.drafter.registry import DrafterEntry
from dflashctl.report import Row

STATUSES = ("ok", "mismatch", "missing", "invalid", "warning")  # levels: dflashctl/report.py
# verify-config's documented JSON keys (SPEC.md) -> the Row attribute each shows
JSON_KEYS = {
    "field": "name",
    "status": "status",
    "found": "found",
    "expected": "expected",
    "hint": "hint",
}
ENGINES = ("vllm", "sglang", "local")
DFLASH2_REQUIRED = ("conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k")
V2_HINT = (
    "needs vLLM's V2 model runner (VLLM_USE_V2_MODEL_RUNNER=1; 0.32 picks V2 by default only "
    "where Triton is available, so never on the CPU build)"
)


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def runs(types: list[str] | tuple[str, ...]) -> str:
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


def evenly_spaced(ids: list[int]) -> bool:
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
    if evenly_spaced(found):
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


@dataclass
class Ctx:
    cfg: dict[str, Any]
    entry: DrafterEntry | None
    target: dict[str, Any] | None
    header: Header | None
    engine: str
    n_target: int | None
    n_target_source: str | None
    r: Resolved  # the engine's reading (vLLM: V1 runner, the one with the traps)
    r_v2: Resolved
    checks: list[Row] = field(default_factory=list)
    max_model_len: int | None = None  # the serving context asked for (--max-model-len)
    target_thinks: bool | None = None  # the target's chat template thinks unless told not to

    def add(
        self,
        name: str,
        status: str,
        found: Any = None,
        expected: Any = None,
        hint: str | None = None,
    ) -> None:
        assert status in STATUSES, status
        self.checks.append(Row(name, status, found, expected, hint))

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
        if expected is None and key.startswith("target."):
            expected = getattr(self.entry.target, key.removeprefix("target."), None)
        elif expected is None:
            expected = getattr(self.entry, key, None)
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
