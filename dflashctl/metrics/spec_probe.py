"""Speculative-decoding metrics for exactly the window of the smoke requests.

Two sources, both built on `dflashctl.metrics` (its Prometheus parser, log scanner, window
pooling and alarm rules, so `smoke` judges acceptance exactly as `dflashctl metrics` does):

- `PromProbe` (preferred, exact): scrape `/metrics` before the first request and after the
  last (re-scraping until the counters settle), and take the delta of vLLM's cumulative
  `vllm:spec_decode_*` counters. SGLang exports gauges of its last decode-log interval instead.
- `LogProbe`: remember the log's size before the first request; afterwards read only the bytes
  written since, waiting up to one log interval for the metrics line that covers the end of
  the requests. A log that gains no line at all is a stale log (the field story's trap).

Outcomes (`SpecResult.state`): "speculating", "not_configured" (no spec counters at all: a
`--spec none` server), "no_drafts" (configured, but nothing drafted for our requests),
"no_lines" (the log said nothing), "unreadable". No printing.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from dflashctl.errors import InputError, ServerError
from dflashctl.metrics import prom
from dflashctl.metrics.alarms import evaluate
from dflashctl.metrics.analyze import open_log
from dflashctl.metrics.scanner import LogScanner
from dflashctl.metrics.thresholds import Thresholds
from dflashctl.metrics.window import Cause, Finding, MetricsState, SpecWindow, aggregate

Sleep = Callable[[float], None]
SETTLE_POLL = 0.1  # seconds between the scrapes that wait for the counters to settle
SETTLE_MAX = 3.0
LOG_POLL = 0.25
LOG_GRACE = 1.5  # beyond one interval: the log line is written just after the tick

SPECULATING = "speculating"
NOT_CONFIGURED = "not_configured"
NO_DRAFTS = "no_drafts"
NO_LINES = "no_lines"
UNREADABLE = "unreadable"


@dataclass
class SpecResult:
    source: str  # "prometheus" | "log"
    where: str  # the URL or path read
    state: str
    window: SpecWindow | None = None  # the smoke window, pooled
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    message: str = ""  # for unreadable / no_lines
    generated_tokens: float | None = None  # the server's own count over the window

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "where": self.where,
            "state": self.state,
            "message": self.message or None,
            "window": self.window.to_json() if self.window else None,
            "generated_tokens": self.generated_tokens,
            "notes": self.notes,
        }


def _cause_not_running(th: Thresholds) -> list[Cause]:
    return [
        Cause(
            "the requests were served without drafting: speculation disabled for them (too long "
            "a prompt, structured output, a sampling setting the drafter does not support) or "
            "the drafter was dropped after an error",
            "grep -nE 'speculat|dflash|drafter' SERVER_LOG | tail",
        ),
        Cause(
            "another engine answers at this address than the one you configured",
            f"curl {th.url or 'URL'} and compare with the server's launch command",
        ),
    ]


def judge_window(
    windows: list[SpecWindow], state: MetricsState, th: Thresholds
) -> tuple[SpecWindow | None, list[Finding]]:
    """Pool the windows of each stream, apply `dflashctl metrics` alarms, return the headline
    window (all streams pooled) and the findings."""
    streams: dict[str, list[SpecWindow]] = {}
    for w in windows:
        streams.setdefault(w.stream, []).append(w)
    pooled = [aggregate(ws) if len(ws) > 1 else ws[0] for ws in streams.values()]
    state.windows = pooled
    state.total_windows = len(windows)
    findings = evaluate(state, th)
    head = aggregate(pooled) if len(pooled) > 1 else pooled[0] if pooled else None
    return head, findings


# ---- Prometheus ---------------------------------------------------------------------------------


class PromProbe:
    """Counters before and after the requests. `explicit`: the user named the URL, so an
    unusable page is an error (exit 2) rather than a failed check."""

    def __init__(
        self, url: str, *, timeout: float, explicit: bool, th: Thresholds, sleep: Sleep
    ) -> None:
        self.url, self.timeout, self.explicit, self.th, self.sleep = (
            url,
            timeout,
            explicit,
            th,
            sleep,
        )
        self.before: prom.PromReading | None = None
        self.error: ServerError | None = None

    def _scrape(self) -> prom.PromReading:
        text = prom.fetch_text(self.url, self.timeout)
        return prom.parse_reading(text, at=datetime.now(), monotonic=time.monotonic(), url=self.url)

    def start(self) -> None:
        try:
            self.before = self._scrape()
        except ServerError as e:
            if self.explicit:
                raise
            self.error = e

    def finish(self, our_tokens: int | None = None) -> SpecResult:
        if self.before is None:
            e = self.error
            return SpecResult(
                "prometheus",
                self.url,
                UNREADABLE,
                message=f"cannot read the spec-decode counters: {e.message if e else 'no scrape'}",
            )
        b = self.before
        if not (b.has_vllm or b.has_sglang):
            return SpecResult(
                "prometheus",
                self.url,
                UNREADABLE,
                message=f"{self.url} has no vllm: or sglang: metrics (not an engine's /metrics)",
            )
        after = self._settle(b, our_tokens)
        if b.has_vllm:
            return self._vllm(b, after, our_tokens)
        return self._sglang(b, after)

    def _settle(self, before: prom.PromReading, our_tokens: int | None) -> prom.PromReading:
        """Scrape until the counters stop moving: an engine may record the last step's stats
        just after the client has the final chunk. Done at once when the server's generated
        tokens already include all of ours."""
        after = self._scrape()
        if (
            our_tokens is not None
            and before.gen_tokens is not None
            and after.gen_tokens is not None
            and after.gen_tokens - before.gen_tokens >= our_tokens
        ):
            return after
        waited = 0.0
        while waited < SETTLE_MAX:
            self.sleep(SETTLE_POLL)
            waited += SETTLE_POLL
            again = self._scrape()
            if (again.drafts, again.gen_tokens, again.accepted) == (
                after.drafts,
                after.gen_tokens,
                after.accepted,
            ):
                return again
            after = again
        return after

    def _state(self) -> MetricsState:
        return MetricsState(
            source=self.url, kind="prometheus", engine=None, windows=[], total_windows=0
        )

    def _vllm(self, b: prom.PromReading, a: prom.PromReading, our_tokens: int | None) -> SpecResult:
        res = SpecResult("prometheus", self.url, SPECULATING)
        if b.gen_tokens is not None and a.gen_tokens is not None and a.gen_tokens >= b.gen_tokens:
            res.generated_tokens = a.gen_tokens - b.gen_tokens
            if our_tokens is not None and res.generated_tokens > our_tokens * 1.05 + 8:
                res.notes.append(
                    f"the server generated {res.generated_tokens:.0f} tokens in the window, the "
                    f"smoke requests {our_tokens}: other traffic shared it"
                )
        st = self._state()
        st.engine = "vllm"
        if not (prom.has_vllm_spec(b) and prom.has_vllm_spec(a)):
            res.state = NOT_CONFIGURED
            st.spec_config = {"enabled": False, "engine": "vllm"}
            res.findings = evaluate(st, self.th)  # the no_speculation alarm with its causes
            return res
        w, reset = prom.window_between(b, a)
        if reset:
            res.notes.append("the counters went down during the smoke: the engine restarted")
        if w is None:
            res.state = NO_DRAFTS
            res.findings = [
                Finding(
                    "no_speculation",
                    "alarm",
                    "the server has spec-decode counters but drafted nothing for the smoke "
                    "requests: speculation is configured and not running",
                    _cause_not_running(self.th),
                )
            ]
            return res
        w.stream = ""
        res.window, res.findings = judge_window([w], st, self.th)
        return res

    def _sglang(self, b: prom.PromReading, a: prom.PromReading) -> SpecResult:
        res = SpecResult("prometheus", self.url, SPECULATING)
        st = self._state()
        st.engine = "sglang"
        w = prom.sglang_window(a)
        if w is None:
            res.state = NOT_CONFIGURED
            st.spec_config = {"enabled": False, "engine": "sglang"}
            res.findings = evaluate(st, self.th)
            return res
        if prom.sglang_idle(b, a):
            res.state = NO_DRAFTS
            res.findings = [
                Finding(
                    "no_speculation",
                    "alarm",
                    "SGLang made no verify calls during the smoke requests: speculation is "
                    "configured and not running",
                    _cause_not_running(self.th),
                )
            ]
            return res
        res.notes.append(
            "SGLang gauges describe its last decode-log interval, not exactly the smoke window"
        )
        res.window, res.findings = judge_window([w], st, self.th)
        return res


# ---- logs ---------------------------------------------------------------------------------------


class LocalLog:
    """A log file on this machine: its size, and the bytes from an offset on."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.ino: int | None = None

    def size(self) -> int:
        with open_log(self.path) as f:  # one-line errors for missing, directory, unreadable
            st = os.fstat(f.fileno())
        self.ino = st.st_ino
        return st.st_size

    def read_from(self, offset: int, limit: int) -> tuple[bytes, str | None]:
        """Bytes from `offset` (at most `limit`); a note when the file was rotated or truncated
        (then it is read from its start)."""
        with open_log(self.path) as f:
            st = os.fstat(f.fileno())
            note = None
            if self.ino is not None and st.st_ino != self.ino:
                offset, note = 0, "the log was rotated during the smoke; read the new file"
            elif st.st_size < offset:
                offset, note = 0, "the log was truncated during the smoke; read it from the start"
            f.seek(offset)
            data = f.read(limit) or b""
            return data, note

    def close(self) -> None:
        pass


class HostLog:
    """A log on a `dflashctl.hosts.host.Host` (over SSH: `dflashctl.hosts.ssh`), read in byte
    ranges."""

    def __init__(self, host: Any, path: str) -> None:
        self.host, self.path = host, path

    def size(self) -> int:
        st = self.host.stat(self.path)
        if st is None:
            raise InputError(
                f"{self.host.where(self.path)}: no such log file",
                "pass the engine's log path on that host, or use --metrics-url",
            )
        return int(st.size)

    def read_from(self, offset: int, limit: int) -> tuple[bytes, str | None]:
        size = self.size()
        note = None
        if size < offset:
            offset, note = 0, "the log shrank during the smoke (rotated or truncated); read anew"
        return self.host.read_range(self.path, offset, min(limit, size - offset)), note

    def close(self) -> None:
        self.host.close()


class LogProbe:
    """The log lines that follow the requests."""

    MAX_READ = 64 << 20

    def __init__(
        self,
        log: LocalLog | HostLog,
        where: str,
        *,
        interval: float,
        th: Thresholds,
        sleep: Sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log, self.where, self.interval, self.th = log, where, interval, th
        self.sleep, self.clock = sleep, clock
        self.start_offset = 0
        self.end_offset = 0

    def start(self) -> None:
        self.start_offset = self.log.size()

    def mark_end(self) -> None:
        """Call right after the last answer: windows logged past here cover the tail."""
        data, _ = self.log.read_from(self.start_offset, self.MAX_READ)
        self.end_offset = self.start_offset + len(data)

    def _scan(self) -> tuple[LogScanner, MetricsState, bytes, str | None]:
        data, note = self.log.read_from(self.start_offset, self.MAX_READ)
        scanner = LogScanner("auto")
        scanner.feed(data)
        scanner.close()
        return scanner, scanner.state(self.where, datetime.now()), data, note

    def finish(self) -> SpecResult:
        deadline = self.clock() + self.interval + min(LOG_GRACE, 0.5 * self.interval)
        tail_from = self.end_offset - self.start_offset
        while True:
            scanner, st, data, note = self._scan()
            ws = st.windows
            covered = any(w.offset >= tail_from for w in ws)
            sglang = scanner.engine == "sglang"  # logs while decoding, never after
            if covered or (sglang and ws) or self.clock() >= deadline:
                break
            self.sleep(LOG_POLL)
        res = SpecResult("log", self.where, SPECULATING)
        if note:
            res.notes.append(note)
        res.notes += st.notes
        if ws:
            if not covered and not sglang:
                res.notes.append(
                    f"no metrics line came within {self.interval:g} s after the last answer; "
                    "judged the lines logged during the requests"
                )
            res.notes.append(
                f"{len(ws)} metrics line(s) since the smoke began; log windows are the engine's "
                "intervals, so the first may include traffic from just before"
            )
            res.window, res.findings = judge_window(ws, st, self.th)
            return res
        if not data.strip():
            res.state = NO_LINES
            res.message = (
                f"the log gained no line during the smoke requests and {self.interval:g} s after: "
                "not the running server's log?"
            )
            res.findings = [
                Finding(
                    "stale",
                    "alarm",
                    f"{self.where} did not grow while the server answered: it is not the running "
                    "server's log (a stale log from an earlier launch, or another file)",
                    [
                        Cause(
                            "the log is from an earlier launch, or the server writes elsewhere",
                            "ls -l --time-style=full-iso LOG; ps -o pid,lstart,args -C vllm",
                        ),
                        Cause(
                            "stats logging is off (vLLM --disable-log-stats) and nothing else "
                            "was logged",
                            "pass the /metrics URL instead: --metrics-url URL/metrics",
                        ),
                    ],
                )
            ]
            return res
        generation = b"Avg generation throughput" in data or b"Decode batch" in data
        if generation or st.non_spec_decode_lines:
            res.state = NOT_CONFIGURED if st.non_spec_decode_lines else NO_DRAFTS
            findings = evaluate(st, self.th)
            if not any(f.kind == "no_speculation" for f in findings):
                findings = [
                    Finding(
                        "no_speculation",
                        "alarm",
                        "the engine logged generation for the smoke requests but no "
                        "SpecDecoding metrics line: speculation is not running",
                        [
                            Cause(
                                "the speculative flags never reached the engine "
                                "(`speculative_config=None`) or this is a --spec none server",
                                "grep -oE 'speculative_config=[^ ]+' LOG | tail -1",
                            ),
                            *_cause_not_running(self.th),
                        ],
                    )
                ]
            res.findings = findings
            return res
        res.state = NO_LINES
        res.message = (
            f"the log grew by {len(data)} bytes but holds no metrics line for the smoke "
            f"requests within {self.interval:g} s"
        )
        res.findings = [
            Finding(
                "no_metrics",
                "alarm",
                res.message + ": nothing shows that speculation ran",
                [
                    Cause(
                        "the log interval is longer than --log-interval "
                        "(VLLM_LOG_STATS_INTERVAL), or stats logging is off",
                        "raise --log-interval, or pass --metrics-url URL/metrics",
                    )
                ],
            )
        ]
        return res
