"""A command run at a real pseudo-terminal, as a user's shell runs it: stdin, stdout and stderr
are the terminal's slave side (so `isatty()` is true and rich draws spinners, bars and live
views), the window has a size, and the output is read off the master side as the user sees it.

A command that does not end within the timeout has its process group killed (it was started
in a new session, so the group is ours alone) and the result says it timed out."""

from __future__ import annotations

import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


@dataclass
class TerminalRun:
    code: int | None  # None: killed at the timeout
    raw: str  # what the terminal received, escape sequences included
    seconds: float

    @property
    def timed_out(self) -> bool:
        return self.code is None

    @property
    def text(self) -> str:
        """The output without escape sequences and carriage returns."""
        return ANSI.sub("", self.raw)


def terminal_env(**extra: str) -> dict[str, str]:
    """The test's environment as a terminal user's: a TERM, no forced width or NO_COLOR."""
    env = dict(os.environ)
    for name in ("COLUMNS", "LINES", "NO_COLOR", "PYTEST_CURRENT_TEST"):
        env.pop(name, None)
    env["TERM"] = "xterm-256color"
    env.update(extra)
    return env


def run_in_terminal(
    args: list[str],
    *,
    timeout: float = 60.0,
    columns: int = 100,
    rows: int = 40,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> TerminalRun:
    """`python -m dflashctl ARGS` (or ARGS as a whole command when it starts with '/') at a
    pseudo-terminal of `columns` x `rows`."""
    argv = args if args and args[0].startswith("/") else [sys.executable, "-m", "dflashctl", *args]
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    t0 = time.monotonic()
    proc = subprocess.Popen(
        argv,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env if env is not None else terminal_env(),
        cwd=str(cwd or REPO),
        start_new_session=True,
        close_fds=True,
    )
    os.close(slave)
    chunks: list[bytes] = []
    deadline = t0 + timeout
    code: int | None = None
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            ready, _, _ = select.select([master], [], [], min(left, 0.2))
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: every slave side is closed
                    data = b""
                if data:
                    chunks.append(data)
                    continue
                code = proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
                break
            if proc.poll() is not None and not select.select([master], [], [], 0.05)[0]:
                code = proc.returncode
                break
    except subprocess.TimeoutExpired:
        code = None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = None
        os.close(master)
    return TerminalRun(code, b"".join(chunks).decode("utf-8", "replace"), time.monotonic() - t0)
