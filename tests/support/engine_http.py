"""Small, real OpenAI-compatible HTTP servers on 127.0.0.1 for the smoke tests.

`FakeEngine` is a `ThreadingHTTPServer` in a thread that serves `/v1/models`,
`/v1/chat/completions` (streamed) and `/metrics`, and misbehaves on request: an HTML 502 page, a
JSON 500, a hang, an SSE stream cut mid-way (chunked or close-delimited), degenerate text,
empty content with `reasoning_content`, the length cap. Its `/metrics` page carries vLLM's
spec-decode counters, which grow with every answer it streams (healthy or collapsing
acceptance), or none at all (a `--spec none` server), or is missing (404). With
`prefix_cache="healthy"|"poisoned"` it keeps vLLM's prefix-cache counters (a prompt sent before
hits for its whole length) and, poisoned, accepts at `cached_spec` on a request whose prefix
was cached: it stands in for vLLM ≤ 0.28 serving DFlash on a GPU with prefix caching on
(vllm#47930), which nothing here can run. With `log=PATH` it
writes vLLM 0.34 `SpecDecoding metrics` lines every `log_interval` seconds while it has traffic,
as vLLM does.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

QUICKSORT = (
    "Quicksort picks a pivot, splits the list into smaller and larger items, and sorts each "
    "part recursively.\n\n```python\ndef quicksort(items):\n    if len(items) <= 1:\n"
    "        return list(items)\n    pivot, *rest = items\n"
    "    smaller = [x for x in rest if x < pivot]\n"
    "    larger = [x for x in rest if x >= pivot]\n"
    "    return quicksort(smaller) + [pivot] + quicksort(larger)\n```\n"
)
HTML_502 = (
    "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad "
    "Gateway</h1></center>\r\n<hr><center>nginx/1.24.0</center>\r\n</body>\r\n</html>\r\n"
)


def pieces(text: str, size: int = 4) -> list[str]:
    """The text as the token-sized pieces a server streams (4 characters ≈ one token)."""
    return [text[i : i + size] for i in range(0, len(text), size)]


@dataclass
class Acceptance:
    """Spec-decode counters per generated token: K positions, per-position acceptance."""

    per_pos: tuple[float, ...] = (0.9, 0.75, 0.6, 0.45, 0.3, 0.2, 0.1)

    @property
    def mean_length(self) -> float:
        return 1 + sum(self.per_pos)


HEALTHY = Acceptance()
COLLAPSED = Acceptance((0.05, 0.01, 0.0, 0.0, 0.0, 0.0, 0.0))


@dataclass
class Behaviour:
    """What the chat endpoint does. `text` is streamed in `pieces`; `tokens` defaults to one a
    piece; `mode` picks a misbehaviour."""

    text: str = QUICKSORT
    mode: str = "ok"  # ok | html502 | error500 | hang | cut_chunked | cut_close | no_done
    field: str = "content"  # content | reasoning_content | reasoning
    finish: str | None = None  # default: stop, or length when capped
    tokens: int | None = None
    delay: float = 0.0005  # seconds between events
    cap_at_max_tokens: bool = False  # stream exactly max_tokens pieces, finish length
    usage: bool = True  # False: no usage chunk (no token counts in the stream)


@dataclass
class Counters:
    drafts: float = 0.0
    prefix_queries: float = 0.0
    prefix_hits: float = 0.0
    draft_tokens: float = 0.0
    accepted: float = 0.0
    per_pos: list[float] = field(default_factory=lambda: [0.0] * 7)
    generated: float = 0.0
    # since the last log line
    window: dict[str, Any] = field(default_factory=dict)


class FakeEngine:
    def __init__(
        self,
        behaviour: Behaviour | None = None,
        *,
        spec: Acceptance | None = HEALTHY,
        metrics: str = "vllm",  # vllm | none (no spec counters) | missing (404) | html
        models: tuple[str, ...] = ("fake/model",),
        models_mode: str = "ok",  # ok | html502
        log: Path | None = None,
        log_interval: float = 0.3,
        prefix_cache: str | None = None,  # None (no counters) | healthy | poisoned
        cached_spec: Acceptance = COLLAPSED,  # poisoned: acceptance on a cached prefix
    ) -> None:
        self.prefix_cache, self.cached_spec = prefix_cache, cached_spec
        self.seen_prompts: set[str] = set()
        self.behaviour = behaviour or Behaviour()
        self.spec, self.metrics, self.models, self.models_mode = spec, metrics, models, models_mode
        self.counters = Counters()
        self.lock = threading.Lock()
        self.release = threading.Event()
        self.requests: list[dict[str, Any]] = []
        self.log, self.log_interval = log, log_interval
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_GET(self) -> None:
                outer.get(self)

            def do_POST(self) -> None:
                outer.post(self)

        self.server = QuietServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.logger: threading.Thread | None = None
        self.stop_log = threading.Event()
        if log is not None:
            log.write_text(self._line("INFO", "Starting vLLM server on " + self.url) + "\n")
            self.logger = threading.Thread(target=self._log_loop, daemon=True)
            self.logger.start()

    def close(self) -> None:
        self.release.set()
        self.stop_log.set()
        self.server.shutdown()
        self.server.server_close()

    # ---- HTTP ------------------------------------------------------------------------------

    @staticmethod
    def send(h: BaseHTTPRequestHandler, status: int, body: str, ctype: str) -> None:
        data = body.encode()
        h.send_response(status)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def get(self, h: BaseHTTPRequestHandler) -> None:
        if h.path == "/v1/models":
            if self.models_mode == "html502":
                self.send(h, 502, HTML_502, "text/html")
                return
            data = {"object": "list", "data": [{"id": m, "object": "model"} for m in self.models]}
            self.send(h, 200, json.dumps(data), "application/json")
        elif h.path == "/metrics" and self.metrics in ("vllm", "none"):
            self.send(h, 200, self.page(), "text/plain; version=0.0.4; charset=utf-8")
        elif h.path == "/metrics" and self.metrics == "html":
            self.send(h, 200, "<html><body>Grafana</body></html>", "text/html")
        else:
            self.send(h, 404, '{"detail":"Not Found"}', "application/json")

    def post(self, h: BaseHTTPRequestHandler) -> None:
        n = int(h.headers.get("Content-Length") or 0)
        body = json.loads(h.rfile.read(n) or b"{}")
        self.requests.append(body)
        b = self.behaviour
        if b.mode == "html502":
            self.send(h, 502, HTML_502, "text/html")
            return
        if b.mode == "error500":
            err = {
                "error": {
                    "message": "EngineCore encountered an issue. See stack trace (above) for "
                    "the root cause.",
                    "type": "InternalServerError",
                    "param": None,
                    "code": 500,
                }
            }
            self.send(h, 500, json.dumps(err), "application/json")
            return
        if b.mode == "hang":
            self.release.wait(30)
            return
        max_tokens = int(body.get("max_tokens") or 10**6)
        prompt = json.dumps(body.get("messages"))
        cached = prompt in self.seen_prompts
        self.seen_prompts.add(prompt)
        with self.lock:  # a prompt seen before hits the cache for all of its ~4-character tokens
            self.counters.prefix_queries += len(prompt) // 4
            self.counters.prefix_hits += len(prompt) // 4 if cached else 0
        parts = pieces(b.text)
        if b.cap_at_max_tokens:
            parts = (parts * (max_tokens // max(1, len(parts)) + 1))[:max_tokens]
        capped = len(parts) >= max_tokens
        parts = parts[:max_tokens]
        finish = b.finish or ("length" if capped else "stop")
        tokens = b.tokens if b.tokens is not None else len(parts)
        chunked = b.mode != "cut_close"
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        if chunked:
            h.send_header("Transfer-Encoding", "chunked")
        else:
            h.send_header("Connection", "close")
        h.end_headers()

        def emit(payload: str) -> None:
            data = f"data: {payload}\n\n".encode()
            if chunked:
                h.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            else:
                h.wfile.write(data)
            h.wfile.flush()

        def chunk(delta: dict[str, Any], reason: str | None = None) -> str:
            return json.dumps(
                {
                    "id": "chatcmpl-1",
                    "object": "chat.completion.chunk",
                    "model": body.get("model"),
                    "choices": [{"index": 0, "delta": delta, "finish_reason": reason}],
                }
            )

        emit(chunk({"role": "assistant", "content": ""}))
        for i, p in enumerate(parts):
            time.sleep(b.delay)
            if b.mode in ("cut_chunked", "cut_close") and i == len(parts) // 2:
                if chunked:  # half a chunk, then the connection drops
                    h.wfile.write(b'40\r\ndata: {"id": ')
                    h.wfile.flush()
                h.close_connection = True
                return
            emit(chunk({b.field: p} if b.field != "content" else {"content": p}))
            self.account(1, cached)
        emit(chunk({"content": ""}, finish))
        usage = {"prompt_tokens": 20, "completion_tokens": tokens, "total_tokens": 20 + tokens}
        if b.usage:
            emit(json.dumps({"id": "chatcmpl-1", "choices": [], "usage": usage}))
        if b.mode != "no_done":
            emit("[DONE]")
        if chunked:
            h.wfile.write(b"0\r\n\r\n")
            h.wfile.flush()
        else:
            h.close_connection = True

    # ---- metrics ---------------------------------------------------------------------------

    def account(self, generated: int, cached: bool = False) -> None:
        """Grow the counters as an engine would for `generated` new tokens."""
        with self.lock:
            c = self.counters
            c.generated += generated
            if self.spec is None:
                return
            spec = self.cached_spec if cached and self.prefix_cache == "poisoned" else self.spec
            drafts = generated / spec.mean_length
            c.drafts += drafts
            c.draft_tokens += drafts * len(spec.per_pos)
            c.accepted += drafts * sum(spec.per_pos)
            for i, r in enumerate(spec.per_pos):
                c.per_pos[i] += drafts * r
            w = c.window
            w["drafts"] = w.get("drafts", 0.0) + drafts
            w["generated"] = w.get("generated", 0.0) + generated

    def page(self) -> str:
        c = self.counters
        labels = 'engine="0",model_name="fake/model"'
        lines = [
            "# TYPE vllm:generation_tokens_total counter",
            f"vllm:generation_tokens_total{{{labels}}} {c.generated}",
            "# TYPE vllm:num_requests_running gauge",
            f"vllm:num_requests_running{{{labels}}} 0.0",
        ]
        if self.prefix_cache is not None:
            lines += [
                "# TYPE vllm:prefix_cache_queries_total counter",
                f"vllm:prefix_cache_queries_total{{{labels}}} {c.prefix_queries}",
                "# TYPE vllm:prefix_cache_hits_total counter",
                f"vllm:prefix_cache_hits_total{{{labels}}} {c.prefix_hits}",
            ]
        if self.metrics == "vllm" and self.spec is not None:
            lines += [
                "# TYPE vllm:spec_decode_num_drafts_total counter",
                f"vllm:spec_decode_num_drafts_total{{{labels}}} {round(c.drafts)}",
                "# TYPE vllm:spec_decode_num_draft_tokens_total counter",
                f"vllm:spec_decode_num_draft_tokens_total{{{labels}}} {round(c.draft_tokens)}",
                "# TYPE vllm:spec_decode_num_accepted_tokens_total counter",
                f"vllm:spec_decode_num_accepted_tokens_total{{{labels}}} {round(c.accepted)}",
                "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter",
            ]
            lines += [
                f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{labels},position="{i}"}} '
                f"{round(v)}"
                for i, v in enumerate(c.per_pos)
            ]
        return "\n".join(lines) + "\n"

    # ---- log ------------------------------------------------------------------------------

    @staticmethod
    def _line(level: str, msg: str, where: str = "api_server.py:100") -> str:
        return f"(APIServer pid=4242) {level} {datetime.now():%m-%d %H:%M:%S} [{where}] {msg}"

    def _log_loop(self) -> None:
        assert self.log is not None
        while not self.stop_log.wait(self.log_interval):
            with self.lock:
                w, self.counters.window = self.counters.window, {}
            if not w:
                continue
            lines = [
                self._line(
                    "INFO",
                    f"Engine 000: Avg prompt throughput: 10.0 tokens/s, Avg generation "
                    f"throughput: {w['generated'] / self.log_interval:.1f} tokens/s, Running: 1 "
                    "reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, Prefix cache hit rate: "
                    "0.0%",
                    "loggers.py:335",
                )
            ]
            if self.spec is not None and w.get("drafts"):
                d = max(1, round(w["drafts"]))
                per = [round(r * d) for r in self.spec.per_pos]
                acc = sum(per)
                k = len(per)
                lines.append(
                    self._line(
                        "INFO",
                        f"SpecDecoding metrics: Mean acceptance length: {1 + acc / d:.2f}, "
                        f"Accepted throughput: {acc / self.log_interval:.2f} tokens/s, Drafted "
                        f"throughput: {d * k / self.log_interval:.2f} tokens/s, Accepted: {acc} "
                        f"tokens, Drafted: {d * k} tokens, Per-position acceptance rate: "
                        + ", ".join(f"{a / d:.3f}" for a in per)
                        + f", Avg Draft acceptance rate: {acc / (d * k) * 100:.1f}%",
                        "metrics.py:120",
                    )
                )
            with self.log.open("a") as f:
                f.write("\n".join(lines) + "\n")


class QuietServer(ThreadingHTTPServer):
    """A client that drops its connection (the SSE reader closes at `data: [DONE]`, before the
    chunked terminator; `/version` is read only so far) is normal traffic here: socketserver
    would print its traceback to stderr, in pieces between the CLI's own lines. Other errors
    still print, so a test that looks for tracebacks still catches this server's bugs."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


def serve_many() -> tuple[Callable[..., FakeEngine], list[FakeEngine]]:
    made: list[FakeEngine] = []

    def start(*args: Any, **kw: Any) -> FakeEngine:
        s = FakeEngine(*args, **kw)
        made.append(s)
        return s

    return start, made
