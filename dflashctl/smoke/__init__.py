"""`dflashctl smoke`: real chat requests at temperature 0, checked answers, and the speculative
metrics of exactly that window, judged with `dflashctl metrics`' alarms.

Modules: `client` (HTTP + SSE, timing), `checks` (one row per check), `spec` (the counters or
log lines for the smoke window), `run` (`run_smoke`), `render` (the only one that prints).
docs/smoke.md is the reference.
"""

from __future__ import annotations

from dflashctl.smoke.run import SmokeOptions, SmokeReport, run_smoke

__all__ = ["SmokeOptions", "SmokeReport", "run_smoke"]
