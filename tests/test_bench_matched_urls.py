"""bench's A/B guard on servers it did not start (issue 28): URL targets are judged by what the
running servers tell about themselves and by their start-up logs (`--log`).

The servers are real HTTP servers on 127.0.0.1, started here, answering the pages bench reads in
the engines' own formats: vLLM's `/v1/models` model card (`max_model_len`) and its `/metrics` info
gauge `vllm:cache_config_info` (CacheConfig's fields as string labels, value 1.0: vLLM's
`PrometheusStatLogger.log_metrics_info`); SGLang's `/server_info` (its server arguments beside
`internal_states`). The logs start from a real vLLM 0.32.0 start-up (tests/data/vllm032_demo),
with vLLM's `non-default args:` and `Chunked prefill is enabled with max_num_batched_tokens=N.`
lines. Every chat request would be a POST: the guard must refuse before any is sent."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from support.cli import run_main

from dflashctl.commands.bench.matched import UnmatchedRuns, check_matched
from dflashctl.commands.bench.served import from_log
from dflashctl.commands.bench.targets import resolve_targets
from dflashctl.server import deployments as state

DEMO_LOG = Path(__file__).resolve().parent / "data" / "vllm032_demo" / "healthy.log"
MODEL = "Qwen/Qwen3-8B"


class Served:
    """GET pages by path; `posts` counts anything else asked (a chat request)."""

    def __init__(self, pages: dict[str, tuple[str, str]]) -> None:
        self.pages, self.gets, self.posts = pages, [], 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.gets.append(self.path)
                ctype, body = outer.pages.get(self.path, ("text/plain", ""))
                data = body.encode()
                self.send_response(200 if self.path in outer.pages else 404)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                outer.posts += 1
                self.send_response(500)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def vllm_models(max_model_len: int, owned_by: str = "vllm") -> str:
    card = {
        "id": MODEL, "object": "model", "created": 1764888335, "owned_by": owned_by,
        "root": MODEL, "parent": None, "max_model_len": max_model_len,
        "permission": [{"id": "modelperm-5f0c", "object": "model_permission",
                        "created": 1764888335, "allow_create_engine": False,
                        "allow_sampling": True, "allow_logprobs": True,
                        "allow_search_indices": False, "allow_view": True,
                        "allow_fine_tuning": False, "organization": "*", "group": None,
                        "is_blocking": False}],
    }  # fmt: skip
    return json.dumps({"object": "list", "data": [card]})


def vllm_metrics(prefix_caching: bool) -> str:
    labels = {
        "block_size": "16", "gpu_memory_utilization": "0.9", "swap_space": "4",
        "cache_dtype": "auto", "is_attention_free": "False", "num_gpu_blocks_override": "None",
        "sliding_window": "None", "enable_prefix_caching": str(prefix_caching),
        "prefix_caching_hash_algo": "sha256", "cpu_offload_gb": "0",
        "calculate_kv_scales": "False", "num_gpu_blocks": "27463", "num_cpu_blocks": "None",
        "engine": "0",
    }  # fmt: skip
    text = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return (
        "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
        "# TYPE vllm:num_requests_running gauge\n"
        f'vllm:num_requests_running{{engine="0",model_name="{MODEL}"}} 0.0\n'
        "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
        "# TYPE vllm:cache_config_info gauge\n"
        f"vllm:cache_config_info{{{text}}} 1.0\n"
    )


def vllm(prefix_caching: bool = True, max_model_len: int = 32768, **kw: Any) -> Served:
    prom = "text/plain; version=0.0.4; charset=utf-8"
    return Served(
        {
            "/v1/models": ("application/json", vllm_models(max_model_len, **kw)),
            "/metrics": (prom, vllm_metrics(prefix_caching)),
        }
    )


def sglang(**args: Any) -> Served:
    info = {
        "model_path": MODEL, "tp_size": 1, "dtype": "auto", "context_length": None,
        "chunked_prefill_size": 8192, "disable_radix_cache": False, "disable_cuda_graph": False,
        "disable_custom_all_reduce": False, "speculative_algorithm": "DFLASH",
        "internal_states": [{"avg_spec_accept_length": 3.1}], "version": "0.5.11",
    }  # fmt: skip
    info.update(args)
    return Served({"/server_info": ("application/json", json.dumps(info))})


@pytest.fixture
def servers() -> Iterator[list[Served]]:
    made: list[Served] = []
    yield made
    for s in made:
        s.close()


def two(servers: list[Served], a: Served, b: Served) -> list[str]:
    servers += [a, b]
    return [a.url, b.url]


# ---- what the servers tell -----------------------------------------------------------------------


def test_prefix_caching_on_one_vllm_server_only_is_refused(servers):
    urls = two(servers, vllm(prefix_caching=True), vllm(prefix_caching=False))
    with pytest.raises(UnmatchedRuns) as e:
        check_matched(resolve_targets(urls), False)
    assert f"prefix caching: True on {urls[0]}, False on {urls[1]}" in e.value.message
    notes = check_matched(resolve_targets(urls), True)
    assert any(n.startswith("unmatched A/B (--allow-unmatched): prefix caching") for n in notes)


def test_max_model_len_from_v1_models(servers):
    urls = two(servers, vllm(max_model_len=32768), vllm(max_model_len=8192))
    with pytest.raises(UnmatchedRuns, match="max-model-len: 32768 on"):
        check_matched(resolve_targets(urls), False)


def test_matched_servers_pass_and_what_they_do_not_tell_is_named(servers):
    urls = two(servers, vllm(), vllm())
    notes = check_matched(resolve_targets(urls), False)
    assert len(notes) == 1 and "not compared" in notes[0], notes
    for what in ("max-num-batched-tokens", "dtype", "eager mode", "custom all-reduce"):
        assert what in notes[0]
    assert "prefix caching" not in notes[0] and "max-model-len" not in notes[0]


def test_sglang_server_info(servers):
    urls = two(servers, sglang(), sglang(disable_radix_cache=True, chunked_prefill_size=4096))
    with pytest.raises(UnmatchedRuns) as e:
        check_matched(resolve_targets(urls), False)
    assert "prefix caching: True on" in e.value.message
    assert "max-num-batched-tokens: 8192 on" in e.value.message


def test_the_bundled_engine_is_not_guarded(servers):
    urls = two(servers, vllm(owned_by="dflashctl"), vllm(owned_by="dflashctl", max_model_len=9))
    assert check_matched(resolve_targets(urls), False) == []


def test_a_deployment_against_a_url(servers):
    """A recorded command (flags absent = defaults) against a server's own reading: prefix
    caching is compared; a max-model-len the command left to its default is not."""
    s = vllm(prefix_caching=True)
    servers.append(s)
    state.save(
        state.Deployment(
            name="plain", engine="vllm", host=None, url="http://127.0.0.1:9", pid=os.getpid(),
            starttime=0, log="/dev/null", run_dir="/tmp", port=9, bind="127.0.0.1",
            model=MODEL, model_id=MODEL, drafter=None, started_at=state.now_iso(), spec="none",
            cmd=["vllm", "serve", MODEL, "--port", "9", "--no-enable-prefix-caching"],
        )
    )  # fmt: skip
    with pytest.raises(UnmatchedRuns) as e:
        check_matched(resolve_targets(["plain", s.url]), False)
    assert f"prefix caching: False on plain, True on {s.url}" in e.value.message
    assert "max-model-len" not in e.value.message


# ---- start-up logs -----------------------------------------------------------------------------


def demo_log(tmp_path: Path, name: str, *, batched: int | None, extra: dict[str, Any]) -> Path:
    """The real vLLM 0.32.0 start-up of the demo pair, with vLLM's `non-default args:` line for
    `extra` and its chunked-prefill line for `batched`."""
    lines = DEMO_LOG.read_text().splitlines()
    args = {"model_tag": MODEL, "port": 8000, "model": MODEL, **extra}
    head = [f"(APIServer pid=2255) INFO 12-04 22:45:20 [utils.py:233] non-default args: {args!r}"]
    if batched is not None:
        head.append(
            "(APIServer pid=2255) INFO 12-04 22:45:26 [scheduler.py:227] Chunked prefill is "
            f"enabled with max_num_batched_tokens={batched}."
        )
    path = tmp_path / name
    path.write_text("\n".join(head + lines) + "\n")
    return path


def test_a_real_vllm_start_up_reads_as_its_settings(tmp_path):
    engine, s = from_log(demo_log(tmp_path, "a.log", batched=2048, extra={}))
    assert engine == "vllm"
    assert (s.enable_prefix_caching, s.enforce_eager, s.disable_custom_all_reduce) == (
        True, True, True)  # fmt: skip
    assert (s.max_model_len, s.dtype, s.tensor_parallel_size, s.max_num_batched_tokens) == (
        1024, "bfloat16", 1, 2048)  # fmt: skip
    assert from_log(tmp_path / "a.log") is not None
    (tmp_path / "none.log").write_text("nothing here\n")
    assert from_log(tmp_path / "none.log") is None


def test_logs_settle_what_the_servers_do_not_tell(servers, tmp_path, monkeypatch, capsys):
    urls = two(servers, vllm(max_model_len=1024), vllm(max_model_len=1024))
    a = demo_log(tmp_path, "a.log", batched=2048, extra={})
    b = demo_log(tmp_path, "b.log", batched=32768, extra={"max_num_batched_tokens": 32768})
    with pytest.raises(UnmatchedRuns, match=r"max-num-batched-tokens: 2048 on .*, 32768 on"):
        check_matched(resolve_targets(urls), False, [a, b])
    same = demo_log(tmp_path, "c.log", batched=2048, extra={})
    assert check_matched(resolve_targets(urls), False, [a, same]) == []  # nothing left unknown
    # through the command line: refused before any chat request, exit 2, one message
    code, out, err = run_main(monkeypatch, capsys, "bench", *urls, "--log", str(a), "--log",
                              str(b), "--repetitions", "1")  # fmt: skip
    text = " ".join(err.split())
    assert code == 2 and out == "" and "max-num-batched-tokens: 2048" in text, err
    assert "--allow-unmatched" in text and "Traceback" not in text
    assert all(s.posts == 0 for s in servers)
    code, _out, err = run_main(monkeypatch, capsys, "bench", *urls, "--log", str(a))
    assert code == 2 and "1 --log for 2 URL target(s)" in err
    code, _out, err = run_main(monkeypatch, capsys, "bench", *urls, "--log", str(a),
                               "--log", str(tmp_path / "missing.log"))  # fmt: skip
    assert code == 2 and "missing.log" in err and "Traceback" not in err
