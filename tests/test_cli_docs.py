"""docs/cli/ holds each command's --help; this fails when a page drifts from the code."""

from __future__ import annotations

from pathlib import Path

from dflashctl.cli_docs import pages

DOCS = Path(__file__).resolve().parent.parent / "docs" / "cli"


def test_cli_pages_match_help() -> None:
    want = pages()
    have = {p.name: p.read_text() for p in DOCS.glob("*.md")}
    assert sorted(have) == sorted(want), "regenerate: python -m dflashctl.cli_docs docs/cli"
    stale = [name for name, text in want.items() if have[name] != text]
    assert not stale, (
        f"{stale} differ from --help; regenerate: python -m dflashctl.cli_docs docs/cli"
    )
