"""The monitoring tier on real vLLM (CPU build, bin/setup-vllm; issue 29): Debian's Prometheus
scrapes `vllm serve` running the demo pair with `dflashctl alerts`' rules, and the recording
rules agree with vLLM's own counters; `dashboard --prometheus` finds series for every panel
vLLM feeds (τ, positions, throughput, prefix-cache hits) and no alert fires on a healthy
server."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from support.cli import run_main
from support.pairs import DEMO_DRAFTER, DEMO_PROMPTS, demo_target
from support.vllm_server import VLLM_BIN, VllmServer, acceptance

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("prometheus") is None
        or (shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")) is None,
        reason="no Prometheus/Alertmanager (./bin/setup-system installs them)",
    ),
    pytest.mark.skipif(not VLLM_BIN.exists(), reason=f"no vLLM at {VLLM_BIN} (bin/setup-vllm)"),
]

TAU = "dflashctl:spec_decode_mean_acceptance_length:rate5m"


def test_prometheus_on_real_vllm_agrees_with_its_counters(tmp_path: Path, monkeypatch, capsys):
    from support.prometheus import Stack

    rules = tmp_path / "rules.yml"
    code, _, err = run_main(monkeypatch, capsys, "alerts", "--out", str(rules), "--for", "5s")
    assert code == 0, err
    prompts = [p["prompt"] for p in json.loads(DEMO_PROMPTS.read_text())][:6]
    server = VllmServer(demo_target(), DEMO_DRAFTER, tmp_path / "vllm.log",
                        num_speculative_tokens=15)  # fmt: skip
    try:
        server.wait_ready(timeout=400)
        host = server.url.removeprefix("http://")
        stack = Stack.start(tmp_path / "stack", {"vllm": [host]}, rules)
        try:
            deadline = time.monotonic() + 30
            while not stack.query(f'up{{instance="{host}"}} == 1'):  # a scrape before traffic
                assert time.monotonic() < deadline, stack.query("up")
                time.sleep(0.2)
            before = server.spec_counters()
            # one long preface before every prompt: its full KV blocks come from the prefix
            # cache from the second request on (a short prompt fills no block to reuse)
            preface = "Read this first. " + "The quick brown fox jumps over the lazy dog. " * 40
            for p in prompts:
                server.chat(preface + p, 48)
            after = server.spec_counters()
            time.sleep(3)  # two scrapes past the last request, and a rule evaluation
            want = acceptance(before, after)["mean_acceptance_length"]
            got = stack.query(f'{TAU}{{instance="{host}"}}')
            assert got, stack.query("up")
            labels = got[0]["metric"]
            assert labels["engine"] == "vllm" and labels["model_name"] == "demo"
            # rate()'s window holds every draft since the server started; before holds none
            # of the traffic here, so both are the same ratio (to rounding of the scrapes)
            assert float(got[0]["value"][1]) == pytest.approx(want, rel=0.05)
            hits = stack.query(f'dflashctl:prefix_cache_hit_rate:rate5m{{instance="{host}"}}')
            assert hits and 0 < float(hits[0]["value"][1]) <= 1, hits
            code, text, err = run_main(monkeypatch, capsys, "dashboard", "--prometheus",
                                       stack.prom_url, "--json")  # fmt: skip
            assert code == 0, err
            fed = {q["panel"] for q in json.loads(text)["queries"] if q["series"]}
            panels = {"Mean acceptance length (τ)", "τ now", "Acceptance per draft position",
                      "Drafted and accepted", "Prefix-cache hit rate beside τ"}  # fmt: skip
            assert fed == panels, text
            assert stack.query('ALERTS{alertstate="firing"}') == []
        finally:
            stack.stop()
    finally:
        server.stop()
