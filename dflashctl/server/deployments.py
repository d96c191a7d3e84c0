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


def load(name: str) -> Deployment | None:
    path = path_of(name)
    if not path.is_file():
        return None
    return _read(path)


def _read(path: Path) -> Deployment:
    try:
        return Deployment.from_json(json.loads(read_bounded(path, 1 << 20, "deployment record")))
    except (OSError, ValueError, TypeError) as e:
        raise InputError(
            f"{path}: unreadable deployment state ({e})",
            f"remove it by hand if the server is gone: rm {path}",
        ) from None


def all_deployments() -> list[Deployment]:
    d = deployments_dir()
    if not d.is_dir():
        return []
    return [_read(p) for p in sorted(d.glob("*.json"))]


def remove(name: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        path_of(name).unlink()
