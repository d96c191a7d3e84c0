"""Findings from what an engine said at start-up, not from its acceptance figures: vLLM's
warning that prefix-cache reuse is off for a DFlash drafter on a hybrid target (vllm#57032)."""

from __future__ import annotations

from dflashctl.metrics.thresholds import Thresholds
from dflashctl.metrics.window import Cause, Finding, MetricsState


def startup_warnings(state: MetricsState, th: Thresholds) -> list[Finding]:
    return _reuse_off(state, th)


def _reuse_off(state: MetricsState, th: Thresholds) -> list[Finding]:
    """vLLM said at start-up that prefix reuse is off with this drafter (vllm#57032)."""
    m = state.prefix_reuse_off
    if m is None:
        return []
    when = f" at {m.timestamp:%m-%d %H:%M:%S}" if m.timestamp else ""
    return [
        Finding(
            "prefix_reuse_disabled",
            "warning",
            f"vLLM switched prefix-cache reuse off at start-up{when}: no KV cache group was "
            "identified as the DFlash drafter's, so every group is treated as the drafter's "
            "(vllm#57032, open): every turn re-prefills its whole prompt, and long multi-turn "
            "prompts lose the cache's speed-up whatever the acceptance",
            [
                Cause(
                    "a hybrid (Mamba / GDN) target with DFlash on an affected vLLM: "
                    "_uses_trailing_mtp_layers() handles only `mtp`; no fix upstream yet",
                    f"grep -n 'no KV cache group' {th.source}; compare TTFT with the drafter "
                    "off (dflashctl bench)",
                )
            ],
        )
    ]
