"""Every finding the alarm rules give, whole: kind, severity, message and the causes in order.

One table-driven case per path through dflashctl/metrics/alarms.py (collapse and its variants,
the large-batch exemption, the cliff, the loop, crashes, the expected range, decay, weak later
positions, stale and restart, the no-window findings), each asserted on its exact text, plus
the numeric edges of each rule (at, just under, just over). The causes are named by the
function of metrics/causes.py that wrote them (a method's own causes by their first words), so
a case fails when a rule picks, drops or reorders a cause. Real states, real rules, no stand-ins.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from support.windows import T0, win

from dflashctl.metrics import causes as C
from dflashctl.metrics.alarms import _duration, _int_or_none, estimate_interval, evaluate
from dflashctl.metrics.thresholds import Thresholds
from dflashctl.metrics.window import Cause, Expected, Finding, Marker, MetricsState, SpecWindow


def st(windows: list[SpecWindow], **kw: object) -> MetricsState:
    return MetricsState(
        source="LOG", kind="log", engine="vllm", windows=windows, total_windows=len(windows), **kw
    )  # type: ignore[arg-type]


def cause_names(th: Thresholds, k: int | None, useful: int | None) -> dict[Cause, str]:
    """Each cause the rules can name, keyed to the function of causes.py that writes it."""
    named = {
        "mismatch": C.cause_mismatch(th),
        "swa": C.cause_swa(th),
        "thinking": C.cause_thinking(th),
        "quant": C.cause_quant(th),
        "revision": C.cause_revision(th),
        "weak": C.cause_weak(th),
        "long_context": C.cause_long_context(th),
        "drift": C.cause_drift(th),
        "workload": C.cause_workload(th),
        "mask": C.cause_mask(th),
        "rope": C.cause_rope(th),
        "layer_types": C.cause_layer_types(th),
        "block": C.cause_block(th, k),
        "known_defects": C.cause_known_defects(th),
        "wiring": C.cause_wiring(th),
    }
    if useful is not None:
        named[f"weak({useful})"] = C.cause_weak(th, useful)
    return {c: n for n, c in named.items()}


def summary(findings: list[Finding], th: Thresholds, k: int | None = 3, useful: int | None = None):
    names = cause_names(th, k, useful)

    def label(c: Cause) -> str:
        return names.get(c) or f"{c.cause} | {c.check}"

    return [(f.kind, f.severity, f.message, [label(c) for c in f.likely_causes]) for f in findings]


DEFAULT = Thresholds()
URL = Thresholds(url="http://h:8000/metrics", source="srv.log")
REG = Thresholds(expected_min=3.16, expected_max=7.87, drafter="qwen3-8b-dflash-b16")

CLIFF15 = [0.2] + [0.0] * 14
GRADUAL8 = [0.82, 0.41, 0.12, 0.03, 0.01, 0.005, 0.0, 0.0]
CRASH = Marker(500, "  RuntimeError: CUDA error: an illegal memory access  ", T0 + timedelta(0, 60))
OOM = Marker(500, "torch.OutOfMemoryError: CUDA out of memory", None)
BUSY = Marker(10**6, "Engine 000: Running: 4 reqs", None)


def _decay(vals: list[float], **kw: object) -> list[SpecWindow]:
    return [win(v, i=i, **kw) for i, v in enumerate(vals)]  # type: ignore[arg-type]


def _serial(vals: list[float]) -> list[SpecWindow]:
    ws = _decay(vals)
    for i, w in enumerate(ws):
        w.running_reqs, w.prompt_throughput = 1, 40.0 if i in (0, 3) else 0.0
    return ws


def _stale(gap_s: float, n: int = 5, **kw: object) -> MetricsState:
    ws = [win(2.5, i=i) for i in range(n)]
    newest = Marker(10**6, "newest", T0 + timedelta(seconds=10 * (n - 1) + gap_s))
    return st(ws, busy_after_last_window=BUSY, newest_line=newest, **kw)


def _batch(ws: list[SpecWindow], running: int, **kw: object) -> list[SpecWindow]:
    ws[-1].running_reqs = running
    ws[-1].mean_acceptance_length = 1.0
    return ws


# name -> (state, thresholds, K for cause_block, `useful` for cause_weak)
Case = tuple[Callable[[], MetricsState], Thresholds, int | None, int | None]
CASES: dict[str, Case] = {
    "collapse, a cliff at 2": (lambda: st([win(1.2, rate=0.03, k=15, pp=CLIFF15)]), URL, 15, 1),
    "collapse, every draft rejected": (
        lambda: st([win(1.0, rate=0.0, pp=[0.0, 0.0, 0.004])]),
        DEFAULT,
        3,
        None,
    ),
    "collapse, gradual, no timestamp": (
        lambda: st(
            [win(1.3, rate=0.06, k=8, pp=[0.3, 0.12, 0.05, 0.02, 0.01, 0, 0, 0], raw=False)]
        ),
        DEFAULT,
        8,
        None,
    ),
    "collapse, too few tokens": (
        lambda: st([win(1.05, rate=0.01, drafted=150, k=1, pp=[0.05])]),
        DEFAULT,
        1,
        None,
    ),
    "collapse, too few drafts": (
        lambda: st([win(1.1, rate=0.01, drafted=290, k=10, pp=[0.1] * 10)]),
        DEFAULT,
        10,
        None,
    ),
    "collapse by rate, no tau": (lambda: st([win(None, rate=0.049, k=15)]), DEFAULT, 15, None),
    "collapse, cold start": (
        lambda: st([win(1.03, rate=0.002)], latest_launch_has_startup=True),
        DEFAULT,
        3,
        None,
    ),
    "collapse, eagle": (
        lambda: st([win(1.1, rate=0.03, pp=[0.05, 0.03, 0.02])], spec_config={"method": "eagle3"}),
        URL,
        3,
        None,
    ),
    "collapse, ngram V0 draft_model": (
        lambda: st([win(1.1, rate=0.03)], spec_config={"draft_model": "[ngram]"}),
        DEFAULT,
        3,
        None,
    ),
    "collapse, eagle named but --drafter given": (
        lambda: st([win(1.1, rate=0.03)], spec_config={"method": "eagle"}),
        Thresholds(drafter="demo"),
        3,
        None,
    ),
    "batch off, judged on an earlier window": (
        lambda: st(_batch([win(2.5, i=0, engine="sglang"), win(2.5, i=1, engine="sglang")], 16)),
        URL,
        3,
        None,
    ),
    "vLLM at 1.00 without a batch limit collapses": (
        lambda: st(_batch([win(2.5, i=0), win(2.5, i=1)], 40)),
        DEFAULT,
        3,
        None,
    ),
    "batch off, no window on": (
        lambda: st(_batch([win(2.5, i=0, engine="sglang")], 16)),
        DEFAULT,
        3,
        None,
    ),
    "batch off, the earlier window unstamped and collapsed": (
        lambda: st(
            _batch(
                [
                    win(1.1, rate=0.02, i=0, raw=False, engine="sglang"),
                    win(2.5, i=1, engine="sglang"),
                ],
                32,
            )
        ),
        DEFAULT,
        3,
        None,
    ),
    "batch off at vLLM's limit": (
        lambda: st(
            _batch([win(2.5, i=0), win(2.5, i=1)], 8),
            spec_config={"disable_by_batch_size": "8"},
        ),
        DEFAULT,
        3,
        None,
    ),
    "cliff at 3, dflash": (
        lambda: st([win(2.2, rate=0.2, k=6, pp=[0.8, 0.4, 0.0, 0.0, 0.0, 0.0])]),
        URL,
        6,
        2,
    ),
    "cliff, n-gram warns": (
        lambda: st(
            [win(2.2, rate=0.2, k=6, pp=[0.8, 0.4, 0.0, 0.0, 0.0, 0.0])],
            spec_config={"method": "ngram"},
        ),
        DEFAULT,
        6,
        2,
    ),
    "cliff, too few tokens": (
        lambda: st([win(2.2, rate=0.2, drafted=180, k=6, pp=[0.8, 0.4, 0.0, 0.0, 0.0, 0.0])]),
        DEFAULT,
        6,
        2,
    ),
    "cliff with a shortfall": (
        lambda: st(
            [win(2.2, rate=0.2, k=6, pp=[0.8, 0.4, 0.0, 0.0, 0.0, 0.0], i=i) for i in (0, 1)]
        ),
        REG,
        6,
        2,
    ),
    "loop, every position": (
        lambda: st([win(4.0, rate=1.0, pp=[1.0, 0.996, 0.995])]),
        URL,
        3,
        None,
    ),
    "loop, rate only": (
        lambda: st([win(4.0, rate=0.995, pp=[])]),
        DEFAULT,
        None,
        None,
    ),
    "crash after the last window": (
        lambda: st([win(2.5)], crash=CRASH),
        URL,
        3,
        None,
    ),
    "crash, out of memory, last window unstamped": (
        lambda: st([win(2.5, raw=False)], crash=OOM),
        DEFAULT,
        3,
        None,
    ),
    "crash, no window": (lambda: st([], crash=OOM), DEFAULT, 3, None),
    "crashes between windows": (
        lambda: st([win(2.5)], crashes_between=[OOM, CRASH]),
        DEFAULT,
        3,
        None,
    ),
    "one crash between windows": (
        lambda: st([win(2.5)], crashes_between=[OOM]),
        DEFAULT,
        3,
        None,
    ),
    "below the registry range": (lambda: st([win(3.05, i=0), win(3.05, i=1)]), REG, 3, None),
    "below --min and the range": (
        lambda: st([win(1.52, i=0), win(1.52, i=1)]),
        Thresholds(min_acceptance_length=1.6, expected_min=3.0, drafter="demo"),
        3,
        None,
    ),
    "below the floor within the noise": (
        lambda: st(
            [win(1.52, drafted=210, k=15, pp=[0.4, 0.1, 0.02] + [0.0] * 12, i=i) for i in range(2)]
        ),
        Thresholds(expected_min=1.57, drafter="demo"),
        15,
        2,
    ),
    "below the floor within the noise, position 1 weak": (
        lambda: st(
            [win(1.52, drafted=210, k=15, pp=[0.39, 0.1, 0.02] + [0.0] * 12, i=i) for i in range(2)]
        ),
        Thresholds(expected_min=1.57, drafter="demo"),
        15,
        1,
    ),
    "below, cold start": (
        lambda: st([win(2.52)], latest_launch_has_startup=True),
        Thresholds(min_acceptance_length=2.7),
        3,
        None,
    ),
    "below, no mean": (
        lambda: st([win(None, rate=0.5)]),
        Thresholds(min_acceptance_length=2.0),
        3,
        None,
    ),
    "below, mtp": (
        lambda: st([win(2.0, i=0), win(2.0, i=1)], spec_config={"method": "deepseek_mtp"}),
        Thresholds(min_acceptance_length=2.5),
        3,
        None,
    ),
    "decay": (lambda: st(_decay([3.0, 2.9, 2.7, 2.4, 2.1, 1.9])), URL, 3, None),
    "decay, long context cliff": (
        lambda: st(
            [win(4.2, i=i, k=5, pp=[0.9, 0.8, 0.6, 0.5, 0.4]) for i in range(3)]
            + [win(2.0, i=3 + i, k=5, pp=[0.5, 0.4, 0.0, 0.0, 0.0]) for i in range(3)]
        ),
        DEFAULT,
        5,
        2,
    ),
    "decay of the rate": (
        lambda: st(
            [
                win(None, rate=r, drafted=None, i=i, raw=False)
                for i, r in enumerate([0.6, 0.6, 0.5, 0.4, 0.3, 0.3])
            ]
        ),
        DEFAULT,
        3,
        None,
    ),
    "decay, serial requests": (
        lambda: st(_serial([3.0, 2.9, 2.7, 2.4, 2.1, 1.9])),
        DEFAULT,
        3,
        None,
    ),
    "weak later positions": (lambda: st([win(2.4, rate=0.18, k=8, pp=GRADUAL8)]), URL, 8, 4),
    "weak later positions, medusa": (
        lambda: st([win(2.4, rate=0.18, k=8, pp=GRADUAL8)], spec_config={"method": "medusa"}),
        DEFAULT,
        8,
        4,
    ),
    "a thin cliff": (
        lambda: st([win(2.2, rate=0.1, drafted=450, k=15, pp=[0.9, 0.3] + [0.0] * 13)]),
        DEFAULT,
        15,
        2,
    ),
    "stale, an earlier launch": (
        lambda: st(
            [win(2.5)], startup_after_last_window=Marker(9, " Starting vLLM API server ", T0)
        ),
        URL,
        3,
        None,
    ),
    "restart while following": (
        lambda: st([win(2.5)], startup_after_last_window=Marker(9, "Starting", None)),
        Thresholds(follow=True),
        3,
        None,
    ),
    "metrics stopped": (lambda: _stale(31), URL, 3, None),
    "metrics stopped, minutes": (lambda: _stale(3000), DEFAULT, 3, None),
    "metrics stopped, hours": (lambda: _stale(7200), Thresholds(interval=60), 3, None),
    "spec off, config": (lambda: st([], spec_config={"enabled": False}), DEFAULT, 3, None),
    "spec off, decode lines": (lambda: st([], non_spec_decode_lines=3), URL, 3, None),
    "spec off, prometheus": (
        lambda: MetricsState("P", "prometheus", "vllm", [], 0, spec_config={"enabled": False}),
        DEFAULT,
        3,
        None,
    ),
    "figures not recognised": (
        lambda: st([], figure_lines=["x" * 130, "y"], engine_hint="TensorRT-LLM"),
        URL,
        3,
        None,
    ),
    "figures not recognised, no hint": (lambda: st([], figure_lines=["acc 3"]), DEFAULT, 3, None),
    "unreadable lines": (lambda: st([], skipped_lines=4), DEFAULT, 3, None),
    "no metrics": (lambda: st([]), URL, 3, None),
    "no metrics, prometheus": (
        lambda: MetricsState("P", "prometheus", "vllm", [], 0),
        DEFAULT,
        3,
        None,
    ),
    "implausible": (
        lambda: st([win(2.5, i=0), win(70.0, i=1), win(2.5, rate=2.5, i=2)]),
        DEFAULT,
        3,
        None,
    ),
    "two streams": (
        lambda: st([win(1.1, rate=0.02, stream="engine 0"), win(2.5, stream="engine 1")]),
        DEFAULT,
        3,
        None,
    ),
    "prefix cache poisons acceptance": (
        lambda: st(
            [win(3.0, i=i, prefix_cache_hit_rate=0.05) for i in range(2)]
            + [win(1.2, rate=0.03, i=2 + i, prefix_cache_hit_rate=0.5) for i in range(2)]
        ),
        DEFAULT,
        3,
        None,
    ),
    "collapse, sglang without a profile": (
        lambda: st([win(1.02, rate=0.0, drafted=None, engine="sglang", pp=[])]),
        DEFAULT,
        None,
        None,
    ),
    "collapse, dflash stated": (
        lambda: st([win(1.1, rate=0.02)], spec_config={"method": "dflash"}),
        DEFAULT,
        3,
        None,
    ),
    "collapse by rate at a 60 % limit": (
        lambda: st([win(None, rate=0.5, k=15)]),
        Thresholds(collapse_rate=0.6),
        15,
        None,
    ),
    "collapse, few tokens, drafts not counted": (
        lambda: st([win(1.05, rate=0.01, drafted=150, k=1, pp=[0.05], num_drafts=None)]),
        DEFAULT,
        1,
        None,
    ),
    "collapse warning beside a floor": (
        lambda: st([win(1.05, rate=0.01, drafted=150, k=1, pp=[0.05])]),
        Thresholds(min_acceptance_length=2.0),
        1,
        None,
    ),
    "collapse alarm beside a floor": (
        lambda: st([win(1.1, rate=0.02)]),
        Thresholds(min_acceptance_length=2.0),
        3,
        None,
    ),
    "collapse with weak later positions": (
        lambda: st([win(1.2, rate=0.05, k=4, pp=[0.5, 0.1, 0.02, 0.0])]),
        DEFAULT,
        4,
        None,
    ),
    "sglang at 1.00 without a running count": (
        lambda: st([win(1.0, rate=0.0, drafted=None, engine="sglang", pp=[])]),
        DEFAULT,
        None,
        None,
    ),
    "sglang at 1.004 with a large batch": (
        lambda: st([win(1.004, rate=0.0, drafted=None, engine="sglang", pp=[], running_reqs=40)]),
        DEFAULT,
        None,
        None,
    ),
    "cliff without drafted tokens": (
        lambda: st(
            [win(2.2, rate=0.2, k=6, pp=[0.8, 0.4, 0.0, 0.0, 0.0, 0.0], drafted_tokens=None)]
        ),
        DEFAULT,
        6,
        2,
    ),
    "cliff without a mean": (
        lambda: st([win(None, rate=0.2, k=6, pp=[0.8, 0.4, 0.0, 0.0, 0.0, 0.0])]),
        DEFAULT,
        6,
        2,
    ),
    "crash, a long line": (
        lambda: st([win(2.5)], crash=Marker(5, "E" * 300, None)),
        DEFAULT,
        3,
        None,
    ),
    "crash between, a long line, OutOfMemory only": (
        lambda: st([win(2.5)], crashes_between=[Marker(5, "torch.OutOfMemoryError " + "e" * 300)]),
        DEFAULT,
        3,
        None,
    ),
    "crash, CUDA out of memory only": (
        lambda: st([win(2.5)], crash=Marker(5, "RuntimeError: CUDA out of memory. Tried", None)),
        DEFAULT,
        3,
        None,
    ),
    "below --min above the registry floor": (
        lambda: st([win(1.52, i=0), win(1.52, i=1)]),
        Thresholds(min_acceptance_length=3.0, expected_min=2.0, drafter="demo"),
        3,
        None,
    ),
    "below, position 1 dead": (
        lambda: st([win(2.0, pp=[0.05, 0.0, 0.0], i=i) for i in (0, 1)]),
        Thresholds(min_acceptance_length=3.0),
        3,
        None,
    ),
    "below, every draft rejected": (
        lambda: st([win(2.0, pp=[0.0, 0.0, 0.0], i=i) for i in (0, 1)]),
        Thresholds(min_acceptance_length=3.0),
        3,
        None,
    ),
    "decay of the rate to zero": (
        lambda: st(
            [
                win(None, rate=r, drafted=None, i=i)
                for i, r in enumerate([0.4, 0.4, 0.4, 0.4, 0.0, 0.0])
            ]
        ),
        DEFAULT,
        3,
        None,
    ),
    "decay, the last third thin": (
        lambda: st(
            [
                win(v, drafted=d, k=1, pp=[0.5], i=i)
                for i, (v, d) in enumerate(
                    [(3.0, 150), (3.0, 150), (2.4, 1000), (2.4, 1000), (2.0, 50), (2.0, 50)]
                )
            ]
        ),
        DEFAULT,
        1,
        None,
    ),
    "decay at the ratio exactly": (
        lambda: st(_decay([2.5, 2.5, 2.5, 2.5, 2.0, 2.0])),
        DEFAULT,
        3,
        None,
    ),
    "decay, one instant": (
        lambda: st([win(v, i=0) for v in [3.0, 2.9, 2.7, 2.4, 2.1, 1.9]]),
        DEFAULT,
        3,
        None,
    ),
    "decay, the first window unstamped": (
        lambda: st(
            _decay([3.0, 2.9, 2.7, 2.4, 2.1, 1.9], timestamp=None)[:1]
            + _decay([3.0, 2.9, 2.7, 2.4, 2.1, 1.9])[1:]
        ),
        DEFAULT,
        3,
        None,
    ),
    "decay, a cliff from the first window to the last": (
        lambda: st(
            [win(4.2, i=0, k=5, pp=[0.9, 0.8, 0.6, 0.061, 0.07])]
            + [win(4.2, i=1 + i, k=5, pp=[0.9, 0.8, 0.0, 0.0, 0.0]) for i in range(2)]
            + [win(2.0, i=3 + i, k=5, pp=[0.5, 0.4, 0.3, 0.3, 0.3]) for i in range(2)]
            + [win(2.0, i=5, k=5, pp=[0.5, 0.4, 0.3, 0.02, 0.021])]
        ),
        DEFAULT,
        5,
        None,
    ),
    "decay, the first profile missing": (
        lambda: st(
            [win(4.2, i=0, k=5, pp=[])]
            + [
                win(v, i=1 + i, k=5, pp=[0.5, 0.4, 0.0, 0.0, 0.0])
                for i, v in enumerate([4.2, 4.2, 2.0, 2.0, 2.0])
            ]
        ),
        DEFAULT,
        5,
        None,
    ),
    "decay, the last profile missing": (
        lambda: st(
            [
                win(v, i=i, k=5, pp=[0.9, 0.8, 0.6, 0.5, 0.4])
                for i, v in enumerate([4.2, 4.2, 4.2, 2.0, 2.0])
            ]
            + [win(2.0, i=5, k=5, pp=[])]
        ),
        DEFAULT,
        5,
        None,
    ),
    "decay, profiles of other lengths": (
        lambda: st(
            [
                win(v, i=i, k=5, pp=[0.9, 0.8, 0.6, 0.5, 0.4])
                for i, v in enumerate([4.2, 4.2, 4.2, 2.0, 2.0])
            ]
            + [win(2.0, i=5, k=3, pp=[0.5, 0.0, 0.0])]
        ),
        DEFAULT,
        5,
        None,
    ),
    "decay, serial at two running": (
        lambda: st(
            [
                setattr(w, "running_reqs", 2 if w.timestamp_raw == "w4" else 1) or w
                for w in _serial([3.0, 2.9, 2.7, 2.4, 2.1, 1.9])
            ]
        ),
        DEFAULT,
        3,
        None,
    ),
    "decay, serial with a trickle of prefill": (
        lambda: st(
            [
                setattr(w, "prompt_throughput", 0.5 if w.timestamp_raw == "w3" else 0.0) or w
                for w in _serial([3.0, 2.9, 2.7, 2.4, 2.1, 1.9])
            ]
        ),
        DEFAULT,
        3,
        None,
    ),
    "weak positions at a 4.5 % near-zero": (
        lambda: st([win(2.4, rate=0.18, k=6, pp=[0.82, 0.41, 0.12, 0.09, 0.04, 0.0])]),
        Thresholds(weak_position_rate=0.045),
        6,
        4,
    ),
    "weak positions of three": (
        lambda: st([win(1.9, rate=0.3, k=3, pp=[0.8, 0.02, 0.0])]),
        Thresholds(cliff_drop=0.01),
        3,
        1,
    ),
    "weak positions after one useful": (
        lambda: st([win(1.9, rate=0.3, k=4, pp=[0.8, 0.02, 0.02, 0.02])]),
        Thresholds(cliff_drop=0.01),
        4,
        1,
    ),
    "weak positions, eagle": (
        lambda: st([win(2.4, rate=0.18, k=8, pp=GRADUAL8)], spec_config={"method": "eagle"}),
        DEFAULT,
        8,
        4,
    ),
    "weak positions, dflash stated": (
        lambda: st([win(2.4, rate=0.18, k=8, pp=GRADUAL8)], spec_config={"method": "dflash"}),
        DEFAULT,
        8,
        4,
    ),
    "a thin cliff, dflash stated": (
        lambda: st(
            [win(2.2, rate=0.1, drafted=450, k=15, pp=[0.9, 0.3] + [0.0] * 13)],
            spec_config={"method": "dflash"},
        ),
        DEFAULT,
        15,
        2,
    ),
    "a thin cliff, eagle": (
        lambda: st(
            [win(2.2, rate=0.1, drafted=450, k=15, pp=[0.9, 0.3] + [0.0] * 13)],
            spec_config={"method": "eagle"},
        ),
        DEFAULT,
        15,
        2,
    ),
    "a thin cliff seen by its draft count": (
        lambda: st([win(2.3, rate=0.1, drafted=180, k=6, pp=[0.9, 0.3, 0.025, 0.025, 0.0, 0.0])]),
        Thresholds(min_drafted_tokens=100),
        6,
        2,
    ),
    "stale, a long start-up line": (
        lambda: st([win(2.5)], startup_after_last_window=Marker(9, "S" * 200, None)),
        DEFAULT,
        3,
        None,
    ),
    "metrics stopped, a long busy line": (
        lambda: st(
            [win(2.5, i=i) for i in range(5)],
            busy_after_last_window=Marker(1, "B" * 200),
            newest_line=Marker(2, "n", T0 + timedelta(seconds=40 + 31)),
        ),
        DEFAULT,
        3,
        None,
    ),
    "metrics stopped, one window": (lambda: _stale(31, n=1), DEFAULT, 3, None),
    "one busy line after the last window": (
        lambda: _stale(300, busy_lines_after_last_window=1),
        DEFAULT,
        3,
        None,
    ),
    "two busy lines after the last window": (
        lambda: _stale(300, busy_lines_after_last_window=2),
        DEFAULT,
        3,
        None,
    ),
    "busy, the newest line unstamped": (
        lambda: st([win(2.5)], busy_after_last_window=BUSY, newest_line=Marker(2, "n", None)),
        DEFAULT,
        3,
        None,
    ),
    "busy, no newest line": (lambda: st([win(2.5)], busy_after_last_window=BUSY), DEFAULT, 3, None),
    "prefix reuse off at start-up": (
        lambda: st([win(2.5)], prefix_reuse_off=Marker(1, "no KV cache group", T0)),
        URL,
        3,
        None,
    ),
    "collapse, ngram V0 model": (
        lambda: st([win(1.1, rate=0.03)], spec_config={"model": "[ngram]"}),
        DEFAULT,
        3,
        None,
    ),
    "eagle stated, the drafter found by a lock file": (
        lambda: st(
            [win(1.1, rate=0.03)],
            spec_config={"method": "eagle"},
            expected=Expected("demo", 1.57, 4.24, "dflashctl.lock.json"),
        ),
        Thresholds(drafter="demo"),
        3,
        None,
    ),
    "eagle stated, the drafter named by --drafter": (
        lambda: st(
            [win(1.1, rate=0.03)],
            spec_config={"method": "eagle"},
            expected=Expected("demo", 1.57, 4.24, "--drafter"),
        ),
        Thresholds(drafter="demo"),
        3,
        None,
    ),
    "prefix cache and a decay": (
        lambda: st(
            [
                win(v, i=i, prefix_cache_hit_rate=h)
                for i, (v, h) in enumerate(
                    [(3.0, 0.0), (2.9, 0.0), (2.7, 0.0), (2.4, 0.5), (2.1, 0.5), (1.9, 0.5)]
                )
            ]
        ),
        DEFAULT,
        3,
        None,
    ),
    "prefix cache and a shortfall": (
        lambda: st(
            [
                win(v, i=i, prefix_cache_hit_rate=h)
                for i, (v, h) in enumerate([(3.0, 0.0), (3.0, 0.0), (2.0, 0.5), (2.0, 0.5)])
            ]
        ),
        Thresholds(min_acceptance_length=2.5),
        3,
        None,
    ),
    "prefix cache and a cliff": (
        lambda: st(
            [
                win(v, i=i, prefix_cache_hit_rate=h, k=6, pp=p)
                for i, (v, h, p) in enumerate(
                    [
                        (3.0, 0.0, [0.8, 0.6, 0.4, 0.2, 0.1, 0.1]),
                        (3.0, 0.0, [0.8, 0.6, 0.4, 0.2, 0.1, 0.1]),
                        (2.2, 0.5, [0.8, 0.4, 0.0, 0.0, 0.0, 0.0]),
                        (2.2, 0.5, [0.8, 0.4, 0.0, 0.0, 0.0, 0.0]),
                    ]
                )
            ]
        ),
        DEFAULT,
        6,
        2,
    ),
}


EXPECTED = {
    "collapse, a cliff at 2": [
        (
            "collapse",
            "alarm",
            "acceptance collapsed: mean acceptance length 1.20 (≤ 1.30) over 3000 drafted tokens "
            "at w0; position 1 accepts 20.0 %, positions 2-15 ~0 (a cliff: a config signature). "
            "The drafter is doing nothing useful and speculation costs time.",
            ["mask", "rope", "layer_types", "block", "known_defects", "weak(1)", "revision"],
        )
    ],
    "collapse, every draft rejected": [
        (
            "collapse",
            "alarm",
            "acceptance collapsed: mean acceptance length 1.00 (≤ 1.30) over 3000 drafted tokens "
            "at w0; position 1 accepts 0.0 %, every position ~0 (every draft rejected: a wiring or "
            "config fault). The drafter is doing nothing useful and speculation costs time.",
            ["wiring", "mask", "mismatch", "known_defects", "revision"],
        )
    ],
    "collapse, gradual, no timestamp": [
        (
            "collapse",
            "alarm",
            "acceptance collapsed: mean acceptance length 1.30 (≤ 1.30) over 3000 drafted tokens; "
            "position 1 accepts 30.0 %. The drafter is doing nothing useful and speculation costs "
            "time.",
            ["weak", "thinking", "mismatch", "quant", "revision"],
        )
    ],
    "collapse, too few tokens": [
        (
            "collapse",
            "warning",
            "acceptance looks collapsed (mean acceptance length 1.05 (≤ 1.30)) but only 150 tokens "
            "were drafted in 150 drafts at w0: too few to call it; send more traffic",
            ["mismatch", "swa", "thinking", "quant", "revision"],
        )
    ],
    "collapse, too few drafts": [
        (
            "collapse",
            "warning",
            "acceptance looks collapsed (mean acceptance length 1.10 (≤ 1.30)) but only 290 tokens "
            "were drafted in 29 drafts at w0: too few to call it; send more traffic",
            ["weak", "thinking", "mismatch", "quant", "revision"],
        )
    ],
    "collapse by rate, no tau": [
        (
            "collapse",
            "alarm",
            "acceptance collapsed: draft acceptance 4.9 % (< 5 %) over 3000 drafted tokens at w0; "
            "position 1 accepts 70.0 %. The drafter is doing nothing useful and speculation costs "
            "time.",
            ["weak", "thinking", "mismatch", "quant", "revision"],
        )
    ],
    "collapse, cold start": [
        (
            "collapse",
            "alarm",
            "acceptance collapsed: mean acceptance length 1.03 (≤ 1.30) over 3000 drafted tokens "
            "at w0; position 1 accepts 70.0 %. The drafter is doing nothing useful and speculation "
            "costs time. This is the first window after start-up, but a cold start reads ~10 % "
            "low, not this low.",
            ["weak", "thinking", "mismatch", "quant", "revision"],
        )
    ],
    "collapse, eagle": [
        (
            "collapse",
            "alarm",
            "acceptance collapsed (method EAGLE, as the log states): mean acceptance length 1.10 "
            "(≤ 1.30) over 3000 drafted tokens at w0; position 1 accepts 5.0 %. The drafter is "
            "doing nothing useful and speculation costs time.",
            [
                "the EAGLE head was trained for another target (base model, revision,"
                " chat template) "
                "or, for EAGLE-3, its auxiliary hidden-state layers or draft vocabulary"
                " map (d2t) do "
                "not match the served target | grep -oE 'speculative_config=[^ "
                "]+|speculative_[a-z_]+=[^,]+' srv.log; compare the head's config.json with the "
                "target's",
                "quant",
                "drift",
                "workload",
            ],
        )
    ],
    "collapse, ngram V0 draft_model": [
        (
            "collapse",
            "alarm",
            "acceptance collapsed (method n-gram, as the log states): mean acceptance length 1.10 "
            "(≤ 1.30) over 3000 drafted tokens at w0; position 1 accepts 70.0 %. The drafter is "
            "doing nothing useful and speculation costs time.",
            [
                "n-gram lookup accepts only when the output repeats the prompt (code edits, RAG, "
                "summaries); on open-ended chat it rarely matches. That is the"
                " workload, not a fault: "
                "switch n-gram off for it or use a trained drafter | dflashctl smoke URL (compare "
                "with a prompt that quotes its input)",
                "prompt_lookup_min / prompt_lookup_max or num_speculative_tokens too large for the "
                "repetition in this traffic | grep -oE 'speculative_config=[^ "
                "]+|speculative_[a-z_]+=[^,]+' LOG",
            ],
        )
    ],
    "collapse, eagle named but --drafter given": [
        (
            "collapse",
            "alarm",
            "acceptance collapsed: mean acceptance length 1.10 (≤ 1.30) over 3000 drafted tokens "
            "at w0; position 1 accepts 70.0 %. The drafter is doing nothing useful and speculation "
            "costs time.",
            ["weak", "thinking", "mismatch", "quant", "revision"],
        )
    ],
    "batch off, judged on an earlier window": [
        (
            "speculation_off_large_batch",
            "warning",
            "accept len 1.00 with 16 requests running at w1: speculation is switched off for large "
            "batches, not collapsed; judged on the latest window with speculation on (w0)",
            [
                "speculation disabled for large batches: the engine verifies no drafts while this "
                "many requests run, so each step commits exactly one token (accept len 1.00). "
                "Expected, not a fault; judge acceptance at smaller batches | grep -oE "
                "'speculative_config=[^ ]+|speculative_[a-z_]+=[^,]+' srv.log; then"
                " dflashctl smoke "
                "http://h:8000 (one request at a time)"
            ],
        )
    ],
    "vLLM at 1.00 without a batch limit collapses": [
        (
            "collapse",
            "alarm",
            "acceptance collapsed: mean acceptance length 1.00 (≤ 1.30) over 3000 drafted tokens "
            "at w1; position 1 accepts 70.0 %. The drafter is doing nothing useful and speculation "
            "costs time.",
            ["weak", "thinking", "mismatch", "quant", "revision"],
        )
    ],
    "batch off, no window on": [
        (
            "speculation_off_large_batch",
            "warning",
            "accept len 1.00 with 16 requests running at w0: speculation is switched off for large "
            "batches, not collapsed; no window with speculation on to judge",
            [
                "speculation disabled for large batches: the engine verifies no drafts while this "
                "many requests run, so each step commits exactly one token (accept len 1.00). "
                "Expected, not a fault; judge acceptance at smaller batches | grep -oE "
                "'speculative_config=[^ ]+|speculative_[a-z_]+=[^,]+' LOG; then"
                " dflashctl smoke URL "
                "(one request at a time)"
            ],
        )
    ],
    "batch off, the earlier window unstamped and collapsed": [
        (
            "speculation_off_large_batch",
            "warning",
            "accept len 1.00 with 32 requests running at w1: speculation is switched off for large "
            "batches, not collapsed; judged on the latest window with speculation on",
            [
                "speculation disabled for large batches: the engine verifies no drafts while this "
                "many requests run, so each step commits exactly one token (accept len 1.00). "
                "Expected, not a fault; judge acceptance at smaller batches | grep -oE "
                "'speculative_config=[^ ]+|speculative_[a-z_]+=[^,]+' LOG; then"
                " dflashctl smoke URL "
                "(one request at a time)"
            ],
        ),
        (
            "collapse",
            "alarm",
            "acceptance collapsed: mean acceptance length 1.10 (≤ 1.30) over 3000 drafted tokens; "
            "position 1 accepts 70.0 %. The drafter is doing nothing useful and speculation costs "
            "time.",
            ["weak", "thinking", "mismatch", "quant", "revision"],
        ),
    ],
    "batch off at vLLM's limit": [
        (
            "speculation_off_large_batch",
            "warning",
            "accept len 1.00 with 8 requests running at w1: speculation is switched off for large "
            "batches, not collapsed; judged on the latest window with speculation on (w0)",
            [
                "speculation disabled for large batches (disable_by_batch_size = 8): the engine "
                "verifies no drafts while this many requests run, so each step commits exactly one "
                "token (accept len 1.00). Expected, not a fault; judge acceptance at"
                " smaller batches "
                "| grep -oE 'speculative_config=[^ ]+|speculative_[a-z_]+=[^,]+' LOG;"
                " then dflashctl "
                "smoke URL (one request at a time)"
            ],
        )
    ],
    "cliff at 3, dflash": [
        (
            "position_cliff",
            "alarm",
            "positions 3-6 accept ~0 right after position 2 accepted 40.0 % over 3000 drafted "
            "tokens at w0: a cliff, not the gradual fall-off of a weak drafter; the config is the "
            "first suspect, and mean acceptance length 2.20 is what is left",
            ["layer_types", "block", "mask", "known_defects", "weak(2)"],
        )
    ],
    "cliff, n-gram warns": [
        (
            "position_cliff",
            "warning",
            "positions 3-6 accept ~0 right after position 2 accepted 40.0 % over 3000 drafted "
            "tokens at w0 (method n-gram, as the log states): a cliff, not the gradual fall-off of "
            "a weak drafter; the config is the first suspect, and mean acceptance length 2.20 is "
            "what is left",
            [
                "n-gram lookup accepts only when the output repeats the prompt (code edits, RAG, "
                "summaries); on open-ended chat it rarely matches. That is the"
                " workload, not a fault: "
                "switch n-gram off for it or use a trained drafter | dflashctl smoke URL (compare "
                "with a prompt that quotes its input)",
                "prompt_lookup_min / prompt_lookup_max or num_speculative_tokens too large for the "
                "repetition in this traffic | grep -oE 'speculative_config=[^ "
                "]+|speculative_[a-z_]+=[^,]+' LOG",
            ],
        )
    ],
    "cliff, too few tokens": [
        (
            "position_cliff",
            "warning",
            "positions 3-6 accept ~0 right after position 2 accepted 40.0 % over 180 drafted "
            "tokens at w0: a cliff, not the gradual fall-off of a weak drafter; the config is the "
            "first suspect, and mean acceptance length 2.20 is what is left (only 180 drafted "
            "tokens: too few to call it)",
            ["layer_types", "block", "mask", "known_defects", "weak(2)"],
        )
    ],
    "cliff with a shortfall": [
        (
            "position_cliff",
            "alarm",
            "positions 3-6 accept ~0 right after position 2 accepted 40.0 % over 3000 drafted "
            "tokens at w1: a cliff, not the gradual fall-off of a weak drafter; the config is the "
            "first suspect, and mean acceptance length 2.20 is what is left. Mean acceptance "
            "length 2.20 at w1 is below the expected 3.16-7.87 for qwen3-8b-dflash-b16 (3.16)",
            ["layer_types", "block", "mask", "known_defects", "weak(2)"],
        )
    ],
    "loop, every position": [
        (
            "possible_loop",
            "warning",
            "every drafted token was accepted at w0 (100 % at every position): the target is "
            "probably looping (repeating itself, e.g. a reasoning loop), which any drafter "
            "predicts perfectly. Read a response before trusting the speed-up",
            [
                "a generation loop: the output repeats (reasoning loop, max_tokens reached on "
                "repeated text); check finish_reason and the text | dflashctl smoke http://h:8000 "
                "(shows content and finish reason)"
            ],
        )
    ],
    "loop, rate only": [
        (
            "possible_loop",
            "warning",
            "every drafted token was accepted at w0 (100 % at every position): the target is "
            "probably looping (repeating itself, e.g. a reasoning loop), which any drafter "
            "predicts perfectly. Read a response before trusting the speed-up",
            [
                "a generation loop: the output repeats (reasoning loop, max_tokens reached on "
                "repeated text); check finish_reason and the text | dflashctl smoke URL (shows "
                "content and finish reason)"
            ],
        )
    ],
    "crash after the last window": [
        (
            "engine_crash",
            "alarm",
            "the engine crashed at 11-20 10:01:00, after the last metrics window (w0): "
            "'RuntimeError: CUDA error: an illegal memory access'. Nothing was served after it; "
            "the numbers below describe the engine before it died",
            [
                "the engine process died: the traceback just after this line names the"
                " error (a CUDA "
                "error, a failed assertion in the drafter, an unsupported shape) | grep"
                " -nE -A40 'hit "
                "an exception|encountered a fatal error|EngineDeadError|died unexpectedly|out of "
                "memory' srv.log | head -80",
                "an engine defect known for this version and drafter | dflashctl doctor"
                " --engine vllm "
                "--drafter DRAFTER_DIR",
            ],
        )
    ],
    "crash, out of memory, last window unstamped": [
        (
            "engine_crash",
            "alarm",
            "the engine crashed, after the last metrics window: 'torch.OutOfMemoryError: CUDA out "
            "of memory'. Nothing was served after it; the numbers below describe the engine before "
            "it died",
            [
                "out of GPU memory: the KV cache, CUDA graphs or the drafter did not fit at this "
                "batch or context size (lower --max-num-seqs or --max-model-len, or"
                " give the engine "
                "more of the GPU with --gpu-memory-utilization) | grep -nE -A40 'hit an "
                "exception|encountered a fatal error|EngineDeadError|died"
                " unexpectedly|out of memory' "
                "LOG | head -80"
            ],
        )
    ],
    "crash, no window": [
        (
            "engine_crash",
            "alarm",
            "the engine crashed, and no metrics window was logged: 'torch.OutOfMemoryError: CUDA "
            "out of memory'. Nothing was served after it; the numbers below describe the engine "
            "before it died",
            [
                "out of GPU memory: the KV cache, CUDA graphs or the drafter did not fit at this "
                "batch or context size (lower --max-num-seqs or --max-model-len, or"
                " give the engine "
                "more of the GPU with --gpu-memory-utilization) | grep -nE -A40 'hit an "
                "exception|encountered a fatal error|EngineDeadError|died"
                " unexpectedly|out of memory' "
                "LOG | head -80"
            ],
        ),
        (
            "no_metrics",
            "warning",
            "no speculative-decoding metrics in the log: nothing to judge",
            [
                "no traffic: engines log spec metrics only for intervals with drafted tokens | "
                "dflashctl smoke URL, then read again",
                "stats logging is off (vLLM --disable-log-stats) or this is not the engine's log | "
                "grep -cE 'SpecDecoding metrics|Decode batch' LOG",
            ],
        ),
    ],
    "crashes between windows": [
        (
            "engine_crash",
            "warning",
            "the engine crashed at 11-20 10:01:00 between metrics windows and was logging again "
            "afterwards (2 crashes between windows in this log): 'RuntimeError: CUDA error: an "
            "illegal memory access'",
            [
                "the engine process died: the traceback just after this line names the"
                " error (a CUDA "
                "error, a failed assertion in the drafter, an unsupported shape) | grep"
                " -nE -A40 'hit "
                "an exception|encountered a fatal error|EngineDeadError|died unexpectedly|out of "
                "memory' LOG | head -80",
                "an engine defect known for this version and drafter | dflashctl doctor"
                " --engine vllm "
                "--drafter DRAFTER_DIR",
            ],
        )
    ],
    "one crash between windows": [
        (
            "engine_crash",
            "warning",
            "the engine crashed between metrics windows and was logging again afterwards: "
            "'torch.OutOfMemoryError: CUDA out of memory'",
            [
                "out of GPU memory: the KV cache, CUDA graphs or the drafter did not fit at this "
                "batch or context size (lower --max-num-seqs or --max-model-len, or"
                " give the engine "
                "more of the GPU with --gpu-memory-utilization) | grep -nE -A40 'hit an "
                "exception|encountered a fatal error|EngineDeadError|died"
                " unexpectedly|out of memory' "
                "LOG | head -80"
            ],
        )
    ],
    "below the registry range": [
        (
            "below_expected",
            "alarm",
            "mean acceptance length 3.05 at w1 is below the expected 3.16-7.87 for "
            "qwen3-8b-dflash-b16 (3.16)",
            ["workload", "thinking", "mismatch", "quant"],
        )
    ],
    "below --min and the range": [
        (
            "below_expected",
            "alarm",
            "mean acceptance length 1.52 at w1 is below the expected 3.00+ for demo (3.00)",
            ["mismatch", "thinking", "workload", "quant"],
        )
    ],
    "below the floor within the noise": [
        (
            "below_expected",
            "warning",
            "mean acceptance length 1.50 at w1 is below the expected 1.57+ for demo (1.57), but "
            "within the noise of its 28 drafts (± 0.28): judge more windows or more traffic",
            ["layer_types", "block", "mask", "known_defects", "weak(2)"],
        )
    ],
    "below the floor within the noise, position 1 weak": [
        (
            "below_expected",
            "warning",
            "mean acceptance length 1.50 at w1 is below the expected 1.57+ for demo (1.57), but "
            "within the noise of its 28 drafts (± 0.28): judge more windows or more traffic",
            ["mask", "rope", "layer_types", "block", "known_defects", "weak(1)"],
        )
    ],
    "below, cold start": [
        (
            "cold_start",
            "warning",
            "cold start: the only window since start-up reads mean acceptance length 2.52 at w0, "
            "below --min-acceptance-length (2.70); the first window after start-up often reads "
            "lower (2.52 before settling at 2.7-3.0 in the field). Judge the next windows",
            ["workload", "thinking", "mismatch", "quant"],
        )
    ],
    "below, no mean": [
        (
            "below_expected",
            "warning",
            "cannot compare with --min-acceptance-length: this log format (vllm-0.10.2+) has no "
            "mean acceptance length",
            [],
        )
    ],
    "below, mtp": [
        (
            "below_expected",
            "alarm",
            "mean acceptance length 2.00 at w1 is below --min-acceptance-length (2.50)",
            [
                "num_speculative_tokens larger than the model's MTP layers "
                "(num_nextn_predict_layers): the extra steps reuse the last layer and"
                " accept little | "
                "grep -o '\"num_nextn_predict_layers\": *[0-9]*' TARGET_DIR/config.json",
                "workload",
                "the checkpoint's MTP layer is missing, not loaded or quantized differently (a "
                "quantized checkpoint that dropped or mis-scaled the MTP weights) | grep -niE "
                "'mtp|nextn' LOG | head",
            ],
        )
    ],
    "decay": [
        (
            "decay",
            "alarm",
            "acceptance is decaying: mean acceptance length fell from 2.95 (median of the first 2 "
            "windows) to 2.00 (median of the last 2) across 6 windows over 50 s",
            ["long_context", "drift", "workload"],
        )
    ],
    "decay, long context cliff": [
        (
            "decay",
            "alarm",
            "acceptance is decaying: mean acceptance length fell from 4.20 (median of the first 2 "
            "windows) to 2.00 (median of the last 2) across 6 windows over 50 s; positions 3-5 "
            "fell to ~0 (the long-context cliff pattern)",
            ["long_context", "drift", "workload"],
        ),
        (
            "weak_later_positions",
            "warning",
            "positions 3-5 accept ≤ 2 % while position 1 accepts 50.0 %: a weak or undertrained "
            "drafter, or K too large; num_speculative_tokens=2 may be as fast or faster (judge by "
            "throughput)",
            ["weak(2)"],
        ),
    ],
    "decay of the rate": [
        (
            "decay",
            "alarm",
            "acceptance is decaying: draft acceptance fell from 60.0 % (median of the first 2 "
            "windows) to 30.0 % (median of the last 2) across 6 windows over 50 s",
            ["long_context", "drift", "workload"],
        )
    ],
    "decay, serial requests": [
        (
            "decay",
            "warning",
            "acceptance is decaying: mean acceptance length fell from 2.95 (median of the first 2 "
            "windows) to 2.00 (median of the last 2) across 6 windows over 50 s; but requests ran "
            "one at a time and new ones were admitted since the first windows (prompt throughput > "
            "0), so this compares different requests: a change of workload reads the same",
            ["workload", "long_context", "drift"],
        )
    ],
    "weak later positions": [
        (
            "weak_later_positions",
            "warning",
            "positions 5-8 accept ≤ 2 % while position 1 accepts 82.0 %: a weak or undertrained "
            "drafter, or K too large; num_speculative_tokens=4 may be as fast or faster (judge by "
            "throughput)",
            ["weak(4)"],
        )
    ],
    "weak later positions, medusa": [
        (
            "weak_later_positions",
            "warning",
            "positions 5-8 accept ≤ 2 % while position 1 accepts 82.0 %: a weak or undertrained "
            "drafter, or K too large; num_speculative_tokens=4 may be as fast or faster (judge by "
            "throughput)",
            [
                "num_speculative_tokens larger than the number of Medusa heads, or"
                " heads trained for "
                "another target or revision | grep -oE 'speculative_config=[^ "
                "]+|speculative_[a-z_]+=[^,]+' LOG; compare with the heads' config.json "
                "(medusa_num_heads)",
                "quant",
                "workload",
            ],
        )
    ],
    "a thin cliff": [
        (
            "weak_later_positions",
            "warning",
            "positions 3-15 accept nothing after position 2 accepted 30.0 %, but only ≈9 drafts "
            "reached position 2: too few to tell a cliff (a config fault: sliding-window layers "
            "run as full attention, a wrong mask id) from a gradual fall (a weak drafter, K too "
            "large); read more windows, or check the config first",
            ["layer_types", "weak(2)"],
        )
    ],
    "stale, an earlier launch": [
        (
            "stale",
            "alarm",
            "the last metrics line at w0 belongs to an earlier launch: the engine started again at "
            "11-20 10:00:00 ('Starting vLLM API server') and has logged no metrics since. These "
            "numbers do not describe the running server",
            [
                "the server restarted (or this log is from an older run) and has had no traffic "
                "since; or it is still starting | dflashctl smoke http://h:8000, then read the "
                "current log again",
                "stats logging is off in the new launch (--disable-log-stats) | grep -c "
                "'disable.log.stats' srv.log",
            ],
        )
    ],
    "restart while following": [
        ("restart", "warning", "the engine started again; waiting for its first metrics window", [])
    ],
    "metrics stopped": [
        (
            "stale",
            "alarm",
            "metrics stopped: the newest metrics line at w4 is 31 s older than the log's newest "
            "line (11-20 10:01:11) while the engine is busy ('Engine 000: Running: 4 reqs'); "
            "windows came every ~10 s",
            [
                "with data parallelism or several API servers some engines' metrics"
                " lines go missing "
                "(vllm-ascend#10049); the /metrics counters are authoritative | dflashctl metrics "
                "http://h:8000/metrics",
                "requests are served without drafting (speculation disabled for them,"
                " or the drafter "
                "was dropped after an error) | grep -nE 'speculat|dflash' srv.log | tail",
            ],
        )
    ],
    "metrics stopped, minutes": [
        (
            "stale",
            "alarm",
            "metrics stopped: the newest metrics line at w4 is 50 min older than the log's newest "
            "line (11-20 10:50:40) while the engine is busy ('Engine 000: Running: 4 reqs'); "
            "windows came every ~10 s",
            [
                "with data parallelism or several API servers some engines' metrics"
                " lines go missing "
                "(vllm-ascend#10049); the /metrics counters are authoritative | dflashctl metrics "
                "URL/metrics",
                "requests are served without drafting (speculation disabled for them,"
                " or the drafter "
                "was dropped after an error) | grep -nE 'speculat|dflash' LOG | tail",
            ],
        )
    ],
    "metrics stopped, hours": [
        (
            "stale",
            "alarm",
            "metrics stopped: the newest metrics line at w4 is 2.0 h older than the log's newest "
            "line (11-20 12:00:40) while the engine is busy ('Engine 000: Running: 4 reqs'); "
            "windows came every ~60 s",
            [
                "with data parallelism or several API servers some engines' metrics"
                " lines go missing "
                "(vllm-ascend#10049); the /metrics counters are authoritative | dflashctl metrics "
                "URL/metrics",
                "requests are served without drafting (speculation disabled for them,"
                " or the drafter "
                "was dropped after an error) | grep -nE 'speculat|dflash' LOG | tail",
            ],
        )
    ],
    "spec off, config": [
        (
            "no_speculation",
            "alarm",
            "speculative decoding is off: the engine reports no speculative config",
            [
                "the speculative flags never reached the engine (vLLM `speculative_config=None`; "
                "SGLang without --speculative-algorithm) | grep -oE 'speculative_config=[^ "
                "]+|speculative_algorithm=[^,]+' LOG"
            ],
        )
    ],
    "spec off, decode lines": [
        (
            "no_speculation",
            "alarm",
            "speculative decoding is off: decode lines carry no `accept len`",
            [
                "the speculative flags never reached the engine (vLLM `speculative_config=None`; "
                "SGLang without --speculative-algorithm) | grep -oE 'speculative_config=[^ "
                "]+|speculative_algorithm=[^,]+' srv.log"
            ],
        )
    ],
    "spec off, prometheus": [
        (
            "no_speculation",
            "alarm",
            "speculative decoding is off: the server exports no spec-decode metrics",
            [
                "the speculative flags never reached the engine (vLLM `speculative_config=None`; "
                "SGLang without --speculative-algorithm) | grep -oE 'speculative_config=[^ "
                "]+|speculative_algorithm=[^,]+' LOG"
            ],
        )
    ],
    "figures not recognised": [
        (
            "format_not_recognised",
            "warning",
            "the log has acceptance figures in a format not recognised (it looks like "
            "TensorRT-LLM's): nothing was judged, which is not the same as healthy; first: "
            "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'",
            [
                "an engine or tool whose output dflashctl does not read yet (it reads vLLM's and "
                "SGLang's interval lines, vLLM's bench serve and offline summaries,"
                " llama.cpp's draft "
                "acceptance and statistics lines) | grep -m5 -iE 'accept' srv.log",
                "the engine's /metrics endpoint can be read instead | dflashctl metrics "
                "http://h:8000/metrics",
            ],
        )
    ],
    "figures not recognised, no hint": [
        (
            "format_not_recognised",
            "warning",
            "the log has acceptance figures in a format not recognised: nothing was judged, which "
            "is not the same as healthy; first: 'acc 3'",
            [
                "an engine or tool whose output dflashctl does not read yet (it reads vLLM's and "
                "SGLang's interval lines, vLLM's bench serve and offline summaries,"
                " llama.cpp's draft "
                "acceptance and statistics lines) | grep -m5 -iE 'accept' LOG",
                (
                    "the engine's /metrics endpoint can be read instead | dflashctl metrics"
                    " URL/metrics"
                ),
            ],
        )
    ],
    "unreadable lines": [
        (
            "unreadable_metrics",
            "warning",
            "4 metrics line(s) in the log could not be read (no acceptance rate, mean length or "
            "token counts found in them): nothing could be judged, which is not the same as "
            "healthy",
            [
                "a log format this version of dflashctl does not know (a fork, a new"
                " engine version, "
                "a logging config that rewrites lines) | grep -m3 -E 'SpecDecoding "
                "metrics|Speculative metrics|Decode batch' LOG"
            ],
        )
    ],
    "no metrics": [
        (
            "no_metrics",
            "warning",
            "no speculative-decoding metrics in the log: nothing to judge",
            [
                "no traffic: engines log spec metrics only for intervals with drafted tokens | "
                "dflashctl smoke http://h:8000, then read again",
                "stats logging is off (vLLM --disable-log-stats) or this is not the engine's log | "
                "grep -cE 'SpecDecoding metrics|Decode batch' srv.log",
            ],
        )
    ],
    "no metrics, prometheus": [
        (
            "no_metrics",
            "warning",
            "no speculative-decoding metrics between the two scrapes: nothing to judge",
            [
                "no traffic: engines log spec metrics only for intervals with drafted tokens | "
                "dflashctl smoke URL, then read again",
                "stats logging is off (vLLM --disable-log-stats) or this is not the engine's log | "
                "grep -cE 'SpecDecoding metrics|Decode batch' LOG",
            ],
        )
    ],
    "implausible": [
        (
            "implausible_metrics",
            "alarm",
            "2 metrics window(s) report impossible values, e.g. mean acceptance length 70 "
            "(possible: 1 to 65) at w1: the log is corrupt or edited; those windows were not "
            "judged",
            [],
        )
    ],
    "two streams": [
        (
            "collapse",
            "alarm",
            "[engine 0] acceptance collapsed: mean acceptance length 1.10 (≤ 1.30) over 3000 "
            "drafted tokens at w0; position 1 accepts 70.0 %. The drafter is doing nothing useful "
            "and speculation costs time.",
            ["weak", "thinking", "mismatch", "quant", "revision"],
        )
    ],
    "prefix cache poisons acceptance": [
        (
            "collapse",
            "alarm",
            "acceptance collapsed: mean acceptance length 1.20 (≤ 1.30) over 3000 drafted tokens "
            "at w3; position 1 accepts 70.0 %. The drafter is doing nothing useful and speculation "
            "costs time.",
            [
                "prefix caching: mean acceptance length 1.20 in the 2 windows whose"
                " prefix cache hit "
                "rate was ≥ 30% (median 50%) against 3.00 in the 2 below 10%. A DFlash/DSpark "
                "drafter's context is written only for tokens the target ran, so cached prefixes "
                "leave it reading stale entries (vllm#47930, z-lab/dflash#165) | relaunch with "
                "--no-enable-prefix-caching and read again: dflashctl metrics LOG",
                "weak",
                "thinking",
                "mismatch",
                "quant",
                "revision",
            ],
        )
    ],
    "collapse, sglang without a profile": [
        (
            "collapse",
            "alarm",
            "acceptance collapsed: mean acceptance length 1.02 (≤ 1.30) at w0. The drafter is "
            "doing nothing useful and speculation costs time.",
            ["thinking", "mismatch", "weak", "quant", "revision"],
        )
    ],
    "collapse, dflash stated": [
        (
            "collapse",
            "alarm",
            "acceptance collapsed: mean acceptance length 1.10 (≤ 1.30) over 3000 drafted tokens "
            "at w0; position 1 accepts 70.0 %. The drafter is doing nothing useful and speculation "
            "costs time.",
            ["weak", "thinking", "mismatch", "quant", "revision"],
        )
    ],
    "collapse by rate at a 60 % limit": [
        (
            "collapse",
            "alarm",
            "acceptance collapsed: draft acceptance 50.0 % (< 60 %) over 3000 drafted tokens at "
            "w0; position 1 accepts 70.0 %. The drafter is doing nothing useful and speculation "
            "costs time.",
            ["weak", "thinking", "mismatch", "quant", "revision"],
        )
    ],
    "collapse, few tokens, drafts not counted": [
        (
            "collapse",
            "warning",
            "acceptance looks collapsed (mean acceptance length 1.05 (≤ 1.30)) but only 150 tokens "
            "were drafted at w0: too few to call it; send more traffic",
            ["mismatch", "swa", "thinking", "quant", "revision"],
        )
    ],
    "collapse warning beside a floor": [
        (
            "collapse",
            "warning",
            "acceptance looks collapsed (mean acceptance length 1.05 (≤ 1.30)) but only 150 tokens "
            "were drafted in 150 drafts at w0: too few to call it; send more traffic",
            ["mismatch", "swa", "thinking", "quant", "revision"],
        ),
        (
            "below_expected",
            "alarm",
            "mean acceptance length 1.05 at w0 is below --min-acceptance-length (2.00)",
            ["mismatch", "swa", "thinking", "quant"],
        ),
    ],
    "collapse alarm beside a floor": [
        (
            "collapse",
            "alarm",
            "acceptance collapsed: mean acceptance length 1.10 (≤ 1.30) over 3000 drafted tokens "
            "at w0; position 1 accepts 70.0 %. The drafter is doing nothing useful and speculation "
            "costs time.",
            ["weak", "thinking", "mismatch", "quant", "revision"],
        )
    ],
    "collapse with weak later positions": [
        (
            "collapse",
            "alarm",
            "acceptance collapsed: mean acceptance length 1.20 (≤ 1.30) over 3000 drafted tokens "
            "at w0; position 1 accepts 50.0 %. The drafter is doing nothing useful and speculation "
            "costs time.",
            ["weak", "thinking", "mismatch", "quant", "revision"],
        )
    ],
    "sglang at 1.00 without a running count": [
        (
            "collapse",
            "alarm",
            "acceptance collapsed: mean acceptance length 1.00 (≤ 1.30) at w0. The drafter is "
            "doing nothing useful and speculation costs time.",
            ["thinking", "mismatch", "weak", "quant", "revision"],
        )
    ],
    "sglang at 1.004 with a large batch": [
        (
            "speculation_off_large_batch",
            "warning",
            "accept len 1.00 with 40 requests running at w0: speculation is switched off for large "
            "batches, not collapsed; no window with speculation on to judge",
            [
                "speculation disabled for large batches: the engine verifies no drafts while this "
                "many requests run, so each step commits exactly one token (accept len 1.00). "
                "Expected, not a fault; judge acceptance at smaller batches | grep -oE "
                "'speculative_config=[^ ]+|speculative_[a-z_]+=[^,]+' LOG; then"
                " dflashctl smoke URL "
                "(one request at a time)"
            ],
        )
    ],
    "cliff without drafted tokens": [
        (
            "position_cliff",
            "alarm",
            "positions 3-6 accept ~0 right after position 2 accepted 40.0 % at w0: a cliff, not "
            "the gradual fall-off of a weak drafter; the config is the first suspect, and mean "
            "acceptance length 2.20 is what is left",
            ["layer_types", "block", "mask", "known_defects", "weak(2)"],
        )
    ],
    "cliff without a mean": [
        (
            "position_cliff",
            "alarm",
            "positions 3-6 accept ~0 right after position 2 accepted 40.0 % over 3000 drafted "
            "tokens at w0: a cliff, not the gradual fall-off of a weak drafter; the config is the "
            "first suspect, and mean acceptance length n/a is what is left",
            ["layer_types", "block", "mask", "known_defects", "weak(2)"],
        )
    ],
    "crash, a long line": [
        (
            "engine_crash",
            "alarm",
            "the engine crashed, after the last metrics window (w0): "
            "'EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE'."
            " "
            "Nothing was served after it; the numbers below describe the engine before it died",
            [
                "the engine process died: the traceback just after this line names the"
                " error (a CUDA "
                "error, a failed assertion in the drafter, an unsupported shape) | grep"
                " -nE -A40 'hit "
                "an exception|encountered a fatal error|EngineDeadError|died unexpectedly|out of "
                "memory' LOG | head -80",
                "an engine defect known for this version and drafter | dflashctl doctor"
                " --engine vllm "
                "--drafter DRAFTER_DIR",
            ],
        )
    ],
    "crash between, a long line, OutOfMemory only": [
        (
            "engine_crash",
            "warning",
            "the engine crashed between metrics windows and was logging again afterwards: "
            "'torch.OutOfMemoryError "
            "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee'",
            [
                "out of GPU memory: the KV cache, CUDA graphs or the drafter did not fit at this "
                "batch or context size (lower --max-num-seqs or --max-model-len, or"
                " give the engine "
                "more of the GPU with --gpu-memory-utilization) | grep -nE -A40 'hit an "
                "exception|encountered a fatal error|EngineDeadError|died"
                " unexpectedly|out of memory' "
                "LOG | head -80"
            ],
        )
    ],
    "crash, CUDA out of memory only": [
        (
            "engine_crash",
            "alarm",
            "the engine crashed, after the last metrics window (w0): 'RuntimeError: CUDA out of "
            "memory. Tried'. Nothing was served after it; the numbers below describe the engine "
            "before it died",
            [
                "out of GPU memory: the KV cache, CUDA graphs or the drafter did not fit at this "
                "batch or context size (lower --max-num-seqs or --max-model-len, or"
                " give the engine "
                "more of the GPU with --gpu-memory-utilization) | grep -nE -A40 'hit an "
                "exception|encountered a fatal error|EngineDeadError|died"
                " unexpectedly|out of memory' "
                "LOG | head -80"
            ],
        )
    ],
    "below --min above the registry floor": [
        (
            "below_expected",
            "alarm",
            "mean acceptance length 1.52 at w1 is below --min-acceptance-length (3.00)",
            ["mismatch", "thinking", "workload", "quant"],
        )
    ],
    "below, position 1 dead": [
        (
            "below_expected",
            "alarm",
            "mean acceptance length 2.00 at w1 is below --min-acceptance-length (3.00)",
            ["mismatch", "swa", "thinking", "quant"],
        )
    ],
    "below, every draft rejected": [
        (
            "below_expected",
            "alarm",
            "mean acceptance length 2.00 at w1 is below --min-acceptance-length (3.00)",
            ["wiring", "mask", "mismatch", "known_defects"],
        )
    ],
    "decay of the rate to zero": [
        (
            "collapse",
            "alarm",
            "acceptance collapsed: draft acceptance 0.0 % (< 5 %) at w5; position 1 accepts 70.0 "
            "%. The drafter is doing nothing useful and speculation costs time.",
            ["weak", "thinking", "mismatch", "quant", "revision"],
        ),
        (
            "decay",
            "alarm",
            "acceptance is decaying: draft acceptance fell from 40.0 % (median of the first 2 "
            "windows) to 0.0 % (median of the last 2) across 6 windows over 50 s",
            ["long_context", "drift", "workload"],
        ),
    ],
    "decay, the last third thin": [
        (
            "possible_loop",
            "warning",
            "every drafted token was accepted at w5 (100 % at every position): the target is "
            "probably looping (repeating itself, e.g. a reasoning loop), which any drafter "
            "predicts perfectly. Read a response before trusting the speed-up",
            [
                "a generation loop: the output repeats (reasoning loop, max_tokens reached on "
                "repeated text); check finish_reason and the text | dflashctl smoke URL (shows "
                "content and finish reason)"
            ],
        )
    ],
    "decay at the ratio exactly": [
        (
            "decay",
            "alarm",
            "acceptance is decaying: mean acceptance length fell from 2.50 (median of the first 2 "
            "windows) to 2.00 (median of the last 2) across 6 windows over 50 s",
            ["long_context", "drift", "workload"],
        )
    ],
    "decay, one instant": [
        (
            "decay",
            "alarm",
            "acceptance is decaying: mean acceptance length fell from 2.95 (median of the first 2 "
            "windows) to 2.00 (median of the last 2) across 6 windows",
            ["long_context", "drift", "workload"],
        )
    ],
    "decay, the first window unstamped": [
        (
            "decay",
            "alarm",
            "acceptance is decaying: mean acceptance length fell from 2.95 (median of the first 2 "
            "windows) to 2.00 (median of the last 2) across 6 windows",
            ["long_context", "drift", "workload"],
        )
    ],
    "decay, a cliff from the first window to the last": [
        (
            "decay",
            "alarm",
            "acceptance is decaying: mean acceptance length fell from 4.20 (median of the first 2 "
            "windows) to 2.00 (median of the last 2) across 6 windows over 50 s; positions 4-5 "
            "fell to ~0 (the long-context cliff pattern)",
            ["long_context", "drift", "workload"],
        )
    ],
    "decay, the first profile missing": [
        (
            "decay",
            "alarm",
            "acceptance is decaying: mean acceptance length fell from 4.20 (median of the first 2 "
            "windows) to 2.00 (median of the last 2) across 6 windows over 50 s",
            ["long_context", "drift", "workload"],
        ),
        (
            "weak_later_positions",
            "warning",
            "positions 3-5 accept ≤ 2 % while position 1 accepts 50.0 %: a weak or undertrained "
            "drafter, or K too large; num_speculative_tokens=2 may be as fast or faster (judge by "
            "throughput)",
            [
                "a weak or undertrained drafter, or K larger than it can use (positions ≥ 10 are "
                "rarely accepted, z-lab/dflash#35): fewer proposals may be faster |"
                " dflashctl bench "
                "URL SECOND_URL (SECOND_URL: the same target and drafter served with "
                "num_speculative_tokens=2; compare decode tokens/s)"
            ],
        ),
    ],
    "decay, the last profile missing": [
        (
            "decay",
            "alarm",
            "acceptance is decaying: mean acceptance length fell from 4.20 (median of the first 2 "
            "windows) to 2.00 (median of the last 2) across 6 windows over 50 s",
            ["long_context", "drift", "workload"],
        )
    ],
    "decay, profiles of other lengths": [
        (
            "decay",
            "alarm",
            "acceptance is decaying: mean acceptance length fell from 4.20 (median of the first 2 "
            "windows) to 2.00 (median of the last 2) across 6 windows over 50 s",
            ["long_context", "drift", "workload"],
        ),
        (
            "weak_later_positions",
            "warning",
            "positions 2-3 accept ≤ 2 % while position 1 accepts 50.0 %: a weak or undertrained "
            "drafter, or K too large; num_speculative_tokens=1 may be as fast or faster (judge by "
            "throughput)",
            [
                "a weak or undertrained drafter, or K larger than it can use (positions ≥ 10 are "
                "rarely accepted, z-lab/dflash#35): fewer proposals may be faster |"
                " dflashctl bench "
                "URL SECOND_URL (SECOND_URL: the same target and drafter served with "
                "num_speculative_tokens=1; compare decode tokens/s)"
            ],
        ),
    ],
    "decay, serial at two running": [
        (
            "decay",
            "alarm",
            "acceptance is decaying: mean acceptance length fell from 2.95 (median of the first 2 "
            "windows) to 2.00 (median of the last 2) across 6 windows over 50 s",
            ["long_context", "drift", "workload"],
        )
    ],
    "decay, serial with a trickle of prefill": [
        (
            "decay",
            "warning",
            "acceptance is decaying: mean acceptance length fell from 2.95 (median of the first 2 "
            "windows) to 2.00 (median of the last 2) across 6 windows over 50 s; but requests ran "
            "one at a time and new ones were admitted since the first windows (prompt throughput > "
            "0), so this compares different requests: a change of workload reads the same",
            ["workload", "long_context", "drift"],
        )
    ],
    "weak positions at a 4.5 % near-zero": [
        (
            "weak_later_positions",
            "warning",
            "positions 5-6 accept ≤ 4 % while position 1 accepts 82.0 %: a weak or undertrained "
            "drafter, or K too large; num_speculative_tokens=4 may be as fast or faster (judge by "
            "throughput)",
            ["weak(4)"],
        )
    ],
    "weak positions of three": [
        (
            "weak_later_positions",
            "warning",
            "positions 2-3 accept ≤ 2 % while position 1 accepts 80.0 %: a weak or undertrained "
            "drafter, or K too large; num_speculative_tokens=1 may be as fast or faster (judge by "
            "throughput)",
            ["weak(1)"],
        )
    ],
    "weak positions after one useful": [
        (
            "weak_later_positions",
            "warning",
            "positions 2-4 accept ≤ 2 % while position 1 accepts 80.0 %: a weak or undertrained "
            "drafter, or K too large; num_speculative_tokens=1 may be as fast or faster (judge by "
            "throughput)",
            ["weak(1)"],
        )
    ],
    "weak positions, eagle": [
        (
            "weak_later_positions",
            "warning",
            "positions 5-8 accept ≤ 2 % while position 1 accepts 82.0 %: a weak or undertrained "
            "drafter, or K too large; num_speculative_tokens=4 may be as fast or faster (judge by "
            "throughput)",
            [
                "num_speculative_tokens deeper than the head drafts well: each EAGLE step feeds on "
                "its own guesses, so later steps are rarely accepted | dflashctl bench"
                " URL SECOND_URL "
                "(SECOND_URL: the same target and drafter served with num_speculative_tokens=4; "
                "compare decode tokens/s)",
                "drift",
                "workload",
                "the EAGLE head was trained for another target (base model, revision,"
                " chat template) "
                "or, for EAGLE-3, its auxiliary hidden-state layers or draft vocabulary"
                " map (d2t) do "
                "not match the served target | grep -oE 'speculative_config=[^ "
                "]+|speculative_[a-z_]+=[^,]+' LOG; compare the head's config.json with the "
                "target's",
            ],
        )
    ],
    "weak positions, dflash stated": [
        (
            "weak_later_positions",
            "warning",
            "positions 5-8 accept ≤ 2 % while position 1 accepts 82.0 %: a weak or undertrained "
            "drafter, or K too large; num_speculative_tokens=4 may be as fast or faster (judge by "
            "throughput)",
            ["weak(4)"],
        )
    ],
    "a thin cliff, dflash stated": [
        (
            "weak_later_positions",
            "warning",
            "positions 3-15 accept nothing after position 2 accepted 30.0 %, but only ≈9 drafts "
            "reached position 2: too few to tell a cliff (a config fault: sliding-window layers "
            "run as full attention, a wrong mask id) from a gradual fall (a weak drafter, K too "
            "large); read more windows, or check the config first",
            ["layer_types", "weak(2)"],
        )
    ],
    "a thin cliff, eagle": [
        (
            "weak_later_positions",
            "warning",
            "positions 3-15 accept ≤ 2 % while position 1 accepts 90.0 %: a weak or undertrained "
            "drafter, or K too large; num_speculative_tokens=2 may be as fast or faster (judge by "
            "throughput)",
            [
                "num_speculative_tokens deeper than the head drafts well: each EAGLE step feeds on "
                "its own guesses, so later steps are rarely accepted | dflashctl bench"
                " URL SECOND_URL "
                "(SECOND_URL: the same target and drafter served with num_speculative_tokens=7; "
                "compare decode tokens/s)",
                "drift",
                "workload",
                "the EAGLE head was trained for another target (base model, revision,"
                " chat template) "
                "or, for EAGLE-3, its auxiliary hidden-state layers or draft vocabulary"
                " map (d2t) do "
                "not match the served target | grep -oE 'speculative_config=[^ "
                "]+|speculative_[a-z_]+=[^,]+' LOG; compare the head's config.json with the "
                "target's",
            ],
        )
    ],
    "a thin cliff seen by its draft count": [
        (
            "weak_later_positions",
            "warning",
            "positions 3-6 accept nothing after position 2 accepted 30.0 %, but only ≈9 drafts "
            "reached position 2: too few to tell a cliff (a config fault: sliding-window layers "
            "run as full attention, a wrong mask id) from a gradual fall (a weak drafter, K too "
            "large); read more windows, or check the config first",
            [
                "layer_types",
                "a weak or undertrained drafter, or K larger than it can use (positions ≥ 10 are "
                "rarely accepted, z-lab/dflash#35): fewer proposals may be faster |"
                " dflashctl bench "
                "URL SECOND_URL (SECOND_URL: the same target and drafter served with "
                "num_speculative_tokens=4; compare decode tokens/s)",
            ],
        )
    ],
    "stale, a long start-up line": [
        (
            "stale",
            "alarm",
            "the last metrics line at w0 belongs to an earlier launch: the engine started again "
            "('SSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSS')"
            " "
            "and has logged no metrics since. These numbers do not describe the running server",
            [
                "the server restarted (or this log is from an older run) and has had no traffic "
                "since; or it is still starting | dflashctl smoke URL, then read the current log "
                "again",
                "stats logging is off in the new launch (--disable-log-stats) | grep -c "
                "'disable.log.stats' LOG",
            ],
        )
    ],
    "metrics stopped, a long busy line": [
        (
            "stale",
            "alarm",
            "metrics stopped: the newest metrics line at w4 is 31 s older than the log's newest "
            "line (11-20 10:01:11) while the engine is busy "
            "('BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB');"
            " "
            "windows came every ~10 s",
            [
                "with data parallelism or several API servers some engines' metrics"
                " lines go missing "
                "(vllm-ascend#10049); the /metrics counters are authoritative | dflashctl metrics "
                "URL/metrics",
                "requests are served without drafting (speculation disabled for them,"
                " or the drafter "
                "was dropped after an error) | grep -nE 'speculat|dflash' LOG | tail",
            ],
        )
    ],
    "metrics stopped, one window": [
        (
            "stale",
            "alarm",
            "metrics stopped: the newest metrics line at w0 is 31 s older than the log's newest "
            "line (11-20 10:00:31) while the engine is busy ('Engine 000: Running: 4 reqs'); "
            "windows came every ~10 s",
            [
                "with data parallelism or several API servers some engines' metrics"
                " lines go missing "
                "(vllm-ascend#10049); the /metrics counters are authoritative | dflashctl metrics "
                "URL/metrics",
                "requests are served without drafting (speculation disabled for them,"
                " or the drafter "
                "was dropped after an error) | grep -nE 'speculat|dflash' LOG | tail",
            ],
        )
    ],
    "one busy line after the last window": [],
    "two busy lines after the last window": [
        (
            "stale",
            "alarm",
            "metrics stopped: the newest metrics line at w4 is 5 min older than the log's newest "
            "line (11-20 10:05:40) while the engine is busy ('Engine 000: Running: 4 reqs'); "
            "windows came every ~10 s",
            [
                "with data parallelism or several API servers some engines' metrics"
                " lines go missing "
                "(vllm-ascend#10049); the /metrics counters are authoritative | dflashctl metrics "
                "URL/metrics",
                "requests are served without drafting (speculation disabled for them,"
                " or the drafter "
                "was dropped after an error) | grep -nE 'speculat|dflash' LOG | tail",
            ],
        )
    ],
    "busy, the newest line unstamped": [],
    "busy, no newest line": [],
    "prefix reuse off at start-up": [
        (
            "prefix_reuse_disabled",
            "warning",
            "vLLM switched prefix-cache reuse off at start-up at 11-20 10:00:00: no KV cache group "
            "was identified as the DFlash drafter's, so every group is treated as the drafter's "
            "(vllm#57032, open): every turn re-prefills its whole prompt, and long multi-turn "
            "prompts lose the cache's speed-up whatever the acceptance",
            [
                "a hybrid (Mamba / GDN) target with DFlash on an affected vLLM: "
                "_uses_trailing_mtp_layers() handles only `mtp`; no fix upstream yet |"
                " grep -n 'no KV "
                "cache group' srv.log; compare TTFT with the drafter off (dflashctl bench)"
            ],
        )
    ],
    "collapse, ngram V0 model": [
        (
            "collapse",
            "alarm",
            "acceptance collapsed (method n-gram, as the log states): mean acceptance length 1.10 "
            "(≤ 1.30) over 3000 drafted tokens at w0; position 1 accepts 70.0 %. The drafter is "
            "doing nothing useful and speculation costs time.",
            [
                "n-gram lookup accepts only when the output repeats the prompt (code edits, RAG, "
                "summaries); on open-ended chat it rarely matches. That is the"
                " workload, not a fault: "
                "switch n-gram off for it or use a trained drafter | dflashctl smoke URL (compare "
                "with a prompt that quotes its input)",
                "prompt_lookup_min / prompt_lookup_max or num_speculative_tokens too large for the "
                "repetition in this traffic | grep -oE 'speculative_config=[^ "
                "]+|speculative_[a-z_]+=[^,]+' LOG",
            ],
        )
    ],
    "eagle stated, the drafter found by a lock file": [
        (
            "collapse",
            "alarm",
            "acceptance collapsed (method EAGLE, as the log states): mean acceptance length 1.10 "
            "(≤ 1.30) over 3000 drafted tokens at w0; position 1 accepts 70.0 %. The drafter is "
            "doing nothing useful and speculation costs time.",
            [
                "num_speculative_tokens deeper than the head drafts well: each EAGLE step feeds on "
                "its own guesses, so later steps are rarely accepted | dflashctl bench"
                " URL SECOND_URL "
                "(SECOND_URL: the same target and drafter served with num_speculative_tokens=1; "
                "compare decode tokens/s)",
                "drift",
                "workload",
                "the EAGLE head was trained for another target (base model, revision,"
                " chat template) "
                "or, for EAGLE-3, its auxiliary hidden-state layers or draft vocabulary"
                " map (d2t) do "
                "not match the served target | grep -oE 'speculative_config=[^ "
                "]+|speculative_[a-z_]+=[^,]+' LOG; compare the head's config.json with"
                " the target's",
                "revision",
            ],
        )
    ],
    "eagle stated, the drafter named by --drafter": [
        (
            "collapse",
            "alarm",
            "acceptance collapsed: mean acceptance length 1.10 (≤ 1.30) over 3000 drafted tokens "
            "at w0; position 1 accepts 70.0 %. The drafter is doing nothing useful and speculation "
            "costs time.",
            ["weak", "thinking", "mismatch", "quant", "revision"],
        )
    ],
    "prefix cache and a decay": [
        (
            "decay",
            "alarm",
            "acceptance is decaying: mean acceptance length fell from 2.95 (median of the first 2 "
            "windows) to 2.00 (median of the last 2) across 6 windows over 50 s",
            [
                "prefix caching: mean acceptance length 2.10 in the 3 windows whose"
                " prefix cache hit "
                "rate was ≥ 30% (median 50%) against 2.90 in the 3 below 10%. A DFlash/DSpark "
                "drafter's context is written only for tokens the target ran, so cached prefixes "
                "leave it reading stale entries (vllm#47930, z-lab/dflash#165) | relaunch with "
                "--no-enable-prefix-caching and read again: dflashctl metrics LOG",
                "long_context",
                "drift",
                "workload",
            ],
        )
    ],
    "prefix cache and a shortfall": [
        (
            "below_expected",
            "alarm",
            "mean acceptance length 2.00 at w3 is below --min-acceptance-length (2.50)",
            [
                "prefix caching: mean acceptance length 2.00 in the 2 windows whose"
                " prefix cache hit "
                "rate was ≥ 30% (median 50%) against 3.00 in the 2 below 10%. A DFlash/DSpark "
                "drafter's context is written only for tokens the target ran, so cached prefixes "
                "leave it reading stale entries (vllm#47930, z-lab/dflash#165) | relaunch with "
                "--no-enable-prefix-caching and read again: dflashctl metrics LOG",
                "workload",
                "thinking",
                "mismatch",
                "quant",
            ],
        )
    ],
    "prefix cache and a cliff": [
        (
            "position_cliff",
            "alarm",
            "positions 3-6 accept ~0 right after position 2 accepted 40.0 % over 3000 drafted "
            "tokens at w3: a cliff, not the gradual fall-off of a weak drafter; the config is the "
            "first suspect, and mean acceptance length 2.20 is what is left",
            [
                "prefix caching: mean acceptance length 2.20 in the 2 windows whose"
                " prefix cache hit "
                "rate was ≥ 30% (median 50%) against 3.00 in the 2 below 10%. A DFlash/DSpark "
                "drafter's context is written only for tokens the target ran, so cached prefixes "
                "leave it reading stale entries (vllm#47930, z-lab/dflash#165) | relaunch with "
                "--no-enable-prefix-caching and read again: dflashctl metrics LOG",
                "layer_types",
                "block",
                "mask",
                "known_defects",
                "weak(2)",
            ],
        )
    ],
}


@pytest.mark.parametrize("name", list(CASES))
def test_every_finding_whole(name: str) -> None:
    make, th, k, useful = CASES[name]
    assert summary(evaluate(make(), th), th, k, useful) == EXPECTED[name]


def test_each_finding_names_its_stream() -> None:
    ws = [win(1.1, rate=0.02, stream="engine 0"), win(2.5, stream="engine 1")]
    assert [f.stream for f in evaluate(st(ws), DEFAULT)] == ["engine 0"]
    one = evaluate(st([win(1.1, rate=0.02, stream="engine 3")]), DEFAULT)
    assert [(f.stream, f.message[:21]) for f in one] == [("engine 3", "acceptance collapsed:")]


def test_following_a_log_drops_nothing_yet_but_keeps_speculation_off() -> None:
    follow = Thresholds(follow=True)
    assert evaluate(st([]), follow) == []
    assert [f.kind for f in evaluate(st([], skipped_lines=2), follow)] == ["unreadable_metrics"]
    assert [f.kind for f in evaluate(st([], non_spec_decode_lines=1), follow)] == ["no_speculation"]
    # a restart while following: the earlier launch's windows are still judged
    restarted = st([win(1.1, rate=0.02)], startup_after_last_window=Marker(9, "Starting", None))
    assert [f.kind for f in evaluate(restarted, follow)] == ["restart", "collapse"]
    assert [f.kind for f in evaluate(restarted, DEFAULT)] == ["stale"]


def test_implausible_windows_are_not_judged() -> None:
    f = evaluate(st([win(1.1, rate=0.02, i=0), win(70.0, i=1)]), DEFAULT)
    assert [(x.kind, x.severity) for x in f] == [
        ("implausible_metrics", "alarm"),
        ("collapse", "alarm"),
    ]
    assert evaluate(st([win(2.5)]), DEFAULT) == []


# ---- numeric edges: at, just under, just over -----------------------------------------------


def kinds(findings: list[Finding]) -> list[tuple[str, str]]:
    return [(f.kind, f.severity) for f in findings]


@pytest.mark.parametrize(
    "drafted, k, want",
    [
        (290, 10, "warning"),  # 29 drafts: under min_drafts (30)
        (300, 10, "alarm"),  # 30 drafts
        (310, 10, "alarm"),
        (199, 1, "warning"),  # 199 drafted tokens: under min_drafted_tokens (200)
        (200, 1, "alarm"),
    ],
)
def test_collapse_evidence_edges(drafted: int, k: int, want: str) -> None:
    f = evaluate(st([win(1.1, rate=0.01, drafted=drafted, k=k, pp=[0.1] * k)]), DEFAULT)
    assert kinds(f) == [("collapse", want)]


def test_collapse_without_drafts_counted_needs_no_evidence() -> None:
    w = win(1.1, rate=0.01, drafted=None, engine="sglang")
    assert kinds(evaluate(st([w]), DEFAULT)) == [("collapse", "alarm")]


@pytest.mark.parametrize(
    "sizes, want",
    [
        ([120, 79], "warning"),  # 199 pooled
        ([120, 80], "alarm"),  # 200 pooled
        ([80, 120, 79], "alarm"),  # pooled back until enough
    ],
)
def test_pooling_edges(sizes: list[int], want: str) -> None:
    ws = [win(1.1, rate=0.02, drafted=d, k=1, pp=[0.1], i=i) for i, d in enumerate(sizes)]
    assert kinds(evaluate(st(ws), DEFAULT)) == [("collapse", want)]


def test_pooling_stops_at_a_window_without_counts() -> None:
    ws = [win(1.1, rate=0.02, drafted=None, k=1, pp=[0.1], i=0)]
    ws += [win(1.1, rate=0.02, drafted=150, k=1, pp=[0.1], i=1)]
    assert kinds(evaluate(st(ws), DEFAULT)) == [("collapse", "warning")]


@pytest.mark.parametrize(
    "pp, rate, engine, want",
    [
        ([1.0, 0.995], 0.99, "vllm", True),
        ([1.0, 0.994], 0.99, "vllm", False),
        ([0.9951, 0.9951], 0.99, "vllm", True),
        ([1.0], 0.995, "vllm", True),  # one position: the rate decides, vLLM only
        ([1.0], 0.994, "vllm", False),
        ([1.0], 0.995, "sglang", False),
        ([1.0], None, "vllm", False),
    ],
)
def test_loop_edges(pp: list[float], rate: float | None, engine: str, want: bool) -> None:
    w = win(3.0, rate=rate, k=len(pp), pp=pp, engine=engine)
    assert kinds(evaluate(st([w]), DEFAULT)) == ([("possible_loop", "warning")] if want else [])


def test_a_cumulative_window_is_no_loop() -> None:
    w = win(3.0, rate=1.0, pp=[1.0, 1.0, 1.0], cumulative=True)
    assert evaluate(st([w]), DEFAULT) == []
    few = win(3.0, rate=1.0, drafted=150, pp=[1.0, 1.0, 1.0])
    assert evaluate(st([few]), DEFAULT) == []


@pytest.mark.parametrize(
    "late, want",
    [
        ([2.4, 2.4], True),  # late median = 0.8 × early: at the ratio
        ([2.41, 2.41], False),  # just over
        ([2.0, 2.69], True),  # the best late window under 0.9 × early
        ([2.0, 2.7], False),  # … at it: one good window is no decay
    ],
)
def test_decay_ratio_edges(late: list[float], want: bool) -> None:
    ws = _decay([3.0, 3.0, 3.0, 3.0, *late])
    assert (
        ("decay", "alarm") in kinds(evaluate(st(ws), DEFAULT))
        if want
        else not [f for f in evaluate(st(ws), DEFAULT) if f.kind == "decay"]
    )


@pytest.mark.parametrize("late, want", [(2.5, True), (2.51, False), (2.49, True)])
def test_decay_min_drop_edges(late: float, want: bool) -> None:
    th = Thresholds(decay_ratio=0.9, decay_min_drop=0.5)
    found = evaluate(st(_decay([3.0, 3.0, 3.0, 3.0, late, late])), th)
    assert [f.kind for f in found] == (["decay"] if want else [])


@pytest.mark.parametrize("late, want", [(0.35, True), (0.355, False)])
def test_decay_of_the_rate_needs_five_points(late: float, want: bool) -> None:
    rates = [0.4, 0.4, 0.4, 0.4, late, late]
    ws = [win(None, rate=r, drafted=None, i=i) for i, r in enumerate(rates)]
    found = evaluate(st(ws), Thresholds(decay_ratio=0.95))
    assert [f.kind for f in found] == (["decay"] if want else [])


def test_decay_needs_the_collapse_rules_evidence_at_both_ends() -> None:
    ws = _decay([3.0, 2.9, 2.7, 2.4, 2.1, 1.9], drafted=90)  # 180 per third
    assert [f.kind for f in evaluate(st(ws), DEFAULT)] == []
    ws = _decay([3.0, 2.9, 2.7, 2.4, 2.1, 1.9], drafted=100)  # 200 per third
    assert [f.kind for f in evaluate(st(ws), DEFAULT)] == ["decay"]
    early_thin = _decay([3.0, 2.9, 2.7, 2.4, 2.1, 1.9])
    early_thin[0].drafted_tokens = early_thin[1].drafted_tokens = 60
    early_thin[0].num_drafts = early_thin[1].num_drafts = 20
    assert [f.kind for f in evaluate(st(early_thin), DEFAULT)] == []


def test_decay_on_mixed_windows_uses_the_windows_with_tau() -> None:
    ws = _decay([3.0, 2.9, 2.7, 2.4, 2.1, 1.9, 2.0])
    ws[-1].mean_acceptance_length = None  # a line without τ
    ws[-1].draft_acceptance_rate = 0.1
    (f,) = [f for f in evaluate(st(ws), DEFAULT) if f.kind == "decay"]
    assert "across 6 windows over 50 s" in f.message and "mean acceptance length" in f.message


def test_decay_with_a_first_cold_window() -> None:
    ws = _decay([1.9, 3.0, 3.0, 2.9, 2.7, 2.4, 2.1, 1.9])
    (f,) = evaluate(st(ws, latest_launch_has_startup=True), DEFAULT)
    assert f.message == (
        "acceptance is decaying: mean acceptance length fell from 3.00 (median of the first 2 "
        "windows) to 2.00 (median of the last 2) across 7 windows over 60 s"
    )


def test_decay_of_serial_requests_needs_every_count() -> None:
    ws = _serial([3.0, 2.9, 2.7, 2.4, 2.1, 1.9])
    ws[4].prompt_throughput = None
    assert kinds(evaluate(st(ws), DEFAULT)) == [("decay", "alarm")]
    ws = _serial([3.0, 2.9, 2.7, 2.4, 2.1, 1.9])
    ws[5].running_reqs = None
    assert kinds(evaluate(st(ws), DEFAULT)) == [("decay", "alarm")]
    ws = _serial([3.0, 2.9, 2.7, 2.4, 2.1, 1.9])
    ws[3].prompt_throughput = 0.0  # no request admitted after the first third
    assert kinds(evaluate(st(ws), DEFAULT)) == [("decay", "alarm")]
    ws = _serial([3.0, 2.9, 2.7, 2.4, 2.1, 1.9])
    ws[1].running_reqs = 2  # the first third is not judged for seriality
    assert kinds(evaluate(st(ws), DEFAULT)) == [("decay", "warning")]


@pytest.mark.parametrize(
    "pp, want",
    [
        ([0.4, 0.15, 0.02, 0.02], "positions 3-4"),  # position 1 at the healthy floor
        ([0.39, 0.15, 0.02, 0.02], None),  # just under it
        ([0.8, 0.15, 0.021, 0.02], None),  # one tail position over "near zero": one is fine
        ([0.8, 0.15, 0.02, 0.0, 0.0], "positions 3-5"),
        ([0.8, 0.15, 0.0], None),  # one position near zero is fine
        ([0.8, 0.0], None),  # two positions: no tail to judge
        ([0.8, 0.3, 0.1], None),
    ],
)
def test_weak_positions_edges(pp: list[float], want: str | None) -> None:
    w = win(1.0 + sum(pp), rate=0.3, k=len(pp), pp=pp)
    found = [f for f in evaluate(st([w]), DEFAULT) if f.kind == "weak_later_positions"]
    assert [f.message.split(" accept")[0] for f in found] == ([want] if want else [])


def test_weak_positions_need_the_evidence() -> None:
    w = win(1.9, rate=0.3, drafted=150, k=4, pp=[0.8, 0.1, 0.0, 0.0])
    assert evaluate(st([w]), DEFAULT) == []


@pytest.mark.parametrize(
    "mean, limit, first",
    [
        (2.0, 3.0, "workload"),  # 1.0 accepted per draft: exactly half of the expected 2.0
        (1.99, 3.0, "mismatch"),  # under half: a mismatch first
    ],
)
def test_a_shortfall_of_half_edge(mean: float, limit: float, first: str) -> None:
    th = Thresholds(min_acceptance_length=limit)
    (f,) = evaluate(st([win(mean, i=0), win(mean, i=1)]), th)
    assert summary([f], th)[0][3][0] == first


@pytest.mark.parametrize("mean, want", [(2.49, "alarm"), (2.495, None), (2.5, None)])
def test_the_printed_mean_is_compared_with_the_floor(mean: float, want: str | None) -> None:
    found = evaluate(st([win(mean, i=0), win(mean, i=1)]), Thresholds(min_acceptance_length=2.5))
    assert kinds(found) == ([("below_expected", want)] if want else [])


def test_the_noise_allowance_edge() -> None:
    """τ + 2 standard errors at the registry's floor is a warning; under it, an alarm."""
    pp = [0.4, 0.1, 0.02] + [0.0] * 12
    w = win(1.52, drafted=210, k=15, pp=pp)
    se = w.tau_stderr
    assert se is not None
    floor = round(1.52 + 2 * se, 2)
    at = evaluate(st([w]), Thresholds(expected_min=floor, drafter="demo"))
    over = evaluate(st([w]), Thresholds(expected_min=floor + 0.01, drafter="demo"))
    assert kinds(at) == [("below_expected", "warning")]
    assert kinds(over) == [("below_expected", "alarm")]


def test_a_stated_method_other_than_dflash_ranks_the_shortfall_by_its_own_causes() -> None:
    th = Thresholds(min_acceptance_length=3.16)
    found = evaluate(st([win(2.0, i=0), win(2.0, i=1)], spec_config={"method": "medusa"}), th)
    assert [c.cause[:40] for c in found[0].likely_causes] == [
        "num_speculative_tokens larger than the n",
        "the target's checkpoint, dtype or quanti",
        "the workload changed or differs from the",
    ]


@pytest.mark.parametrize(
    "seconds, text",
    [(0.4, "0 s"), (119.4, "119 s"), (120, "2 min"), (7199, "120 min"), (7200, "2.0 h")],
)
def test_duration_edges(seconds: float, text: str) -> None:
    assert _duration(seconds) == text


@pytest.mark.parametrize("x, want", [(None, None), ("8", 8), (8, 8), ("8.0", None), ("x", None)])
def test_int_or_none(x: object, want: int | None) -> None:
    assert _int_or_none(x) == want


def test_estimate_interval_per_stream_positive_gaps_median() -> None:
    ws = [win(2.5, i=0, stream="a"), win(2.5, i=1, stream="b"), win(2.5, i=2, stream="a")]
    ws += [win(2.5, i=5, stream="b"), win(2.5, i=5, stream="b")]  # a zero gap is left out
    assert estimate_interval(ws) == 30.0  # the median of a's 20 s and b's 40 s
    assert estimate_interval([win(2.5, i=0), win(2.5, i=0)]) is None


def test_number_formats() -> None:
    from dflashctl.metrics.alarms import _fmt_len, _fmt_pct

    assert (_fmt_len(None), _fmt_len(1.005), _fmt_len(2.0)) == ("n/a", "1.00", "2.00")
    assert (_fmt_pct(None), _fmt_pct(0.0494), _fmt_pct(1.0)) == ("n/a", "4.9 %", "100.0 %")
    assert _duration(8100.36) == "2.3 h"  # 2.2501 h


@pytest.mark.parametrize("rate, want", [(0.0494, True), (0.0496, False)])
def test_collapse_by_the_printed_rate(rate: float, want: bool) -> None:
    found = evaluate(st([win(None, rate=rate, k=15)]), DEFAULT)
    assert [f.kind for f in found] == (["collapse"] if want else [])


@pytest.mark.parametrize("p, want", [(0.99451, True), (0.99449, False)])
def test_loop_by_the_printed_rate(p: float, want: bool) -> None:
    by_position = evaluate(st([win(3.0, rate=0.9, pp=[1.0, p])]), DEFAULT)
    by_rate = evaluate(st([win(3.0, rate=p, k=1, pp=[1.0])]), DEFAULT)
    assert [f.kind for f in by_position] == (["possible_loop"] if want else [])
    assert [f.kind for f in by_rate] == (["possible_loop"] if want else [])


def test_estimate_interval_skips_unstamped_windows_and_counts_one_second() -> None:
    ws = [win(2.5, i=0), win(2.5, i=1, timestamp=None), win(2.5, i=2)]
    assert estimate_interval(ws) is None  # no two stamped windows in a row
    one = [win(2.5, i=0), win(2.5, i=0, timestamp=T0 + timedelta(seconds=1))]
    assert estimate_interval(one) == 1.0


def test_weak_positions_when_position_one_is_itself_near_zero() -> None:
    """With a healthy floor under "near zero" every position can be near zero: nothing is
    useful, so there is no tail to name (and the count stops at position 1)."""
    th = Thresholds(healthy_first_position=0.01)
    assert evaluate(st([win(2.0, pp=[0.015, 0.0, 0.0])]), th) == []


@pytest.mark.parametrize(
    "mean, want",
    [
        (1.0, [("speculation_off_large_batch", "warning")]),
        (1.004, [("speculation_off_large_batch", "warning")]),  # printed 1.00
        (1.3, [("collapse", "alarm")]),  # rounds to 1 whole, but 1.30 is no 1.00
        (1.49, []),
    ],
)
def test_speculation_off_is_a_printed_tau_of_one_00(
    mean: float, want: list[tuple[str, str]]
) -> None:
    w = win(mean, rate=0.0, drafted=None, engine="sglang", pp=[], running_reqs=40)
    assert kinds(evaluate(st([w]), DEFAULT)) == want


@pytest.mark.parametrize(
    "first, cliff",
    [
        (0.061, "; positions 3-3 fell to ~0 (the long-context cliff pattern)"),
        (0.06, ""),  # 3 × the 2 % "near zero": not a position that fell
    ],
)
def test_decay_names_positions_that_fell_from_over_three_times_near_zero(
    first: float, cliff: str
) -> None:
    ws = _decay([3.0, 3.0, 3.0, 2.0, 2.0, 2.0])
    ws[0].per_position = [0.9, 0.5, first]
    ws[-1].per_position = [0.9, 0.5, 0.02]
    (f,) = evaluate(st(ws), DEFAULT)
    assert f.message == (
        "acceptance is decaying: mean acceptance length fell from 3.00 (median of the first 2 "
        f"windows) to 2.00 (median of the last 2) across 6 windows over 50 s{cliff}"
    )
