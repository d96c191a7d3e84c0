"""What `dashboard` does: build the dashboard, check it against Grafana's model (and, with a
Prometheus, run every panel's query there), write it atomically. No printing."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dflashctl.errors import UsageError

ALL = ".*"  # what the job and instance variables expand to when All is selected


@dataclass
class DashboardRequest:
    out: Path | None = None
    drafters: list[str] = field(default_factory=list)
    title: str = "DFlash speculative decoding"
    uid: str = "dflashctl-spec-decode"
    prometheus: str | None = None  # run each panel's query here


@dataclass
class QueryCheck:
    panel: str
    expr: str
    ok: bool
    series: int
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"panel": self.panel, "expr": self.expr, "ok": self.ok, "series": self.series,
                "error": self.error}  # fmt: skip


@dataclass
class DashboardReport:
    text: str  # the dashboard as written (JSON)
    out: Path | None
    panels: list[str]
    model_problems: list[str]  # what Grafana's model does not keep ([] = valid)
    queries: list[QueryCheck] = field(default_factory=list)
    prometheus: str | None = None

    @property
    def ok(self) -> bool:
        return not self.model_problems and all(q.ok for q in self.queries)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "out": str(self.out) if self.out else None,
            "panels": self.panels,
            "grafana_model": {"ok": not self.model_problems, "problems": self.model_problems},
            "prometheus": self.prometheus,
            "queries": [q.to_json() for q in self.queries],
            "dashboard": None if self.out else json.loads(self.text),
        }


def _expand(expr: str) -> str:
    """A panel's query as Grafana sends it with every variable at All."""
    return expr.replace("$job", ALL).replace("$instance", ALL)


def check_queries(url: str, queries: list[tuple[str, str, str]]) -> list[QueryCheck]:
    """Each panel query, variables at All, as an instant query against Prometheus at `url`:
    ok when Prometheus accepts it; `series` says whether it has data yet."""
    import httpx

    base = url.rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise UsageError(
            f"--prometheus {url!r} is not an http(s) URL", "e.g. http://127.0.0.1:9090"
        )
    out = []
    with httpx.Client(timeout=10) as client:
        for panel, expr, _ in queries:
            try:
                r = client.get(f"{base}/api/v1/query", params={"query": _expand(expr)})
            except httpx.HTTPError as e:
                raise UsageError(f"Prometheus at {base} did not answer: {e}") from e
            try:
                body = r.json()
            except ValueError as e:
                raise UsageError(
                    f"{base} answered HTTP {r.status_code} without Prometheus' JSON",
                    "is it Prometheus' address (the one its web UI is on)?",
                ) from e
            if body.get("status") == "success":
                out.append(QueryCheck(panel, expr, True, len(body["data"]["result"])))
            else:
                out.append(QueryCheck(panel, expr, False, 0, str(body.get("error", r.text))[:300]))
    return out


def write_dashboard(req: DashboardRequest) -> DashboardReport:
    from dflashctl.files import write_atomic
    from dflashctl.monitoring.dashboard import (
        DashboardOptions,
        dashboard,
        panel_queries,
        validate,
    )
    from dflashctl.monitoring.rules import parse_expected

    opts = DashboardOptions(
        title=req.title, uid=req.uid, expected=[parse_expected(d) for d in req.drafters]
    )
    data = dashboard(opts)
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    report = DashboardReport(
        text=text,
        out=req.out,
        panels=[p["title"] for p in data["panels"] if p.get("type") != "row"],
        model_problems=validate(data),
        prometheus=req.prometheus,
    )
    if req.prometheus:
        report.queries = check_queries(req.prometheus, panel_queries(data))
    if req.out is not None and not report.model_problems:
        write_atomic(req.out, text.encode("utf-8"))
    return report
