"""What `diagnose` learns besides acceptance: the production server's start-up facts from its log,
the config it really runs compared with the file, the mask token against the target's tokenizer,
and the known engine defects that apply (`defects/catalogue.py`). Pure functions over data plus
small
readers through a `dflashctl.hosts.host.Host`; findings are data; no printing.

Log facts are taken from the latest launch in the log (a new `vLLM server version` or `dflashctl
engine version` line starts a launch). vLLM 0.32 lines used (shared docs vllm-cpu.md §6.6):
`vLLM server version X, serving model M`, `Initializing a V1 LLM engine (vX) with config: …
speculative_config=SpeculativeConfig(…)`, `non-default args: {…}`, `Using auxiliary layers from
speculative config: (1, 3)`, `CPU KV cache …` (the CPU build), `Starting vLLM server on
http://0.0.0.0:8011`; the bundled engine's `DFlash: block size 8, num_speculative_tokens 7, mask
token 3`; dflashctl's vLLM plugin's `dflashctl: applied the DFlash context k_norm fix`.
"""

from __future__ import annotations

import ast
import json
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from dflashctl import report
from dflashctl.drafter.config import Resolved
from dflashctl.metrics.log_parse import (
    SERVER_VERSION_RE,
    V1_ENGINE_VERSION_RE,
    clean,
    kv_cache_build,
    parse_spec_config,
)

# ---- findings --------------------------------------------------------------------------------

PROBLEM, WARNING, NOTE = "problem", "warning", "note"
# a finding's severity -> its level (dflashctl/report.py): a problem fails, a note is ok
LEVEL_OF = {PROBLEM: report.FAIL, WARNING: report.WARNING, NOTE: report.OK}


@dataclass
class Finding:
    """One thing diagnose found. `problem` findings decide the verdict's kind; `warning` and
    `note` are shown with it."""

    kind: str  # config | engine | drafter | text | log | production | measurement
    message: str
    evidence: list[str] = field(default_factory=list)
    severity: str = PROBLEM
    fix: str | None = None
    defect: str | None = None  # a catalogue id (defects.yaml)

    @property
    def level(self) -> str:
        return LEVEL_OF[self.severity]

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "severity": self.severity,
            "message": self.message,
            "evidence": self.evidence,
            "fix": self.fix,
            "defect": self.defect,
            "level": self.level,
        }


# ---- the production server's log -----------------------------------------------------------

KNORM_FIX_LINE = "dflashctl: applied the DFlash context k_norm fix"
# catalogue id -> the log line that shows the fix was applied in that server
LOG_MITIGATIONS = {"vllm-cpu-context-k-norm": KNORM_FIX_LINE}

# a launch starts: vLLM <= 0.31 and >= 0.34 log `vLLM server version X`, 0.32 draws a logo whose
# last row ends with `version X`; the bundled engine logs `dflashctl engine version X,`
_LAUNCH = re.compile(
    SERVER_VERSION_RE.pattern
    + r"|[\u2580\u2584\u2588]\s+version (\d\S*)\s*$|dflashctl engine version (\S+?),"
)
_AUX = re.compile(r"Using auxiliary layers from speculative config: \(([-\d,\s]*)\)")
_LOCAL_DFLASH = re.compile(
    r"DFlash: block size (\d+), num_speculative_tokens (\d+), mask token (-?\d+)"
)
_PORT = re.compile(
    r"(?:Starting vLLM server on|Starting vLLM-compatible server on|Uvicorn running on) "
    r"https?://\[?[^\s\]]*?\]?:(\d+)"
)
_NON_DEFAULT = re.compile(r"non-default args: (\{.*\})\s*$")
_ARCH = re.compile(r"Resolved architecture: (\w+)")


@dataclass
class LogFacts:
    """The latest launch's start-up lines, as read from the production server's log."""

    path: str
    size: int = 0
    launches: int = 0
    engine: str | None = None  # vllm | local
    version: str | None = None
    build: str | None = None  # cpu | gpu (vLLM's KV cache lines)
    architectures: list[str] = field(default_factory=list)
    aux_layers: list[int] | None = None  # `Using auxiliary layers from speculative config`
    mask_token_id: int | None = None  # the bundled engine says which mask token it uses
    num_speculative_tokens: int | None = None
    drafter_path: str | None = None  # the drafter the server was started with
    port: int | None = None
    knorm_fix: bool = False
    spec_configured: bool | None = None  # speculative_config=None → False

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "size": self.size,
            "launches": self.launches,
            "engine": self.engine,
            "version": self.version,
            "build": self.build,
            "architectures": self.architectures,
            "aux_layers": self.aux_layers,
            "mask_token_id": self.mask_token_id,
            "num_speculative_tokens": self.num_speculative_tokens,
            "drafter_path": self.drafter_path,
            "port": self.port,
            "knorm_fix_applied": self.knorm_fix,
            "speculative_config": self.spec_configured,
        }


def _ints(text: str) -> list[int]:
    return [int(x) for x in re.findall(r"-?\d+", text)]


def _non_default_args(line: str) -> dict[str, Any] | None:
    m = _NON_DEFAULT.search(line)
    if not m:
        return None
    try:
        value = ast.literal_eval(m.group(1))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def read_log_facts(chunks: Iterable[bytes], path: str) -> LogFacts:
    """Scan a log (chunks of bytes, any size) for the latest launch's start-up facts."""
    facts = LogFacts(path)
    size = 0
    partial = b""
    for chunk in chunks:
        size += len(chunk)
        lines = (partial + chunk).split(b"\n")
        partial = lines.pop()
        for raw in lines:
            facts = _line(facts, raw)
    if partial:
        facts = _line(facts, partial)
    facts.size = size
    return facts


def _line(facts: LogFacts, raw: bytes) -> LogFacts:
    if len(raw) > 1 << 16:  # a wall of config text or binary garbage: nothing we read is there
        raw = raw[: 1 << 16]
    text = clean(raw)
    m = _LAUNCH.search(text)
    if m:
        launches = facts.launches + 1
        facts = LogFacts(facts.path, launches=launches)
        facts.engine = "local" if m.group(3) else "vllm"
        facts.version = m.group(1) or m.group(2) or m.group(3)
        return facts
    if (m := V1_ENGINE_VERSION_RE.search(text)) is not None:
        facts.engine = facts.engine or "vllm"
        facts.version = facts.version or m.group(1)
    if "speculative_config=" in text:
        spec = parse_spec_config(text)
        if spec is not None and spec.get("engine") == "vllm":
            facts.spec_configured = bool(spec.get("enabled"))
            k = spec.get("num_spec_tokens", spec.get("num_speculative_tokens"))
            if isinstance(k, int):
                facts.num_speculative_tokens = k
            if isinstance(spec.get("model"), str) and facts.drafter_path is None:
                facts.drafter_path = str(spec["model"])
    if "non-default args:" in text:
        args = _non_default_args(text)
        if args is not None:
            sc = args.get("speculative_config")
            if isinstance(sc, str):
                try:
                    sc = json.loads(sc)
                except ValueError:
                    sc = None
            if isinstance(sc, dict):
                facts.spec_configured = True
                if isinstance(sc.get("model"), str):
                    facts.drafter_path = sc["model"]
                if isinstance(sc.get("num_speculative_tokens"), int):
                    facts.num_speculative_tokens = sc["num_speculative_tokens"]
            if isinstance(args.get("drafter"), str) and args["drafter"] not in ("None", ""):
                facts.drafter_path = args["drafter"]  # the bundled engine
                facts.spec_configured = True
    if (m := _AUX.search(text)) is not None:
        facts.aux_layers = _ints(m.group(1))
    if (m := _LOCAL_DFLASH.search(text)) is not None:
        facts.num_speculative_tokens = int(m.group(2))
        facts.mask_token_id = int(m.group(3))
    if (m := _ARCH.search(text)) is not None and m.group(1) not in facts.architectures:
        facts.architectures.append(m.group(1))
    if (m := _PORT.search(text)) is not None:
        facts.port = int(m.group(1))
    if KNORM_FIX_LINE in text:
        facts.knorm_fix = True
    if facts.engine != "local" and (build := kv_cache_build(text)) is not None:
        facts.build = "cpu" if build == "cpu" else facts.build or build
    return facts


def log_trust_findings(
    facts: LogFacts, url_port: int | None, grew: bool | None
) -> tuple[bool, list[Finding]]:
    """(use the facts?, findings): a log of another server, or one that did not grow while the
    production server answered (the field story's stale log), is not evidence about it."""
    out: list[Finding] = []
    usable = True
    if facts.launches == 0 and facts.port is None and facts.engine is None:
        out.append(
            Finding(
                "log",
                f"{facts.path} holds no engine start-up line: the server's effective config "
                "cannot be read from it",
                ["no `vLLM server version` or `dflashctl engine version` line"],
                WARNING,
                "pass the log the server writes from its start (vllm serve … > LOG 2>&1)",
            )
        )
    if facts.port is not None and url_port is not None and facts.port != url_port:
        usable = False
        out.append(
            Finding(
                "log",
                f"the log's latest launch listens on port {facts.port}, the URL on port "
                f"{url_port}: it is another server's log, so its start-up facts are not used",
                [f"{facts.path}: started on port {facts.port}"],
                WARNING,
                "pass the log of the server at URL",
            )
        )
    if grew is False:
        usable = False
        out.append(
            Finding(
                "log",
                f"{facts.path} did not grow while the production server answered: a stale log "
                "(an earlier launch, or another file), so its start-up facts are not used",
                [f"size {facts.size} bytes before and after the requests"],
                WARNING,
                "find the running server's log: ls -l --time-style=full-iso LOG; "
                "ps -o pid,lstart,args -C vllm",
            )
        )
    return usable, out


# ---- the config the server really runs, against the file ----------------------------------


def expected_aux_line(r: Resolved) -> list[int] | None:
    """The layers the engine logs as `Using auxiliary layers from speculative config:`, or None
    when it logs no such line (V1: no dflash_config ids, it falls back to its defaults)."""
    src = r.captured_source or ""
    if src.startswith("dflash_config") or "eagle" in src:
        return [int(x) for x in (r.captured_layers or []) if isinstance(x, int)]
    return None


def effective_config_findings(
    facts: LogFacts, resolved: Resolved, drafter: str, cfg_source: str
) -> list[Finding]:
    """The server's start-up lines against the drafter's config.json at `drafter`."""
    out: list[Finding] = []
    if facts.spec_configured is False:
        out.append(
            Finding(
                "config",
                "the production server was started without speculative decoding "
                "(speculative_config=None)",
                [f"{facts.path}: speculative_config=None"],
                fix="relaunch with the drafter (vLLM --speculative-config "
                '\'{"method":"dflash","model":DIR,"num_speculative_tokens":K}\')',
            )
        )
        return out
    if facts.engine in ("vllm", "local") and facts.spec_configured:
        want = expected_aux_line(resolved)
        ids = resolved.effective_target_layer_ids
        if want is not None and facts.aux_layers is None:
            out.append(
                Finding(
                    "config",
                    "the server logged no `Using auxiliary layers from speculative config:` "
                    f"line, but {cfg_source} gives target_layer_ids {ids} (it would log "
                    f"{tuple(want)}): the drafter config it loaded has no dflash_config ids, so "
                    "it captures its default layers (2, L//2, L-3)",
                    [f"{facts.path}: no `Using auxiliary layers` line in the latest launch"],
                    fix="serve the drafter whose config.json you checked (keep target_layer_ids "
                    "inside dflash_config), then restart the server",
                )
            )
        elif want is not None and facts.aux_layers is not None and facts.aux_layers != want:
            out.append(
                Finding(
                    "config",
                    f"the server captures target layers {tuple(facts.aux_layers)}, but "
                    f"{cfg_source} says target_layer_ids {ids} → {tuple(want)}: the server "
                    "runs another config than this file (a fix written but never loaded, or "
                    "another copy of the drafter)",
                    [
                        f"{facts.path}: Using auxiliary layers from speculative config: "
                        f"{tuple(facts.aux_layers)}",
                        f"{cfg_source}: target_layer_ids {ids} (+1 = {tuple(want)})",
                    ],
                    fix="restart the server on the corrected drafter directory",
                )
            )
        elif want is None and facts.aux_layers is not None:
            out.append(
                Finding(
                    "config",
                    f"the server captures target layers {tuple(facts.aux_layers)} from a "
                    f"dflash_config, but {cfg_source} has none there ({resolved.captured_source})"
                    ": the server runs another config than this file",
                    [
                        f"{facts.path}: Using auxiliary layers from speculative config: "
                        f"{tuple(facts.aux_layers)}"
                    ],
                    fix="diagnose the drafter directory the server really serves",
                )
            )
    fm, rm = facts.mask_token_id, resolved.mask_token_id
    if fm is not None and rm is not None and fm != rm:
        out.append(
            Finding(
                "config",
                f"the server uses mask token {facts.mask_token_id}, {cfg_source} says "
                f"{resolved.mask_token_id}: it runs another config than this file",
                [
                    f"{facts.path}: mask token {facts.mask_token_id}",
                    f"{cfg_source}: {resolved.mask_source} = {resolved.mask_token_id}",
                ],
                fix="restart the server on the corrected drafter directory",
            )
        )
    return out


def drafter_path_finding(
    facts: LogFacts, drafter: str, served_cfg: dict[str, Any] | None, cfg: dict[str, Any]
) -> Finding | None:
    """The server was started on another drafter directory than the one given: a problem when
    that directory's config.json differs from this one, a note when it is the same."""
    served = facts.drafter_path
    if not served or posixpath.normpath(served) == posixpath.normpath(drafter):
        return None
    if served_cfg is None:
        return Finding(
            "config",
            f"the server was started with the drafter {served}, you passed {drafter}; its "
            "config.json could not be read to compare",
            [f"{facts.path}: drafter {served}"],
            WARNING,
            "pass --drafter with the directory the server serves",
        )
    if served_cfg != cfg:
        keys = sorted(k for k in set(served_cfg) | set(cfg) if served_cfg.get(k) != cfg.get(k))
        return Finding(
            "config",
            f"the server serves the drafter at {served}, whose config.json differs from "
            f"{drafter}/config.json in {', '.join(keys)}",
            [f"{k}: served {served_cfg.get(k)!r}, given {cfg.get(k)!r}" for k in keys][:8],
            fix="make the served copy the checked one, then restart the server",
        )
    return Finding(
        "config",
        f"the server serves the drafter at {served} (same config.json as {drafter})",
        [f"{facts.path}: drafter {served}"],
        NOTE,
    )


# ---- the mask token against the target's tokenizer -----------------------------------------

_MASK_NAME = re.compile(r"mask", re.IGNORECASE)


def tokenizer_mask_finding(
    tokenizer_json: dict[str, Any], resolved: Resolved, cfg_source: str
) -> Finding | None:
    """When the target's tokenizer has a dedicated mask token and the config's mask id names
    another token that exists (an ordinary piece of text, or another special), the drafter fills
    its block with the wrong token: acceptance collapses while the output stays coherent."""
    mask = resolved.mask_token_id
    if mask is None:
        return None
    added = tokenizer_json.get("added_tokens")
    if not isinstance(added, list):
        return None
    masks = {
        int(t["id"]): str(t.get("content"))
        for t in added
        if isinstance(t, dict)
        and isinstance(t.get("id"), int)
        and _MASK_NAME.search(str(t.get("content", "")))
    }
    if not masks or mask in masks:
        return None
    name = None
    for t in added:
        if isinstance(t, dict) and t.get("id") == mask:
            name = f"the special token {t.get('content')!r}"
    if name is None:
        vocab = (tokenizer_json.get("model") or {}).get("vocab")
        if isinstance(vocab, dict):
            for piece, i in vocab.items():
                if i == mask:
                    name = f"the ordinary text token {piece!r}"
                    break
    if name is None:
        return None  # outside the tokenizer (inside a padded embedding): nothing to compare
    want = ", ".join(f"{c} = {i}" for i, c in sorted(masks.items()))
    return Finding(
        "config",
        f"mask_token_id {mask} ({resolved.mask_source}) is {name} of the target's tokenizer, "
        f"whose mask token is {want}: the drafter's block is filled with the wrong token",
        [f"{cfg_source}: {resolved.mask_source} = {mask}", f"tokenizer.json: {want}"],
        fix=f"set dflash_config.mask_token_id to {min(masks)} (the token it was trained with)",
    )


# ---- known engine defects --------------------------------------------------------------------

ACCEPTANCE_EFFECTS = ("low_acceptance", "zero_acceptance", "wrong_layers", "long_context_cliff")


def defect_findings(matches: list[Any], verdict: str, facts: LogFacts | None) -> list[Finding]:
    """Catalogue matches (`defects.DefectMatch`) that can lower acceptance, as findings: a
    problem when the verdict is `engine` and the match is confirmed or likely and unmitigated;
    otherwise a warning (possible) or a note (matches by its facts, but not what was measured)."""
    out: list[Finding] = []
    for m in matches:
        d = m.defect
        if d.effect not in ACCEPTANCE_EFFECTS:
            continue
        mitigated = m.mitigated
        line = LOG_MITIGATIONS.get(d.id)
        if not mitigated and facts is not None and line and facts.knorm_fix:
            mitigated = f"the server's log shows `{line}`"
        evidence = list(m.evidence)
        evidence += [f"not checked: {u}" for u in m.unchecked]
        if mitigated:
            evidence.append(f"mitigated: {mitigated}")
        if verdict == "engine" and not mitigated and m.certainty in ("confirmed", "likely"):
            severity, msg = PROBLEM, f"known engine defect {d.id} ({m.certainty}): {d.title}"
        elif verdict == "engine" and not mitigated:
            severity = WARNING
            msg = f"possibly the known engine defect {d.id}: {d.title}"
        elif m.certainty == "possible":
            continue
        elif mitigated:
            severity = NOTE
            msg = f"known engine defect {d.id} applies by its facts and is mitigated: {d.title}"
        else:
            severity = NOTE
            msg = (
                f"known engine defect {d.id} applies by its facts ({m.certainty}), but "
                f"production's acceptance matches the reference here: {d.title}"
            )
        out.append(Finding("engine", msg, evidence, severity, d.fix, d.id))
    return out
