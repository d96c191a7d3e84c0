"""Human output of the reports: rich tables on stdout, colours from `console.styled`.

Rendering only: the data comes from the domain modules (`drafter.report.VerifyReport`), and
`--json` output bypasses this module entirely.
"""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table

from dflashctl.commands.views import fmt
from dflashctl.console import out, prose, styled

SEVERITY = {"mismatch": 0, "missing": 0, "invalid": 0, "warning": 1}


def render_verify(report: Any) -> None:
    """Print a verify-config report: the verdict first, fix summary, the checks table with the
    problems at the top (then warnings, then what is fine), per-layer table, the verdict again."""
    entry = report.entry
    title = f"verify-config {report.path} (engine: {report.engine})"
    if entry is not None:
        how = report.identification.how if report.identification else ""
        title += f"\nregistry: {entry.repo} ({how})"
    prose(out, "", escape(title))
    verdict = _verdict(report)
    prose(out, "", verdict)

    fix = report.fix
    if fix is not None:
        if fix.written:
            changes = Table(title="--fix: changes written", title_justify="left")
            changes.add_column("field")
            changes.add_column("before")
            changes.add_column("after")
            for change in fix.changes:
                changes.add_row(escape(change.field), fmt(change.before), fmt(change.after))
            out.print(changes)
            out.print(
                escape(
                    f"backup: {fix.backup}\n"
                    "re-read from disk after the write: the checks below are the file as written"
                ),
                soft_wrap=True,
            )
            if report.checks_before is not None:
                before = sum(c.failed for c in report.checks_before)
                after = sum(c.failed for c in report.checks)
                out.print(f"problems before the fix: {before}, after: {after}")
        else:
            out.print(escape(f"--fix: {fix.message}"), soft_wrap=True)

    checks = sorted(report.checks, key=lambda c: SEVERITY.get(c.status, 2))
    out.print(_checks_table(checks) if out.width >= NARROW else _checks_list(checks))

    if report.layers:
        layers = Table(
            title="per layer: what the file says, what transformers loads, what vLLM 0.32 uses",
            title_justify="left",
        )
        for name in ("layer", "file", "loaded", "attention", "window", "causal"):
            layers.add_column(name)
        for row in report.layers:
            layers.add_row(
                str(row["layer"]),
                fmt(row["file"]),
                fmt(row["loaded"]),
                row["attention"],
                fmt(row["window"]),
                "yes" if row["causal"] else "no",
            )
        out.print(layers)

    prose(out, "", verdict)


# Below this width five columns split field names and hashes mid-word: one check a row, its
# value after its name, its hint under them.
NARROW = 110


def _checks_table(checks: list[Any]) -> Table:
    table = Table(expand=True)
    table.add_column("field", overflow="fold", ratio=4, min_width=12)
    table.add_column("status", no_wrap=True)
    table.add_column("found", overflow="fold", ratio=3, min_width=8)
    table.add_column("expected", overflow="fold", ratio=3, min_width=8)
    table.add_column("hint", overflow="fold", ratio=6, min_width=16)
    for check in checks:
        table.add_row(
            escape(check.name),
            styled(check.status),
            fmt(check.found),
            fmt(check.expected),
            fmt(check.hint or ""),
        )
    return table


def _checks_list(checks: list[Any]) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True)  # the status
    grid.add_column(overflow="fold")  # wraps between words; folds only a word wider than it
    for check in checks:
        found, expected = fmt(check.found), fmt(check.expected)
        value = found if expected in (found, "—") else f"found {found}, expected {expected}"
        text = f"[bold]{escape(check.name)}[/bold]  {value}"
        if check.hint:
            text += f"\n[dim]{fmt(check.hint)}[/dim]"
        grid.add_row(styled(check.status), text)
    return grid


def _verdict(report: Any) -> str:
    counts = report.counts
    problems = counts["mismatch"] + counts["missing"] + counts["invalid"]
    warnings = counts["warning"]
    if report.ok:
        verdict = f"[green]OK[/green]: no problems, {warnings} warning(s)"
    else:
        kinds = ", ".join(
            f"{counts[s]} {s}" for s in ("mismatch", "missing", "invalid") if counts[s]
        )
        verdict = f"[red]PROBLEMS[/red]: {problems} ({kinds}), {warnings} warning(s)"
        if report.fix is None and report.entry is not None:
            verdict += "; `--fix` writes the canonical values (with a backup)"
    k = report.num_speculative_tokens
    if k is not None:
        verdict += f"; num_speculative_tokens = {k}"
    return verdict
