"""`smoke --prefix-cache-probe`: does acceptance hold when the prompt's prefix is cached?

The field's most common silent failure in 2026 (vllm#47930, z-lab/dflash#165): with prefix
caching on, a DFlash/DSpark/DFlash2 drafter's context is written only for the tokens the target
ran, so a request whose prefix came from the cache drafts from stale entries — coherent text,
acceptance falling toward 1.0 as the cached prefix grows. The probe sends one long prompt twice
at temperature 0: the first computes the prefix (cold), the second should find it cached. A
lossless engine gives the same text both times, so the drafter sees the same context both
times unless the cache broke it: the acceptance of the two requests is compared, each read from
the engine's counters (`/metrics`) around it, beside the prefix-cache hit rate of the second.

No printing: the result and its check row.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dflashctl.metrics.causes import PREFIX_DROP
from dflashctl.metrics.spec_probe import SPECULATING, PromProbe, SpecResult
from dflashctl.report import FAIL, OK, SKIP, Row
from dflashctl.server.client import stream_chat

if TYPE_CHECKING:
    import httpx

    from dflashctl.metrics.thresholds import Thresholds

MIN_HIT_RATE = 0.3  # the second request must find at least this much of its prompt cached
MIN_DRAFTS = 10  # drafts per request before two acceptance figures are compared
DOCUMENT_CHARS = 3000  # ≈ 800-1,000 tokens: long enough to fill several cache blocks
SHORT_DOCUMENT_CHARS = 600  # for a server whose context refuses the long one (HTTP 400)
QUESTION = "Explain in a few sentences what this Python module does and how its parts fit."


def probe_prompt(chars: int = DOCUMENT_CHARS) -> str:
    """A long prompt that ships with dflashctl: the start of its engine's model module."""
    source = Path(__file__).resolve().parents[2] / "engine" / "model.py"
    code = source.read_text("utf-8")[:chars]
    return f"```python\n{code}\n```\n\n{QUESTION}"


@dataclass
class PrefixProbe:
    cold: SpecResult | None = None
    cached: SpecResult | None = None
    same_text: bool | None = None
    error: str | None = None
    refused: bool = False  # the server refused the prompt (HTTP 400: longer than its context)

    def tau(self, which: str) -> float | None:
        r = self.cold if which == "cold" else self.cached
        w = r.window if r is not None else None
        return w.mean_acceptance_length if w is not None else None

    def drafts(self, which: str) -> int | None:
        r = self.cold if which == "cold" else self.cached
        w = r.window if r is not None else None
        return w.num_drafts if w is not None else None

    @property
    def hit_rate(self) -> float | None:
        w = self.cached.window if self.cached is not None else None
        return w.prefix_cache_hit_rate if w is not None else None

    def to_json(self) -> dict[str, Any]:
        return {
            "cold_mean_acceptance_length": self.tau("cold"),
            "cached_mean_acceptance_length": self.tau("cached"),
            "cold_drafts": self.drafts("cold"),
            "cached_drafts": self.drafts("cached"),
            "cached_prefix_hit_rate": self.hit_rate,
            "same_text": self.same_text,
            "error": self.error,
        }


def run_prefix_probe(
    client: httpx.Client,
    url: str,
    model: str,
    metrics_url: str,
    *,
    max_tokens: int,
    timeout: float,
    th: Thresholds,
    sleep: Callable[[float], None] = time.sleep,
) -> PrefixProbe:
    """The same long prompt twice, each between two scrapes of the counters."""
    probe = PrefixProbe()
    text = probe_prompt()
    answers: list[str] = []
    for which in ("cold", "cached"):
        counters = PromProbe(
            metrics_url, timeout=min(timeout, 10.0), explicit=False, th=th, sleep=sleep
        )
        counters.start()
        c = stream_chat(
            client, url, model, f"prefix-{which}", text, max_tokens=max_tokens, timeout=timeout
        )
        if not c.ok and which == "cold" and c.status_code == 400 and len(text) > 1000:
            # a context shorter than the long prompt: the short one (fewer cache blocks)
            text = probe_prompt(SHORT_DOCUMENT_CHARS)
            counters.start()
            c = stream_chat(client, url, model, f"prefix-{which}", text, max_tokens=max_tokens,
                            timeout=timeout)  # fmt: skip
        if not c.ok:
            probe.error = f"the {which} request failed: {c.error}"
            probe.refused = c.status_code == 400
            return probe
        answers.append(c.content)
        if which == "cold":
            probe.cold = counters.finish(c.completion_tokens)
        else:
            probe.cached = counters.finish(c.completion_tokens)
    probe.same_text = answers[0] == answers[1]
    return probe


def prefix_check(p: PrefixProbe) -> Row:
    """The verdict row: fail when the cached request accepts ≤ PREFIX_DROP × the cold one."""
    name = "prefix cache"
    if p.error and p.refused:
        return Row(name, SKIP, f"the probe's prompt was refused ({p.error})",
                   hint="the server's context may be too short for the probe")  # fmt: skip
    if p.error:
        return Row(name, FAIL, p.error)
    for r in (p.cold, p.cached):
        if r is None or r.state != SPECULATING or r.window is None:
            why = r.message or r.state if r is not None else "no reading"
            return Row(
                name,
                SKIP,
                f"no acceptance per request from the counters ({why})",
                hint="the probe needs the engine's /metrics spec-decode counters",
            )
    cold, cached, hit = p.tau("cold"), p.tau("cached"), p.hit_rate
    figures = f"τ {cold:.2f} cold, {cached:.2f} with the prompt sent again"
    if hit is None:
        return Row(
            name,
            SKIP,
            f"{figures}; the server reports no prefix-cache counters, so "
            "whether the prefix was cached is unknown",
        )
    if hit < MIN_HIT_RATE:
        return Row(
            name,
            SKIP,
            f"{figures}; only {hit:.0%} of the second prompt came from the "
            "prefix cache: prefix caching is off or evicted, nothing to compare",
        )
    if min(p.drafts("cold") or 0, p.drafts("cached") or 0) < MIN_DRAFTS:
        return Row(
            name,
            SKIP,
            f"{figures}: too few drafts to compare (under {MIN_DRAFTS})",
            hint="raise --max-tokens",
        )
    if cached is not None and cold is not None and cached <= PREFIX_DROP * cold:
        return Row(
            name,
            FAIL,
            f"τ fell from {cold:.2f} to {cached:.2f} when the same prompt's prefix was cached "
            f"({hit:.0%} hit): the drafter reads a stale context for cached tokens",
            hint="relaunch with --no-enable-prefix-caching (vllm#47930; the fix is vllm PR "
            "#47926), then run this probe again",
        )
    same = "" if p.same_text else "; the two answers differ (verify kernels are not bit-exact)"
    return Row(
        name,
        OK,
        f"{figures} ({hit:.0%} from the prefix cache): the cache leaves the "
        f"drafter's context intact{same}",
    )
