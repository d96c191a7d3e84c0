"""What real vLLM 0.32.0 (CPU build) printed and served for the shipped demo pair
(SmolLM2-135M-Instruct and its DFlash drafter, K = 15), read by dflashctl.

The files in tests/data/vllm032_demo/ were recorded by tests/capture_vllm_fixtures.py from two
real runs (the pair as shipped, and with the field story's mask id off by six): log excerpts, the
/metrics families dflashctl reads before and after, and the raw streamed answers. The smoke test
here replays them from a real HTTP server on 127.0.0.1 in the order vLLM gave them, so that
`dflashctl smoke` parses vLLM's own bytes without a vLLM install.
"""

from __future__ import annotations

import json
import threading
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import pairwise
from pathlib import Path
from typing import Any, ClassVar

import pytest

from dflashctl.metrics.analyze import MetricsOptions, analyze_source
from dflashctl.metrics.prom import lifetime_window, parse_reading
from dflashctl.metrics.window import aggregate

DATA = Path(__file__).resolve().parent / "data" / "vllm032_demo"
RUNS = ("healthy", "stale_mask")


def record(name: str) -> dict[str, Any]:
    return json.loads((DATA / f"{name}.smoke.json").read_text())


@pytest.mark.parametrize("name", RUNS)
def test_the_real_log_parses_and_agrees_with_the_real_counters(name):
    rep = analyze_source(str(DATA / f"{name}.log"), MetricsOptions())
    st = rep.state
    assert (st.engine, st.engine_version, st.engine_build) == ("vllm", "0.32.0", "cpu")
    assert st.windows and not st.unknown_fields
    assert st.spec_config is not None and st.spec_config.get("method") == "dflash"
    logged = aggregate(st.windows)
    # the counters after the run are the same requests' totals: the log's windows add up to them
    after = parse_reading(record(name)["metrics_after"], at=datetime.now(), monotonic=0.0)
    counted = lifetime_window(after)
    assert counted is not None
    assert logged.drafted_tokens == counted.drafted_tokens
    assert logged.accepted_tokens == counted.accepted_tokens
    assert logged.mean_acceptance_length == pytest.approx(counted.mean_acceptance_length, abs=0.01)


def test_the_stale_mask_lowers_real_vllm_acceptance_and_raises_the_alarm():
    healthy = analyze_source(str(DATA / "healthy.log"), MetricsOptions(drafter="demo"))
    stale = analyze_source(str(DATA / "stale_mask.log"), MetricsOptions(drafter="demo"))
    h = aggregate(healthy.state.windows).mean_acceptance_length
    s = aggregate(stale.state.windows).mean_acceptance_length
    assert h is not None and s is not None and s < 0.8 * h
    assert not [f for f in healthy.findings if f.severity == "alarm"]
    alarms = [f for f in stale.findings if f.severity == "alarm"]
    assert alarms and alarms[0].kind in ("collapse", "below_expected", "position_cliff")
    # bf16 with the k_norm defect and the thirteenth run's drafter: the wrong mask id rejects
    # position 1 too (every position 0.000 in 13 of 15 windows), not the cliff after position 1
    # that the float32 run shows: every draft rejected, a wiring or config fault with
    # verify-config as the first check and the mask id named next, not "a weak drafter"
    assert alarms[0].kind == "collapse"
    assert "every draft rejected: a wiring or config fault" in alarms[0].message
    first, second = alarms[0].likely_causes[:2]
    assert first.check.startswith("dflashctl verify-config")
    assert "wrong mask_token_id" in second.cause
    assert second.check.startswith("dflashctl verify-config")
    assert not any("weak or undertrained" in c.cause for c in alarms[0].likely_causes)
    # vLLM 0.32.0 on CPU: the catalogue's k_norm defect is among the causes (not checked: the
    # log does not show the drafter's weights)
    assert any("vllm-cpu-context-k-norm" in c.cause for c in alarms[0].likely_causes)


class _Replay(BaseHTTPRequestHandler):
    """Answers as the recorded vLLM did: /v1/models, /metrics (first the scrape taken before the
    requests, then the one after), and each chat prompt's recorded SSE stream."""

    rec: ClassVar[dict[str, Any]] = {}
    scrapes = 0

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, body: str, ctype: str) -> None:
        data = body.encode()
        self.send_response(200)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/v1/models":
            self._send(json.dumps(self.rec["models"]), "application/json")
        elif self.path == "/metrics":
            cls = type(self)
            which = "metrics_before" if cls.scrapes == 0 else "metrics_after"
            cls.scrapes += 1
            self._send(self.rec[which], "text/plain; version=0.0.4")
        elif self.path == "/health":
            self._send("", "text/plain")
        else:
            self.send_error(404)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        stream = self.rec["streams"].get(body["messages"][-1]["content"])
        if stream is None:
            self.send_error(404, "no recording for this prompt")
            return
        self._send(stream, "text/event-stream")


@pytest.mark.parametrize("name", RUNS)
def test_smoke_reads_real_vllm_answers_and_counters(name, monkeypatch, capsys):
    from support.cli import run_json

    handler = type("Replay", (_Replay,), {"rec": record(name), "scrapes": 0})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        code, data, _ = run_json(
            monkeypatch, capsys, "smoke", url, "--drafter", "demo", "--max-tokens", "96"
        )
    finally:
        server.shutdown()
        server.server_close()
    streams = record(name)["streams"]
    assert len(data["requests"]) == len(streams)
    for req in data["requests"]:
        assert req["completion_tokens"] and req["finish_reason"] in ("length", "stop")
    spec = data["speculation"]["window"]
    assert spec["drafted_tokens"] > 0
    if name == "healthy":
        assert code == 0, data
    else:
        assert code == 1 and any(c["status"] == "fail" for c in data["checks"])


def test_a_healthy_k15_run_ends_without_an_alarm_however_the_windows_fall():
    """Eight held-out prompts, one at a time, through real vLLM with the shipped pair at K = 15
    (recorded from the vLLM tier: `eight_prompts_k15.log`). Its last windows were once judged a
    collapse on draft acceptance alone (3.9 % < 5 %, which at K = 15 is τ 1.58, the pair's own
    healthy floor), and its middle as a decay (code first, then prose). However the engine's 1-s
    windows fall (merged in twos to fives, every offset), the end of the run raises no alarm,
    and no point of it alarms on the rate or on decay."""
    from dflashctl.metrics.analyze import judge, thresholds_for

    opts = MetricsOptions(drafter="demo")
    src = str(DATA / "eight_prompts_k15.log")
    rep = analyze_source(src, opts)
    base = rep.state.windows
    assert len(base) > 30 and rep.ok, rep.findings
    for size in range(1, 6):
        for off in range(size):
            cuts = [0, *range(off or size, len(base), size), len(base)]
            ws = [aggregate(base[a:b]) for a, b in pairwise(cuts) if b > a]
            for end in range(1, len(ws) + 1):
                rep.state.windows = ws[:end]
                r = judge(rep.state, thresholds_for(src, opts), opts)
                assert not any("draft acceptance" in f.message for f in r.alarms), (size, off, end)
                # one request at a time, code then prose: a change of workload, not a decay
                assert "decay" not in [f.kind for f in r.alarms], (size, off, end)
                if end == len(ws):
                    assert r.ok, (size, off, [f.message for f in r.alarms])
