"""Output conventions shared by every command: data on stdout, everything else on stderr.

`emit_json` writes machine-readable output; `out` renders human tables; `err` carries errors,
hints, progress and logs, so `--json` output on stdout stays parseable.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console
from rich.markup import escape

out = Console(highlight=False, soft_wrap=False)
err = Console(stderr=True, highlight=False)

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


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()


def error(message: str, hint: str | None = None) -> None:
    err.print(f"[bold red]Error:[/bold red] {escape(message)}", soft_wrap=True)
    if hint:
        err.print(f"[dim]Hint:[/dim] {escape(hint)}", soft_wrap=True)
