"""Spec-decode metrics: parse engine logs and /metrics pages, judge acceptance, raise alarms.

Modules: `window` (data model), `log_parse` (one line → window), `scanner` (streaming a log of
any size), `prom` (Prometheus scrapes), `thresholds` (what the rules judge against), `alarms`
(the rules), `causes` (likely causes, ranked by the profile's shape and the stated method),
`expected` (the drafter's expected range), `analyze` (entry points), `follow` (live mode),
`spec_probe` (smoke's per-request window). Rendering lives with the command
(`commands/metrics`). docs/metrics.md is the reference.
"""

from __future__ import annotations

from dflashctl.metrics.analyze import MetricsOptions, analyze_chunks, analyze_source
from dflashctl.metrics.window import Cause, Finding, MetricsReport, MetricsState, SpecWindow

__all__ = [
    "Cause",
    "Finding",
    "MetricsOptions",
    "MetricsReport",
    "MetricsState",
    "SpecWindow",
    "analyze_chunks",
    "analyze_source",
]
