"""Turn a series of spec-decode windows into findings: alarms (fail) and warnings (shown).

Rules (docs/metrics.md explains each, how to confirm it and the fix):

- collapse: mean acceptance length ≤ 1.30 (draft acceptance < 5 % where no τ is printed) over
  enough drafted tokens and drafts.
- below_expected: under `--min-acceptance-length` or the registry's expected range.
- decay: the median of the last third of the windows well under the first third's.
- stale: the last metrics line belongs to an earlier launch, or is several intervals older
  than the log's newest line while the engine is busy.
- no_speculation: the engine says speculation is off (`speculative_config=None`, no
  `vllm:spec_decode_*` counters, SGLang decode lines without `accept len`).
- warnings: cold start (the only window is the first after start-up), later positions near
  zero after a healthy position 1, too few drafted tokens, no metrics at all.

Likely causes (metrics/causes.py) follow ../shared/docs/dflash-facts.md §12; each names the
command that checks it.
Pure: no I/O, no printing.
"""

from __future__ import annotations

import itertools
import statistics
from dataclasses import dataclass

from dflashctl.metrics.causes import (
    METHOD_NAMES,
    cause_batch_off,
    cause_drift,
    cause_layer_types,
    cause_long_context,
    cause_mismatch,
    cause_prefix_cache,
    cause_quant,
    cause_revision,
    cause_thinking,
    cause_weak,
    cause_workload,
    causes_for,
    method_causes,
    method_family,
    prefix_cache_signature,
    server_url,
    signature_of,
)
from dflashctl.metrics.startup import startup_warnings
from dflashctl.metrics.thresholds import Thresholds
from dflashctl.metrics.window import (
    Cause,
    Finding,
    MetricsState,
    SpecWindow,
    aggregate,
    implausible,
)

# ---- rules ---------------------------------------------------------------------------------


def evaluate(state: MetricsState, th: Thresholds) -> list[Finding]:
    crash = _crash(state, th)  # an engine's death leads: it is the most important line
    if not state.windows:
        found = _no_windows(state, th)
        if th.follow:  # live: "nothing yet" is not news; speculation being off is
            found = [f for f in found if f.kind != "no_metrics"]
        return crash + found
    findings = crash + _stale(state, th) + _implausible(state) + startup_warnings(state, th)
    if state.startup_after_last_window is not None and not th.follow:
        return findings  # the numbers describe an earlier launch: judge nothing else
    cfg = state.spec_config or {}
    family = method_family(cfg.get("method"))
    if not family and str(cfg.get("model") or cfg.get("draft_model") or "") == "[ngram]":
        family = "ngram"  # vLLM V0: SpeculativeConfig(draft_model='[ngram]', …)
    if th.drafter and (state.expected is None or state.expected.found_by == "--drafter"):
        family = "dflash"  # a registry drafter (they are all DFlash) named by the user wins
    batch_limit = _int_or_none(cfg.get("disable_by_batch_size"))
    cur = [w for w in state.current_windows() if implausible(w) is None]
    streams: dict[str, list[SpecWindow]] = {}
    for w in cur:
        streams.setdefault(w.stream, []).append(w)
    multi = len(streams) > 1
    for stream, ws in streams.items():
        label = f"[{stream}] " if multi and stream else ""
        cold = state.latest_launch_has_startup and len(ws) == 1
        ctx = _Ctx(th, family, batch_limit)
        # one diagnosis per stream where several rules see the same numbers: a collapse is
        # below any range and may show a cliff; a cliff explains a shortfall; a decay names the
        # long-context cliff itself
        out = _collapse(ws, ctx, cold)
        collapsed = any(f.kind == "collapse" and f.severity == "alarm" for f in out)
        decay = _decay(ws, th, state.latest_launch_has_startup)
        shallow = _basis(ws, th).shallow  # fewer than K verified per draft: positions unjudged
        cliff = [] if collapsed or decay or shallow else _cliff(ws, ctx)
        below = [] if collapsed else _below_expected(ws, th, cold, ctx)
        if any(f.severity == "alarm" for f in cliff) and below:
            # the cliff is the diagnosis; the shortfall is part of its message
            cliff[0].message += f". {below[0].message[:1].upper()}{below[0].message[1:]}"
            below = []
        out += below + decay + cliff
        if not shallow and not any(f.kind in ("position_cliff", "collapse") for f in out):
            out += _weak_positions(ws, ctx)
        out += _looping(ws, th)
        prefix = prefix_cache_signature(ws)
        for f in out:
            f.stream = stream
            f.message = label + f.message
            if prefix and f.kind in ("collapse", "decay", "below_expected", "position_cliff"):
                f.likely_causes.insert(0, cause_prefix_cache(th, prefix))
        findings += out
    return findings


def _implausible(state: MetricsState) -> list[Finding]:
    """Windows whose numbers cannot be (1e308, 250 %, NaN): an alarm, and never judged."""
    bad = [(w, why) for w in state.windows if (why := implausible(w)) is not None]
    if not bad:
        return []
    w, why = bad[0]
    return [
        Finding(
            "implausible_metrics",
            "alarm",
            f"{len(bad)} metrics window(s) report impossible values, e.g. {why}{_when(w)}: the "
            "log is corrupt or edited; those windows were not judged",
        )
    ]


def _int_or_none(x: object) -> int | None:
    try:
        return int(str(x)) if x is not None else None
    except ValueError:
        return None


@dataclass(frozen=True)
class _Ctx:
    """What the rules of one stream share: thresholds, the stated method, the batch limit."""

    th: Thresholds
    family: str
    batch_limit: int | None

    def shape(self, w: SpecWindow) -> tuple[str, int | None]:
        """The shape that ranks the causes, whatever the count (the rule that fired weighed it).
        A cliff after a position 1 already far below a healthy one (the stale mask's 4 of 30,
        then 2, then 0) is ranked as a cliff at position 2: the fall starts at position 1."""
        sig, at = signature_of(w.per_position, self.th, w.num_drafts, counted=False)
        pp = w.per_position
        if sig == "cliff" and pp and pp[0] < self.th.healthy_first_position:
            at = 2
        return sig, at

    def causes(self, w: SpecWindow) -> list[Cause]:
        sig, at = self.shape(w)
        return causes_for(self.family, sig, at, self.th, w.k)

    def method_note(self) -> str:
        name = METHOD_NAMES.get(self.family)
        return f" (method {name}, as the log states)" if name else ""


def _enough(w: SpecWindow, th: Thresholds) -> bool:
    """The collapse rule's minimum evidence: drafted tokens, when the format counts them, and
    drafts, when it counts those."""
    return (w.drafted_tokens is None or w.drafted_tokens >= th.min_drafted_tokens) and (
        w.num_drafts is None or w.num_drafts >= th.min_drafts
    )


def _basis(ws: list[SpecWindow], th: Thresholds) -> SpecWindow:
    """The latest window, pooled with earlier ones while it has too little evidence."""
    last = ws[-1]
    if last.drafted_tokens is None or _enough(last, th):
        return last
    pool = [last]
    for w in reversed(ws[:-1]):
        if w.drafted_tokens is None:
            break
        pool.insert(0, w)
        if _enough(aggregate(pool), th):
            break
    return aggregate(pool) if len(pool) > 1 else last


def _fmt_len(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def _fmt_pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 100:.1f} %"


def _when(w: SpecWindow) -> str:
    return f" at {w.timestamp_raw}" if w.timestamp_raw else ""


def _collapsed(w: SpecWindow, th: Thresholds) -> tuple[bool, bool]:
    """(by τ, by draft acceptance rate). The rate judges only a format that prints no τ: it is
    (τ − 1) / K, so at K = 15 a 5 % rate is τ 1.75, a drafter that still pays (the demo pair's
    healthy floor is 1.57); with τ printed the rate adds nothing but false alarms at large K."""
    mean, rate = w.mean_acceptance_length, w.draft_acceptance_rate
    by_len = mean is not None and round(mean, 2) <= th.collapse_length
    by_rate = mean is None and rate is not None and round(rate * 100, 1) < th.collapse_rate * 100
    return by_len, by_rate


def _batch_off(w: SpecWindow, ctx: _Ctx) -> bool:
    """Accept len exactly 1.00 at a batch where the engine switches speculation off: SGLang at a
    large batch, vLLM at or past the `disable_by_batch_size` its config states."""
    if w.running_reqs is None or w.mean_acceptance_length is None:
        return False
    if round(w.mean_acceptance_length, 2) != 1.0:
        return False
    if ctx.batch_limit is not None:
        return w.running_reqs >= ctx.batch_limit
    return w.engine == "sglang" and w.running_reqs >= ctx.th.large_batch


def _collapse(ws: list[SpecWindow], ctx: _Ctx, cold: bool) -> list[Finding]:
    th = ctx.th
    b = _basis(ws, th)
    lead: list[Finding] = []
    if _batch_off(ws[-1], ctx):
        # speculation switched off on purpose at this batch: judge the latest window where it
        # was on, if any; say so either way
        on = [w for w in ws if not _batch_off(w, ctx)]
        last = ws[-1]
        lead = [
            Finding(
                "speculation_off_large_batch",
                "warning",
                f"accept len 1.00 with {last.running_reqs} requests running{_when(last)}: "
                "speculation is switched off for large batches, not collapsed"
                + (
                    f"; judged on the latest window with speculation on ({on[-1].timestamp_raw})"
                    if on and on[-1].timestamp_raw
                    else "; no window with speculation on to judge"
                    if not on
                    else "; judged on the latest window with speculation on"
                ),
                [cause_batch_off(th, ctx.batch_limit)],
            )
        ]
        if not on:
            return lead
        b = _basis(on, th)
    by_len, by_rate = _collapsed(b, th)
    if not (by_len or by_rate):
        return lead
    mean, rate = b.mean_acceptance_length, b.draft_acceptance_rate
    why = []
    if by_len:
        why.append(f"mean acceptance length {_fmt_len(mean)} (≤ {th.collapse_length:.2f})")
    if by_rate:
        why.append(f"draft acceptance {_fmt_pct(rate)} (< {th.collapse_rate * 100:.0f} %)")
    volume = f" over {b.drafted_tokens} drafted tokens" if b.drafted_tokens is not None else ""
    pos = ""
    if b.per_position:
        pos = f"; position 1 accepts {b.per_position[0] * 100:.1f} %"
        sig, at = signature_of(b.per_position, th)  # collapsed already: the shape names it
        if sig == "all_rejected":
            pos += ", every position ~0 (every draft rejected: a wiring or config fault)"
        if sig == "cliff":
            pos += f", positions {at}-{len(b.per_position)} ~0 (a cliff: a config signature)"
    causes = ctx.causes(b)
    if th.drafter or not ctx.family or ctx.family == "dflash":
        causes.append(cause_revision(th))
    if b.drafted_tokens is not None and not _enough(b, th):
        drafts = f" in {b.num_drafts} drafts" if b.num_drafts is not None else ""
        return [
            *lead,
            Finding(
                "collapse",
                "warning",
                f"acceptance looks collapsed ({', '.join(why)}) but only {b.drafted_tokens} "
                f"tokens were drafted{drafts}{_when(b)}: too few to call it; send more traffic",
                causes,
            ),
        ]
    cold_note = (
        " This is the first window after start-up, but a cold start reads ~10 % low, not this low."
        if cold
        else ""
    )
    return [
        *lead,
        Finding(
            "collapse",
            "alarm",
            f"acceptance collapsed{ctx.method_note()}: {' and '.join(why)}{volume}{_when(b)}"
            f"{pos}. The drafter is doing nothing useful and speculation costs time.{cold_note}",
            causes,
        ),
    ]


def _cliff(ws: list[SpecWindow], ctx: _Ctx) -> list[Finding]:
    """Position 1 accepts, the later positions fall to ~0 at once: not a weak drafter (that
    decays gradually) but a config signature (wrong mask id, sliding-window layers, a block
    larger than trained). An alarm for DFlash and EAGLE/MTP/Medusa; n-gram only warns."""
    th = ctx.th
    b = _basis(ws, th)
    pp = b.per_position
    # an alarm of its own on a window nothing else faults: the zeros must be more than chance
    sig, at = signature_of(pp, th, b.num_drafts)
    if sig != "cliff" or not pp or at is None:
        return []
    enough = _enough(b, th)
    severity = "alarm" if enough and ctx.family != "ngram" else "warning"
    tokens = f" over {b.drafted_tokens} drafted tokens" if b.drafted_tokens is not None else ""
    few = "" if enough else f" (only {b.drafted_tokens} drafted tokens: too few to call it)"
    return [
        Finding(
            "position_cliff",
            severity,
            f"positions {at}-{len(pp)} accept ~0 right after position {at - 1} accepted "
            f"{pp[at - 2] * 100:.1f} %{tokens}{_when(b)}{ctx.method_note()}: a cliff, not the "
            "gradual fall-off of a weak drafter; the config is the first suspect, and "
            f"mean acceptance length {_fmt_len(b.mean_acceptance_length)} is what is left{few}",
            ctx.causes(b),
        )
    ]


def _looping(ws: list[SpecWindow], th: Thresholds) -> list[Finding]:
    """Every position accepted: healthy numbers, but usually a target repeating itself."""
    b = _basis(ws, th)
    if not _enough(b, th) or b.cumulative:
        return []
    pp = b.per_position
    if pp and len(pp) >= 2:
        full = all(round(p, 3) >= th.loop_rate for p in pp)
    else:
        rate = b.draft_acceptance_rate
        full = rate is not None and round(rate, 3) >= th.loop_rate and b.engine == "vllm"
    if not full:
        return []
    return [
        Finding(
            "possible_loop",
            "warning",
            f"every drafted token was accepted{_when(b)} (100 % at every position): the target "
            "is probably looping (repeating itself, e.g. a reasoning loop), which any drafter "
            "predicts perfectly. Read a response before trusting the speed-up",
            [
                Cause(
                    "a generation loop: the output repeats (reasoning loop, max_tokens reached "
                    "on repeated text); check finish_reason and the text",
                    f"dflashctl smoke {server_url(th)} (shows content and finish reason)",
                )
            ],
        )
    ]


def _crash(state: MetricsState, th: Thresholds) -> list[Finding]:
    """A crash after the last window (alarm) or between windows (warning), listed first."""
    out: list[Finding] = []
    grep = (
        f"grep -nE -A40 'hit an exception|encountered a fatal error|EngineDeadError|died "
        f"unexpectedly|out of memory' {th.source} | head -80"
    )
    c = state.crash
    last = state.windows[-1] if state.windows else None
    if c is not None:
        when = f" at {c.timestamp:%m-%d %H:%M:%S}" if c.timestamp else ""
        after = (
            f"after the last metrics window ({last.timestamp_raw})"
            if last and last.timestamp_raw
            else "after the last metrics window"
            if last
            else "and no metrics window was logged"
        )
        out.append(
            Finding(
                "engine_crash",
                "alarm",
                f"the engine crashed{when}, {after}: {c.text.strip()[:240]!r}. Nothing was "
                "served after it; the numbers below describe the engine before it died",
                _crash_causes(c.text, grep, th),
            )
        )
    elif state.crashes_between:
        b = state.crashes_between[-1]
        when = f" at {b.timestamp:%m-%d %H:%M:%S}" if b.timestamp else ""
        n = len(state.crashes_between)
        more = f" ({n} crashes between windows in this log)" if n > 1 else ""
        out.append(
            Finding(
                "engine_crash",
                "warning",
                f"the engine crashed{when} between metrics windows and was logging again "
                f"afterwards{more}: {b.text.strip()[:240]!r}",
                _crash_causes(b.text, grep, th),
            )
        )
    return out


def _crash_causes(text: str, grep: str, th: Thresholds) -> list[Cause]:
    low = text.lower()
    if "out of memory" in low or "outofmemory" in low:
        return [
            Cause(
                "out of GPU memory: the KV cache, CUDA graphs or the drafter did not fit at "
                "this batch or context size (lower --max-num-seqs or --max-model-len, or give "
                "the engine more of the GPU with --gpu-memory-utilization)",
                grep,
            )
        ]
    return [
        Cause(
            "the engine process died: the traceback just after this line names the error "
            "(a CUDA error, a failed assertion in the drafter, an unsupported shape)",
            grep,
        ),
        Cause(
            "an engine defect known for this version and drafter",
            "dflashctl doctor --engine vllm --drafter DRAFTER_DIR",
        ),
    ]


def _below_expected(
    ws: list[SpecWindow], th: Thresholds, cold: bool, ctx: _Ctx | None = None
) -> list[Finding]:
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
    if ctx is not None:
        sig, at = ctx.shape(b)
        if sig in ("cliff", "dead", "all_rejected") or (ctx.family and ctx.family != "dflash"):
            causes = causes_for(ctx.family, sig, at, th, b.k)
    se = b.tau_stderr
    if (
        th.drafter
        and label.startswith("the expected")
        and se is not None
        and round(mean + 2 * se, 2) >= x
    ):
        # the registry's floor is a spread over prompts, and a few drafts of one request swing τ
        # widely (the demo pair's 14-draft pools read 1.5 to 6 on healthy traffic): a shortfall
        # inside two standard errors is not evidence. A floor the user set is a hard line.
        return [
            Finding(
                "below_expected",
                "warning",
                f"mean acceptance length {mean:.2f}{_when(b)} is below {label} ({x:.2f}), but "
                f"within the noise of its {b.num_drafts} drafts (± {2 * se:.2f}): judge more "
                "windows or more traffic",
                causes,
            )
        ]
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
    # the collapse rule's evidence at both ends: on a few hundred tokens a fall is the text
    # (code then prose inside one answer), not a decay
    if all(w.drafted_tokens is not None for w in series) and not (
        _enough(aggregate(series[:third]), th) and _enough(aggregate(series[-third:]), th)
    ):
        return []
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
    message = (
        f"acceptance is decaying: {metric} fell from {fmt(e)} (median of the first {third} "
        f"windows) to {fmt(lt)} (median of the last {third}) across {n} windows{span}{cliff}"
    )
    if _new_requests_one_at_a_time(series[third:]):
        # serial traffic: each window is one request, and later windows are other requests,
        # so the fall is as likely the next prompt's kind (code, then prose) as a long context
        return [
            Finding(
                "decay",
                "warning",
                f"{message}; but requests ran one at a time and new ones were admitted since the "
                "first windows (prompt throughput > 0), so this compares different requests: a "
                "change of workload reads the same",
                [cause_workload(th), cause_long_context(th), cause_drift(th)],
            )
        ]
    return [Finding("decay", "alarm", message, causes)]


def _new_requests_one_at_a_time(ws: list[SpecWindow]) -> bool:
    """Every window ran at most one request and some admitted a new one (vLLM's companion line:
    `Running: 1 reqs`, `Avg prompt throughput` > 0). Unknown counts: False."""
    if any(w.running_reqs is None or w.prompt_throughput is None for w in ws):
        return False
    return all((w.running_reqs or 0) <= 1 for w in ws) and any(
        (w.prompt_throughput or 0) > 0 for w in ws
    )


def _weak_positions(ws: list[SpecWindow], ctx: _Ctx) -> list[Finding]:
    """Position 1 healthy, the last positions near zero after a gradual fall: a weak drafter
    or K too large. Needs the collapse rule's evidence (drafted tokens)."""
    th = ctx.th
    b = _basis(ws, th)
    pp = b.per_position
    if not pp or len(pp) < 3 or pp[0] < th.healthy_first_position or not _enough(b, th):
        return []
    useful = len(pp)
    while useful > 0 and pp[useful - 1] <= th.weak_position_rate:
        useful -= 1
    if useful < 1 or len(pp) - useful < 2:
        return []
    causes = (
        method_causes(ctx.family, "gradual", th, b.k)
        if ctx.family and ctx.family != "dflash"
        else [cause_weak(th, useful)]
    )
    message = (
        f"positions {useful + 1}-{len(pp)} accept ≤ {th.weak_position_rate * 100:.0f} % "
        f"while position 1 accepts {pp[0] * 100:.1f} %: a weak or undertrained drafter, or K "
        f"too large; num_speculative_tokens={useful} may be as fast or faster (judge by "
        "throughput)"
    )
    thin = _thin_cliff(pp, th, b.num_drafts)
    if thin is not None and (not ctx.family or ctx.family == "dflash"):
        at, reached = thin
        message = (
            f"positions {at}-{len(pp)} accept nothing after position {at - 1} accepted "
            f"{pp[at - 2] * 100:.1f} %, but only ≈{reached:.0f} drafts reached position "
            f"{at - 1}: too few to tell a cliff (a config fault: sliding-window layers run as "
            "full attention, a wrong mask id) from a gradual fall (a weak drafter, K too large); "
            "read more windows, or check the config first"
        )
        causes = [cause_layer_types(th), cause_weak(th, useful)]
    return [Finding("weak_later_positions", "warning", message, causes)]


def _thin_cliff(pp: list[float], th: Thresholds, drafts: int | None) -> tuple[int, float] | None:
    """(cliff position, drafts that reached the position before it) when the profile has a
    cliff's shape but fewer drafts behind it than the cliff rule asks for: one window of a
    healthy drafter (the demo pair's smoke log) and one of sliding-window layers run as full
    attention (positions 6-15 at 0 after 4 drafts reached position 5) look alike."""
    if drafts is None or signature_of(pp, th, drafts)[0] == "cliff":
        return None
    sig, at = signature_of(pp, th, drafts, counted=False)
    if sig != "cliff" or at is None:
        return None
    return at, pp[at - 2] * drafts


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
                        f"dflashctl smoke {server_url(th)}, then read the current log again",
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
    if state.busy_lines_after_last_window == 1:
        # one busy line after the last window is the next interval's own line (vLLM writes
        # `Engine 000: … throughput` just before that interval's metrics line): an excerpt cut
        # there, not metrics that stopped while the engine kept working
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
                    f"dflashctl metrics {server_url(th)}/metrics",
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
    if state.figure_lines:
        engine = f" (it looks like {state.engine_hint}'s)" if state.engine_hint else ""
        return [
            Finding(
                "format_not_recognised",
                "warning",
                f"the log has acceptance figures in a format not recognised{engine}: nothing "
                f"was judged, which is not the same as healthy; first: "
                f"{state.figure_lines[0][:120]!r}",
                [
                    Cause(
                        "an engine or tool whose output dflashctl does not read yet (it reads "
                        "vLLM's and SGLang's interval lines, vLLM's bench serve and offline "
                        "summaries, llama.cpp's draft acceptance and statistics lines)",
                        f"grep -m5 -iE 'accept' {th.source}",
                    ),
                    Cause(
                        "the engine's /metrics endpoint can be read instead",
                        f"dflashctl metrics {server_url(th)}/metrics",
                    ),
                ],
            )
        ]
    if state.skipped_lines:
        return [
            Finding(
                "unreadable_metrics",
                "warning",
                f"{state.skipped_lines} metrics line(s) in the log could not be read (no "
                "acceptance rate, mean length or token counts found in them): nothing could be "
                "judged, which is not the same as healthy",
                [
                    Cause(
                        "a log format this version of dflashctl does not know (a fork, a new "
                        "engine version, a logging config that rewrites lines)",
                        f"grep -m3 -E 'SpecDecoding metrics|Speculative metrics|Decode batch' "
                        f"{th.source}",
                    )
                ],
            )
        ]
    return [
        Finding(
            "no_metrics",
            "warning",
            f"no speculative-decoding metrics {where}: nothing to judge",
            [
                Cause(
                    "no traffic: engines log spec metrics only for intervals with drafted tokens",
                    f"dflashctl smoke {server_url(th)}, then read again",
                ),
                Cause(
                    "stats logging is off (vLLM --disable-log-stats) or this is not the engine's "
                    "log",
                    f"grep -cE 'SpecDecoding metrics|Decode batch' {th.source}",
                ),
            ],
        )
    ]
