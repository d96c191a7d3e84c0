"""What `alerts` does: build the rules, write them (and their promtool tests) atomically, and
run promtool on them when asked. No printing."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dflashctl.errors import UsageError
from dflashctl.monitoring.fleet import Fleet

FORMATS = ("rules", "prometheusrule")


@dataclass
class AlertOptions:
    out: Path | None = None
    fmt: str = "rules"
    drafters: list[str] = field(default_factory=list)
    interval: str = "5m"
    min_drafts_per_s: float = 0.1
    decay_offset: str = "6h"
    tests: Path | None = None
    check: bool = False
    name: str = "dflashctl-spec-decode"
    namespace: str | None = None
    runbook_base: str = "docs/monitoring.md"
    playbook: str | None = None  # a fleet: every host's below-expected alert
    scrape_config: Path | None = None  # write the fleet's scrape_configs here


@dataclass
class Check:
    what: str
    ok: bool
    output: str

    def to_json(self) -> dict[str, Any]:
        return {"what": self.what, "ok": self.ok, "output": self.output}


@dataclass
class AlertReport:
    text: str  # the rules as written (YAML)
    out: Path | None
    tests: Path | None
    alerts: list[str]
    records: int
    checks: list[Check] = field(default_factory=list)
    fleet: Fleet | None = None
    scrape_config: Path | None = None

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "out": str(self.out) if self.out else None,
            "tests": str(self.tests) if self.tests else None,
            "alerts": self.alerts,
            "recording_rules": self.records,
            "checks": [c.to_json() for c in self.checks],
            "rules": None if self.out else self.text,
            "fleet": None
            if self.fleet is None
            else {
                "playbook": self.fleet.name,
                "drafter": self.fleet.drafter,
                "targets": [vars(t) for t in self.fleet.targets],
                "below_expected_alerts": len(self.fleet.expected),
                "scrape_config": str(self.scrape_config) if self.scrape_config else None,
            },
        }


def _yaml(data: Any) -> str:
    import yaml

    return yaml.safe_dump(data, sort_keys=False, width=100, allow_unicode=True)


def _promtool(args: list[str], cwd: Path) -> Check:
    exe = shutil.which("promtool")
    if exe is None:
        raise UsageError(
            "--check needs promtool, which is not on PATH",
            "install Prometheus (Debian: apt install prometheus), or drop --check",
        )
    done = subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    return Check(
        f"promtool {' '.join(args)}", done.returncode == 0, (done.stdout + done.stderr).strip()
    )


# Kubernetes object names: metadata.name a DNS-1123 subdomain, a namespace a DNS-1123 label.
_K8S_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_K8S_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _check_k8s_names(name: str, namespace: str | None) -> None:
    """UsageError for a metadata.name or namespace the Kubernetes API server would refuse."""
    if len(name) > 253 or not _K8S_SUBDOMAIN.fullmatch(name):
        raise UsageError(
            f"--name {name!r} is not a Kubernetes object name",
            "lower-case letters, digits, '-' and '.', at most 253, e.g. --name dflashctl-rules",
        )
    if namespace is not None and (len(namespace) > 63 or not _K8S_LABEL.fullmatch(namespace)):
        raise UsageError(
            f"--namespace {namespace!r} is not a Kubernetes namespace",
            "lower-case letters, digits and '-', at most 63, e.g. --namespace monitoring",
        )


def write_alerts(o: AlertOptions) -> AlertReport:
    from dflashctl.files import check_target, write_atomic
    from dflashctl.monitoring.rule_tests import rule_tests
    from dflashctl.monitoring.rules import RuleOptions, parse_expected, prometheus_rule, rule_groups

    if o.fmt not in FORMATS:
        raise UsageError(f"--format {o.fmt!r}: one of {', '.join(FORMATS)}")
    if o.tests is not None and o.fmt != "rules":
        raise UsageError(
            "--tests goes with --format rules", "promtool reads rule files, not objects"
        )
    if o.tests is not None and o.out is None:
        raise UsageError("--tests needs --out", "the tests name the rule file they load")
    if o.scrape_config is not None and o.playbook is None:
        raise UsageError("--scrape-config needs --playbook", "it lists the playbook's hosts")
    if o.fmt == "prometheusrule":
        _check_k8s_names(o.name, o.namespace)
    for path in (o.out, o.tests, o.scrape_config):
        if path is not None:
            check_target(path)  # every output refused before any is written
    fleet = None
    if o.playbook is not None:
        from dflashctl.monitoring.fleet import load_fleet

        fleet = load_fleet(o.playbook)
    ro = RuleOptions(
        interval=o.interval,
        min_drafts_per_s=o.min_drafts_per_s,
        decay_offset=o.decay_offset,
        expected=[parse_expected(d) for d in o.drafters] + (fleet.expected if fleet else []),
        runbook=o.runbook_base,
    )
    data = (
        prometheus_rule(ro, o.name, o.namespace) if o.fmt == "prometheusrule" else rule_groups(ro)
    )
    groups = data["spec"]["groups"] if o.fmt == "prometheusrule" else data["groups"]
    text = _yaml(data)
    report = AlertReport(
        text=text,
        out=o.out,
        tests=o.tests,
        alerts=[r["alert"] for g in groups for r in g["rules"] if "alert" in r],
        records=sum(1 for g in groups for r in g["rules"] if "record" in r),
        fleet=fleet,
        scrape_config=o.scrape_config,
    )
    tests_text = None
    if o.tests is not None and o.out is not None:
        rel = Path(o.out).resolve()
        tests_text = _yaml(rule_tests(ro, str(rel)))
    if o.out is not None:
        write_atomic(o.out, text.encode("utf-8"))
    if o.tests is not None and tests_text is not None:
        write_atomic(o.tests, tests_text.encode("utf-8"))
    if o.scrape_config is not None and fleet is not None:
        from dflashctl.monitoring.fleet import scrape_config

        write_atomic(o.scrape_config, _yaml(scrape_config(fleet)).encode("utf-8"))
    if o.check:
        if o.fmt != "rules":
            spec_only = _yaml(data["spec"])
            with tempfile.TemporaryDirectory(prefix="dflashctl-alerts-") as tmp:
                path = Path(tmp) / "rules.yml"
                path.write_text(spec_only)
                report.checks.append(_promtool(["check", "rules", str(path)], Path(tmp)))
            return report
        if o.out is None:
            with tempfile.TemporaryDirectory(prefix="dflashctl-alerts-") as tmp:
                path = Path(tmp) / "rules.yml"
                path.write_text(text)
                report.checks.append(_promtool(["check", "rules", str(path)], Path(tmp)))
            return report
        report.checks.append(_promtool(["check", "rules", str(o.out)], Path.cwd()))
        if o.tests is not None:
            report.checks.append(_promtool(["test", "rules", str(o.tests)], Path.cwd()))
    return report
