"""How `--help` reads: the click classes every command and the root group are built with.

Two things Typer's rich help does that read badly at a terminal: a hard-wrapped docstring keeps
its line breaks inside rich's own wrapping (a sentence broken twice at 80 columns), and every
flag shows a `<bool>` type although it takes no value. Paragraphs are unwrapped here (an
indented line, an example, keeps its breaks) and a flag's type column is left empty.
"""

from __future__ import annotations

import re
from typing import Any

from typer.core import TyperCommand, TyperGroup

_BLANK = re.compile(r"\n\s*\n")


def unwrap(text: str | None) -> str | None:
    """Each paragraph on one line, but for paragraphs with an indented line (examples, lists
    laid out by hand), which keep their breaks."""
    if not text:
        return text
    paragraphs = []
    for para in _BLANK.split(text.strip("\n")):
        lines = para.split("\n")
        if any(line.startswith((" ", "\t")) for line in lines[1:]) or para.startswith(" "):
            paragraphs.append(para)
        else:
            paragraphs.append(" ".join(line.strip() for line in lines))
    return "\n\n".join(paragraphs)


class _Readable:
    """Mixed into Typer's command and group classes."""

    help: str | None
    short_help: str | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.help = unwrap(self.help)
        self.short_help = unwrap(self.short_help)

    def get_params(self, ctx: Any) -> list[Any]:
        params: list[Any] = super().get_params(ctx)  # type: ignore[misc]
        for p in params:
            if getattr(p, "is_flag", False):
                p.metavar = ""  # a flag takes no value: no type to show
        return params


class Command(_Readable, TyperCommand):
    pass


class Group(_Readable, TyperGroup):
    pass
