"""Output conventions shared by every command: data on stdout, everything else on stderr.

`emit_json` writes machine-readable output; `out` renders human tables; `err` carries errors,
hints, progress and logs, so `--json` output on stdout stays parseable. Everything written
through them has a URL's password masked (`http://user:***@host`): users paste this output
into tickets, and a server URL may carry credentials.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from rich.console import NULL_FILE, Console
from rich.markup import escape

from dflashctl.http_body import redact


class _Masked:
    """sys.stdout or sys.stderr as it is when written to (tests swap them), every write with
    URL passwords masked. Rich writes each rendered print in one call.

    While rich draws a live display (a spinner, a progress bar) it replaces sys.stdout and
    sys.stderr with proxies that write through the console; the console's own file must be
    the stream underneath (as rich's own consoles do), or each write comes back to itself for
    ever. A closed stream (`>&-`: Python sets it to None) swallows what is written."""

    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def _stream(self) -> Any:
        stream = getattr(sys, self._name)
        if stream is None:
            return NULL_FILE
        return getattr(stream, "rich_proxied_file", stream)

    def write(self, text: str) -> int:
        return int(self._stream.write(redact(text)))

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return bool(self._stream.isatty())

    def fileno(self) -> int:
        return int(self._stream.fileno())

    @property
    def encoding(self) -> str:
        return str(getattr(self._stream, "encoding", None) or "utf-8")


# Characters a terminal obeys instead of showing: C0 and C1 controls (ESC starts a sequence
# that can recolour, retitle or clear the screen) and the bidirectional overrides and isolates
# (U+202A-202E, U+2066-2069: text that reads other than it is).
_BIDI = frozenset(range(0x202A, 0x202F)) | frozenset(range(0x2066, 0x206A))


def printable(text: str) -> str:
    r"""`text` with every character a terminal would obey shown as a visible escape (`\x1b`,
    `\u202e`); newlines and tabs stay."""
    if text.isprintable():  # the common case: nothing to look at twice
        return text
    return "".join(_shown(ch) for ch in text)


def _shown(ch: str) -> str:
    o = ord(ch)
    if ch in "\n\t" or not (o < 32 or 0x7F <= o <= 0x9F or o in _BIDI):
        return ch
    return f"\\x{o:02x}" if o <= 0xFF else f"\\u{o:04x}"


class _Console(Console):
    """The one rule at the boundary: every string printed (a table cell, a line, a spinner's
    text) passes through `printable` before rich reads its markup, so a value that came from
    outside (a directory name, a config key, a log line, a server's model id) can never drive
    the terminal; rich's own styling is added after and stays."""

    def render_str(self, text: str, **kwargs: Any) -> Any:
        return super().render_str(printable(text), **kwargs)


out = _Console(file=_Masked("stdout"), highlight=False, soft_wrap=False)  # type: ignore[arg-type]
err = _Console(file=_Masked("stderr"), highlight=False)  # type: ignore[arg-type]

STATUS_STYLE = {
    "ok": "green",
    "pass": "green",
    "healthy": "green",
    "warning": "yellow",
    "mismatch": "red",
    "missing": "red",
    "invalid": "red",
    "fail": "red",
    "alarm": "red",
    "error": "red",
}


def styled(status: str) -> str:
    style = STATUS_STYLE.get(status, "")
    return f"[{style}]{status}[/{style}]" if style else status


def json_safe(data: Any) -> Any:
    """`data` with every float that is not a number (nan, ±inf) as null: JSON has no such
    numbers, and `| jq` refuses Python's NaN."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {k: json_safe(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [json_safe(v) for v in data]
    return data


def emit_json(data: Any) -> None:
    emit_text(json.dumps(json_safe(data), indent=2, default=str) + "\n")


def emit_text(text: str) -> None:
    """Machine-readable text on stdout as is, but for a URL's password (nowhere if stdout is
    closed)."""
    if sys.stdout is None:
        return
    sys.stdout.write(redact(text))
    sys.stdout.flush()


def one_line(text: str) -> str:
    """`text` on one line: a newline inside a value (a file name, a shard name) shown as `\\n`."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def prose(console: Console, lead: str, text: str) -> None:
    """A line of prose after `lead` (both markup). At a terminal it wraps at word boundaries
    to the console's width, the continuation lines under the text (the lead's width is the
    hanging indent), so nothing breaks mid-word; into a pipe or file it stays one line, for
    grep. Commands to copy stay on `soft_wrap` lines: a wrapped command pastes broken."""
    if not console.is_terminal:
        console.print(lead + text, soft_wrap=True)
        return
    if not lead:  # rich wraps a plain print between words
        console.print(text, soft_wrap=False)
        return
    from rich.table import Table

    head = console.render_str(lead)  # through printable(), as every string printed
    grid = Table.grid(padding=0)
    grid.add_column(width=head.cell_len, no_wrap=True)
    grid.add_column(overflow="fold")  # a word longer than the line is folded, not cut
    grid.add_row(head, console.render_str(text))
    console.print(grid)


def error(message: str, hint: str | None = None) -> None:
    """The error and its hint, one line each, whatever the values in them hold."""
    err.print(f"[bold red]Error:[/bold red] {escape(one_line(message))}", soft_wrap=True)
    if hint:
        err.print(f"[dim]Hint:[/dim] {escape(one_line(hint))}", soft_wrap=True)
