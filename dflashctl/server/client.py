"""OpenAI-compatible chat over HTTP for the smoke test: `/v1/models` and streamed chat completions.

A server that misbehaves is *data* here, not an exception: `stream_chat` returns a `Completion`
whose `error` says what went wrong (an HTML page, a 5xx, a hang past the timeout, an SSE stream
cut mid-way, a malformed event). Only a server that cannot be reached at all raises
`ServerError` (exit 2: the smoke test could not run).

Timing (engine-formats.md §7): TTFT is the time from sending the request to the first event that
carries text (content or reasoning); decode tokens/s counts the tokens after the first one over
the time from the first to the last text event. No printing.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from dflashctl.errors import DflashError, ServerError
from dflashctl.http_body import (
    ACCEPT_ENCODING,
    MAX_JSON_BODY,
    DeadlinePassed,
    check_url,
    iter_lines,
    read_body,
    read_some,
    redact,
)

Clock = Callable[[], float]
MAX_ERROR_BODY = 4096
MAX_VERSION_BODY = 1 << 16
_TITLE = re.compile(rb"<title[^>]*>(.*?)</title>", re.I | re.S)
_TAG = re.compile(r"<[^>]+>")


@dataclass
class Completion:
    """One streamed chat request, as the server answered it."""

    prompt_id: str
    prompt: str
    status_code: int | None = None
    error: str | None = None  # set when the HTTP exchange itself failed (http check)
    hint: str | None = None
    content: str = ""
    reasoning: str = ""
    reasoning_field: str | None = None  # "reasoning" | "reasoning_content"
    finish_reason: str | None = None
    completion_tokens: int | None = None  # usage.completion_tokens
    prompt_tokens: int | None = None
    events: int = 0  # SSE data events
    text_events: int = 0  # events that carried text
    done: bool = False  # `data: [DONE]` seen
    ttft_s: float | None = None
    decode_s: float | None = None  # first to last text event
    total_s: float | None = None
    notes: list[str] | None = None
    # the server's own per-request acceptance (`metrics.speculative_decoding`: vLLM with
    # --per-request-spec-decode-metrics, the bundled engine), as it sent it
    spec_decode: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def text(self) -> str:
        """The answer: content, or the reasoning when content is empty."""
        return self.content or self.reasoning

    @property
    def decode_tokens(self) -> int | None:
        """Tokens after the first one (what the decode speed counts)."""
        n = self.completion_tokens
        return n - 1 if n is not None and n >= 2 else None

    @property
    def decode_tokens_per_s(self) -> float | None:
        n = self.decode_tokens
        if n is None or not self.decode_s or self.decode_s <= 0:
            return None
        return n / self.decode_s

    def note(self, text: str) -> None:
        self.notes = [*(self.notes or []), text]

    def to_json(self) -> dict[str, Any]:
        tps = self.decode_tokens_per_s
        return {
            "prompt_id": self.prompt_id,
            "ok": self.ok,
            "error": self.error,
            "status_code": self.status_code,
            "content": self.content,
            "reasoning": self.reasoning or None,
            "reasoning_field": self.reasoning_field,
            "finish_reason": self.finish_reason,
            "completion_tokens": self.completion_tokens,
            "prompt_tokens": self.prompt_tokens,
            "events": self.events,
            "ttft_s": _r(self.ttft_s, 4),
            "decode_s": _r(self.decode_s, 4),
            "total_s": _r(self.total_s, 4),
            "decode_tokens_per_s": _r(tps, 2),
            "speculative_decoding": self.spec_decode,
            "notes": self.notes or [],
        }

    @property
    def spec_tau(self) -> float | None:
        """The server's own mean acceptance length for this request, where it sent one."""
        v = (self.spec_decode or {}).get("mean_acceptance_length")
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _r(x: float | None, nd: int) -> float | None:
    return None if x is None else round(x, nd)


def normalize_url(url: str) -> str:
    """`http://h:8000/`, `http://h:8000/v1` → `http://h:8000`; `h:8000` → `http://h:8000`."""
    scheme, sep, rest = url.strip().partition("://")
    if not sep:  # HOST:PORT
        scheme, rest = "http", scheme
    u = f"{scheme}://{rest.rstrip('/')}"  # a scheme other than http(s): check_url says so
    for suffix in ("/v1/chat/completions", "/v1/models", "/metrics", "/v1"):
        if u.endswith(suffix):
            u = u[: -len(suffix)]
            break
    check_url(u)
    return u


def make_client(timeout: float) -> httpx.Client:
    """No connection is kept for the next request: each opens its own, so `WallClock` can cut
    exactly that one."""
    t = httpx.Timeout(timeout, connect=min(timeout, 10.0))
    return httpx.Client(
        timeout=t,
        follow_redirects=False,
        trust_env=False,
        headers=ACCEPT_ENCODING,
        limits=httpx.Limits(max_keepalive_connections=0),
    )


class WallClock:
    """One request's wall-clock bound, its headers included: when `seconds` pass, the socket
    under the request is shut down, so the read waiting on it returns at once. httpx's timeouts
    bound each read, not the request: a server that trickles its status line or its stream a
    byte at a time would hold it for minutes. Pass `trace` as the request's `trace` extension
    (it sees the connection being opened)."""

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def trace(self, event: str, info: dict[str, Any]) -> None:
        if event != "connection.connect_tcp.complete":
            return
        stream = info.get("return_value")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if isinstance(sock, socket.socket):
            with self._lock:
                self._socks.append(sock)
                if self.expired:
                    self._shut(sock)

    @staticmethod
    def _shut(sock: socket.socket) -> None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._socks:
                self._shut(sock)

    def __enter__(self) -> WallClock:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()


def unreachable(url: str, e: Exception) -> ServerError:
    return ServerError(
        redact(f"cannot reach {url}: {e}"),
        "is the server up? check host and port (vLLM 8000, SGLang 30000), or start one with "
        "dflashctl serve",
    )


# ---- error bodies -------------------------------------------------------------------------------


def describe_body(status: int, ctype: str, body: bytes) -> tuple[str, str | None]:
    """A one-line reading of an unexpected answer, and a hint."""
    text = body.decode("utf-8", "replace")
    stripped = text.lstrip()
    if "html" in ctype.lower() or stripped[:1] == "<":
        m = _TITLE.search(body)
        title = m.group(1).decode("utf-8", "replace").strip() if m else ""
        if not title:
            title = " ".join(_TAG.sub(" ", text).split())[:80]
        return (
            f"HTTP {status} with an HTML page ({title or 'no title'}), not the engine's JSON",
            "a proxy, load balancer or dashboard answered instead of the engine: check the URL "
            "and that the engine behind the proxy is up",
        )
    msg = ""
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict):
            msg = str(err.get("message") or err)
        elif isinstance(err, str):
            msg = err
        elif "detail" in data:
            msg = json.dumps(data["detail"])[:300]
        elif "message" in data:
            msg = str(data["message"])
    if not msg:
        msg = " ".join(text.split())[:200] or "empty body"
    hint = "read the engine's log for the cause"
    if status == 404 and "model" in msg.lower():
        hint = "the model name is wrong: pass --model NAME (see GET /v1/models)"
    elif status == 404:
        hint = "is this an OpenAI-compatible server? the smoke test needs /v1/chat/completions"
    elif status in (400, 422):
        hint = "the server refused the request; its message says which parameter"
    return f"HTTP {status}: {msg[:300]}", hint


# ---- /v1/models ---------------------------------------------------------------------------------


def get_version(client: httpx.Client, base: str, wait: float = 10.0) -> dict[str, Any] | None:
    """GET /version's JSON object within 64 KiB and `wait` seconds, headers included; None
    when the server has none, answers anything else, or is too slow (never an error)."""
    url = f"{base}/version"
    try:
        with (
            WallClock(wait) as clock,
            client.stream("GET", url, timeout=wait, extensions={"trace": clock.trace}) as r,
        ):
            if r.status_code != 200:
                return None
            body = read_body(r, cap=MAX_VERSION_BODY, what=url, deadline=time.monotonic() + wait)
        data = json.loads(body)
    except (httpx.HTTPError, DflashError, DeadlinePassed, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def list_models(client: httpx.Client, base: str) -> tuple[list[str], str | None, str | None]:
    """(model ids, error, hint). Unreachable → ServerError."""
    url = f"{base}/v1/models"
    wait = client.timeout.read or 30.0
    try:
        with (
            WallClock(wait) as clock,
            client.stream("GET", url, extensions={"trace": clock.trace}) as r,
        ):
            ctype = r.headers.get("content-type", "")
            if r.status_code != 200:
                msg, hint = describe_body(r.status_code, ctype, read_some(r, MAX_ERROR_BODY, url))
                return [], f"GET /v1/models: {msg}", hint
            body = read_body(r, cap=MAX_JSON_BODY, what=url, deadline=time.monotonic() + wait)
    except (httpx.TimeoutException, DeadlinePassed):
        return [], f"GET /v1/models did not answer within {wait:g} s", _hang_hint()
    except httpx.HTTPError as e:
        if clock.expired:
            return [], f"GET /v1/models did not answer within {wait:g} s", _hang_hint()
        raise unreachable(base, e) from None
    try:
        data = json.loads(body)
        ids = [str(m["id"]) for m in data["data"]]
    except (ValueError, KeyError, TypeError, RecursionError):
        msg, hint = describe_body(200, ctype, body[:MAX_ERROR_BODY])
        return [], f"GET /v1/models is not an OpenAI model list ({msg})", hint
    if not ids:
        return [], "GET /v1/models lists no model", "is the engine still loading?"
    return ids, None, None


def _hang_hint() -> str:
    return (
        "the server accepted the connection but did not answer: a wedged engine, a full queue, "
        "or a cold start still compiling; raise --timeout if it is just slow"
    )


# ---- streamed chat --------------------------------------------------------------------------


def chat_body(model: str, prompt: str, max_tokens: int) -> dict[str, Any]:
    return {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "temperature": 0,
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def stream_chat(
    client: httpx.Client,
    base: str,
    model: str,
    prompt_id: str,
    prompt: str,
    *,
    max_tokens: int,
    timeout: float,
    clock: Clock = time.perf_counter,
) -> Completion:
    """POST one streamed chat completion at temperature 0 and read it to the end."""
    c = Completion(prompt_id, prompt)
    t0 = clock()
    deadline = t0 + timeout
    t_first = t_last = None
    wall = WallClock(timeout)  # headers included: a trickled status line is bounded too
    try:
        with (
            wall,
            client.stream(
                "POST",
                f"{base}/v1/chat/completions",
                json=chat_body(model, prompt, max_tokens),
                extensions={"trace": wall.trace},
            ) as r,
        ):
            c.status_code = r.status_code
            ctype = r.headers.get("content-type", "")
            if r.status_code != 200:
                body = read_some(r, MAX_ERROR_BODY, "the answer")
                c.error, c.hint = describe_body(r.status_code, ctype, body)
                return c
            if "text/event-stream" not in ctype.lower():
                body = read_some(r, MAX_ERROR_BODY, "the answer")
                if "html" in ctype.lower() or body.lstrip()[:1] == b"<":
                    c.error, c.hint = describe_body(200, ctype, body)
                else:
                    c.error = (
                        f"HTTP 200 but {ctype or 'no content type'}, not an SSE stream "
                        "(text/event-stream): the server ignored stream=true"
                    )
                    c.hint = "smoke measures TTFT and decode speed on a streamed answer"
                return c
            data_lines: list[str] = []
            what = "the SSE stream"
            for line in iter_lines(r, what=what, deadline=deadline, clock=clock):
                now = clock()
                if line.startswith(":"):
                    continue  # SSE comment / keep-alive
                if line.startswith("data:"):
                    data_lines.append(line[5:].removeprefix(" "))
                    continue
                if line.strip():
                    continue  # event:, id:, retry: fields are not used by OpenAI streams
                if not data_lines:
                    continue
                payload, data_lines = "\n".join(data_lines), []
                if payload.strip() == "[DONE]":
                    c.done = True
                    break
                got_text = _event(c, payload)
                if c.error:
                    return c
                if got_text:
                    if t_first is None:
                        t_first = now
                        c.ttft_s = now - t0
                    t_last = now
            if data_lines and not c.done:
                payload = "\n".join(data_lines)
                if payload.strip() == "[DONE]":
                    c.done = True
                else:
                    c.error = _cut(c, "mid-event (a data line without its closing blank line)")
                    return c
    except DeadlinePassed:
        return _overran(c, timeout)
    except ServerError as e:  # over a cap (BodyTooLarge), a coding not asked for, corrupt gzip
        c.error, c.hint = e.message, e.hint
        return c
    except httpx.TimeoutException:
        if wall.expired:
            return _overran(c, timeout)
        what = "an answer" if c.status_code is None else "the next event"
        c.error = f"no answer: waited --timeout {timeout:g} s for {what} ({c.events} events so far)"
        c.hint = _hang_hint()
        return c
    except httpx.RemoteProtocolError as e:
        if wall.expired:
            return _overran(c, timeout)
        if c.status_code is None:
            c.error = f"the server closed the connection without an answer ({e})"
            c.hint = "read the engine's log: a crash, or a proxy that dropped the request"
        else:
            c.error = _cut(c, f"({e})")
        return c
    except httpx.HTTPError as e:
        if wall.expired:
            return _overran(c, timeout)
        if c.status_code is None and c.events == 0:
            raise unreachable(base, e) from None
        c.error = _cut(c, f"({type(e).__name__}: {e})")
        return c
    finally:
        c.total_s = clock() - t0
    if not c.done:
        if c.finish_reason is None:
            c.error = _cut(c, "before a finish_reason")
            return c
        c.note("the stream ended cleanly after finish_reason but without `data: [DONE]`")
    if t_first is not None and t_last is not None:
        c.decode_s = t_last - t_first
    return c


def _overran(c: Completion, timeout: float) -> Completion:
    """The answer (its headers, or its stream) did not finish within --timeout."""
    if c.status_code is None:  # nothing, or headers trickled: the same to the user
        c.error = f"no answer: waited --timeout {timeout:g} s for an answer (0 events so far)"
        c.hint = _hang_hint()
        return c
    c.error = (
        f"the answer was still streaming after --timeout {timeout:g} s ({c.events} events so far)"
    )
    c.hint = "a slow or looping server; raise --timeout or lower --max-tokens"
    return c


def _cut(c: Completion, how: str) -> str:
    c.hint = (
        "the engine crashed or a proxy dropped the connection mid-answer (proxy read timeout, "
        "buffering limit); read the engine's log around this request"
    )
    return (
        f"the SSE stream was cut mid-way {how}: {c.events} events and "
        f"{len(c.content) + len(c.reasoning)} characters arrived, no `data: [DONE]`"
    )


def _event(c: Completion, payload: str) -> bool:
    """Apply one SSE data payload to `c`; returns whether it carried text."""
    c.events += 1
    try:
        obj = json.loads(payload)
    except ValueError:
        c.error = f"malformed SSE event #{c.events}: not JSON ({payload[:80]!r})"
        c.hint = "the server does not speak OpenAI's streaming format"
        return False
    if not isinstance(obj, dict):
        c.error = f"malformed SSE event #{c.events}: a JSON {type(obj).__name__}, not an object"
        return False
    if "error" in obj and not obj.get("choices"):
        err = obj["error"]
        msg = err.get("message") if isinstance(err, dict) else err
        c.error = f"the server reported an error mid-stream: {str(msg)[:300]}"
        c.hint = "read the engine's log for the cause"
        return False
    metrics = obj.get("metrics")
    if isinstance(metrics, dict) and isinstance(metrics.get("speculative_decoding"), dict):
        c.spec_decode = metrics["speculative_decoding"]
    usage = obj.get("usage")
    if isinstance(usage, dict):
        ct, pt = usage.get("completion_tokens"), usage.get("prompt_tokens")
        if isinstance(ct, int) and not isinstance(ct, bool):
            c.completion_tokens = ct
        if isinstance(pt, int) and not isinstance(pt, bool):
            c.prompt_tokens = pt
    got = False
    choices = obj.get("choices") or []
    if not isinstance(choices, list):
        c.error = f"malformed SSE event #{c.events}: `choices` is not a list"
        return False
    for ch in choices:
        if not isinstance(ch, dict) or ch.get("index", 0) != 0:
            continue
        delta = ch.get("delta") or {}
        if isinstance(delta, dict):
            content = delta.get("content")
            if isinstance(content, str) and content:
                c.content += content
                got = True
            for field in ("reasoning", "reasoning_content"):
                value = delta.get(field)
                if isinstance(value, str) and value:
                    c.reasoning += value
                    c.reasoning_field = c.reasoning_field or field
                    got = True
        reason = ch.get("finish_reason")
        if isinstance(reason, str) and reason:
            c.finish_reason = reason
    if got:
        c.text_events += 1
    return got
