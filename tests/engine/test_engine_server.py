"""The real server as a subprocess on 127.0.0.1, driven by the official `openai` client.

The tiny pair really accepts tokens (support/tiny_checkpoints.write_accepting_pair): its drafter's
proposals are wrong until the target falls into repeating one token on the chat prompt, right after.

Expected outputs come from the same engine loaded in the test process (generate.py, itself
checked against transformers and plain greedy in the other engine tests).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.startup import free_port, wait_healthy
from support.tiny_checkpoints import ACCEPT_CHAT, write_accepting_pair, write_drafter

from dflashctl.engine.generate import Engine, Generation
from dflashctl.metrics import MetricsOptions, analyze_source

openai = pytest.importorskip("openai")

REPO = Path(__file__).resolve().parents[2]
NAME = "tiny"
CHAT = ACCEPT_CHAT
TEXT = "The quick brown fox"
STOP_PROMPT = "def f(x):"
IMAGE = [
    {"type": "text", "text": "What is this?"},
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
]
SPEC_LINE = re.compile(
    r"^\(APIServer pid=\d+\) INFO \d\d-\d\d \d\d:\d\d:\d\d \[[\w.]+:\d+\] "
    r"SpecDecoding metrics: Mean acceptance length: (?P<mean>\d+\.\d\d), "
    r"Accepted throughput: \d+\.\d\d tokens/s, Drafted throughput: \d+\.\d\d tokens/s, "
    r"Accepted: (?P<acc>\d+) tokens, Drafted: (?P<drafted>\d+) tokens, "
    r"Per-position acceptance rate: (?P<pos>\d\.\d{3}(?:, \d\.\d{3})*), "
    r"Avg Draft acceptance rate: \d+\.\d%$"
)
ENGINE_LINE = re.compile(
    r"^\(APIServer pid=\d+\) INFO \d\d-\d\d \d\d:\d\d:\d\d \[[\w.]+:\d+\] Engine 000: "
    r"Avg prompt throughput: \d+\.\d tokens/s, Avg generation throughput: \d+\.\d tokens/s, "
    r"Running: \d+ reqs, Waiting: \d+ reqs, CPU KV cache usage: \d+\.\d%, "
    r"Prefix cache hit rate: \d+\.\d%$"
)


# ------------------------------------------------------------------------------ the pair


@dataclass
class Pair:
    target: Path
    drafter: Path
    engine: Engine  # the same pair in this process: the expected outputs
    eos: int  # the stop token, hit by STOP_PROMPT's continuation only

    def chat_ids(self) -> list[int]:
        return self.engine.tokenizer.apply_chat_template(CHAT)

    def expect(self, ids: list[int], n: int) -> Generation:
        return self.engine.generate(ids, n)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Pair:
    t_dir, d_dir = write_accepting_pair(tmp_path_factory.mktemp("pair"))
    plain = Engine.load(t_dir, None, max_model_len=512)
    plain.eos_ids = set()
    chat = plain.generate(plain.tokenizer.apply_chat_template(CHAT), 200).tokens

    # the eos: a token of STOP_PROMPT's continuation that the other prompts never produce (the
    # random target says <|im_end|> on CHAT)
    others = set(chat) | set(plain.generate(plain.tokenizer.encode(TEXT), 200).tokens)
    stop_run = plain.generate(plain.tokenizer.encode(STOP_PROMPT), 40).tokens
    eos = next(t for t in stop_run[3:] if t not in others)
    gen_cfg = json.loads((t_dir / "generation_config.json").read_text())
    gen_cfg["eos_token_id"] = [eos]
    (t_dir / "generation_config.json").write_text(json.dumps(gen_cfg))

    engine = Engine.load(t_dir, d_dir, max_model_len=512)
    assert engine.eos_ids == {eos} and engine.drafter is not None
    return Pair(t_dir, d_dir, engine, eos)


# ------------------------------------------------------------------------------ the server


class Server:
    """`python -m dflashctl.engine.server ...` with its log in a file; stopped by pid."""

    def __init__(self, log: Path, *args: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        argv = [sys.executable, "-m", "dflashctl.engine.server", *args]
        argv += ["--host", "127.0.0.1", "--port", str(self.port), "--served-model-name", NAME]
        env = {**os.environ, "OMP_NUM_THREADS": "1"}  # tiny models: one thread is fastest
        with open(log, "wb") as f:
            self.proc = subprocess.Popen(
                argv,
                cwd=REPO,
                env=env,
                stdout=f,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        self.wait_ready()

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_ready(self, timeout: float = 180) -> None:
        try:
            wait_healthy(
                self.proc, self.url, self.log, timeout=timeout, every=0.2, startup_line=True
            )
        except AssertionError:
            self.stop()
            raise

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def client(self, **kw: Any) -> Any:
        return openai.OpenAI(base_url=self.url + "/v1", api_key="unused", max_retries=0, **kw)

    def metrics(self) -> dict[str, float]:
        """Samples of /metrics as parsed by prometheus_client, keyed `name{position}`."""
        from prometheus_client.parser import text_string_to_metric_families

        page = httpx.get(self.url + "/metrics", timeout=10).text
        out: dict[str, float] = {}
        for family in text_string_to_metric_families(page):
            for s in family.samples:
                assert s.labels.get("model_name") == NAME and s.labels.get("engine") == "0"
                extra = {k: v for k, v in s.labels.items() if k not in ("engine", "model_name")}
                key = s.name + (json.dumps(extra, sort_keys=True) if extra else "")
                out[key] = s.value
        return out


@pytest.fixture(scope="module")
def spec(pair: Pair, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    log = tmp_path_factory.mktemp("spec") / "server.log"
    server = Server(
        log,
        *("--model", str(pair.target), "--drafter", str(pair.drafter)),
        *("--log-interval", "0.5", "--max-model-len", "512", "--default-max-tokens", "32"),
    )
    yield server
    server.stop()


@pytest.fixture(scope="module")
def plain(pair: Pair, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    log = tmp_path_factory.mktemp("plain") / "server.log"
    server = Server(
        log,
        *("--model", str(pair.target), "--spec", "none", "--drafter", str(pair.drafter)),
        *("--log-interval", "0.5", "--max-model-len", "8000", "--max-queue", "1"),
    )
    yield server
    server.stop()


def spec_delta(before: dict[str, float], after: dict[str, float], k: int) -> dict[str, Any]:
    def d(key: str) -> int:
        return round(after.get(key, 0) - before.get(key, 0))

    per_pos = [
        d(f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{"position": "{i}"}}')
        for i in range(k)
    ]
    return {
        "drafts": d("vllm:spec_decode_num_drafts_total"),
        "draft_tokens": d("vllm:spec_decode_num_draft_tokens_total"),
        "accepted": d("vllm:spec_decode_num_accepted_tokens_total"),
        "per_pos": per_pos,
        "prompt": d("vllm:prompt_tokens_total"),
        "generated": d("vllm:generation_tokens_total"),
    }


# ------------------------------------------------------------------------------ tests


def test_startup_lines_and_models(spec: Server, pair: Pair) -> None:
    text = spec.text()
    assert "Resolved architecture: DFlashDraftModel" in text
    assert "Using auxiliary layers from speculative config: (1, 3)" in text
    assert httpx.get(spec.url + "/health").status_code == 200
    from dflashctl import __version__

    # its step on /version (diagnose's reference steps the same way): the full one here
    step = {"draft_vocab": None, "draft_confidence": 0.0}
    version = {"version": f"dflashctl-{__version__}", "dflashctl_step": step}
    assert httpx.get(spec.url + "/version").json() == version
    models = spec.client().models.list().data
    assert [m.id for m in models] == [NAME]
    assert models[0].model_extra["max_model_len"] == pair.engine.max_model_len


def test_chat_completion_matches_the_engine_and_counts(spec: Server, pair: Pair) -> None:
    ids = pair.chat_ids()
    want = pair.expect(ids, 120)
    assert want.stats.num_accepted_tokens > 0 and want.stats.num_drafts > 0
    before = spec.metrics()
    r = spec.client().chat.completions.create(
        model=NAME, messages=CHAT, max_tokens=120, temperature=0
    )
    after = spec.metrics()
    assert r.object == "chat.completion" and r.model == NAME
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].message.content == pair.engine.tokenizer.decode(want.tokens)
    assert r.choices[0].finish_reason == "length"
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (len(ids), 120)
    assert r.usage.total_tokens == len(ids) + 120
    s = want.stats
    assert spec_delta(before, after, pair.engine.k) == {
        "drafts": s.num_drafts,
        "draft_tokens": s.num_draft_tokens,
        "accepted": s.num_accepted_tokens,
        "per_pos": s.accepted_per_pos,
        "prompt": len(ids),
        "generated": 120,
    }
    assert after['vllm:request_success_total{"finished_reason": "length"}'] >= 1


def test_chat_stream_equals_non_stream(spec: Server, pair: Pair) -> None:
    client = spec.client()
    whole = client.chat.completions.create(model=NAME, messages=CHAT, max_tokens=50)
    parts, reasons, usage = [], [], None
    for chunk in client.chat.completions.create(
        model=NAME,
        messages=CHAT,
        max_tokens=50,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    ):
        assert chunk.object == "chat.completion.chunk"
        if chunk.usage is not None:
            usage = chunk.usage
            assert chunk.choices == []
            continue
        parts.append(chunk.choices[0].delta.content or "")
        reasons.append(chunk.choices[0].finish_reason)
    assert "".join(parts) == whole.choices[0].message.content
    assert reasons[-1] == "length" and set(reasons[:-1]) == {None}
    assert usage is not None and usage.completion_tokens == 50
    assert usage.prompt_tokens == whole.usage.prompt_tokens


def test_completions_stream_and_not_with_stop(spec: Server, pair: Pair) -> None:
    client = spec.client()
    tok = pair.engine.tokenizer
    want = pair.expect(tok.encode(TEXT), 40)
    r = client.completions.create(model=NAME, prompt=TEXT, max_tokens=40, temperature=0)
    assert r.choices[0].text == tok.decode(want.tokens)
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 40

    stop = pair.expect(tok.encode(STOP_PROMPT), 40)
    assert stop.finish_reason == "stop" and stop.tokens[-1] == pair.eos
    r = client.completions.create(model=NAME, prompt=STOP_PROMPT, max_tokens=40)
    assert r.choices[0].finish_reason == "stop"
    assert r.usage.completion_tokens == len(stop.tokens) < 40
    assert r.choices[0].text == tok.decode(stop.tokens)
    chunks = list(
        client.completions.create(model=NAME, prompt=STOP_PROMPT, max_tokens=40, stream=True)
    )
    assert "".join(c.choices[0].text for c in chunks) == r.choices[0].text
    assert chunks[-1].choices[0].finish_reason == "stop"
    # token ids as the prompt
    r = client.completions.create(model=NAME, prompt=tok.encode(TEXT), max_tokens=40)
    assert r.choices[0].text == tok.decode(want.tokens)


def test_default_max_tokens_and_context_limit(spec: Server, pair: Pair) -> None:
    client = spec.client()
    r = client.completions.create(model=NAME, prompt=TEXT)
    assert r.usage.completion_tokens == 32  # --default-max-tokens
    limit = pair.engine.max_model_len
    ids = [65] * (limit - 10)
    r = client.completions.create(model=NAME, prompt=ids)  # the default shrinks to fit
    assert r.usage.completion_tokens == len(pair.expect(ids, 10).tokens)
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=NAME, prompt=ids, max_tokens=11)
    assert e.value.status_code == 400
    assert f"maximum context length is {limit} tokens" in e.value.message
    with pytest.raises(openai.BadRequestError, match="maximum context length"):
        client.chat.completions.create(
            model=NAME, messages=[{"role": "user", "content": "x" * 600}]
        )


@pytest.mark.parametrize(
    "kwargs, param",
    [
        ({"temperature": 0.7}, "temperature"),
        ({"temperature": 1.0, "top_p": 0.9}, "temperature"),
        ({"n": 2}, "n"),
        ({"logprobs": True, "top_logprobs": 2}, "logprobs"),
        ({"stop": ["\n"]}, "stop"),
        ({"presence_penalty": 0.5}, "presence_penalty"),
        ({"messages": [{"role": "user", "content": IMAGE}]}, "messages"),
    ],
)
def test_unsupported_chat_requests_are_refused(spec: Server, kwargs: dict, param: str) -> None:
    args: dict[str, Any] = {"model": NAME, "messages": CHAT, "max_tokens": 4} | kwargs
    t0 = time.monotonic()
    with pytest.raises(openai.BadRequestError) as e:
        spec.client().chat.completions.create(**args)
    assert time.monotonic() - t0 < 10
    err = e.value
    assert err.status_code == 400 and err.body["param"] == param
    assert err.body["message"] and err.body["type"] == "BadRequestError"


def test_greedy_equivalents_are_served(spec: Server) -> None:
    client = spec.client()
    r = client.chat.completions.create(
        model=NAME, messages=CHAT, max_tokens=5, temperature=0.8, extra_body={"top_k": 1}
    )
    assert r.usage.completion_tokens == 5
    greedy = {"n": 1, "top_p": 0.5, "temperature": 0, "logprobs": False}
    r = client.chat.completions.create(model=NAME, messages=CHAT, max_tokens=5, **greedy)
    assert r.usage.completion_tokens == 5


def test_unsupported_completions_and_unknown_model(spec: Server) -> None:
    client = spec.client()
    with pytest.raises(openai.BadRequestError, match="logprobs"):
        client.completions.create(model=NAME, prompt=TEXT, max_tokens=4, logprobs=0)
    with pytest.raises(openai.BadRequestError, match="echo"):
        client.completions.create(model=NAME, prompt=TEXT, max_tokens=4, echo=True)
    with pytest.raises(openai.BadRequestError, match="prompt"):
        client.completions.create(model=NAME, prompt=["a", "b"], max_tokens=4)
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="other", prompt=TEXT, max_tokens=4)
    bad = httpx.post(spec.url + "/v1/completions", content=b"{not json", timeout=10)
    assert bad.status_code == 400 and bad.json()["error"]["code"] == 400


def wait_for_log(server: Server, accepted: int, drafted: int, timeout: float = 20) -> list[dict]:
    """The SpecDecoding lines, once their totals reach the /metrics totals."""
    deadline = time.monotonic() + timeout
    while True:
        lines = [m.groupdict() for m in map(SPEC_LINE.match, server.text().splitlines()) if m]
        got = (sum(int(x["acc"]) for x in lines), sum(int(x["drafted"]) for x in lines))
        if got == (accepted, drafted) or time.monotonic() > deadline:
            assert got == (accepted, drafted), server.text()[-3000:]
            return lines
        time.sleep(0.2)


def test_log_lines_and_metrics_agree_and_parse(spec: Server, pair: Pair) -> None:
    k = pair.engine.k
    spec.client().chat.completions.create(model=NAME, messages=CHAT, max_tokens=100)
    m = spec.metrics()
    accepted = round(m["vllm:spec_decode_num_accepted_tokens_total"])
    drafted = round(m["vllm:spec_decode_num_draft_tokens_total"])
    drafts = round(m["vllm:spec_decode_num_drafts_total"])
    assert drafted == k * drafts and accepted > 0
    lines = wait_for_log(spec, accepted, drafted)
    for x in lines:  # each window's figures agree with themselves
        n = int(x["drafted"]) // k
        rates = [float(r) for r in x["pos"].split(", ")]
        assert len(rates) == k
        assert float(x["mean"]) == pytest.approx(1 + int(x["acc"]) / n, abs=0.006)
        assert sum(rates) * n == pytest.approx(int(x["acc"]), abs=0.0006 * n * k)
    text = spec.text().splitlines()
    assert any(ENGINE_LINE.match(line) for line in text)
    assert "INFO:     Application startup complete." in text

    # the project's own parser, on the log and on the page
    mean = 1 + accepted / drafts
    report = analyze_source(str(spec.log), MetricsOptions())
    st = report.state
    assert st.engine == "vllm" and st.kind == "log" and st.total_windows == len(lines)
    assert st.spec_config is not None
    assert (st.spec_config["method"], st.spec_config["num_spec_tokens"]) == ("dflash", k)
    assert st.latest_launch_has_startup
    assert sum(w.accepted_tokens or 0 for w in st.windows) == accepted
    assert sum(w.drafted_tokens or 0 for w in st.windows) == drafted
    log_drafts = sum((w.drafted_tokens or 0) // k for w in st.windows)
    assert 1 + accepted / log_drafts == pytest.approx(mean, abs=1e-9)
    page = analyze_source(spec.url + "/metrics", MetricsOptions(interval=0.2)).state
    assert page.engine == "vllm" and page.lifetime is not None
    assert page.lifetime.mean_acceptance_length == pytest.approx(mean, abs=1e-9)
    assert page.lifetime.accepted_tokens == accepted and page.lifetime.drafted_tokens == drafted
    per_pos = [
        m[f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{"position": "{i}"}}'] / drafts
        for i in range(k)
    ]
    assert page.lifetime.per_position == pytest.approx(per_pos, abs=1e-9)


def test_plain_server_has_no_spec_metrics(plain: Server, pair: Pair) -> None:
    ids = pair.chat_ids()
    want = pair.expect(ids, 30)  # speculative in this process, plain there: the same tokens
    r = plain.client().chat.completions.create(model=NAME, messages=CHAT, max_tokens=30)
    assert r.choices[0].message.content == pair.engine.tokenizer.decode(want.tokens)
    m = plain.metrics()
    assert not [k for k in m if k.startswith("vllm:spec_decode")]
    assert m["vllm:generation_tokens_total"] >= 30
    assert "Resolved architecture: DFlashDraftModel" not in plain.text()
    time.sleep(1.5)
    text = plain.text()
    assert "SpecDecoding metrics" not in text
    assert any(ENGINE_LINE.match(line) for line in text.splitlines())
    report = analyze_source(str(plain.log), MetricsOptions())
    assert report.state.spec_config == {"enabled": False, "engine": "vllm"}
    assert "no_speculation" in [f.kind for f in report.findings]


def test_full_queue_answers_503_at_once(plain: Server) -> None:
    """--max-queue 1: one request runs, one waits, the next is refused at once; a streaming
    client that leaves aborts its request, and the waiting one is then served."""
    client = plain.client(timeout=120)
    stream = client.completions.create(model=NAME, prompt=TEXT, max_tokens=7900, stream=True)
    next(iter(stream))  # running
    waiting: dict[str, Any] = {}

    def wait_in_line() -> None:
        waiting["r"] = client.completions.create(model=NAME, prompt=TEXT, max_tokens=3)

    t = threading.Thread(target=wait_in_line)
    t.start()
    deadline = time.monotonic() + 30
    while plain.metrics()["vllm:num_requests_waiting"] < 1:
        assert time.monotonic() < deadline, "the second request never queued"
        time.sleep(0.05)
    assert plain.metrics()["vllm:num_requests_running"] == 1
    t0 = time.monotonic()
    with pytest.raises(openai.APIStatusError) as e:
        client.completions.create(model=NAME, prompt=TEXT, max_tokens=3)
    assert time.monotonic() - t0 < 2
    assert e.value.status_code == 503 and "queue is full" in e.value.message
    stream.close()  # the client leaves: the long request aborts
    t.join(60)
    assert waiting["r"].usage.completion_tokens == 3
    m = plain.metrics()
    assert m['vllm:request_success_total{"finished_reason": "abort"}'] == 1
    assert m["vllm:num_requests_waiting"] == 0


def test_a_config_vllm_refuses_ends_startup_like_vllm(pair: Pair, tmp_path: Path) -> None:
    d_dir = tmp_path / "no-mask"
    write_drafter(d_dir, dflash_config={"target_layer_ids": [0, 2]})
    log = tmp_path / "server.log"
    with pytest.raises(AssertionError, match="server exited 1"):
        Server(log, "--model", str(pair.target), "--drafter", str(d_dir))
    text = log.read_text()
    assert "For parallel drafting, the draft model config must have" in text
    assert "RuntimeError: Engine core initialization failed. See root cause above." in text
    assert "Traceback" not in text


def test_wrong_taps_fail_each_request_like_vllm(pair: Pair, tmp_path: Path) -> None:
    """An id the target does not have: vLLM drops it at start-up, stays healthy, and fails every
    request with its `DFlash drafter expects ...` error (HTTP 500); so does this engine."""
    d_dir = tmp_path / "stale"
    write_drafter(d_dir, dflash_config={"mask_token_id": 259, "target_layer_ids": [0, 2, 7]})
    server = Server(tmp_path / "server.log", "--model", str(pair.target), "--drafter", str(d_dir))
    try:
        with pytest.raises(openai.InternalServerError) as e:
            server.client().chat.completions.create(model=NAME, messages=CHAT, max_tokens=4)
        assert e.value.status_code == 500
        assert "expects 192 concatenated aux hidden features but received 128" in e.value.message
        stream = server.client().chat.completions.create(
            model=NAME, messages=CHAT, max_tokens=4, stream=True
        )
        with pytest.raises(openai.APIError, match="concatenated aux hidden features"):
            list(stream)
        assert httpx.get(server.url + "/health").status_code == 200
        assert "DFlash drafter expects 192 concatenated aux hidden features" in server.text()
    finally:
        server.stop()


# ------------------------------------------------------------------------------ hostile requests


def test_a_body_over_the_limit_is_413_before_it_is_read(plain: Server) -> None:
    big = b'{"prompt": "' + b"x" * (5 << 20) + b'"}'  # the default limit is 4 MiB
    t0 = time.monotonic()
    r = httpx.post(plain.url + "/v1/completions", content=big, timeout=60,
                   headers={"content-type": "application/json"})  # fmt: skip
    assert r.status_code == 413 and "exceeds 4194304 bytes" in r.json()["error"]["message"]
    assert time.monotonic() - t0 < 5
    assert httpx.get(plain.url + "/health", timeout=5).status_code == 200


@pytest.mark.parametrize(
    "body, needle",
    [
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b'{"prompt": "a", "max_tokens": ' + b"9" * 5000 + b"}", "not usable JSON"),
        (b'{"prompt": "a", "stream": true, "stream_options": "x"}', "stream_options must be"),
        (b'{"prompt": "a", "logit_bias": {"1": 5}}', "logit_bias is not supported"),
        (b"\xff\xfe{", "not valid JSON"),
    ],
    ids=["deep-nesting", "5000-digit-int", "stream_options-string", "logit_bias", "bad-utf8"],
)
def test_malformed_bodies_are_400_not_500(plain: Server, body: bytes, needle: str) -> None:
    r = httpx.post(plain.url + "/v1/completions", content=body, timeout=30,
                   headers={"content-type": "application/json"})  # fmt: skip
    assert r.status_code == 400, r.text
    assert needle in r.json()["error"]["message"]
    assert "Traceback" not in plain.text()


def test_health_answers_while_a_large_prompt_is_tokenised(plain: Server) -> None:
    """3 MB of prompt text (under the body limit, far over the context): it is read and
    parsed off the event loop and refused without being tokenised; /health keeps answering."""
    prompt = "lorem ipsum dolor sit amet " * 110_000
    result: dict[str, Any] = {}

    def send() -> None:
        body = {"model": NAME, "prompt": prompt, "max_tokens": 4}
        result["r"] = httpx.post(plain.url + "/v1/completions", json=body, timeout=120)

    t = threading.Thread(target=send)
    t.start()
    slowest = 0.0
    while t.is_alive():
        t0 = time.monotonic()
        assert httpx.get(plain.url + "/health", timeout=10).status_code == 200
        slowest = max(slowest, time.monotonic() - t0)
        time.sleep(0.05)
    t.join()
    assert result["r"].status_code == 400 and "maximum context length" in result["r"].text
    assert slowest < 1.0, f"/health took {slowest:.2f} s while the prompt was tokenised"


def test_an_abandoned_non_streaming_request_is_aborted(plain: Server) -> None:
    """A client that gives up on a long non-streaming request frees the slot: the next
    request is served at once instead of queueing behind thousands of tokens."""
    before = plain.metrics().get('vllm:request_success_total{"finished_reason": "abort"}', 0)
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(plain.url + "/v1/completions", timeout=0.5,
                   json={"model": NAME, "prompt": TEXT, "max_tokens": 7900})  # fmt: skip
    t0 = time.monotonic()
    r = httpx.post(plain.url + "/v1/completions", timeout=60,
                   json={"model": NAME, "prompt": TEXT, "max_tokens": 3})  # fmt: skip
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 3
    assert time.monotonic() - t0 < 10
    after = plain.metrics()['vllm:request_success_total{"finished_reason": "abort"}']
    assert after == before + 1
