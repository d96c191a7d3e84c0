"""Stream a log of any size, chunk by chunk, and keep only what the verdict needs.

`LogScanner.feed(chunk)` takes bytes cut anywhere (file reads, a pipe, an SSH channel, lines
from a remote tail): any iterator of byte chunks or byte lines plugs in. Memory stays flat:
the carried partial line is capped, and only the latest `max_windows` metrics lines are kept
(raw bytes, parsed lazily).

Speed: a log is mostly lines we ignore, so the scan never looks at every line. Each chunk is
searched with `bytes.find` for the metrics needle (`SpecDecoding metrics`, `Decode batch`), and
once a vLLM needle is locked, by memchr of its rarest byte (needle.py: the same positions);
start-up, busy and fatal lines are looked for with `bytes.rfind` only where they can matter:
after the last metrics line of each chunk, and between two metrics lines when the process
changed or the gap is large (an engine restart writes both). A partial last line is left in the
carry until its newline arrives. No I/O, no printing.
"""

from __future__ import annotations

import re
from collections import deque
from datetime import datetime, timedelta
from typing import Any

from dflashctl.errors import InputError
from dflashctl.metrics.log_parse import (
    SERVER_VERSION_RE,
    V1_ENGINE_VERSION_RE,
    RawTs,
    clean,
    companion_busy,
    kv_cache_build,
    line_info,
    parse_companion,
    parse_sglang,
    parse_spec_config,
    parse_vllm,
    unwrap_json,
    v0_window,
)
from dflashctl.metrics.needle import SAMPLE, NeedleFinder
from dflashctl.metrics.window import Marker, MetricsState, SpecWindow

ENGINES = ("auto", "vllm", "sglang")

METRIC_NEEDLES = {
    "vllm": (b"SpecDecoding metrics", b"Speculative metrics"),
    "sglang": (b"Decode batch",),
}
STARTUP_NEEDLES = {
    "vllm": (b"Starting vLLM", b"server version"),
    "sglang": (b"ready to roll", b"server_args="),
}
CONFIG_NEEDLES = {"vllm": (b"speculative_config=",), "sglang": (b"server_args=",)}
# vLLM's start-up warning that switches prefix reuse off for a drafter on a hybrid target
# (vllm#57032): "... no KV cache group could be identified as the draft model's ..."
REUSE_OFF_NEEDLE = b"no KV cache group could be identified as the draft model"
BUSY_NEEDLES = {
    "vllm": (b"Avg prompt throughput", b'"POST '),
    "sglang": (b"Prefill batch", b'"POST '),
}
# An engine's death (vLLM V0 to 0.34, SGLang): the first of these after the last metrics line,
# or between two metrics lines, is reported as an `engine_crash`. A bare `Traceback` is not on
# the list: request errors (a cancelled stream) print tracebacks on a healthy server.
FATAL_NEEDLES = (
    b"hit an exception",  # vLLM "WorkerProc hit an exception.", SGLang "Scheduler hit an …"
    b"encountered a fatal error",  # vLLM V1 "EngineCore encountered a fatal error."
    b"EngineDeadError",  # vLLM V1, and V0's AsyncEngineDeadError
    b"died unexpectedly",
    b"initialization failed",
    b"Received sigquit from a child process",  # SGLang
    b"out of memory",
)
# An orderly stop: vLLM 0.3x logs `[shutdown]` steps (and then, in the API server, an
# `EngineDeadError` traceback as the engine it just stopped goes away); uvicorn "Shutting down".
# A fatal needle after one of these in the same region is part of the stop, not a crash.
SHUTDOWN_NEEDLES = (
    b"[shutdown]",
    b"signal=SIGTERM",
    b"signal=SIGINT",
    b"shutdown triggered",
    b"Shutting down",
)
# The exception a crash ends with ("RuntimeError: CUDA error: …"), looked for after the line
_BATCH_LIMIT_B = re.compile(rb"disable_by_batch_size['\"]?\s*[:=]\s*(\d+)")
_EXC_B = re.compile(rb"(?m)(?:^|\] |\) )((?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit)): ")

# vLLM's engine config line: the launch settings the known-defect rules read
_LAUNCH_FIELD_RE = re.compile(
    r"\b(enable_prefix_caching|enforce_eager|tensor_parallel_size)=(True|False|\d+)\b"
)
LOOKBACK = 1024  # bytes kept before a metrics line, where its `Engine 000:` line is
FORWARD = 1536  # bytes kept from the needle on: the metrics line (cut at its newline later)
MAX_LINE = 1 << 20  # a "line" longer than this is not a metrics line: drop it
GAP_SEARCH_BYTES = 16 << 10  # look for a restart between two metrics lines this far apart
_TS_B = re.compile(
    rb"(?m)(?:^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)|(?:(?:INFO|WARNING|ERROR|DEBUG|CRITICAL) "
    rb"\d\d-\d\d \d\d:\d\d:\d\d)"
)
_VLLM_PREFIX_B = re.compile(rb"(?:INFO|WARNING|ERROR|DEBUG) \d\d-\d\d \d\d:\d\d:\d\d")
_SGL_PREFIX_B = re.compile(rb"(?m)^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
# Control bytes that never appear in a text log (TAB, LF, FF, CR, ESC are allowed).
_CTRL = bytes(b for b in range(32) if b not in (9, 10, 12, 13, 27)) + b"\x7f"


class LogScanner:
    """Incremental scanner: `feed()` chunks, then `close()` and `state()`."""

    def __init__(self, engine: str = "auto", *, max_windows: int = 2000) -> None:
        if engine not in ENGINES:
            raise ValueError(engine)
        self.engine: str | None = None if engine == "auto" else engine
        self._forced = self.engine is not None
        self._metric_needles: tuple[bytes, ...] = ()
        self._startup_needles: tuple[bytes, ...] = ()
        self._config_needles: tuple[bytes, ...] = ()
        self._busy_needles: tuple[bytes, ...] = ()
        self._set_needles(lock=None)
        # (seq, offset, launch, look-back bytes + metrics line, where the metrics line starts)
        self._records: deque[tuple[int, int, int, bytes, int]] = deque(maxlen=max_windows)
        self._windows: deque[tuple[int, SpecWindow | None, RawTs | None]] = deque(
            maxlen=max_windows
        )
        self._parsed_seq = 0
        self.total_windows = 0
        self.launch = 0
        self.launch_started: dict[int, bool] = {0: False}
        self.bytes_read = 0
        self._carry = b""
        self._skip_long = False
        self._last_key: bytes | None = None
        self._key_dist = -1  # where the metrics needle sits in this process's lines
        self._needle_finder: NeedleFinder | None = None
        self._last_win_end = -1
        self._pending_startup: tuple[int, bytes] | None = None
        self._busy: dict[bytes, tuple[int, bytes]] = {}
        self._busy_lines = 0  # busy lines after the last metrics line
        self._fatal: tuple[int, bytes] | None = None  # the first since the last window
        self._fatal_between: deque[tuple[int, bytes]] = deque(maxlen=8)  # before later windows
        self._newest: tuple[int, bytes] | None = None
        self._config: tuple[int, bytes] | None = None
        self._reuse_off: tuple[int, bytes] | None = None  # vLLM's vllm#57032 start-up warning
        self._batch_limit: int | None = None  # vLLM `disable_by_batch_size` at start-up
        self._version: str | None = None  # vLLM's "server version X" of the latest launch
        self._build: str | None = None  # "cpu" | "gpu": the companion's "CPU/GPU KV cache usage"
        self._prev_tail = b""
        self._sampled = 0
        self._binary = 0
        self._first = True
        self._v0_prev: dict[str, tuple[int, int, int, int]] = {}
        self._engines_of: dict[str, set[str]] = {}  # process → engine labels seen
        self._delivered = 0  # windows handed out by new_windows()
        self.non_spec_decode_lines = 0
        self.unparsed_lines = 0
        self.skipped_windows = 0
        self.incomplete_tail = 0
        self.long_lines_dropped = 0
        self.unknown_fields: set[str] = set()
        self.events: list[str] = []  # "restart" events for follow mode

    # ---- needles -------------------------------------------------------------------------

    def _set_needles(self, lock: bytes | None) -> None:
        engines = (self.engine,) if self.engine else ("vllm", "sglang")
        self._metric_needles = (
            (lock,) if lock else tuple(n for e in engines for n in METRIC_NEEDLES[e])
        )
        self._startup_needles = tuple(n for e in engines for n in STARTUP_NEEDLES[e])
        self._config_needles = tuple(dict.fromkeys(n for e in engines for n in CONFIG_NEEDLES[e]))
        self._busy_needles = tuple(dict.fromkeys(n for e in engines for n in BUSY_NEEDLES[e]))

    def _detect(self, chunk: bytes) -> None:
        sample = chunk[:65536]
        v = len(_VLLM_PREFIX_B.findall(sample))
        s = len(_SGL_PREFIX_B.findall(sample))
        if v >= 3 and s == 0:
            self.engine = "vllm"
        elif s >= 3 and v == 0:
            self.engine = "sglang"
        if self.engine:
            self._set_needles(lock=None)

    # ---- feeding -------------------------------------------------------------------------

    def feed(self, chunk: bytes) -> None:
        """Scan the next bytes of the log. Lines may be cut anywhere between calls."""
        if not chunk:
            return
        if self._first:
            self._check_text(chunk)
            self._first = False
        self._sample(chunk)
        if self.engine is None:
            self._detect(chunk)
        base = self.bytes_read
        self.bytes_read += len(chunk)
        first_nl = chunk.find(b"\n")
        if first_nl < 0:
            if self._skip_long:
                return
            self._carry += chunk
            if len(self._carry) > MAX_LINE:
                self._carry = b""
                self._skip_long = True
                self.long_lines_dropped += 1
            return
        last_nl = chunk.rfind(b"\n")
        start = 0
        if self._skip_long:
            self._skip_long = False
            start = first_nl + 1
        elif self._carry:
            head = self._carry + chunk[: first_nl + 1]
            self._scan(head, 0, len(head), base - len(self._carry))
            start = first_nl + 1
        if last_nl + 1 > start:
            self._scan(chunk, start, last_nl + 1, base)
        self._carry = chunk[last_nl + 1 :]

    def reset_stream(self) -> None:
        """The file was rotated or truncated: drop the partial line of the old content."""
        self._carry = b""
        self._skip_long = False

    def close(self) -> None:
        """End of input: an unterminated last line is ignored (it may still be being written)."""
        if self._carry.strip():
            self.incomplete_tail = len(self._carry)
        self._carry = b""
        if self.total_windows == 0 and self._sampled and self._binary > 0.2 * self._sampled:
            raise InputError(
                "the input is not a text log: it is mostly binary data and has no metrics lines",
                "pass the engine's log file (vLLM or SGLang stdout/stderr), or a /metrics URL",
            )

    def _check_text(self, chunk: bytes) -> None:
        sample = chunk[:65536]
        if sample[:2] in (b"\xff\xfe", b"\xfe\xff"):
            raise InputError(
                "the log is UTF-16 encoded, not UTF-8 text",
                "convert it first: iconv -f UTF-16 -t UTF-8 LOG > LOG.utf8",
            )
        if not sample.strip(b"\x00") or any(n in sample for n in self._metric_needles):
            return
        if self._binary_count(sample) > 0.2 * len(sample):
            raise InputError(
                "the input is not a text log: it starts with binary data and has no metrics lines",
                "pass the engine's log file (vLLM or SGLang stdout/stderr), or a /metrics URL",
            )

    @staticmethod
    def _binary_count(sample: bytes) -> int:
        ctrl = len(sample) - len(sample.translate(None, _CTRL))
        bad = sample.decode("utf-8", "replace").count("\ufffd") if ctrl or max(sample) > 127 else 0
        return ctrl + bad

    def _sample(self, chunk: bytes) -> None:
        s = chunk[:4096]
        self._sampled += len(s)
        self._binary += self._binary_count(s)

    # ---- scanning one region of complete lines --------------------------------------------

    def _scan(self, buf: bytes, s: int, e: int, g0: int) -> None:
        prev_end, last = s, -1
        if not self._fast_ready():
            prev_end, last = self._scan_general(buf, s, e, g0)
        if prev_end < e and self._fast_ready():
            prev_end, fast_last = self._scan_fast(buf, s, prev_end, e, g0)
            last = max(last, fast_last)
        if last >= 0:
            le = buf.find(b"\n", last, e)
            self._newest = (g0 + last, buf[last : le if le >= 0 else e])
            self._busy.clear()
            self._busy_lines = 0
            if self._fatal is not None:  # windows came after it: a crash between windows
                self._fatal_between.append(self._fatal)
            self._fatal = None
        if prev_end < e:
            self._tail(buf, prev_end, e, g0)
        if e - s >= LOOKBACK:
            self._prev_tail = buf[e - LOOKBACK : e]
        else:  # short regions (small reads, line-by-line input): keep a rolling tail
            self._prev_tail = (self._prev_tail + buf[s:e])[-LOOKBACK:]

    def _scan_general(self, buf: bytes, s: int, e: int, g0: int) -> tuple[int, int]:
        """Before the engine and needle are known (or for SGLang): every hit through `_hit`.
        Stops as soon as the fast loop can take over."""
        nds = self._metric_needles
        prev_end, last = s, -1
        hits: list[int] = []
        for nd in nds:
            p = buf.find(nd, s, e)
            while p >= 0:
                hits.append(p)
                nl = buf.find(b"\n", p, e)
                if nl < 0:
                    break
                p = buf.find(nd, nl + 1, e)
        if len(nds) > 1:
            hits.sort()
        for p in hits:
            r = buf.rfind(b"\n", s, p)
            ls = r + 1 if r >= 0 else s
            if ls < prev_end:
                continue  # a second needle on the same line
            le = buf.find(b"\n", p, e)
            if le < 0:
                le = e
            if self._hit(buf, s, prev_end, ls, le, g0):
                last = ls
            prev_end = le + 1
            if self._fast_ready():
                break
        return prev_end, last

    def _fast_ready(self) -> bool:
        return len(self._metric_needles) == 1 and self.engine == "vllm"

    def _scan_fast(self, buf: bytes, s: int, prev_end: int, e: int, g0: int) -> tuple[int, int]:
        """The hot loop (a vLLM log once its first metrics line was seen): per line a few
        C-level finds, one prefix check and one slice. The slice reaches back LOOKBACK bytes so
        the `Engine 000:` companion line can be picked out later, lazily. Anything unusual
        (another process, a long gap, a pending start-up line, the region start) goes through
        `_hit`. Returns (end of the last line handled, start of the last window line)."""
        last = -1
        nd = self._metric_needles[0]
        find, rfind, startswith = buf.find, buf.rfind, buf.startswith
        seek = self._finder(nd, buf, prev_end, e).find  # buf.find(nd, a, b), by its rarest byte
        append = self._records.append
        hi = e - FORWARD
        p = seek(buf, prev_end, e)
        while p >= 0:
            key, dist = self._last_key, self._key_dist
            if key is not None and dist >= 0 and self._pending_startup is None:
                n, launch, step = self.total_windows, self.launch, len(nd)
                lo = s + LOOKBACK + dist  # the look-back stays inside this region
                # the next metrics line must come within GAP_SEARCH_BYTES of the last one
                limit = self._last_win_end - g0 + GAP_SEARCH_BYTES + dist
                taken = -1
                while lo <= p <= hi and p <= limit:
                    ls = p - dist
                    if buf[ls - 1] != 10 or not startswith(key, ls):
                        break  # another process or prefix: the slow way
                    n += 1
                    append((n, g0 + ls, launch, buf[ls - LOOKBACK : p + FORWARD], LOOKBACK))
                    taken = p
                    limit = p + step + GAP_SEARCH_BYTES + dist
                    p = seek(buf, p + step, e)
                    if p < 0:
                        break
                if taken >= 0:
                    self.total_windows = n
                    self._last_win_end = g0 + taken + step
                    last = taken - dist
                    prev_end = taken + step
                if p < 0:
                    break
            r = rfind(b"\n", prev_end, p)
            ls = r + 1 if r >= 0 else prev_end
            le = find(b"\n", p, e)
            if le < 0:
                le = e
            if self._hit(buf, s, prev_end, ls, le, g0):
                last = ls
            nd = self._metric_needles[0]  # _hit may have relocked it
            seek = self._finder(nd, buf, prev_end, e).find
            prev_end = le + 1
            p = seek(buf, prev_end, e)
        return prev_end, last

    def _finder(self, nd: bytes, buf: bytes, at: int, e: int) -> NeedleFinder:
        """The finder for needle `nd`, its rare byte picked from the log at buf[at:e] (again
        when the last pick had fewer bytes to go by than this region offers)."""
        f = self._needle_finder
        if f is None or f.needle != nd or (f.sampled < SAMPLE and e - at > f.sampled):
            f = self._needle_finder = NeedleFinder(nd, buf[at : min(e, at + SAMPLE)])
        return f

    def _line_at(self, buf: bytes, lo: int, p: int, hi: int) -> tuple[int, bytes]:
        r = buf.rfind(b"\n", lo, p)
        ls = r + 1 if r >= 0 else lo
        le = buf.find(b"\n", p, hi)
        return ls, buf[ls : le if le >= 0 else hi]

    def _last_of(self, buf: bytes, needles: tuple[bytes, ...], a: int, b: int) -> int:
        best = -1
        for nd in needles:
            p = buf.rfind(nd, max(a, best + 1), b)
            if p > best:
                best = p
        return best

    def _search_markers(self, buf: bytes, a: int, b: int, g0: int) -> None:
        """Start-up and config lines in buf[a:b] (the last of each wins)."""
        p = self._last_of(buf, self._startup_needles, a, b)
        if p >= 0:
            ls, line = self._line_at(buf, a, p, b)
            if self._pending_startup is None or g0 + ls > self._pending_startup[0]:
                self._pending_startup = (g0 + ls, line)
                if len(self._metric_needles) == 1 and self.engine == "vllm":
                    self._set_needles(lock=None)  # a new launch may be another vLLM version
            v = buf.rfind(b"server version ", a, b)  # only in chunks with a start-up line
            if v >= 0:
                m = SERVER_VERSION_RE.search(clean(self._line_at(buf, a, v, b)[1]))
                self._version = m.group(1) if m else None
        p = buf.rfind(b"disable_by_batch_size", a, b)
        if p >= 0:  # vLLM `non-default args: {… 'disable_by_batch_size': 32}` or V0's Namespace
            bl = _BATCH_LIMIT_B.match(buf, p)
            self._batch_limit = int(bl.group(1)) if bl else self._batch_limit
        p = self._last_of(buf, self._config_needles, a, b)
        if p >= 0:
            ls, line = self._line_at(buf, a, p, b)
            if parse_spec_config(clean(line)) is not None:
                self._config = (g0 + ls, line)
        p = buf.rfind(REUSE_OFF_NEEDLE, a, b)
        if p >= 0:  # vLLM: no KV cache group is the drafter's, prefix reuse switched off
            ls, line = self._line_at(buf, a, p, b)
            self._reuse_off = (g0 + ls, line)

    def _first_fatal(self, buf: bytes, a: int, b: int) -> tuple[int, bytes] | None:
        """The first crash line in buf[a:b] (start offset, text), with the exception it ended
        with when that follows within a few KiB ("… hit an exception. | RuntimeError: …")."""
        best = -1
        for nd in FATAL_NEEDLES:
            p = buf.find(nd, a, b if best < 0 else best)
            if p >= 0:
                best = p
        if best < 0:
            return None
        if any(buf.find(nd, a, best) >= 0 for nd in SHUTDOWN_NEEDLES):
            return None  # the server was being stopped: what it logs then is no crash
        ls, line = self._line_at(buf, a, best, b)
        le = ls + len(line)
        if not _EXC_B.search(line):
            m = _EXC_B.search(buf, le, min(b, le + 16384))
            if m:
                _, exc = self._line_at(buf, le, m.start(1), b)
                line = line.rstrip(b"\r") + b" | " + exc[exc.find(m.group(1)) :]
        return ls, line

    def _hit(self, buf: bytes, s: int, gap_start: int, ls: int, le: int, g0: int) -> bool:
        """A metrics line at buf[ls:le] that needs care: the first, a new process, a long gap,
        an SGLang line. True when it is a window (not a decode line without speculation)."""
        sgl = self.engine != "vllm" and buf.find(b"Decode batch", ls, le) >= 0
        if sgl and buf.find(b"accept len", ls, le) < 0:
            self.non_spec_decode_lines += 1  # decoding without speculation: busy evidence
            self._busy[b"Decode batch"] = (g0 + ls, buf[ls:le])
            self._busy_lines += 1
            return False
        i = buf.find(b" pid=", ls, le)
        if i < 0:
            i = buf.find(b" rank=", ls, le)
        key = buf[ls : buf.find(b")", i, le) + 1] if i >= 0 else None
        g = g0 + ls
        if (
            key is None
            or key != self._last_key
            or g - self._last_win_end > GAP_SEARCH_BYTES
            or self._pending_startup is not None
        ):
            self._new_stream(buf, gap_start, ls, g0)
        self.total_windows += 1
        if sgl:
            self._records.append((self.total_windows, g, self.launch, buf[ls:le], 0))
        else:
            if ls - LOOKBACK >= s:
                back = buf[ls - LOOKBACK : ls]
            else:  # the look-back reaches into earlier regions
                back = (self._prev_tail + buf[s:ls])[-LOOKBACK:]
            self._records.append((self.total_windows, g, self.launch, back + buf[ls:le], len(back)))
        self._last_key = key
        self._last_win_end = g0 + le
        if len(self._metric_needles) > 1:
            if not self._forced:
                self.engine = "sglang" if sgl else "vllm"
            lock = None
            for nd in self._metric_needles:
                p = buf.find(nd, ls, le)
                if p >= 0:
                    # Search for "SpecDecoding metrics: <first label>: " from now on: a longer
                    # needle skips faster. A new launch (maybe another version) unlocks it.
                    j = buf.find(b": ", p + len(nd) + 1, min(le, p + len(nd) + 48))
                    label = buf[p + len(nd) + 2 : j]
                    ok = j > 0 and label.replace(b" ", b"").replace(b"-", b"").isalpha()
                    lock = bytes(buf[p : j + 2]) if ok and not sgl else nd
                    break
            self._set_needles(lock=lock)
        nds = self._metric_needles
        self._key_dist = buf.find(nds[0], ls, le) - ls if len(nds) == 1 and not sgl else -1
        return True

    def _new_stream(self, buf: bytes, a: int, b: int, g0: int) -> None:
        """A new process or a long gap before this metrics line: was there a restart, or a
        crash?"""
        if b > a:
            self._search_markers(buf, a, b, g0)
            if self._fatal is None and self.total_windows:
                f = self._first_fatal(buf, a, b)
                if f is not None:
                    self._fatal_between.append((g0 + f[0], f[1]))
        if self._pending_startup is not None:
            if self.total_windows:
                self.launch += 1
                self.events.append("restart")
            self.launch_started[self.launch] = True
            self._pending_startup = None

    def _tail(self, buf: bytes, a: int, e: int, g0: int) -> None:
        """After the last metrics line of a region: restart, busy and fatal evidence."""
        self._search_markers(buf, a, e, g0)
        for nd in self._busy_needles:
            p = buf.rfind(nd, a, e)
            if p >= 0:
                ls, line = self._line_at(buf, a, p, e)
                self._busy[nd] = (g0 + ls, line)
                self._busy_lines += buf.count(nd, a, e)
        if self._fatal is None:
            f = self._first_fatal(buf, a, e)
            if f is not None:
                self._fatal = (g0 + f[0], f[1])
        # Newest line with a timestamp: walk back a few lines from the end.
        end = e - 1
        for _ in range(32):
            if end <= a:
                break
            r = buf.rfind(b"\n", a, end)
            start = r + 1 if r >= 0 else a
            if _TS_B.search(buf, start, min(end, start + 200)):
                if self._newest is None or g0 + start > self._newest[0]:
                    self._newest = (g0 + start, buf[start:end])
                break
            end = start - 1

    # ---- results --------------------------------------------------------------------------

    def _parse_pending(self) -> None:
        todo = []
        for rec in reversed(self._records):
            if rec[0] <= self._parsed_seq:
                break
            todo.append(rec)
        for rec in reversed(todo):
            self._windows.append((rec[0], *self._parse(rec)))
            self._parsed_seq = rec[0]

    def _parse(
        self, rec: tuple[int, int, int, bytes, int]
    ) -> tuple[SpecWindow | None, RawTs | None]:
        _seq, offset, launch, blob, at = rec
        companion = _companion(blob, at) if at else None
        nl = blob.find(b"\n", at)
        blob = blob[at:nl] if nl >= 0 else blob[at:]
        text = unwrap_json(clean(blob))
        info = line_info(text)
        pl = parse_sglang(text) if "Decode batch" in text else parse_vllm(text)
        self.unknown_fields.update(pl.unknown)
        w = pl.window
        if pl.v0_cumulative is not None:
            w = v0_window(self._v0_prev.get(info.stream), pl.v0_cumulative)
            self._v0_prev[info.stream] = pl.v0_cumulative
        if w is None:
            if pl.v0_cumulative is None and not pl.skipped:
                self.unparsed_lines += 1
            else:
                self.skipped_windows += 1
            return None, info.ts
        w.offset = offset
        w.launch = launch
        w.stream = info.stream
        w.timestamp_raw = info.ts.text() if info.ts else None
        labels = self._engines_of.setdefault(info.stream, set())
        if companion is not None:
            ctext = unwrap_json(clean(companion))
            self._build = kv_cache_build(ctext) or self._build
            comp = parse_companion(ctext)
            if "engine" in comp:
                w.stream = str(comp["engine"])
                if w.stream == "aggregated" and info.stream:
                    # each API server (--api-server-count) aggregates what it saw: one stream each
                    w.stream = f"aggregated, {info.stream}"
                labels.add(w.stream)
            g = comp.get("generation_throughput")
            w.generation_throughput = float(g) if isinstance(g, float) else None
            p = comp.get("prompt_throughput")
            w.prompt_throughput = float(p) if isinstance(p, float) else None
            r = comp.get("running")
            w.running_reqs = int(r) if isinstance(r, float) else None
            q = comp.get("waiting")
            w.waiting_reqs = int(q) if isinstance(q, float) else None
            h = comp.get("prefix_cache_hit_rate")
            w.prefix_cache_hit_rate = float(h) if isinstance(h, float) else None
        return w, info.ts

    def new_windows(self) -> list[SpecWindow]:
        """Windows found since the previous call (follow mode)."""
        self._parse_pending()
        since = self._delivered
        self._delivered = self.total_windows
        fresh = [w for seq, w, _ in self._windows if seq > since and w is not None]
        self._relabel(fresh)
        return fresh

    def _relabel(self, windows: list[SpecWindow]) -> None:
        """A window whose `Engine NNN:` line was not found (cut off at the top of an excerpt,
        or too far back) belongs to its process's engine when that process logged only one:
        it must not become a stream of its own (and repeat the stream's alarm)."""
        for w in windows:
            labels = self._engines_of.get(w.stream)
            if labels is not None and len(labels) == 1:
                w.stream = next(iter(labels))

    def state(self, source: str, ref: datetime | None = None) -> MetricsState:
        """Parse what is retained and resolve timestamps (vLLM prints no year)."""
        self._parse_pending()
        recs = [(w.offset, ts, w) for _, w, ts in self._windows if w is not None]
        markers: dict[str, tuple[int, bytes]] = {}
        if self._pending_startup:
            markers["startup"] = self._pending_startup
        busy = self._busy_evidence()
        if busy:
            markers["busy"] = busy
        if self._newest:
            markers["newest"] = self._newest
        if self._fatal:
            markers["fatal"] = self._fatal
        if self._reuse_off:
            markers["reuse_off"] = self._reuse_off
        for i, fb in enumerate(self._fatal_between):
            markers[f"between{i}"] = fb
        stamped: list[tuple[int, RawTs | None, Any]] = list(recs)
        marker_ts = {k: line_info(clean(v[1])).ts for k, v in markers.items()}
        stamped += [(v[0], marker_ts[k], k) for k, v in markers.items()]
        stamped.sort(key=lambda x: x[0])
        resolved = resolve_years([ts for _, ts, _ in stamped], ref or datetime.now())
        mk: dict[str, Marker] = {}
        for (_off, _ts, obj), dt in zip(stamped, resolved, strict=True):
            if isinstance(obj, SpecWindow):
                obj.timestamp = dt
            else:
                off, raw = markers[obj]
                mk[obj] = Marker(off, clean(raw)[:400], dt)
        windows = [w for _, _, w in recs]
        self._relabel(windows)
        st = MetricsState(
            source=source,
            kind="log",
            engine=windows[-1].engine if windows else self.engine,
            windows=windows,
            total_windows=self.total_windows - self.unparsed_lines - self.skipped_windows,
            launches=self.launch + 1,
            latest_launch_has_startup=self.launch_started.get(
                windows[-1].launch if windows else self.launch, False
            ),
            startup_after_last_window=mk.get("startup"),
            busy_after_last_window=mk.get("busy"),
            busy_lines_after_last_window=self._busy_lines,
            newest_line=mk.get("newest"),
            non_spec_decode_lines=self.non_spec_decode_lines,
            unknown_fields=sorted(self.unknown_fields),
            skipped_lines=self.unparsed_lines,
            crash=mk.get("fatal"),
            crashes_between=[mk[k] for k in sorted(mk) if k.startswith("between")],
            prefix_reuse_off=mk.get("reuse_off"),
        )
        if self._config:
            config_text = clean(self._config[1])
            st.spec_config = parse_spec_config(config_text)
            st.launch_fields = dict(_LAUNCH_FIELD_RE.findall(config_text))
        if self._batch_limit is not None:
            st.spec_config = dict(st.spec_config or {"enabled": True, "engine": "vllm"})
            st.spec_config["disable_by_batch_size"] = self._batch_limit
        if self._version:
            st.engine_version = self._version
        elif self._config:
            m = V1_ENGINE_VERSION_RE.search(clean(self._config[1]))
            st.engine_version = m.group(1) if m else None
        st.engine_build = self._build
        st.notes = self._notes(windows, mk.get("fatal"))
        return st

    def _busy_evidence(self) -> tuple[int, bytes] | None:
        best: tuple[int, bytes] | None = None
        for nd, (off, line) in self._busy.items():
            if nd == b"Avg prompt throughput" and not companion_busy(clean(line)):
                continue
            if best is None or off > best[0]:
                best = (off, line)
        return best

    def _notes(self, windows: list[SpecWindow], fatal: Marker | None) -> list[str]:
        notes = []
        if self.total_windows > len(self._records):
            notes.append(
                f"{self.total_windows} metrics lines; the series keeps the latest "
                f"{len(self._records)} (older ones were counted, not kept)"
            )
        if self.unparsed_lines:
            notes.append(f"{self.unparsed_lines} metrics line(s) had no usable fields (skipped)")
        if self.incomplete_tail:
            notes.append(
                f"ignored an incomplete last line ({self.incomplete_tail} bytes, no newline yet)"
            )
        if self.long_lines_dropped:
            notes.append(f"skipped {self.long_lines_dropped} line(s) longer than 1 MiB")
        if self.unknown_fields:
            notes.append("unknown fields (ignored): " + ", ".join(sorted(self.unknown_fields)))
        if self._sampled and self._binary and windows:
            notes.append("the log contains some binary or non-UTF-8 bytes (decoded leniently)")
        fmts = {w.format for w in windows}
        if "vllm-v0" in fmts:
            notes.append(
                "vLLM V0 lines are cumulative since start and count accepted tokens differently; "
                "normalised to per-window values (mean length = emitted / drafts)"
            )
        if fmts & {"vllm-0.8.3", "vllm-v1-early"}:
            notes.append(
                "this vLLM log format has no mean acceptance length or per-position rates; "
                "only the draft acceptance rate is judged"
            )
        if "sglang" in fmts:
            notes.append(
                "SGLang `accept rate` is drafts accepted / drafts proposed since 0.5.11; "
                "0.5.6-0.5.10 counted the bonus token: don't compare across versions"
            )
        return notes


def _companion(blob: bytes, at: int) -> bytes | None:
    """The nearest `Engine NNN:` line before blob[at:] from the same process, not past an
    earlier metrics line (that one owns the companions before it)."""
    line = blob[at:]
    i = line.find(b" pid=")
    # the `(APIServer pid=1)` tag only: a prefix before it (docker `logs -t`, a collector) may
    # differ by a millisecond between the two lines
    key = line[line.rfind(b"(", 0, i) : line.find(b")", i) + 1] if i >= 0 else None
    for prev in reversed(blob[:at].split(b"\n")):
        if key is not None and prev.find(key, 0, len(key) + 160) < 0:
            continue
        if b"SpecDecoding metrics" in prev or b"Speculative metrics" in prev:
            return None
        if b"Avg prompt throughput" in prev:
            return prev
    return None


def resolve_years(stamps: list[RawTs | None], ref: datetime) -> list[datetime | None]:
    """Give year-less vLLM timestamps a year: the newest gets `ref`'s year (the year before if
    that would put it more than a day after `ref`); walking back, a jump of six months or more
    forward in month-day means the year turned."""
    out: list[datetime | None] = [None] * len(stamps)
    year = ref.year
    anchored = False
    later: RawTs | None = None
    for i in range(len(stamps) - 1, -1, -1):
        ts = stamps[i]
        if ts is None:
            continue
        if ts.year is not None:
            out[i] = ts.at_year(ts.year)
            continue
        if not anchored:
            dt = ts.at_year(year)
            if dt is not None and dt > ref + timedelta(days=1):
                year -= 1
            anchored = True
        elif later is not None and ts.month - later.month >= 6:
            year -= 1
        out[i] = ts.at_year(year)
        later = ts
    return out
