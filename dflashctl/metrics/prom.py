"""Spec-decode metrics from a Prometheus `/metrics` page (vLLM, the bundled engine, SGLang,
llama.cpp's server).

vLLM exports cumulative counters (`vllm:spec_decode_*_total`), so a window is the difference
between two scrapes: mean length = 1 + Δaccepted/Δdrafts, rate = Δaccepted/Δdraft_tokens,
per-position = Δaccepted_at_pos/Δdrafts, summed over `engine` labels. SGLang exports gauges
(`sglang:spec_accept_length`, `sglang:spec_accept_rate`) that already describe its last
logging interval. Text is parsed with prometheus_client's parser; httpx fetches it. Both are
imported lazily. No printing.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from dflashctl.errors import ServerError
from dflashctl.metrics.window import SpecWindow

V_DRAFTS = "vllm:spec_decode_num_drafts"
V_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
V_ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
V_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"
V_GEN = "vllm:generation_tokens"
V_PREFIX_HITS = "vllm:prefix_cache_hits"
V_PREFIX_QUERIES = "vllm:prefix_cache_queries"
V_RUNNING = "vllm:num_requests_running"
V_WAITING = "vllm:num_requests_waiting"
_SGL_GAUGES = ("sglang:gen_throughput", "sglang:num_running_reqs", "sglang:num_queue_reqs")
# llama.cpp's server (--metrics) since ggml-org/llama.cpp#26389: vLLM's counters under its own
# prefix, the same meaning (drafts = verify steps; positions from 0); no labels at all
LLAMACPP_NAMES = {
    "llamacpp:spec_decode_num_drafts": V_DRAFTS,
    "llamacpp:spec_decode_num_draft_tokens": V_DRAFT_TOKENS,
    "llamacpp:spec_decode_num_accepted_tokens": V_ACCEPTED,
    "llamacpp:spec_decode_num_accepted_tokens_per_pos": V_PER_POS,
    "llamacpp:tokens_predicted": V_GEN,
    "llamacpp:requests_processing": V_RUNNING,
    "llamacpp:requests_deferred": V_WAITING,
}


class PageNotFound(ServerError):
    """HTTP 404 for the metrics page (SGLang without --enable-metrics answers so)."""


@dataclass
class PromReading:
    """One scrape, reduced to the numbers we use (sums over engines / label sets)."""

    at: datetime
    monotonic: float
    has_vllm: bool = False
    has_sglang: bool = False
    engine: str = "vllm"  # whose counters: vllm (and the bundled engine) or llama.cpp
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted: float | None = None
    per_pos: dict[int, float] = field(default_factory=dict)
    gen_tokens: float | None = None
    prefix_hits: float | None = None
    prefix_queries: float | None = None
    running: float | None = None
    waiting: float | None = None
    sgl: dict[str, float] = field(default_factory=dict)


def get_page(url: str, timeout: float, cap: int) -> tuple[int, str, bytes]:
    """(status, content type, body up to `cap` bytes; empty for an error status) of a GET;
    a transport failure or the deadline passing is a `ServerError` (exit 2) with a hint."""
    import httpx

    from dflashctl.http_body import ACCEPT_ENCODING, DeadlinePassed, check_url, read_body, redact

    check_url(url)
    shown = redact(url)  # never print a password from user:secret@
    deadline = time.monotonic() + timeout
    try:
        with httpx.stream(
            "GET", url, timeout=timeout, follow_redirects=True, headers=ACCEPT_ENCODING
        ) as r:
            status, ctype = r.status_code, r.headers.get("content-type", "")
            raw = read_body(r, cap=cap, what=shown, deadline=deadline) if status < 400 else b""
    except (httpx.TimeoutException, DeadlinePassed):
        raise ServerError(
            f"{shown} did not answer within {timeout:g} s",
            "is the server up and not wedged? A loaded server can be slow: raise --timeout",
        ) from None
    except httpx.HTTPError as e:
        raise ServerError(
            f"cannot reach {shown}: {e}",
            "check host and port: vLLM serves /metrics on its API port (8000 by default), "
            "SGLang on 30000 with --enable-metrics",
        ) from None
    return status, ctype, raw


def fetch_text(url: str, timeout: float) -> str:
    """GET the page; every failure is a `ServerError` (exit 2) with a hint."""
    from dflashctl.http_body import MAX_METRICS_PAGE, redact

    status, ctype, raw = get_page(url, timeout, MAX_METRICS_PAGE)
    shown = redact(url)
    if status == 404:
        raise PageNotFound(
            f"{shown} answered HTTP 404",
            "SGLang serves /metrics only with --enable-metrics; vLLM at http://HOST:PORT/metrics",
        )
    if status >= 400:
        raise ServerError(f"{shown} answered HTTP {status}", "check the server's own log")
    text = raw.decode("utf-8", "replace")
    if "html" in ctype.lower() or text.lstrip()[:1] == "<":
        raise ServerError(
            f"{shown} returned HTML, not Prometheus metrics text",
            "point at the engine's /metrics path on its API port, not a dashboard or proxy page",
        )
    return text


def parse_reading(text: str, *, at: datetime, monotonic: float, url: str = "") -> PromReading:
    """Prometheus text → `PromReading`. Label order never matters."""
    from prometheus_client.parser import text_string_to_metric_families

    r = PromReading(at=at, monotonic=monotonic)
    try:
        families = list(text_string_to_metric_families(text))
    except (ValueError, TypeError, IndexError) as e:
        raise ServerError(
            f"{url or 'the page'} is not Prometheus metrics text ({str(e)[:80]})",
            "point at the engine's /metrics endpoint",
        ) from None

    def add(cur: float | None, v: float) -> float:
        return (cur or 0.0) + v

    for fam in families:
        for s in fam.samples:
            name = s.name
            if name.endswith("_created"):
                continue
            base = name.removesuffix("_total")
            if base.startswith("llamacpp:"):
                r.has_vllm, r.engine = True, "llama.cpp"
                if base not in LLAMACPP_NAMES:
                    continue
                base = LLAMACPP_NAMES[base]
            elif base.startswith("vllm:"):
                r.has_vllm = True
            elif base.startswith("sglang:"):
                r.has_sglang = True
                wanted = base.startswith("sglang:spec_") or base in _SGL_GAUGES
                # gauges per tp_rank: keep rank 0 (only rank 0 logs), else the first seen
                if wanted and (base not in r.sgl or s.labels.get("tp_rank") in ("0", None)):
                    r.sgl[base] = float(s.value)
                continue
            v = float(s.value)
            if base == V_DRAFTS:
                r.drafts = add(r.drafts, v)
            elif base == V_DRAFT_TOKENS:
                r.draft_tokens = add(r.draft_tokens, v)
            elif base == V_ACCEPTED:
                r.accepted = add(r.accepted, v)
            elif base == V_PER_POS:
                try:
                    pos = int(s.labels.get("position", ""))
                except ValueError:
                    continue
                r.per_pos[pos] = r.per_pos.get(pos, 0.0) + v
            elif base == V_GEN:
                r.gen_tokens = add(r.gen_tokens, v)
            elif base == V_PREFIX_HITS:
                r.prefix_hits = add(r.prefix_hits, v)
            elif base == V_PREFIX_QUERIES:
                r.prefix_queries = add(r.prefix_queries, v)
            elif base == V_RUNNING:
                r.running = add(r.running, v)
            elif base == V_WAITING:
                r.waiting = add(r.waiting, v)
    return r


def has_vllm_spec(r: PromReading) -> bool:
    return r.drafts is not None and r.accepted is not None


def _vllm_window(
    drafts: float,
    draft_tokens: float | None,
    accepted: float,
    per_pos: dict[int, float],
    engine: str = "vllm",
) -> SpecWindow | None:
    if drafts <= 0:
        return None
    w = SpecWindow(engine=engine, format=f"{engine}-prometheus")
    w.num_drafts = round(drafts)
    w.accepted_tokens = round(accepted)
    w.drafted_tokens = round(draft_tokens) if draft_tokens is not None else None
    w.mean_acceptance_length = 1.0 + accepted / drafts
    if draft_tokens:
        w.draft_acceptance_rate = accepted / draft_tokens
    if per_pos:
        k = max(per_pos) + 1
        w.per_position = [per_pos.get(i, 0.0) / drafts for i in range(k)]
    return w


def window_between(a: PromReading, b: PromReading) -> tuple[SpecWindow | None, bool]:
    """The window between two vLLM scrapes, and whether the counters were reset (restart)."""
    if not (has_vllm_spec(a) and has_vllm_spec(b)):
        return None, False
    assert a.drafts is not None and b.drafts is not None
    assert a.accepted is not None and b.accepted is not None
    reset = b.drafts < a.drafts or b.accepted < a.accepted
    if reset:  # the engine restarted between the scrapes: its counters are the delta
        d, acc, dt, pp = b.drafts, b.accepted, b.draft_tokens, dict(b.per_pos)
    else:
        d = b.drafts - a.drafts
        acc = b.accepted - a.accepted
        dt = (
            b.draft_tokens - a.draft_tokens
            if b.draft_tokens is not None and a.draft_tokens is not None
            else None
        )
        pp = {i: v - a.per_pos.get(i, 0.0) for i, v in b.per_pos.items()}
    w = _vllm_window(d, dt, acc, pp, b.engine)
    if w is None:
        return None, reset
    secs = b.monotonic - a.monotonic
    w.timestamp = b.at.replace(microsecond=0)
    w.timestamp_raw = f"{b.at:%Y-%m-%d %H:%M:%S}"
    if secs > 0:
        w.accepted_throughput = acc / secs
        if dt is not None:
            w.drafted_throughput = dt / secs
        if b.gen_tokens is not None and a.gen_tokens is not None and not reset:
            w.generation_throughput = (b.gen_tokens - a.gen_tokens) / secs
    w.running_reqs = int(b.running) if b.running is not None else None
    w.waiting_reqs = int(b.waiting) if b.waiting is not None else None
    if None not in (a.prefix_hits, a.prefix_queries, b.prefix_hits, b.prefix_queries) and not reset:
        queried = b.prefix_queries - a.prefix_queries  # type: ignore[operator]
        if queried > 0:
            w.prefix_cache_hit_rate = (b.prefix_hits - a.prefix_hits) / queried  # type: ignore[operator]
    return w, reset


def lifetime_window(r: PromReading) -> SpecWindow | None:
    """Totals since the engine started, as one cumulative window."""
    if not has_vllm_spec(r):
        return None
    assert r.drafts is not None and r.accepted is not None
    w = _vllm_window(r.drafts, r.draft_tokens, r.accepted, r.per_pos, r.engine)
    if w is not None:
        w.cumulative = True
        w.format = f"{r.engine}-prometheus-lifetime"
        w.stream = "since start"
        w.timestamp = r.at.replace(microsecond=0)
        w.timestamp_raw = f"{r.at:%Y-%m-%d %H:%M:%S}"
    return w


def sglang_window(r: PromReading) -> SpecWindow | None:
    """SGLang's gauges: the last logging interval as seen by the scheduler."""
    length = r.sgl.get("sglang:spec_accept_length")
    if length is None:
        return None
    w = SpecWindow(engine="sglang", format="sglang-prometheus")
    w.mean_acceptance_length = length
    w.draft_acceptance_rate = r.sgl.get("sglang:spec_accept_rate")
    w.generation_throughput = r.sgl.get("sglang:gen_throughput")
    running = r.sgl.get("sglang:num_running_reqs")
    queued = r.sgl.get("sglang:num_queue_reqs")
    w.running_reqs = int(running) if running is not None else None
    w.waiting_reqs = int(queued) if queued is not None else None
    w.timestamp = r.at.replace(microsecond=0)
    w.timestamp_raw = f"{r.at:%Y-%m-%d %H:%M:%S}"
    return w


def sglang_idle(a: PromReading | None, b: PromReading) -> bool:
    """No verify calls since the previous scrape (or none ever): the gauges are old news."""
    calls = b.sgl.get("sglang:spec_verify_calls")
    if calls is None:
        return False
    if a is None:
        return calls <= 0
    return calls <= a.sgl.get("sglang:spec_verify_calls", 0.0)


SERVER_INFO_PATHS = ("/server_info", "/get_server_info")  # SGLang: the new name, the old one


def fetch_server_info(base: str, timeout: float) -> dict[str, Any] | None:
    """SGLang's server information (its arguments, and per data-parallel rank the scheduler's
    internal state), or None when the server has no such page (not SGLang)."""
    for path in SERVER_INFO_PATHS:
        try:
            status, _ctype, raw = get_page(base.rstrip("/") + path, timeout, 4 << 20)
        except ServerError:  # unreachable, too slow, too large: no answer to fall back on
            return None
        if status == 404:
            continue
        try:
            data = json.loads(raw) if status < 400 else None
        except ValueError:
            return None
        return data if isinstance(data, dict) and "internal_states" in data else None
    return None


def server_info_windows(info: dict[str, Any], at: datetime) -> list[SpecWindow]:
    """One cumulative window per data-parallel rank whose scheduler reports
    `avg_spec_accept_length` (accepted tokens per verify step, the bonus token included,
    since start or the last cache flush)."""
    out = []
    raw = info.get("internal_states")
    states: list[Any] = raw if isinstance(raw, list) else []
    for i, st in enumerate(states):
        v = st.get("avg_spec_accept_length") if isinstance(st, dict) else None
        if not isinstance(v, int | float) or isinstance(v, bool):
            continue
        w = SpecWindow(engine="sglang", format="sglang-server-info")
        w.mean_acceptance_length = float(v)
        w.cumulative = True
        w.stream = f"dp{i}" if len(states) > 1 else "since start"
        w.timestamp = at.replace(microsecond=0)
        w.timestamp_raw = f"{at:%Y-%m-%d %H:%M:%S}"
        g = st.get("last_gen_throughput")
        w.generation_throughput = float(g) if isinstance(g, int | float) else None
        out.append(w)
    return out
