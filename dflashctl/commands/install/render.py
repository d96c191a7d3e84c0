"""Human output of `dflashctl install` (the only install module that prints)."""

from __future__ import annotations

from typing import Any

from rich.markup import escape

from dflashctl.console import out


def render_install(report: Any) -> None:
    if report.ok:
        out.print(
            f"[green]installed[/green] dflashctl {escape(report.version or '')} on "
            f"{escape(report.host)}: {escape(report.python)}",
            soft_wrap=True,
        )
    else:
        out.print(
            f"[red]not importable[/red] on {escape(report.host)} after the install: "
            f"{escape(report.python)}",
            soft_wrap=True,
        )
    for note in report.notes:
        out.print(f"  [dim]note:[/dim] {escape(note)}", soft_wrap=True)
