"""Starting servers in tests: a free port, and waiting until a started server is up.

- `free_port()`: a TCP port on 127.0.0.1 that nothing listens on now.
- `read_until_startup(stream)`: read a server's output pipe until uvicorn's `Application startup
  complete` line (a foreground `dflashctl serve` prints its engine's log there); asserts it came.
- `wait_healthy(proc, url, log)`: poll until `GET URL/health` answers 200 (with
  `startup_line=True`, only once the log file says `Application startup complete`); an exit or
  the timeout fails the test with the log's tail.
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path
from typing import IO

STARTUP = "Application startup complete"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def read_until_startup(stream: IO[str] | None, timeout: float = 30) -> str:
    """The lines read from `stream` up to and including the startup line (or its end)."""
    deadline = time.monotonic() + timeout
    seen = ""
    while STARTUP not in seen and time.monotonic() < deadline:
        line = stream.readline() if stream else ""
        if not line:
            break
        seen += line
    assert STARTUP in seen, seen
    return seen


def wait_healthy(
    proc: subprocess.Popen[bytes],
    url: str,
    log: Path,
    *,
    timeout: float,
    every: float = 1.0,
    startup_line: bool = False,
) -> None:
    """Return once `url`/health answers 200; fail if `proc` exits or `timeout` seconds pass."""
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited {proc.returncode}:\n{_tail(log)}")
        if not startup_line or STARTUP in log.read_text(errors="replace"):
            try:
                if httpx.get(url + "/health", timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
        time.sleep(every)
    raise AssertionError(f"server not ready after {timeout} s ({log}):\n{_tail(log)}")


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-3000:]
