"""`--follow`: watch a log or a /metrics URL live and report each new window and alarm.

`tail_file` survives rotation (the path now names another inode: the old file is drained, the
new one read from its start) and truncation (copytruncate: size below our position, so read
again from 0). It polls every 0.2 s, so a new line is judged well within a second. The first
pass over the existing content is history: one `history` event summarises it, then each new
window, alarm and alarm clearing is an event. Generators only: no printing, no exiting.
"""

from __future__ import annotations

import os
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from dflashctl.errors import DflashError, InputError
from dflashctl.metrics.alarms import evaluate
from dflashctl.metrics.analyze import (
    MetricsOptions,
    is_url,
    judge,
    open_log,
    thresholds_for,
)
from dflashctl.metrics.scanner import LogScanner
from dflashctl.metrics.thresholds import Thresholds
from dflashctl.metrics.window import Finding, MetricsReport, MetricsState, SpecWindow

ROTATED = "rotated"
TRUNCATED = "truncated"
POLL = 0.2

StopFn = Callable[[], bool]


@dataclass
class FollowEvent:
    """kind: history | window | alarm | cleared | restart | rotated | truncated | error | end."""

    kind: str
    window: SpecWindow | None = None
    finding: Finding | None = None
    report: MetricsReport | None = None
    message: str = ""


def tail_file(
    path: Path,
    *,
    poll: float = POLL,
    chunk_size: int = 1 << 20,
    should_stop: StopFn | None = None,
) -> Iterator[bytes | str | None]:
    """Yield new bytes as they are written; `None` when idle; ROTATED / TRUNCATED markers."""
    f = open_log(path)
    ino = os.fstat(f.fileno()).st_ino
    pos = 0
    try:
        while not (should_stop and should_stop()):
            data = f.read(chunk_size)
            if data:
                pos += len(data)
                yield data
                continue
            try:
                st = os.stat(path)
            except FileNotFoundError:
                st = None  # mid-rotation: keep the old file until the new one appears
            except OSError:
                st = None
            if st is not None and st.st_ino != ino:
                rest = f.read()  # lines written to the old file before the writer switched
                while rest:
                    yield rest
                    rest = f.read()
                try:
                    new = open_log(path)
                except (OSError, InputError):
                    yield None
                    time.sleep(poll)
                    continue
                f.close()
                f, ino, pos = new, os.fstat(new.fileno()).st_ino, 0
                yield ROTATED
                continue
            if st is not None and st.st_size < pos:
                f.seek(0)
                pos = 0
                yield TRUNCATED
                continue
            yield None
            time.sleep(poll)
    finally:
        f.close()


def stdin_chunks(should_stop: StopFn | None = None) -> Iterator[bytes | str | None]:
    if sys.stdin is None or sys.stdin.closed:
        raise InputError(
            "stdin is closed: nothing to follow for '-'",
            "pipe a log in: ... | dflashctl metrics --follow -",
        )
    stream = sys.stdin.buffer
    read1 = getattr(stream, "read1", None)
    while not (should_stop and should_stop()):
        data = read1(1 << 16) if read1 else stream.read(1 << 16)
        if not data:
            return
        yield data


def _key(f: Finding) -> tuple[str, str]:
    return (f.kind, f.stream)


class _AlarmDiff:
    """Which findings are new or gone since the last evaluation."""

    def __init__(self) -> None:
        self.active: dict[tuple[str, str], Finding] = {}

    def update(self, findings: list[Finding]) -> list[FollowEvent]:
        now = {_key(f): f for f in findings}
        events = [FollowEvent("alarm", finding=f) for k, f in now.items() if k not in self.active]
        events += [
            FollowEvent("cleared", finding=f) for k, f in self.active.items() if k not in now
        ]
        self.active = now
        return events


def follow_log(
    chunks: Iterable[bytes | str | None],
    *,
    source: str,
    opts: MetricsOptions,
    th: Thresholds,
    live_from_start: bool = False,
) -> Iterator[FollowEvent]:
    """Events from a live log. `chunks` yields bytes, None when idle, or ROTATED/TRUNCATED.

    Any chunk iterator works (a local tail, stdin, a remote tail over SSH).
    """
    scanner = LogScanner(opts.engine, max_windows=opts.max_windows)
    diff = _AlarmDiff()
    live = live_from_start
    seen_events = 0

    def report() -> MetricsReport:
        return judge(scanner.state(source, datetime.now()), th, opts)

    for item in chunks:
        if item is None:
            if not live:
                live = True
                scanner.new_windows()  # history is summarised, not replayed
                seen_events = len(scanner.events)
                rep = report()
                diff.update(rep.findings)
                yield FollowEvent("history", report=rep)
            continue
        if isinstance(item, str):
            scanner.reset_stream()
            yield FollowEvent(item)
            continue
        scanner.feed(item)
        if not live:
            continue
        if len(scanner.events) > seen_events:
            seen_events = len(scanner.events)
            yield FollowEvent("restart", message="the engine started again")
        fresh = scanner.new_windows()
        rep = report()
        for w in fresh:
            yield FollowEvent("window", window=w)
        yield from diff.update(rep.findings)
    scanner.close()
    final = MetricsReport(scanner.state(source, datetime.now()), [])
    final.findings = evaluate(final.state, th)
    yield FollowEvent("end", report=final)


def follow_url(
    url: str,
    *,
    opts: MetricsOptions,
    th: Thresholds,
    should_stop: StopFn | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[FollowEvent]:
    """Scrape every `--interval` seconds; each scrape-to-scrape delta is a window."""
    from dflashctl.metrics import prom

    interval = opts.interval or 10.0
    windows: deque[SpecWindow] = deque(maxlen=opts.max_windows)
    diff = _AlarmDiff()
    prev: prom.PromReading | None = None
    total = 0

    def state(lifetime: SpecWindow | None) -> MetricsState:
        st = MetricsState(
            source=url,
            kind="prometheus",
            engine=None if prev is None else ("vllm" if prev.has_vllm else "sglang"),
            windows=list(windows),
            total_windows=total,
            lifetime=lifetime,
        )
        return st

    first = True
    while not (should_stop and should_stop()):
        try:
            text = prom.fetch_text(url, opts.timeout)
            cur = prom.parse_reading(text, at=datetime.now(), monotonic=time.monotonic(), url=url)
        except DflashError as e:
            if first:
                raise
            yield FollowEvent("error", message=e.message)
            sleep(interval)
            continue
        lifetime = prom.lifetime_window(cur)
        w: SpecWindow | None = None
        if prom.has_vllm_spec(cur):
            if prev is not None:
                w, reset = prom.window_between(prev, cur)
                if reset:
                    yield FollowEvent("restart", message="the counters went down: engine restarted")
        elif cur.has_sglang and not prom.sglang_idle(prev, cur):
            w = prom.sglang_window(cur)
        prev = cur
        if w is not None:
            windows.append(w)
            total += 1
        st = state(lifetime)
        if first:
            first = False
            if not (cur.has_vllm or cur.has_sglang):
                raise InputError(
                    f"{url} serves Prometheus text but no vllm: or sglang: metrics",
                    "point at the engine's own /metrics (vLLM API port; SGLang with "
                    "--enable-metrics)",
                )
            if cur.has_vllm and not prom.has_vllm_spec(cur):
                st.spec_config = {"enabled": False, "engine": "vllm"}
            rep = judge(st, th, opts) if (st.windows or st.spec_config) else MetricsReport(st, [])
            diff.update(rep.findings)
            yield FollowEvent("history", report=rep)
        elif w is not None:
            rep = judge(st, th, opts)
            yield FollowEvent("window", window=w)
            yield from diff.update(rep.findings)
        sleep(interval)


def follow_source(
    source: str, opts: MetricsOptions, *, should_stop: StopFn | None = None
) -> Iterator[FollowEvent]:
    """Follow a log file, stdin (`-`) or a /metrics URL."""
    opts.validate(source)
    th = thresholds_for(source, opts, follow=True)
    if is_url(source):
        return follow_url(source, opts=opts, th=th, should_stop=should_stop)
    if source == "-":
        return follow_log(
            stdin_chunks(should_stop), source="stdin", opts=opts, th=th, live_from_start=True
        )
    if opts.host:
        return follow_log(
            _remote_tail(source, opts.host, should_stop, opts.ssh),
            source=f"{opts.host}:{source}",
            opts=opts,
            th=th,
        )
    path = Path(source)
    open_log(path).close()  # fail now (exit 2) on a missing or unreadable file
    return follow_log(tail_file(path, should_stop=should_stop), source=source, opts=opts, th=th)


def _remote_tail(
    source: str, host_spec: str, should_stop: StopFn | None, ssh: Any = None
) -> Iterator[bytes | str | None]:
    """`tail_file` for a log on an SSH host (`tail -F` there; rotation and truncation markers)."""
    from dflashctl.hosts import open_host

    host = open_host(host_spec, ssh=ssh)
    try:
        if host.stat(source) is None:  # fail now (exit 2) on a missing file
            raise InputError(f"no such log file: {host_spec}:{source}")
        yield from host.follow(source, should_stop=should_stop)  # type: ignore[attr-defined]
    finally:
        host.close()
