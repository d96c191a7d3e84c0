"""Turn a series of spec-decode windows into findings: alarms (fail) and warnings (shown).

Rules (docs/metrics.md explains each, how to confirm it and the fix):

- collapse: mean acceptance length ≤ 1.30 or draft acceptance < 5 % over enough drafted tokens.
- below_expected: under `--min-acceptance-length` or the registry's expected range.
- decay: the median of the last third of the windows well under the first third's.
- stale: the last metrics line belongs to an earlier launch, or is several intervals older
  than the log's newest line while the engine is busy.
- no_speculation: the engine says speculation is off (`speculative_config=None`, no
  `vllm:spec_decode_*` counters, SGLang decode lines without `accept len`).
- warnings: cold start (the only window is the first after start-up), later positions near
  zero after a healthy position 1, too few drafted tokens, no metrics at all.

Likely causes follow ../shared/docs/dflash-facts.md §12; each names the command that checks it.
Pure: no I/O, no printing.
"""

from __future__ import annotations

import itertools
import statistics
from dataclasses import dataclass

from dflashctl.metrics.window import Cause, Finding, MetricsState, SpecWindow, aggregate


@dataclass(frozen=True)
class Thresholds:
    collapse_length: float = 1.30  # mean acceptance length at or below: collapse
    collapse_rate: float = 0.05  # draft acceptance below: collapse
    min_drafted_tokens: int = 200  # evidence needed before calling a collapse
    min_acceptance_length: float | None = None
    expected_min: float | None = None
    expected_max: float | None = None
    drafter: str | None = None
    interval: float | None = None  # expected seconds between windows (default: estimated)
    stale_intervals: float = 3.0
    min_stale_seconds: float = 30.0
    decay_min_windows: int = 6
    decay_ratio: float = 0.8  # late median ≤ ratio × early median
    decay_min_drop: float = 0.3  # in mean acceptance length
    weak_position_rate: float = 0.02  # "near zero" for a later position
    healthy_first_position: float = 0.4
    follow: bool = False
    url: str | None = None  # the server, when known, for the commands in causes
    source: str = "LOG"


# ---- likely causes ------------------------------------------------------------------------


def _name(th: Thresholds) -> str:
    return th.drafter or "NAME"


def _url(th: Thresholds) -> str:
    return th.url.removesuffix("/metrics") if th.url else "URL"


def cause_mismatch(th: Thresholds) -> Cause:
    return Cause(
        "target/drafter mismatch: the drafter's config.json on the serving host disagrees with "
        "its target (target_layer_ids, mask_token_id, layer_types, RoPE); a stale or "
        "never-landed config is common. Position 1 near zero with coherent output is the "
        "signature",
        f"dflashctl verify-config DRAFTER_DIR --drafter {_name(th)} --target TARGET_DIR "
        "(add --host HOST for a remote server)",
    )


def cause_swa(th: Thresholds) -> Cause:
    return Cause(
        "sliding-window draft layers run as full attention, or with the wrong causality "
        "(VLLM_USE_V2_MODEL_RUNNER=1 gave 0 % in vllm#49559)",
        f"dflashctl verify-config DRAFTER_DIR --drafter {_name(th)} --engine vllm "
        "(prints the per-layer causal/window table)",
    )


def cause_thinking(th: Thresholds) -> Cause:
    return Cause(
        "thinking mode on a drafter trained without thinking traces (Qwen3 b16 drafters): "
        "acceptance roughly halves; turn thinking off (enable_thinking=false) or use a "
        "reasoning drafter",
        f"dflashctl smoke {_url(th)}",
    )


def cause_quant(th: Thresholds) -> Cause:
    return Cause(
        "the target's checkpoint, dtype or quantization differs from the one the drafter was "
        "trained against (fp16 instead of bf16, an FP8 target)",
        f'grep -oE "dtype=[^,]+|quantization=[^,]+" {th.source}',
    )


def cause_revision(th: Thresholds) -> Cause:
    return Cause(
        "the drafter's weights are not the pinned revision (republished under the same name)",
        f"dflashctl fetch {_name(th)}",
    )


def cause_weak(th: Thresholds, useful: int | None = None) -> Cause:
    k = f" with num_speculative_tokens={useful}" if useful else " with a smaller K"
    return Cause(
        "a weak or undertrained drafter, or K larger than it can use (positions ≥ 10 are "
        "rarely accepted, z-lab/dflash#35): fewer proposals may be faster",
        f"dflashctl bench (compare decode tokens/s{k})",
    )


def cause_long_context(th: Thresholds) -> Cause:
    return Cause(
        "long-context cliff: sliding-window draft layers handled as full attention lose "
        "acceptance as the context grows (later positions fall to 0 beyond ~2k tokens)",
        f"dflashctl verify-config DRAFTER_DIR --drafter {_name(th)}; then compare short and "
        f"long prompts with dflashctl smoke {_url(th)}",
    )


def cause_drift(th: Thresholds) -> Cause:
    return Cause(
        "acceptance drift over hours until a restart (seen with EAGLE, vllm#41838)",
        f"restart the engine and watch: dflashctl metrics {th.source} --follow",
    )


def cause_workload(th: Thresholds) -> Cause:
    return Cause(
        "the workload changed or differs from the benchmark (longer prompts, another domain or "
        "language, sampling temperature): acceptance depends on it",
        f"dflashctl smoke {_url(th)} (fixed prompts at temperature 0)",
    )


# ---- rules ---------------------------------------------------------------------------------


def evaluate(state: MetricsState, th: Thresholds) -> list[Finding]:
    findings: list[Finding] = []
    if not state.windows:
        found = _no_windows(state, th)
        if th.follow:  # live: "nothing yet" is not news; speculation being off is
            found = [f for f in found if f.kind != "no_metrics"]
        return found
    findings += _stale(state, th)
    if state.startup_after_last_window is not None and not th.follow:
        return findings  # the numbers describe an earlier launch: judge nothing else
    cur = state.current_windows()
    streams: dict[str, list[SpecWindow]] = {}
    for w in cur:
        streams.setdefault(w.stream, []).append(w)
    multi = len(streams) > 1
    for stream, ws in streams.items():
        label = f"[{stream}] " if multi and stream else ""
        cold = state.latest_launch_has_startup and len(ws) == 1
        out = _collapse(ws, th, cold)
        out += _below_expected(ws, th, cold)
        out += _decay(ws, th, state.latest_launch_has_startup)
        out += _weak_positions(ws, th)
        for f in out:
            f.stream = stream
            f.message = label + f.message
        findings += out
    return findings


def _basis(ws: list[SpecWindow], th: Thresholds) -> SpecWindow:
    """The latest window, pooled with earlier ones while it has too few drafted tokens."""
    last = ws[-1]
    if last.drafted_tokens is None or last.drafted_tokens >= th.min_drafted_tokens:
        return last
    pool = [last]
    for w in reversed(ws[:-1]):
        if w.drafted_tokens is None:
            break
        pool.insert(0, w)
        if sum(x.drafted_tokens or 0 for x in pool) >= th.min_drafted_tokens:
            break
    return aggregate(pool) if len(pool) > 1 else last


def _fmt_len(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def _fmt_pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 100:.1f} %"


def _when(w: SpecWindow) -> str:
    return f" at {w.timestamp_raw}" if w.timestamp_raw else ""


def _collapse(ws: list[SpecWindow], th: Thresholds, cold: bool) -> list[Finding]:
    b = _basis(ws, th)
    mean, rate = b.mean_acceptance_length, b.draft_acceptance_rate
    by_len = mean is not None and round(mean, 2) <= th.collapse_length
    by_rate = rate is not None and round(rate * 100, 1) < th.collapse_rate * 100
    if not (by_len or by_rate):
        return []
    why = []
    if by_len:
        why.append(f"mean acceptance length {_fmt_len(mean)} (≤ {th.collapse_length:.2f})")
    if by_rate:
        why.append(f"draft acceptance {_fmt_pct(rate)} (< {th.collapse_rate * 100:.0f} %)")
    volume = f" over {b.drafted_tokens} drafted tokens" if b.drafted_tokens is not None else ""
    pos = ""
    if b.per_position:
        pos = f"; position 1 accepts {b.per_position[0] * 100:.1f} %"
    pos0_dead = b.per_position is None or b.per_position[0] < 0.1
    causes = (
        [cause_mismatch(th), cause_swa(th), cause_thinking(th), cause_quant(th)]
        if pos0_dead
        else [cause_thinking(th), cause_mismatch(th), cause_weak(th), cause_quant(th)]
    )
    causes.append(cause_revision(th))
    if b.drafted_tokens is not None and b.drafted_tokens < th.min_drafted_tokens:
        return [
            Finding(
                "collapse",
                "warning",
                f"acceptance looks collapsed ({', '.join(why)}) but only {b.drafted_tokens} "
                f"tokens were drafted{_when(b)}: too few to call it; send more traffic",
                causes,
            )
        ]
    cold_note = (
        " This is the first window after start-up, but a cold start reads ~10 % low, not this low."
        if cold
        else ""
    )
    return [
        Finding(
            "collapse",
            "alarm",
            f"acceptance collapsed: {' and '.join(why)}{volume}{_when(b)}{pos}. The drafter is "
            f"doing nothing useful and speculation costs time.{cold_note}",
            causes,
        )
    ]


def _below_expected(ws: list[SpecWindow], th: Thresholds, cold: bool) -> list[Finding]:
    bounds: list[tuple[str, float]] = []
    if th.min_acceptance_length is not None:
        bounds.append(("--min-acceptance-length", th.min_acceptance_length))
    if th.expected_min is not None:
        hi = f"-{th.expected_max:.2f}" if th.expected_max is not None else "+"
        bounds.append((f"the expected {th.expected_min:.2f}{hi} for {th.drafter}", th.expected_min))
    if not bounds:
        return []
    b = _basis(ws, th)
    mean = b.mean_acceptance_length
    if mean is None:
        return [
            Finding(
                "below_expected",
                "warning",
                f"cannot compare with {bounds[0][0]}: this log format ({b.format}) has no mean "
                "acceptance length",
            )
        ]
    fails = [(label, x) for label, x in bounds if round(mean, 2) < x]
    if not fails:
        return []
    label, x = max(fails, key=lambda f: f[1])
    causes = [cause_workload(th), cause_thinking(th), cause_mismatch(th), cause_quant(th)]
    if mean - 1 < 0.5 * (x - 1):
        # less than half the expected accepted tokens per draft: more than a workload shift
        # or thinking mode explains (those roughly halve it at worst); a config mismatch first
        causes = [cause_mismatch(th), cause_thinking(th), cause_workload(th), cause_quant(th)]
    if cold:
        return [
            Finding(
                "cold_start",
                "warning",
                f"cold start: the only window since start-up reads mean acceptance length "
                f"{mean:.2f}{_when(b)}, below {label} ({x:.2f}); the first window after "
                "start-up often reads lower (2.52 before settling at 2.7-3.0 in the field). "
                "Judge the next windows",
                causes,
            )
        ]
    return [
        Finding(
            "below_expected",
            "alarm",
            f"mean acceptance length {mean:.2f}{_when(b)} is below {label} ({x:.2f})",
            causes,
        )
    ]


def _decay(ws: list[SpecWindow], th: Thresholds, started: bool) -> list[Finding]:
    warm = ws[1:] if started else ws  # the first window after start-up is a cold start
    series = [w for w in warm if w.mean_acceptance_length is not None]
    metric, min_drop = "mean acceptance length", th.decay_min_drop
    vals = [w.mean_acceptance_length or 0.0 for w in series]
    if len(vals) < th.decay_min_windows:
        series = [w for w in warm if w.draft_acceptance_rate is not None]
        vals = [w.draft_acceptance_rate or 0.0 for w in series]
        metric, min_drop = "draft acceptance", 0.05
    n = len(vals)
    if n < th.decay_min_windows:
        return []
    third = n // 3
    early, late = vals[:third], vals[-third:]
    e, lt = statistics.median(early), statistics.median(late)
    if not (lt <= th.decay_ratio * e and e - lt >= min_drop and max(late) < 0.9 * e):
        return []
    span = ""
    t0, t1 = series[0].timestamp, series[-1].timestamp
    if t0 and t1 and t1 > t0:
        span = f" over {_duration((t1 - t0).total_seconds())}"
    fmt = _fmt_len if metric.startswith("mean") else _fmt_pct
    causes = [cause_long_context(th), cause_drift(th), cause_workload(th)]
    first, last = series[0].per_position, series[-1].per_position
    cliff = ""
    if first and last and len(first) == len(last):
        dead = [
            i
            for i in range(len(last))
            if last[i] <= th.weak_position_rate and first[i] > 3 * th.weak_position_rate
        ]
        if dead:
            cliff = (
                f"; positions {dead[0] + 1}-{len(last)} fell to ~0 (the long-context cliff pattern)"
            )
    return [
        Finding(
            "decay",
            "alarm",
            f"acceptance is decaying: {metric} fell from {fmt(e)} (median of the first {third} "
            f"windows) to {fmt(lt)} (median of the last {third}) across {n} windows{span}{cliff}",
            causes,
        )
    ]


def _weak_positions(ws: list[SpecWindow], th: Thresholds) -> list[Finding]:
    pp = ws[-1].per_position
    if not pp or len(pp) < 3 or pp[0] < th.healthy_first_position:
        return []
    useful = len(pp)
    while useful > 0 and pp[useful - 1] <= th.weak_position_rate:
        useful -= 1
    if useful < 1 or len(pp) - useful < 2:
        return []
    return [
        Finding(
            "weak_later_positions",
            "warning",
            f"positions {useful + 1}-{len(pp)} accept ≤ {th.weak_position_rate * 100:.0f} % "
            f"while position 1 accepts {pp[0] * 100:.1f} %: a weak or undertrained drafter, or K "
            f"too large; num_speculative_tokens={useful} may be as fast or faster (judge by "
            "throughput)",
            [cause_weak(th, useful)],
        )
    ]


def estimate_interval(ws: list[SpecWindow]) -> float | None:
    by_stream: dict[str, list[SpecWindow]] = {}
    for w in ws:
        by_stream.setdefault(w.stream, []).append(w)
    gaps = []
    for sws in by_stream.values():
        for a, b in itertools.pairwise(sws):
            if a.timestamp and b.timestamp:
                d = (b.timestamp - a.timestamp).total_seconds()
                if d > 0:
                    gaps.append(d)
    return statistics.median(gaps) if gaps else None


def _duration(s: float) -> str:
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


def _stale(state: MetricsState, th: Thresholds) -> list[Finding]:
    last = state.windows[-1]
    start = state.startup_after_last_window
    if start is not None:
        when = f" at {start.timestamp:%m-%d %H:%M:%S}" if start.timestamp else ""
        if th.follow:
            return [
                Finding(
                    "restart",
                    "warning",
                    f"the engine started again{when}; waiting for its first metrics window",
                )
            ]
        return [
            Finding(
                "stale",
                "alarm",
                f"the last metrics line{_when(last)} belongs to an earlier launch: the engine "
                f"started again{when} ({start.text.strip()[:120]!r}) and has logged no metrics "
                "since. These numbers do not describe the running server",
                [
                    Cause(
                        "the server restarted (or this log is from an older run) and has had no "
                        "traffic since; or it is still starting",
                        f"dflashctl smoke {_url(th)}, then read the current log again",
                    ),
                    Cause(
                        "stats logging is off in the new launch (--disable-log-stats)",
                        f"grep -c 'disable.log.stats' {th.source}",
                    ),
                ],
            )
        ]
    busy, newest = state.busy_after_last_window, state.newest_line
    if busy is None or newest is None or newest.timestamp is None or last.timestamp is None:
        return []
    interval = th.interval or estimate_interval(state.current_windows()) or 10.0
    limit = max(th.stale_intervals * interval, th.min_stale_seconds)
    gap = (newest.timestamp - last.timestamp).total_seconds()
    if gap <= limit:
        return []
    return [
        Finding(
            "stale",
            "alarm",
            f"metrics stopped: the newest metrics line{_when(last)} is {_duration(gap)} older than "
            f"the log's newest line ({newest.timestamp:%m-%d %H:%M:%S}) while the engine is busy "
            f"({busy.text.strip()[:100]!r}); windows came every ~{interval:.0f} s",
            [
                Cause(
                    "with data parallelism or several API servers some engines' metrics lines "
                    "go missing (vllm-ascend#10049); the /metrics counters are authoritative",
                    f"dflashctl metrics {_url(th)}/metrics",
                ),
                Cause(
                    "requests are served without drafting (speculation disabled for them, or "
                    "the drafter was dropped after an error)",
                    f"grep -nE 'speculat|dflash' {th.source} | tail",
                ),
            ],
        )
    ]


def _no_windows(state: MetricsState, th: Thresholds) -> list[Finding]:
    cfg = state.spec_config or {}
    if cfg.get("enabled") is False or state.non_spec_decode_lines:
        what = (
            "decode lines carry no `accept len`"
            if state.non_spec_decode_lines
            else "the engine reports no speculative config"
        )
        if state.kind == "prometheus":
            what = "the server exports no spec-decode metrics"
        return [
            Finding(
                "no_speculation",
                "alarm",
                f"speculative decoding is off: {what}",
                [
                    Cause(
                        "the speculative flags never reached the engine (vLLM "
                        "`speculative_config=None`; SGLang without --speculative-algorithm)",
                        f"grep -oE 'speculative_config=[^ ]+|speculative_algorithm=[^,]+' "
                        f"{th.source}",
                    )
                ],
            )
        ]
    where = "between the two scrapes" if state.kind == "prometheus" else "in the log"
    return [
        Finding(
            "no_metrics",
            "warning",
            f"no speculative-decoding metrics {where}: nothing to judge",
            [
                Cause(
                    "no traffic: engines log spec metrics only for intervals with drafted tokens",
                    f"dflashctl smoke {_url(th)}, then read again",
                ),
                Cause(
                    "stats logging is off (vLLM --disable-log-stats) or this is not the engine's "
                    "log",
                    f"grep -cE 'SpecDecoding metrics|Decode batch' {th.source}",
                ),
            ],
        )
    ]
