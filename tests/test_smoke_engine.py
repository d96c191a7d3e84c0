"""`dflashctl smoke` against the REAL bundled engine: `python -m dflashctl.engine.server` as a
subprocess on 127.0.0.1, real HTTP, real /metrics counters, a real log.

- A tiny random pair (tests/support/pairs.py): the random drafter accepts almost nothing, so the
  smoke must fail with the collapse alarm (exit 1), from /metrics and from the log, while the
  greedy output still equals the `--spec none` server's (the lossless check); the `--spec none`
  server is "no speculation configured".
- The shipped demo pair as a new user meets it: `serve --detach`, then `smoke NAME` with default
  flags → pass, coherence included.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import run_json, run_main

pytest.importorskip("torch")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("tokenizers")

REPO = Path(__file__).resolve().parent.parent
LOG_INTERVAL = "0.5"
_PORT = re.compile(r"Uvicorn running on (http://127\.0\.0\.1:\d+)")


class EngineServer:
    """`python -m dflashctl.engine.server` with stdout+stderr in a log file."""

    def __init__(self, log: Path, *args: str) -> None:
        self.log = log
        self.fh = log.open("wb")
        cmd = [sys.executable, "-m", "dflashctl.engine.server", *args]
        cmd += ["--port", "0", "--log-interval", LOG_INTERVAL, "--device", "cpu"]
        self.proc = subprocess.Popen(
            cmd, stdout=self.fh, stderr=subprocess.STDOUT, cwd=REPO, env={**_env(), "NO_COLOR": "1"}
        )
        self.url = self._wait()

    def _wait(self, timeout: float = 120.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log.read_text(errors="replace")
            m = _PORT.search(text)
            if m:
                return m.group(1)
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        self.stop()
        tail = "\n".join(self.log.read_text(errors="replace").splitlines()[-15:])
        pytest.fail(f"the engine server did not start (rc={self.proc.returncode}):\n{tail}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.fh.close()


def _env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, EngineServer]]:
    from support.pairs import write_tiny_pair

    root = tmp_path_factory.mktemp("smoke-engine")
    target, drafter = write_tiny_pair(root / "pair")
    started: dict[str, EngineServer] = {}
    try:
        started["spec"] = EngineServer(
            root / "spec.log", "--model", str(target), "--drafter", str(drafter),
            "--served-model-name", "tiny",
        )  # fmt: skip
        started["plain"] = EngineServer(
            root / "plain.log", "--model", str(target), "--spec", "none",
            "--served-model-name", "tiny",
        )  # fmt: skip
        yield started
    finally:
        for s in started.values():
            s.stop()


def smoke(monkeypatch, capsys, *args: str) -> tuple[int, dict]:
    code, out, err = run_main(monkeypatch, capsys, "smoke", *args, "--json")
    assert "Traceback" not in err
    return code, json.loads(out)


def row(d: dict, name: str) -> dict:
    return next(c for c in d["checks"] if c["name"] == name)


class TestTinyRandomPair:
    def test_collapse_from_metrics_and_lossless(self, servers, monkeypatch, capsys):
        spec, plain = servers["spec"], servers["plain"]
        code, d = smoke(
            monkeypatch, capsys, spec.url, "--max-tokens", "96", "--baseline", plain.url
        )
        assert code == 1
        assert d["model"] == "tiny"
        assert d["speculation"]["source"] == "prometheus"
        # the answers arrived whole: 200, an SSE stream to [DONE], the cap, exact counts
        for c in d["checks"]:
            if c["name"] in ("http", "finish_reason", "completion_tokens", "content"):
                assert c["status"] == "ok", c
        assert d["finish_reason"] == "length" and d["completion_tokens"] == 2 * 96
        assert d["ttft_s"] > 0 and d["decode_tokens_per_s"] > 0
        # ... but the random drafter accepts almost nothing: the collapse alarm, with causes
        assert d["mean_acceptance_length"] < 1.3
        assert len(d["per_position"]) == 3  # block size 4
        alarms = [a for a in d["alarms"] if a["severity"] == "alarm"]
        assert [a["kind"] for a in alarms] == ["collapse"]
        assert any("verify-config" in c["check"] for c in alarms[0]["likely_causes"])
        assert row(d, "speculation")["status"] == "fail"
        # speculative greedy output equals plain greedy output, token for token
        assert row(d, "lossless")["status"] == "ok", row(d, "lossless")
        # the server's own per-request acceptance (vLLM's metrics.speculative_decoding shape),
        # pooled, is the window the /metrics counters give for the same requests
        per = [c["speculative_decoding"] for c in d["requests"]]
        assert all(m["num_spec_steps"] > 0 and m["num_spec_tokens"] == 3 for m in per), per
        assert d["per_request_mean_acceptance_length"] == pytest.approx(
            d["mean_acceptance_length"], abs=1e-3)  # fmt: skip
        plain_d = smoke(monkeypatch, capsys, plain.url, "--max-tokens", "16")[1]
        assert plain_d["per_request_mean_acceptance_length"] is None  # no drafts, no object
        assert all(c["speculative_decoding"] is None for c in plain_d["requests"])

    def test_collapse_from_the_log(self, servers, monkeypatch, capsys):
        spec = servers["spec"]
        code, d = smoke(
            monkeypatch, capsys, spec.url, "--max-tokens", "96", "--log", str(spec.log),
            "--log-interval", LOG_INTERVAL,
        )  # fmt: skip
        assert code == 1
        assert d["speculation"]["source"] == "log"
        assert d["speculation"]["window"]["format"].startswith("vllm")
        assert [a["kind"] for a in d["alarms"] if a["severity"] == "alarm"] == ["collapse"]
        assert d["mean_acceptance_length"] < 1.3

    def test_spec_none_server(self, servers, monkeypatch, capsys):
        plain = servers["plain"]
        code, d = smoke(monkeypatch, capsys, plain.url, "--max-tokens", "32")
        assert code == 1
        assert row(d, "speculation")["message"].startswith("no speculation configured")
        assert d["speculation"]["state"] == "not_configured"
        code, d = smoke(monkeypatch, capsys, plain.url, "--max-tokens", "32", "--expect-no-spec")
        assert row(d, "speculation")["status"] == "ok"
        assert d["alarms"] == []


class TestDemoPair:
    """The shipped demo pair, as a new user meets it (README): `dflashctl serve --detach`, then
    `dflashctl smoke NAME` with its default flags (coherence included: the target is a real
    instruct model, SmolLM2-135M-Instruct)."""

    def test_first_contact_serve_then_smoke_pass(self, monkeypatch, capsys, stop_all):
        from dflashctl.commands.demo.run import free_port

        port = str(free_port())
        code, _, err = run_json(
            monkeypatch, capsys, "serve", "--detach", "--port", port, "--name", "first"
        )
        assert code == 0, err
        code, d, err = run_json(monkeypatch, capsys, "smoke", "first")
        assert code == 0, (d["checks"], err)
        answers = [c for c in d["checks"] if c["name"] != "speculation"]
        assert {c["status"] for c in answers} == {"ok"}, answers  # coherence included
        assert d["finish_reason"] in ("stop", "length") and d["completion_tokens"] > 16
        assert "def " in d["requests"][0]["content"]
        assert d["mean_acceptance_length"] > 1.3  # no collapse

    def test_the_deployment_is_the_default_and_its_intent_and_drafter_are_known(
        self, monkeypatch, capsys, stop_all
    ):
        """Issue 27 #8: `smoke` with no URL talks to the only deployment (as `stop` picks it);
        a `--spec none` deployment is judged as the plain server it was started as; `metrics
        URL` of a deployment finds its drafter's range; an unreachable --baseline is exit 2
        before the first request."""
        from dflashctl.commands.demo.run import free_port

        port = free_port()
        code, _, err = run_json(monkeypatch, capsys, "serve", "--detach", "--port", str(port),
                                "--name", "only")  # fmt: skip
        assert code == 0, err
        code, d, err = run_json(monkeypatch, capsys, "smoke", "--max-tokens", "48")
        assert code == 0, (d, err)
        assert d["url"] == f"http://127.0.0.1:{port}"
        code, d, err = run_json(monkeypatch, capsys, "metrics", f"http://127.0.0.1:{port}",
                                "--interval", "1")  # fmt: skip
        exp = d["expected_acceptance"]
        assert exp and exp["drafter"] == "demo" and exp["min"] is not None, (d, err)
        t0 = time.monotonic()
        code, d, err = run_json(monkeypatch, capsys, "smoke", "only", "--baseline",
                                f"127.0.0.1:{free_port()}")  # fmt: skip
        assert code == 2 and "cannot reach" in d["error"], d
        assert time.monotonic() - t0 < 10  # no answer of 256 tokens was waited for first
        plain = free_port()
        code, _, err = run_json(monkeypatch, capsys, "serve", "--detach", "--port", str(plain),
                                "--name", "plain", "--spec", "none")  # fmt: skip
        assert code == 0, err
        code, d, err = run_main(monkeypatch, capsys, "smoke")
        assert code == 2 and "2 deployments are running" in err
        code, d, err = run_json(monkeypatch, capsys, "smoke", "plain", "--max-tokens", "32")
        assert row(d, "speculation")["status"] == "ok", d["checks"]
        assert code == 0, (d["checks"], err)

    def test_the_mask_id_off_by_six_collapses_acceptance(self, tmp_path, monkeypatch, capsys):
        """The field story's mistake alone (dflash_config.mask_token_id 0 for 6: the drafter's
        mask slots get <|endoftext|>'s row instead of <filename>'s): position 1 falls from about
        half to a few percent, under the collapse line, with the same greedy text."""
        from support.pairs import demo_pair

        from dflashctl.drafter.stale import write_stale_copy

        target, drafter = demo_pair()
        stale = tmp_path / "stale-drafter"
        write_stale_copy(drafter, stale, ("mask",))
        server = EngineServer(
            tmp_path / "stale.log", "--model", str(target), "--drafter", str(stale),
            "--served-model-name", "demo",
        )  # fmt: skip
        try:
            code, d = smoke(monkeypatch, capsys, server.url, "--max-tokens", "64")
        finally:
            server.stop()
        assert code == 1
        assert d["mean_acceptance_length"] <= 1.3
        assert "collapse" in [a["kind"] for a in d["alarms"]]
