"""Colour and width as a user's terminal shows them (issue 31): every other test forces
NO_COLOR=1 and COLUMNS=200, so these run the most-read commands at a real pseudo-terminal of
80 columns with colour on (tests/support/terminal.py): the verdict's colour is there, no line
of a table is wider than the terminal, and NO_COLOR still turns every colour off."""

from __future__ import annotations

import re
from pathlib import Path

from support.terminal import run_in_terminal, terminal_env

DATA = Path(__file__).resolve().parent / "data"
RED = "\x1b[31m"
BOLD_RED = "\x1b[1;31m"
SGR_COLOUR = re.compile(r"\x1b\[[0-9;]*3[0-7]m")  # any foreground colour


def table_lines(text: str) -> list[str]:
    """The lines of rich tables (prose and paths soft-wrap at the terminal by design, so a
    figure is never split: tests/test_terminal.py; a table wider than the terminal breaks)."""
    return [ln for ln in text.splitlines() if any(c in ln for c in "│┃━─╇┏┗")]


def test_verify_config_shows_mismatches_in_red_within_80_columns() -> None:
    stale = DATA / "qwen3.6-27b-dflash-stale"
    run = run_in_terminal(["verify-config", str(stale), "--drafter", "qwen3.6-27b-dflash"],
                          columns=80)  # fmt: skip
    assert run.code == 1, run.text
    assert "mismatch" in run.text and "mask_token_id" in run.text
    assert RED in run.raw or BOLD_RED in run.raw, run.raw[:2000]
    rows = table_lines(run.text)
    assert rows and not [ln for ln in rows if len(ln) > 80], rows


def test_metrics_alarm_in_colour_within_80_columns() -> None:
    run = run_in_terminal(["metrics", str(DATA / "metrics" / "vllm_034_collapsed.log")],
                          columns=80)  # fmt: skip
    assert run.code == 1, run.text
    assert "collapse" in run.text.lower()
    assert SGR_COLOUR.search(run.raw), run.raw[:2000]
    rows = table_lines(run.text)
    assert rows and not [ln for ln in rows if len(ln) > 80], rows


def test_no_color_turns_every_colour_off() -> None:
    run = run_in_terminal(["metrics", str(DATA / "metrics" / "vllm_034_collapsed.log")],
                          columns=80, env=terminal_env(NO_COLOR="1"))  # fmt: skip
    assert run.code == 1 and "collapse" in run.text.lower()
    assert not SGR_COLOUR.search(run.raw), run.raw[:2000]
