"""Bounded HTTP bodies: every answer dflashctl reads from a server is read through here, so a
hostile or broken server cannot make it hold more than a cap (counted after decompression: a
gzip bomb stops at the cap, never inflates in memory) or wait past a wall-clock deadline (a
server that trickles one byte every half second still ends on time).

Frame: used by server/client.py and metrics/prom.py; raises ServerError; never prints.
"""

from __future__ import annotations

import re
import time
import urllib.parse
import zlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from dflashctl.errors import ServerError, UsageError

if TYPE_CHECKING:
    import httpx

MAX_JSON_BODY = 16 << 20  # /v1/models and other JSON answers
MAX_METRICS_PAGE = 32 << 20  # a Prometheus page (vLLM's is tens of KB)
MAX_SSE_LINE = 1 << 20  # one line of an event stream
MAX_STREAM = 64 << 20  # a whole streamed answer
PIECE = 64 << 10

# The only content codings `iter_body` decodes; requests say so, so a server has no reason
# to send another.
ACCEPT_ENCODING = {"Accept-Encoding": "gzip, deflate"}


_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)([^/\s@:]*):([^@\s/]*)@")


def redact(text: str) -> str:
    """`scheme://user:secret@host` -> `scheme://user:***@host`, wherever it appears in text."""
    if "@" not in text or "://" not in text:  # a large report without a URL: skip the regex
        return text
    return _CREDENTIALS.sub(r"\1\2:***@", text)


def check_url(url: str) -> None:
    """UsageError, in one line and without the password, for a URL no client can use (a
    malformed IPv6 literal, a port that is not a number or out of range, no host)."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
        host = parts.hostname
    except ValueError as e:
        raise UsageError(
            f"{redact(url)} is not a valid URL ({e})",
            "e.g. http://127.0.0.1:8000, or http://[::1]:8000 for an IPv6 address",
        ) from None
    if parts.scheme not in ("http", "https") or not host:
        raise UsageError(f"{redact(url)} is not an http(s) URL with a host")
    del port


class BodyTooLarge(ServerError):
    """An answer was larger than its cap (after decompression)."""


class DeadlinePassed(Exception):
    """The wall-clock deadline of a request passed while its body was still arriving."""


class _Decoder:
    def __init__(self, coding: str, what: str) -> None:
        coding = coding.strip().lower()
        self.what = what
        if coding in ("", "identity"):
            self.z = None
        elif coding in ("gzip", "x-gzip", "deflate"):
            self.z = zlib.decompressobj(32 + zlib.MAX_WBITS)  # zlib or gzip header, detected
        else:
            raise ServerError(f"{what}: the answer uses Content-Encoding {coding!r}, not gzip")

    def feed(self, data: bytes) -> Iterator[bytes]:
        if self.z is None:
            yield data
            return
        try:
            while data:
                out = self.z.decompress(data, PIECE)  # at most PIECE bytes at a time
                if out:
                    yield out
                data = self.z.unconsumed_tail
        except zlib.error as e:
            raise ServerError(f"{self.what}: the compressed answer is corrupt ({e})") from None


def iter_body(
    r: httpx.Response,
    *,
    cap: int,
    what: str,
    deadline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[bytes]:
    """The decoded body of `r` in pieces; BodyTooLarge past `cap` bytes, DeadlinePassed once
    `clock()` passes `deadline` (checked on every piece the network delivers)."""
    dec = _Decoder(r.headers.get("content-encoding", ""), what)
    total = 0
    for raw in r.iter_raw():
        if deadline is not None and clock() > deadline:
            raise DeadlinePassed
        for piece in dec.feed(raw):
            total += len(piece)
            if total > cap:
                raise BodyTooLarge(
                    f"{what}: the answer is larger than {cap} bytes (decompressed): refused",
                    "is this the engine's API port? a proxy or a hostile server sends this",
                )
            yield piece
    if deadline is not None and clock() > deadline:
        raise DeadlinePassed


def read_body(r: httpx.Response, *, cap: int, what: str, deadline: float | None = None) -> bytes:
    """All of `r`'s decoded body, within `cap` and `deadline` (see iter_body)."""
    return b"".join(iter_body(r, cap=cap, what=what, deadline=deadline))


def read_some(r: httpx.Response, n: int, what: str) -> bytes:
    """At most the first `n` decoded bytes of `r` (an error page to quote): never an error."""
    import httpx

    buf = b""
    try:
        for piece in iter_body(r, cap=1 << 62, what=what):
            buf += piece
            if len(buf) >= n:
                break
    except (httpx.HTTPError, ServerError):
        pass
    return buf[:n]


def iter_lines(
    r: httpx.Response,
    *,
    what: str,
    deadline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    max_line: int = MAX_SSE_LINE,
    cap: int = MAX_STREAM,
) -> Iterator[str]:
    """The body's lines (without their `\\n` / `\\r\\n`), decoded as UTF-8; a line longer than
    `max_line` is BodyTooLarge, as is a body over `cap`; the deadline as in iter_body."""
    pending = b""
    for piece in iter_body(r, cap=cap, what=what, deadline=deadline, clock=clock):
        pending += piece
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line.removesuffix(b"\r").decode("utf-8", "replace")
        if len(pending) > max_line:
            raise BodyTooLarge(f"{what}: one line of the answer is longer than {max_line} bytes")
    if pending:
        yield pending.removesuffix(b"\r").decode("utf-8", "replace")
