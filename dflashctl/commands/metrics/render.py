"""Human and JSON output for `dflashctl metrics` (the only module here that prints).

One-shot: a summary of the latest window, a per-position bar chart, a sparkline of acceptance
over time, a table of recent windows, findings with likely causes, the verdict. Follow mode:
one line per window, alarms as they rise and clear; `--json` gives one JSON object per event.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from dflashctl.commands.views import bar, finding
from dflashctl.console import emit_text, json_safe, out, printable, prose, styled
from dflashctl.metrics.follow import FollowEvent
from dflashctl.metrics.window import MetricsReport, SpecWindow

SPARK = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float], width: int = 60, lo: float | None = None) -> str:
    """Values → one line of block characters, downsampled (bucket means) to `width`; a value
    that is not a number (nan, inf: from a source other than the parsers) is left out."""
    values = [v for v in values if math.isfinite(v)]
    if not values:
        return ""
    if len(values) > width:
        n = len(values)
        values = [
            sum(values[i * n // width : (i + 1) * n // width])
            / max(1, len(values[i * n // width : (i + 1) * n // width]))
            for i in range(width)
        ]
    low = min(values) if lo is None else lo
    high = max(values)
    span = high - low
    if span <= 1e-12:
        return SPARK[len(SPARK) // 2] * len(values)
    return "".join(SPARK[min(7, int((v - low) / span * 7.999))] for v in values)


def _f(x: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if x is None else fmt.format(x)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.1f} %"


def render_report(report: MetricsReport, console: Console = out) -> None:
    st = report.state
    w = st.latest
    fmt = f" ({w.format})" if w else ""
    launches = f", {st.launches} launches" if st.launches > 1 else ""
    console.print(
        f"[bold]dflashctl metrics[/bold] {escape(st.source)} · engine {st.engine or '?'}{fmt} · "
        f"{st.total_windows} window(s){launches}",
        soft_wrap=True,
    )
    if w is not None:
        when = f" {escape(w.timestamp_raw)}" if w.timestamp_raw else ""
        where = f" ({escape(w.stream)})" if w.stream else ""
        console.print(f"\n[bold]Latest window[/bold]{when}{where}")
        console.print(
            f"  mean acceptance length [bold]{_f(w.mean_acceptance_length)}[/bold]   "
            f"draft acceptance [bold]{_pct(w.draft_acceptance_rate)}[/bold]   "
            f"accepted/drafted {_f(w.accepted_tokens, '{}')}/{_f(w.drafted_tokens, '{}')}   "
            f"generation {_f(w.generation_throughput, '{:.1f}')} tok/s",
            soft_wrap=True,
        )
        if w.per_position:
            console.print("\n[bold]Per-position acceptance[/bold] (latest window)")
            for i, p in enumerate(w.per_position, 1):
                console.print(f"  pos {i:>2} [green]{bar(p)}[/green] {p:.3f}")
        cur = [x for x in st.current_windows() if x.stream == w.stream]  # one stream's trend
        vals = [x.mean_acceptance_length for x in cur if x.mean_acceptance_length is not None]
        label = "mean acceptance length" + (f", {w.stream}" if w.stream else "")
        if len(vals) < 2:
            vals = [x.draft_acceptance_rate for x in cur if x.draft_acceptance_rate is not None]
            label = "draft acceptance" + (f", {w.stream}" if w.stream else "")
        if len(vals) >= 2:
            console.print(
                f"\n[bold]Acceptance over time[/bold] ({label}, {len(vals)} windows, "
                f"min {min(vals):.2f}, max {max(vals):.2f})",
                soft_wrap=True,
            )
            console.print(f"  [cyan]{sparkline(vals)}[/cyan]")
        console.print()
        console.print(windows_table(st.windows[-12:], console.width))
    if st.lifetime is not None and st.lifetime is not w:
        lt = st.lifetime
        console.print(
            f"  since start: mean acceptance length {_f(lt.mean_acceptance_length)}, draft "
            f"acceptance {_pct(lt.draft_acceptance_rate)} over {lt.num_drafts} drafts"
        )
    if st.spec_config:
        cfg = ", ".join(f"{k}={v}" for k, v in st.spec_config.items() if k != "engine")
        console.print(f"\n[dim]speculative config:[/dim] {escape(cfg)}", soft_wrap=True)
    if report.findings:
        console.print("\n[bold]Findings[/bold]")
        for f in report.findings:
            finding(f, console)
    for n in st.notes:
        prose(console, "[dim]note:[/dim] ", f"[dim]{escape(n)}[/dim]")
    exp = st.expected
    if exp is not None and exp.min is not None:
        hi = f"-{exp.max:.2f}" if exp.max is not None else "+"
        console.print(
            f"[dim]expected mean acceptance length {exp.min:.2f}{hi} for {escape(exp.drafter)} "
            f"(found by {escape(exp.found_by)})[/dim]",
            soft_wrap=True,
        )
    if report.ok and not st.windows:  # no metrics, or figures in a format not read
        why = ", ".join(sorted({f.kind.replace("_", " ") for f in report.findings})) or "no windows"
        console.print(
            f"\nverdict: [yellow]nothing judged[/yellow] (exit 0): {escape(why)}", soft_wrap=True
        )
    elif report.ok:
        unjudged = ""
        if any(n.startswith("no expected acceptance range is known") for n in st.notes):
            unjudged = " [yellow]without an expected range: a regression would pass[/yellow]"
        console.print(f"\nverdict: {styled('ok')} (exit 0){unjudged}", soft_wrap=True)
    else:
        kinds = ", ".join(sorted({f.kind for f in report.alarms}))
        console.print(f"\nverdict: {styled('alarm')} {kinds} (exit 1)")


# Left out first when the terminal is too narrow for every column at its full width
NARROW_DROPS = ("drafted", "accepted", "stream", "gen tok/s", "draft")


def windows_table(ws: list[SpecWindow], width: int = 200) -> Table:
    """The recent windows at `width` columns: a column every window leaves empty is left out,
    and the figures keep their full width (at 80 columns τ read `3.…`), so on a narrow
    terminal the least needed columns go instead (NARROW_DROPS, in that order)."""
    columns = (
        ("time", "left"),
        ("stream", "left"),
        ("τ", "right"),
        ("draft", "right"),
        ("accepted", "right"),
        ("drafted", "right"),
        ("gen tok/s", "right"),
        ("positions", "left"),
    )
    rows = [
        (
            w.timestamp_raw or "-",
            escape(w.stream) or "-",
            _f(w.mean_acceptance_length),
            _pct(w.draft_acceptance_rate),
            _f(w.accepted_tokens, "{}"),
            _f(w.drafted_tokens, "{}"),
            _f(w.generation_throughput, "{:.1f}"),
            sparkline(w.per_position, lo=0.0) if w.per_position else "-",
        )
        for w in ws
    ]
    keep = [i for i in range(len(columns)) if i in (0, 2) or any(r[i] != "-" for r in rows)]
    widths = [max([len(c), *(len(r[i]) for r in rows)]) for i, (c, _) in enumerate(columns)]
    for name in NARROW_DROPS:
        if sum(widths[i] + 3 for i in keep) <= width:
            break
        keep = [i for i in keep if columns[i][0] != name]
    t = Table(title="Recent windows", title_justify="left", show_edge=False, pad_edge=False)
    for i in keep:
        col, just = columns[i]
        t.add_column(col, justify=just, no_wrap=True, min_width=widths[i])  # type: ignore[arg-type]
    for r in rows:
        t.add_row(*(r[i] for i in keep))
    return t


def window_line(w: SpecWindow) -> Text:
    pos = sparkline(w.per_position, lo=0.0) if w.per_position else ""
    stream = f" {w.stream}" if w.stream else ""
    gen = (
        f"  gen {w.generation_throughput:.1f} tok/s" if w.generation_throughput is not None else ""
    )
    return Text(
        printable(
            f"{w.timestamp_raw or '-'}{stream}  τ {_f(w.mean_acceptance_length)}  "
            f"draft {_pct(w.draft_acceptance_rate)}  {pos}{gen}"
        )
    )


def emit_report_json(report: MetricsReport) -> None:
    """The report as JSON on stdout: indented, one compact line per series window (a series of
    thousands of windows stays fast to write and easy to grep)."""
    d = report.to_json()
    try:  # the common case: every number finite, nothing to rewrite first
        body = _report_json(d, allow_nan=False)
    except ValueError:  # a nan or inf somewhere: written as null
        body = _report_json(json_safe(d), allow_nan=True)
    emit_text(body + "\n")


def _report_json(d: dict[str, Any], *, allow_nan: bool) -> str:
    d = dict(d)
    series = d.pop("series")
    head = json.dumps(d, indent=2, default=str, allow_nan=allow_nan)
    if not series:
        return head[:-2] + ',\n  "series": []\n}'
    encode = json.JSONEncoder(default=str, allow_nan=allow_nan).encode  # one encoder, 2,000 rows
    rows = ",\n    ".join(map(encode, series))
    return head[:-2] + ',\n  "series": [\n    ' + rows + "\n  ]\n}"


def _ndjson(obj: dict[str, Any]) -> None:
    emit_text(json.dumps(obj, default=str) + "\n")


def _summary(report: MetricsReport) -> dict[str, Any]:
    d = report.to_json()
    d.pop("series", None)
    return d


def run_follow(
    events: Iterable[FollowEvent], *, json_out: bool, exit_on_alarm: bool, console: Console = out
) -> int:
    """Print events as they come; the exit code: 1 on an alarm with --exit-on-alarm, else the
    final verdict when the input ends (stdin)."""
    for ev in events:
        if json_out:
            obj: dict[str, Any] = {"event": ev.kind}
            if ev.window is not None:
                obj["window"] = ev.window.to_json()
            if ev.finding is not None:
                obj["alarm"] = ev.finding.to_json()
            if ev.report is not None:
                obj["report"] = _summary(ev.report)
            if ev.message:
                obj["message"] = ev.message
            _ndjson(obj)
        else:
            _print_event(ev, console)
        if exit_on_alarm:
            if ev.kind == "history" and ev.report is not None and not ev.report.ok:
                return 1
            if ev.kind == "alarm" and ev.finding is not None and ev.finding.severity == "alarm":
                return 1
        if ev.kind == "end" and ev.report is not None:
            return 0 if ev.report.ok else 1
    return 0


def _print_event(ev: FollowEvent, console: Console) -> None:
    if ev.kind == "history" and ev.report is not None:
        st = ev.report.state
        w = st.latest
        latest = (
            f"; latest {w.timestamp_raw or ''} τ {_f(w.mean_acceptance_length)}, draft "
            f"{_pct(w.draft_acceptance_rate)}"
            if w
            else ""
        )
        console.print(
            f"[bold]following[/bold] {escape(st.source)}: {st.total_windows} window(s) so far"
            f"{escape(latest)}"
        )
        for f in ev.report.findings:
            finding(f, console)
    elif ev.kind == "window" and ev.window is not None:
        console.print(window_line(ev.window), soft_wrap=True)
    elif ev.kind == "alarm" and ev.finding is not None:
        finding(ev.finding, console)
    elif ev.kind == "cleared" and ev.finding is not None:
        console.print(f"  [green]cleared[/green] {escape(ev.finding.kind)}")
    elif ev.kind == "end" and ev.report is not None:
        console.print(f"end of input: {ev.report.state.total_windows} window(s)")
        render_report(ev.report, console)
    else:
        console.print(
            f"[dim]{escape(ev.kind)}{': ' + escape(ev.message) if ev.message else ''}[/dim]"
        )


def say_serving(address: tuple[Any, ...], *, json_out: bool, console: Console = out) -> None:
    """The exporter's address, first (an NDJSON event with --json)."""
    host, port = address[0], address[1]
    url = f"http://{'[' + host + ']' if ':' in host else host}:{port}/metrics"
    if json_out:
        _ndjson({"event": "serving", "url": url})
    else:
        console.print(f"[bold]serving[/bold] {escape(url)} (dflashctl_spec_*, dflashctl_alarm)")
