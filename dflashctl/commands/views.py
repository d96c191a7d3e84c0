"""Renderings that several commands' renderers share (a finding with its likely causes, a
per-position bar, a found/expected value). Part of the commands layer: it imports nouns' data
types and prints only to the console it is handed.
"""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.markup import escape

from dflashctl.console import err, prose
from dflashctl.metrics.window import Finding

BLOCKS = " ▏▎▍▌▋▊▉█"


def bar(frac: float, width: int = 40) -> str:
    frac = max(0.0, min(1.0, frac))
    eighths = round(frac * width * 8)
    full, part = divmod(eighths, 8)
    return ("█" * full + (BLOCKS[part] if part else "")).ljust(width)


def finding(f: Finding, console: Console, causes: bool = True) -> None:
    sev = "[bold red]ALARM[/bold red]" if f.severity == "alarm" else "[yellow]warning[/yellow]"
    prose(console, f"  {sev} ", f"[bold]{escape(f.kind)}[/bold]: {escape(f.message)}")
    if causes and f.likely_causes:
        console.print("    likely causes:")
        for i, c in enumerate(f.likely_causes, 1):
            prose(console, f"      {i}. ", escape(c.cause))
            console.print(
                f"         [dim]check:[/dim] [cyan]{escape(c.check)}[/cyan]", soft_wrap=True
            )


LAYER_TYPE_NAMES = ("sliding_attention", "full_attention")


def _runs(values: list[str]) -> str:
    parts: list[str] = []
    i = 0
    while i < len(values):
        j = i
        while j < len(values) and values[j] == values[i]:
            j += 1
        parts.append(f"{j - i} × {values[i]}")
        i = j
    return " + ".join(parts)


MAX_SHOWN = 2000


def fmt(value: Any) -> str:
    """A found/expected value as one short, markup-safe string."""
    if value is None:
        return "—"
    if isinstance(value, list) and value and all(v in LAYER_TYPE_NAMES for v in value):
        text = _runs(value)
    elif isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, default=str)
    if len(text) > MAX_SHOWN:  # a hostile 100k-item list stays one readable cell
        text = f"{text[: MAX_SHOWN - 60]} … ({len(text)} characters; --json has all)"
    return escape(text)


def setup_line(message: str, console: Console | None = None) -> None:
    """The demo target's one-time set-up, as it happens."""
    (console or err).print(f"[dim]  · demo target: {escape(message)}[/dim]", soft_wrap=True)


def fit_columns(columns: list[tuple[str, list[str]]], width: int, keep: int = 1) -> list[int]:
    """Which columns fit in `width` (indexes, in the given order): `columns` are (header,
    cells) in priority order, the first `keep` always shown; a column is dropped whole rather
    than squeezed to `h…`. A rich box table needs 3 characters a column, and 1 more."""
    chosen: list[int] = []
    used = 1
    for i, (header, cells) in enumerate(columns):
        need = max([len(header), *(len(c) for c in cells)]) + 3
        if i < keep or used + need <= width:
            chosen.append(i)
            used += need
    return chosen
