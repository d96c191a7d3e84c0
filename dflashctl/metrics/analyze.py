"""The `dflashctl metrics` domain entry points: open a source, scan it, judge it.

- `analyze_source(source, opts)`: a log file, `-` (stdin) or an http(s) /metrics URL.
- `analyze_chunks(chunks, source=…)`: any iterator of byte chunks or byte lines; the seam a
  remote (SSH) reader plugs into.
- `follow_source` lives in `follow.py`.

Returns `MetricsReport`s and raises `DflashError`s; never prints or exits.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

from dflashctl.errors import DflashError, InputError, UsageError, require_finite
from dflashctl.metrics.alarms import evaluate
from dflashctl.metrics.scanner import ENGINES, LogScanner
from dflashctl.metrics.summaries import SummaryScan, engine_hint
from dflashctl.metrics.thresholds import Thresholds
from dflashctl.metrics.window import Cause, Expected, MetricsReport, MetricsState

CHUNK = 8 << 20


@dataclass
class MetricsOptions:
    engine: str = "auto"
    interval: float | None = None  # seconds between scrapes; for logs, between metrics lines
    timeout: float = 10.0
    drafter: str | None = None
    min_acceptance_length: float | None = None
    host: str | None = None
    max_windows: int = 2000
    ssh: Any = None  # hosts.ssh.SSHOptions for --host (ssh_config, accepting a new host key)

    def validate(self, source: str) -> None:
        require_finite(
            interval=self.interval,
            timeout=self.timeout,
            min_acceptance_length=self.min_acceptance_length,
        )
        if self.engine not in ENGINES:
            raise UsageError(
                f"unknown --engine {self.engine!r}", "use one of: " + ", ".join(ENGINES)
            )
        if self.interval is not None and self.interval <= 0:
            raise UsageError("--interval must be a positive number of seconds")
        if self.timeout <= 0:
            raise UsageError("--timeout must be a positive number of seconds")
        if self.min_acceptance_length is not None and self.min_acceptance_length < 1:
            raise UsageError(
                "--min-acceptance-length counts the bonus token, so it is at least 1.0",
                "e.g. --min-acceptance-length 2.5",
            )
        if self.host and (is_url(source) or source == "-"):
            raise UsageError(
                "--host names where the log file lives; it does not go with a URL or '-'",
                "dflashctl metrics /path/to/server.log --host HOST",
            )
        if is_url(source) and self.engine != "auto":
            pass  # the page says which engine it is; --engine is only a hint there


def is_url(source: str) -> bool:
    return source.startswith(("http://", "https://"))


# ---- the registry's expected range ---------------------------------------------------------


def expected_range(name: str) -> tuple[float | None, float | None]:
    """(min, max) expected mean acceptance length for a registry drafter, or (None, None)."""
    from dflashctl.drafter.registry import get_entry

    exp = get_entry(name).expected_acceptance
    return (exp.min, exp.max) if exp is not None else (None, None)


def thresholds_for(source: str, opts: MetricsOptions, *, follow: bool = False) -> Thresholds:
    lo = hi = None
    if opts.drafter:
        lo, hi = expected_range(opts.drafter)
    return Thresholds(
        min_acceptance_length=opts.min_acceptance_length,
        expected_min=lo,
        expected_max=hi,
        drafter=opts.drafter,
        interval=opts.interval,
        follow=follow,
        url=source if is_url(source) else None,
        source=source if not is_url(source) and source != "-" else "LOG",
    )


def judge(state: MetricsState, th: Thresholds, opts: MetricsOptions) -> MetricsReport:
    th = with_expected(state, th, opts)
    if opts.drafter and th.expected_min is None:
        state.notes.append(f"the registry has no expected acceptance range for {opts.drafter}")
    findings = evaluate(state, th)
    for f in findings:
        if f.severity == "alarm":
            f.likely_causes += known_defect_causes(state, f.kind)
    return MetricsReport(state, findings)


def with_expected(state: MetricsState, th: Thresholds, opts: MetricsOptions) -> Thresholds:
    """Find the drafter's expected range when neither `--drafter` nor a floor was given (the
    log's config line, a lock file, a deployment record: metrics/expected.py), record where it
    came from in `state.expected`, and say so when none is known."""
    from dflashctl.metrics.expected import find_expected

    if opts.drafter:
        from dflashctl.drafter.registry import get_entry

        block = getattr(get_entry(opts.drafter), "block_size", None)
        state.expected = Expected(opts.drafter, th.expected_min, th.expected_max, "--drafter")
        if th.block_size is None and isinstance(block, int):
            th = replace(th, block_size=block)
        return th
    found = None
    if state.kind == "log" and (state.windows or state.spec_config):
        found = find_expected(
            state,
            source=state.source[len(opts.host) + 1 :] if opts.host else state.source,
            host=opts.host,
        )
    elif state.kind == "prometheus" and not opts.host:
        from dflashctl.metrics.expected import by_server

        with contextlib.suppress(DflashError):  # a URL no record matches: nothing known
            found = by_server(state.source)  # a server dflashctl started knows its drafter
    if found is not None and found.expected.min is not None:
        state.expected = found.expected
        return replace(
            th,
            expected_min=found.expected.min,
            expected_max=found.expected.max,
            drafter=found.expected.drafter,
            block_size=found.block_size,
        )
    if th.min_acceptance_length is not None:
        return th
    if state.windows:
        named = ""
        if found is not None:
            named = f" ({found.expected.drafter} has no measured range in the registry)"
        state.notes.append(
            "no expected acceptance range is known for this drafter"
            f"{named}: only collapse, cliffs, decay and crashes were judged, so a drop against "
            "its usual range would pass; pass --drafter NAME or --min-acceptance-length X"
        )
    return th


def known_defect_causes(state: MetricsState, alarm_kind: str) -> list[Cause]:
    """Known engine defects (dflashctl/defects/defects.yaml) that can explain an alarm, for the
    engine version the log names. Without a version nothing is claimed: every vLLM defect would be
    "possible" and bury the causes that the metrics themselves point to."""
    if state.engine is None or state.engine_version is None:
        return []
    from dflashctl.defects.match import likely_causes
    from dflashctl.defects.predicates import Facts

    launch = None
    if state.launch_fields or state.spec_config:
        from dflashctl.defects.launch import from_vllm_config

        cfg = state.spec_config or {}
        launch = from_vllm_config({**state.launch_fields, **{
            k: cfg[k] for k in ("method", "draft_sample_method") if k in cfg
        }})  # fmt: skip
    facts = Facts(
        engine=state.engine,
        version=state.engine_version,
        build=state.engine_build,
        launch=launch,
    )
    try:
        found = likely_causes(facts, alarm_kind)
    except DflashError:
        return []  # an unparsable version: the rules below still name the causes
    return [Cause(cause, check) for cause, check in found]


# ---- logs -----------------------------------------------------------------------------------


def open_log(path: Path) -> BinaryIO:
    """The log file, opened only when it is a regular file (a device such as /dev/zero would
    never end, a FIFO could hang): a pipe is read through `-` (stdin). The caller closes it."""
    from dflashctl.files import open_regular

    if not os.path.lexists(path):
        raise InputError(
            f"no such log file: {path}",
            "for a server's metrics pass its URL: http://HOST:PORT/metrics",
        )
    try:
        return open_regular(path, "log file")  # type: ignore[return-value]
    except InputError as e:
        if not e.message.startswith("refusing"):
            raise
        if os.path.isdir(path):
            hint = "name a log file in it, or pass a server's URL: http://HOST:PORT/metrics"
        elif "FIFO" in e.message or "socket" in e.message:
            hint = "to read a pipe, send it to stdin: ... | dflashctl metrics -"
        else:
            hint = "name a regular log file, or send the log to stdin: dflashctl metrics -"
        raise InputError(e.message, hint) from None


def read_chunks(f: BinaryIO, size: int = CHUNK) -> Iterator[bytes]:
    """Chunks of a file or pipe. Full chunks reuse one buffer: consumers must copy what they
    keep (the scanner keeps slices, which are copies)."""
    buf = bytearray(size)
    view = memoryview(buf)
    while True:
        try:
            n = f.readinto(buf)  # type: ignore[attr-defined]
        except OSError as e:
            raise InputError(f"reading the log failed: {e.strerror or e}") from None
        if not n:
            return
        yield buf if n == size else bytes(view[:n])  # type: ignore[misc]


def analyze_chunks(
    chunks: Iterable[bytes],
    *,
    source: str,
    opts: MetricsOptions,
    ref: datetime | None = None,
    th: Thresholds | None = None,
) -> MetricsReport:
    """Judge a log delivered as byte chunks or byte lines (local, stdin or remote)."""
    th = th or thresholds_for(source, opts)
    scanner = LogScanner(opts.engine, max_windows=opts.max_windows)
    others = SummaryScan(opts.engine, max_windows=opts.max_windows)
    for chunk in chunks:
        scanner.feed(chunk)
        if not scanner.total_windows:  # the engine's own lines win: the rest is not read
            others.feed(chunk)
    scanner.close()
    others.close()
    return judge(with_summaries(scanner.state(source, ref), others), th, opts)


def with_summaries(state: MetricsState, others: SummaryScan) -> MetricsState:
    """The engine's interval lines when the log has them; else what the other formats read
    (a bench summary, llama.cpp's lines); else the lines that look like figures, unread."""
    if state.windows:
        return state
    found = others.windows()
    if found:
        state.windows = found
        state.total_windows = len(found)
        state.engine = found[-1].engine
        return state
    state.figure_lines = others.figure_lines
    if others.figure_lines:
        state.engine_hint = engine_hint("\n".join(others.figure_lines)) or engine_hint(
            others.head.decode("utf-8", "replace")
        )
    return state


def analyze_source(
    source: str, opts: MetricsOptions, *, sleep: Callable[[float], None] = time.sleep
) -> MetricsReport:
    opts.validate(source)
    th = thresholds_for(source, opts)
    if is_url(source):
        return analyze_url(source, opts, th, sleep=sleep)
    if source == "-":
        if sys.stdin is None or sys.stdin.closed:
            raise InputError(
                "stdin is closed: nothing to read for '-'",
                "pipe a log in: ... | dflashctl metrics -",
            )
        stdin = sys.stdin.buffer
        return analyze_chunks(read_chunks(stdin), source="stdin", opts=opts, th=th)
    if opts.host:
        return analyze_remote(source, opts, th)
    path = Path(source)
    with open_log(path) as f:
        try:
            ref = datetime.fromtimestamp(os.fstat(f.fileno()).st_mtime)
        except OSError:
            ref = None
        return analyze_chunks(read_chunks(f), source=source, opts=opts, ref=ref, th=th)


def analyze_remote(source: str, opts: MetricsOptions, th: Thresholds) -> MetricsReport:
    """A log on an SSH host, streamed over SFTP in ranges: never copied whole, memory flat."""
    from dflashctl.hosts import open_host

    assert opts.host
    with open_host(opts.host, ssh=opts.ssh) as host:
        st = host.stat(source)
        if st is None:
            raise InputError(f"no such log file: {opts.host}:{source}")
        ref = datetime.fromtimestamp(st.mtime) if st.mtime else None
        return analyze_chunks(
            host.iter_file(source), source=f"{opts.host}:{source}", opts=opts, ref=ref, th=th
        )


# ---- Prometheus ------------------------------------------------------------------------------


def _from_server_info(
    url: str, info: dict[str, Any], th: Thresholds, opts: MetricsOptions
) -> MetricsReport:
    """SGLang without --enable-metrics: its /server_info (avg_spec_accept_length per rank)."""
    from dflashctl.metrics import prom

    base = url.removesuffix("/metrics")
    state = MetricsState(source=f"{base}/server_info", kind="prometheus", engine="sglang",
                         windows=[], total_windows=0)  # fmt: skip
    algo = info.get("speculative_algorithm")
    if algo in (None, "", "NONE", "None"):
        state.spec_config = {"enabled": False, "engine": "sglang"}
        return judge(state, th, opts)
    state.spec_config = {"enabled": True, "engine": "sglang", "method": str(algo).lower()}
    state.windows = prom.server_info_windows(info, datetime.now())
    state.total_windows = len(state.windows)
    state.notes.append(
        "read from SGLang's /server_info (no /metrics: start it with --enable-metrics for "
        "windows and rates): avg_spec_accept_length since start or the last cache flush"
    )
    if not state.windows:
        state.notes.append(f"{algo} is on but no verify step has run yet: send traffic")
    return judge(state, th, opts)


def analyze_url(
    url: str,
    opts: MetricsOptions,
    th: Thresholds,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> MetricsReport:
    """Two scrapes `--interval` apart (vLLM counters) or one (SGLang gauges)."""
    from dflashctl.metrics import prom

    def scrape() -> prom.PromReading:
        text = prom.fetch_text(url, opts.timeout)
        return prom.parse_reading(text, at=datetime.now(), monotonic=time.monotonic(), url=url)

    try:
        first = scrape()
    except prom.PageNotFound:
        info = prom.fetch_server_info(url.removesuffix("/metrics"), opts.timeout)
        if info is None:
            raise
        return _from_server_info(url, info, th, opts)
    state = MetricsState(source=url, kind="prometheus", engine=None, windows=[], total_windows=0)
    if not (first.has_vllm or first.has_sglang):
        raise InputError(
            f"{url} serves Prometheus text but no vllm:, sglang: or llamacpp: metrics",
            "point at the engine's own /metrics (vLLM API port; SGLang with --enable-metrics; "
            "llama.cpp's server with --metrics)",
        )
    if first.engine == "llama.cpp" and not prom.has_vllm_spec(first):
        raise InputError(
            f"{url} is llama.cpp's server without speculative-decoding counters",
            "its /metrics has them since ggml-org/llama.cpp#26389; for an older build read its "
            "log instead (dflashctl metrics LOG: the slot lines and `statistics draft-*`)",
        )
    if first.has_vllm and not prom.has_vllm_spec(first):
        state.engine = first.engine
        state.spec_config = {"enabled": False, "engine": first.engine}
        return judge(state, th, opts)
    if prom.has_vllm_spec(first):
        state.engine = first.engine
        interval = opts.interval or 10.0
        sleep(interval)
        second = scrape()
        w, reset = prom.window_between(first, second)
        state.lifetime = prom.lifetime_window(second)
        if reset:
            state.notes.append("the counters went down between the scrapes: the engine restarted")
        if w is not None:
            state.windows = [w]
        elif state.lifetime is not None:
            state.windows = [state.lifetime]
            state.notes.append(
                f"no drafts in the {interval:g} s between the scrapes (idle): judged on the "
                "totals since the engine started; send traffic or lengthen --interval"
            )
        state.total_windows = len(state.windows)
        return judge(state, th, opts)
    # SGLang: gauges describe the scheduler's last logging interval.
    state.engine = "sglang"
    sw = prom.sglang_window(first)
    if sw is None:
        state.spec_config = {"enabled": False, "engine": "sglang"}
    elif prom.sglang_idle(None, first):
        state.notes.append("SGLang reports no verify calls yet: no traffic since start")
    else:
        state.windows = [sw]
        state.total_windows = 1
        state.notes.append(
            "SGLang gauges describe its last decode-log interval; `accept rate` semantics changed "
            "at 0.5.11 (0.5.6-0.5.10 counted the bonus token)"
        )
    return judge(state, th, opts)
