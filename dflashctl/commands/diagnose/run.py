"""`dflashctl diagnose`: when acceptance is low, is it the drafter, its config, or the engine?

dflashctl owns a reference engine (the bundled one, `dflashctl/engine/`), so it can answer by
measurement: the same greedy prompts go to the production server and to the bundled engine
running the same target and drafter, and both report acceptance per position for exactly those
requests, plus the greedy text.

- production: streamed chat at temperature 0 (`server.client`); acceptance from `/metrics`
  counter deltas around each request (`metrics.spec_probe.PromProbe`), else from the lines its
  `--log`
  gains (`LogProbe`). Its engine, version and build from `/version` and the log's start-up lines
  (`facts.py`), which also show the config it really loaded.
- reference: the bundled engine on the same directories with production's K, in this process
  (`engine.generate.Engine`, float32 on CPU), or with `--host` launched on that host by
  `server.launch` on the host's paths and reached through an SSH forward (`hosts/tunnel.py`).
- config: `verify-config` on the drafter (and target), the server's effective config against
  the file, the mask token against the target's tokenizer.

Verdict (`judge`, pure): **config** when a config problem is found (or production drafts
nothing); **engine** when production keeps far fewer accepted tokens per draft than the
reference on the same greedy text (with the catalogued defects that match, `defects/catalogue.py`);
**drafter** when both agree and acceptance is low; else **healthy**. Returns data, raises typed
errors (exit 2), never prints.
"""

from __future__ import annotations

import json
import os
import posixpath
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from dflashctl.commands.diagnose.facts import (
    NOTE,
    PROBLEM,
    WARNING,
    Finding,
    LogFacts,
    defect_findings,
    drafter_path_finding,
    effective_config_findings,
    log_trust_findings,
    read_log_facts,
    tokenizer_mask_finding,
)
from dflashctl.commands.diagnose.measure import (
    BundledStep,
    Progress,
    Side,
    measure_in_process,
    measure_on_host,
    measure_server,
    pool,
    rounded,
)
from dflashctl.commands.diagnose.verdict import (
    DEFAULT_FLOOR,
    VERDICTS,
    Figures,
    Floor,
    PromptComparison,
    compare,
    first_divergence,
    judge,
)
from dflashctl.errors import DflashError, InputError, ServerError, UsageError, require_finite
from dflashctl.fixtures import Prompt, load_prompt_file, load_prompts

DEFAULT_MAX_TOKENS = 128

# a first difference this early is a different target or prompt, not kernel drift
EARLY_DIVERGENCE_CHARS = 24


@dataclass
class DiagnoseOptions:
    url: str  # a URL, HOST:PORT, or a deployment name (its record gives model, drafter, log)
    model: str | None = None  # target directory (on --host: its path there)
    drafter: str | None = None  # drafter directory
    log: str | None = None  # the production server's log (on --host: its path there)
    host: str | None = None
    prompts_file: Path | None = None
    max_tokens: int = DEFAULT_MAX_TOKENS
    timeout: float = 120.0
    min_acceptance_length: float | None = None
    dtype: str = "auto"  # the reference engine's: auto | float32 | bfloat16
    python: str | None = None  # the host's interpreter for the reference engine
    log_interval: float = 10.0  # production's stats interval, when acceptance comes from --log
    ready_timeout: float = 600.0
    ssh: Any = None  # hosts.ssh.SSHOptions for --host
    step: BundledStep = field(default_factory=BundledStep)  # a bundled production's step

    def validate(self) -> None:
        require_finite(
            timeout=self.timeout,
            log_interval=self.log_interval,
            min_acceptance_length=self.min_acceptance_length,
            ready_timeout=self.ready_timeout,
        )
        if not self.ready_timeout > 0:
            raise UsageError("--ready-timeout must be a positive number of seconds")
        if self.max_tokens < 1:
            raise UsageError("--max-tokens must be at least 1", "e.g. --max-tokens 128")
        if self.timeout <= 0:
            raise UsageError("--timeout must be a positive number of seconds")
        if self.log_interval <= 0:
            raise UsageError("--log-interval must be a positive number of seconds")
        if self.min_acceptance_length is not None and self.min_acceptance_length < 1:
            raise UsageError(
                "--min-acceptance-length counts the bonus token, so it is at least 1.0",
                "e.g. --min-acceptance-length 2.5",
            )
        if self.dtype not in ("auto", "float32", "bfloat16"):
            raise UsageError(f"--dtype {self.dtype!r}: use auto, float32 or bfloat16")
        for flag, value in (("--model", self.model), ("--drafter", self.drafter)):
            if value is None:
                raise UsageError(
                    f"diagnose needs {flag}: {self.url} is not a deployment that records it",
                    "pass --model DIR --drafter DIR, or the name of a deployment dflashctl "
                    "serve started (dflashctl status lists them)",
                )
            if not value.strip():
                raise UsageError("--model and --drafter must name directories")


@dataclass
class DiagnoseReport:
    verdict: str
    production: Side
    reference: Side
    findings: list[Finding]
    comparisons: list[PromptComparison]
    figures: Figures
    floor: Floor
    config_checked: list[str] = field(default_factory=list)  # what the config checks looked at
    max_tokens: int = DEFAULT_MAX_TOKENS

    @property
    def ok(self) -> bool:
        return self.verdict == "healthy"

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == PROBLEM]

    def to_json(self) -> dict[str, Any]:
        fig = self.figures
        return {
            "ok": self.ok,
            "verdict": self.verdict,
            "production": self.production.to_json(),
            "reference": self.reference.to_json(),
            "findings": [f.to_json() for f in self.findings],
            "comparison": {
                "basis": fig.basis,
                "prompts": fig.prompts,
                "same_text_prompts": fig.same_text,
                "production_mean_acceptance_length": rounded(fig.production, 4),
                "reference_mean_acceptance_length": rounded(fig.reference, 4),
                "production_per_position": [round(x, 4) for x in fig.production_per_position],
                "reference_per_position": [round(x, 4) for x in fig.reference_per_position],
                "per_prompt": [c.to_json() for c in self.comparisons],
            },
            "floor": {"mean_acceptance_length": self.floor.value, "source": self.floor.source},
            "config_checked": self.config_checked,
            "max_tokens": self.max_tokens,
        }


def _read_json(host: Any, path: str, what: str, max_bytes: int = 16 << 20) -> dict[str, Any]:
    from dflashctl.drafter.config import parse_json_object

    raw = host.read_file(path, max_bytes)
    return parse_json_object(raw, Path(host.where(path)), what)


def _remote_k_norm(host: Any, python: str, drafter: str) -> Any:
    """The drafter's k_norm weights read on the host by hosts/facts.py (only those bytes)."""
    import shlex

    from dflashctl.defects.k_norm import k_norm_from_facts as parse
    from dflashctl.hosts import FACTS_SCRIPT

    args: dict[str, Any] = {"ports": [], "paths": [], "hub": None, "k_norm": drafter}
    cmd = " ".join(
        shlex.quote(x)
        for x in (python, "-c", FACTS_SCRIPT.read_text(encoding="utf-8"), json.dumps(args))
    )
    res = host.sh(cmd, timeout=120.0)
    if res.rc != 0:
        return None
    try:
        return parse(json.loads(res.stdout).get("k_norm"))
    except (ValueError, AttributeError):
        return None


def _floor(opts: DiagnoseOptions, entry: Any) -> Floor:
    if opts.min_acceptance_length is not None:
        return Floor(opts.min_acceptance_length, "--min-acceptance-length")
    exp = getattr(entry, "expected_acceptance", None) if entry is not None else None
    lo = getattr(exp, "min", None) if exp is not None else None
    if isinstance(lo, int | float):
        return Floor(float(lo), f"the registry's expected minimum for {entry.name}")
    return Floor(DEFAULT_FLOOR, "dflashctl's default floor")


def _url_port(url: str) -> int | None:
    try:
        parts = urlsplit(url)
        return parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None


def run_diagnose(
    opts: DiagnoseOptions,
    *,
    progress: Progress | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> DiagnoseReport:
    from dflashctl.hosts import open_host
    from dflashctl.hosts.ssh import SSHOptions
    from dflashctl.server.targets import resolve_target

    # the target first (a URL, HOST:PORT or a deployment), before anything is sent
    target = resolve_target(opts.url)
    ssh = opts.ssh
    if target.name is not None:
        import dataclasses

        opts = dataclasses.replace(
            opts,
            model=opts.model or target.model_path,
            drafter=opts.drafter or target.drafter,
            log=opts.log if opts.log is not None else target.log,
            host=opts.host or target.host,
            step=BundledStep.from_command(target.cmd or [])
            if target.engine == "local"
            else opts.step,
        )
        if ssh is None and target.ssh_config:
            ssh = SSHOptions(ssh_config=target.ssh_config)
    opts.validate()
    say = progress or (lambda _m: None)
    url = target.url
    prompts = load_prompt_file(opts.prompts_file) if opts.prompts_file else load_prompts("smoke")
    with open_host(opts.host, ssh=ssh, python=opts.python) as host:
        return _run(opts, host, url, prompts, say, sleep)


@dataclass
class _Checkpoints:
    """The target and drafter directories (absolute, on the host) and what their configs say."""

    model: str
    drafter: str
    cfg: dict[str, Any]
    n_layers: int | None
    cfg_source: str  # where the drafter's config.json is, for messages


def _checkpoints(host: Any, opts: DiagnoseOptions) -> _Checkpoints:
    from dflashctl.drafter.config import target_text_config

    def absolute(path: str) -> str:
        return str(Path(path).resolve()) if host.is_local else host.abspath(path)

    assert opts.model is not None and opts.drafter is not None  # validate() saw to it
    model, drafter = absolute(opts.model), absolute(opts.drafter)
    for label, d in (("--model", model), ("--drafter", drafter)):
        if not host.is_dir(d):
            raise InputError(f"{label} {host.where(d)} is not a directory")
    cfg = _read_json(host, posixpath.join(drafter, "config.json"), "drafter config")
    t_cfg = _read_json(host, posixpath.join(model, "config.json"), "model config")
    n = target_text_config(t_cfg).get("num_hidden_layers")
    where = host.where(posixpath.join(drafter, "config.json"))
    return _Checkpoints(model, drafter, cfg, n if isinstance(n, int) else None, where)


def _run(
    opts: DiagnoseOptions,
    host: Any,
    url: str,
    prompts: list[Prompt],
    say: Progress,
    sleep: Callable[[float], None],
) -> DiagnoseReport:
    ck = _checkpoints(host, opts)

    # The production server's log: a missing or unreadable --log is exit 2, before any request.
    log_obj: Any = None
    facts: LogFacts | None = None
    size_before = 0
    if opts.log is not None:
        from dflashctl.metrics.spec_probe import HostLog, LocalLog

        log_path = os.path.abspath(opts.log) if host.is_local else host.abspath(opts.log)
        log_obj = LocalLog(Path(log_path)) if host.is_local else HostLog(host, log_path)
        size_before = log_obj.size()
        say(f"reading the start-up lines of {host.where(log_path)}")
        facts = read_log_facts(host.iter_file(log_path), host.where(log_path))

    production = Side("production", url)
    measure_server(
        production,
        url,
        prompts,
        max_tokens=opts.max_tokens,
        timeout=opts.timeout,
        log=log_obj,
        log_where=facts.path if facts else "",
        log_interval=opts.log_interval,
        say=say,
        sleep=sleep,
    )
    if not any(a.ok for a in production.answers):
        first = production.answers[0].error if production.answers else "no answer"
        raise ServerError(
            f"the production server answered none of the {len(prompts)} prompts: {first}",
            "read its log; a server that passes /health can still die on its first request",
        )

    # the bundled engine's step: the deployment's record, else what its /version says
    step = opts.step or production.step or BundledStep()
    k = production.num_speculative_tokens
    if k is None and facts is not None:
        k = facts.num_speculative_tokens
    reference = Side("reference", "in-process on this machine")
    decode = None
    if host.is_local:
        decode = measure_in_process(
            reference,
            Path(ck.model),
            Path(ck.drafter),
            prompts,
            max_tokens=opts.max_tokens,
            k=k,
            dtype=opts.dtype,
            say=say,
            step=step,
        )
    else:
        measure_on_host(
            reference,
            host,
            prompts,
            production,
            model=opts.model or ck.model,
            drafter=opts.drafter or ck.drafter,
            host_spec=opts.host,
            k=k,
            dtype=opts.dtype,
            python=opts.python,
            max_tokens=opts.max_tokens,
            timeout=opts.timeout,
            ready_timeout=opts.ready_timeout,
            say=say,
            step=step,
        )

    findings: list[Finding] = []
    trusted: LogFacts | None = None
    if facts is not None:
        grew = log_obj.size() > size_before
        deadline = time.monotonic() + opts.log_interval
        while not grew and time.monotonic() < deadline:  # stats lines come every interval
            sleep(0.25)
            grew = log_obj.size() > size_before
        use, log_findings = log_trust_findings(facts, _url_port(url), grew)
        findings += log_findings
        production.log = facts
        if use:
            trusted = facts
            production.engine = facts.engine or production.engine
            production.version = facts.version or production.version
            production.build = facts.build

    checked: list[str] = []
    config, entry = _config_findings(host, opts, ck, production, trusted, checked, say)
    findings += config
    comparisons = compare(production, reference, decode)
    findings += _text_findings(production, reference, comparisons)

    figures = _figures(production, reference, comparisons)
    floor = _floor(opts, entry)
    verdict, more = judge(figures, floor, findings)
    findings += more
    if production.engine in ("vllm", "sglang"):
        findings += _engine_defects(host, opts, ck, production, verdict, trusted, checked)
    order = {PROBLEM: 0, WARNING: 1, NOTE: 2}
    findings.sort(key=lambda f: order.get(f.severity, 3))
    return DiagnoseReport(
        verdict,
        production,
        reference,
        findings,
        comparisons,
        figures,
        floor,
        checked,
        opts.max_tokens,
    )


def _config_findings(
    host: Any,
    opts: DiagnoseOptions,
    ck: _Checkpoints,
    production: Side,
    facts: LogFacts | None,
    checked: list[str],
    say: Progress,
) -> tuple[list[Finding], Any]:
    """verify-config, the server's effective config (from trusted log facts) against the file,
    and the mask token against the target's tokenizer. Returns (findings, registry entry)."""
    from dflashctl.drafter.config import resolve
    from dflashctl.drafter.verify import run_verify

    out: list[Finding] = []
    engine = production.engine if production.engine in ("vllm", "sglang", "local") else "vllm"
    say(f"verify-config on {ck.cfg_source} (engine {engine})")
    checked.append(
        f"verify-config {ck.cfg_source} --target {host.where(ck.model)} --engine {engine}"
    )
    report = run_verify(Path(ck.drafter), target=Path(ck.model), engine=engine, host=opts.host)
    fix = f"dflashctl verify-config {opts.drafter} --fix"
    fix += f" --drafter {report.entry.name}" if report.entry else ""
    fix += f" --host {opts.host}" if opts.host else ""
    for c in report.checks:
        if c.failed:
            msg = f"verify-config: {c.name} is {c.status}: found {json.dumps(c.found, default=str)}"
            if c.expected is not None:
                msg += f", expected {json.dumps(c.expected, default=str)}"
            out.append(Finding("config", msg, [c.hint] if c.hint else [], fix=fix))
    # the bundled engine resolves like vLLM's V2 runner; vLLM's CPU build and default: V1
    resolved = resolve(ck.cfg, ck.n_layers, "v2" if production.engine == "local" else "v1")
    if facts is not None:
        checked.append(f"the server's start-up lines in {facts.path}")
        out += effective_config_findings(facts, resolved, ck.drafter, ck.cfg_source)
        served = None
        if facts.drafter_path:
            try:
                served = _read_json(
                    host, posixpath.join(facts.drafter_path, "config.json"), "served config"
                )
            except DflashError:
                served = None
        f = drafter_path_finding(facts, ck.drafter, served, ck.cfg)
        if f is not None:
            out.append(f)
    tok_path = posixpath.join(ck.model, "tokenizer.json")
    if host.stat(tok_path) is not None:
        checked.append(f"mask token against {host.where(tok_path)}")
        try:
            tok = _read_json(host, tok_path, "tokenizer", 256 << 20)
        except DflashError as e:
            out.append(Finding("config", f"tokenizer not read: {e.message}", [], NOTE))
        else:
            f = tokenizer_mask_finding(tok, resolved, ck.cfg_source)
            if f is not None:
                out.append(f)
    return out, report.entry


def _text_findings(
    production: Side, reference: Side, comparisons: list[PromptComparison]
) -> list[Finding]:
    """Prompts tokenized differently, greedy texts that differ, requests production failed."""
    out: list[Finding] = []
    for pa, ra in zip(production.answers, reference.answers, strict=False):
        pt, rt = pa.prompt_tokens, ra.prompt_tokens
        if pt is not None and rt is not None and pt != rt:
            out.append(
                Finding(
                    "text",
                    f"{pa.prompt_id}: production counts {pt} prompt tokens, the reference {rt}: "
                    "the chat template or tokenizer differs, so the engines do not see the same "
                    "prompt",
                    [],
                    WARNING,
                    "serve the target directory's own tokenizer and chat template",
                )
            )
    diverged = [c for c in comparisons if c.same_text is False]
    early = [c for c in diverged if c.char is not None and c.char < EARLY_DIVERGENCE_CHARS]
    if diverged and not early:
        # verify kernels are not bit-identical to decode ones: in bf16 greedy text drifts after
        # a while with nothing wrong (SGLang's DFLASH notes, NVIDIA Model-Optimizer#1211);
        # acceptance is what the verdict compares
        out.append(
            Finding(
                "text",
                f"the greedy text drifts apart late on {len(diverged)} of {len(comparisons)} "
                f"prompts (first difference at character {min(c.char or 0 for c in diverged)} or "
                "later): expected between engines whose verify kernels differ from their decode "
                "kernels in bf16; the verdict compares acceptance and per-position rates, not text",
                [],
                NOTE,
                "compare in float32 where both engines allow it for byte-identical text",
            )
        )
    elif diverged:
        out.append(
            Finding(
                "text",
                f"the greedy text differs between the engines early (within the first "
                f"{EARLY_DIVERGENCE_CHARS} characters) on {len(early)} of {len(comparisons)} "
                "prompts: a target-side difference (dtype, quantization, another checkpoint or "
                "revision, a chat template)",
                [
                    f"{c.prompt_id}: first difference at character {c.char}"
                    + (f" (token {c.token})" if c.token is not None else "")
                    + f": production {c.production_excerpt!r} vs reference "
                    f"{c.reference_excerpt!r}"
                    for c in early
                ],
                WARNING,
                "serve the same checkpoint and dtype as the drafter was trained against",
            )
        )
    failed = [a for a in production.answers if not a.ok]
    if failed:
        out.append(
            Finding(
                "production",
                f"the production server failed {len(failed)} of {len(production.answers)} requests",
                [f"{a.prompt_id}: {a.error}" for a in failed],
                WARNING,
            )
        )
    return out


def _engine_defects(
    host: Any,
    opts: DiagnoseOptions,
    ck: _Checkpoints,
    production: Side,
    verdict: str,
    facts: LogFacts | None,
    checked: list[str],
) -> list[Finding]:
    """The catalogue's known defects of the production engine that can lower acceptance."""
    from dflashctl.defects.predicates import Facts

    k_norm = None
    if not host.is_local:
        k_norm = _remote_k_norm(host, opts.python or host.python, ck.drafter)
    dfacts = Facts(
        engine=str(production.engine),
        version=production.version,
        build=production.build,
        drafter_config=ck.cfg,
        drafter_dir=Path(ck.drafter) if host.is_local else None,
        num_target_layers=ck.n_layers,
        k_norm=k_norm,
    )
    checked.append(
        f"known engine defects for {production.engine} {production.version or '(version ?)'}"
        f" ({production.build or 'build ?'})"
    )
    try:
        matches = match_defects(dfacts)
    except DflashError as e:
        return [Finding("engine", f"defect catalogue not matched: {e.message}", [], NOTE)]
    return defect_findings(matches, verdict, facts)


def match_defects(facts: Any) -> list[Any]:
    """`defects.match`, possible entries included. vLLM's /version carries no build label
    (`0.32.0` on the CPU build too), so with no log the build is unknown: entries that hold for
    one build only come back as possible, with the build as what was not checked."""
    import dataclasses

    from dflashctl.defects.match import match

    if facts.build is not None or facts.engine != "vllm":
        return match(facts, include_possible=True)
    by_build = {
        b: {
            m.defect.id: m
            for m in match(dataclasses.replace(facts, build=b), include_possible=True)
        }
        for b in ("cpu", "gpu")
    }
    out = []
    for b, found in by_build.items():
        other = by_build["gpu" if b == "cpu" else "cpu"]
        for i, m in found.items():
            if i in other:
                if b == "cpu":
                    out.append(m)
                continue
            m.certainty = "possible"
            m.evidence = [e for e in m.evidence if not e.endswith(" build")]
            m.unchecked.append(f"the build is not known (this holds on the {b} build): pass --log")
            out.append(m)
    return out


def _figures(production: Side, reference: Side, comparisons: list[PromptComparison]) -> Figures:
    """Pool the windows of the prompts with the same greedy text (when production was measured
    per request and there are any), else of all prompts."""
    answered = [c for c in comparisons if c.same_text is not None]
    same = [c for c in answered if c.same_text]
    per_request = all(a.window is not None or not a.ok for a in production.answers) and any(
        a.window is not None for a in production.answers
    )
    basis = "all prompts"
    pw, rw = production.window, reference.window
    if per_request and same and len(same) < len(answered):
        ids = {c.prompt_id for c in same}
        pw = pool([a.window for a in production.answers if a.prompt_id in ids])
        rw = pool([a.window for a in reference.answers if a.prompt_id in ids])
        basis = "same-text prompts"
    elif same and len(same) == len(answered):
        basis = "same-text prompts"
    return Figures(
        production=pw.mean_acceptance_length if pw else None,
        reference=rw.mean_acceptance_length if rw else None,
        production_per_position=tuple(pw.per_position or ()) if pw else (),
        reference_per_position=tuple(rw.per_position or ()) if rw else (),
        production_drafts=pw.num_drafts if pw else None,
        reference_drafts=rw.num_drafts if rw else None,
        prompts=len(answered),
        same_text=len(same),
        basis=basis,
        production_state=production.state,
    )


__all__ = [
    "VERDICTS",
    "DiagnoseOptions",
    "DiagnoseReport",
    "Figures",
    "Finding",
    "Floor",
    "Side",
    "first_divergence",
    "judge",
    "load_prompt_file",
    "run_diagnose",
]
