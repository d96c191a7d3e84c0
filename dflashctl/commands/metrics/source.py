"""What `dflashctl metrics SOURCE` reads, named the way users name a server: a log file, `-`, a
URL (`http://HOST:PORT` reads its `/metrics`), `HOST:PORT`, or the name of a deployment
`dflashctl serve` recorded (its log, on the host it runs on). Resolved before anything is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dflashctl.errors import InputError
from dflashctl.server.deployments import NAME_RE, all_deployments, load

# (server.client and server.targets import httpx: only a URL source needs them, and reading a log
# must not load HTTP libraries)


@dataclass
class Source:
    source: str
    host: str | None = None
    ssh_config: str | None = None
    deployment: str | None = None


def metrics_url(url: str) -> str:
    """`http://h:8000`, `http://h:8000/`, `http://h:8000/v1` -> `http://h:8000/metrics`; a URL
    with another path (a custom /metrics route) is kept as given."""
    from urllib.parse import urlsplit

    from dflashctl.http_body import check_url
    from dflashctl.server.client import normalize_url

    check_url(url)  # a malformed URL (an IPv6 literal left open, a bad port) is one line
    path = urlsplit(url).path.rstrip("/")
    if path in ("", "/v1"):
        return normalize_url(url) + "/metrics"
    return url


def resolve_source(source: str, host: str | None) -> Source:
    if source == "-" or host:
        return Source(source, host)
    if source.startswith(("http://", "https://")):
        return Source(metrics_url(source))
    if Path(source).exists():
        return Source(source)
    host_part, colon, port = source.rpartition(":")
    if colon and host_part and port.split("/")[0].isdigit():  # HOST:PORT
        return Source(metrics_url("http://" + source))
    dep = load(source) if NAME_RE.fullmatch(source) else None
    if dep is not None:
        if dep.log:
            return Source(dep.log, dep.host, dep.ssh_config, deployment=dep.name)
        return Source(metrics_url(dep.url.rstrip("/")), deployment=dep.name)
    names = [d.name for d in all_deployments()]
    raise InputError(
        f"no such log file, URL or deployment: {source}",
        "a log path, '-', http://HOST:PORT, or a deployment name"
        + (f" ({', '.join(names[:5])})" if names else " (dflashctl status lists them)"),
    )
