"""`dflashctl smoke` against small real HTTP servers on 127.0.0.1 that misbehave in each way
the issue lists, through the console-script entry point (exit codes as users see them)."""

from __future__ import annotations

import dataclasses
import json
import time

import pytest
from support.cli import run_main
from support.engine_http import COLLAPSED, QUICKSORT, Acceptance, Behaviour, FakeEngine

FAST = ["--timeout", "5", "--max-tokens", "256"]
SHORT = ["--timeout", "5", "--max-tokens", "40"]


def smoke_json(monkeypatch, capsys, *args: str) -> tuple[int, dict, str]:
    code, out, err = run_main(monkeypatch, capsys, "smoke", *args, "--json")
    return code, json.loads(out), err


def rows(d: dict, name: str) -> list[dict]:
    return [c for c in d["checks"] if c["name"] == name]


def statuses(d: dict) -> dict[str, str]:
    return {
        (f"{c['prompt']}·" if c["prompt"] else "") + c["name"]: c["status"] for c in d["checks"]
    }


class TestHealthy:
    def test_pass_with_figures_and_acceptance(self, serve, monkeypatch, capsys):
        srv = serve()
        code, d, err = smoke_json(monkeypatch, capsys, srv.url, *FAST)
        assert code == 0, d["checks"]
        assert d["ok"] is True
        assert all(c["status"] == "ok" for c in d["checks"]), d["checks"]
        for c in d["checks"]:
            assert set(c) == {"name", "status", "message", "prompt", "hint", "level"}
            assert c["level"] == "ok"
        assert d["model"] == "fake/model"
        assert d["finish_reason"] == "stop"
        n = -(-len(QUICKSORT) // 4)  # one token a 4-character piece
        assert d["completion_tokens"] == 2 * n
        assert d["ttft_s"] > 0 and d["decode_tokens_per_s"] > 0
        assert d["mean_acceptance_length"] == pytest.approx(4.3, abs=0.05)
        assert d["per_position"][0] == pytest.approx(0.9, abs=0.02)
        assert d["speculation"]["source"] == "prometheus"
        assert d["alarms"] == []
        # the requests really were greedy, streamed, for the discovered model
        assert [r["model"] for r in srv.requests] == ["fake/model"] * 2
        assert all(r["temperature"] == 0 and r["stream"] is True for r in srv.requests)
        assert all(r["stream_options"] == {"include_usage": True} for r in srv.requests)
        assert "quicksort" in srv.requests[0]["messages"][0]["content"]
        assert "is_prime" in srv.requests[1]["messages"][0]["content"]
        assert "→ quicksort" in err  # progress on stderr, JSON alone on stdout

    def test_human_verdict_table(self, serve, monkeypatch, capsys):
        srv = serve()
        code, out, _ = run_main(monkeypatch, capsys, "smoke", srv.url, *FAST)
        assert code == 0
        assert "Quicksort picks a pivot" in out  # the first characters of the answer
        assert "quicksort · coherence" in out and "speculation" in out
        assert "mean acceptance length 4.2" in out or "mean acceptance length 4.3" in out
        assert "verdict: pass (exit 0)" in out

    def test_fixtures_and_custom_prompts(self, serve, monkeypatch, capsys):
        srv = serve()
        code, d, _ = smoke_json(
            monkeypatch, capsys, srv.url, "--fixtures", "--prompt", "Say hi.", *FAST
        )
        assert code == 0
        assert [r["prompt_id"] for r in d["requests"]] == [
            "code",
            "prose",
            "translation",
            "prompt1",
        ]
        assert "Chinese" in srv.requests[2]["messages"][0]["content"]
        assert srv.requests[3]["messages"][0]["content"] == "Say hi."

    def test_speed_floor(self, serve, monkeypatch, capsys):
        srv = serve()
        code, d, _ = smoke_json(monkeypatch, capsys, srv.url, *FAST, "--min-tokens-per-s", "1e7")
        assert code == 1
        (row,) = rows(d, "decode_speed")
        assert row["status"] == "fail" and "below --min-tokens-per-s" in row["message"]


class TestMisbehavingServers:
    def test_html_502_page(self, serve, monkeypatch, capsys):
        srv = serve(Behaviour(mode="html502"))
        code, d, _ = smoke_json(monkeypatch, capsys, srv.url, *FAST)
        assert code == 1
        http = rows(d, "http")
        assert http[0]["status"] == "fail"
        assert "HTTP 502 with an HTML page (502 Bad Gateway)" in http[0]["message"]
        assert "proxy" in http[0]["hint"]
        assert http[1]["status"] == "skip" and http[1]["prompt"] == "is_prime"
        assert len(srv.requests) == 1  # nothing more sent after the failure
        assert rows(d, "speculation")[0]["status"] == "skip"

    def test_html_on_models(self, serve, monkeypatch, capsys):
        srv = serve(models_mode="html502")
        code, d, _ = smoke_json(monkeypatch, capsys, srv.url, *FAST)
        assert code == 1
        (row,) = [c for c in d["checks"] if c["name"] == "http"]
        assert row["prompt"] == "/v1/models" and "HTML page" in row["message"]

    def test_500_with_engine_error(self, serve, monkeypatch, capsys):
        srv = serve(Behaviour(mode="error500"))
        code, d, _ = smoke_json(monkeypatch, capsys, srv.url, *FAST)
        assert code == 1
        msg = rows(d, "http")[0]["message"]
        assert msg.startswith("HTTP 500: EngineCore encountered an issue")

    def test_hang_past_timeout(self, serve, monkeypatch, capsys):
        srv = serve(Behaviour(mode="hang"))
        t0 = time.monotonic()
        code, d, _ = smoke_json(monkeypatch, capsys, srv.url, "--timeout", "0.5")
        assert time.monotonic() - t0 < 5
        assert code == 1
        msg = rows(d, "http")[0]["message"]
        assert "no answer: waited --timeout 0.5 s" in msg

    @pytest.mark.parametrize("mode", ["cut_chunked", "cut_close"])
    def test_sse_cut_mid_way(self, serve, monkeypatch, capsys, mode):
        srv = serve(Behaviour(mode=mode))
        code, d, _ = smoke_json(monkeypatch, capsys, srv.url, *FAST)
        assert code == 1
        row = rows(d, "http")[0]
        assert "the SSE stream was cut mid-way" in row["message"], row
        assert "no `data: [DONE]`" in row["message"]

    def test_clean_end_without_done_is_a_warning(self, serve, monkeypatch, capsys):
        srv = serve(Behaviour(mode="no_done"))
        code, d, _ = smoke_json(monkeypatch, capsys, srv.url, *FAST)
        assert code == 0 and d["ok"] is True  # a warning never fails
        assert rows(d, "http")[0]["status"] == "warning"
        assert rows(d, "http")[0]["level"] == "warning"

    def test_degenerate_text(self, serve, monkeypatch, capsys):
        text = "Here is the function. " + "the cat sat on the mat, " * 30
        srv = serve(Behaviour(text=text))
        code, d, _ = smoke_json(monkeypatch, capsys, srv.url, "--max-tokens", "512")
        assert code == 1
        row = rows(d, "coherence")[0]
        assert row["status"] == "fail" and "repeated to the end" in row["message"]
        assert "'the cat sat on the mat, '" in row["message"] or "mat" in row["message"]

    def test_replacement_and_control_characters(self, serve, monkeypatch, capsys):
        srv = serve(Behaviour(text="def f():\x1e return \ufffd\ufffd 1 # done and more words"))
        code, d, _ = smoke_json(monkeypatch, capsys, srv.url, *FAST)
        assert code == 1
        msg = rows(d, "coherence")[0]["message"]
        assert "2 U+FFFD replacement character(s)" in msg and "control character" in msg

    def test_reasoning_content_only(self, serve, monkeypatch, capsys):
        srv = serve(Behaviour(field="reasoning_content"))
        code, d, _ = smoke_json(monkeypatch, capsys, srv.url, *FAST)
        assert code == 0, d["checks"]
        row = rows(d, "content")[0]
        assert row["status"] == "ok"
        assert "`reasoning_content`" in row["message"] and "reasoning model" in row["message"]
        assert d["requests"][0]["reasoning_field"] == "reasoning_content"

    def test_length_cap(self, serve, monkeypatch, capsys):
        srv = serve(Behaviour(cap_at_max_tokens=True))
        code, d, _ = smoke_json(monkeypatch, capsys, srv.url, "--max-tokens", "40")
        assert code == 0, d["checks"]
        assert d["finish_reason"] == "length"
        row = rows(d, "finish_reason")[0]
        assert row["status"] == "ok" and "hit the --max-tokens cap (40)" in row["message"]
        assert d["completion_tokens"] == 80

    def test_token_count_inconsistent(self, serve, monkeypatch, capsys):
        srv = serve(Behaviour(tokens=3))
        code, d, _ = smoke_json(monkeypatch, capsys, srv.url, *FAST)
        assert code == 1
        row = rows(d, "completion_tokens")[0]
        assert row["status"] == "fail" and "3 tokens reported" in row["message"]


class TestSpeculation:
    def test_no_spec_counters_is_not_configured(self, serve, monkeypatch, capsys):
        srv = serve(spec=None, metrics="none")
        code, d, _ = smoke_json(monkeypatch, capsys, srv.url, *FAST)
        assert code == 1
        row = rows(d, "speculation")[0]
        assert row["status"] == "fail" and row["message"].startswith("no speculation configured")
        assert "--expect-no-spec" in row["hint"]
        assert [a["kind"] for a in d["alarms"]] == ["no_speculation"]
        assert d["speculation"]["state"] == "not_configured"

    def test_expect_no_spec(self, serve, monkeypatch, capsys):
        plain = serve(spec=None, metrics="none")
        code, d, _ = smoke_json(monkeypatch, capsys, plain.url, *FAST, "--expect-no-spec")
        assert code == 0 and d["alarms"] == []
        spec = serve()
        code, d, _ = smoke_json(monkeypatch, capsys, spec.url, *FAST, "--expect-no-spec")
        assert (
            code == 1
            and "--expect-no-spec says it should not" in rows(d, "speculation")[0]["message"]
        )

    def test_collapsing_counters(self, serve, monkeypatch, capsys):
        srv = serve(spec=COLLAPSED)
        code, d, _ = smoke_json(monkeypatch, capsys, srv.url, "--max-tokens", "512")
        assert code == 1
        assert d["mean_acceptance_length"] == pytest.approx(1.06, abs=0.03)
        (alarm,) = [a for a in d["alarms"] if a["severity"] == "alarm"]
        assert alarm["kind"] == "collapse"
        assert any("verify-config" in c["check"] for c in alarm["likely_causes"])
        row = rows(d, "speculation")[0]
        assert row["status"] == "fail" and row["message"].startswith("collapse:")
        # everything else about the answers is fine: the field story's trap
        others = [c for c in d["checks"] if c["name"] != "speculation"]
        assert all(c["status"] == "ok" for c in others)

    def test_min_acceptance_length(self, serve, monkeypatch, capsys):
        srv = serve()
        code, d, _ = smoke_json(monkeypatch, capsys, srv.url, *FAST, "--min-acceptance-length", "5")
        assert code == 1
        assert [a["kind"] for a in d["alarms"]] == ["below_expected"]

    def test_default_metrics_missing_fails_with_hint(self, serve, monkeypatch, capsys):
        srv = serve(metrics="missing")
        code, d, _ = smoke_json(monkeypatch, capsys, srv.url, *FAST)
        assert code == 1
        row = rows(d, "speculation")[0]
        assert "cannot read the spec-decode counters" in row["message"]
        assert "--log PATH" in row["hint"]

    def test_explicit_metrics_url_unusable_is_exit_2(self, serve, monkeypatch, capsys):
        srv = serve(metrics="html")
        code, out, err = run_main(
            monkeypatch, capsys, "smoke", srv.url, *FAST, "--metrics-url", srv.url + "/metrics"
        )
        assert code == 2 and out == ""
        assert "returned HTML, not Prometheus metrics text" in err
        assert "Traceback" not in err
        assert srv.requests == []  # nothing sent before the source was known to work

    def test_log_lines_that_follow(self, serve, monkeypatch, capsys, tmp_path):
        log = tmp_path / "vllm.log"
        srv = serve(spec=COLLAPSED, log=log, log_interval=0.3)
        log.write_text(log.read_text() + "old window, before the smoke:\n")
        code, d, _ = smoke_json(
            monkeypatch, capsys, srv.url, "--max-tokens", "512", "--log", str(log),
            "--log-interval", "0.5",
        )  # fmt: skip
        assert code == 1
        assert d["speculation"]["source"] == "log"
        assert [a["kind"] for a in d["alarms"] if a["severity"] == "alarm"] == ["collapse"]
        assert d["mean_acceptance_length"] < 1.1

    def test_healthy_log(self, serve, monkeypatch, capsys, tmp_path):
        log = tmp_path / "vllm.log"
        srv = serve(log=log, log_interval=0.3)
        code, d, _ = smoke_json(
            monkeypatch, capsys, srv.url, *FAST, "--log", str(log), "--log-interval", "0.5"
        )
        assert code == 0, d["checks"]
        assert d["mean_acceptance_length"] == pytest.approx(4.3, abs=0.2)

    def test_stale_log(self, serve, monkeypatch, capsys, tmp_path):
        srv = serve()
        log = tmp_path / "old.log"
        log.write_text("(APIServer pid=1) INFO 11-20 10:00:01 [startup.py:38] vLLM server\n")
        t0 = time.monotonic()
        code, d, _ = smoke_json(
            monkeypatch, capsys, srv.url, *FAST, "--log", str(log), "--log-interval", "0.4"
        )
        assert time.monotonic() - t0 < 4
        assert code == 1
        assert [a["kind"] for a in d["alarms"]] == ["stale"]
        assert "did not grow" in d["alarms"][0]["message"]


class TestBaseline:
    def test_speedup_and_lossless(self, serve, monkeypatch, capsys):
        fast = serve(Behaviour(delay=0.0005))
        slow = serve(Behaviour(delay=0.005), spec=None, metrics="none")
        code, d, _ = smoke_json(monkeypatch, capsys, fast.url, *SHORT, "--baseline", slow.url)
        assert code == 0, d["checks"]
        assert rows(d, "lossless")[0]["status"] == "ok"
        assert rows(d, "speedup")[0]["status"] == "ok"
        assert d["baseline"]["decode_tokens_per_s"] < d["decode_tokens_per_s"]

    def test_baseline_by_deployment_name(self, serve, monkeypatch, capsys, tmp_path):
        fast = serve(Behaviour(delay=0.0005))
        slow = serve(Behaviour(delay=0.005), spec=None, metrics="none")
        TestDeploymentName.save(slow, tmp_path / "b.log", "vllm", name="plain-8001")
        code, d, _ = smoke_json(monkeypatch, capsys, fast.url, *SHORT, "--baseline", "plain-8001")
        assert code == 0, d["checks"]
        assert d["baseline"]["url"] == slow.url
        assert rows(d, "lossless")[0]["status"] == "ok"

    def test_unknown_baseline_fails_before_any_request(self, serve, monkeypatch, capsys):
        ours = serve()
        code, out, err = run_main(monkeypatch, capsys, "smoke", ours.url, "--baseline", "nope")
        assert code == 2 and out == "" and "'nope' is not a URL" in err
        assert ours.requests == []

    def test_different_greedy_output(self, serve, monkeypatch, capsys):
        ours = serve()
        other = serve(Behaviour(text=QUICKSORT.replace("pivot, *rest", "pivot, *others")))
        code, d, _ = smoke_json(monkeypatch, capsys, ours.url, *FAST, "--baseline", other.url)
        assert code == 1
        row = rows(d, "lossless")[0]
        assert row["status"] == "fail" and "quicksort differs at character" in row["message"]

    def test_slower_than_baseline(self, serve, monkeypatch, capsys):
        ours = serve(Behaviour(delay=0.005))
        base = serve(Behaviour(delay=0.0005), spec=None, metrics="none")
        code, d, _ = smoke_json(monkeypatch, capsys, ours.url, *SHORT, "--baseline", base.url)
        assert code == 1
        assert "slower than no speculation" in rows(d, "speedup")[0]["message"]


class TestCouldNotRun:
    def test_connection_refused(self, monkeypatch, capsys):
        code, out, err = run_main(monkeypatch, capsys, "smoke", "http://127.0.0.1:9", *FAST)
        assert code == 2 and out == ""
        assert err.startswith("Error: cannot reach http://127.0.0.1:9")
        assert "Traceback" not in err

    @pytest.mark.parametrize(
        ("url", "message"),
        [
            ("http://", "Error: http:// is not an http(s) URL with a host"),
            ("http:///v1", "Error: http:// is not an http(s) URL with a host"),
            ("ftp://x", "Error: ftp://x is not an http(s) URL with a host"),
        ],
    )
    def test_a_url_without_a_host_or_with_another_scheme(self, monkeypatch, capsys, url, message):
        code, out, err = run_main(monkeypatch, capsys, "smoke", url, *FAST)
        assert code == 2 and out == "" and err.splitlines()[0] == message, err

    def test_the_scheme_in_capitals(self, monkeypatch, capsys):
        code, out, err = run_main(monkeypatch, capsys, "smoke", "HTTP://127.0.0.1:9/v1", *FAST)
        assert code == 2 and out == "" and err.startswith("Error: cannot reach HTTP://127.0.0.1:9")

    @pytest.mark.parametrize(
        ("args", "message"),
        [
            (["--max-tokens", "0"], "--max-tokens must be at least 1"),
            (["--timeout", "0"], "--timeout must be a positive"),
            (["--log", "x.log", "--metrics-url", "http://h/metrics"], "--log and --metrics-url"),
            (["--log", "/nonexistent/x.log"], "no such log file"),
            (["--prompt", " "], "--prompt must not be empty"),
            (["--host", "gpu1"], "--host names where the log lives"),
            (["--min-acceptance-length", "0.5"], "at least 1.0"),
        ],
    )
    def test_bad_arguments(self, monkeypatch, capsys, args, message):
        code, out, err = run_main(monkeypatch, capsys, "smoke", "http://127.0.0.1:9", *args)
        assert code == 2 and out == ""
        assert message in err and "Traceback" not in err
        assert len(err.strip().splitlines()) <= 2  # the error and a hint

    def test_unknown_deployment_name(self, monkeypatch, capsys):
        code, _, err = run_main(monkeypatch, capsys, "smoke", "prod-27b")
        assert code == 2 and "'prod-27b' is not a URL" in err

    def test_baseline_is_the_server(self, monkeypatch, capsys):
        code, _, err = run_main(
            monkeypatch, capsys, "smoke", "127.0.0.1:9", "--baseline", "http://127.0.0.1:9/v1"
        )
        assert code == 2 and "--baseline is the server under test" in err


class TestDeploymentName:
    """A NAME target: the state file `dflashctl serve` writes supplies URL, model and log."""

    @staticmethod
    def save(srv: FakeEngine, log, engine: str, name: str = "gpu1-8000") -> str:
        state = pytest.importorskip("dflashctl.server.deployments")
        dep = state.Deployment(
            name=name, engine=engine, host=None, url=srv.url + "/", pid=1, starttime=0,
            log=str(log), run_dir=str(log.parent), port=8000, bind="127.0.0.1",
            model="/models/target", model_id="fake/model", drafter=None, cmd=[],
            started_at=state.now_iso(),
        )  # fmt: skip
        state.save(dep)
        return dep.name

    def test_vllm_deployment_uses_metrics(self, serve, monkeypatch, capsys, tmp_path):
        srv = serve()
        name = self.save(srv, tmp_path / "x.log", "vllm")
        code, d, _ = smoke_json(monkeypatch, capsys, name, *FAST)
        assert code == 0, d["checks"]
        assert d["url"] == srv.url and d["model"] == "fake/model"
        assert d["speculation"]["source"] == "prometheus"

    def test_a_deployment_is_judged_against_its_drafters_range(
        self, serve, monkeypatch, capsys, tmp_path
    ):
        # τ about 2.1 from a drafter whose registry range starts at 3.16: fine in isolation,
        # a regression against the drafter the deployment record names (issue 17, item 6)
        weak = Acceptance((0.6, 0.3, 0.15, 0.05, 0.02, 0.0, 0.0))
        srv = serve(spec=weak)
        code, d, _ = smoke_json(monkeypatch, capsys, srv.url, *FAST)
        assert code == 0, d["checks"]  # nothing names the drafter
        state = pytest.importorskip("dflashctl.server.deployments")
        name = self.save(srv, tmp_path / "x.log", "vllm")
        dep = state.load(name)
        state.save(dataclasses.replace(dep, drafter="z-lab/Qwen3-8B-DFlash-b16"))
        for target in (name, srv.url):  # by name, and by the URL the record holds
            code, d, _ = smoke_json(monkeypatch, capsys, target, *FAST)
            assert code == 1, d["checks"]
            (spec,) = rows(d, "speculation")
            assert spec["level"] == "fail" and "qwen3-8b-dflash-b16" in spec["message"]

    def test_sglang_deployment_reads_its_log(self, serve, monkeypatch, capsys, tmp_path):
        log = tmp_path / "sglang.log"
        srv = serve(log=log, log_interval=0.3, metrics="missing")
        name = self.save(srv, log, "sglang")
        code, d, _ = smoke_json(monkeypatch, capsys, name, *FAST, "--log-interval", "0.5")
        assert code == 0, d["checks"]
        assert d["speculation"]["source"] == "log" and d["speculation"]["where"] == str(log)
