"""The server's statistics in vLLM's dialect: Prometheus counters and the interval log lines.

Names and formats from shared docs engine-formats.md §2-§3 (vLLM 0.10.2-0.34):
- /metrics: `vllm:spec_decode_num_drafts_total`, `..._num_draft_tokens_total`,
  `..._num_accepted_tokens_total`, `..._num_accepted_tokens_per_pos_total{position}`
  (only with a drafter), `vllm:prompt_tokens_total`, `vllm:generation_tokens_total`,
  `vllm:request_success_total{finished_reason}`, running/waiting gauges, TTFT histogram;
  labels `engine="0"`, `model_name`.
- every interval: `Engine 000: ...` then `SpecDecoding metrics: ...` (the latter only for a
  window with drafts); when this window and the last had no traffic, neither line is logged.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from dflashctl.engine.generate import SpecStats

log = logging.getLogger("dflashctl.engine")


@dataclass
class Window:
    """Counters since the last stats log line (vLLM's per-interval stats)."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    spec: SpecStats = field(default_factory=SpecStats)


class Stats:
    """Prometheus counters with vLLM's names plus the window for the log lines."""

    def __init__(self, model_name: str, k: int) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = r = CollectorRegistry()
        self.k = k
        names = ["engine", "model_name"]
        labels = {"engine": "0", "model_name": model_name}

        def counter(name: str, doc: str, *extra: str) -> Counter:
            return Counter(name, doc, [*names, *extra], registry=r)

        self.prompt_tokens = counter("vllm:prompt_tokens", "Prefill tokens.").labels(**labels)
        self.generation_tokens = counter("vllm:generation_tokens", "Generated tokens.").labels(
            **labels
        )
        self._success = counter("vllm:request_success", "Finished requests.", "finished_reason")
        self._labels = labels
        self.running = Gauge("vllm:num_requests_running", "Running.", names, registry=r).labels(
            **labels
        )
        self.waiting = Gauge("vllm:num_requests_waiting", "Waiting.", names, registry=r).labels(
            **labels
        )
        self.ttft = Histogram(
            "vllm:time_to_first_token_seconds", "Time to first token.", names, registry=r
        ).labels(**labels)
        self.n_running = self.n_waiting = 0
        if k:
            self.drafts = counter("vllm:spec_decode_num_drafts", "Drafts.").labels(**labels)
            self.draft_tokens = counter("vllm:spec_decode_num_draft_tokens", "Draft tokens.")
            self.draft_tokens = self.draft_tokens.labels(**labels)
            self.accepted = counter("vllm:spec_decode_num_accepted_tokens", "Accepted tokens.")
            self.accepted = self.accepted.labels(**labels)
            per_pos = counter(
                "vllm:spec_decode_num_accepted_tokens_per_pos", "Accepted per position.", "position"
            )
            self.per_pos = [per_pos.labels(**labels, position=str(i)) for i in range(k)]
        self.lock = threading.Lock()
        self.window = Window(spec=SpecStats(accepted_per_pos=[0] * k))
        self.last_had_traffic = False

    def finished(self, reason: str) -> None:
        self._success.labels(**self._labels, finished_reason=reason).inc()

    def set_queue(self, running: int, waiting: int) -> None:
        self.n_running, self.n_waiting = running, waiting
        self.running.set(running)
        self.waiting.set(waiting)

    def observe_drafts(self, d: SpecStats) -> None:
        """Add the drafts of one step (or several): d holds only the new ones."""
        if not d.num_drafts:
            return
        with self.lock:
            w = self.window.spec
            w.num_drafts += d.num_drafts
            w.num_draft_tokens += d.num_draft_tokens
            w.num_accepted_tokens += d.num_accepted_tokens
            for i, n in enumerate(d.accepted_per_pos):
                w.accepted_per_pos[i] += n
        self.drafts.inc(d.num_drafts)
        self.draft_tokens.inc(d.num_draft_tokens)
        self.accepted.inc(d.num_accepted_tokens)
        for i, n in enumerate(d.accepted_per_pos):
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

    def log_window(self, elapsed: float) -> None:
        """vLLM's two interval lines over the last `elapsed` seconds."""
        with self.lock:
            w, self.window = self.window, Window(spec=SpecStats(accepted_per_pos=[0] * self.k))
        traffic = bool(w.prompt_tokens or w.generation_tokens)
        if not traffic and not self.last_had_traffic:
            return
        self.last_had_traffic = traffic
        elapsed = max(elapsed, 1e-9)
        log.info(
            "Engine 000: Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f "
            "tokens/s, Running: %d reqs, Waiting: %d reqs, CPU KV cache usage: %.1f%%, "
            "Prefix cache hit rate: %.1f%%",
            w.prompt_tokens / elapsed,
            w.generation_tokens / elapsed,
            self.n_running,
            self.n_waiting,
            0.0,
            0.0,
        )
        s = w.spec
        if not s.num_drafts:
            return
        rates = ", ".join(f"{a / s.num_drafts:.3f}" for a in s.accepted_per_pos)
        log.info(
            "SpecDecoding metrics: Mean acceptance length: %.2f, Accepted throughput: %.2f "
            "tokens/s, Drafted throughput: %.2f tokens/s, Accepted: %d tokens, Drafted: %d "
            "tokens, Per-position acceptance rate: %s, Avg Draft acceptance rate: %.1f%%",
            1 + s.num_accepted_tokens / s.num_drafts,
            s.num_accepted_tokens / elapsed,
            s.num_draft_tokens / elapsed,
            s.num_accepted_tokens,
            s.num_draft_tokens,
            rates,
            100 * s.num_accepted_tokens / s.num_draft_tokens,
        )
