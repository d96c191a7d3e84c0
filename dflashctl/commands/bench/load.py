"""`--concurrency 1,2,4,8`: the load sweep, for engines that batch (vLLM, SGLang).

At level N, N clients stream at once; each sends every fixture once (client i starts at fixture
i, so the mix stays even): N × fixtures requests per level and target. Levels are interleaved
across targets (level 1 on A, on B, then level 2 …). Per level: throughput (completion tokens of
the answers that arrived over the wall time from the first request sent to the last answer
done), requests/s, p50/p99 of end-to-end latency and of TTFT, the median per-request decode
speed, and the spec-decode window of the whole level. The bundled engine serves one request at
a time (the others queue), which the result says; it is still measured. No printing.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx

from dflashctl.commands.bench.session import LOAD, Bench, TargetResult, median, percentile
from dflashctl.fixtures import Prompt
from dflashctl.http_body import ACCEPT_ENCODING
from dflashctl.metrics.spec_probe import SpecResult
from dflashctl.server.client import Completion

ONE_AT_A_TIME = (
    "the bundled engine serves one request at a time (batch one): at higher levels requests "
    "queue, so throughput stays flat while latency grows with the level"
)


def _r(x: float | None, nd: int) -> float | None:
    return None if x is None or x != x else round(x, nd)


@dataclass
class LevelResult:
    target: str
    concurrency: int
    completions: list[Completion] = field(default_factory=list)
    wall_s: float = 0.0
    spec: SpecResult | None = None
    note: str | None = None

    @property
    def good(self) -> list[Completion]:
        return [c for c in self.completions if c.ok]

    @property
    def errors(self) -> list[str]:
        return [c.error or "" for c in self.completions if not c.ok]

    @property
    def tokens(self) -> int:
        return sum(c.completion_tokens or 0 for c in self.good)

    @property
    def throughput(self) -> float | None:
        return self.tokens / self.wall_s if self.wall_s > 0 and self.good else None

    @property
    def requests_per_s(self) -> float | None:
        return len(self.good) / self.wall_s if self.wall_s > 0 and self.good else None

    def _q(self, values: list[float | None], q: float) -> float | None:
        return percentile([v for v in values if v is not None], q)

    def latency(self, q: float) -> float | None:
        return self._q([c.total_s for c in self.good], q)

    def ttft(self, q: float) -> float | None:
        return self._q([c.ttft_s for c in self.good], q)

    def to_json(self) -> dict[str, Any]:
        w = self.spec.window if self.spec else None
        return {
            "target": self.target,
            "concurrency": self.concurrency,
            "requests": len(self.completions),
            "ok": not self.errors,
            "errors": self.errors,
            "wall_s": _r(self.wall_s, 3),
            "completion_tokens": self.tokens,
            "throughput_tokens_per_s": _r(self.throughput, 2),
            "requests_per_s": _r(self.requests_per_s, 3),
            "latency_p50_s": _r(self.latency(50), 4),
            "latency_p99_s": _r(self.latency(99), 4),
            "ttft_p50_s": _r(self.ttft(50), 4),
            "ttft_p99_s": _r(self.ttft(99), 4),
            "decode_tokens_per_s_p50": _r(
                median([v for v in (c.decode_tokens_per_s for c in self.good) if v]), 2
            ),
            "mean_acceptance_length": _r(w.mean_acceptance_length, 4) if w else None,
            "speculation": self.spec.state if self.spec else None,
            "note": self.note,
        }


def run_level(b: Bench, tr: TargetResult, prompts: list[Prompt], level: int) -> LevelResult:
    res = LevelResult(tr.label, level)
    if tr.target.engine == "local" and level > 1:
        res.note = ONE_AT_A_TIME
    n = len(prompts)
    limits = httpx.Limits(max_connections=level + 2, max_keepalive_connections=level + 2)
    timeout = httpx.Timeout(b.opts.timeout, connect=min(b.opts.timeout, 10.0))

    def worker(i: int, client: httpx.Client) -> list[Completion]:
        out = []
        for j in range(n):
            p = prompts[(i + j) % n]
            b.record(LOAD, tr, p.id, None, concurrency=level, client=i)
            out.append(b.send(tr, p, b.opts.max_tokens, client))
        return out

    probe = b.probe(tr)
    with (
        httpx.Client(
            timeout=timeout, limits=limits, trust_env=False, headers=ACCEPT_ENCODING
        ) as client,
        ThreadPoolExecutor(max_workers=level) as pool,
    ):
        t0 = time.perf_counter()
        futures = [pool.submit(worker, i, client) for i in range(level)]
        for f in futures:
            res.completions += f.result()
        res.wall_s = time.perf_counter() - t0
    if res.good:
        res.spec = b.finish(tr, probe, res.tokens)
    return res


def sweep(
    b: Bench, results: list[TargetResult], prompts: list[Prompt], levels: list[int]
) -> list[LevelResult]:
    out = []
    for level in levels:
        for tr in results:
            b.say(f"concurrency {level} on {tr.label}: {level * len(prompts)} requests")
            lv = run_level(b, tr, prompts, level)
            out.append(lv)
            tp = lv.throughput
            b.say(
                f"concurrency {level} {tr.label}: "
                + (f"{tp:.1f} tok/s" if tp else "no throughput")
                + (f", {len(lv.errors)} failed" if lv.errors else "")
            )
    return out
