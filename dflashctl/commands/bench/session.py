"""One bench run's state and results: the options, the samples and cells, the per-target
results, the report, and `Bench` (the HTTP client, the order of requests, the /metrics
probes). Shared by `run` (warm-up, rounds, comparison) and `load` (the concurrency sweep).
"""

from __future__ import annotations

import math
import statistics
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from dflashctl.commands.bench.targets import BenchTarget, parse_concurrency
from dflashctl.errors import ServerError, UsageError, require_finite
from dflashctl.fixtures import Prompt, load_prompt_file, load_prompts
from dflashctl.metrics.analyze import MetricsOptions, thresholds_for
from dflashctl.metrics.spec_probe import (
    SPECULATING,
    UNREADABLE,
    PromProbe,
    SpecResult,
)
from dflashctl.metrics.window import SpecWindow, aggregate
from dflashctl.server.client import Completion, make_client, stream_chat

Progress = Callable[[str], None]
Sleep = Callable[[float], None]
WARMUP = "warmup"
MEASURE = "measure"
LOAD = "load"


@dataclass
class BenchOptions:
    targets: list[str]
    fixtures: str | None = None  # comma-separated fixture ids; None: all of them
    repetitions: int = 3
    warmup_tokens: int = 128
    max_tokens: int = 256
    concurrency: str | None = None  # "1,2,4,8"
    timeout: float = 120.0
    prompts_file: Path | None = None  # --prompts FILE: the user's prompts instead of fixtures
    allow_unmatched: bool = False  # compare servers launched with different A/B settings
    # one start-up log per URL target, in order: the A/B settings a server does not tell
    logs: list[Path] = field(default_factory=list)

    def validate(self) -> None:
        if self.repetitions < 1:
            raise UsageError("--repetitions must be at least 1", "the write-up measures 3")
        if self.warmup_tokens < 0:
            raise UsageError("--warmup-tokens must be 0 (no warm-up) or more", "e.g. 128")
        if self.max_tokens < 2:
            raise UsageError(
                "--max-tokens must be at least 2: decode speed excludes the first token",
                "e.g. --max-tokens 256",
            )
        require_finite(timeout=self.timeout)
        if not self.timeout > 0:
            raise UsageError("--timeout must be a positive number of seconds")

    def levels(self) -> list[int]:
        return parse_concurrency(self.concurrency) if self.concurrency is not None else []

    def prompts(self) -> list[Prompt]:
        if self.prompts_file is not None:
            if self.fixtures is not None:
                raise UsageError(
                    "--prompts and --fixtures choose the prompts both", "give one of them"
                )
            return load_prompt_file(self.prompts_file)
        every = load_prompts("fixtures")
        if self.fixtures is None:
            return every
        by_id = {p.id: p for p in every}
        names = [n.strip() for n in self.fixtures.split(",") if n.strip()]
        if not names:
            raise UsageError("--fixtures is empty", "choose from: " + ", ".join(by_id))
        unknown = [n for n in names if n not in by_id]
        if unknown:
            raise UsageError(
                f"--fixtures: unknown fixture {unknown[0]!r}", "choose from: " + ", ".join(by_id)
            )
        return [by_id[n] for n in dict.fromkeys(names)]


# ---- small statistics -------------------------------------------------------------------------


def median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def percentile(xs: list[float], q: float) -> float | None:
    """Linear interpolation between the closest ranks (numpy's default)."""
    s = sorted(xs)
    if not s:
        return None
    pos = (len(s) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def _r(x: float | None, nd: int) -> float | None:
    return None if x is None or x != x else round(x, nd)


def itl_of(c: Completion) -> float | None:
    """Seconds per decoded token: the decode window over the tokens after the first."""
    tps = c.decode_tokens_per_s
    return 1.0 / tps if tps else None


def pooled(results: list[SpecResult | None]) -> tuple[str | None, SpecWindow | None, str]:
    """The spec state, the pooled window and a message for several requests' windows."""
    got = [r for r in results if r is not None]
    windows = [r.window for r in got if r.window is not None]
    if windows:
        return SPECULATING, (windows[0] if len(windows) == 1 else aggregate(windows)), ""
    if not got:
        return None, None, ""
    return got[0].state, None, got[0].message


# ---- the report -------------------------------------------------------------------------------


@dataclass
class Sample:
    """One measured request."""

    seq: int
    repetition: int
    completion: Completion
    spec: SpecResult | None = None

    def to_json(self) -> dict[str, Any]:
        c = self.completion
        w = self.spec.window if self.spec else None
        return {
            "seq": self.seq,
            "repetition": self.repetition,
            "ok": c.ok,
            "error": c.error,
            "completion_tokens": c.completion_tokens,
            "finish_reason": c.finish_reason,
            "ttft_s": _r(c.ttft_s, 4),
            "itl_s": _r(itl_of(c), 5),
            "decode_s": _r(c.decode_s, 4),
            "decode_tokens_per_s": _r(c.decode_tokens_per_s, 2),
            "text_events": c.text_events,
            "mean_acceptance_length": _r(w.mean_acceptance_length, 4) if w else None,
            "speculation": self.spec.state if self.spec else None,
        }


@dataclass
class Cell:
    """One target × fixture: its repetitions and their medians."""

    fixture: str
    samples: list[Sample] = field(default_factory=list)
    speedup: float | None = None
    # the speedup's spread: per repetition, this cell's decode speed over the first target's
    speedup_min: float | None = None
    speedup_max: float | None = None
    left_out: str | None = None  # why the cell is not in the speedup (answers too short)
    matches_first_target: bool | None = None  # greedy output equal to the first target's

    @property
    def good(self) -> list[Completion]:
        return [s.completion for s in self.samples if s.completion.ok]

    @property
    def errors(self) -> list[str]:
        return [s.completion.error or "" for s in self.samples if not s.completion.ok]

    def _median(self, get: Callable[[Completion], float | None]) -> float | None:
        return median([v for v in (get(c) for c in self.good) if v is not None])

    @property
    def decode_tokens_per_s(self) -> float | None:
        return self._median(lambda c: c.decode_tokens_per_s)

    def _values(self, get: Callable[[Completion], float | None]) -> list[float]:
        return [v for v in (get(c) for c in self.good) if v is not None]

    @property
    def decode_range(self) -> tuple[float, float] | None:
        """(min, max) decode tokens/s over the repetitions: the spread behind the median."""
        xs = self._values(lambda c: c.decode_tokens_per_s)
        return (min(xs), max(xs)) if xs else None

    def ttft_percentile(self, q: float) -> float | None:
        return percentile(self._values(lambda c: c.ttft_s), q)

    def itl_percentile(self, q: float) -> float | None:
        return percentile(self._values(itl_of), q)

    def by_repetition(self) -> dict[int, float]:
        """Decode tokens/s of each repetition that answered."""
        return {
            s.repetition: s.completion.decode_tokens_per_s
            for s in self.samples
            if s.completion.ok and s.completion.decode_tokens_per_s
        }

    @property
    def ttft_s(self) -> float | None:
        return self._median(lambda c: c.ttft_s)

    @property
    def itl_s(self) -> float | None:
        return self._median(itl_of)

    @property
    def completion_tokens(self) -> float | None:
        return self._median(lambda c: c.completion_tokens)

    def acceptance(self) -> tuple[str | None, SpecWindow | None, str]:
        return pooled([s.spec for s in self.samples if s.completion.ok])

    def to_json(self) -> dict[str, Any]:
        state, w, message = self.acceptance()
        pp = w.per_position if w else None
        rng = self.decode_range
        return {
            "fixture": self.fixture,
            "decode_tokens_per_s": _r(self.decode_tokens_per_s, 2),
            "mean_acceptance_length": _r(w.mean_acceptance_length, 4) if w else None,
            "speedup": _r(self.speedup, 3),
            "ttft_s": _r(self.ttft_s, 4),
            "itl_s": _r(self.itl_s, 5),
            "decode_tokens_per_s_min": _r(rng[0], 2) if rng else None,
            "decode_tokens_per_s_max": _r(rng[1], 2) if rng else None,
            "speedup_min": _r(self.speedup_min, 3),
            "speedup_max": _r(self.speedup_max, 3),
            "ttft_p90_s": _r(self.ttft_percentile(90), 4),
            "itl_p90_s": _r(self.itl_percentile(90), 5),
            "left_out_of_speedup": self.left_out,
            "draft_acceptance_rate": _r(w.draft_acceptance_rate, 4) if w else None,
            "per_position": [round(p, 4) for p in pp] if pp else None,
            "num_drafts": w.num_drafts if w else None,
            "speculation": state,
            "speculation_message": message or None,
            "completion_tokens": _r(self.completion_tokens, 1),
            "matches_first_target": self.matches_first_target,
            "measured": len(self.good),
            "errors": self.errors,
            "samples": [s.to_json() for s in self.samples],
        }


@dataclass
class TargetResult:
    target: BenchTarget
    cells: dict[str, Cell]
    warmup: Completion | None = None
    metrics_state: str | None = None  # UNREADABLE once /metrics proved unusable
    metrics_message: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.target.label

    @property
    def mean_speedup(self) -> float | None:
        return geomean([c.speedup for c in self.cells.values() if c.speedup is not None])

    def to_json(self) -> dict[str, Any]:
        w = self.warmup
        return {
            **self.target.to_json(),
            "fixtures": {k: c.to_json() for k, c in self.cells.items()},
            "mean_speedup": _r(self.mean_speedup, 3),
            "warmup": (
                {"ok": w.ok, "error": w.error, "completion_tokens": w.completion_tokens}
                if w is not None
                else None
            ),
            "metrics": {"state": self.metrics_state, "message": self.metrics_message or None},
            "notes": self.notes,
        }


@dataclass
class BenchReport:
    options: BenchOptions
    fixtures: list[str]
    levels: list[int]
    targets: list[TargetResult]
    order: list[dict[str, Any]] = field(default_factory=list)  # every request, as sent
    sweep: list[Any] = field(default_factory=list)  # load.LevelResult
    wall_s: float | None = None
    notes: list[str] = field(default_factory=list)  # about the comparison as a whole

    @property
    def baseline(self) -> str:
        return self.targets[0].label

    @property
    def failures(self) -> list[str]:
        out = []
        for t in self.targets:
            if t.warmup is not None and not t.warmup.ok:
                out.append(f"{t.label} warm-up: {t.warmup.error}")
            for c in t.cells.values():
                out += [f"{t.label} {c.fixture}: {e}" for e in c.errors]
                if not c.good and not c.errors:
                    out.append(f"{t.label} {c.fixture}: nothing measured")
        for lv in self.sweep:
            out += [f"{lv.target} at concurrency {lv.concurrency}: {e}" for e in lv.errors]
        return out

    @property
    def ok(self) -> bool:
        return not self.failures

    def to_json(self) -> dict[str, Any]:
        o = self.options
        return {
            "ok": self.ok,
            "baseline": self.baseline,
            "notes": self.notes,
            "settings": {
                "fixtures": self.fixtures,
                "repetitions": o.repetitions,
                "warmup_tokens": o.warmup_tokens,
                "max_tokens": o.max_tokens,
                "temperature": 0,
                "batch": 1,
                "timeout_s": o.timeout,
                "concurrency": self.levels or None,
                "statistic": "median",
            },
            "targets": [t.to_json() for t in self.targets],
            "concurrency": [lv.to_json() for lv in self.sweep],
            "order": self.order,
            "failures": self.failures,
            "wall_s": _r(self.wall_s, 2),
        }


# ---- the run ----------------------------------------------------------------------------------


class Bench:
    """The state of one run: the HTTP client, the order of requests, the probes."""

    def __init__(self, opts: BenchOptions, say: Progress, sleep: Sleep) -> None:
        self.opts, self.say, self.sleep = opts, say, sleep
        self.order: list[dict[str, Any]] = []
        self.client = make_client(opts.timeout)
        self.lock = threading.Lock()  # the sweep records from several threads

    def probe(self, tr: TargetResult) -> PromProbe | None:
        """A started probe on the target's /metrics, unless it already proved unreadable."""
        if tr.metrics_state == UNREADABLE:
            return None
        url = f"{tr.target.url}/metrics"
        p = PromProbe(
            url,
            timeout=min(self.opts.timeout, 10.0),
            explicit=False,
            th=thresholds_for(url, MetricsOptions()),
            sleep=self.sleep,
        )
        p.start()
        return p

    def finish(self, tr: TargetResult, p: PromProbe | None, tokens: int | None) -> SpecResult:
        if p is None:
            return SpecResult("prometheus", f"{tr.target.url}/metrics", UNREADABLE, message=(
                tr.metrics_message
            ))  # fmt: skip
        res = p.finish(tokens)
        if res.state == UNREADABLE:
            tr.metrics_state, tr.metrics_message = UNREADABLE, res.message
        elif tr.metrics_state is None:
            tr.metrics_state = res.state
        if tr.target.engine is None and p.before is not None and p.before.has_sglang:
            tr.target.engine = "sglang"
        return res

    def record(self, phase: str, tr: TargetResult, fixture: str, rep: int | None, **kw: Any) -> int:
        with self.lock:
            seq = len(self.order) + 1
            self.order.append(
                {"seq": seq, "phase": phase, "target": tr.label, "fixture": fixture,
                 "repetition": rep, **kw}
            )  # fmt: skip
        return seq

    def send(
        self, tr: TargetResult, p: Prompt, max_tokens: int, client: httpx.Client | None = None
    ) -> Completion:
        """One streamed request; a server gone mid-run is a failed request, not an exit."""
        model = tr.target.model or ""
        try:
            return stream_chat(
                client or self.client, tr.target.url, model, p.id, p.text,
                max_tokens=max_tokens, timeout=self.opts.timeout,
            )  # fmt: skip
        except ServerError as e:
            c = Completion(p.id, p.text)
            c.error, c.hint = e.message, e.hint
            return c

    def close(self) -> None:
        self.client.close()
