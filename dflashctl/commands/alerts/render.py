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
    fleet = report.fleet
    console = out if report.out is not None else err
    if fleet is not None:
        hosts = ", ".join(f"{t.deployment} ({t.instance})" for t in fleet.targets)
        console.print(escape(f"fleet {fleet.name}: {hosts}"), soft_wrap=True)
        if fleet.expected:
            e = fleet.expected[0]
            console.print(
                escape(
                    f"  below-expected alert on each of {len(fleet.expected)} speculating "
                    f"hosts: {e.drafter}'s range {e.min:g}-{e.max:g}"
                ),
                soft_wrap=True,
            )
        else:
            why = (
                f"{fleet.drafter} has no expected range"
                if fleet.drafter
                else "the playbook names no verify.registry drafter"
            )
            console.print(escape(f"  no below-expected alert: {why}"), soft_wrap=True)
        if report.scrape_config is not None:
            console.print(
                escape(f"wrote {report.scrape_config}: scrape_configs for the fleet's hosts"),
                soft_wrap=True,
            )
    for c in report.checks:
        console.print(f"{styled('ok' if c.ok else 'fail')} {escape(c.what)}", soft_wrap=True)
        if not c.ok:
            console.print(escape(c.output), soft_wrap=True)
