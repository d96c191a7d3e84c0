"""Parse one spec-decode log line (vLLM V0 to 0.34, SGLang 0.4.6 to 0.5.23) into a `SpecWindow`.

Fields are read by their labels, never by position, so forks that add labels (`Rejected:`) or
engines that drop some still parse; labels we do not know are returned for reporting. Formats:
docs/metrics.md and ../shared/docs/engine-formats.md §2 and §6. No I/O, no printing.
"""

from __future__ import annotations

import calendar
import json
import math
import re
from dataclasses import dataclass, field
from datetime import datetime

from dflashctl.metrics.window import SpecWindow

ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

# vLLM: "INFO 12-02 12:56:32 " (the level and date are fixed by every vLLM logging format).
VLLM_TS_RE = re.compile(
    r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?![\d:])"
)
VLLM_PROC_RE = re.compile(r"\(([\w\-]+) pid=(\d+)\)")
# The 0.10.1+ prefix in one go (the common case): "(APIServer pid=1) INFO 12-02 12:56:32 ".
VLLM_PREFIX_RE = re.compile(
    r"\(([\w\-]+) pid=(\d+)\) (?:DEBUG|INFO|WARNING|ERROR|CRITICAL) "
    r"(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?![\d:])"
)
VLLM_OLD_WORKER_RE = re.compile(r"\((VllmWorker(?:Process)? rank=\d+)")
# SGLang: "[2026-11-20 10:02:15 TP0] " or "[2026-11-20 10:02:15.123 DP1 TP0] ".
SGL_PREFIX_RE = re.compile(
    r"\[(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:[.,]\d+)?((?: [A-Z]{2}\d+)*)\]"
)
# SGLang's rank tags without a date (a custom log format): "[DP0 TP0] Decode batch, …".
SGL_TAGS_RE = re.compile(r"\[((?:DP|TP|PP|EP)\d+(?: (?:DP|TP|PP|EP)\d+)*)\]")
# Any ISO-like date and time: Python logging's asctime ("2026-11-20 10:00:00,123"), docker
# `logs -t` ("2026-11-20T10:00:00.123456789Z"), JSON loggers.
ISO_TS_RE = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)")
SGL_DECODE_RE = re.compile(r"Decode batch(?: \[\d+\])?[.,]\s*")
ENGINE_LABEL_RE = re.compile(r"(Engine \d+|\d+ Engines Aggregated):")


@dataclass(frozen=True, slots=True)
class RawTs:
    """A timestamp as printed. vLLM prints no year (`year` is None until resolved)."""

    year: int | None
    month: int
    day: int
    hour: int
    minute: int
    second: int

    def text(self) -> str:
        body = (
            f"{self.month:02d}-{self.day:02d} {self.hour:02d}:{self.minute:02d}:{self.second:02d}"
        )
        return f"{self.year:04d}-{body}" if self.year is not None else body

    def key(self) -> tuple[int, int, int, int, int]:
        return (self.month, self.day, self.hour, self.minute, self.second)

    def at_year(self, year: int) -> datetime | None:
        day = self.day
        if self.month == 2 and day == 29 and not calendar.isleap(year):
            day = 28
        try:
            return datetime(year, self.month, day, self.hour, self.minute, self.second)
        except ValueError:
            return None


@dataclass(slots=True)
class LineInfo:
    """The prefix of a log line: when, and which process/stream wrote it."""

    ts: RawTs | None
    stream: str  # "APIServer pid=1452", "DP1", "" ...
    pid_key: str | None  # vLLM process key, None when the format has none


def clean(raw: bytes) -> str:
    """Bytes of one line → text: lenient UTF-8, no ANSI colour codes, no CR."""
    text = raw.decode("utf-8", "replace")
    if "\x1b" in text:
        text = ANSI_RE.sub("", text)
    return text.replace("\r", "").rstrip("\n")


def line_info(text: str) -> LineInfo:
    f = VLLM_PREFIX_RE.search(text, 0, 200)
    if f:
        mo, d, h, mi, s = (int(f.group(i)) for i in range(3, 8))
        key = f"{f.group(1)} pid={f.group(2)}"
        return LineInfo(RawTs(None, mo, d, h, mi, s), key, key)
    m = SGL_PREFIX_RE.search(text, 0, 80) if "[" in text[:40] else None
    if m:
        y, mo, d, h, mi, s = (int(m.group(i)) for i in range(1, 7))
        tags = [t for t in m.group(7).split() if not t.startswith("TP")]
        return LineInfo(RawTs(y, mo, d, h, mi, s), " ".join(tags), None)
    ts = None
    m = VLLM_TS_RE.search(text)
    if m:
        mo, d, h, mi, s = (int(m.group(i)) for i in range(1, 6))
        ts = RawTs(None, mo, d, h, mi, s)
    else:
        iso = ISO_TS_RE.search(text, 0, 80)
        if iso:
            y, mo, d, h, mi, s = (int(iso.group(i)) for i in range(1, 7))
            ts = RawTs(y, mo, d, h, mi, s)
    p = VLLM_PROC_RE.search(text, 0, m.start() if m else 120)
    if p:
        key = f"{p.group(1)} pid={p.group(2)}"
        return LineInfo(ts, key, key)
    o = VLLM_OLD_WORKER_RE.search(text, 0, 120)
    if o:
        return LineInfo(ts, o.group(1), o.group(1))
    t = SGL_TAGS_RE.search(text, 0, 80) if "[" in text[:60] else None
    if t:
        tags = [x for x in t.group(1).split() if not x.startswith("TP")]
        return LineInfo(ts, " ".join(tags), None)
    return LineInfo(ts, "", None)


def unwrap_json(text: str) -> str:
    """A JSON-formatted log record (`VLLM_LOGGING_CONFIG_PATH` with a JSON formatter, or a
    collector's envelope) → "TIME LEVEL MESSAGE", so the line parsers see a plain line. Any
    other text is returned as it is."""
    s = text.lstrip()
    if not s.startswith("{"):
        return text
    try:
        obj = json.loads(s)
    except ValueError:
        return text
    if not isinstance(obj, dict):
        return text
    msg = next((obj[k] for k in ("message", "msg", "log") if isinstance(obj.get(k), str)), None)
    if msg is None:
        return text
    when = next(
        (obj[k] for k in ("asctime", "timestamp", "time", "ts") if isinstance(obj.get(k), str)),
        "",
    )
    level = next((obj[k] for k in ("levelname", "level") if isinstance(obj.get(k), str)), "")
    inner = unwrap_json(msg.rstrip("\n")) if msg.lstrip().startswith("{") else msg.rstrip("\n")
    return " ".join(x for x in (when, level, inner) if x)


def timestamp_of(raw: bytes) -> RawTs | None:
    """Timestamp of a line of either engine, or None (uvicorn, tracebacks, tqdm...)."""
    return line_info(clean(raw)).ts


def split_fields(body: str) -> list[tuple[str, str]]:
    """`"A: 1, B: 0.1, 0.2, C: 3%"` → `[("a", "1"), ("b", "0.1, 0.2"), ("c", "3%")]`.

    Splits on labels, not commas: a piece without `": "` continues the previous value (the
    per-position list). Labels are lower-cased.
    """
    out: list[tuple[str, str]] = []
    for piece in body.strip().rstrip(".,").split(", "):
        if ": " in piece:
            label, _, value = piece.partition(": ")
            # vLLM 0.5.x printed "Number of draft tokens tokens: …": one word twice
            out.append((_DOUBLED_RE.sub(r"\1", label.strip().lower()), value.strip()))
        elif out and piece.strip():
            label, value = out[-1]
            out[-1] = (label, f"{value}, {piece.strip()}")
    return out


_DOUBLED_RE = re.compile(r"\b(\w+) \1$")
_UNITS = ("tokens/s", "tokens", "reqs", "%")


def _num(value: str) -> float | None:
    """`"4.61 tokens/s"`, `"9.8%"`, `"nan%"`, `"53 tokens"` → float; anything else → None."""
    v = value.strip()
    for unit in _UNITS:
        if v.endswith(unit):
            v = v[: -len(unit)].rstrip()
            break
    try:
        x = float(v)
    except ValueError:
        return None
    return x if math.isfinite(x) else None  # `nan` (no drafts in the window), `inf`: no figure


def _int(value: str) -> int | None:
    x = _num(value)
    return int(x) if x is not None and x == x and abs(x) != float("inf") else None


def _floats(value: str) -> list[float] | None:
    try:
        vals = [float(x) for x in value.split(",") if x.strip()]
    except ValueError:
        return None
    if not all(math.isfinite(x) for x in vals):
        return None
    return vals or None


@dataclass(slots=True)
class ParsedLine:
    window: SpecWindow | None
    unknown: list[str] = field(default_factory=list)
    v0_cumulative: tuple[int, int, int, int] | None = None  # (k, accepted, drafted, emitted)
    skipped: bool = False  # a well-formed line for a window without drafts


_VLLM_KNOWN = {
    "mean acceptance length",
    "accepted throughput",
    "drafted throughput",
    "accepted",
    "drafted",
    "per-position acceptance rate",
    "avg draft acceptance rate",
    "draft acceptance rate",
    "rejected",
    "system efficiency",
    "number of speculative tokens",
    "number of accepted tokens",
    "number of draft tokens",
    "number of emitted tokens",
}


# vLLM 0.10.2-0.34, exactly as printed: a shortcut for the common case. Any other shape
# (forks with extra labels, other versions) goes through the label parser below.
_CURRENT_RE = re.compile(
    r"SpecDecoding metrics: Mean acceptance length: (\d+\.\d+), "
    r"Accepted throughput: (\d+\.\d+) tokens/s, Drafted throughput: (\d+\.\d+) tokens/s, "
    r"Accepted: (\d+) tokens, Drafted: (\d+) tokens, "
    r"Per-position acceptance rate: ((?:\d+\.\d+, )*\d+\.\d+), "
    r"Avg Draft acceptance rate: (\d+\.\d+)%\s*$"
)


def _num_drafts(drafted: int, k: int, accepted: int | None, mean: float | None) -> int | None:
    """Drafts in a vLLM window. A draft proposes at most K tokens, so drafted / K is a floor, and
    exact when no step was cut short; vLLM prints the mean as 1 + accepted / drafts to two
    decimals, so when drafted / K cannot have given that mean, steps proposed fewer than K
    (near max_tokens or max_model_len, a truncated block) and the mean gives the count."""
    by_k = math.ceil(drafted / k)
    if mean is None or not accepted or accepted > drafted or mean <= 1.005 or by_k == 0:
        return by_k or None
    if abs(1 + accepted / by_k - mean) <= 0.0051:
        return by_k
    return min(max(round(accepted / (mean - 1)), by_k), drafted)


def parse_vllm(text: str) -> ParsedLine:
    """A `SpecDecoding metrics:` (V1) or `Speculative metrics:` (V0, early V1) line."""
    m = _CURRENT_RE.search(text)
    if m:
        drafted = int(m.group(5))
        if drafted == 0:
            return ParsedLine(None, skipped=True)
        pp = [float(x) for x in m.group(6).split(", ")]
        accepted = int(m.group(4))
        w = SpecWindow(
            engine="vllm",
            format="vllm-0.10.2+",
            mean_acceptance_length=float(m.group(1)),
            accepted_throughput=float(m.group(2)),
            drafted_throughput=float(m.group(3)),
            accepted_tokens=accepted,
            drafted_tokens=drafted,
            per_position=pp,
            draft_acceptance_rate=float(m.group(7)) / 100.0,
            num_drafts=_num_drafts(drafted, len(pp), accepted, float(m.group(1))),
        )
        return ParsedLine(w)
    idx = text.find("SpecDecoding metrics:")
    legacy = idx < 0
    if legacy:
        idx = text.find("Speculative metrics:")
        if idx < 0:
            return ParsedLine(None)
        body = text[idx + len("Speculative metrics:") :]
    else:
        body = text[idx + len("SpecDecoding metrics:") :]
    f = dict(split_fields(body))
    unknown = sorted(k for k in f if k not in _VLLM_KNOWN)
    w = SpecWindow(engine="vllm", format="")

    if legacy:
        k = _int(f.get("number of speculative tokens", ""))
        acc = _int(f.get("number of accepted tokens", ""))
        dra = _int(f.get("number of draft tokens", ""))
        emitted = _int(f.get("number of emitted tokens", ""))
        if "number of emitted tokens" in f or "system efficiency" in f:
            # V0: cumulative counters since start; turned into per-window deltas by the caller.
            w.format = "vllm-v0"
            if k and acc is not None and dra is not None and emitted is not None:
                return ParsedLine(w, unknown, (k, acc, dra, emitted))
            # counters missing (a fork, a cut line): judge the rate that is printed rather
            # than skip a line that carries one
            rate = _num(f.get("draft acceptance rate", ""))
            if rate is None or rate != rate:
                return ParsedLine(None, unknown)
            w.draft_acceptance_rate = rate / 100.0 if rate > 1 else rate
            w.cumulative = True
            return ParsedLine(w, unknown)
        w.format = "vllm-v1-early"
        w.accepted_tokens, w.drafted_tokens = acc, dra
        rate = _num(f.get("draft acceptance rate", ""))
        w.draft_acceptance_rate = rate if rate is not None and rate == rate else None
        if w.draft_acceptance_rate is None and acc is not None and dra:
            w.draft_acceptance_rate = acc / dra
        return ParsedLine(w if (dra or w.draft_acceptance_rate is not None) else None, unknown)

    mean = _num(f.get("mean acceptance length", ""))
    w.mean_acceptance_length = mean if mean is not None and mean == mean else None
    w.accepted_throughput = _num(f.get("accepted throughput", ""))
    w.drafted_throughput = _num(f.get("drafted throughput", ""))
    w.accepted_tokens = _int(f.get("accepted", ""))
    w.drafted_tokens = _int(f.get("drafted", ""))
    pp_text = f.get("per-position acceptance rate")
    w.per_position = _floats(pp_text) if pp_text else None
    rate_s = f.get("avg draft acceptance rate", f.get("draft acceptance rate", ""))
    rate = _num(rate_s)
    if rate is not None and rate == rate:
        w.draft_acceptance_rate = rate / 100.0 if rate_s.strip().endswith("%") else rate
    elif w.accepted_tokens is not None and w.drafted_tokens:
        w.draft_acceptance_rate = w.accepted_tokens / w.drafted_tokens
    if "accepted throughput" in f:
        w.format = "vllm-0.10.2+"
    elif "mean acceptance length" in f:
        w.format = "vllm-0.8.5"
    else:
        w.format = "vllm-0.8.3"
    # num_drafts: K = number of per-position values, checked against the mean.
    if w.per_position and w.drafted_tokens:
        w.num_drafts = _num_drafts(
            w.drafted_tokens, len(w.per_position), w.accepted_tokens, w.mean_acceptance_length
        )
    elif w.mean_acceptance_length and w.mean_acceptance_length > 1 and w.accepted_tokens:
        w.num_drafts = round(w.accepted_tokens / (w.mean_acceptance_length - 1)) or None
    if w.mean_acceptance_length is None and w.num_drafts and w.accepted_tokens is not None:
        w.mean_acceptance_length = 1.0 + w.accepted_tokens / w.num_drafts
    if w.drafted_tokens == 0:
        return ParsedLine(None, unknown, skipped=True)  # vLLM skips windows without drafts
    has_data = any(
        x is not None for x in (w.mean_acceptance_length, w.draft_acceptance_rate, w.drafted_tokens)
    )
    return ParsedLine(w if has_data else None, unknown)


def v0_window(
    prev: tuple[int, int, int, int] | None, cur: tuple[int, int, int, int]
) -> SpecWindow | None:
    """Turn two V0 cumulative readings into one window (the first reading: since start).

    V0's "accepted" counts every matching draft position, even after a rejection, so it is not
    V1's accepted. Normalised: drafts = drafted / k, mean length = emitted / drafts (emitted
    counts the bonus/recovered token), accepted = emitted - drafts.
    """
    k, _acc, dra, emi = cur
    if prev is not None and prev[2] <= dra and prev[3] <= emi and prev[0] == k:
        dra, emi = dra - prev[2], emi - prev[3]
    if dra <= 0 or k <= 0:
        return None
    drafts = dra / k
    w = SpecWindow(engine="vllm", format="vllm-v0")
    w.num_drafts = round(drafts)
    w.drafted_tokens = dra
    w.accepted_tokens = max(0, round(emi - drafts))
    w.mean_acceptance_length = emi / drafts
    w.draft_acceptance_rate = w.accepted_tokens / dra
    w.cumulative = prev is None
    return w


_SGL_KNOWN_PREFIXES = ("#", "token usage", "full token", "swa token", "mamba", "pre-allocated")
_SGL_KNOWN = {
    "accept len",
    "accept rate",
    "cap len",
    "block accept len",
    "cuda graph",
    "cpu graph",
    "npu graph",
    "gen throughput (token/s)",
    "largest-len",
    "input throughput (token/s)",
}


def parse_sglang(text: str) -> ParsedLine:
    """A `Decode batch` line; returns window None when it carries no `accept len`."""
    m = SGL_DECODE_RE.search(text)
    if not m:
        return ParsedLine(None)
    f = dict(split_fields(text[m.end() :]))
    unknown = sorted(k for k in f if k not in _SGL_KNOWN and not k.startswith(_SGL_KNOWN_PREFIXES))
    if "accept len" not in f:
        return ParsedLine(None, unknown)
    w = SpecWindow(engine="sglang", format="sglang" if "accept rate" in f else "sglang-accept-len")
    w.mean_acceptance_length = _num(f["accept len"])
    rate = _num(f.get("accept rate", ""))
    w.draft_acceptance_rate = rate
    w.generation_throughput = _num(f.get("gen throughput (token/s)", ""))
    w.running_reqs = _int(f.get("#running-req", ""))
    w.waiting_reqs = _int(f.get("#queue-req", ""))
    return ParsedLine(w if w.mean_acceptance_length is not None else None, unknown)


_COMPANION_RE = re.compile(
    r"Engine (\d+): Avg prompt throughput: (\d+\.\d+) tokens/s, Avg generation throughput: "
    r"(\d+\.\d+) tokens/s, Running: (\d+) reqs, Waiting: (\d+) reqs"
)


_PREFIX_HIT_RE = re.compile(r"Prefix cache hit rate: (\d+(?:\.\d+)?)%")


def parse_companion(text: str) -> dict[str, float | str]:
    """vLLM's `Engine 000: Avg prompt throughput: …` line logged just before the spec line."""
    out: dict[str, float | str] = {}
    hit = _PREFIX_HIT_RE.search(text)
    if hit:
        out["prefix_cache_hit_rate"] = float(hit.group(1)) / 100.0
    f = _COMPANION_RE.search(text)
    if f:
        out["engine"] = f"engine {int(f.group(1))}"
        out["prompt_throughput"] = float(f.group(2))
        out["generation_throughput"] = float(f.group(3))
        out["running"] = float(f.group(4))
        out["waiting"] = float(f.group(5))
        return out
    m = ENGINE_LABEL_RE.search(text)
    if not m:
        return out
    label = m.group(1)
    if label.startswith("Engine "):
        out["engine"] = f"engine {int(label.split()[1])}"
    else:
        out["engine"] = "aggregated"
    for k, v in split_fields(text[m.end() :]):
        x = _num(v)
        if x is None:
            continue
        if k == "avg generation throughput":
            out["generation_throughput"] = x
        elif k == "running":
            out["running"] = x
        elif k == "waiting":
            out["waiting"] = x
        elif k == "avg prompt throughput":
            out["prompt_throughput"] = x
    return out


# vLLM's version at start-up: `vLLM (API) server version X` (<= 0.31, >= 0.34), and the line
# every V1 launch logs, `Initializing a V1 LLM engine (vX) with config: …`
SERVER_VERSION_RE = re.compile(r"vLLM (?:API )?server version (\S+?),?(?:\s|$)")
V1_ENGINE_VERSION_RE = re.compile(r"Initializing a V1 LLM engine \(v([^)\s]+)\)")


def kv_cache_build(text: str) -> str | None:
    """ "cpu" or "gpu" from vLLM's `CPU/GPU KV cache usage` field (the `Engine 000:` line)."""
    if "CPU KV cache" in text:
        return "cpu"
    return "gpu" if "GPU KV cache" in text else None


def companion_busy(text: str) -> bool:
    """True when an `Engine NNN:` line shows requests running or tokens generated."""
    c = parse_companion(text)
    return bool(c.get("running") or c.get("generation_throughput") or c.get("waiting"))


_SPEC_CFG_RE = re.compile(r"speculative_config=(None|SpeculativeConfig\((.*?)\))(?:,|\s|$)")
_KV_RE = re.compile(r"(\w+)=('(?:[^']*)'|\"(?:[^\"]*)\"|[^,()]+)")


def parse_spec_config(text: str) -> dict[str, object] | None:
    """`speculative_config=SpeculativeConfig(method='dflash', …)` or SGLang `server_args=…`."""
    m = _SPEC_CFG_RE.search(text)
    if m:
        if m.group(1) == "None":
            return {"enabled": False, "engine": "vllm"}
        cfg: dict[str, object] = {"enabled": True, "engine": "vllm"}
        for k, v in _KV_RE.findall(m.group(2) or ""):
            cfg[k] = _plain(v)
        return cfg
    if "server_args=ServerArgs(" in text:
        fields = dict(_KV_RE.findall(text.split("server_args=ServerArgs(", 1)[1]))
        algo = _plain(fields.get("speculative_algorithm", "None"))
        cfg = {"enabled": algo not in (None, "None"), "engine": "sglang", "method": algo}
        for k in (
            "speculative_draft_model_path",
            "speculative_num_draft_tokens",
            "speculative_num_steps",
            "decode_log_interval",
        ):
            if k in fields:
                cfg[k] = _plain(fields[k])
        return cfg
    return None


def _plain(v: str) -> object:
    v = v.strip()
    if v[:1] in "'\"" and v[-1:] == v[:1]:
        return v[1:-1]
    if v == "None":
        return None
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return v
