"""The human output of `dflashctl doctor`: a table of checks, the matched
known defects with their evidence and fix, and a verdict. Rendering only; `--json` bypasses it.
"""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from dflashctl.commands.doctor.report import DoctorReport
from dflashctl.console import out, styled


def render_doctor(report: DoctorReport) -> None:
    out.print(
        escape(
            f"doctor on {report.host}: engine {report.engine} ({report.engine_why}); "
            f"python {report.python}"
        ),
        soft_wrap=True,
    )
    table = Table(expand=True)
    # a check's name wraps between words, never inside one (`flash-att|n` at 80 columns)
    word = max((len(w) for c in report.checks for w in c.name.split()), default=10)
    table.add_column("check", overflow="fold", min_width=max(word, 5), max_width=18)
    table.add_column("status", no_wrap=True)
    table.add_column("found", overflow="fold", ratio=6, min_width=20)
    table.add_column("fix", overflow="fold", ratio=4, min_width=12)
    for c in report.checks:
        fix = "see below" if (c.id or "").startswith("defect:") else (c.hint or "")
        table.add_row(escape(c.name), styled(c.status), escape(c.found), escape(fix))
    out.print(table)

    for m in report.defects:
        d = m.defect
        state = f"mitigated ({m.mitigated})" if m.mitigated else m.certainty
        out.print(
            f"[bold]{escape(d.id)}[/bold] — {escape(d.title)} [{escape(state)}]", soft_wrap=True
        )
        for line in m.evidence:
            out.print(f"  evidence: {escape(line)}", soft_wrap=True)
        out.print(f"  symptom: {escape(d.symptom)}", soft_wrap=True)
        out.print(f"  confirm: {escape(d.confirm)}", soft_wrap=True)
        out.print(f"  fix: {escape(d.fix)}", soft_wrap=True)
        out.print(f"  sources: {escape('; '.join(d.sources))}", soft_wrap=True)

    n = report.counts
    if report.ok:
        verdict = f"[green]OK[/green]: {n['ok']} checks ok"
        if n["warning"]:
            verdict += f", {n['warning']} warning(s) (warnings never fail)"
    else:
        verdict = f"[red]PROBLEMS[/red]: {n['error']} error(s), {n['warning']} warning(s)"
    if n["skip"]:
        verdict += f", {n['skip']} skipped"
    out.print(verdict, soft_wrap=True)
