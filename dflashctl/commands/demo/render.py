"""What `demo` prints: its steps as they finish, the pipeline's table, the field story's table
and the next commands to try on the user's own servers."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dflashctl.commands.demo.run import DemoReport, StoryStep
from dflashctl.commands.run.render import run_table
from dflashctl.console import err, out, prose


def story_line(step: StoryStep, console: Console = err) -> None:
    mark = "[green]✓[/green]" if step.ok else "[red]✗[/red]"
    prose(
        console,
        f"  {mark} ",
        f"[bold]{escape(step.name)}[/bold]  {escape(step.summary)} "
        f"[dim]({step.seconds:.1f} s)[/dim]",
    )
    for d in step.details:
        prose(console, "      ", escape(d))


def render_demo(report: DemoReport, console: Console = out) -> None:
    console.print(run_table(report.run))
    if report.story:
        t = Table(title="the field story on the demo pair", title_justify="left")
        t.add_column("step", no_wrap=True)
        t.add_column("")
        t.add_column("what happened")
        for s in report.story:
            t.add_row(escape(s.name), "✓" if s.ok else "✗", escape(s.summary))
        console.print(t)
    if report.run.could_not_run:  # the step's own line said why and what to do
        console.print("[red]demo could not run[/red]")
        return
    verdict = "[green]demo passed[/green]" if report.ok else "[red]demo found a problem[/red]"
    console.print(verdict)
    console.print("\n[bold]Next, on your own servers:[/bold]")
    for c in report.next_commands:
        console.print(f"  {escape(c)}", soft_wrap=True)
