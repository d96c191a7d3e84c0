"""OpenAI-compatible server for the bundled engine, speaking vLLM's dialect of logs and metrics.

    python -m dflashctl.engine.server --model DIR [--drafter DIR | --spec none] [--port 8000]

Endpoints: /v1/chat/completions and /v1/completions (streaming or not), /v1/models, /health,
/version, /metrics (vLLM names, serving_stats.py). Every `--log-interval` seconds it logs vLLM's
`Engine 000:` and `SpecDecoding metrics:` lines in vLLM's prefix format, so `dflashctl metrics`
reads this engine exactly as it reads vLLM. Start-up ends with uvicorn's
`Application startup complete.`, as vLLM's does.

Requests run one at a time (batch one) on a worker thread; at most `--max-queue` wait, and one
more is answered 503 at once. A client that goes away, streaming or not, aborts its request. What
the engine would serve differently than asked is refused with HTTP 400 (protocol.py); a body
over `--max-request-bytes` with 413 before it is read. Parsing and tokenising run off the event
loop, so /health and /metrics answer while a large request is prepared.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse

from dflashctl import __version__
from dflashctl.engine.protocol import (
    BadRequest,
    check_sampling,
    include_usage_of,
    max_tokens_of,
    messages_of,
    prompt_of,
)
from dflashctl.engine.serving_stats import Stats
from dflashctl.errors import DflashError, EngineError

LOG_FORMAT = (
    "(APIServer pid=%(process)d) %(levelname)s %(asctime)s [%(filename)s:%(lineno)d] %(message)s"
)
log = logging.getLogger("dflashctl.engine")
START = time.time()


@dataclass
class Job:
    prompt_ids: list[int]
    max_tokens: int
    cancelled: threading.Event = field(default_factory=threading.Event)
    spec: Any = None  # this request's SpecStats, once it runs


def spec_decode_metrics(job: Job, k: int | None) -> dict[str, Any] | None:
    """This request's acceptance as vLLM reports it per request
    (`metrics.speculative_decoding`, vLLM's --per-request-spec-decode-metrics summary)."""
    st = job.spec
    if st is None or not st.num_drafts:
        return None
    return {
        "mean_acceptance_length": st.mean_acceptance_length,
        "draft_acceptance_rate": (
            st.num_accepted_tokens / st.num_draft_tokens if st.num_draft_tokens else None
        ),
        "num_spec_steps": st.num_drafts,
        "num_accepted_draft_tokens": st.num_accepted_tokens,
        "num_draft_tokens": st.num_draft_tokens,
        "num_spec_tokens": k,
    }


class EngineServer:
    """Owns the engine, the one-sequence lock, the bounded queue and the stats."""

    def __init__(
        self,
        engine: Any,
        model_name: str,
        max_queue: int,
        default_max_tokens: int,
        max_request_bytes: int = 4 << 20,
        step: dict[str, Any] | None = None,
    ):
        self.engine = engine
        # how this engine steps (--draft-vocab, --draft-confidence), on /version: a reference
        # engine (`dflashctl diagnose`) must step the same way to compare acceptance
        self.step = step or {}
        self.max_request_bytes = max_request_bytes
        self.model_name = model_name
        self.max_queue = max_queue
        self.default_max_tokens = default_max_tokens
        self.stats = Stats(model_name, engine.k)
        self.slot = threading.Lock()
        self.queue_lock = threading.Lock()
        self.running = self.waiting = 0

    def job(self, prompt_ids: list[int], body: dict[str, Any]) -> Job:
        """A request that fits the context, or a 400 saying by how much it does not."""
        if not prompt_ids:
            raise BadRequest("the prompt is empty", "prompt")
        asked = max_tokens_of(body)
        limit, n = self.engine.max_model_len, len(prompt_ids)
        # without max_tokens: the default, shortened to what the context leaves (as vLLM)
        max_tokens = asked if asked is not None else min(self.default_max_tokens, limit - n)
        if n >= limit or n + max_tokens > limit:
            want = max(max_tokens, 0)
            raise BadRequest(
                f"This model's maximum context length is {limit} tokens. However, you requested "
                f"{n + want} tokens ({n} in the messages, {want} in the completion). Please "
                "reduce the length of the messages or completion.",
                "messages" if asked is None else "max_tokens",
            )
        return Job(prompt_ids, max_tokens)

    def refuse_long_text(self, text: str, param: str) -> None:
        """A text that cannot fit the context whatever its tokens: refused before tokenising
        it (the tokenizer holds the interpreter while it works)."""
        at_least = self.engine.tokenizer.min_tokens(text)
        limit = self.engine.max_model_len
        if at_least >= limit:
            raise BadRequest(
                f"This model's maximum context length is {limit} tokens. However, the prompt "
                f"alone has at least {at_least} tokens. Please reduce the length of the "
                "messages or completion.",
                param,
            )

    def _queue(self, running: int, waiting: int) -> None:
        with self.queue_lock:
            self.running += running
            self.waiting += waiting
            self.stats.set_queue(self.running, self.waiting)

    def admit(self) -> None:
        with self.queue_lock:
            if self.running + self.waiting >= 1 + self.max_queue:  # one runs, the rest wait
                raise BadRequest("the server is busy: its request queue is full", status=503)
            self.waiting += 1
            self.stats.set_queue(self.running, self.waiting)

    def run(self, job: Job) -> Iterator[tuple[list[int], str | None]]:
        """Generate under the one-sequence lock; yield (new tokens, finish reason or None)."""
        with self.slot:
            self._queue(+1, -1)
            try:
                yield from self._generate(job)
            finally:
                self._queue(-1, 0)

    def _generate(self, job: Job) -> Iterator[tuple[list[int], str | None]]:
        from dflashctl.engine.generate import SpecStats

        if job.cancelled.is_set():  # its client left while it waited
            self.stats.finished("abort")
            yield [], "abort"
            return
        eos = self.engine.eos_ids
        stats, seen = SpecStats(), SpecStats()
        job.spec = stats
        produced = 0
        self.stats.observe_tokens(len(job.prompt_ids), 0)
        steps = self.engine.stream(job.prompt_ids, job.max_tokens, stats)
        try:
            for chunk in steps:
                self.stats.observe_drafts(stats.since(seen))
                seen = stats.copy()
                self.stats.observe_tokens(0, len(chunk))
                produced += len(chunk)
                reason = None
                if chunk and chunk[-1] in eos:
                    reason = "stop"
                elif produced >= job.max_tokens:
                    reason = "length"
                elif job.cancelled.is_set():
                    reason = "abort"
                if reason:
                    self.stats.finished(reason)
                yield chunk, reason
                if reason:
                    return
        finally:
            steps.close()


def create_app(server: EngineServer, stats_interval: float = 10.0) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        task = asyncio.get_running_loop().create_task(stats_loop(server.stats, stats_interval))
        yield
        task.cancel()

    app = FastAPI(title="dflashctl engine", version=__version__, lifespan=lifespan)

    def error(status: int, message: str, param: str | None = None) -> JSONResponse:
        kind = {400: "BadRequestError", 404: "NotFoundError", 413: "RequestTooLargeError",
                503: "ServiceUnavailableError"}  # fmt: skip
        err = {"message": message, "type": kind.get(status, "InternalServerError")}
        return JSONResponse({"error": {**err, "param": param, "code": status}}, status)

    @app.exception_handler(BadRequest)
    async def _bad_request(_: Request, exc: BadRequest) -> JSONResponse:
        return error(exc.status, exc.message, exc.param)

    @app.get("/health")
    async def health() -> PlainTextResponse:
        return PlainTextResponse("")

    @app.get("/version")
    async def version() -> dict[str, Any]:
        return {"version": f"dflashctl-{__version__}", "dflashctl_step": server.step}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        card = {"id": server.model_name, "object": "model", "created": int(START)}
        card |= {"owned_by": "dflashctl", "root": server.model_name}
        return {"object": "list", "data": [card | {"max_model_len": server.engine.max_model_len}]}

    @app.get("/metrics")
    async def metrics() -> PlainTextResponse:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        page = generate_latest(server.stats.registry).decode()
        return PlainTextResponse(page, media_type=CONTENT_TYPE_LATEST)

    async def parse(request: Request) -> dict[str, Any]:
        limit = server.max_request_bytes
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise BadRequest(
                f"the request body ({declared} bytes) exceeds {limit} bytes", status=413
            )
        raw = bytearray()
        async for part in request.stream():
            raw += part
            if len(raw) > limit:
                raise BadRequest(f"the request body exceeds {limit} bytes", status=413)
        body = await asyncio.to_thread(decode_json, bytes(raw))
        if not isinstance(body, dict):
            raise BadRequest("request body must be a JSON object")
        model = body.get("model")
        if model is not None and model != server.model_name:
            raise BadRequest(f"The model `{model}` does not exist.", "model", status=404)
        check_sampling(body)
        return body

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Any:
        body = await parse(request)
        msgs = messages_of(body)
        server.refuse_long_text("".join(m["content"] for m in msgs), "messages")
        try:  # off the event loop: a long prompt must not stall /health
            prompt_ids = await asyncio.to_thread(server.engine.tokenizer.apply_chat_template, msgs)
        except EngineError as e:  # the template refused these messages
            raise BadRequest(e.message, "messages") from None
        return await respond(server, body, server.job(prompt_ids, body), request, chat=True)

    @app.post("/v1/completions")
    async def completions(request: Request) -> Any:
        body = await parse(request)
        prompt = prompt_of(body)
        tok = server.engine.tokenizer
        if isinstance(prompt, str):
            server.refuse_long_text(prompt, "prompt")
        ids = await asyncio.to_thread(tok.encode, prompt) if isinstance(prompt, str) else prompt
        if any(t >= server.engine.target.args.vocab_size for t in ids):
            raise BadRequest("a prompt token id is outside the vocabulary", "prompt")
        return await respond(server, body, server.job(ids, body), request, chat=False)

    return app


def decode_json(raw: bytes) -> Any:
    """The body as JSON; what Python's parser cannot take (nesting too deep, integers of
    thousands of digits, bad UTF-8) is a 400, not a 500."""
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise BadRequest("request body is not valid JSON") from None
    except RecursionError:
        raise BadRequest("request body is nested too deeply") from None
    except ValueError as e:  # e.g. "Exceeds the limit (4300 digits) for integer string"
        raise BadRequest(f"request body is not usable JSON: {e}") from None


async def respond(
    server: EngineServer, body: dict[str, Any], job: Job, request: Request, chat: bool
) -> Any:
    """Run `job` on a worker thread; answer with one JSON body or an SSE stream."""
    include_usage = include_usage_of(body)
    server.admit()
    rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
    created = int(time.time())
    tok = server.engine.tokenizer
    queue: asyncio.Queue[Any] = asyncio.Queue()
    loop = asyncio.get_running_loop()
    t0 = time.perf_counter()

    def work() -> None:
        try:
            for i, item in enumerate(server.run(job)):
                if i == 0:
                    server.stats.ttft.observe(time.perf_counter() - t0)
                loop.call_soon_threadsafe(queue.put_nowait, item)
        except Exception as exc:  # an engine failure: report it, never hang the client
            log.exception("request %s failed", rid)
            loop.call_soon_threadsafe(queue.put_nowait, exc)
        loop.call_soon_threadsafe(queue.put_nowait, None)

    threading.Thread(target=work, name=rid, daemon=True).start()

    async def chunks() -> AsyncIterator[tuple[list[int], str | None]]:
        while (item := await queue.get()) is not None:
            if isinstance(item, Exception):
                raise item
            yield item

    def usage(n: int) -> dict[str, int]:
        p = len(job.prompt_ids)
        return {"prompt_tokens": p, "completion_tokens": n, "total_tokens": p + n}

    def per_request() -> dict[str, Any]:
        m = spec_decode_metrics(job, getattr(server.engine, "k", None))
        return {"metrics": {"speculative_decoding": m}} if m is not None else {}

    if not body.get("stream"):
        tokens: list[int] = []
        finish = "length"
        watcher = asyncio.create_task(cancel_when_gone(request, job))
        try:
            async for chunk, reason in chunks():
                tokens.extend(chunk)
                finish = reason or finish
        except Exception as exc:
            return JSONResponse(
                {"error": {"message": f"engine error: {exc}", "type": "InternalServerError",
                           "param": None, "code": 500}},
                500,
            )  # fmt: skip
        finally:
            watcher.cancel()
        text = tok.decode(tokens)
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish, "stop_reason": None}
        if chat:
            choice["message"] = {"role": "assistant", "content": text, "reasoning": None}
        else:
            choice["text"] = text
        return {
            "id": rid,
            "object": "chat.completion" if chat else "text_completion",
            "created": created,
            "model": server.model_name,
            "choices": [choice],
            "usage": usage(len(tokens)),
            "system_fingerprint": f"dflashctl-{__version__}",
            **per_request(),
        }

    obj = "chat.completion.chunk" if chat else "text_completion"

    def event(payload: dict[str, Any]) -> str:
        base = {"id": rid, "object": obj, "created": created, "model": server.model_name}
        return "data: " + json.dumps({**base, **payload}) + "\n\n"

    def choice_of(delta: str, reason: str | None) -> dict[str, Any]:
        if chat:
            return {"index": 0, "delta": {"content": delta}, "finish_reason": reason}
        return {"index": 0, "text": delta, "finish_reason": reason}

    async def sse() -> AsyncIterator[str]:
        tokens: list[int] = []
        sent = ""
        try:
            if chat:
                role = {"index": 0, "delta": {"role": "assistant", "content": ""}}
                yield event({"choices": [role | {"finish_reason": None}]})
            async for chunk, reason in chunks():
                tokens.extend(chunk)
                text = tok.decode(tokens)
                # hold back a trailing partial UTF-8 character until it is complete
                if text.endswith("\ufffd") and not reason:
                    continue
                delta, sent = text[len(sent) :], text
                if delta or reason:
                    yield event({"choices": [choice_of(delta, reason)]})
            if include_usage:  # vLLM sends its per-request metrics on this chunk only
                yield event({"choices": [], "usage": usage(len(tokens)), **per_request()})
            yield "data: [DONE]\n\n"
        except Exception as exc:
            err = {"message": f"engine error: {exc}", "type": "InternalServerError", "code": 500}
            yield "data: " + json.dumps({"error": err}) + "\n\n"
        finally:  # the client went away (or we are done): stop generating for it
            job.cancelled.set()

    return StreamingResponse(sse(), media_type="text/event-stream")


async def cancel_when_gone(request: Request, job: Job, every: float = 0.25) -> None:
    """A non-streaming client that disconnects aborts its request (and frees the slot)."""
    while not job.cancelled.is_set():
        if await request.is_disconnected():
            job.cancelled.set()
            return
        await asyncio.sleep(every)


async def stats_loop(stats: Stats, interval: float) -> None:
    """vLLM's interval logging: every `interval` s, over the time that really elapsed."""
    last = time.monotonic()
    while True:
        await asyncio.sleep(interval)
        now = time.monotonic()
        stats.log_window(now - last)
        last = now


def setup_logging() -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter(LOG_FORMAT, datefmt="%m-%d %H:%M:%S"))
    log.handlers[:] = [handler]
    log.setLevel(logging.INFO)
    log.propagate = False


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m dflashctl.engine.server", description=__doc__)
    ap.add_argument("--model", type=Path, required=True, help="target model directory")
    ap.add_argument("--drafter", type=Path, help="DFlash drafter directory")
    ap.add_argument(
        "--spec",
        choices=["dflash", "none"],
        default=None,
        help="dflash (the default with --drafter) or none: plain greedy decoding",
    )
    ap.add_argument("--num-speculative-tokens", type=int, default=None)
    ap.add_argument(
        "--draft-confidence",
        type=float,
        default=0.0,
        help="verify only the proposals before the first the drafter gives a probability "
        "below this (0: all K); the text is the same, a CPU step is cheaper",
    )
    ap.add_argument(
        "--draft-vocab",
        default=None,
        help="a reduced draft vocabulary kept beside the drafter: a safetensors file with a d2t "
        "map [N] (the drafter proposes only those N target tokens; its lm_head costs N/V); "
        "none: the whole vocabulary",
    )
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--served-model-name", default=None)
    ap.add_argument("--device", default="auto", help="cpu, cuda or auto")
    ap.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16"])
    ap.add_argument(
        "--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)"
    )
    ap.add_argument("--max-model-len", type=int, default=2048)
    ap.add_argument("--max-queue", type=int, default=8, help="requests that may wait")
    ap.add_argument("--default-max-tokens", type=int, default=256)
    ap.add_argument(
        "--max-request-bytes", type=int, default=4 << 20, help="larger bodies get 413 (4 MiB)"
    )
    ap.add_argument("--log-interval", type=float, default=10.0, help="stats log lines (s)")
    args = ap.parse_args(argv)
    if args.spec == "dflash" and args.drafter is None:
        ap.error("--spec dflash needs --drafter DIR")
    if args.spec == "none":
        args.drafter = None
    args.non_default = {k: v for k, v in vars(args).items() if v != ap.get_default(k)}
    return args


def load_engine(args: argparse.Namespace) -> Any:
    """The engine, with vLLM's start-up lines; a config vLLM would refuse ends start-up."""
    import torch

    from dflashctl.drafter.config import read_json_object, resolve
    from dflashctl.engine.generate import Engine

    if args.threads:
        torch.set_num_threads(args.threads)
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}.get(args.dtype)
    if dtype is None:
        dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    t_cfg = read_json_object(args.model / "config.json", "model config")
    archs = t_cfg.get("architectures")
    log.info("Resolved architecture: %s", archs[0] if isinstance(archs, list) and archs else "?")
    if args.drafter is not None:
        d_cfg = read_json_object(args.drafter / "config.json", "drafter config")
        n_layers = (t_cfg.get("text_config") or t_cfg).get("num_hidden_layers")
        r = resolve(d_cfg, num_target_layers=n_layers, runner="v2")
        log.info("Resolved architecture: %s", r.architecture)
        if r.captured_source.startswith("dflash_config") or "eagle" in r.captured_source:
            aux = tuple(r.captured_layers or ())
            log.info("Using auxiliary layers from speculative config: %s", aux)
    vocab = None if args.draft_vocab in (None, "none") else Path(args.draft_vocab)
    engine = Engine.load(
        args.model,
        args.drafter,
        device=device,
        dtype=dtype,
        max_model_len=args.max_model_len,
        num_speculative_tokens=args.num_speculative_tokens,
        draft_vocab=vocab if device == "cpu" else None,
    )
    if vocab is not None and device != "cpu":  # the CUDA-graph step scores the whole vocabulary
        log.info("Draft vocabulary %s: not used on %s (a CPU step)", vocab, device)
    if engine.draft_ids is not None:
        log.info("Draft vocabulary: %d tokens", len(engine.draft_ids))
    if not 0.0 <= args.draft_confidence < 1.0:
        raise SystemExit("--draft-confidence must be in [0, 1)")
    engine.draft_confidence = args.draft_confidence
    log.info("Target implementation: %s", engine.target_path)
    log.info("Using max model len %d", engine.max_model_len)
    spec = "None"
    if engine.drafter is not None:
        k, drafter = engine.k, args.drafter
        spec = f"SpeculativeConfig(method='dflash', model='{drafter}', num_spec_tokens={k})"
        log.info(
            "DFlash: block size %d, num_speculative_tokens %d, mask token %d",
            engine.k + 1,
            engine.k,
            engine.drafter.args.mask_token_id,
        )
    # vLLM's key=value form, so log readers find whether (and how) speculation is on
    log.info(
        "Initializing the dflashctl engine with config: model='%s', dtype=%s, device=%s, "
        "max_seq_len=%d, speculative_config=%s",
        args.model,
        str(dtype).removeprefix("torch."),
        device,
        engine.max_model_len,
        spec,
    )
    return engine


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    setup_logging()
    import uvicorn

    name = args.served_model_name or str(args.model)
    log.info("dflashctl engine version %s, serving model %s", __version__, name)
    log.info("non-default args: %s", {k: str(v) for k, v in args.non_default.items()})
    try:
        engine = load_engine(args)
    except DflashError as e:
        log.error("%s", e.message)
        log.error(
            "RuntimeError: Engine core initialization failed. See root cause above. "
            "Failed core proc(s): {'EngineCore': 1}"
        )
        raise SystemExit(1) from None
    log.info("Starting vLLM-compatible server on http://%s:%d", args.host, args.port)
    used = engine.draft_ids is not None and args.draft_vocab not in (None, "none")
    step = {
        "draft_vocab": str(Path(args.draft_vocab).resolve()) if used else None,
        "draft_confidence": engine.draft_confidence,
    }
    server = EngineServer(
        engine, name, args.max_queue, args.default_max_tokens, args.max_request_bytes, step
    )
    os.environ.setdefault("NO_COLOR", "1")
    uvicorn.run(
        create_app(server, args.log_interval),
        host=args.host,
        port=args.port,
        log_level="info",
        access_log=False,
        timeout_graceful_shutdown=5,
    )


if __name__ == "__main__":
    main()
