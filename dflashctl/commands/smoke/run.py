"""`run_smoke`: send the smoke prompts, read the speculation window, collect the checks.

Order: validate → find the model (`/v1/models`) → start the speculation probe (scrape the
counters / remember the log size) → stream each prompt at temperature 0 → finish the probe
(counters after / the log lines that follow) → the baseline server, if any → checks.

Exit semantics (documented in docs/smoke.md): a server that cannot be reached at all, bad
arguments or an unreadable `--log`/`--metrics-url` raise a `DflashError` (exit 2); a server that
answers badly (HTML, 5xx, a hang, a cut stream), garbage output or broken speculation are failed
checks (exit 1). No printing: progress goes to an optional callback.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dflashctl.commands.smoke import checks as ck
from dflashctl.commands.smoke.prefix_probe import PrefixProbe, prefix_check, run_prefix_probe
from dflashctl.errors import UsageError, require_finite
from dflashctl.fixtures import Prompt, load_prompts
from dflashctl.metrics.analyze import MetricsOptions, thresholds_for
from dflashctl.metrics.expected import by_server
from dflashctl.metrics.spec_probe import (
    NO_DRAFTS,
    NO_LINES,
    NOT_CONFIGURED,
    SPECULATING,
    UNREADABLE,
    HostLog,
    LocalLog,
    LogProbe,
    PromProbe,
    SpecResult,
)
from dflashctl.metrics.thresholds import Thresholds
from dflashctl.metrics.window import Finding
from dflashctl.report import Row, rows_ok
from dflashctl.server.client import Completion, list_models, make_client, stream_chat
from dflashctl.server.targets import default_target, resolve_target

if TYPE_CHECKING:
    import httpx

Progress = Callable[[str], None]


@dataclass
class SmokeOptions:
    target: str | None = None  # None: the only deployment running, else :8000 here
    model: str | None = None
    prompts: list[str] = field(default_factory=list)  # --prompt TEXT…
    fixtures: bool = False
    max_tokens: int = 256
    timeout: float = 60.0
    min_tokens_per_s: float | None = None
    baseline: str | None = None
    log: Path | None = None
    metrics_url: str | None = None
    host: str | None = None
    log_interval: float = 10.0
    expect_no_spec: bool = False
    allow_repetition: bool = False  # a repetition loop is a warning (tiny test models)
    min_acceptance_length: float | None = None
    drafter: str | None = None
    prefix_probe: bool = False  # the same long prompt twice: acceptance with its prefix cached

    def validate(self) -> None:
        require_finite(
            timeout=self.timeout,
            log_interval=self.log_interval,
            min_tokens_per_s=self.min_tokens_per_s,
            min_acceptance_length=self.min_acceptance_length,
        )
        if self.max_tokens < 1:
            raise UsageError("--max-tokens must be at least 1", "e.g. --max-tokens 256")
        if self.timeout <= 0:
            raise UsageError("--timeout must be a positive number of seconds")
        if self.log_interval <= 0:
            raise UsageError("--log-interval must be a positive number of seconds")
        if self.min_tokens_per_s is not None and self.min_tokens_per_s <= 0:
            raise UsageError("--min-tokens-per-s must be a positive number")
        if self.min_acceptance_length is not None and self.min_acceptance_length < 1:
            raise UsageError(
                "--min-acceptance-length counts the bonus token, so it is at least 1.0",
                "e.g. --min-acceptance-length 2.5",
            )
        if self.log is not None and self.metrics_url is not None:
            raise UsageError(
                "--log and --metrics-url are two sources for the same numbers: pass one",
                "prefer --metrics-url (exact counter deltas); --log for engines without /metrics",
            )
        if any(not p.strip() for p in self.prompts):
            raise UsageError("--prompt must not be empty")
        if self.host and self.log is None:
            raise UsageError(
                "--host names where the log lives: pass --log PATH (the path on that host) too"
            )
        if self.metrics_url is not None and not self.metrics_url.startswith(
            ("http://", "https://")
        ):
            raise UsageError(
                f"--metrics-url {self.metrics_url!r} is not an http(s) URL",
                "e.g. --metrics-url http://127.0.0.1:8000/metrics",
            )


@dataclass
class SmokeReport:
    url: str
    model: str | None
    max_tokens: int
    completions: list[Completion]
    checks: list[Row]
    spec: SpecResult | None = None
    findings: list[Finding] = field(default_factory=list)
    baseline_url: str | None = None
    baseline: list[Completion] = field(default_factory=list)
    decode_tokens_per_s: float | None = None
    ttft_s: float | None = None
    prefix: PrefixProbe | None = None

    @property
    def ok(self) -> bool:
        return rows_ok(self.checks)

    @property
    def failed(self) -> list[Row]:
        return [c for c in self.checks if c.failed]

    @property
    def completion_tokens(self) -> int | None:
        ns = [c.completion_tokens for c in self.completions if c.ok]
        return sum(n for n in ns if n is not None) if any(n is not None for n in ns) else None

    @property
    def per_request_tau(self) -> tuple[float, int] | None:
        """(τ pooled over the requests' own `metrics.speculative_decoding`: 1 + Σ accepted /
        Σ steps, how many requests carried it), or None when the server sent none."""
        steps = accepted = n = 0
        for c in self.completions:
            m = c.spec_decode or {}
            st, acc = m.get("num_spec_steps"), m.get("num_accepted_draft_tokens")
            if isinstance(st, int) and isinstance(acc, int) and st > 0:
                steps, accepted, n = steps + st, accepted + acc, n + 1
        return (1 + accepted / steps, n) if steps else None

    @property
    def finish_reason(self) -> str | None:
        rs = {c.finish_reason for c in self.completions if c.ok}
        if not rs:
            return None
        return rs.pop() if len(rs) == 1 else "mixed"

    def to_json(self) -> dict[str, Any]:
        w = self.spec.window if self.spec else None
        pp = w.per_position if w else None
        return {
            "ok": self.ok,
            "url": self.url,
            "model": self.model,
            "checks": [c.to_json(ck.JSON_KEYS) for c in self.checks],
            "completion_tokens": self.completion_tokens,
            "finish_reason": self.finish_reason,
            "ttft_s": _r(self.ttft_s, 4),
            "decode_tokens_per_s": _r(self.decode_tokens_per_s, 2),
            "mean_acceptance_length": _r(w.mean_acceptance_length, 4) if w else None,
            "draft_acceptance_rate": _r(w.draft_acceptance_rate, 4) if w else None,
            "per_position": [round(p, 4) for p in pp] if pp else None,
            "per_request_mean_acceptance_length": (
                _r(pr[0], 4) if (pr := self.per_request_tau) else None
            ),
            "alarms": [f.to_json() for f in self.findings],
            "speculation": self.spec.to_json() if self.spec else None,
            "max_tokens": self.max_tokens,
            "prefix_cache_probe": self.prefix.to_json() if self.prefix else None,
            "requests": [c.to_json() for c in self.completions],
            "baseline": (
                {
                    "url": self.baseline_url,
                    "decode_tokens_per_s": _r(ck.decode_speed(self.baseline), 2),
                    "requests": [c.to_json() for c in self.baseline],
                }
                if self.baseline_url
                else None
            ),
        }


def _r(x: float | None, nd: int) -> float | None:
    return None if x is None or x != x else round(x, nd)


# ---- target and prompts ---------------------------------------------------------------------


def build_prompts(custom: list[str], fixtures: bool) -> list[Prompt]:
    out = load_prompts("fixtures") if fixtures else []
    out += [Prompt(f"prompt{i}", text) for i, text in enumerate(custom, 1)]
    return out or load_prompts("smoke")


def _thresholds(opts: SmokeOptions, source: str) -> Thresholds:
    mo = MetricsOptions(drafter=opts.drafter, min_acceptance_length=opts.min_acceptance_length)
    return thresholds_for(source, mo)


def _log_source(path: str, host: str | None, ssh_config: str | None) -> LocalLog | HostLog:
    """The log to read: a local file, or one on `host` through the SSH layer."""
    if not host:
        return LocalLog(Path(path))
    from dflashctl.hosts import open_host
    from dflashctl.hosts.ssh import SSHOptions

    ssh = SSHOptions(ssh_config=ssh_config) if ssh_config else None
    return HostLog(open_host(host, ssh=ssh), path)


# ---- the run ------------------------------------------------------------------------------------


def run_smoke(
    opts: SmokeOptions,
    *,
    progress: Progress | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> SmokeReport:
    opts.validate()
    say = progress or (lambda _msg: None)
    target = resolve_target(opts.target or default_target())
    url = target.url
    if target.spec == "none" and not opts.expect_no_spec:  # serve --spec none: a plain control
        opts = dataclasses.replace(opts, expect_no_spec=True)
        say(f"{target.name} was started with --spec none: judged as a plain server")
    # every target resolved (URL, HOST:PORT or a deployment name) before any request
    base = resolve_target(opts.baseline) if opts.baseline else None
    base_url = base.url if base is not None else None
    if base_url is not None and base_url == url:
        raise UsageError(
            "--baseline is the server under test", "point it at a server without speculation"
        )
    prompts = build_prompts(opts.prompts, opts.fixtures)
    if opts.drafter is None and opts.min_acceptance_length is None:
        # a server dflashctl started knows its drafter: judge against the registry's range
        found = by_server(url, target.drafter, target.host)
        if found is not None:
            opts = dataclasses.replace(opts, drafter=found.expected.drafter)
            say(f"judging acceptance against {found.expected.drafter}'s registry range")

    # The log: --log (on --host); or, for a deployment on SGLang (no /metrics by default),
    # the log `dflashctl serve` recorded. Otherwise /metrics.
    log_path: str | None = str(opts.log) if opts.log else None
    host: str | None = opts.host
    ssh_config: str | None = None
    if log_path is None and opts.metrics_url is None and target.engine == "sglang" and target.log:
        log_path, host, ssh_config = target.log, target.host, target.ssh_config
    log = _log_source(log_path, host, ssh_config) if log_path is not None else None
    where = f"{host}:{log_path}" if host else str(log_path)
    model = opts.model or target.model
    try:
        if log is not None:
            log.size()  # a missing or unreadable log is exit 2, before any request
        return _run(opts, url, model, base_url, prompts, (log, where), say, sleep)
    finally:
        if log is not None:
            log.close()


def _run(
    opts: SmokeOptions,
    url: str,
    model: str | None,
    base_url: str | None,
    prompts: list[Prompt],
    log_where: tuple[LocalLog | HostLog | None, str],
    say: Progress,
    sleep: Callable[[float], None],
) -> SmokeReport:
    log, where = log_where
    checks: list[Row] = []
    report = SmokeReport(url, model, opts.max_tokens, [], checks, baseline_url=base_url)
    with make_client(opts.timeout) as client:
        if base_url is not None:
            list_models(client, base_url)  # an unreachable baseline: exit 2 before any request
        if model is None:
            ids, err, hint = list_models(client, url)
            if err:
                checks.append(Row("http", ck.FAIL, err, prompt="/v1/models", hint=hint))
                return report
            model = ids[0]
            report.model = model
            if len(ids) > 1:
                say(f"the server lists {len(ids)} models; using {model} (choose with --model)")

        probe: PromProbe | LogProbe
        if log is not None:
            probe = LogProbe(
                log, where, interval=opts.log_interval, th=_thresholds(opts, where), sleep=sleep
            )
        else:
            murl = opts.metrics_url or f"{url}/metrics"
            probe = PromProbe(
                murl,
                timeout=min(opts.timeout, 10.0),
                explicit=opts.metrics_url is not None,
                th=_thresholds(opts, murl),
                sleep=sleep,
            )
        probe.start()

        for p in prompts:
            say(f"→ {p.id}: streaming up to {opts.max_tokens} tokens at temperature 0")
            c = stream_chat(
                client,
                url,
                model,
                p.id,
                p.text,
                max_tokens=opts.max_tokens,
                timeout=opts.timeout,
            )
            report.completions.append(c)
            checks.extend(ck.answer_checks(c, opts.max_tokens, opts.allow_repetition))
            if not c.ok:
                say(f"✗ {p.id}: {c.error}")
                rest = prompts[len(report.completions) :]
                checks.extend(
                    Row("http", ck.SKIP, "not sent after the failure above", prompt=r.id)
                    for r in rest
                )
                break
            tps = c.decode_tokens_per_s
            say(
                f"← {p.id}: {c.completion_tokens} tokens, {c.finish_reason}"
                + (f", {tps:.1f} tokens/s" if tps else "")
            )

        good = [c for c in report.completions if c.ok]
        if isinstance(probe, LogProbe):
            probe.mark_end()
        if good:
            if isinstance(probe, LogProbe):
                say(f"reading the log lines that follow (up to {opts.log_interval:g} s)")
                report.spec = probe.finish()
            else:
                say(f"reading the spec-decode counters at {probe.url}")
                report.spec = probe.finish(report.completion_tokens)
        report.decode_tokens_per_s = ck.decode_speed(good)
        report.ttft_s = ck.median_ttft(good)

        if base_url is not None and good:
            report.baseline = _run_baseline(client, base_url, prompts, good, opts, say)
        if opts.prefix_probe and good:
            checks.append(
                _prefix_probe(report, client, url, model, log is not None, opts, say, sleep)
            )

    if good:
        checks.append(ck.speed_check(report.decode_tokens_per_s, opts.min_tokens_per_s))
        if base_url is not None:
            checks.extend(
                ck.baseline_checks(good, report.baseline, report.decode_tokens_per_s, base_url)
            )
    checks.append(spec_check(report.spec, opts.expect_no_spec))
    report.findings = _findings(report.spec, opts.expect_no_spec)
    return report


def _prefix_probe(
    report: SmokeReport,
    client: httpx.Client,
    url: str,
    model: str,
    from_log: bool,
    opts: SmokeOptions,
    say: Progress,
    sleep: Callable[[float], None],
) -> Row:
    if from_log:
        return Row("prefix cache", ck.SKIP, "the probe reads acceptance per request from "
                   "the engine's /metrics counters, not from a log",
                   hint="run it without --log (or with --metrics-url)")  # fmt: skip
    murl = opts.metrics_url or f"{url}/metrics"
    say("→ prefix-cache probe: one long prompt twice (the second should find its prefix cached)")
    report.prefix = run_prefix_probe(
        client, url, model, murl, max_tokens=min(opts.max_tokens, 128), timeout=opts.timeout,
        th=_thresholds(opts, murl), sleep=sleep,
    )  # fmt: skip
    return prefix_check(report.prefix)


def _run_baseline(
    client: Any,
    base_url: str,
    prompts: list[Prompt],
    good: list[Completion],
    opts: SmokeOptions,
    say: Progress,
) -> list[Completion]:
    ids, err, _hint = list_models(client, base_url)
    if err:
        bad = Completion("/v1/models", "")
        bad.error = err
        return [bad]
    sent = {c.prompt_id for c in good}
    out = []
    for p in prompts:
        if p.id not in sent:
            continue
        say(f"→ baseline {p.id}")
        c = stream_chat(
            client, base_url, ids[0], p.id, p.text, max_tokens=opts.max_tokens, timeout=opts.timeout
        )
        out.append(c)
        if not c.ok:
            break
    return out


def _findings(spec: SpecResult | None, expect_no_spec: bool) -> list[Finding]:
    if spec is None:
        return []
    if expect_no_spec and spec.state in (NOT_CONFIGURED, NO_DRAFTS):
        return [f for f in spec.findings if f.kind != "no_speculation"]
    return list(spec.findings)


def _summary(spec: SpecResult) -> str:
    w = spec.window
    if w is None:
        return ""
    parts = []
    if w.mean_acceptance_length is not None:
        parts.append(f"mean acceptance length {w.mean_acceptance_length:.2f}")
    if w.draft_acceptance_rate is not None:
        parts.append(f"draft acceptance {w.draft_acceptance_rate * 100:.1f} %")
    if w.num_drafts is not None:
        parts.append(f"{w.num_drafts} drafts")
    return ", ".join(parts)


def spec_check(spec: SpecResult | None, expect_no_spec: bool) -> Row:
    """One row for speculation: the window's verdict under `dflashctl metrics`' alarms."""
    name = "speculation"
    if spec is None:
        return Row(name, ck.SKIP, "no answer arrived: nothing to measure")
    src = "the counters" if spec.source == "prometheus" else "the log"
    if expect_no_spec:
        if spec.state == NOT_CONFIGURED:
            return Row(name, ck.OK, "no speculation configured, as --expect-no-spec says")
        if spec.state == NO_DRAFTS:
            return Row(name, ck.OK, "nothing drafted, as --expect-no-spec says")
        if spec.state == SPECULATING:
            return Row(
                name,
                ck.FAIL,
                f"the server speculates ({_summary(spec)}) but --expect-no-spec says it should "
                "not: this is no plain baseline",
            )
        return Row(name, ck.WARNING, f"could not confirm: {spec.message}")
    alarms = [f for f in spec.findings if f.severity == "alarm"]
    warnings = [f for f in spec.findings if f.severity != "alarm"]
    if spec.state == NOT_CONFIGURED:
        return Row(
            name,
            ck.FAIL,
            f"no speculation configured: {src} show no speculative decoding at all",
            hint="launch with the drafter (vLLM --speculative-config, SGLang "
            "--speculative-algorithm DFLASH); for a plain baseline pass --expect-no-spec",
        )
    if spec.state == NO_DRAFTS:
        return Row(
            name,
            ck.FAIL,
            alarms[0].message if alarms else "nothing was drafted for the smoke requests",
        )
    if spec.state == UNREADABLE:
        return Row(
            name,
            ck.FAIL,
            spec.message + ": nothing shows that speculation ran",
            hint="pass --log PATH (the engine's log) or --metrics-url URL; SGLang serves "
            "/metrics only with --enable-metrics",
        )
    if spec.state == NO_LINES:
        return Row(name, ck.FAIL, spec.message)
    assert spec.state == SPECULATING
    if alarms:
        kinds = ", ".join(dict.fromkeys(f.kind for f in alarms))
        return Row(
            name,
            ck.FAIL,
            f"{kinds}: {alarms[0].message}",
            hint="likely causes are listed under Findings",
        )
    if warnings:
        return Row(name, ck.WARNING, f"{_summary(spec)}; {warnings[0].kind}: {warnings[0].message}")
    return Row(name, ck.OK, f"{_summary(spec)} (from {src})")
