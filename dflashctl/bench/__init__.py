"""`dflashctl bench`: the matched benchmark of the DFlash2 write-up, on running servers.

Same prompts (the code / English prose / Chinese→English fixtures), batch one, greedy, a warm-up
per target, repeated measurements interleaved across targets (A B A B …), the median decode
tokens/s excluding the first token, prefill and warm-up; acceptance from each request's
spec-decode window; an optional concurrency sweep.

Modules: `targets` (TARGET… → URLs), `run` (`run_bench` and the report), `load` (the
concurrency sweep), `render` and `plot` (the only ones that print or draw). docs/bench.md is the
reference.
"""

from __future__ import annotations

from dflashctl.bench.run import BenchOptions, BenchReport, run_bench

__all__ = ["BenchOptions", "BenchReport", "run_bench"]
