"""The machine a command acts on: this one (`LocalHost`) or one over SSH (`SSHHost`).

Both speak the same small vocabulary: run a POSIX `sh` script with a timeout, read a byte range
of a file, write a file atomically, make directories, upload a local file, GET an HTTP path on
one of the host's ports. Every command's outcome is one `CommandResult`.

Built on that, the same for both: run one command (`run`: every argument quoted; an environment
exported and secrets read from stdin, never put on a command line), find a program on PATH,
test a path, read a small text file (this machine does these itself, without a shell); and, as
`sh` scripts: starting a detached process in its own session (pid and log file), reading a
process's identity from /proc (start time, state, command line) so a recycled pid is never
mistaken for ours, signalling a process group, finding who listens on a port, rotating a log.

No printing, no exiting: failures are `DflashError`s (`RemoteError` for SSH ones).
`dflashctl.hosts.open_host(None)` is this machine; anything else is resolved by
`dflashctl.hosts.ssh` (paramiko is imported only then).
"""

from __future__ import annotations

import contextlib
import http.client
import os
import shlex
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from dflashctl.errors import DflashError, InputError, RemoteError
from dflashctl.files import open_regular, read_bounded, write_atomic

MAX_OUTPUT = 1 << 20  # bytes of stdout/stderr kept from one command
MAX_TEXT = 16 << 20  # bytes of a text file `read_text` reads whole


@dataclass
class CommandResult:
    """One command's outcome. `rc` None: it could not start (`error` says why)."""

    rc: int | None
    stdout: str
    stderr: str
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.rc == 0

    def tail(self, n: int = 3, *, strip: bool = False) -> str:
        """The last `n` lines of what it said (why it could not start, else stderr, else
        stdout), joined by ` | `; `strip`: each line stripped too."""
        text = (self.error or self.stderr or self.stdout).strip().splitlines()
        return " | ".join(line.strip() if strip else line for line in text[-n:])


@dataclass(frozen=True)
class FileStat:
    size: int
    mtime: float
    mode: int = 0o644


@dataclass(frozen=True)
class ProcInfo:
    """A live process as /proc shows it. `starttime` (clock ticks since boot) tells a recycled pid
    from the one we started."""

    pid: int
    state: str
    pgid: int
    sid: int
    starttime: int
    cmdline: str

    @property
    def zombie(self) -> bool:
        return self.state in ("Z", "X")


@dataclass(frozen=True)
class PortHolder:
    """Who listens on a TCP port: `pid`/`cmdline` when /proc could tell (same user or root)."""

    port: int
    pid: int | None = None
    cmdline: str | None = None


@dataclass(frozen=True)
class HttpReply:
    status: int
    body: bytes


def quote_argv(argv: Sequence[str]) -> str:
    """One shell word per argument: spaces, quotes and `;$(...)` arrive intact and run nothing."""
    return " ".join(shlex.quote(str(a)) for a in argv)


def env_assignments(env: Mapping[str, str]) -> str:
    for key in env:
        if not key.replace("_", "a").isalnum() or key[0].isdigit():
            raise InputError(f"environment variable name {key!r} is not a valid name")
    return "".join(f"export {k}={shlex.quote(str(v))}\n" for k, v in env.items())


def secret_reads(names: Sequence[str]) -> str:
    # Secrets arrive on stdin, one per line: never on a command line, in a file or in a log.
    return "".join(f"IFS= read -r {n} || true\nexport {n}\n" for n in names)


def _parse_proc(pid: int, text: str) -> ProcInfo | None:
    stat, _, cmdline = text.partition("\n")
    if ")" not in stat:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    # fields[0] is field 3 of proc(5): state; pgrp 5, session 6, starttime 22
    try:
        return ProcInfo(
            pid=pid,
            state=fields[0],
            pgid=int(fields[2]),
            sid=int(fields[3]),
            starttime=int(fields[19]),
            cmdline=cmdline.strip(),
        )
    except (IndexError, ValueError):
        return None


class Host:
    """What serve/stop/status/metrics/verify-config/doctor/fetch need from a machine."""

    label: str = "local"
    is_local: bool = True
    python: str = "python3"

    # ---- primitives (one per implementation) -------------------------------------------------

    def sh(
        self,
        script: str,
        *,
        timeout: float = 30.0,
        stdin: bytes | None = None,
        retry: bool = True,
    ) -> CommandResult:
        raise NotImplementedError

    def home(self) -> str:
        raise NotImplementedError

    def stat(self, path: str) -> FileStat | None:
        raise NotImplementedError

    def is_dir(self, path: str) -> bool:
        raise NotImplementedError

    def listdir(self, path: str) -> list[str]:
        raise NotImplementedError

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        raise NotImplementedError

    def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        raise NotImplementedError

    def makedirs(self, path: str) -> None:
        raise NotImplementedError

    def upload(self, local: str | Path, path: str) -> None:
        """Copy the local file `local` to `path` on the host (its directory is created)."""
        raise NotImplementedError

    def http_get(self, host: str, port: int, path: str, timeout: float = 5.0) -> HttpReply | None:
        """GET from the host's own point of view; None when nothing accepts the connection."""
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self) -> Host:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- shared, built on the primitives -----------------------------------------------------

    def abspath(self, path: str) -> str:
        if path == "~":
            return self.home()
        if path.startswith("~/"):
            return self.home().rstrip("/") + "/" + path[2:]
        if not path.startswith("/"):
            return self.home().rstrip("/") + "/" + path
        return path

    def read_file(self, path: str, max_bytes: int = 16 << 20) -> bytes:
        st = self.stat(path)
        if st is None:
            raise InputError(f"{self.where(path)}: no such file")
        if st.size > max_bytes:
            raise InputError(f"{self.where(path)} is {st.size} bytes: larger than expected")
        return self.read_range(path, 0, st.size)

    def tail_bytes(self, path: str, nbytes: int) -> bytes:
        st = self.stat(path)
        if st is None:
            raise InputError(f"{self.where(path)}: no such file")
        start = max(0, st.size - nbytes)
        return self.read_range(path, start, st.size - start)

    def iter_file(self, path: str, start: int = 0, chunk: int = 4 << 20) -> Iterator[bytes]:
        """The file's bytes from `start` to its current end, in chunks (memory stays flat)."""
        st = self.stat(path)
        if st is None:
            raise InputError(f"{self.where(path)}: no such file")
        pos = start
        while pos < st.size:
            data = self.read_range(path, pos, min(chunk, st.size - pos))
            if not data:
                return
            pos += len(data)
            yield data

    def where(self, path: str) -> str:
        return path if self.is_local else f"{self.label}:{path}"

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = 30.0,
        env: Mapping[str, str] | None = None,
        secret_env: Mapping[str, str] | None = None,
        retry: bool = True,
    ) -> CommandResult:
        """Run one command, every argument one shell word. With `env` or `secret_env` the shell
        exports `env`, reads `secret_env` from stdin (never a command line) and execs the
        command. `rc` None: the command was not found (`error` says so). `retry`: run it once
        more on a fresh connection if the one it used dropped."""
        script = quote_argv(argv)
        stdin = None
        if env is not None or secret_env is not None:
            secrets = dict(secret_env or {})
            script = secret_reads(list(secrets)) + env_assignments(env or {}) + f"exec {script}\n"
            stdin = "".join(f"{v}\n" for v in secrets.values()).encode() or None
        res = self.sh(script, timeout=timeout, stdin=stdin, retry=retry)
        if res.rc == 127:  # sh: command not found
            return CommandResult(None, res.stdout, res.stderr, f"{argv[0]}: not found")
        return res

    def which(self, name: str) -> str | None:
        """The absolute path of program `name` on the host's PATH, None when there is none."""
        res = self.run(["sh", "-c", 'command -v "$1"', "sh", name], timeout=15)
        path = res.stdout.strip()
        return path if res.ok and path.startswith("/") else None

    def exists(self, path: str) -> bool:
        return self.run(["test", "-e", path], timeout=15).rc == 0

    def is_executable(self, path: str) -> bool:
        return self.run(["test", "-x", path], timeout=15).rc == 0

    def read_text(self, path: str, *, max_bytes: int = MAX_TEXT) -> str:
        """A text file whole (InputError when it cannot be read or holds more than
        `max_bytes`)."""
        res = self.run(["head", "-c", str(max_bytes + 1), "--", path], timeout=60)
        if not res.ok:
            raise InputError(f"{self.label}:{path}: {res.tail(2, strip=True) or 'cannot read'}")
        if len(res.stdout.encode()) > max_bytes:
            raise InputError(f"{self.label}:{path} is larger than {max_bytes} bytes")
        return res.stdout

    def start_detached(
        self,
        argv: Sequence[str],
        *,
        cwd: str,
        log: str,
        env: Mapping[str, str] | None = None,
        secret_env: Mapping[str, str] | None = None,
        timeout: float = 30.0,
    ) -> int:
        """Start `argv` in its own session (pid = pgid = sid), stdout+stderr to a fresh `log`,
        stdin from /dev/null; returns its pid. Survives the end of this program or SSH session."""
        secrets = dict(secret_env or {})
        script = (
            f"cd {shlex.quote(cwd)} || exit 97\n"
            + secret_reads(list(secrets))
            + env_assignments(env or {})
            + "if command -v setsid >/dev/null 2>&1; then S=setsid; else S=; fi\n"
            # `;` after cd, not `&&`: `$!` must be the command, not a subshell (testing-recipes).
            + f"$S nohup {quote_argv(argv)} > {shlex.quote(log)} 2>&1 < /dev/null &\n"
            + "echo $!\n"
        )
        stdin = "".join(f"{v}\n" for v in secrets.values()).encode() if secrets else None
        res = self.sh(script, timeout=timeout, stdin=stdin, retry=False)
        if res.rc == 97:
            raise InputError(f"{self.where(cwd)}: cannot enter the run directory")
        try:
            return int(res.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise RemoteError(
                f"{self.label}: starting the process failed: {res.tail() or 'no pid printed'}"
            ) from None

    def proc(self, pid: int) -> ProcInfo | None:
        """The live process `pid` (None if gone or a zombie)."""
        res = self.sh(
            f"cat /proc/{int(pid)}/stat 2>/dev/null || exit 3\n"
            f"tr '\\000' ' ' < /proc/{int(pid)}/cmdline 2>/dev/null; echo",
            timeout=15.0,
        )
        if res.rc != 0:
            return None
        info = _parse_proc(pid, res.stdout)
        return None if info is None or info.zombie else info

    def signal_group(self, pid: int, sig: str, *, starttime: int) -> bool:
        """Send `sig` to the process group led by `pid`, only if `pid` still is the process that
        started at `starttime`. False when it is gone (or is now someone else's)."""
        p = int(pid)
        script = (
            f"st=$(sed 's/.*) //' /proc/{p}/stat 2>/dev/null | cut -d' ' -f20)\n"
            f'[ "$st" = {int(starttime)} ] || exit 3\n'
            f"kill -s {shlex.quote(sig)} -- -{p} 2>/dev/null || kill -s {shlex.quote(sig)} {p}\n"
        )
        return self.sh(script, timeout=15.0).rc == 0

    def port_holder(self, port: int) -> PortHolder | None:
        """Who listens on TCP `port` (any address), None when nobody does."""
        script = (
            f"p=$(printf '%04X' {int(port)})\n"
            "[ -r /proc/net/tcp ] || exit 2\n"
            "inodes=$(cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | "
            'awk -v p="$p" \'$4=="0A" { n=split($2,a,":"); if (a[n]==p) print $10 }\')\n'
            '[ -n "$inodes" ] || exit 1\n'
            "echo listening\n"
            "for i in $inodes; do\n"
            '  f=$(find /proc/[0-9]*/fd -maxdepth 1 -lname "socket:\\[$i\\]" 2>/dev/null '
            "| head -n 1)\n"
            '  [ -n "$f" ] || continue\n'
            '  pid=$(echo "$f" | cut -d/ -f3)\n'
            '  echo "pid $pid"\n'
            "  printf 'cmd '; tr '\\000' ' ' < /proc/$pid/cmdline 2>/dev/null; echo\n"
            "  break\n"
            "done\n"
        )
        res = self.sh(script, timeout=20.0)
        if res.rc == 1:
            return None
        if res.rc == 2:  # no /proc: ask the port itself
            reply = self._tcp_open(port)
            return PortHolder(port) if reply else None
        pid = cmd = None
        for line in res.stdout.splitlines():
            if line.startswith("pid "):
                with contextlib.suppress(ValueError):
                    pid = int(line[4:])
            elif line.startswith("cmd "):
                cmd = line[4:].strip()
        return PortHolder(port, pid, cmd)

    def _tcp_open(self, port: int) -> bool:
        return self.http_get("127.0.0.1", port, "/", timeout=2.0) is not None

    def rotate_log(self, log: str, keep: int = 3) -> None:
        """server.log -> server.log.1 -> ... -> server.log.{keep}: the new launch starts empty."""
        q = shlex.quote(log)
        lines = [f"rm -f {q}.{keep}"]
        for i in range(keep - 1, 0, -1):
            lines.append(f"[ -e {q}.{i} ] && mv -f {q}.{i} {q}.{i + 1}")
        lines.append(f"[ -e {q} ] && mv -f {q} {q}.1")
        lines.append("exit 0")
        self.sh("\n".join(lines), timeout=15.0)


class OfflineHost(Host):
    """A remote host named but not connected to: what a dry run plans against. It knows its
    name (and the HostName its ssh_config alias gives, `target`), nothing on it: no file exists,
    `~` stays `~`, and running anything is an error that says to connect (--check)."""

    is_local = False

    def __init__(self, spec: str, python: str | None = None, target: object = None) -> None:
        self.label = spec
        self.python = python or "python3"
        self.target = target

    def _no(self) -> DflashError:
        from dflashctl.errors import RemoteError

        return RemoteError(
            f"{self.label}: a dry run does not connect, and this step needs the host",
            "add --check to connect and check there",
        )

    def sh(
        self,
        script: str,
        *,
        timeout: float = 30.0,
        stdin: bytes | None = None,
        retry: bool = True,
    ) -> CommandResult:
        raise self._no()

    def home(self) -> str:
        return "~"

    def stat(self, path: str) -> FileStat | None:
        return None

    def is_dir(self, path: str) -> bool:
        return False

    def listdir(self, path: str) -> list[str]:
        raise self._no()

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        raise self._no()

    def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        raise self._no()

    def makedirs(self, path: str) -> None:
        raise self._no()

    def upload(self, local: str | Path, path: str) -> None:
        raise self._no()

    def http_get(self, host: str, port: int, path: str, timeout: float = 5.0) -> HttpReply | None:
        raise self._no()


class LocalHost(Host):
    """This machine. Commands inherit this process's environment (PATH finds `nvidia-smi`)."""

    label = "local"
    is_local = True

    def __init__(self, python: str | None = None) -> None:
        import sys

        self.python = python or sys.executable

    def sh(
        self,
        script: str,
        *,
        timeout: float = 30.0,
        stdin: bytes | None = None,
        retry: bool = True,
    ) -> CommandResult:
        try:
            proc = subprocess.run(
                ["sh", "-c", script],
                input=stdin or b"",
                capture_output=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            raise DflashError(f"a local command timed out after {timeout:g} s") from None
        return CommandResult(
            proc.returncode,
            proc.stdout[-MAX_OUTPUT:].decode("utf-8", "replace"),
            proc.stderr[-MAX_OUTPUT:].decode("utf-8", "replace"),
        )

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = 30.0,
        env: Mapping[str, str] | None = None,
        secret_env: Mapping[str, str] | None = None,
        retry: bool = True,
    ) -> CommandResult:
        """The command itself, without a shell, its stdin /dev/null; one that cannot start or
        runs past `timeout` has `rc` None. With an environment, through `sh` as on any host."""
        if env is not None or secret_env is not None:
            return super().run(argv, timeout=timeout, env=env, secret_env=secret_env)
        try:
            p = subprocess.run(
                list(argv),
                capture_output=True,
                text=True,
                errors="replace",
                timeout=timeout,
                stdin=subprocess.DEVNULL,
            )
        except FileNotFoundError:
            return CommandResult(None, "", "", f"{argv[0]}: not found")
        except PermissionError:
            return CommandResult(None, "", "", f"{argv[0]}: not executable")
        except subprocess.TimeoutExpired:
            return CommandResult(None, "", "", f"{argv[0]}: timed out after {timeout:g} s")
        except OSError as e:
            return CommandResult(None, "", "", f"{argv[0]}: {e.strerror or e}")
        return CommandResult(p.returncode, p.stdout, p.stderr)

    def which(self, name: str) -> str | None:
        return shutil.which(name)

    def exists(self, path: str) -> bool:
        return os.path.exists(os.path.expanduser(path))

    def is_executable(self, path: str) -> bool:
        p = os.path.expanduser(path)
        return os.path.isfile(p) and os.access(p, os.X_OK)

    def read_text(self, path: str, *, max_bytes: int = MAX_TEXT) -> str:
        p = Path(path).expanduser()
        try:
            return read_bounded(p, max_bytes).decode("utf-8", "replace")
        except FileNotFoundError:
            raise InputError(f"{p}: no such file") from None
        except OSError as e:
            raise InputError(f"cannot read {p}: {e.strerror or e}") from None

    def home(self) -> str:
        return str(Path.home())

    def stat(self, path: str) -> FileStat | None:
        try:
            st = os.stat(self.abspath(path))
        except FileNotFoundError:
            return None
        except OSError as e:
            raise InputError(f"cannot read {path}: {e.strerror}") from None
        return FileStat(st.st_size, st.st_mtime, st.st_mode & 0o7777)

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(self.abspath(path))

    def listdir(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(self.abspath(path)))
        except OSError as e:
            raise InputError(f"cannot list {path}: {e.strerror}") from None

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        try:
            with open_regular(Path(self.abspath(path))) as f:
                f.seek(offset)
                return f.read(length)
        except FileNotFoundError:
            raise InputError(f"no such file: {path}") from None
        except OSError as e:
            raise InputError(f"cannot read {path}: {e.strerror}") from None

    def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        write_atomic(Path(self.abspath(path)), data, mode=mode)

    def makedirs(self, path: str) -> None:
        try:
            Path(self.abspath(path)).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InputError(f"cannot create {path}: {e.strerror}") from None

    def upload(self, local: str | Path, path: str) -> None:
        """Through the one atomic writer: never half a file, never over a device or FIFO."""
        dest = Path(self.abspath(path))
        self.makedirs(str(dest.parent))
        try:
            with open_regular(Path(local), "file to copy") as src:
                write_atomic(dest, lambda f: shutil.copyfileobj(src, f, 1 << 20))
        except OSError as e:
            raise InputError(f"cannot copy {local} to {path}: {e.strerror or e}") from None

    def http_get(self, host: str, port: int, path: str, timeout: float = 5.0) -> HttpReply | None:
        addr = "127.0.0.1" if host in ("0.0.0.0", "", "::") else host
        conn = http.client.HTTPConnection(addr, port, timeout=timeout)
        try:
            conn.request("GET", path, headers={"Connection": "close"})
            resp = conn.getresponse()
            return HttpReply(resp.status, resp.read(MAX_OUTPUT))
        except (ConnectionRefusedError, socket.gaierror):
            return None
        except (OSError, http.client.HTTPException):
            # accepted but no usable answer (still starting, reset, timeout): "not yet"
            return HttpReply(0, b"")
        finally:
            conn.close()


def wait_until(predicate: object, timeout: float, poll: float = 0.1) -> bool:
    """Poll a zero-argument callable until it is truthy or `timeout` passes."""
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll)
