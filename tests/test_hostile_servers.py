"""Misbehaving servers on 127.0.0.1 (issue 19, items 2 and 7): every body dflashctl reads is
capped (after decompression), and `--timeout` bounds each request by the wall clock."""

from __future__ import annotations

import time

import pytest
from support.hostile import (
    HostileServer,
    assert_clean_error,
    dflashctl,
    endless,
    gzip_bomb,
    models,
    send_json,
    trickle,
)

SSE = "text/event-stream"
MEM = 1536 << 20  # ulimit -v: a bomb must fail on its cap, not on memory


@pytest.fixture(scope="module")
def bomb() -> bytes:
    return gzip_bomb(256 << 20)


def gzip_route(body: bytes):
    def route(h) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/plain; version=0.0.4")
        h.send_header("Content-Encoding", "gzip")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    return route


class TestMetricsPages:
    def test_a_gzip_bomb_stops_at_the_cap(self, bomb: bytes):
        with HostileServer({"/metrics": gzip_route(bomb)}) as s:
            res = dflashctl("metrics", f"{s.url}/metrics", "--timeout", "20", mem_limit=MEM)
        assert_clean_error(res, 2, contains="larger than")
        assert res.seconds < 15

    def test_an_endless_page_stops_at_the_cap(self):
        with HostileServer({"/metrics": endless("text/plain")}) as s:
            res = dflashctl("metrics", f"{s.url}/metrics", "--timeout", "20", mem_limit=MEM)
        assert_clean_error(res, 2, contains="larger than")
        assert res.seconds < 15


class TestSmoke:
    def test_an_endless_model_list_is_one_line(self):
        with HostileServer({"/v1/models": endless("application/json")}) as s:
            res = dflashctl("smoke", s.url, "--timeout", "20", mem_limit=MEM)
        assert_clean_error(res, 2, contains="larger than")

    def test_timeout_is_a_wall_clock_bound_per_request(self):
        # One byte every 0.5 s: each read is quick, the answer never ends within --timeout.
        payload = b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n' * 50
        routes = {"/v1/models": models, "/v1/chat/completions": trickle(SSE, payload)}
        with HostileServer(routes) as s:
            res = dflashctl(
                "smoke",
                s.url,
                "--prompt",
                "hello",
                "--timeout",
                "2",
                "--expect-no-spec",
                "--json",
                timeout=60,
            )
        assert "Traceback" not in res.stderr
        assert res.code == 1, res.stdout + res.stderr
        assert "after --timeout 2 s" in res.stdout
        assert res.seconds < 10, res.seconds  # was 0.5 s per byte: minutes

    def test_an_event_line_without_end_is_capped(self):
        routes = {
            "/v1/models": models,
            "/v1/chat/completions": endless(SSE, b"data: " + b"x" * (1 << 20)),
        }
        with HostileServer(routes) as s:
            res = dflashctl(
                "smoke",
                s.url,
                "--prompt",
                "hello",
                "--timeout",
                "20",
                "--expect-no-spec",
                "--json",
                timeout=60,
            )
        assert "Traceback" not in res.stderr
        assert res.code == 1, res.stdout + res.stderr
        assert "longer than" in res.stdout

    def test_an_encoding_not_asked_for_is_a_failed_check(self):
        def brotli(h) -> None:
            h.send_response(200)
            h.send_header("Content-Type", SSE)
            h.send_header("Content-Encoding", "br")
            h.send_header("Connection", "close")
            h.end_headers()
            h.wfile.write(b"\x8b\x00\x80garbage")

        with HostileServer({"/v1/models": models, "/v1/chat/completions": brotli}) as s:
            res = dflashctl(
                "smoke", s.url, "--prompt", "hi", "--expect-no-spec", "--json", timeout=60
            )
        assert "Traceback" not in res.stderr
        assert res.code == 1, res.stdout + res.stderr
        assert "Content-Encoding 'br'" in res.stdout


class TestDiagnoseVersion:
    """diagnose reads who a server is from GET /version: within 64 KiB and 10 s."""

    def identity(self, route) -> tuple:
        import httpx

        from dflashctl.commands.diagnose.measure import _server_identity

        with HostileServer({"/version": route}) as s, httpx.Client() as client:
            t0 = time.monotonic()
            out = _server_identity(client, s.url)
        return out, time.monotonic() - t0

    def test_the_bundled_engines_answer_is_read(self):
        body = {"version": "dflashctl-0.1.0", "dflashctl_step": {"draft_confidence": 0.5}}
        (engine, version, step), _ = self.identity(lambda h: send_json(h, body))
        assert (engine, version) == ("local", "0.1.0")
        assert step is not None and step.draft_confidence == 0.5

    def test_an_endless_body_is_not_known_and_bounded(self):
        # was read whole: a server sending without end held diagnose (and its memory) forever
        out, seconds = self.identity(endless("application/json"))
        assert out == (None, None, None)
        assert seconds < 10, seconds

    def test_a_trickled_body_is_not_known_and_bounded(self):
        # one byte every 0.5 s: the wall clock, not the body's size, ends it
        body = b'{"version": "dflashctl-0.1.0", "pad": "' + b"x" * 60 + b'"}'
        out, seconds = self.identity(trickle("application/json", body))
        assert out == (None, None, None)
        assert seconds < 15, seconds


class TestBench:
    def test_one_target_timing_out_is_a_failed_cell_not_a_traceback(self):
        import json

        from support.engine_http import Behaviour, FakeEngine

        good, bad = FakeEngine(), FakeEngine(Behaviour(mode="hang"))
        try:
            res = dflashctl(
                "bench", bad.url, good.url, "--timeout", "1", "--repetitions", "1",
                "--fixtures", "code", "--max-tokens", "16", "--warmup-tokens", "0", "--json",
                timeout=120,
            )  # fmt: skip
        finally:
            bad.release.set()
        assert "Traceback" not in res.stderr, res.stderr
        assert res.code == 1, res.stdout + res.stderr
        report = json.loads(res.stdout)
        assert report["ok"] is False
        assert "--timeout 1 s" in res.stderr

    def test_a_stream_without_token_counts_is_said_not_a_traceback(self):
        """Issue 30 #4: a stream with no usage chunk (no token counts) beside a target that
        times out: the cells say so, one note explains why no decode speed was measured."""
        from support.engine_http import Behaviour, FakeEngine

        good, bad = FakeEngine(Behaviour(usage=False)), FakeEngine(Behaviour(mode="hang"))
        try:
            res = dflashctl(
                "bench", good.url, bad.url, "--repetitions", "1", "--warmup-tokens", "0",
                "--max-tokens", "16", "--timeout", "3", timeout=120,
            )  # fmt: skip
        finally:
            bad.release.set()
        assert "Traceback" not in res.stderr, res.stderr
        assert res.code == 1, res.stdout + res.stderr
        assert "no token counts in the stream" in res.stdout + res.stderr
        assert "None tokens" not in res.stdout + res.stderr


def trickled_headers(h) -> None:
    """The status line and headers one byte every 0.5 s: each read is quick, none ends."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    head += b"X-Pad: " + b"x" * 200 + b"\r\n\r\n"
    for b in head:
        try:
            h.wfile.write(bytes([b]))
            h.wfile.flush()
        except OSError:
            return
        time.sleep(0.5)


class TestWallClock:
    """Issue 30 #9: `--timeout` bounds a request by the wall clock from the request to its last
    byte, its headers included (httpx's timeouts bound each read: a trickled status line held
    `smoke --timeout 5` for 36 s)."""

    def test_trickled_answer_headers(self):
        routes = {"/v1/models": models, "/v1/chat/completions": trickled_headers}
        with HostileServer(routes) as s:
            res = dflashctl("smoke", s.url, "--prompt", "hello", "--timeout", "2",
                            "--expect-no-spec", "--json", timeout=60)  # fmt: skip
        assert "Traceback" not in res.stderr, res.stderr
        assert res.code == 1, res.stdout + res.stderr
        assert "no answer: waited --timeout 2 s for an answer" in res.stdout
        assert res.seconds < 10, res.seconds

    def test_trickled_model_list_headers(self):
        with HostileServer({"/v1/models": trickled_headers}) as s:
            res = dflashctl("smoke", s.url, "--timeout", "2", "--json", timeout=60)
        assert "Traceback" not in res.stderr, res.stderr
        assert res.code == 1, res.stdout + res.stderr
        assert "GET /v1/models did not answer within 2 s" in res.stdout
        assert res.seconds < 10, res.seconds
