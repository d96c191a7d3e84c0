"""Rendering of `dflashctl run` and `dflashctl demo`: step lines as they finish, final tables."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dflashctl.commands.run.run import RunReport, StepEvent
from dflashctl.console import err, out, styled

MARK = {"ok": "[green]✓[/green]", "skip": "[dim]-[/dim]", "fail": "[red]✗[/red]"}


def step_line(ev: StepEvent, console: Console = err) -> None:
    if ev.state == "start":
        console.print(f"[dim]  … {escape(ev.host)} · {ev.step}[/dim]")
        return
    r = ev.result
    assert r is not None
    mark = MARK.get(r.status, "[red]![/red]")
    console.print(
        f"  {mark} {escape(ev.host)} · [bold]{r.name}[/bold]  {escape(r.summary)} "
        f"[dim]({r.seconds:.1f} s)[/dim]",
        soft_wrap=True,
    )
    if r.hint and r.status != "ok":
        console.print(f"      [dim]hint:[/dim] {escape(r.hint)}", soft_wrap=True)


def _f(x: float | None, fmt: str) -> str:
    return "—" if x is None else format(x, fmt)


def run_table(report: RunReport) -> Table:
    t = Table(title=f"dflashctl run {report.playbook}", title_justify="left")
    for col in ("host", "config", "ready", "smoke", "acceptance length", "decode tok/s", "alarms"):
        t.add_column(col, no_wrap=col != "alarms")
    for h in report.hosts:
        cfg, smoke = h.step("verify-config"), h.step("smoke")
        failed = next((s for s in h.steps if s.status not in ("ok", "skip")), None)
        alarms = ", ".join(a["kind"] for a in h.alarms) or ("—" if failed is None else "")
        if failed is not None:
            alarms = (alarms + " " if alarms else "") + f"stopped at {failed.name}"
        t.add_row(
            escape(h.name),
            styled(cfg.status) if cfg else "—",
            f"{h.ready_s:.1f} s" if h.ready_s is not None else "—",
            styled("pass" if smoke.status == "ok" else smoke.status) if smoke else "—",
            _f(h.mean_acceptance_length, ".2f"),
            _f(h.decode_tokens_per_s, ".1f"),
            escape(alarms),
        )
    return t


def render_run(report: RunReport, console: Console = out) -> None:
    if report.dry_run:
        for c in report.commands:
            head = f"[bold]{escape(str(c['name']))}[/bold] on {escape(str(c['host']))}"
            console.print(f"{head} ({c['engine']}, {c['url']})")
            for step in c["steps"]:
                console.print(f"  {escape(step)}", soft_wrap=True)
            for note in c.get("notes", []):
                console.print(f"  [dim]# {escape(note)}[/dim]", soft_wrap=True)
        for label, why in report.errors.items():
            console.print(f"[bold]{escape(label)}[/bold]: [red]{escape(why)}[/red]", soft_wrap=True)
        return
    console.print(run_table(report))
    for h in report.hosts:
        if h.url and not h.torn_down:
            name = escape(h.name)
            console.print(
                f"[dim]{name} is still serving at {h.url} (pid {h.pid}); "
                f"stop it with: dflashctl stop {name}[/dim]"
            )
