"""Human output of the reports: rich tables on stdout, colours from `console.styled`.

Rendering only: the data comes from the domain modules (`drafter.report.VerifyReport`), and
`--json` output bypasses this module entirely.
"""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table

from dflashctl.commands.views import fmt
from dflashctl.console import out, styled

SEVERITY = {"mismatch": 0, "missing": 0, "invalid": 0, "warning": 1}


def render_verify(report: Any) -> None:
    """Print a verify-config report: the verdict first, fix summary, the checks table with the
    problems at the top (then warnings, then what is fine), per-layer table, the verdict again."""
    entry = report.entry
    title = f"verify-config {report.path} (engine: {report.engine})"
    if entry is not None:
        how = report.identification.how if report.identification else ""
        title += f"\nregistry: {entry.repo} ({how})"
    out.print(escape(title), soft_wrap=True)
    verdict = _verdict(report)
    out.print(verdict, soft_wrap=True)

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

    table = Table(expand=True)
    table.add_column("field", overflow="fold", ratio=4, min_width=12)
    table.add_column("status", no_wrap=True)
    table.add_column("found", overflow="fold", ratio=3, min_width=8)
    table.add_column("expected", overflow="fold", ratio=3, min_width=8)
    table.add_column("hint", overflow="fold", ratio=6, min_width=16)
    for check in sorted(report.checks, key=lambda c: SEVERITY.get(c.status, 2)):
        table.add_row(
            escape(check.name),
            styled(check.status),
            fmt(check.found),
            fmt(check.expected),
            fmt(check.hint or ""),
        )
    out.print(table)

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

    out.print(verdict, soft_wrap=True)


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
