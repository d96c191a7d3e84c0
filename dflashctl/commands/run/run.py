"""`dflashctl run PLAYBOOK`: fetch → verify-config → serve → smoke → metrics, per host.

Each step calls the domain function of its command (fetch.run.fetch, drafter.verify.run_verify,
serve.launch, smoke.run_smoke, metrics.analyze_source) and keeps its report; a host stops at its
first failing step. Servers stay up unless `teardown`. Pure orchestration: the caller renders
the `StepEvent`s and the `RunReport`.

Playbook sections `run` adds (next to `serve`, see playbook.py):
    fetch:   {drafter: NAME|org/repo, revision: SHA, dir: PATH}   download before serving
    verify:  {registry: NAME, engine: vllm|sglang|local}          what verify-config checks
             (a llama.cpp serve skips it unless verify.engine is given)
    smoke:   {max_tokens: N, min_tokens_per_s: X, timeout: S, prompts: [...],
              repetition: fail|warn}                               warn: loops are a warning
    metrics: {min_acceptance_length: X}
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dflashctl.errors import DflashError, UsageError
from dflashctl.server.engines import own_speculation

STEPS = ("fetch", "verify-config", "serve", "smoke", "metrics")


@dataclass
class StepResult:
    name: str
    status: str  # ok | fail | skip | error (could not run)
    summary: str
    seconds: float = 0.0
    detail: Any = None  # the step's own JSON report
    hint: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.name,
            "status": self.status,
            "summary": self.summary,
            "seconds": round(self.seconds, 2),
            "hint": self.hint,
            "report": self.detail,
        }


@dataclass
class HostRun:
    host: str
    name: str
    steps: list[StepResult] = field(default_factory=list)
    url: str | None = None
    pid: int | None = None
    log: str | None = None
    ready_s: float | None = None
    mean_acceptance_length: float | None = None
    per_position: list[float] | None = None
    decode_tokens_per_s: float | None = None
    alarms: list[dict[str, Any]] = field(default_factory=list)
    torn_down: bool = False

    @property
    def ok(self) -> bool:
        return bool(self.steps) and all(s.status in ("ok", "skip") for s in self.steps)

    def step(self, name: str) -> StepResult | None:
        return next((s for s in self.steps if s.name == name), None)

    def to_json(self) -> dict[str, Any]:
        cfg = self.step("verify-config")
        smoke = self.step("smoke")
        return {
            "host": self.host,
            "name": self.name,
            "ok": self.ok,
            "config_ok": cfg.status == "ok" if cfg else None,
            "ready_s": round(self.ready_s, 2) if self.ready_s is not None else None,
            "smoke_ok": smoke.status == "ok" if smoke else None,
            "mean_acceptance_length": self.mean_acceptance_length,
            "per_position": self.per_position,
            "decode_tokens_per_s": self.decode_tokens_per_s,
            "alarms": self.alarms,
            "url": self.url,
            "pid": self.pid,
            "log": self.log,
            "torn_down": self.torn_down,
            "steps": [s.to_json() for s in self.steps],
        }


@dataclass
class RunReport:
    playbook: str
    hosts: list[HostRun]
    dry_run: bool = False
    commands: list[dict[str, Any]] = field(default_factory=list)  # --dry-run
    errors: dict[str, str] = field(default_factory=dict)  # --dry-run: host -> why no plan

    @property
    def ok(self) -> bool:
        return all(h.ok for h in self.hosts) and not self.errors

    @property
    def could_not_run(self) -> bool:
        return bool(self.errors) or any(s.status == "error" for h in self.hosts for s in h.steps)

    def to_json(self) -> dict[str, Any]:
        if self.dry_run:
            return {
                "playbook": self.playbook,
                "dry_run": True,
                "commands": self.commands,
                "errors": self.errors,
            }
        hosts = [h.to_json() for h in self.hosts]
        return {"playbook": self.playbook, "ok": self.ok, "hosts": hosts}


@dataclass
class StepEvent:
    host: str
    step: str
    state: str  # start | done
    result: StepResult | None = None
    message: str = ""


OnStep = Callable[[StepEvent], None]


@dataclass
class HostPlan:
    """What one host of a playbook runs: serve options plus the run sections."""

    serve: Any  # server.plan.ServeOptions
    fetch: dict[str, Any] = field(default_factory=dict)
    verify: dict[str, Any] = field(default_factory=dict)
    smoke: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)


def limited(opts: list[Any], limit: str | None) -> list[Any]:
    """Ansible's `--limit`: comma-separated patterns (shell wildcards) matched against each
    host's `host` (as the playbook spells it, `local` for this machine) and its deployment
    name; a pattern starting with `!` leaves the hosts it matches out."""
    import fnmatch

    if limit is None:
        return opts
    patterns = [p.strip() for p in limit.split(",") if p.strip()]
    if not patterns:
        raise UsageError("--limit is empty", "e.g. --limit gpu-a,gpu-b or --limit 'gpu-*'")
    keep, drop = (
        [p for p in patterns if not p.startswith("!")],
        [p[1:] for p in patterns if p.startswith("!")],
    )

    def names(o: Any) -> list[str]:
        return [o.host or "local", o.name]

    def hit(o: Any, pats: list[str]) -> bool:
        return any(fnmatch.fnmatchcase(n, p) for n in names(o) for p in pats)

    chosen = [o for o in opts if (not keep or hit(o, keep)) and not hit(o, drop)]
    if not chosen:
        listed = ", ".join(f"{o.name} ({o.host or 'local'})" for o in opts)
        raise UsageError(
            f"--limit {limit} matches none of the playbook's hosts", f"hosts: {listed}"
        )
    return chosen


def host_plans(
    path: Path, overrides: dict[str, Any] | None = None, limit: str | None = None
) -> tuple[str, list[HostPlan]]:
    from dflashctl.server.book import options_from_playbook

    book, opts = options_from_playbook(path, overrides or {})
    opts = limited(opts, limit)
    plans = [
        HostPlan(
            serve=o,
            fetch=dict(book.sections.get("fetch", {})),
            verify=dict(book.sections.get("verify", {})),
            smoke=dict(book.sections.get("smoke", {})),
            metrics=dict(book.sections.get("metrics", {})),
        )
        for o in opts
    ]
    return book.name, plans


def dry_run_steps(hp: HostPlan, p: Any) -> list[str]:
    """The steps `run` would take on one host, as the equivalent dflashctl commands."""
    from dflashctl.hosts.host import quote_argv

    where = ["--host", p.host] if p.host else []
    steps: list[list[str]] = []
    if hp.fetch and p.spec.spec == "dflash":
        f = hp.fetch
        steps.append(
            ["dflashctl", "fetch", str(f["drafter"])]
            + (["--revision", str(f["revision"])] if f.get("revision") else [])
            + (["--dir", str(f["dir"])] if f.get("dir") else [])
            + where
        )
    llama_unverified = p.spec.engine == "llama.cpp" and not hp.verify.get("engine")
    if p.spec.spec == "dflash" and p.spec.drafter and not llama_unverified:
        registry = hp.verify.get("registry")
        steps.append(
            ["dflashctl", "verify-config", str(p.spec.drafter)]
            + (["--drafter", str(registry)] if registry else [])
            + ["--engine", str(hp.verify.get("engine") or p.spec.engine)]
            + where
        )
    lines = [quote_argv(s) for s in steps]
    lines.append(p.launch_line)
    smoke = ["dflashctl", "smoke", p.name, "--max-tokens", str(hp.smoke.get("max_tokens", 128))]
    lines.append(quote_argv(smoke))
    if p.spec.spec == "dflash":
        floor = hp.metrics.get("min_acceptance_length")
        lines.append(
            quote_argv(
                ["dflashctl", "metrics", p.log, *where]
                + (["--min-acceptance-length", str(floor)] if floor else [])
            )
        )
    return lines


def _timed(run: HostRun, name: str, on_step: OnStep | None, fn: Callable[[], StepResult]) -> bool:
    if on_step:
        on_step(StepEvent(run.name, name, "start"))
    t0 = time.monotonic()
    try:
        res = fn()
    except DflashError as e:
        res = StepResult(name, "error", e.message, hint=e.hint)
    res.seconds = time.monotonic() - t0
    run.steps.append(res)
    if on_step:
        on_step(StepEvent(run.name, name, "done", res))
    return res.status in ("ok", "skip")


def run_host(hp: HostPlan, *, teardown: bool = False, on_step: OnStep | None = None) -> HostRun:
    """All steps on one host; stops at the first that fails."""
    from dflashctl.hosts import open_host
    from dflashctl.server.plan import plan

    opts = replace(hp.serve)
    label = opts.host or "local"
    run = HostRun(host=label, name=opts.name or label)
    with open_host(opts.host, python=opts.python) as host:
        if not _timed(run, "fetch", on_step, lambda: _fetch(hp, opts)):
            return run
        try:
            p = plan(opts, host)
        except DflashError as e:
            run.steps.append(StepResult("serve", "error", e.message, hint=e.hint))
            return run
        if not _timed(run, "verify-config", on_step, lambda: _verify(hp, p)):
            return run
        opts.verify = False  # just checked, on the same host
        p.options.verify = False
        if not _timed(run, "serve", on_step, lambda: _serve(run, p, host)):
            return run
        if _timed(run, "smoke", on_step, lambda: _smoke(run, hp, p)):
            _timed(run, "metrics", on_step, lambda: _metrics(run, hp, opts))
        if teardown:
            _teardown(run)
    return run


def _fetch(hp: HostPlan, opts: Any) -> StepResult:
    if not hp.fetch:
        return StepResult("fetch", "skip", "local paths: nothing to download")
    if opts.spec != "dflash":
        return StepResult("fetch", "skip", "spec: none: this host serves no DFlash drafter")
    from dflashctl.commands.fetch.run import fetch

    rep = fetch(
        str(hp.fetch["drafter"]),
        revision=hp.fetch.get("revision"),
        directory=Path(hp.fetch["dir"]).expanduser() if hp.fetch.get("dir") else None,
        host=opts.host,
        remote_dir=opts.drafter if opts.host else None,
    )
    where = rep.remote.directory if rep.remote else None
    opts.drafter = str(where or rep.directory)
    status = "ok" if rep.ok else "fail"
    return StepResult(
        "fetch", status, f"{rep.repo}@{rep.revision[:12]} {rep.action}", detail=rep.to_json()
    )


def _verify(hp: HostPlan, p: Any) -> StepResult:
    from dflashctl.drafter.verify import run_verify

    spec = p.spec
    if spec.spec != "dflash" or not spec.drafter:
        return StepResult("verify-config", "skip", "no drafter (--spec none)")
    engine = hp.verify.get("engine") or spec.engine
    if engine == "llama.cpp":  # verify-config's engine rules are vLLM's, SGLang's, the bundled's
        return StepResult(
            "verify-config",
            "skip",
            f"a llama.cpp drafter: `dflashctl verify-config {spec.drafter}` reads its GGUF header",
        )
    target = Path(spec.model) if spec.model and "/" in spec.model else None
    if target is not None and p.host is None and not target.exists():
        target = None  # a Hub id, not a directory
    rep = run_verify(
        Path(spec.drafter),
        drafter=hp.verify.get("registry"),
        target=target,
        engine=engine,
        host=p.host,
    )
    failed = [c.name for c in rep.checks if c.failed]
    summary = (
        f"{len(rep.checks)} checks passed"
        if rep.ok
        else f"{len(failed)} failed: {', '.join(dict.fromkeys(failed))}"
    )
    hint = None if rep.ok else f"dflashctl verify-config {spec.drafter} --fix"
    return StepResult(
        "verify-config", "ok" if rep.ok else "fail", summary, detail=rep.to_json(), hint=hint
    )


def _serve(run: HostRun, p: Any, host: Any) -> StepResult:
    from dflashctl.server.launch import launch

    res = launch(p, host)
    run.url, run.pid, run.log, run.ready_s = res.url, res.pid, res.log, res.ready_s
    if not res.ok:
        why = res.reason or "did not become ready"
        return StepResult("serve", "fail", why, detail=res.to_json(), hint=res.hint)
    ready = f"ready in {res.ready_s:.1f} s" if res.ready_s is not None else "ready"
    return StepResult("serve", "ok", f"{res.url} pid {res.pid}, {ready}", detail=res.to_json())


def _smoke(run: HostRun, hp: HostPlan, p: Any) -> StepResult:
    from dflashctl.commands.smoke.run import SmokeOptions, run_smoke

    cfg = hp.smoke
    opts = SmokeOptions(
        target=run.name,
        max_tokens=int(cfg.get("max_tokens", 128)),
        timeout=float(cfg.get("timeout", 120.0)),
        min_tokens_per_s=cfg.get("min_tokens_per_s"),
        prompts=[str(x) for x in cfg.get("prompts", [])],
        drafter=hp.verify.get("registry"),
        expect_no_spec=p.spec.spec != "dflash" and not own_speculation(p.spec.extra_args),
        allow_repetition=cfg.get("repetition") == "warn",
    )
    rep = run_smoke(opts)
    w = rep.spec.window if rep.spec else None
    run.decode_tokens_per_s = rep.decode_tokens_per_s
    run.mean_acceptance_length = w.mean_acceptance_length if w else None
    run.per_position = list(w.per_position) if w and w.per_position else None
    run.alarms = [f.to_json() for f in rep.findings if f.severity == "alarm"]
    parts = [f"{rep.completion_tokens or 0} tokens"]
    if rep.decode_tokens_per_s:
        parts.append(f"{rep.decode_tokens_per_s:.1f} tok/s")
    if run.mean_acceptance_length:
        parts.append(f"acceptance length {run.mean_acceptance_length:.2f}")
    if not rep.ok:
        parts.append("failed: " + "; ".join(c.found for c in rep.failed[:2]))
    hint = next((c.hint for c in rep.failed if c.hint), None)
    return StepResult(
        "smoke", "ok" if rep.ok else "fail", ", ".join(parts), detail=rep.to_json(), hint=hint
    )


def _metrics(run: HostRun, hp: HostPlan, opts: Any) -> StepResult:
    from dflashctl.metrics import MetricsOptions, analyze_source

    if opts.spec != "dflash":
        what = "its own speculation (extra_args)" if own_speculation(opts.extra_args) else "none"
        return StepResult("metrics", "skip", f"no DFlash drafter to judge (speculation: {what})")
    if not run.log:
        return StepResult("metrics", "skip", "no log to read")
    mopts = MetricsOptions(
        host=opts.host,
        drafter=hp.verify.get("registry"),
        min_acceptance_length=hp.metrics.get("min_acceptance_length"),
    )
    rep = analyze_source(run.log, mopts)
    for _ in range(12):  # the engine writes its stats line once per log interval
        if rep.state.windows:
            break
        time.sleep(1.0)
        rep = analyze_source(run.log, mopts)
    latest = rep.state.latest
    summary = (
        f"{rep.state.total_windows} windows in the log, latest acceptance length "
        f"{latest.mean_acceptance_length:.2f}"
        if latest is not None and latest.mean_acceptance_length
        else "no SpecDecoding lines in the log yet"
    )
    alarms = [f.kind for f in rep.alarms]
    if alarms:
        summary += f"; alarms: {', '.join(alarms)}"
    hint = None
    if rep.alarms and rep.alarms[0].likely_causes:
        hint = rep.alarms[0].likely_causes[0].check
    status = "ok" if rep.ok else "fail"
    return StepResult("metrics", status, summary, detail=rep.to_json(), hint=hint)


def _teardown(run: HostRun) -> None:
    from dflashctl.server import deployments as state
    from dflashctl.server.control import stop_deployment

    dep = state.load(run.name)
    if dep is not None:
        stop_deployment(dep)
        run.torn_down = True


def run_playbook(
    path: Path,
    *,
    teardown: bool = False,
    dry_run: bool = False,
    check: bool = False,
    overrides: dict[str, Any] | None = None,
    limit: str | None = None,
    on_step: OnStep | None = None,
) -> RunReport:
    """Every host of the playbook in turn (hosts are independent: one failing stops only it),
    or those `limit` selects."""
    name, plans = host_plans(path, overrides, limit)
    if dry_run:
        from dflashctl.hosts.ssh import SSHOptions
        from dflashctl.server.book import run_serve

        outcome = run_serve(
            [hp.serve for hp in plans], ssh=SSHOptions(), detach=True, dry_run=True, check=check
        )
        by_name = {hp.serve.name: hp for hp in plans}
        cmds = [p.to_json() | {"steps": dry_run_steps(by_name[p.name], p)} for p in outcome.plans]
        return RunReport(
            playbook=name, hosts=[], dry_run=True, commands=cmds, errors=outcome.errors
        )
    return RunReport(
        playbook=name, hosts=[run_host(hp, teardown=teardown, on_step=on_step) for hp in plans]
    )
