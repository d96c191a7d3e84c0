"""The human output of `dflashctl diagnose`: both engines side by side, the
per-position comparison, each prompt's greedy text agreement, the findings with evidence and fix,
and the verdict. Rendering only; `--json` bypasses it. Progress goes to stderr.
"""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from dflashctl.commands.diagnose.run import DiagnoseReport, Side
from dflashctl.commands.views import bar
from dflashctl.console import err, out

SEVERITY = {"problem": "[bold red]problem[/bold red]", "warning": "[yellow]warning[/yellow]",
            "note": "[dim]note[/dim]"}  # fmt: skip
VERDICT_STYLE = {"healthy": "green", "config": "red", "engine": "red", "drafter": "red"}
VERDICT_TEXT = {
    "healthy": "production computes DFlash like the reference engine and acceptance is healthy",
    "config": "the drafter's config (on disk or as the server loaded it) is wrong",
    "engine": "production's DFlash computation differs from the reference engine's",
    "drafter": "both engines agree and acceptance is low: the drafter itself",
}


def progress(message: str) -> None:
    err.print(f"[dim]{escape(message)}[/dim]", soft_wrap=True)


def _f(x: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if x is None else fmt.format(x)


def _side_line(s: Side) -> str:
    engine = {"local": "bundled engine", "vllm": "vLLM", "sglang": "SGLang"}.get(
        s.engine or "", s.engine or "engine ?"
    )
    bits = [engine + (f" {s.version}" if s.version else "")]
    if s.build:
        bits.append(f"{s.build} build")
    if s.dtype:
        bits.append(s.dtype)
    if s.num_speculative_tokens:
        bits.append(f"K={s.num_speculative_tokens}")
    bits.append(f"acceptance from {s.source or '?'}")
    return f"{s.where} — " + ", ".join(bits)


def render_diagnose(report: DiagnoseReport) -> None:
    p, r, fig = report.production, report.reference, report.figures
    out.print(f"[bold]production[/bold] {escape(_side_line(p))}", soft_wrap=True)
    out.print(f"[bold]reference [/bold] {escape(_side_line(r))}", soft_wrap=True)
    out.print(
        f"{fig.prompts} prompt(s), up to {report.max_tokens} tokens each, temperature 0; "
        f"same greedy text on {fig.same_text} of {fig.prompts}",
        soft_wrap=True,
    )

    t = Table(title=f"Acceptance ({fig.basis})", title_justify="left", show_edge=False)
    t.add_column("", no_wrap=True)
    t.add_column("production", justify="right", no_wrap=True)
    t.add_column("", no_wrap=True)
    t.add_column("reference", justify="right", no_wrap=True)
    t.add_column("", no_wrap=True)
    t.add_row("mean acceptance length", _f(fig.production), "", _f(fig.reference), "")
    t.add_row("drafts", _f(fig.production_drafts, "{}"), "", _f(fig.reference_drafts, "{}"), "")
    n = max(len(fig.production_per_position), len(fig.reference_per_position))
    # the label, both figures, four separators: the bars get what is left, up to 16 each
    width = max(1, min(16, (out.width - 56) // 2))
    for i in range(n):
        a = fig.production_per_position[i] if i < len(fig.production_per_position) else None
        b = fig.reference_per_position[i] if i < len(fig.reference_per_position) else None
        t.add_row(
            f"position {i + 1}",
            _f(a, "{:.3f}"),
            f"[green]{bar(a, width)}[/green]" if a is not None else "",
            _f(b, "{:.3f}"),
            f"[cyan]{bar(b, width)}[/cyan]" if b is not None else "",
        )
    out.print()
    out.print(t)

    pt = Table(title="Prompts", title_justify="left", show_edge=False)
    for col in ("prompt", "same text", "first difference", "production τ", "reference τ"):
        pt.add_column(col, no_wrap=True)
    for c in report.comparisons:
        same = {True: "yes", False: "[yellow]no[/yellow]", None: "[red]no answer[/red]"}[
            c.same_text
        ]
        where = (
            "-"
            if c.char is None
            else f"char {c.char}" + (f", token {c.token}" if c.token is not None else "")
        )
        pt.add_row(
            escape(c.prompt_id),
            same,
            where,
            _f(c.production_length),
            _f(c.reference_length),
        )
    out.print()
    out.print(pt)

    if report.findings:
        out.print("\n[bold]Findings[/bold]")
    for f in report.findings:
        out.print(
            f"  {SEVERITY.get(f.severity, f.severity)} [bold]{escape(f.kind)}[/bold]: "
            f"{escape(f.message)}",
            soft_wrap=True,
        )
        for line in f.evidence:
            out.print(f"      {escape(line)}", soft_wrap=True)
        if f.fix:
            out.print(f"      [dim]fix:[/dim] [cyan]{escape(f.fix)}[/cyan]", soft_wrap=True)
    for side in (p, r):
        for note in side.notes:
            out.print(f"[dim]{side.role}: {escape(note)}[/dim]", soft_wrap=True)
    out.print(f"[dim]checked: {escape('; '.join(report.config_checked))}[/dim]", soft_wrap=True)

    v = report.verdict
    style = VERDICT_STYLE.get(v, "bold")
    defects = [f.defect for f in report.problems if f.defect]
    tail = f"; known defect: {', '.join(defects)}" if defects else ""
    out.print(
        f"\n[bold]Verdict:[/bold] [{style}]{v.upper()}[/{style}] — {escape(VERDICT_TEXT[v])}"
        f"{escape(tail)}",
        soft_wrap=True,
    )
