"""Deployments dflashctl started: one JSON state file each under `$DFLASHCTL_HOME/deployments/`.

A state file holds {name, url, pid, starttime, log, engine, host, cmd, started_at, ...}: enough
for `stop` to end exactly that process (pid + /proc start time, so a recycled pid is never
touched) and for `status` to check it. The engine's pid file and log live in the run directory
`~/.dflashctl/run/NAME/` on the host that runs it (`$DFLASHCTL_HOME/run/NAME` locally; the
remote root can be moved with `$DFLASHCTL_REMOTE_HOME`). No printing.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from dflashctl.errors import InputError, OutputError, UsageError
from dflashctl.files import read_bounded, write_json_atomic

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def home() -> Path:
    return Path(os.environ.get("DFLASHCTL_HOME") or "~/.dflashctl").expanduser()


def deployments_dir() -> Path:
    return home() / "deployments"


def run_root(remote: bool) -> str:
    """Where run directories live on the host that runs the engine (`~` = that host's home)."""
    if remote:
        base = os.environ.get("DFLASHCTL_REMOTE_HOME") or "~/.dflashctl"
        return base.rstrip("/") + "/run"
    return str(home() / "run")


def check_name(name: str) -> str:
    if not NAME_RE.fullmatch(name):
        raise UsageError(
            f"deployment name {name!r} must be letters, digits, '.', '-', '_' (at most 64)",
        )
    return name


def default_name(host_label: str | None, port: int) -> str:
    """`local-8000`, `gpu1-8000`: one deployment per host and port."""
    base = "local" if host_label is None else host_label.split("@")[-1]
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", base).strip("-.") or "host"
    return f"{base}-{port}"[:64]


@dataclass
class Deployment:
    name: str
    engine: str
    host: str | None  # None: this machine
    url: str
    pid: int
    starttime: int
    log: str
    run_dir: str
    port: int
    bind: str
    model: str
    model_id: str
    drafter: str | None
    cmd: list[str]
    started_at: str
    ssh_config: str | None = None
    ready_at: str | None = None
    spec: str = "dflash"  # serve's --spec: none is a plain control (records before it: dflash)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Deployment:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})

    @property
    def host_label(self) -> str:
        return self.host or "local"

    def uptime_s(self) -> float | None:
        try:
            started = datetime.fromisoformat(self.started_at)
        except ValueError:
            return None
        return (datetime.now(timezone.utc) - started).total_seconds()


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def path_of(name: str) -> Path:
    return deployments_dir() / f"{check_name(name)}.json"


def save(dep: Deployment) -> Path:
    path = path_of(dep.name)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutputError(f"cannot create {path.parent}: {e.strerror}") from None
    return write_json_atomic(path, dep.to_json())


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def reserved(name: str) -> Iterator[None]:
    """Hold `name` while a launch under it runs, from the look for a previous deployment to
    its record: `NAME.starting` created with O_EXCL, holding this process's pid. A second
    launch of the same name meanwhile is a UsageError (two engines, one record: one of them
    nobody could see or stop); a reservation whose process is gone is taken over."""
    path = deployments_dir() / f"{check_name(name)}.starting"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutputError(f"cannot create {path.parent}: {e.strerror}") from None
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                holder = int(path.read_text(errors="replace").strip() or 0)
            except (OSError, ValueError):
                holder = 0
            if holder > 0 and holder != os.getpid() and _pid_alive(holder):
                raise UsageError(
                    f"deployment {name} is being started by another dflashctl (pid {holder})",
                    "wait for it to finish, or pick another --name",
                ) from None
            with contextlib.suppress(FileNotFoundError):
                path.unlink()  # its dflashctl is gone: the reservation is stale
            continue
        with os.fdopen(fd, "w") as f:
            f.write(f"{os.getpid()}\n")
        break
    else:
        raise UsageError(f"deployment {name}: could not reserve the name", "try again")
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def load(name: str) -> Deployment | None:
    path = path_of(name)
    if not path.is_file():
        return None
    return _read(path)


# Fields a record must hold, with their types: anything else is a corrupt record.
_REQUIRED: dict[str, type | tuple[type, ...]] = {
    "name": str,
    "engine": str,
    "host": (str, type(None)),
    "url": str,
    "pid": int,
    "starttime": int,
    "log": str,
    "run_dir": str,
    "port": int,
    "bind": str,
    "model": str,
    "model_id": str,
    "drafter": (str, type(None)),
    "cmd": list,
    "started_at": str,
}


@dataclass(frozen=True)
class BadRecord:
    """A deployment record that cannot be read: skipped, and named by status and stop."""

    name: str
    path: Path
    why: str

    @property
    def hint(self) -> str:
        return f"check whether its server still runs, then remove the record: rm {self.path}"


def _read(path: Path) -> Deployment:
    try:
        raw = read_bounded(path, 1 << 20, "deployment record")
        data = json.loads(raw.decode("utf-8"))
    except InputError as e:
        raise InputError(e.message, f"remove it by hand if the server is gone: rm {path}") from None
    except (ValueError, RecursionError) as e:
        why = "empty" if not raw.strip() else f"not JSON ({str(e)[:80]})"
        raise InputError(
            f"{path}: corrupt deployment record: {why}",
            f"remove it by hand if the server is gone: rm {path}",
        ) from None
    if not isinstance(data, dict):
        raise InputError(
            f"{path}: corrupt deployment record: a JSON {type(data).__name__}, not an object",
            f"remove it by hand if the server is gone: rm {path}",
        )
    for key, kind in _REQUIRED.items():
        v = data.get(key)
        if not isinstance(v, kind) or isinstance(v, bool):
            raise InputError(
                f"{path}: corrupt deployment record: {key!r} is "
                + ("missing" if key not in data else f"{type(v).__name__}, not valid"),
                f"remove it by hand if the server is gone: rm {path}",
            )
    if data["pid"] <= 0:
        raise InputError(f"{path}: corrupt deployment record: pid {data['pid']}")
    return Deployment.from_json(data)


def scan() -> tuple[list[Deployment], list[BadRecord]]:
    """Every readable deployment record, and the unreadable ones (skipped, never fatal)."""
    d = deployments_dir()
    if not d.is_dir():
        return [], []
    good: list[Deployment] = []
    bad: list[BadRecord] = []
    for p in sorted(d.glob("*.json")):
        try:
            good.append(_read(p))
        except InputError as e:
            bad.append(BadRecord(p.stem, p, e.message.removeprefix(f"{p}: ")))
    return good, bad


def all_deployments() -> list[Deployment]:
    """The readable deployment records (a corrupt one is skipped: see `scan`)."""
    return scan()[0]


def remove(name: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        path_of(name).unlink()
