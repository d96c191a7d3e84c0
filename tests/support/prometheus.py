"""A real Prometheus and a real Alertmanager (Debian's packages) on 127.0.0.1, each in its own
directory, for the alert rules' end-to-end tests, and the webhook receiver Alertmanager posts to.

`Stack.start(d, targets, rules)` writes both configs (scrape and evaluation every second; the
Alertmanager route posting every firing group at once to the receiver), starts the two servers
and waits until they answer. `stop()` ends exactly the processes it started."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from .startup import free_port

PROMETHEUS = shutil.which("prometheus")
ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")


@dataclass
class Webhook:
    """Alertmanager's webhook receiver: every notification it posts, with when it arrived."""

    received: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    def start(self) -> str:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                outer.received.append((time.monotonic(), json.loads(self.rfile.read(n))))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}/"

    def firing(self, alertname: str) -> list[tuple[float, dict[str, Any]]]:
        """(arrival, alert) for each firing alert of that name received so far."""
        return [
            (t, a)
            for t, body in self.received
            for a in body.get("alerts", [])
            if a.get("status") == "firing" and a.get("labels", {}).get("alertname") == alertname
        ]

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()


@dataclass
class Stack:
    prometheus: subprocess.Popen[bytes]
    alertmanager: subprocess.Popen[bytes]
    prom_url: str
    am_url: str
    webhook: Webhook

    @classmethod
    def start(
        cls,
        d: Path,
        targets: dict[str, list[str]],
        rules: Path,
        scrape_configs: list[dict[str, Any]] | None = None,
    ) -> Stack:
        """`targets`: job -> HOST:PORT list; `scrape_configs`: more jobs, as written."""
        assert PROMETHEUS and ALERTMANAGER
        hook = Webhook()
        hook_url = hook.start()
        am_port, prom_port = free_port(), free_port()
        (d / "am").mkdir(parents=True)
        (d / "prom").mkdir()
        (d / "alertmanager.yml").write_text(
            "route:\n  receiver: hook\n  group_by: [alertname, instance]\n"
            "  group_wait: 1s\n  group_interval: 1s\n  repeat_interval: 1h\n"
            f"receivers:\n  - name: hook\n    webhook_configs:\n      - url: {hook_url}\n"
        )
        import yaml

        jobs = [
            {"job_name": job, "static_configs": [{"targets": ts}]} for job, ts in targets.items()
        ]
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(rules)],
            "alerting": {
                "alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{am_port}"]}]}]
            },
            "scrape_configs": jobs + list(scrape_configs or []),
        }
        (d / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
        log_am = open(d / "alertmanager.log", "wb")  # noqa: SIM115 (the process holds it)
        am = subprocess.Popen(
            [ALERTMANAGER, f"--config.file={d / 'alertmanager.yml'}",
             f"--storage.path={d / 'am'}", f"--web.listen-address=127.0.0.1:{am_port}",
             "--cluster.listen-address="],
            stdout=log_am, stderr=subprocess.STDOUT,
        )  # fmt: skip
        log_prom = open(d / "prometheus.log", "wb")  # noqa: SIM115
        prom = subprocess.Popen(
            [PROMETHEUS, f"--config.file={d / 'prometheus.yml'}",
             f"--storage.tsdb.path={d / 'prom'}", f"--web.listen-address=127.0.0.1:{prom_port}"],
            stdout=log_prom, stderr=subprocess.STDOUT,
        )  # fmt: skip
        stack = cls(prom, am, f"http://127.0.0.1:{prom_port}", f"http://127.0.0.1:{am_port}", hook)
        deadline = time.monotonic() + 60
        for url in (f"{stack.am_url}/-/ready", f"{stack.prom_url}/-/ready"):
            while True:
                try:
                    if httpx.get(url, timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline or prom.poll() is not None or am.poll() is not None:
                    stack.stop()
                    logs = (d / "prometheus.log").read_text()[-1500:]
                    logs += (d / "alertmanager.log").read_text()[-1500:]
                    raise RuntimeError(f"Prometheus/Alertmanager did not start:\n{logs}")
                time.sleep(0.2)
        return stack

    def query(self, expr: str) -> list[dict[str, Any]]:
        r = httpx.get(f"{self.prom_url}/api/v1/query", params={"query": expr}, timeout=5)
        return list(r.json()["data"]["result"])

    def stop(self) -> None:
        for p in (self.prometheus, self.alertmanager):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.webhook.stop()
