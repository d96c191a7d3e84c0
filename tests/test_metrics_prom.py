"""Prometheus sources against a real HTTP server on 127.0.0.1: deltas, SGLang gauges, bad pages."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from support.cli import run_main
from support.vllm_metrics import MetricsServer, vllm_page

from dflashctl.errors import ServerError
from dflashctl.metrics import MetricsOptions, analyze_source
from dflashctl.metrics.follow import follow_url
from dflashctl.metrics.prom import parse_reading
from dflashctl.metrics.thresholds import Thresholds

FAST = ["--interval", "0.05", "--timeout", "5"]


@pytest.fixture
def serve():
    servers: list[MetricsServer] = []

    def start(body, **kw) -> MetricsServer:
        s = MetricsServer(body, **kw)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.close()


class TestVllmCounters:
    def test_delta_between_two_scrapes(self, serve):
        srv = serve(lambda n: vllm_page(n + 1))
        r = analyze_source(srv.url, MetricsOptions(interval=0.05))
        assert srv.hits == 2
        w = r.state.latest
        assert w is not None and w.format == "vllm-prometheus"
        assert (w.num_drafts, w.accepted_tokens, w.drafted_tokens) == (100, 250, 300)
        assert w.mean_acceptance_length == pytest.approx(3.5)
        assert w.draft_acceptance_rate == pytest.approx(250 / 300)
        assert w.per_position == pytest.approx([0.9, 0.8, 0.8])
        assert r.ok
        lt = r.state.lifetime
        assert lt is not None and lt.num_drafts == 200  # two intervals since start

    def test_engines_are_summed(self, serve):
        srv = serve(lambda n: vllm_page(n + 1, engines=2))
        w = analyze_source(srv.url, MetricsOptions(interval=0.05)).state.latest
        assert (
            w is not None
            and w.num_drafts == 200
            and w.per_position == pytest.approx([0.9, 0.8, 0.8])
        )

    def test_collapse_exit_1_and_json(self, serve, monkeypatch, capsys):
        srv = serve(lambda n: vllm_page(n + 1, accepted=5, per_pos=(3, 1, 1)))
        code, out, _ = run_main(monkeypatch, capsys, "metrics", srv.url, "--json", *FAST)
        assert code == 1
        d = json.loads(out)
        assert d["ok"] is False and d["engine"] == "vllm" and d["windows"] == 1
        assert d["mean_acceptance_length"] == pytest.approx(1.05)
        assert d["per_position"] == pytest.approx([0.03, 0.01, 0.01])
        assert [a["kind"] for a in d["alarms"]] == ["collapse"]

    def test_counter_reset_means_restart(self, serve):
        srv = serve(lambda n: vllm_page(5 if n == 0 else 1))
        r = analyze_source(srv.url, MetricsOptions(interval=0.05))
        w = r.state.latest
        assert w is not None and w.num_drafts == 100
        assert any("restarted" in n for n in r.state.notes)

    def test_idle_falls_back_to_totals_since_start(self, serve):
        srv = serve(lambda n: vllm_page(4, accepted=10, per_pos=(6, 2, 2)))
        r = analyze_source(srv.url, MetricsOptions(interval=0.05))
        w = r.state.latest
        assert w is not None and w.cumulative and w.num_drafts == 400
        assert [f.kind for f in r.alarms] == ["collapse"]  # 1.10 since start
        assert any("idle" in n for n in r.state.notes)

    def test_no_spec_counters(self, serve, monkeypatch, capsys):
        page = "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 1.0\n"
        srv = serve(lambda n: page)
        code, out, _ = run_main(monkeypatch, capsys, "metrics", srv.url, "--json", *FAST)
        assert code == 1
        assert [a["kind"] for a in json.loads(out)["alarms"]] == ["no_speculation"]
        assert srv.hits == 1  # no second scrape needed


class TestTargetsAsUsersNameThem:
    """`metrics http://HOST:PORT`, `HOST:PORT` and a deployment name, like smoke and bench."""

    @pytest.mark.parametrize("form", ["{base}", "{base}/", "{base}/v1", "{hostport}"])
    def test_base_url_reads_its_metrics_page(self, serve, monkeypatch, capsys, form):
        srv = serve(lambda n: vllm_page(n + 1))
        base = srv.url.removesuffix("/metrics")
        arg = form.format(base=base, hostport=base.removeprefix("http://"))
        code, out, err = run_main(monkeypatch, capsys, "metrics", arg, "--json", *FAST)
        assert code == 0, err
        assert srv.paths == ["/metrics", "/metrics"]
        assert json.loads(out)["mean_acceptance_length"] == pytest.approx(3.5)

    def test_deployment_name_reads_its_log(self, monkeypatch, capsys, tmp_path):
        from support.vllm_metrics import DATA

        from dflashctl.server import deployments as state

        state.save(
            state.Deployment(
                name="gpu1-8000", engine="vllm", host=None, url="http://127.0.0.1:9", pid=1,
                starttime=0, log=str(DATA / "vllm_034_collapsed.log"), run_dir=str(tmp_path),
                port=9, bind="127.0.0.1", model="m", model_id="m", drafter=None, cmd=[],
                started_at=state.now_iso(),
            )
        )  # fmt: skip
        code, out, err = run_main(monkeypatch, capsys, "metrics", "gpu1-8000", "--json")
        assert code == 1, err  # the collapsed log's verdict: it was read
        assert "collapse" in [a["kind"] for a in json.loads(out)["alarms"]]

    def test_unknown_name_says_what_is_accepted(self, monkeypatch, capsys):
        code, out, err = run_main(monkeypatch, capsys, "metrics", "prod-27b")
        assert code == 2 and out == ""
        assert "no such log file, URL or deployment: prod-27b" in err


class TestSglang:
    def test_gauges(self, serve):
        page = (
            "# TYPE sglang:spec_accept_length gauge\n"
            'sglang:spec_accept_length{model_name="m",tp_rank="1"} 9.0\n'
            'sglang:spec_accept_length{tp_rank="0",model_name="m"} 2.41\n'
            "# TYPE sglang:spec_accept_rate gauge\n"
            'sglang:spec_accept_rate{model_name="m",tp_rank="0"} 0.47\n'
            "# TYPE sglang:spec_verify_calls_total counter\n"
            'sglang:spec_verify_calls_total{model_name="m",tp_rank="0"} 1200.0\n'
            "# TYPE sglang:gen_throughput gauge\n"
            'sglang:gen_throughput{model_name="m",tp_rank="0"} 3120.5\n'
        )
        srv = serve(lambda n: page)
        r = analyze_source(srv.url, MetricsOptions())
        w = r.state.latest
        assert r.state.engine == "sglang" and w is not None
        assert (w.mean_acceptance_length, w.draft_acceptance_rate) == (2.41, 0.47)
        assert w.generation_throughput == 3120.5 and r.ok and srv.hits == 1

    def test_collapsed_gauge(self, serve):
        page = 'sglang:spec_accept_length{tp_rank="0"} 1.02\nsglang:spec_accept_rate 0.0\n'
        srv = serve(lambda n: page)
        assert [f.kind for f in analyze_source(srv.url, MetricsOptions()).alarms] == ["collapse"]


class TestBadServers:
    @pytest.mark.parametrize(
        "kw, body, needle",
        [
            ({"ctype": "text/html"}, "<html><body>Grafana</body></html>", "returned HTML"),
            ({}, "<!DOCTYPE html><html></html>", "returned HTML"),
            ({"status": 500}, "Internal Server Error", "HTTP 500"),
            ({"status": 404}, "not found", "HTTP 404"),
            ({}, "this is not { prometheus text\n", "not Prometheus metrics text"),
            (
                {},
                "# TYPE python_gc_objects_collected_total counter\n"
                "python_gc_objects_collected_total 1\n",
                "no vllm:, sglang: or llamacpp:",
            ),
        ],
    )
    def test_one_line_error_exit_2(self, serve, monkeypatch, capsys, kw, body, needle):
        srv = serve(lambda n: body, **kw)
        code, out, err = run_main(monkeypatch, capsys, "metrics", srv.url, *FAST)
        assert code == 2 and out == ""
        assert needle in err and "Traceback" not in err

    def test_hang_times_out(self, serve, monkeypatch, capsys):
        srv = serve(lambda n: "", hang=True)
        code, _, err = run_main(
            monkeypatch, capsys, "metrics", srv.url, "--timeout", "0.3", "--interval", "0.05"
        )
        assert code == 2 and "did not answer within 0.3 s" in err

    def test_nothing_listening(self, serve, monkeypatch, capsys):
        srv = serve(lambda n: "")
        url = srv.url
        srv.close()
        code, _, err = run_main(monkeypatch, capsys, "metrics", url, *FAST)
        assert code == 2 and "cannot reach" in err


class TestParse:
    def test_label_order_and_created_samples(self):
        text = vllm_page(3)
        r = parse_reading(text, at=datetime(2026, 1, 1), monotonic=0.0)
        assert r.drafts == 300 and r.accepted == 750 and r.per_pos == {0: 270, 1: 240, 2: 240}

    def test_garbage_is_a_server_error(self):
        with pytest.raises(ServerError):
            parse_reading("a b c d\n", at=datetime(2026, 1, 1), monotonic=0.0)


class TestFollowUrl:
    def test_windows_and_alarm_as_they_come(self, serve):
        # healthy for two intervals, then the drafter collapses
        def page(n: int) -> str:
            healthy = min(n, 2)
            bad = max(0, n - 2)
            drafts, acc = 100 * (healthy + bad), 250 * healthy + 2 * bad
            pos = (90 * healthy + 2 * bad, 80 * healthy, 80 * healthy)
            return vllm_page(1, drafts=drafts, accepted=acc, per_pos=pos)

        srv = serve(page)
        opts = MetricsOptions(interval=0.01)
        events = []
        for ev in follow_url(srv.url, opts=opts, th=Thresholds(follow=True)):
            events.append(ev)
            if ev.kind == "alarm" or len(events) > 20:
                break
        kinds = [e.kind for e in events]
        assert kinds[0] == "history"
        windows = [e.window for e in events if e.kind == "window"]
        assert [round(w.mean_acceptance_length, 2) for w in windows] == [3.5, 3.5, 1.02]
        assert events[-1].kind == "alarm" and events[-1].finding.kind == "collapse"


def llamacpp_page(n: int, *, drafts: int = 100, accepted: int = 250,
                  per_pos: tuple[int, ...] = (90, 80, 80)) -> str:  # fmt: skip
    """llama.cpp's server /metrics (--metrics) after `n` intervals, as its
    server_task_result_metrics writes it since ggml-org/llama.cpp#26389: no labels but the
    position, HELP and TYPE lines, prompt/predicted counters beside the spec-decode ones."""
    k = len(per_pos)
    lines = [
        "# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.",
        "# TYPE llamacpp:prompt_tokens_total counter",
        f"llamacpp:prompt_tokens_total {300 * n}",
        "# HELP llamacpp:tokens_predicted_total Number of generation tokens processed.",
        "# TYPE llamacpp:tokens_predicted_total counter",
        f"llamacpp:tokens_predicted_total {(drafts + accepted) * n}",
        "# HELP llamacpp:spec_decode_num_draft_tokens_total Speculative: Total draft tokens "
        "generated",
        "# TYPE llamacpp:spec_decode_num_draft_tokens_total counter",
        f"llamacpp:spec_decode_num_draft_tokens_total {drafts * k * n}",
        "# HELP llamacpp:spec_decode_num_accepted_tokens_total Speculative: Total draft tokens "
        "accepted by the target model",
        "# TYPE llamacpp:spec_decode_num_accepted_tokens_total counter",
        f"llamacpp:spec_decode_num_accepted_tokens_total {accepted * n}",
        "# HELP llamacpp:spec_decode_num_drafts_total Speculative: Total speculative decoding "
        "verification steps",
        "# TYPE llamacpp:spec_decode_num_drafts_total counter",
        f"llamacpp:spec_decode_num_drafts_total {drafts * n}",
        "# HELP llamacpp:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft "
        "position",
        "# TYPE llamacpp:spec_decode_num_accepted_tokens_per_pos_total counter",
        *(f'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{{position="{i}"}} {a * n}'
          for i, a in enumerate(per_pos)),
        "# HELP llamacpp:requests_processing Number of requests processing.",
        "# TYPE llamacpp:requests_processing gauge",
        "llamacpp:requests_processing 1",
    ]  # fmt: skip
    return "\n".join(lines) + "\n"


class TestLlamaCppCounters:
    """llama.cpp's server exports vLLM's spec-decode counters under its own prefix."""

    def test_delta_between_two_scrapes(self, serve):
        srv = serve(lambda n: llamacpp_page(n + 1))
        r = analyze_source(srv.url, MetricsOptions(interval=0.05))
        w = r.state.latest
        assert w is not None and (w.engine, w.format) == ("llama.cpp", "llama.cpp-prometheus")
        assert (w.num_drafts, w.accepted_tokens, w.drafted_tokens) == (100, 250, 300)
        assert w.mean_acceptance_length == pytest.approx(3.5)
        assert w.per_position == pytest.approx([0.9, 0.8, 0.8])
        assert w.running_reqs == 1 and r.ok

    def test_collapse_is_an_alarm(self, serve, monkeypatch, capsys):
        srv = serve(lambda n: llamacpp_page(n + 1, accepted=4, per_pos=(4, 0, 0)))
        code, out, _ = run_main(monkeypatch, capsys, "metrics", srv.url, "--json", *FAST)
        d = json.loads(out)
        assert code == 1 and d["engine"] == "llama.cpp"
        assert d["mean_acceptance_length"] == pytest.approx(1.04)
        assert [a["kind"] for a in d["alarms"]] == ["collapse"]

    def test_an_older_server_without_the_counters_is_told_to_read_the_log(self, serve, monkeypatch,
                                                                          capsys):  # fmt: skip
        page = "# TYPE llamacpp:prompt_tokens_total counter\nllamacpp:prompt_tokens_total 12\n"
        srv = serve(lambda n: page)
        code, _out, err = run_main(monkeypatch, capsys, "metrics", srv.url, *FAST)
        assert code == 2 and "without speculative-decoding counters" in err
        assert "llama.cpp#26389" in err and "Traceback" not in err


class SGLangInfoServer:
    """SGLang without --enable-metrics, as its HTTP server answers: 404 on /metrics, its
    server arguments and per-rank internal state on /server_info (`old`: only the
    /get_server_info name of releases before 2026-03)."""

    def __init__(self, info: dict, *, old: bool = False) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        outer = self
        self.paths: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.paths.append(self.path)
                ok = self.path == ("/get_server_info" if old else "/server_info")
                body = json.dumps(info).encode() if ok else b'{"detail":"Not Found"}'
                self.send_response(200 if ok else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def sglang_info(*lengths: float | None, algo: str | None = "EAGLE") -> dict:
    states = []
    for v in lengths:
        st: dict = {"last_gen_throughput": 85.3, "memory_usage": {}}
        if v is not None:
            st["avg_spec_accept_length"] = v
        states.append(st)
    return {"model_path": "Qwen/Qwen3-8B", "speculative_algorithm": algo,
            "internal_states": states, "version": "0.5.23"}  # fmt: skip


class TestSGLangServerInfo:
    """SGLang's /server_info when its /metrics is off: avg_spec_accept_length per DP rank."""

    @pytest.mark.parametrize("old", [False, True])
    def test_a_collapsed_rank_is_an_alarm(self, monkeypatch, capsys, old: bool) -> None:
        srv = SGLangInfoServer(sglang_info(3.41, 1.02), old=old)
        try:
            code, out, err = run_main(monkeypatch, capsys, "metrics", srv.url, "--json", *FAST)
        finally:
            srv.close()
        d = json.loads(out)
        assert code == 1 and d["engine"] == "sglang", err
        assert [(a["kind"], a["stream"]) for a in d["alarms"]] == [("collapse", "dp1")]
        assert "/metrics" in srv.paths[0] and srv.paths[-1].endswith("server_info")

    def test_healthy_and_idle(self, monkeypatch, capsys) -> None:
        srv = SGLangInfoServer(sglang_info(3.41))
        try:
            code, out, err = run_main(monkeypatch, capsys, "metrics", srv.url, "--json", *FAST)
            assert code == 0, err
            assert json.loads(out)["mean_acceptance_length"] == pytest.approx(3.41)
        finally:
            srv.close()
        idle = SGLangInfoServer(sglang_info(None))  # speculating, no verify step yet
        try:
            code, out, _ = run_main(monkeypatch, capsys, "metrics", idle.url, "--json", *FAST)
            assert "no verify step has run yet" in " ".join(json.loads(out)["notes"])
        finally:
            idle.close()

    def test_speculation_off(self, monkeypatch, capsys) -> None:
        srv = SGLangInfoServer(sglang_info(algo=None))
        try:
            code, out, _ = run_main(monkeypatch, capsys, "metrics", srv.url, "--json", *FAST)
        finally:
            srv.close()
        assert code == 1 and [a["kind"] for a in json.loads(out)["alarms"]] == ["no_speculation"]
