"""The exporter for engines that only log (`dflashctl metrics LOG --serve-metrics ADDR:PORT`),
run as a user runs it: a real process following an SGLang-format log that this test writes
line by line; /metrics read over HTTP on 127.0.0.1; and, end to end, Debian's Prometheus
scraping it with `dflashctl alerts`' rules and Alertmanager posting the collapse to a webhook
receiver in the test."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.cli import run_main
from support.startup import free_port

FOR_S = 5


def sglang_line(tau: float, rate: float) -> str:
    now = datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    return (
        f"[{now} TP0] Decode batch, #running-req: 4, #token: 5120, token usage: 0.05, "
        f"accept len: {tau:.2f}, accept rate: {rate:.2f}, cuda graph: True, "
        "gen throughput (token/s): 812.45, #queue-req: 0\n"
    )


class Exporter:
    def __init__(self, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/metrics"
        env = dict(os.environ, NO_COLOR="1")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dflashctl", "metrics", str(log), "--serve-metrics",
             f"127.0.0.1:{self.port}"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(self.url, timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            assert self.proc.poll() is None and time.monotonic() < deadline, self.output()
            time.sleep(0.1)

    def samples(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        text = httpx.get(self.url, timeout=5).text
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text)
            for s in fam.samples
        }

    def value(self, name: str, **labels: str) -> float | None:
        for (n, ls), v in self.samples().items():
            if n == name and all(dict(ls).get(k) == x for k, x in labels.items()):
                return v
        return None

    def output(self) -> str:
        return self.proc.stdout.read1().decode() if self.proc.stdout else ""  # type: ignore[attr-defined]

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)  # the process this test started, by pid
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)


def test_the_exporter_counts_what_the_log_says_and_raises_the_alarm(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    log.write_text("".join(sglang_line(3.2, 0.73) for _ in range(3)))
    exp = Exporter(log)
    try:
        assert exp.value("dflashctl_spec_drafts_total", engine="sglang") == 300.0
        assert exp.value("dflashctl_spec_mean_acceptance_length") == 3.2
        assert exp.value("dflashctl_alarm") is None
        assert exp.value("dflashctl_exporter_last_window_timestamp_seconds") > time.time() - 60
        with log.open("a") as f:  # the drafter stops being accepted
            for _ in range(8):
                f.write(sglang_line(1.0, 0.0))
                f.flush()
                time.sleep(0.1)
        # the alarm may rise on a read that caught the lines still being written: wait for the
        # alarm and for the last line to be counted
        deadline = time.monotonic() + 20
        while (
            exp.value("dflashctl_alarm", kind="collapse") is None
            or exp.value("dflashctl_spec_drafts_total", engine="sglang") != 1100.0
        ):
            assert time.monotonic() < deadline, exp.samples()
            time.sleep(0.2)
        assert exp.value("dflashctl_spec_drafts_total", engine="sglang") == 1100.0
        assert exp.value("dflashctl_spec_accepted_tokens_total", engine="sglang") == pytest.approx(
            660.0
        )
        # rotation: the path names a new file, read from its start
        log.rename(tmp_path / "sglang.log.1")
        log.write_text(sglang_line(3.0, 0.70))
        deadline = time.monotonic() + 20
        while exp.value("dflashctl_exporter_windows_total") != 12.0:
            assert time.monotonic() < deadline, exp.samples()
            time.sleep(0.2)
    finally:
        exp.stop()


def test_a_taken_port_and_a_bad_address_exit_2(monkeypatch, capsys, tmp_path) -> None:
    import socket

    log = tmp_path / "a.log"
    log.write_text(sglang_line(3.0, 0.7))
    code, _out, err = run_main(monkeypatch, capsys, "metrics", str(log), "--serve-metrics", "nope")
    assert code == 2 and "ADDR:PORT" in err and "Traceback" not in err
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        code, _out, err = run_main(monkeypatch, capsys, "metrics", str(log), "--serve-metrics",
                                   f"127.0.0.1:{port}")  # fmt: skip
    assert code == 2 and "cannot listen there" in err and "Traceback" not in err


@pytest.mark.skipif(
    shutil.which("prometheus") is None
    or (shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")) is None,
    reason="no Prometheus/Alertmanager (./bin/setup-system installs them)",
)
def test_prometheus_fires_the_collapse_alert_from_an_sglang_log(tmp_path, monkeypatch, capsys):
    """The same rules as for vLLM's and SGLang's own /metrics cover a log-only engine."""
    from support.prometheus import Stack

    rules = tmp_path / "rules.yml"
    code, _, err = run_main(monkeypatch, capsys, "alerts", "--out", str(rules), "--for",
                            f"{FOR_S}s", "--check")  # fmt: skip
    assert code == 0, err
    log = tmp_path / "sglang.log"
    log.write_text(sglang_line(3.2, 0.73))
    exp = Exporter(log)
    stack = Stack.start(tmp_path / "stack", {"dflashctl": [f"127.0.0.1:{exp.port}"]}, rules)
    try:

        def write(tau: float, rate: float, seconds: float) -> None:
            end = time.monotonic() + seconds
            with log.open("a") as f:
                while time.monotonic() < end:
                    f.write(sglang_line(tau, rate))
                    f.flush()
                    time.sleep(1.0)

        write(3.2, 0.73, FOR_S * 2 + 6)  # healthy: past the rule's for:
        tau = stack.query('dflashctl:spec_decode_mean_acceptance_length:rate5m{engine="exporter"}')
        assert tau and float(tau[0]["value"][1]) > 2.5, tau
        assert stack.webhook.received == [], stack.webhook.received
        start = time.monotonic()
        fired: list = []
        end = start + 120
        # a busy engine logs decode lines faster: its collapsed lines soon outweigh the healthy
        # minutes still inside the rules' 5-minute rate window (each line counts alike)
        with log.open("a") as f:
            while time.monotonic() < end and not fired:
                f.write(sglang_line(1.0, 0.0))
                f.flush()
                time.sleep(0.2)
                fired = stack.webhook.firing("DFlashAcceptanceCollapse")
        assert fired, (stack.webhook.received, stack.query("ALERTS"))
        took = fired[0][0] - start
        assert fired[0][1]["labels"]["severity"] == "critical"
        # the dashboard's queries, run by `dashboard --prometheus` against this Prometheus:
        # each accepted; τ, the traffic and the firing alert have series (SGLang's lines carry
        # no per-position counts and no prefix-cache figures, so those panels stay empty)
        code, text, err = run_main(monkeypatch, capsys, "dashboard", "--prometheus",
                                   stack.prom_url, "--json")  # fmt: skip
        assert code == 0, err
        seen = {(q["panel"], q["expr"][:40]): q for q in json.loads(text)["queries"]}
        assert all(q["ok"] for q in seen.values()), seen
        has = {panel for (panel, _), q in seen.items() if q["series"]}
        assert has == {"Mean acceptance length (τ)", "τ now", "Drafted and accepted",
                       "Prefix-cache hit rate beside τ", "DFlash alerts firing"}, seen  # fmt: skip
        print(f"\nexporter: the first collapsed line to Alertmanager's receiver in {took:.1f} s")
    finally:
        stack.stop()
        exp.stop()
