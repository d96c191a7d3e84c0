"""Spec-decode metrics: parse engine logs and /metrics pages, judge acceptance, raise alarms.

Modules: `window` (data model), `log_parse` (one line → window), `scanner` (streaming a log of
any size), `prom` (Prometheus scrapes), `alarms` (rules and likely causes), `analyze` (entry
points), `follow` (live mode), `render` and `plot` (output). docs/metrics.md is the reference.
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
