"""How `diagnose` measures one side: greedy answers and the drafts of exactly those requests.

- a server (production, or the reference on a host): streamed chat at temperature 0
  (`server.client`); drafts per request from `/metrics` counter deltas
  (`metrics.spec_probe.PromProbe`),
  else from the lines its log gains over all requests (`LogProbe`);
- the bundled engine in this process (`engine.generate.Engine`): per-prompt tokens and
  `SpecStats`;
- the bundled engine on a host: launched by `serve.launch` on the host's paths, bound to
  127.0.0.1 there and reached through an SSH forward (`hosts/tunnel.py`), stopped by pid afterwards.

Returns data into `Side`s; raises typed errors; never prints.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from dflashctl.commands.diagnose.facts import LogFacts
from dflashctl.errors import DflashError, EngineError, ServerError
from dflashctl.fixtures import Prompt
from dflashctl.metrics.window import SpecWindow, aggregate

Progress = Callable[[str], None]

SPECULATING, NOT_CONFIGURED, NO_DRAFTS, UNREADABLE, NO_LINES = (
    "speculating",
    "not_configured",
    "no_drafts",
    "unreadable",
    "no_lines",
)


# ---- what each side measured ----------------------------------------------------------------


@dataclass
class Answer:
    """One prompt's greedy answer on one side."""

    prompt_id: str
    text: str = ""
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    finish_reason: str | None = None
    error: str | None = None
    token_ids: list[int] | None = None  # the in-process reference only
    window: SpecWindow | None = None  # this request's drafts (None: not measured per request)
    seconds: float | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_json(self) -> dict[str, Any]:
        w = self.window
        return {
            "prompt_id": self.prompt_id,
            "ok": self.ok,
            "error": self.error,
            "text": self.text,
            "completion_tokens": self.completion_tokens,
            "prompt_tokens": self.prompt_tokens,
            "finish_reason": self.finish_reason,
            "mean_acceptance_length": rounded(w.mean_acceptance_length, 4) if w else None,
            "num_drafts": w.num_drafts if w else None,
            "seconds": rounded(self.seconds, 3),
        }


@dataclass
class Side:
    """Production or reference: where, which engine, what it answered and accepted."""

    role: str  # production | reference
    where: str
    engine: str | None = None
    version: str | None = None
    build: str | None = None
    model: str | None = None  # the served model name
    source: str = ""  # how acceptance was measured
    state: str = SPECULATING
    answers: list[Answer] = field(default_factory=list)
    window: SpecWindow | None = None  # all prompts pooled
    num_speculative_tokens: int | None = None
    dtype: str | None = None
    log: LogFacts | None = None
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    step: BundledStep | None = None  # the bundled engine's step, as its /version says

    def to_json(self) -> dict[str, Any]:
        w = self.window
        return {
            "where": self.where,
            "engine": self.engine,
            "version": self.version,
            "build": self.build,
            "model": self.model,
            "source": self.source,
            "state": self.state,
            "num_speculative_tokens": self.num_speculative_tokens,
            "dtype": self.dtype,
            "mean_acceptance_length": rounded(w.mean_acceptance_length, 4) if w else None,
            "per_position": [round(p, 4) for p in w.per_position] if w and w.per_position else None,
            "draft_acceptance_rate": rounded(w.draft_acceptance_rate, 4) if w else None,
            "num_drafts": w.num_drafts if w else None,
            "accepted_tokens": w.accepted_tokens if w else None,
            "drafted_tokens": w.drafted_tokens if w else None,
            "requests": [a.to_json() for a in self.answers],
            "log": self.log.to_json() if self.log else None,
            "notes": self.notes,
            "seconds": round(self.seconds, 2),
        }


def rounded(x: float | None, nd: int) -> float | None:
    return None if x is None or x != x else round(x, nd)


# ---- measuring a server ---------------------------------------------------------------------


def spec_window(stats: Any, k: int = 0) -> SpecWindow | None:
    """`engine.generate.SpecStats` → a window with vLLM's definitions, `k` positions (a step
    that verifies only a draft's confident prefix never counts the positions past it)."""
    if not stats.num_drafts:
        return None
    w = SpecWindow(engine="local", format="in-process")
    w.num_drafts = stats.num_drafts
    w.accepted_tokens = stats.num_accepted_tokens
    w.drafted_tokens = stats.num_draft_tokens
    w.mean_acceptance_length = stats.mean_acceptance_length
    if stats.num_draft_tokens:
        w.draft_acceptance_rate = stats.num_accepted_tokens / stats.num_draft_tokens
    counts = stats.accepted_per_pos + [0] * (k - len(stats.accepted_per_pos))
    w.per_position = [n / stats.num_drafts for n in counts]
    return w


def pool(windows: list[SpecWindow | None]) -> SpecWindow | None:
    ws = [w for w in windows if w is not None]
    if not ws:
        return None
    return aggregate(ws) if len(ws) > 1 else ws[0]


def _server_identity(client: Any, base: str) -> tuple[str | None, str | None, BundledStep | None]:
    """(engine, version, step) from GET /version: the bundled engine answers `dflashctl-X` and
    its step, vLLM its version; anything else (or a body over 64 KiB) is not known."""
    from dflashctl.server.client import get_version

    data = get_version(client, base) or {}
    v = data.get("version")
    if not isinstance(v, str):
        return None, None, None
    if v.startswith("dflashctl-"):
        return "local", v.removeprefix("dflashctl-"), BundledStep.from_server(data)
    return None, v, None


def measure_server(
    side: Side,
    base: str,
    prompts: list[Prompt],
    *,
    max_tokens: int,
    timeout: float,
    log: Any = None,
    log_where: str = "",
    log_interval: float = 10.0,
    say: Progress,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Send each prompt (streamed, temperature 0) and read the drafts of exactly that request
    from /metrics (counter deltas); without usable /metrics, the log lines over all requests."""
    from dflashctl.metrics import prom
    from dflashctl.metrics.spec_probe import LogProbe, PromProbe
    from dflashctl.metrics.thresholds import Thresholds
    from dflashctl.server.client import list_models, make_client, stream_chat

    th = Thresholds(url=base)
    murl = f"{base}/metrics"
    t0 = time.monotonic()
    with make_client(timeout) as client:
        ids, err, hint = list_models(client, base)
        if err:
            raise ServerError(f"{side.role} server {base}: {err}", hint)
        side.model = ids[0]
        engine, version, side.step = _server_identity(client, base)
        use_prom = False
        try:
            reading = prom.parse_reading(
                prom.fetch_text(murl, min(timeout, 10.0)),
                at=datetime.now(),
                monotonic=time.monotonic(),
                url=murl,
            )
            use_prom = reading.has_vllm or reading.has_sglang
            if reading.has_sglang and engine is None:
                engine = "sglang"
            if reading.has_vllm and engine is None:
                engine = "vllm"
        except ServerError as e:
            side.notes.append(f"/metrics unusable: {e.message}")
        side.engine, side.version = engine, version
        log_probe = None
        if not use_prom:
            if log is None:
                side.state = UNREADABLE
                side.notes.append(
                    "no spec-decode counters at /metrics and no --log: acceptance not measured"
                )
            else:
                log_probe = LogProbe(log, log_where, interval=log_interval, th=th, sleep=sleep)
                log_probe.start()
        side.source = "prometheus" if use_prom else ("log" if log_probe else "none")
        states: list[str] = []
        for p in prompts:
            say(f"{side.role}: {p.id} (up to {max_tokens} tokens, temperature 0)")
            probe = None
            if use_prom:
                probe = PromProbe(
                    murl, timeout=min(timeout, 10.0), explicit=True, th=th, sleep=sleep
                )
                probe.start()
            c = stream_chat(client, base, side.model, p.id, p.text, max_tokens=max_tokens,
                            timeout=timeout)  # fmt: skip
            a = Answer(
                p.id,
                c.text,
                c.completion_tokens,
                c.prompt_tokens,
                c.finish_reason,
                c.error,
                seconds=c.total_s,
            )
            side.answers.append(a)
            if c.ok and probe is not None:
                res = probe.finish(c.completion_tokens)
                a.window = res.window
                states.append(res.state)
                side.notes += [n for n in res.notes if n not in side.notes]
        if log_probe is not None:
            log_probe.mark_end()
            if any(a.ok for a in side.answers):
                res = log_probe.finish()
                side.window, side.state = res.window, res.state
                side.notes += res.notes
                if res.message:
                    side.notes.append(res.message)
        elif use_prom:
            side.window = pool([a.window for a in side.answers])
            if side.window is not None:
                side.state = SPECULATING
            elif states and all(s == NOT_CONFIGURED for s in states):
                side.state = NOT_CONFIGURED
            elif states:
                side.state = NO_DRAFTS
            else:
                side.state = UNREADABLE
    side.seconds = time.monotonic() - t0
    if side.window is not None and side.window.per_position:
        side.num_speculative_tokens = len(side.window.per_position)


@dataclass(frozen=True)
class BundledStep:
    """How the bundled engine steps, when production is one `serve` launched: a reduced draft
    vocabulary file and the confidence below which proposals go unverified (`--draft-vocab`,
    `--draft-confidence`). The reference must step the same way, or it verifies proposals
    production never sends to the target and reads the difference as an engine fault."""

    draft_vocab: str | None = None
    draft_confidence: float = 0.0
    source: str = field(default="the deployment's command", compare=False)

    @classmethod
    def from_command(cls, cmd: list[str]) -> BundledStep:
        flags: dict[str, str] = {}
        for i, arg in enumerate(cmd):
            name, eq, value = arg.partition("=")
            if name in ("--draft-vocab", "--draft-confidence"):
                if not eq:
                    value = cmd[i + 1] if i + 1 < len(cmd) else ""
                flags[name] = value  # the last one given wins, as argparse has it
        vocab = flags.get("--draft-vocab")
        try:
            confidence = float(flags.get("--draft-confidence", "0"))
        except ValueError:
            confidence = 0.0
        return cls(None if vocab in (None, "", "none") else vocab, confidence)

    @classmethod
    def from_server(cls, version: dict[str, Any]) -> BundledStep | None:
        """What the bundled engine's /version says of its step (None from an older one)."""
        step = version.get("dflashctl_step")
        if not isinstance(step, dict):
            return None
        vocab, confidence = step.get("draft_vocab"), step.get("draft_confidence")
        if not isinstance(confidence, int | float) or isinstance(confidence, bool):
            confidence = 0.0
        return cls(
            vocab if isinstance(vocab, str) and vocab else None,
            float(confidence),
            "the production server's /version",
        )

    @property
    def args(self) -> list[str]:
        out = ["--draft-vocab", self.draft_vocab] if self.draft_vocab else []
        return out + (["--draft-confidence", f"{self.draft_confidence:g}"] if self else [])

    def __bool__(self) -> bool:
        return self.draft_vocab is not None or self.draft_confidence > 0.0

    def note(self) -> str:
        how = []
        if self.draft_vocab:
            how.append("proposals from the reduced draft vocabulary")
        if self.draft_confidence > 0:
            how.append("only those the drafter is sure of verified")
        return (
            "the reference steps as production does: " + " ".join(self.args) + f" (from "
            f"{self.source}; {', '.join(how)})"
        )


def measure_in_process(
    side: Side,
    model: Path,
    drafter: Path,
    prompts: list[Prompt],
    *,
    max_tokens: int,
    k: int | None,
    dtype: str,
    say: Progress,
    step: BundledStep = BundledStep(),
) -> Callable[[list[int]], str]:
    """The bundled engine in this process (float32 on CPU unless --dtype): per-prompt greedy
    tokens and drafts. Returns the tokenizer's decode (for token positions)."""
    import torch

    from dflashctl.engine.generate import Engine, SpecStats

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if dtype == "auto":
        dtype = "bfloat16" if device == "cuda" else "float32"
    t0 = time.monotonic()
    say(f"reference: loading the bundled engine ({device}, {dtype}, K={k or 'block size − 1'})")
    from dflashctl.engine.tokenizer import ChatTokenizer

    tok = ChatTokenizer(model)
    chats = [tok.apply_chat_template([{"role": "user", "content": p.text}]) for p in prompts]
    # the static caches (and each step's attention) span max_model_len: keep it to what is used
    need = max(len(ids) for ids in chats) + max_tokens + 16
    engine = Engine.load(
        model,
        drafter,
        device=device,
        dtype=getattr(torch, dtype),
        max_model_len=need,
        num_speculative_tokens=k,
        draft_vocab=Path(step.draft_vocab) if step.draft_vocab and device == "cpu" else None,
    )
    engine.draft_confidence = step.draft_confidence
    side.engine, side.dtype = "local", dtype
    side.num_speculative_tokens = engine.k
    side.notes.append(f"the reference runs the target on the {engine.target_path} path")
    if step:
        side.notes.append(step.note())
    from dflashctl import __version__

    side.version = __version__
    side.source = "in-process SpecStats"
    for p, ids in zip(prompts, chats, strict=True):
        say(f"reference: {p.id}")
        t1 = time.monotonic()
        stats = SpecStats()
        tokens = [t for chunk in engine.stream(ids, max_tokens, stats) for t in chunk]
        finish = "stop" if tokens and tokens[-1] in engine.eos_ids else "length"
        side.answers.append(
            Answer(
                p.id,
                engine.tokenizer.decode(tokens),
                len(tokens),
                len(ids),
                finish,
                token_ids=tokens,
                window=spec_window(stats, engine.k),
                seconds=time.monotonic() - t1,
            )
        )
    side.window = pool([a.window for a in side.answers])
    side.state = SPECULATING if side.window is not None else NO_DRAFTS
    side.seconds = time.monotonic() - t0
    return engine.tokenizer.decode


def _free_remote_port(host: Any) -> int:
    rng = random.Random()
    for _ in range(20):
        port = rng.randint(20000, 60000)
        if host.port_holder(port) is None:
            return port
    raise DflashError(f"found no free port on {host.label} for the reference engine")


def measure_on_host(
    side: Side,
    host: Any,
    prompts: list[Prompt],
    production: Side,
    *,
    model: str,
    drafter: str,
    host_spec: str | None,
    k: int | None,
    dtype: str,
    python: str | None,
    max_tokens: int,
    timeout: float,
    ready_timeout: float,
    say: Progress,
    step: BundledStep = BundledStep(),
) -> None:
    """The bundled engine launched on `host` (serve's launch, on the host's paths), bound to
    127.0.0.1 there and reached through an SSH forward; stopped by pid afterwards."""
    from dflashctl.hosts.tunnel import Tunnel
    from dflashctl.server import deployments as state
    from dflashctl.server.control import stop_on_host
    from dflashctl.server.launch import Event, launch
    from dflashctl.server.plan import ServeOptions, plan

    port = _free_remote_port(host)
    name = f"diagnose-ref-{port}"
    longest = max((a.prompt_tokens or 0 for a in production.answers), default=0)
    need = max(longest + max_tokens + 64, 512)
    extra = ["--log-interval", "1", "--max-model-len", str(need)]
    if dtype != "auto":
        extra += ["--dtype", dtype]
    # production's step, or verify everything (serve adds the demo pair's cheaper step itself)
    extra += step.args or ["--draft-vocab", "none", "--draft-confidence", "0"]
    so = ServeOptions(
        engine="local",
        model=model,
        drafter=drafter,
        host=host_spec,
        port=port,
        bind="127.0.0.1",
        name=name,
        num_speculative_tokens=k,
        python=python,
        extra_args=extra,
        verify=False,  # diagnose checks the config itself, and judges rather than refuses
        force=True,
        ready_timeout=ready_timeout,
    )

    def on_event(ev: Event) -> None:
        if ev.kind in ("step", "note"):
            say(f"reference on {host.label}: {ev.message}")

    res = launch(plan(so, host), host, on_event=on_event)
    if not res.ok:
        raise EngineError(
            f"the reference engine did not start on {host.label}: {res.reason}",
            (res.hint or "")
            + (f" (log {res.log})" if res.log else "")
            + ("; " + " | ".join(res.lines[-3:]) if res.lines else ""),
        )
    try:
        with Tunnel(lambda: host.transport, "127.0.0.1", port) as local_port:
            measure_server(
                side,
                f"http://127.0.0.1:{local_port}",
                prompts,
                max_tokens=max_tokens,
                timeout=timeout,
                say=say,
            )
    finally:
        dep = state.load(name)
        if dep is not None:
            try:
                stop_on_host(host, dep, grace=5.0)
            finally:
                state.remove(name)
    side.where = f"{host.label}: bundled engine on 127.0.0.1:{port} (through an SSH forward)"
    if step:
        side.notes.append(step.note())
    side.dtype = dtype if dtype != "auto" else "auto (float32 on CPU, bf16 on GPU)"
