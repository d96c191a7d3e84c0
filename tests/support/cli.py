"""The CLI as tests run it in-process: the console-script entry point, its real exit code, and
stdout and stderr apart."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from dflashctl.cli import main


def run_main(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    """The console-script entry point in-process: (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["dflashctl", *args])
    with pytest.raises(SystemExit) as info:
        main()
    out, err = capsys.readouterr()
    code = info.value.code
    return (code if isinstance(code, int) else 0 if code is None else 1), out, err


def run_json(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, Any, str]:
    """`dflashctl COMMAND --json ARGS`: (exit code, the parsed stdout or None, stderr)."""
    code, out, err = run_main(monkeypatch, capsys, args[0], "--json", *args[1:])
    return code, (json.loads(out) if out.strip() else None), err
