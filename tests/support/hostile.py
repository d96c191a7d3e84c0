"""Helpers for the hostile-input suites (tests/test_hostile_*.py): run dflashctl as a user does
(a subprocess, real exit code, real stderr), assert the one-line error, and snapshot a tree to
prove nothing outside the intended files changed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# HOSTILE_TREE runs the subprocesses on another checkout's dflashctl (to measure a "before");
# HOSTILE_TALLY appends one JSON line per run (the tally in docs/limits.md).
TREE = Path(os.environ.get("HOSTILE_TREE") or REPO)


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str
    seconds: float


def dflashctl(
    *args: str,
    cwd: Path | None = None,
    timeout: float = 60,
    mem_limit: int | None = None,
    file_limit: int | None = None,
    **env: str,
) -> Result:
    """`python -m dflashctl ARGS` in a fresh process, stdin closed, with the test's environment;
    `mem_limit` bytes of address space at most (as `ulimit -v` does), files of `file_limit`
    bytes at most (`ulimit -f`: the full-disk stand-in)."""
    full = dict(os.environ)
    full["PYTHONPATH"] = str(TREE) + os.pathsep + full.get("PYTHONPATH", "")
    full.update(env)
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "dflashctl", *args],
            cwd=cwd if cwd is not None or TREE == REPO else TREE,  # `-m` looks in cwd first
            env=full,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            preexec_fn=lambda: _limit(mem_limit, file_limit),
        )
    except subprocess.TimeoutExpired:
        _tally(args, None, "", time.monotonic() - t0)
        raise
    res = Result(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - t0)
    _tally(args, res.code, res.stdout + res.stderr, res.seconds)
    return res


def _tally(args: tuple[str, ...], code: int | None, out: str, seconds: float) -> None:
    path = os.environ.get("HOSTILE_TALLY")
    if not path:
        return
    row = {
        "test": os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0],
        "args": [a[:60] for a in args],
        "code": code,
        "traceback": "Traceback" in out,
        "hung": code is None,
        "seconds": round(seconds, 2),
    }
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")


def _limit(memory: int | None, file_size: int | None) -> None:
    """`ulimit -v` and `ulimit -f` for the child (a write past `file_size` fails with EFBIG,
    as a full disk fails with ENOSPC: Python ignores SIGXFSZ)."""
    import resource

    if memory is not None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    if file_size is not None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))


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


# ---- a misbehaving HTTP server on 127.0.0.1 ------------------------------------------------------


class HostileServer:
    """A real HTTP server on 127.0.0.1 in a thread; `routes` maps a path to a function that
    writes the whole answer on the handler (status line, headers, body) however it likes."""

    def __init__(self, routes: dict[str, Callable[[BaseHTTPRequestHandler], None]]) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _route(self) -> None:
                n = int(self.headers.get("content-length") or 0)
                if n:
                    self.rfile.read(n)
                fn = outer.routes.get(self.path.split("?")[0])
                try:
                    if fn is None:
                        self.send_error(404)
                    else:
                        fn(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                self.close_connection = True

            do_GET = _route
            do_POST = _route

        self.routes = routes
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> HostileServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def send_json(h: BaseHTTPRequestHandler, obj: object, status: int = 200) -> None:
    body = json.dumps(obj).encode()
    h.send_response(status)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    h.wfile.write(body)


def models(h: BaseHTTPRequestHandler) -> None:
    send_json(h, {"object": "list", "data": [{"id": "m", "object": "model"}]})


def endless(
    ctype: str, chunk: bytes = b"x" * (1 << 20)
) -> Callable[[BaseHTTPRequestHandler], None]:
    """An answer that never ends (close-delimited): chunks until the client hangs up."""

    def route(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", ctype)
        h.send_header("Connection", "close")
        h.end_headers()
        for _ in range(4096):  # 4 GB at most, should the client never stop
            h.wfile.write(chunk)

    return route


def gzip_bomb(decompressed: int = 256 << 20) -> bytes:
    """`decompressed` zero bytes, gzip-compressed (about a thousandth of the size)."""
    z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(1 << 20)
    out = [z.compress(block) for _ in range(decompressed >> 20)]
    out.append(z.flush())
    return b"".join(out)


def trickle(
    ctype: str, payload: bytes, every: float = 0.5
) -> Callable[[BaseHTTPRequestHandler], None]:
    """Headers at once, then the body one byte every `every` seconds."""

    def route(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", ctype)
        h.send_header("Connection", "close")
        h.end_headers()
        h.wfile.flush()
        for b in payload:
            h.wfile.write(bytes([b]))
            h.wfile.flush()
            time.sleep(every)

    return route
