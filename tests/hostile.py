"""Helpers for the hostile-input suites (tests/test_hostile_*.py): run dflashctl as a user does
(a subprocess, real exit code, real stderr), assert the one-line error, and snapshot a tree to
prove nothing outside the intended files changed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str
    seconds: float


def dflashctl(*args: str, cwd: Path | None = None, timeout: float = 60, **env: str) -> Result:
    """`python -m dflashctl ARGS` in a fresh process, stdin closed, with the test's environment."""
    full = dict(os.environ)
    full["PYTHONPATH"] = str(REPO) + os.pathsep + full.get("PYTHONPATH", "")
    full.update(env)
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "dflashctl", *args],
        cwd=cwd,
        env=full,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=timeout,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - t0)


def assert_clean_error(res: Result, code: int = 2, *, contains: str | None = None) -> str:
    """No traceback, exit `code`, and stderr's error is one line (a Hint line may follow)."""
    out = res.stdout + res.stderr
    assert "Traceback" not in out, out
    assert res.code == code, (res.code, out)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("Error:")]
    assert len(errors) == 1, res.stderr
    others = [ln for ln in lines if not ln.startswith(("Error:", "Hint:"))]
    assert not others, res.stderr
    if contains is not None:
        assert contains.lower() in errors[0].lower(), errors[0]
    return errors[0]


def snapshot(root: Path) -> dict[str, tuple[int, int, bytes | None]]:
    """Every entry under `root` (not following links): (mode, size, bytes of regular files)."""
    out: dict[str, tuple[int, int, bytes | None]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            st = p.lstat()
            data = p.read_bytes() if p.is_file() and not p.is_symlink() else None
            out[str(p.relative_to(root))] = (st.st_mode, st.st_size, data)
    return out
