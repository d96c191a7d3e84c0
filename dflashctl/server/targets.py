"""A server named the way users name one: a URL, HOST:PORT, or the name of a deployment
`dflashctl serve` recorded. `smoke`, `bench` and the others resolve their targets here.
"""

from __future__ import annotations

from dataclasses import dataclass

from dflashctl.errors import UsageError
from dflashctl.server import deployments
from dflashctl.server.client import normalize_url


def looks_like_url(target: str) -> bool:
    if target.startswith(("http://", "https://")):
        return True
    host, sep, port = target.rpartition(":")
    return bool(sep and host and port.split("/")[0].isdigit())


@dataclass
class Target:
    """A server a command talks to: a URL, or a deployment `dflashctl serve` recorded."""

    url: str
    name: str | None = None
    model: str | None = None
    engine: str | None = None
    log: str | None = None
    host: str | None = None  # where the log lives (None: this machine)
    ssh_config: str | None = None
    model_path: str | None = None  # what was served (a directory or hub id on `host`)
    drafter: str | None = None


def resolve_target(target: str) -> Target:
    """A URL (or HOST:PORT), else the name of a deployment in `$DFLASHCTL_HOME/deployments/`."""
    if looks_like_url(target):
        return Target(normalize_url(target))
    dep = deployments.load(target)
    if dep is None:
        raise UsageError(
            f"{target!r} is not a URL, nor a deployment dflashctl started",
            "see dflashctl status for the names, or pass the server's URL",
        )
    return Target(
        normalize_url(dep.url),
        name=dep.name,
        model=dep.model_id or None,
        engine=dep.engine,
        log=dep.log or None,
        host=dep.host,
        ssh_config=getattr(dep, "ssh_config", None),
        model_path=dep.model or None,
        drafter=dep.drafter or None,
    )
