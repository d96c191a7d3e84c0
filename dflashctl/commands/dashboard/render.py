"""Human output of `dflashctl dashboard` (the only dashboard module that prints)."""

from __future__ import annotations

from rich.markup import escape

from dflashctl.commands.dashboard.run import DashboardReport
from dflashctl.console import emit_text, err, out, styled


def render_dashboard(report: DashboardReport) -> None:
    if report.out is None:
        emit_text(report.text)  # the dashboard itself: stdout stays importable JSON
    elif not report.model_problems:
        out.print(
            escape(f"wrote {report.out}: {len(report.panels)} panels ({', '.join(report.panels)})"),
            soft_wrap=True,
        )
    console = out if report.out is not None else err
    if report.model_problems:
        console.print(f"{styled('fail')} Grafana's dashboard model does not keep:", soft_wrap=True)
        for p in report.model_problems:
            console.print(escape(f"  {p}"), soft_wrap=True)
    else:
        console.print(f"{styled('ok')} Grafana's dashboard model keeps every field", soft_wrap=True)
    if report.prometheus:
        empty = [q for q in report.queries if q.ok and not q.series]
        for q in report.queries:
            state = "fail" if not q.ok else ("ok" if q.series else "warn")
            what = f"{q.panel}: {q.series} series" if q.ok else f"{q.panel}: {q.error}"
            console.print(f"{styled(state)} {escape(what)}", soft_wrap=True)
        if empty:
            console.print(
                escape(
                    f"{len(empty)} of {len(report.queries)} queries have no series yet at "
                    f"{report.prometheus}: are `dflashctl alerts`' rules loaded there, and has "
                    "a server drafted in the last 5 minutes?"
                ),
                soft_wrap=True,
            )
