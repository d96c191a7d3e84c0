"""A server named the way users name one: a URL, HOST:PORT, or the name of a deployment
`dflashctl serve` recorded. `smoke`, `bench` and the others resolve their targets here.
"""

from __future__ import annotations

from dataclasses import dataclass

from dflashctl.errors import UsageError
from dflashctl.server import deployments
from dflashctl.server.client import normalize_url


def looks_like_url(target: str) -> bool:
    if "://" in target:  # any scheme: a URL (normalize_url refuses all but http and https)
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
    spec: str | None = None  # the deployment's intent: dflash, or none for a plain control
    cmd: list[str] | None = None  # the command the deployment was launched with


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
        spec=dep.spec,
        cmd=list(dep.cmd) or None,
    )


DEFAULT_URL = "http://127.0.0.1:8000"


def default_target() -> str:
    """What a command talks to when no server is named, as `stop` picks: the only deployment
    dflashctl started, else the engines' default port here; several are a UsageError."""
    deps, _bad = deployments.scan()
    if len(deps) == 1:
        return deps[0].name
    if len(deps) > 1:
        names = ", ".join(d.name for d in deps)
        raise UsageError(
            f"{len(deps)} deployments are running ({names}): name the one to talk to",
            "e.g. dflashctl smoke NAME, or a URL",
        )
    return DEFAULT_URL
