"""How `doctor` gathers facts: run a command, read a file, on this machine or a host.

Checks never touch the machine directly; they ask a `Probe`, so the same checks run locally and
over SSH. `LocalProbe` is this machine (subprocess, files). `RemoteProbe` runs each command
through `dflashctl.hosts.ssh.run` (the SSH layer, paramiko); this module adds no SSH of its own. A
probe only reads: it runs commands that change nothing and reads files.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from dflashctl.errors import InputError
from dflashctl.files import read_bounded

MAX_TEXT = 16 * 1024 * 1024
FACTS_SCRIPT = Path(__file__).with_name("facts.py")  # sent to a host's Python as -c


@dataclass(frozen=True)
class RunResult:
    """One command's outcome. `rc` None: it could not start (`error` says why)."""

    rc: int | None
    stdout: str
    stderr: str
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.rc == 0

    def tail(self, n: int = 2) -> str:
        text = (self.error or self.stderr or self.stdout).strip().splitlines()
        return " | ".join(line.strip() for line in text[-n:])


class Probe(Protocol):
    label: str
    is_local: bool

    def run(self, argv: Sequence[str], *, timeout: float) -> RunResult: ...

    def which(self, name: str) -> str | None: ...

    def exists(self, path: str) -> bool: ...

    def is_executable(self, path: str) -> bool: ...

    def read_text(self, path: str, *, max_bytes: int = MAX_TEXT) -> str: ...


class LocalProbe:
    """This machine. Commands inherit this process's environment (PATH finds `nvidia-smi`)."""

    label = "local"
    is_local = True

    def run(self, argv: Sequence[str], *, timeout: float) -> RunResult:
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
            return RunResult(None, "", "", f"{argv[0]}: not found")
        except PermissionError:
            return RunResult(None, "", "", f"{argv[0]}: not executable")
        except subprocess.TimeoutExpired:
            return RunResult(None, "", "", f"{argv[0]}: timed out after {timeout:g} s")
        except OSError as e:
            return RunResult(None, "", "", f"{argv[0]}: {e.strerror or e}")
        return RunResult(p.returncode, p.stdout, p.stderr)

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


class RemoteProbe:
    """A host over SSH, through `dflashctl.hosts.ssh.run(spec, argv, timeout)`; its failures
    (unreachable host, refused key) are `RemoteError`s: exit 2."""

    is_local = False

    def __init__(self, spec: str) -> None:
        from dflashctl.hosts import ssh

        self._run = ssh.run
        self.label = spec

    def run(self, argv: Sequence[str], *, timeout: float) -> RunResult:
        rc, out, err = self._run(self.label, list(argv), timeout=timeout)
        if rc == 127:  # sh: command not found
            return RunResult(None, out, err, f"{argv[0]}: not found")
        return RunResult(rc, out, err)

    def which(self, name: str) -> str | None:
        res = self.run(["sh", "-c", 'command -v "$1"', "sh", name], timeout=15)
        path = res.stdout.strip()
        return path if res.ok and path.startswith("/") else None

    def exists(self, path: str) -> bool:
        return self.run(["test", "-e", path], timeout=15).rc == 0

    def is_executable(self, path: str) -> bool:
        return self.run(["test", "-x", path], timeout=15).rc == 0

    def read_text(self, path: str, *, max_bytes: int = MAX_TEXT) -> str:
        res = self.run(["head", "-c", str(max_bytes + 1), "--", path], timeout=60)
        if not res.ok:
            raise InputError(f"{self.label}:{path}: {res.tail() or 'cannot read'}")
        if len(res.stdout.encode()) > max_bytes:
            raise InputError(f"{self.label}:{path} is larger than {max_bytes} bytes")
        return res.stdout


def open_probe(host: str | None) -> Probe:
    """This machine (`host` None or "local") or a host over SSH."""
    if not host or host == "local":
        return LocalProbe()
    return RemoteProbe(host)
