"""The exporter for engines that only log: `dflashctl metrics SOURCE --serve-metrics ADDR:PORT`.

It follows the source as `--follow` does (a log, stdin, a remote log over SSH: rotation and
truncation survived) and exposes what it reads through prometheus_client, so the rules of
`dflashctl alerts` cover engines whose numbers are only in a log:

    dflashctl_spec_drafts_total{source,engine,stream}                 counters, vLLM's meaning
    dflashctl_spec_draft_tokens_total{…}
    dflashctl_spec_accepted_tokens_total{…}
    dflashctl_spec_accepted_tokens_per_position_total{…,position}
    dflashctl_spec_mean_acceptance_length{…}                          the latest window
    dflashctl_spec_prefix_cache_hit_rate{…}                           the latest window, if known
    dflashctl_alarm{source,kind,severity,cause}                       1 while the verdict holds it
    dflashctl_exporter_last_window_timestamp_seconds{source}          when a window last arrived
    dflashctl_exporter_windows_total{source}

Windows that carry counts (vLLM's lines) add them; cumulative ones (llama.cpp's statistics, vLLM
V0) add their increase (a fall is a restart: the new total is the increase). SGLang's log lines
carry only `accept len` and `accept rate`: each window then counts as `PSEUDO_DRAFTS` drafts at
its own τ, so the recorded τ is the windows' mean. Memory is bounded by the streams seen. No
printing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from dflashctl.metrics.follow import FollowEvent
from dflashctl.metrics.window import Finding, SpecWindow

PSEUDO_DRAFTS = 100  # drafts a window without counts stands for (SGLang's log lines)


@dataclass
class _Totals:
    drafts: float = 0.0
    draft_tokens: float = 0.0
    accepted: float = 0.0
    per_position: dict[int, float] = field(default_factory=dict)
    last_cumulative: tuple[float, float, float] | None = None
    tau: float | None = None
    hit_rate: float | None = None


class SpecExporter:
    """What a followed source has shown, as Prometheus metric families (a custom collector)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._lock = threading.Lock()
        self._streams: dict[tuple[str, str], _Totals] = {}
        self._alarms: dict[tuple[str, str], Finding] = {}
        self._last_window: float | None = None
        self._windows = 0

    # -- what the follower sees ------------------------------------------------------------

    def tap(self, events: Iterable[FollowEvent]) -> Iterator[FollowEvent]:
        """Record each event, then pass it on (to the printer)."""
        for ev in events:
            self.record(ev)
            yield ev

    def record(self, ev: FollowEvent) -> None:
        if ev.kind in ("history", "end") and ev.report is not None:
            if ev.kind == "history":
                # the windows the follower kept (the latest ones): counters start from them,
                # which rate() does not mind; the window count is every window read
                for w in ev.report.state.windows:
                    self.observe(w)
                with self._lock:
                    self._windows = max(self._windows, ev.report.state.total_windows)
            self.set_alarms(ev.report.findings)
        elif ev.kind == "window" and ev.window is not None:
            self.observe(ev.window)
        elif ev.kind == "alarm" and ev.finding is not None:
            with self._lock:
                self._alarms[(ev.finding.kind, ev.finding.stream)] = ev.finding
        elif ev.kind == "cleared" and ev.finding is not None:
            with self._lock:
                self._alarms.pop((ev.finding.kind, ev.finding.stream), None)

    def set_alarms(self, findings: list[Finding]) -> None:
        with self._lock:
            self._alarms = {(f.kind, f.stream): f for f in findings if f.severity == "alarm"}

    def observe(self, w: SpecWindow) -> None:
        with self._lock:
            t = self._streams.setdefault((w.engine or "", w.stream or ""), _Totals())
            drafts, drafted, accepted = _counts(w)
            if drafts is not None and accepted is not None:
                if w.cumulative:
                    now = (drafts, drafted or 0.0, accepted)
                    before = t.last_cumulative
                    t.last_cumulative = now
                    if before is not None and now[0] >= before[0] and now[2] >= before[2]:
                        drafts, drafted, accepted = (now[0] - before[0], now[1] - before[1],
                                                     now[2] - before[2])  # fmt: skip
                t.drafts += drafts
                t.accepted += accepted
                t.draft_tokens += drafted or 0.0
                for i, p in enumerate(w.per_position or []):
                    if not w.cumulative:
                        t.per_position[i] = t.per_position.get(i, 0.0) + p * drafts
            t.tau = w.mean_acceptance_length
            t.hit_rate = w.prefix_cache_hit_rate
            self._last_window = time.time()
            self._windows += 1

    # -- what Prometheus reads --------------------------------------------------------------

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        labels = ["source", "engine", "stream"]
        fam = {
            "drafts": CounterMetricFamily(
                "dflashctl_spec_drafts", "Drafts proposed (vLLM's num_drafts)", labels=labels
            ),
            "draft_tokens": CounterMetricFamily(
                "dflashctl_spec_draft_tokens", "Draft tokens proposed", labels=labels
            ),
            "accepted": CounterMetricFamily(
                "dflashctl_spec_accepted_tokens", "Draft tokens accepted", labels=labels
            ),
        }
        per_pos = CounterMetricFamily(
            "dflashctl_spec_accepted_tokens_per_position",
            "Draft tokens accepted at each position",
            labels=[*labels, "position"],
        )
        tau = GaugeMetricFamily(
            "dflashctl_spec_mean_acceptance_length",
            "Mean acceptance length of the latest window",
            labels=labels,
        )
        hit = GaugeMetricFamily(
            "dflashctl_spec_prefix_cache_hit_rate",
            "Prefix cache hit rate of the latest window (0-1)",
            labels=labels,
        )
        alarm = GaugeMetricFamily(
            "dflashctl_alarm",
            "1 while dflashctl's verdict on the source holds this alarm",
            labels=["source", "kind", "severity", "stream", "cause"],
        )
        with self._lock:
            for (engine, stream), t in self._streams.items():
                values = [self.source, engine, stream]
                fam["drafts"].add_metric(values, t.drafts)
                fam["draft_tokens"].add_metric(values, t.draft_tokens)
                fam["accepted"].add_metric(values, t.accepted)
                for pos, v in sorted(t.per_position.items()):
                    per_pos.add_metric([*values, str(pos)], v)
                if t.tau is not None:
                    tau.add_metric(values, t.tau)
                if t.hit_rate is not None:
                    hit.add_metric(values, t.hit_rate)
            for (kind, stream), f in self._alarms.items():
                cause = f.likely_causes[0].cause.split(":")[0][:80] if f.likely_causes else ""
                alarm.add_metric([self.source, kind, f.severity, stream, cause], 1.0)
            last = GaugeMetricFamily(
                "dflashctl_exporter_last_window_timestamp_seconds",
                "Unix time the exporter last read a metrics window (absent: none yet)",
                labels=["source"],
            )
            if self._last_window is not None:
                last.add_metric([self.source], self._last_window)
            windows = CounterMetricFamily(
                "dflashctl_exporter_windows", "Metrics windows read", labels=["source"]
            )
            windows.add_metric([self.source], self._windows)
        yield from (*fam.values(), per_pos, tau, hit, alarm, last, windows)


def _counts(w: SpecWindow) -> tuple[float | None, float | None, float | None]:
    """(drafts, draft tokens, accepted tokens) of a window; SGLang's count-less lines stand for
    PSEUDO_DRAFTS drafts at their own τ."""
    if w.num_drafts is not None and w.accepted_tokens is not None:
        return float(w.num_drafts), _f(w.drafted_tokens), float(w.accepted_tokens)
    if w.mean_acceptance_length is not None:
        accepted = (w.mean_acceptance_length - 1.0) * PSEUDO_DRAFTS
        rate = w.draft_acceptance_rate
        return float(PSEUDO_DRAFTS), accepted / rate if rate else None, accepted
    return None, None, None


def _f(x: int | None) -> float | None:
    return float(x) if x is not None else None


def serve(exporter: SpecExporter, address: str, port: int) -> Any:
    """Start the /metrics HTTP server on a thread; returns the server (`.shutdown()` stops it)."""
    from prometheus_client import CollectorRegistry, start_http_server

    registry = CollectorRegistry(auto_describe=False)
    registry.register(exporter)
    server, _thread = start_http_server(port, addr=address, registry=registry)
    return server


def parse_listen(spec: str) -> tuple[str, int]:
    """`ADDR:PORT`, `:PORT` (loopback) or `[v6]:PORT` -> (address, port); UsageError otherwise."""
    from dflashctl.errors import UsageError

    text = spec.strip()
    addr, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise UsageError(
            f"--serve-metrics {spec!r} is not ADDR:PORT",
            "e.g. --serve-metrics 127.0.0.1:9400 (0.0.0.0:9400 for every interface)",
        )
    return (addr.strip("[]") or "127.0.0.1"), int(port_text)


def start(exporter: SpecExporter, spec: str) -> Any:
    """`serve` on `--serve-metrics` ADDR:PORT; an address that cannot be bound is one line."""
    from dflashctl.errors import UsageError

    address, port = parse_listen(spec)
    try:
        return serve(exporter, address, port)
    except OSError as e:
        raise UsageError(
            f"--serve-metrics {spec}: cannot listen there: {e.strerror or e}",
            "choose a free port, or an address of this machine",
        ) from None
