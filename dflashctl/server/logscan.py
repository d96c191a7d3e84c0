"""Read a launch's log the way an engineer would: is it fatal yet, and what is the root cause?

`fatal(line)` says whether one line means the launch has failed (engine-formats.md §4 and §6
fatal strings; a `No module named` inside a WARNING is not fatal, vLLM's CPU build logs one).
`explain(lines)` picks the lines that explain a failure: the root cause first (the missing
module, the out-of-memory, the config error, the engine's own ERROR line), then the summary
(`Engine core initialization failed`), never just the last line. Pure functions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# vLLM's prefix (0.10.1+): "(APIServer pid=1) INFO 11-20 10:00:01 [file.py:12] "
VLLM_LEVEL = re.compile(r"\) (DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d ")
OLD_LEVEL = re.compile(r"^(DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d ")
# "(EngineCore pid=5) " or "[2026-11-20 10:00:40 TP0] " before a message
PREFIX = re.compile(r"^(?:\([\w\-]+ pid=\d+\) |\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[^\]]*\] )")
EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b(?::|$)")


@dataclass(frozen=True)
class Pattern:
    regex: re.Pattern[str]
    what: str
    root: bool  # a root cause (True) or a summary that points at one (False)
    hint: str | None = None


P = Pattern
FATAL = (
    P(
        re.compile(r"^(?:ModuleNotFoundError|ImportError): (?:No module named|cannot import)"),
        "a Python module is missing",
        True,
        "install it in the engine's environment (a wheel resolver may have picked the wrong "
        "flash-attn build: see `pip show flash-attn flash-attn-4`)",
    ),
    P(
        re.compile(r"CUDA out of memory|OutOfMemoryError"),
        "out of GPU memory",
        True,
        "lower --gpu-memory-utilization / --max-model-len, or stop what holds the GPU",
    ),
    P(re.compile(r"No available memory for the cache blocks"), "no memory for the KV cache", True),
    P(re.compile(r"larger than the available KV cache memory"), "KV cache too small", True),
    P(
        re.compile(r"Not enough memory\. Please try to increase --mem-fraction-static"),
        "not enough memory (SGLang)",
        True,
    ),
    P(re.compile(r"non-causal attention not supported"), "attention backend refused", True),
    P(re.compile(r"head_size not supported"), "attention backend refused", True),
    P(
        re.compile(r"is not a valid argument in the speculative_config"),
        "speculative config error",
        True,
    ),
    P(
        re.compile(r"num_speculative_tokens must be provided"),
        "speculative config error",
        True,
    ),
    P(re.compile(r"Unknown speculative method"), "speculative method unknown to this engine", True),
    P(
        re.compile(r"DFlash drafter expects \d+ concatenated aux hidden features"),
        "drafter/target mismatch",
        True,
        "check the drafter with: dflashctl verify-config DRAFTER --target TARGET",
    ),
    P(re.compile(r"For parallel drafting, the draft model config must have"), "drafter", True),
    P(re.compile(r"does not support: mixed sliding/full dflash drafts"), "drafter", True),
    P(re.compile(r"validation errors? for \w+"), "a config validation error", True),
    P(
        re.compile(r"Address already in use|error while attempting to bind on address"),
        "the port is already in use",
        True,
        "stop what holds the port (dflashctl status) or pick another --port",
    ),
    P(re.compile(r"Engine core initialization failed"), "engine initialisation failed", False),
    P(re.compile(r"Engine core process \d+ died unexpectedly"), "engine core died", False),
    P(re.compile(r"Worker proc \S+ died unexpectedly"), "a worker died", False),
    P(re.compile(r"\bEngineDeadError\b"), "the engine died", False),
    P(re.compile(r"Scheduler hit an exception"), "SGLang scheduler error", False),
    P(re.compile(r"Received sigquit from a child process"), "a child process failed", False),
)


def clean(line: str) -> str:
    return ANSI.sub("", line).rstrip("\r\n")


def level(line: str) -> str | None:
    m = VLLM_LEVEL.search(line) or OLD_LEVEL.match(line)
    return m.group(1) if m else None


def message(line: str) -> str:
    """The line without its engine prefix (vLLM `(Proc pid=N) LEVEL date [file:n] `, SGLang)."""
    m = VLLM_LEVEL.search(line)
    if m:
        rest = line[m.end() :]
        return rest.split("] ", 1)[1] if rest.startswith("[") and "] " in rest else rest
    m2 = OLD_LEVEL.match(line)
    if m2:
        rest = line[m2.end() :]
        if "] " in rest:
            return rest.split("] ", 1)[1]
        return rest
    return PREFIX.sub("", line)


# Progress bars engines draw into their logs while loading (tqdm: a count and a percentage)
PROGRESS_BAR = re.compile(r"^([A-Za-z][^%|]{2,80}?):?\s+(\d{1,3})%(?:\s*Completed)?\s*\|")
SGLANG_LINE = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[^\]]*\] ")


def phase(line: str) -> str | None:
    """What a start-up log line says the engine is doing, for a wait of minutes: an INFO or
    WARNING message (loading weights, compiling, capturing CUDA graphs), or the label and
    percentage of a progress bar; None for anything else (tracebacks, blank lines)."""
    text = clean(line).split("\r")[-1].strip()
    if not text:
        return None
    bar = PROGRESS_BAR.search(message(text))
    if bar:
        return f"{bar.group(1).strip()}: {bar.group(2)}%"
    lv = level(text)
    if lv in ("INFO", "WARNING") or (lv is None and SGLANG_LINE.match(text)):
        msg = message(text).strip()
        return _cut(msg, 100) if msg and not msg.startswith("INFO:") else None
    return None


def fatal(line: str) -> Pattern | None:
    """The fatal pattern this log line matches, if any (INFO/WARNING/DEBUG lines never are)."""
    line = clean(line)
    if level(line) in ("DEBUG", "INFO", "WARNING"):
        return None
    msg = message(line).strip()
    for pat in FATAL:
        target = msg if pat.regex.pattern.startswith("^") else line
        if pat.regex.search(target):
            return pat
    return None


def is_ready_line(line: str, ready_lines: tuple[str, ...]) -> bool:
    return any(r in line for r in ready_lines)


def explain(lines: list[str], limit: int = 6) -> list[str]:
    """The lines that explain a failed launch, root cause first."""
    lines = [clean(x) for x in lines]
    roots: list[str] = []
    summaries: list[str] = []
    seen: set[str] = set()
    for line in lines:
        pat = fatal(line)
        if pat is None:
            continue
        key = message(line).strip()
        if key in seen:
            continue
        seen.add(key)
        (roots if pat.root else summaries).append(line)
    if not roots:
        # no known root cause: the engine's own ERROR lines and raised exceptions before it
        # gave up (a traceback's last line names the exception)
        for line in lines:
            msg = message(line).strip()
            if fatal(line) is not None or msg in seen or not msg:
                continue
            if level(line) in ("ERROR", "CRITICAL") or EXCEPTION.match(msg):
                seen.add(msg)
                roots.append(line)
    picked = roots[: max(1, limit - min(2, len(summaries)))] + summaries[:2]
    if picked:
        return [_cut(x) for x in picked[:limit]]
    tail = [x for x in lines if x.strip()][-limit:]
    return [_cut(x) for x in tail]


def hint_for(lines: list[str]) -> str | None:
    for line in lines:
        pat = fatal(line)
        if pat is not None and pat.hint:
            return pat.hint
    return None


def _cut(line: str, width: int = 400) -> str:
    return line if len(line) <= width else line[: width - 3] + "..."
