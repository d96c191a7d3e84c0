"""OpenAI-compatible server for the bundled engine, speaking vLLM's dialect of logs and metrics.

    python -m dflashctl.engine.server --model DIR [--drafter DIR | --spec none] [--port 8000]

Endpoints: /v1/chat/completions and /v1/completions (streaming or not), /v1/models, /health,
/metrics (vLLM names: `vllm:spec_decode_*`, `vllm:generation_tokens`, ...). Every
`--log-interval` seconds it logs vLLM's `Engine 000:` and `SpecDecoding metrics:` lines in vLLM's
prefix format, so `dflashctl metrics` reads this engine exactly as it reads vLLM.

Requests run one at a time (batch one) from a bounded queue; a full queue answers 503 at once.
Anything the engine would serve differently than asked (sampling, n > 1, logprobs, images, stop
strings, too long a prompt) is refused with HTTP 400 and an OpenAI-style error body.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dflashctl import __version__

LOG_FORMAT = (
    "(APIServer pid=%(process)d) %(levelname)s %(asctime)s [%(filename)s:%(lineno)d] %(message)s"
)
log = logging.getLogger("dflashctl.engine")


class BadRequest(Exception):
    def __init__(self, message: str, param: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.message, self.param, self.status = message, param, status


@dataclass
class Window:
    """Counters since the last stats log line (vLLM's per-interval SpecDecodingStats)."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    accepted_per_pos: list[int] = field(default_factory=list)


class Stats:
    """Prometheus counters with vLLM's names plus the window for the log lines."""

    def __init__(self, model_name: str, k: int) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        labels = {"engine": "0", "model_name": model_name}
        names = ["engine", "model_name"]
        r = self.registry

        def counter(name: str, doc: str, extra: list[str] | None = None) -> Any:
            return Counter(name, doc, names + (extra or []), registry=r)

        self.prompt_tokens = counter("vllm:prompt_tokens", "Prefill tokens processed.").labels(
            **labels
        )
        self.generation_tokens = counter(
            "vllm:generation_tokens", "Generation tokens processed."
        ).labels(**labels)
        self._success = counter("vllm:request_success", "Finished requests.", ["finished_reason"])
        self.success = lambda reason: self._success.labels(**labels, finished_reason=reason)
        self.running = Gauge("vllm:num_requests_running", "Running.", names, registry=r).labels(
            **labels
        )
        self.waiting = Gauge("vllm:num_requests_waiting", "Waiting.", names, registry=r).labels(
            **labels
        )
        self.ttft = Histogram(
            "vllm:time_to_first_token_seconds", "TTFT.", names, registry=r
        ).labels(**labels)
        self.k = k
        if k:
            self.drafts = counter("vllm:spec_decode_num_drafts", "Drafts.").labels(**labels)
            self.draft_tokens = counter(
                "vllm:spec_decode_num_draft_tokens", "Draft tokens."
            ).labels(**labels)
            self.accepted = counter(
                "vllm:spec_decode_num_accepted_tokens", "Accepted tokens."
            ).labels(**labels)
            per_pos = counter(
                "vllm:spec_decode_num_accepted_tokens_per_pos",
                "Accepted per position.",
                ["position"],
            )
            self.per_pos = [per_pos.labels(**labels, position=str(i)) for i in range(k)]
        self.lock = threading.Lock()
        self.window = Window(accepted_per_pos=[0] * k)
        self.last_had_traffic = False

    def observe_drafts(
        self, drafts: int, draft_tokens: int, accepted: int, per_pos: list[int]
    ) -> None:
        with self.lock:
            w = self.window
            w.num_drafts += drafts
            w.num_draft_tokens += draft_tokens
            w.num_accepted_tokens += accepted
            for i, n in enumerate(per_pos):
                w.accepted_per_pos[i] += n
        self.drafts.inc(drafts)
        self.draft_tokens.inc(draft_tokens)
        self.accepted.inc(accepted)
        for i, n in enumerate(per_pos):
            if n:
                self.per_pos[i].inc(n)

    def observe_tokens(self, prompt: int, generated: int) -> None:
        with self.lock:
            self.window.prompt_tokens += prompt
            self.window.generation_tokens += generated
        if prompt:
            self.prompt_tokens.inc(prompt)
        if generated:
            self.generation_tokens.inc(generated)

    def log_window(self, interval: float) -> None:
        """vLLM's two interval lines; idle intervals (this and the last) are not logged."""
        with self.lock:
            w, self.window = self.window, Window(accepted_per_pos=[0] * self.k)
        traffic = bool(w.prompt_tokens or w.generation_tokens)
        if not traffic and not self.last_had_traffic:
            return
        self.last_had_traffic = traffic
        running, waiting = int(self.running._value.get()), int(self.waiting._value.get())
        log.info(
            "Engine 000: Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f "
            "tokens/s, Running: %d reqs, Waiting: %d reqs, CPU KV cache usage: %.1f%%, "
            "Prefix cache hit rate: %.1f%%",
            w.prompt_tokens / interval,
            w.generation_tokens / interval,
            running,
            waiting,
            0.0,
            0.0,
        )
        if not w.num_drafts:
            return
        rates = ", ".join(f"{a / w.num_drafts:.3f}" for a in w.accepted_per_pos)
        log.info(
            "SpecDecoding metrics: Mean acceptance length: %.2f, Accepted throughput: %.2f "
            "tokens/s, Drafted throughput: %.2f tokens/s, Accepted: %d tokens, Drafted: %d "
            "tokens, Per-position acceptance rate: %s, Avg Draft acceptance rate: %.1f%%",
            1 + w.num_accepted_tokens / w.num_drafts,
            w.num_accepted_tokens / interval,
            w.num_draft_tokens / interval,
            w.num_accepted_tokens,
            w.num_draft_tokens,
            rates,
            100 * w.num_accepted_tokens / w.num_draft_tokens,
        )


# ------------------------------------------------------------------------------ validation

UNSUPPORTED = {
    "logprobs": "logprobs are not supported by the bundled engine",
    "top_logprobs": "logprobs are not supported by the bundled engine",
    "tools": "tool calls are not supported by the bundled engine",
    "response_format": "structured output is not supported by the bundled engine",
    "best_of": "best_of is not supported by the bundled engine",
    "suffix": "suffix is not supported by the bundled engine",
    "echo": "echo is not supported by the bundled engine",
}


def check_sampling(body: dict[str, Any]) -> None:
    """Only greedy decoding is served; anything else is refused, never silently changed."""
    temp = body.get("temperature")
    top_k = body.get("top_k")
    top_p = body.get("top_p")
    if temp is not None and not isinstance(temp, int | float):
        raise BadRequest("temperature must be a number", "temperature")
    if temp and temp > 0 and top_k != 1:
        raise BadRequest(
            "the bundled engine decodes greedily only: send temperature 0 (or top_k 1)",
            "temperature",
        )
    if top_p is not None and top_p != 1 and temp and top_k != 1:
        raise BadRequest("top_p sampling is not supported: the engine is greedy", "top_p")
    n = body.get("n", 1)
    if n not in (None, 1):
        raise BadRequest("n > 1 is not supported: the engine serves one sequence", "n")
    for key, message in UNSUPPORTED.items():
        if body.get(key) not in (None, False, [], 0) and not (key == "logprobs" and body[key] == 0):
            raise BadRequest(message, key)
    stop = body.get("stop")
    if stop not in (None, [], ""):
        raise BadRequest("stop strings are not supported by the bundled engine", "stop")
    for key in ("presence_penalty", "frequency_penalty"):
        if body.get(key) not in (None, 0, 0.0):
            raise BadRequest(f"{key} is not supported: the engine is greedy", key)
    if body.get("repetition_penalty") not in (None, 1, 1.0):
        raise BadRequest("repetition_penalty is not supported", "repetition_penalty")


def max_tokens_of(body: dict[str, Any], default: int) -> int:
    value = body.get("max_completion_tokens", body.get("max_tokens"))
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise BadRequest("max_tokens must be a positive integer", "max_tokens")
    return value


def messages_of(body: dict[str, Any]) -> list[dict[str, str]]:
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise BadRequest("messages must be a non-empty list", "messages")
    out = []
    for m in msgs:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise BadRequest("each message needs a role and content", "messages")
        content = m.get("content")
        if isinstance(content, list):
            texts = []
            for part in content:
                if not isinstance(part, dict) or part.get("type") != "text":
                    kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                    raise BadRequest(
                        f"content of type {kind!r} is not supported (text only)", "messages"
                    )
                texts.append(str(part.get("text", "")))
            content = "".join(texts)
        if not isinstance(content, str):
            raise BadRequest("message content must be a string", "messages")
        out.append({"role": m["role"], "content": content})
    return out


# ------------------------------------------------------------------------------ app


@dataclass
class Job:
    prompt_ids: list[int]
    max_tokens: int


class EngineServer:
    """Owns the engine, the one-at-a-time worker and the stats."""

    def __init__(self, engine: Any, model_name: str, max_queue: int, default_max_tokens: int):
        self.engine = engine
        self.model_name = model_name
        self.max_queue = max_queue
        self.default_max_tokens = default_max_tokens
        self.stats = Stats(model_name, engine.k)
        self.slot = threading.Lock()
        self.pending = 0
        self.pending_lock = threading.Lock()

    def admit(self) -> None:
        with self.pending_lock:
            if self.pending >= self.max_queue:
                raise BadRequest("the server is busy: request queue is full", None, status=503)
            self.pending += 1
            self.stats.waiting.inc()

    def run(self, job: Job) -> Iterator[tuple[list[int], str | None]]:
        """Generate under the one-sequence lock; yield (new tokens, finish reason or None)."""
        from dflashctl.engine.generate import SpecStats

        with self.slot:
            with self.pending_lock:
                self.pending -= 1
            self.stats.waiting.dec()
            self.stats.running.inc()
            try:
                self.stats.observe_tokens(len(job.prompt_ids), 0)
                stats = SpecStats()
                seen = SpecStats(accepted_per_pos=[0] * self.engine.k)
                produced = 0
                for chunk in self.engine.stream(job.prompt_ids, job.max_tokens, stats):
                    if stats.num_drafts > seen.num_drafts:
                        self.stats.observe_drafts(
                            stats.num_drafts - seen.num_drafts,
                            stats.num_draft_tokens - seen.num_draft_tokens,
                            stats.num_accepted_tokens - seen.num_accepted_tokens,
                            [
                                a - b
                                for a, b in zip(
                                    stats.accepted_per_pos, seen.accepted_per_pos, strict=False
                                )
                            ],
                        )
                        seen = SpecStats(
                            stats.num_drafts,
                            stats.num_draft_tokens,
                            stats.num_accepted_tokens,
                            list(stats.accepted_per_pos),
                        )
                    produced += len(chunk)
                    self.stats.observe_tokens(0, len(chunk))
                    done = produced >= job.max_tokens or bool(
                        chunk and chunk[-1] in self.engine.eos_ids
                    )
                    reason = None
                    if done:
                        reason = "stop" if chunk and chunk[-1] in self.engine.eos_ids else "length"
                        self.stats.success(reason).inc()
                    yield chunk, reason
            finally:
                self.stats.running.dec()


def create_app(server: EngineServer) -> Any:
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse

    app = FastAPI(title="dflashctl engine", version=__version__)

    def error(status: int, message: str, param: str | None = None) -> JSONResponse:
        kind = {400: "BadRequestError", 404: "NotFoundError", 503: "ServiceUnavailableError"}
        body = {
            "error": {
                "message": message,
                "type": kind.get(status, "InternalServerError"),
                "param": param,
                "code": status,
            }
        }
        return JSONResponse(body, status_code=status)

    @app.exception_handler(BadRequest)
    async def _bad_request(_: Request, exc: BadRequest) -> JSONResponse:
        return error(exc.status, exc.message, exc.param)

    @app.get("/health")
    async def health() -> PlainTextResponse:
        return PlainTextResponse("")

    @app.get("/version")
    async def version() -> dict[str, str]:
        return {"version": f"dflashctl-{__version__}"}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {
            "object": "list",
            "data": [
                {
                    "id": server.model_name,
                    "object": "model",
                    "created": int(START),
                    "owned_by": "dflashctl",
                    "root": server.model_name,
                    "max_model_len": server.engine.max_model_len,
                }
            ],
        }

    @app.get("/metrics")
    async def metrics() -> PlainTextResponse:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return PlainTextResponse(
            generate_latest(server.stats.registry).decode(), media_type=CONTENT_TYPE_LATEST
        )

    async def parse(request: Request) -> dict[str, Any]:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise BadRequest("request body is not valid JSON") from None
        if not isinstance(body, dict):
            raise BadRequest("request body must be a JSON object")
        model = body.get("model")
        if model is not None and model != server.model_name:
            raise BadRequest(f"The model `{model}` does not exist.", "model", status=404)
        check_sampling(body)
        return body

    def make_job(prompt_ids: list[int], body: dict[str, Any]) -> Job:
        max_tokens = max_tokens_of(body, server.default_max_tokens)
        limit = server.engine.max_model_len
        if len(prompt_ids) + max_tokens > limit:
            raise BadRequest(
                f"This model's maximum context length is {limit} tokens. However, you requested "
                f"{len(prompt_ids) + max_tokens} tokens ({len(prompt_ids)} in the messages, "
                f"{max_tokens} in the completion). Please reduce the length.",
                "max_tokens",
            )
        if not prompt_ids:
            raise BadRequest("the prompt is empty", "prompt")
        return Job(prompt_ids, max_tokens)

    async def respond(body: dict[str, Any], job: Job, chat: bool) -> Any:
        server.admit()
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        created = int(time.time())
        tok = server.engine.tokenizer
        queue: asyncio.Queue[Any] = asyncio.Queue()
        loop = asyncio.get_running_loop()
        t0 = time.perf_counter()

        def work() -> None:
            try:
                first = True
                for chunk, reason in server.run(job):
                    if first:
                        server.stats.ttft.observe(time.perf_counter() - t0)
                        first = False
                    loop.call_soon_threadsafe(queue.put_nowait, (chunk, reason))
            except Exception as exc:  # engine failure: report, don't hang the client
                log.exception("request %s failed", rid)
                loop.call_soon_threadsafe(queue.put_nowait, exc)
            loop.call_soon_threadsafe(queue.put_nowait, None)

        threading.Thread(target=work, daemon=True).start()

        async def chunks() -> AsyncIterator[tuple[list[int], str | None]]:
            while True:
                item = await queue.get()
                if item is None:
                    return
                if isinstance(item, Exception):
                    raise item
                yield item

        def usage(n: int) -> dict[str, int]:
            p = len(job.prompt_ids)
            return {"prompt_tokens": p, "completion_tokens": n, "total_tokens": p + n}

        if not body.get("stream"):
            tokens: list[int] = []
            finish = "length"
            try:
                async for chunk, reason in chunks():
                    tokens.extend(chunk)
                    finish = reason or finish
            except Exception as exc:
                return error(500, f"engine error: {exc}")
            text = tok.decode(tokens)
            if chat:
                choice: dict[str, Any] = {
                    "index": 0,
                    "message": {"role": "assistant", "content": text, "reasoning": None},
                    "finish_reason": finish,
                    "stop_reason": None,
                }
            else:
                choice = {"index": 0, "text": text, "finish_reason": finish, "stop_reason": None}
            return {
                "id": rid,
                "object": "chat.completion" if chat else "text_completion",
                "created": created,
                "model": server.model_name,
                "choices": [choice],
                "usage": usage(len(tokens)),
                "system_fingerprint": f"dflashctl-{__version__}",
            }

        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        obj = "chat.completion.chunk" if chat else "text_completion"

        def event(payload: dict[str, Any]) -> str:
            base = {"id": rid, "object": obj, "created": created, "model": server.model_name}
            return "data: " + json.dumps({**base, **payload}) + "\n\n"

        async def sse() -> AsyncIterator[str]:
            tokens: list[int] = []
            sent = ""
            if chat:
                yield event(
                    {
                        "choices": [
                            {
                                "index": 0,
                                "delta": {"role": "assistant", "content": ""},
                                "finish_reason": None,
                            }
                        ]
                    }
                )
            try:
                async for chunk, reason in chunks():
                    tokens.extend(chunk)
                    text = tok.decode(tokens)
                    # hold back a trailing partial UTF-8 character until it is complete
                    delta = text[len(sent) :] if not text.endswith("\ufffd") or reason else ""
                    sent += delta
                    if chat:
                        choice = {"index": 0, "delta": {"content": delta}, "finish_reason": reason}
                    else:
                        choice = {"index": 0, "text": delta, "finish_reason": reason}
                    yield event({"choices": [choice]})
            except Exception as exc:
                err = {
                    "message": f"engine error: {exc}",
                    "type": "InternalServerError",
                    "code": 500,
                }
                yield "data: " + json.dumps({"error": err}) + "\n\n"
                return
            if include_usage:
                yield event({"choices": [], "usage": usage(len(tokens))})
            yield "data: [DONE]\n\n"

        return StreamingResponse(sse(), media_type="text/event-stream")

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Any:
        body = await parse(request)
        msgs = messages_of(body)
        prompt_ids = server.engine.tokenizer.apply_chat_template(msgs, add_generation_prompt=True)
        return await respond(body, make_job(prompt_ids, body), chat=True)

    @app.post("/v1/completions")
    async def completions(request: Request) -> Any:
        body = await parse(request)
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1:
            prompt = prompt[0]
        if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
            ids = list(prompt)
        elif isinstance(prompt, str):
            ids = server.engine.tokenizer.encode(prompt)
        else:
            raise BadRequest(
                "prompt must be a string or a list of token ids (one prompt)", "prompt"
            )
        return await respond(body, make_job(ids, body), chat=False)

    @app.on_event("startup")
    async def _stats_loop() -> None:
        interval = STATS_INTERVAL

        async def loop() -> None:
            while True:
                await asyncio.sleep(interval)
                server.stats.log_window(interval)

        asyncio.get_running_loop().create_task(loop())

    return app


START = time.time()
STATS_INTERVAL = 10.0


def setup_logging() -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter(LOG_FORMAT, datefmt="%m-%d %H:%M:%S"))
    log.handlers[:] = [handler]
    log.setLevel(logging.INFO)
    log.propagate = False


def main(argv: list[str] | None = None) -> None:
    global STATS_INTERVAL
    ap = argparse.ArgumentParser(prog="python -m dflashctl.engine.server", description=__doc__)
    ap.add_argument("--model", type=Path, required=True, help="target model directory")
    ap.add_argument("--drafter", type=Path, help="DFlash drafter directory")
    ap.add_argument("--spec", choices=["dflash", "none"], default="dflash")
    ap.add_argument("--num-speculative-tokens", type=int, default=None)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--served-model-name", default=None)
    ap.add_argument("--device", default="auto", help="cpu, cuda or auto")
    ap.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16"])
    ap.add_argument("--max-model-len", type=int, default=2048)
    ap.add_argument("--max-queue", type=int, default=8)
    ap.add_argument("--default-max-tokens", type=int, default=256)
    ap.add_argument("--log-interval", type=float, default=10.0)
    args = ap.parse_args(argv)
    setup_logging()
    STATS_INTERVAL = args.log_interval

    import torch
    import uvicorn

    from dflashctl.dflash_config import read_json_object, resolve
    from dflashctl.engine.generate import Engine
    from dflashctl.errors import DflashError

    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}.get(args.dtype)
    if dtype is None:
        dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    name = args.served_model_name or str(args.model)
    drafter = args.drafter if args.spec == "dflash" else None
    log.info("dflashctl engine version %s, serving model %s", __version__, name)
    log.info("non-default args: %s", {k: str(v) for k, v in vars(args).items() if v is not None})
    log.info("Resolved architecture: Qwen3ForCausalLM")
    try:
        if drafter is not None:
            d_cfg = read_json_object(drafter / "config.json", "drafter config")
            t_cfg = read_json_object(args.model / "config.json", "model config")
            n_layers = (t_cfg.get("text_config") or t_cfg).get("num_hidden_layers")
            r = resolve(d_cfg, num_target_layers=n_layers, runner="v2")
            log.info("Resolved architecture: %s", r.architecture)
            log.info("Loading drafter model...")
            if r.captured_source.startswith("dflash_config") or "eagle" in r.captured_source:
                log.info(
                    "Using auxiliary layers from speculative config: %s",
                    tuple(r.captured_layers or ()),
                )
        engine = Engine.load(
            args.model,
            drafter,
            device=device,
            dtype=dtype,
            max_model_len=args.max_model_len,
            num_speculative_tokens=args.num_speculative_tokens,
        )
    except DflashError as e:
        log.error("%s", e.message)
        log.error(
            "RuntimeError: Engine core initialization failed. See root cause above. "
            "Failed core proc(s): {'EngineCore': 1}"
        )
        raise SystemExit(1) from None
    if engine.drafter is not None:
        log.info(
            "DFlash: block size %d, num_speculative_tokens %d, mask token %d",
            engine.k + 1,
            engine.k,
            engine.drafter.args.mask_token_id,
        )
    log.info("Starting vLLM-compatible server on http://%s:%d", args.host, args.port)
    server = EngineServer(engine, name, args.max_queue, args.default_max_tokens)
    app = create_app(server)
    os.environ.setdefault("NO_COLOR", "1")
    uvicorn.run(app, host=args.host, port=args.port, log_level="info", access_log=False)


if __name__ == "__main__":
    main()
