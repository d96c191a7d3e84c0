"""The alert rules end to end (issue 29), with real processes on 127.0.0.1: Debian's Prometheus
scrapes two bundled engines serving the demo pair every second — one healthy, one with the field
story's stale drafter (the mask id off by six) — and evaluates `dflashctl alerts`' rules every
second; Debian's Alertmanager posts what fires to a webhook receiver in this test.

Healthy traffic raises nothing; the stale drafter's collapse reaches the receiver within
2 × the rule's `for:` plus one evaluation interval, plus the scrape that first sees the drafts
and Alertmanager's group_wait (the measured figure is printed: docs/performance.md)."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest
from support.cli import run_main
from support.served_engine import chat_traffic

pytestmark = [
    pytest.mark.skipif(
        shutil.which("prometheus") is None
        or (shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")) is None,
        reason="no Prometheus/Alertmanager (./bin/setup-system installs them)",
    ),
    pytest.mark.usefixtures("stop_all"),
]

FOR_S = 5


def test_collapse_reaches_alertmanager_and_healthy_traffic_does_not(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    import json

    from support.pairs import demo_pair
    from support.prometheus import Stack
    from support.served_engine import served

    from dflashctl.drafter.stale import write_stale_copy

    rules = tmp_path / "rules.yml"
    code, _, err = run_main(monkeypatch, capsys, "alerts", "--out", str(rules), "--for",
                            f"{FOR_S}s", "--check")  # fmt: skip
    assert code == 0, err
    target, drafter = demo_pair()
    stale = tmp_path / "stale-drafter"
    write_stale_copy(drafter, stale, ("mask",))
    demo = Path(__file__).resolve().parent.parent / "dflashctl" / "assets" / "demo"
    prompts = [p["prompt"] for p in json.loads((demo / "eval_prompts.json").read_text())]

    with (
        served(target, drafter, "healthy") as (healthy_url, _),
        served(target, stale, "stale") as (stale_url, _),
    ):
        hosts = [u.removeprefix("http://") for u in (healthy_url, stale_url)]
        stack = Stack.start(tmp_path / "stack", {"vllm": hosts}, rules)
        try:
            stop = threading.Event()
            t = threading.Thread(
                target=chat_traffic, args=(healthy_url, stop, prompts), daemon=True
            )
            t.start()
            time.sleep(FOR_S * 2 + 8)  # healthy traffic: well past the rule's for:
            tau = stack.query(
                f'dflashctl:spec_decode_mean_acceptance_length:rate5m{{instance="{hosts[0]}"}}'
            )
            assert tau and float(tau[0]["value"][1]) > 1.5, tau  # the rules see the healthy pair
            assert stack.webhook.received == [], stack.webhook.received
            stop.set()
            t.join()

            stop = threading.Event()
            start = time.monotonic()
            t = threading.Thread(target=chat_traffic, args=(stale_url, stop, prompts), daemon=True)
            t.start()
            deadline = start + 90
            fired: list = []
            seen: float | None = None  # when Prometheus' own series first shows the collapse
            collapsed = (
                f'dflashctl:spec_decode_mean_acceptance_length:rate5m{{instance="{hosts[1]}"}}'
                f" <= 1.3 and on (instance) dflashctl:spec_decode_drafts:rate5m > 0.1"
            )
            while time.monotonic() < deadline and not fired:
                if seen is None and stack.query(collapsed):
                    seen = time.monotonic()
                fired = [(at, a) for at, a in stack.webhook.firing("DFlashAcceptanceCollapse")
                         if a["labels"].get("instance") == hosts[1]]  # fmt: skip
                time.sleep(0.2)
            stop.set()
            t.join()
            assert fired, (stack.webhook.received, stack.query("ALERTS"))
            seconds = fired[0][0] - start
            alert = fired[0][1]
            assert seen is not None
            after = fired[0][0] - seen
            print(
                f"\nfirst stale request to Alertmanager's receiver: {seconds:.1f} s; the collapse "
                f"visible in Prometheus to the receiver: {after:.1f} s (for: {FOR_S}s, "
                "evaluation every 1 s)"
            )
            assert fired[0][0] - seen < 2 * FOR_S + 1 + 2  # + Alertmanager's group_wait, 1 s
            assert alert["labels"]["severity"] == "critical"
            assert "mask_token_id" in alert["annotations"]["description"]
            assert alert["annotations"]["runbook_url"].endswith("#acceptance-collapse")
            # no alert about the healthy server, ever
            assert not [a for _, a in stack.webhook.firing("DFlashAcceptanceCollapse")
                        if a["labels"].get("instance") == hosts[0]]  # fmt: skip
            # bounded: 2 × for: + 1 evaluation interval, + the first scrape of the drafts (1 s),
            # the first request's prefill and Alertmanager's group_wait (1 s)
            assert seconds < 2 * FOR_S + 1 + 15, seconds
        finally:
            stack.stop()
