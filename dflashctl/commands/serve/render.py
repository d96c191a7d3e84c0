"""Human output of serve / stop / status: progress on stderr, results as rich text and tables.

Rendering only; `--json` output bypasses this module.
"""

from __future__ import annotations

import time
from typing import Any

from rich.markup import escape
from rich.table import Table

from dflashctl.console import err, out, printable, prose


class Progress:
    """The `on_event` callback: a spinner with elapsed time and the current phase; in the
    foreground (or with several hosts) lines are printed instead."""

    def __init__(self, *, stream_log: bool, prefix: bool) -> None:
        self.stream_log = stream_log
        self.prefix = prefix
        self.status: Any = None
        self.t0 = time.monotonic()

    def __enter__(self) -> Progress:
        if not self.prefix:
            self.status = err.status("starting ...", spinner="dots")
            self.status.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.status is not None:
            self.status.__exit__(None, None, None)
            self.status = None

    def __call__(self, event: Any) -> None:
        tag = f"[cyan]{escape(event.name)}[/cyan] " if self.prefix else ""
        if event.kind == "log":
            if self.stream_log:
                err.print(f"{tag}[dim]{escape(event.message)}[/dim]", soft_wrap=True)
            return
        if event.kind == "wait":
            if self.status is not None:
                self.status.update(f"{escape(printable(event.message))} ({event.elapsed:.0f} s)")
            return
        ready = event.kind == "step" and event.message.startswith("ready in")
        if ready and self.status is not None:
            self.status.__exit__(None, None, None)
            self.status = None
        err.print(f"{tag}{escape(event.message)}", soft_wrap=True)
        if self.status is not None:
            self.status.update(f"{escape(printable(event.message))} ({event.elapsed:.0f} s)")


def listen_note(address: str) -> None:
    err.print(
        escape(
            f"--host {address}: the listen address, as vllm serve's --host (serve --bind); "
            "a machine to run on over SSH is [user@]host[:port] or an ssh_config alias"
        ),
        soft_wrap=True,
    )


def render_plans(plans: list[Any]) -> None:
    for p in plans:
        k = p.spec.num_speculative_tokens
        err.print(
            escape(
                f"# {p.name} on {p.host_label}: {p.spec.engine}, {p.url}"
                + (f", num_speculative_tokens {k} ({p.k_source})" if k else "")
            ),
            soft_wrap=True,
        )
        for note in p.notes:
            err.print(escape(f"# {note}"), soft_wrap=True)
        env = " ".join(f"{k}={v}" for k, v in p.env.items())
        secrets = " ".join(f"{n}=<from your environment>" for n in p.secret_names)
        err.print(escape(f"# env: {env}" + (f" {secrets}" if secrets else "")), soft_wrap=True)
        out.print(escape(p.launch_line), soft_wrap=True)


def render_results(outcome: Any) -> None:
    for r in outcome.results:
        where = f" on {r.host}" if r.host else ""
        if r.ok and r.ended is None:
            out.print(
                f"[green]ready[/green] {escape(r.name)}{escape(where)}: {escape(r.url or '')}"
                f"  pid {r.pid}  log {escape(r.log or '')}",
                soft_wrap=True,
            )
        elif r.ended == "interrupted":
            out.print(f"stopped {escape(r.name)}{escape(where)} (pid {r.pid})", soft_wrap=True)
        else:
            out.print(
                f"[red]FAILED[/red] {escape(r.name)}{escape(where)}: {escape(r.reason or '')}",
                soft_wrap=True,
            )
            for line in r.lines:
                out.print(f"  [red]|[/red] {escape(line)}", soft_wrap=True)
            if r.log:
                out.print(f"  log: {escape(r.log)}", soft_wrap=True)
            if r.hint:
                out.print(f"  [dim]hint:[/dim] {escape(r.hint)}", soft_wrap=True)
        for note in r.notes:
            prose(err, "  [dim]note:[/dim] ", escape(note))
    for host, why in outcome.errors.items():
        out.print(f"[red]ERROR[/red] {escape(host)}: {escape(why)}", soft_wrap=True)


def render_stop(results: list[Any]) -> None:
    if not results:
        out.print("no deployments to stop")
        return
    for r in results:
        port = "" if r.port_free is None else ("; port free" if r.port_free else "; port BUSY")
        mark = "green" if r.ok else "red"
        out.print(
            f"[{mark}]{escape(r.outcome)}[/{mark}] {escape(r.name)} on {escape(r.host)} "
            f"(pid {r.pid}){port}" + (f": {escape(r.message)}" if r.message else ""),
            soft_wrap=True,
        )


def _uptime(s: float | None) -> str:
    if s is None:
        return "—"
    s = int(s)
    if s < 120:
        return f"{s} s"
    if s < 7200:
        return f"{s // 60} min"
    return f"{s // 3600} h {s % 3600 // 60} min"


def render_status(rows: list[Any]) -> None:
    """One row a deployment; at the terminal's width, columns that do not fit are left out
    whole (most needed first: name, state, url, health, host, engine, uptime, pid, log) and
    named below the table, rather than squeezed to nothing."""
    from dflashctl.commands.views import fit_columns

    if not rows:
        out.print("no deployments (start one with: dflashctl serve --detach)")
        return
    colour = {
        "up": "green",
        "unhealthy": "yellow",
        "down": "red",
        "unknown": "yellow",
        "corrupt": "red",
    }
    plain = {
        "name": [r.name for r in rows],
        "state": [r.state for r in rows],
        "url": [r.url for r in rows],
        "health": [str(r.health) if r.health is not None else (r.message or "—") for r in rows],
        "host": [r.host for r in rows],
        "engine": [r.engine for r in rows],
        "uptime": [_uptime(r.uptime_s) for r in rows],
        "pid": [str(r.pid) for r in rows],
        "log": [r.log for r in rows],
    }
    order = list(plain)
    shown = [order[i] for i in fit_columns([(c, plain[c]) for c in order], out.width, keep=2)]
    table = Table()
    for col in shown:
        table.add_column(col, no_wrap=col != "log", overflow="fold")
    for i, r in enumerate(rows):
        cells = []
        for col in shown:
            text = escape(plain[col][i])
            if col == "state":
                text = f"[{colour.get(r.state, 'white')}]{text}[/]"
            cells.append(text)
        table.add_row(*cells)
    out.print(table)
    hidden = [c for c in order if c not in shown]
    if hidden:
        out.print(
            f"[dim]not shown at {out.width} columns: {', '.join(hidden)} "
            "(a wider terminal, or --json)[/dim]"
        )
