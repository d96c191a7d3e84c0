"""Acceptance figures that are not an engine's interval lines: one parser per format, in a table.

The interval lines (vLLM's `SpecDecoding metrics`, SGLang's `Decode batch … accept len`) are the
LogScanner's. Users also paste what other tools and engines print, and each must be read or
said to be unread, never taken for "no metrics":

    vllm-bench-serve    `vllm bench serve`'s result block: `---Speculative Decoding---`,
                        `Acceptance rate (%):`, `Acceptance length:`, `Drafts:`, `Draft tokens:`,
                        `Accepted tokens:`, `Per-position acceptance (%):` + `  Position i:`
                        (vllm/benchmarks/serve.py; the counters' change over the run)
    vllm-offline        vLLM's offline speculative-decoding example: `num_drafts:`,
                        `num_draft_tokens:`, `num_accepted_tokens:`, `mean acceptance length:`,
                        `acceptance at token i:` (a fraction; since the LLM was built)
    llama.cpp-slot      llama-server, once per request: `draft acceptance[ rate] = R (A accepted /
                        G generated)[, mean len = L]`, then at trace level `acc per pos = (…)`
                        (mid-2026 builds: `mean acceptance length = L, acceptance rate per
                        position = (…)` on the same line)
    llama.cpp-stats     llama.cpp's speculative statistics, since start: `statistics draft-dflash:
                        … #gen drafts = D, #acc drafts = …, #gen tokens = G, #acc tokens = A[,
                        #mean acc len = L][, #acc rate/pos = (…)]`
    vllm-fields         the fields of vLLM's `SpecDecoding metrics` line pasted without its prefix:
                        `Mean acceptance length: L`[, `Accepted: A tokens`, `Drafted: D tokens`,
                        `Per-position acceptance rate: …`], on one line or one per line

`SummaryScan` is fed the same byte chunks as the LogScanner (memory flat: a bounded excerpt after
each hit, the latest `max_windows` windows). It also keeps a few lines that look like acceptance
figures in a format nobody here reads, so that a log with figures and no parser gets "format not
recognised", naming the engine when a line says which. No I/O, no printing.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from dflashctl.metrics.log_parse import clean
from dflashctl.metrics.window import SpecWindow

_NUM = r"(\d+(?:\.\d+)?)"


def _field(block: str, label: str) -> float | None:
    m = re.search(rf"(?m)^\s*{re.escape(label)}\s+{_NUM}", block)
    return float(m.group(1)) if m else None


def _positions(block: str, pattern: str) -> list[float] | None:
    found = [(int(i), float(v)) for i, v in re.findall(pattern, block)]
    if not found:
        return None
    by_pos = dict(found)
    if set(by_pos) != set(range(len(by_pos))):
        return None  # a gap: not a profile to judge
    return [by_pos[i] for i in range(len(by_pos))]


def _int(x: float | None) -> int | None:
    return int(x) if x is not None else None


def parse_vllm_bench(block: str) -> list[SpecWindow]:
    """`vllm bench serve`'s block, from its `Speculative Decoding` header on."""
    block = block.split("=" * 20, 1)[0]  # the block ends at the closing rule
    rate = _field(block, "Acceptance rate (%):")
    length = _field(block, "Acceptance length:")
    if rate is None and length is None:
        return []
    pp = _positions(block, r"(?m)^\s*Position (\d+):\s+" + _NUM)
    w = SpecWindow(engine="vllm", format="vllm-bench-serve", cumulative=True)
    w.draft_acceptance_rate = rate / 100.0 if rate is not None else None
    w.mean_acceptance_length = length
    w.num_drafts = _int(_field(block, "Drafts:"))
    w.drafted_tokens = _int(_field(block, "Draft tokens:"))
    w.accepted_tokens = _int(_field(block, "Accepted tokens:"))
    w.per_position = [p / 100.0 for p in pp] if pp else None
    return [w]


def parse_vllm_offline(block: str) -> list[SpecWindow]:
    """The offline example's summary, from its `num_drafts:` line on."""
    length = _field(block, "mean acceptance length:")
    drafts = _field(block, "num_drafts:")
    if length is None and drafts is None:
        return []
    w = SpecWindow(engine="vllm", format="vllm-offline", cumulative=True)
    w.num_drafts = _int(drafts)
    w.drafted_tokens = _int(_field(block, "num_draft_tokens:"))
    w.accepted_tokens = _int(_field(block, "num_accepted_tokens:"))
    w.mean_acceptance_length = length
    w.per_position = _positions(block, r"(?m)^\s*acceptance at token (\d+):\s+" + _NUM)
    if w.accepted_tokens is not None and w.drafted_tokens:
        w.draft_acceptance_rate = w.accepted_tokens / w.drafted_tokens
    if w.drafted_tokens == 0:
        return []  # nothing was drafted: no figure to judge
    return [w]


# llama-server's slot line: `mean len =` and, at trace level, `acc per pos = (…)` on the next
# line; builds of mid-2026 spelled them `mean acceptance length =` and `acceptance rate per
# position = (…)` on the same line (ggml-org/llama.cpp#24536)
_LLAMA_SLOT = re.compile(
    r"draft acceptance(?: rate)? = " + _NUM + r" \(\s*(\d+) accepted /\s*(\d+) generated\)"
    r"(?:, mean (?:len|acceptance length) =\s*" + _NUM + r")?"
    r"(?:, acceptance rate per position = \(([^)]*)\)"
    r"|[^\n]*\n[^\n]*acc per pos = \(([^)]*)\))?"
)
_LLAMA_STATS = re.compile(
    r"statistics\s+([\w.-]+):[^\n]*?#gen drafts =\s*(\d+), #acc drafts =\s*(\d+), "
    r"#gen tokens =\s*(\d+), #acc tokens =\s*(\d+)"
    r"(?:, #mean acc len =\s*" + _NUM + r")?(?:, #acc rate/pos = \(([^)]*)\))?"
)


def _floats(text: str | None) -> list[float] | None:
    if not text:
        return None
    try:
        return [float(x) for x in text.split(",") if x.strip()] or None
    except ValueError:
        return None


def _drafts_from_mean(accepted: int, mean: float | None) -> int | None:
    return round(accepted / (mean - 1)) or None if mean and mean > 1 else None


def parse_llama_slot(block: str) -> list[SpecWindow]:
    m = _LLAMA_SLOT.search(block)
    if not m:
        return []
    accepted, generated = int(m.group(2)), int(m.group(3))
    if generated == 0:
        return []
    mean = float(m.group(4)) if m.group(4) else None
    w = SpecWindow(engine="llama.cpp", format="llama.cpp-slot")
    w.draft_acceptance_rate = accepted / generated
    w.accepted_tokens, w.drafted_tokens = accepted, generated
    w.mean_acceptance_length = mean
    w.num_drafts = _drafts_from_mean(accepted, mean)
    w.per_position = _floats(m.group(5) or m.group(6))
    return [w]


def parse_llama_stats(block: str) -> list[SpecWindow]:
    m = _LLAMA_STATS.search(block)
    if not m:
        return []
    drafts, generated, accepted = int(m.group(2)), int(m.group(4)), int(m.group(5))
    if generated == 0:
        return []
    w = SpecWindow(engine="llama.cpp", format=f"llama.cpp-stats {m.group(1)}", cumulative=True)
    w.num_drafts = drafts or None
    w.drafted_tokens, w.accepted_tokens = generated, accepted
    w.draft_acceptance_rate = accepted / generated
    mean = float(m.group(6)) if m.group(6) else None
    w.mean_acceptance_length = mean if mean else (1 + accepted / drafts if drafts else None)
    w.per_position = _floats(m.group(7))
    return [w]


def parse_vllm_fields(block: str) -> list[SpecWindow]:
    """vLLM's `SpecDecoding metrics` fields pasted without the line's prefix, on one line or one
    per line: `Mean acceptance length: L`, then any of `Accepted: A tokens`, `Drafted: D
    tokens`, `Per-position acceptance rate: …`, `Avg Draft acceptance rate: R%` (up to the
    next blank line)."""
    block = block.split("\n\n", 1)[0]
    m = re.match(r"Mean acceptance length:\s*" + _NUM, block)
    if not m:
        return []
    w = SpecWindow(engine="vllm", format="vllm-fields")
    w.mean_acceptance_length = float(m.group(1))
    acc = re.search(r"\bAccepted:\s*(\d+) tokens", block)
    dra = re.search(r"\bDrafted:\s*(\d+) tokens", block)
    pos = re.search(r"Per-position acceptance rate:\s*([\d.,\s]+\d)", block)
    rate = re.search(r"Avg Draft acceptance rate:\s*" + _NUM + "%", block)
    w.accepted_tokens = int(acc.group(1)) if acc else None
    w.drafted_tokens = int(dra.group(1)) if dra else None
    w.per_position = _floats(pos.group(1)) if pos else None
    if w.accepted_tokens is not None:
        w.num_drafts = _drafts_from_mean(w.accepted_tokens, w.mean_acceptance_length)
    if rate:
        w.draft_acceptance_rate = float(rate.group(1)) / 100
    elif w.accepted_tokens is not None and w.drafted_tokens:
        w.draft_acceptance_rate = w.accepted_tokens / w.drafted_tokens
    return [w]


@dataclass(frozen=True)
class Format:
    name: str
    engine: str
    needle: bytes  # where a block starts
    span: int  # bytes of the block kept from the needle on
    parse: Callable[[str], list[SpecWindow]]


FORMATS = (
    Format("vllm-bench-serve", "vllm", b"Speculative Decoding---", 4096, parse_vllm_bench),
    Format("vllm-offline", "vllm", b"num_drafts:", 2048, parse_vllm_offline),
    Format("llama.cpp-slot", "llama.cpp", b"draft acceptance", 512, parse_llama_slot),
    Format("llama.cpp-stats", "llama.cpp", b"statistics ", 1024, parse_llama_stats),
    Format("vllm-fields", "vllm", b"Mean acceptance length:", 1024, parse_vllm_fields),
)

# A line that reads like an acceptance figure: "accept…" then a number within a few characters
_FIGURE_RE = re.compile(
    r"(?i)accept\w*(?:[ _-]?(?:rate|len(?:gth)?|ratio))?\s*(?:\(%\))?\s*[:=]\s*\d"
)
_ENGINE_HINTS = (  # (marker in the line or the log, engine), first match wins
    ("xinfer", "xinfer"),  # before "vllm": its containers are named vllm-rs-…
    ("tensorrt_llm", "TensorRT-LLM"),
    ("TRT-LLM", "TensorRT-LLM"),
    ("[TRT", "TensorRT-LLM"),
    ("llama", "llama.cpp"),
    ("slot ", "llama.cpp"),
    ("mlx", "MLX"),
    ("sglang", "SGLang"),
    ("Decode batch", "SGLang"),
    ("vllm", "vLLM"),
    ("SpecDecoding", "vLLM"),
)
MAX_PROBES = 20_000  # candidate "accept" hits looked at before the probe stops
MAX_FIGURE_LINES = 5


def engine_hint(text: str) -> str | None:
    """The engine a line (or a log's start) names, if any."""
    low = text.lower()
    for marker, engine in _ENGINE_HINTS:
        if marker.lower() in low:
            return engine
    return None


class SummaryScan:
    """Feed byte chunks; `windows()` and `figure_lines` at the end."""

    def __init__(self, engine: str = "auto", max_windows: int = 2000) -> None:
        self.formats = [f for f in FORMATS if engine in ("auto", f.engine)]
        self._found: deque[tuple[int, Format, bytes]] = deque(maxlen=max_windows)
        self._open: list[tuple[int, Format, bytearray]] = []  # blocks still being read
        self._carry = b""
        self._probes = 0
        self.figure_lines: list[str] = []  # lines like acceptance figures (format unknown)
        self.head = b""  # the log's first bytes (engine hints)
        self._pos = 0

    def feed(self, chunk: bytes) -> None:
        if len(self.head) < 4096:
            self.head += bytes(chunk[: 4096 - len(self.head)])
        for _start, fmt, buf in self._open:
            buf += chunk[: fmt.span - len(buf)]
        self._close_full()
        keep = max(len(f.needle) for f in self.formats) if self.formats else 0
        data = self._carry + bytes(chunk)
        base = self._pos - len(self._carry)
        for fmt in self.formats:
            p = data.find(fmt.needle)
            while p >= 0:
                if p + len(fmt.needle) > len(self._carry):  # not already seen in the carry
                    self._open.append((base + p, fmt, bytearray(data[p : p + fmt.span])))
                p = data.find(fmt.needle, p + 1)
        self._probe(data, len(self._carry))
        self._close_full()
        self._pos += len(chunk)
        self._carry = data[-keep:] if keep else b""

    def _probe(self, data: bytes, fresh: int) -> None:
        if len(self.figure_lines) >= MAX_FIGURE_LINES or self._probes >= MAX_PROBES:
            return
        p = data.find(b"ccept", fresh)
        while p >= 0 and self._probes < MAX_PROBES:
            self._probes += 1
            ls = data.rfind(b"\n", 0, p) + 1
            le = data.find(b"\n", p)
            line = clean(data[ls : le if le >= 0 else len(data)][:400])
            if _FIGURE_RE.search(line):
                self.figure_lines.append(line.strip()[:200])
                if len(self.figure_lines) >= MAX_FIGURE_LINES:
                    return
            p = data.find(b"ccept", le if le >= 0 else len(data))

    def _close_full(self) -> None:
        still = []
        for start, fmt, buf in self._open:
            if len(buf) >= fmt.span:
                self._found.append((start, fmt, bytes(buf)))
            else:
                still.append((start, fmt, buf))
        self._open = still

    def close(self) -> None:
        for start, fmt, buf in self._open:
            self._found.append((start, fmt, bytes(buf)))
        self._open = []

    def windows(self) -> list[SpecWindow]:
        """Every block's windows, in log order."""
        out: list[SpecWindow] = []
        for start, fmt, raw in sorted(self._found, key=lambda x: x[0]):
            for w in fmt.parse(clean(raw)):
                w.offset = start
                out.append(w)
        return out
