"""Human output of `dflashctl alerts` (the only alerts module that prints)."""

from __future__ import annotations

from rich.markup import escape

from dflashctl.commands.alerts.run import AlertReport
from dflashctl.console import emit_text, err, out, styled


def render_alerts(report: AlertReport) -> None:
    if report.out is None:
        emit_text(report.text)  # the rules themselves: stdout stays a valid rule file
    else:
        out.print(
            escape(
                f"wrote {report.out}: {report.records} recording rules, "
                f"{len(report.alerts)} alerts ({', '.join(sorted(set(report.alerts)))})"
            ),
            soft_wrap=True,
        )
        if report.tests is not None:
            out.print(escape(f"wrote {report.tests}: promtool unit tests for them"), soft_wrap=True)
    console = out if report.out is not None else err
    for c in report.checks:
        console.print(f"{styled('ok' if c.ok else 'fail')} {escape(c.what)}", soft_wrap=True)
        if not c.ok:
            console.print(escape(c.output), soft_wrap=True)
