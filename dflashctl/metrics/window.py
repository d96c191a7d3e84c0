"""The spec-decode data model shared by every source: one `SpecWindow` per metrics interval.

A window is what an engine reports for one logging or scrape interval, normalised to vLLM's
definitions (docs/metrics.md, "Normalisation"):

- `mean_acceptance_length` (τ) counts the bonus token: 1 + accepted / num_drafts. SGLang's
  `accept len` ((accepted + bonus) / verify forwards) is the same quantity.
- `draft_acceptance_rate` is a fraction 0–1: accepted / drafted (vLLM prints a percentage).
- `per_position[i]` is accepted_at_position_i / num_drafts.

Pure data: no I/O, no printing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(slots=True)
class SpecWindow:
    """One interval of speculative-decoding statistics."""

    engine: str  # "vllm" | "sglang"
    format: str  # e.g. "vllm-0.10.2+", "vllm-v0", "sglang", "vllm-prometheus"
    timestamp: datetime | None = None
    timestamp_raw: str | None = None
    stream: str = ""  # engine index / process / DP rank when several write to one log
    launch: int = 0  # index of the engine launch (start-up) this window belongs to
    mean_acceptance_length: float | None = None
    accepted_tokens: int | None = None
    drafted_tokens: int | None = None
    num_drafts: int | None = None
    per_position: list[float] | None = None
    draft_acceptance_rate: float | None = None  # fraction 0-1
    accepted_throughput: float | None = None  # tokens/s
    drafted_throughput: float | None = None  # tokens/s
    generation_throughput: float | None = None  # tokens/s (engine companion line or gauge)
    running_reqs: int | None = None
    prompt_throughput: float | None = None  # tokens/s prefilled (> 0: a request was admitted)
    waiting_reqs: int | None = None
    prefix_cache_hit_rate: float | None = None  # fraction 0-1 over the window, when known
    offset: int = -1  # byte offset of the line in the log (-1: not from a log)
    cumulative: bool = False  # a since-start total rather than one interval

    @property
    def k(self) -> int | None:
        """Number of speculative positions, when the source reports them."""
        return len(self.per_position) if self.per_position else None

    @property
    def verified_depth(self) -> float | None:
        """Proposals verified per draft: (τ − 1) · drafted / accepted, K for an engine that
        verifies all K every step (vLLM, SGLang), fewer for one that stops at the first unsure
        proposal (the bundled engine's --draft-confidence) or drafts a dynamic depth. None
        unless τ, accepted and drafted tokens are known and τ is clear of 1 (its rounding)."""
        tau, acc, dra = self.mean_acceptance_length, self.accepted_tokens, self.drafted_tokens
        if tau is None or tau < 1.1 or not acc or not dra:
            return None
        return (tau - 1.0) * dra / acc

    @property
    def shallow(self) -> bool:
        """Fewer than K − 1 proposals verified per draft: the later positions were seldom
        verified at all, so their low rates say nothing of the drafter (no cliff or weak-position
        finding is drawn from them)."""
        depth, k = self.verified_depth, self.k
        return depth is not None and k is not None and depth < k - 1

    @property
    def tau_stderr(self) -> float | None:
        """Standard error of τ over this window's drafts, from its own profile: a draft accepts
        at least i tokens with probability per_position[i-1], which fixes the spread of
        accepted tokens per draft. Drafts of one request are not independent, so the real noise
        is larger; None without a profile and a draft count."""
        pp, n = self.per_position, self.num_drafts
        if not pp or not n:
            return None
        mean = sum(pp)
        second = sum((2 * i + 1) * p for i, p in enumerate(pp))  # E[A²] = Σ (2i−1) P(A ≥ i)
        return (max(second - mean * mean, 0.0) / n) ** 0.5

    def to_json(self) -> dict[str, Any]:
        pp = self.per_position
        return {
            "timestamp": self.timestamp.isoformat() if self.timestamp else None,
            "timestamp_raw": self.timestamp_raw,
            "engine": self.engine,
            "format": self.format,
            "stream": self.stream,
            "launch": self.launch,
            "mean_acceptance_length": _r(self.mean_acceptance_length, 4),
            "accepted_tokens": self.accepted_tokens,
            "drafted_tokens": self.drafted_tokens,
            "num_drafts": self.num_drafts,
            "per_position": [round(p, 4) for p in pp] if pp else None,
            "draft_acceptance_rate": _r(self.draft_acceptance_rate, 4),
            "accepted_throughput": _r(self.accepted_throughput, 2),
            "drafted_throughput": _r(self.drafted_throughput, 2),
            "generation_throughput": _r(self.generation_throughput, 2),
            "running_reqs": self.running_reqs,
            "prompt_throughput": _r(self.prompt_throughput, 2),
            "waiting_reqs": self.waiting_reqs,
            "cumulative": self.cumulative,
        }


MAX_SPEC_TOKENS = 64  # no engine drafts more positions than this per step


def implausible(w: SpecWindow) -> str | None:
    """What makes `w` impossible (a non-finite number, a rate outside 0-100 %, a mean
    acceptance length outside 1..65, a negative count), or None when it is sane."""
    tau = w.mean_acceptance_length
    if tau is not None and not (1.0 - 1e-6 <= tau <= MAX_SPEC_TOKENS + 1):
        return f"mean acceptance length {tau:g} (possible: 1 to {MAX_SPEC_TOKENS + 1})"
    rate = w.draft_acceptance_rate
    if rate is not None and not (0.0 <= rate <= 1.0 + 1e-9):
        return f"draft acceptance rate {rate * 100:g} % (possible: 0 to 100 %)"
    for i, p in enumerate(w.per_position or []):
        if not (0.0 <= p <= 1.0 + 1e-9):
            return f"acceptance at position {i} {p:g} (possible: 0 to 1)"
    for name in ("accepted_tokens", "drafted_tokens", "num_drafts"):
        v = getattr(w, name)
        if v is not None and v < 0:
            return f"{name} {v}"
    for name in ("accepted_throughput", "drafted_throughput", "generation_throughput"):
        v = getattr(w, name)
        if v is not None and not (0.0 <= v < float("inf")):
            return f"{name.replace('_', ' ')} {v:g}"
    return None


def _r(x: float | None, nd: int) -> float | None:
    if x is None or x != x:  # None or NaN
        return None
    return round(x, nd)


def aggregate(windows: list[SpecWindow]) -> SpecWindow:
    """Pool several windows of one stream into one, weighting by drafts (counts add up).

    Used when the latest window alone has too few drafted tokens to judge.
    """
    last = windows[-1]
    agg = SpecWindow(
        engine=last.engine,
        format=last.format,
        timestamp=last.timestamp,
        timestamp_raw=last.timestamp_raw,
        stream=last.stream,
        launch=last.launch,
        offset=last.offset,
    )
    if all(w.accepted_tokens is not None and w.drafted_tokens is not None for w in windows):
        acc = sum(w.accepted_tokens or 0 for w in windows)
        dra = sum(w.drafted_tokens or 0 for w in windows)
        agg.accepted_tokens, agg.drafted_tokens = acc, dra
        agg.draft_acceptance_rate = acc / dra if dra else None
        if all(w.num_drafts for w in windows):
            nd = sum(w.num_drafts or 0 for w in windows)
            agg.num_drafts = nd
            agg.mean_acceptance_length = 1.0 + acc / nd
            ks = {w.k for w in windows}
            if len(ks) == 1 and None not in ks:
                agg.per_position = [
                    sum((w.per_position or [])[i] * (w.num_drafts or 0) for w in windows) / nd
                    for i in range(last.k or 0)
                ]
    running = [w.running_reqs for w in windows]
    if all(r is not None for r in running):
        agg.running_reqs = max(r or 0 for r in running)  # the busiest of the pooled windows
    prompts = [w.prompt_throughput for w in windows]
    if all(p is not None for p in prompts):
        agg.prompt_throughput = max(p or 0.0 for p in prompts)  # > 0: a request was admitted
    if agg.mean_acceptance_length is None:
        vals = [w.mean_acceptance_length for w in windows if w.mean_acceptance_length is not None]
        agg.mean_acceptance_length = sum(vals) / len(vals) if vals else None
    if agg.draft_acceptance_rate is None:
        rates = [w.draft_acceptance_rate for w in windows if w.draft_acceptance_rate is not None]
        agg.draft_acceptance_rate = sum(rates) / len(rates) if rates else None
    return agg


@dataclass(frozen=True, slots=True)
class Cause:
    """A likely cause and the command that checks it."""

    cause: str
    check: str

    def to_json(self) -> dict[str, str]:
        return {"cause": self.cause, "check": self.check}


@dataclass(slots=True)
class Finding:
    """An alarm (fails the verdict) or a warning (shown, keeps exit 0)."""

    kind: str  # collapse | below_expected | decay | stale | no_speculation | cold_start | ...
    severity: str  # "alarm" | "warning"
    message: str
    likely_causes: list[Cause] = field(default_factory=list)
    stream: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "severity": self.severity,
            "message": self.message,
            "likely_causes": [c.to_json() for c in self.likely_causes],
            "stream": self.stream,
        }


@dataclass(slots=True)
class Marker:
    """A non-metrics log line that matters to the verdict (start-up, busy evidence, config)."""

    offset: int
    text: str
    timestamp: datetime | None = None


@dataclass(frozen=True, slots=True)
class Expected:
    """The mean acceptance length a healthy deploy of this drafter shows, and how it was found
    (`--drafter`, the log's speculative config line, a dflashctl.lock.json, a deployment)."""

    drafter: str
    min: float | None
    max: float | None
    found_by: str

    def to_json(self) -> dict[str, Any]:
        return {
            "drafter": self.drafter,
            "min": self.min,
            "max": self.max,
            "found_by": self.found_by,
        }


@dataclass
class MetricsState:
    """Everything a source yielded, before judging it."""

    source: str
    kind: str  # "log" | "prometheus"
    engine: str | None
    windows: list[SpecWindow]  # retained windows, oldest first
    total_windows: int
    launches: int = 1
    latest_launch_has_startup: bool = False  # a start-up line precedes the latest launch
    startup_after_last_window: Marker | None = None
    busy_after_last_window: Marker | None = None
    busy_lines_after_last_window: int | None = None  # None: not counted (not a log)
    newest_line: Marker | None = None
    spec_config: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    unknown_fields: list[str] = field(default_factory=list)
    non_spec_decode_lines: int = 0
    lifetime: SpecWindow | None = None  # Prometheus: totals since the engine started
    engine_version: str | None = None  # vLLM's "server version X" line, when the log has it
    engine_build: str | None = None  # "cpu" | "gpu" from its "CPU/GPU KV cache usage" field
    skipped_lines: int = 0  # metrics lines that carried no usable field
    crash: Marker | None = None  # the first crash line after the last metrics line
    crashes_between: list[Marker] = field(default_factory=list)  # crashes before later windows
    expected: Expected | None = None  # the expected acceptance range and where it came from
    figure_lines: list[str] = field(default_factory=list)  # acceptance-like lines, unread
    launch_fields: dict[str, str] = field(default_factory=dict)  # vLLM's engine config
    prefix_reuse_off: Marker | None = None  # vLLM's vllm#57032 warning at start-up
    engine_hint: str | None = None  # the engine those lines (or the log) name, if any

    @property
    def latest(self) -> SpecWindow | None:
        return self.windows[-1] if self.windows else None

    def current_windows(self) -> list[SpecWindow]:
        """Windows of the latest launch that has any."""
        if not self.windows:
            return []
        launch = self.windows[-1].launch
        return [w for w in self.windows if w.launch == launch]


@dataclass
class MetricsReport:
    """The verdict: the state plus findings. `ok` is False when any finding is an alarm."""

    state: MetricsState
    findings: list[Finding]

    @property
    def ok(self) -> bool:
        return not any(f.severity == "alarm" for f in self.findings)

    @property
    def alarms(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "alarm"]

    def to_json(self) -> dict[str, Any]:
        st = self.state
        w = st.latest
        return {
            "ok": self.ok,
            "source": st.source,
            "engine": st.engine,
            "format": w.format if w else None,
            "windows": st.total_windows,
            "windows_in_series": len(st.windows),
            "launches": st.launches,
            "timestamp": w.timestamp.isoformat() if w and w.timestamp else None,
            "mean_acceptance_length": _r(w.mean_acceptance_length, 4) if w else None,
            "per_position": [_r(p, 4) for p in w.per_position] if w and w.per_position else None,
            "draft_acceptance_rate": _r(w.draft_acceptance_rate, 4) if w else None,
            "accepted_tokens": w.accepted_tokens if w else None,
            "drafted_tokens": w.drafted_tokens if w else None,
            "generation_throughput": _r(w.generation_throughput, 2) if w else None,
            "alarms": [f.to_json() for f in self.findings],
            "speculative_config": st.spec_config,
            "expected_acceptance": st.expected.to_json() if st.expected else None,
            "lifetime": st.lifetime.to_json() if st.lifetime else None,
            "notes": st.notes,
            "unknown_fields": st.unknown_fields,
            "series": [x.to_json() for x in st.windows],
        }
