"""`stop` and `status`: act only on processes dflashctl started, identified by pid + start time.

`stop_on_host` sends TERM to the deployment's process group (the engine and its workers: it was
started as a session leader), waits `grace` seconds, then KILL; a pid whose /proc start time
differs from the recorded one belongs to somebody else now and is left alone. Afterwards it
checks that nobody listens on the port any more. `status` checks each deployment: pid alive,
`/health`, uptime. Hosts are contacted in parallel, one connection per host. No printing.
"""

from __future__ import annotations

import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from dflashctl.errors import DflashError, UsageError, require_finite
from dflashctl.hosts import open_host
from dflashctl.hosts.host import Host
from dflashctl.server import deployments as state
from dflashctl.server.deployments import BadRecord, Deployment


@dataclass
class StopResult:
    name: str
    host: str
    pid: int
    outcome: str  # terminated | killed | not running | not ours | unverified | skipped | error
    port_free: bool | None = None
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.outcome in (
            "terminated",
            "killed",
            "not running",
            "not ours",
            "skipped",
        ) and (self.port_free is not False)

    @property
    def gone(self) -> bool:
        """Our server no longer runs (its record may go)."""
        return self.outcome in ("terminated", "killed", "not running", "not ours")

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "name": self.name,
            "host": self.host,
            "pid": self.pid,
            "outcome": self.outcome,
            "port_free": self.port_free,
            "message": self.message,
        }


@dataclass
class StatusRow:
    name: str
    host: str
    engine: str
    pid: int
    state: str  # up | unhealthy | down | unknown | corrupt
    health: int | None
    url: str
    log: str
    uptime_s: float | None
    model: str
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "host": self.host,
            "engine": self.engine,
            "pid": self.pid,
            "state": self.state,
            "alive": self.state in ("up", "unhealthy"),
            "health": self.health,
            "url": self.url,
            "log": self.log,
            "uptime_s": round(self.uptime_s, 1) if self.uptime_s is not None else None,
            "model": self.model,
            "message": self.message,
        }


def _ours(host: Host, dep: Deployment) -> str:
    """'alive' (our process), 'gone', 'other' (the pid now belongs to another process), or
    'unverified' (a live pid, but the record has no start time to prove it is ours)."""
    info = host.proc(dep.pid)
    if info is None:
        return "gone"
    if not dep.starttime:
        return "unverified"
    if info.starttime != dep.starttime:
        return "other"
    return "alive"


def stop_on_host(host: Host, dep: Deployment, *, grace: float = 10.0) -> StopResult:
    res = StopResult(dep.name, dep.host or "local", dep.pid, "not running")
    who = _ours(host, dep)
    if who == "other":
        res.outcome = "not ours"
        res.message = f"pid {dep.pid} now belongs to another process: left alone"
    elif who == "unverified":
        res.outcome = "unverified"
        res.message = (
            f"pid {dep.pid} is alive but the record has no start time to prove it is the "
            f"server dflashctl started: left alone (check it, then: kill {dep.pid})"
        )
        return res
    elif who == "alive":
        host.signal_group(dep.pid, "TERM", starttime=dep.starttime)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and _ours(host, dep) == "alive":
            time.sleep(0.2)
        if _ours(host, dep) == "alive":
            host.signal_group(dep.pid, "KILL", starttime=dep.starttime)
            deadline = time.monotonic() + 10.0
            while time.monotonic() < deadline and _ours(host, dep) == "alive":
                time.sleep(0.2)
            if _ours(host, dep) == "alive":  # never report a kill while it lives
                res.outcome = "error"
                res.message = f"pid {dep.pid} is still running after SIGTERM and SIGKILL"
                return res
            res.outcome = "killed"
            res.message = f"did not exit within {grace:g} s of SIGTERM: SIGKILL"
        else:
            res.outcome = "terminated"
    # the port is free once the whole group is gone; workers may take a moment
    deadline = time.monotonic() + 5.0
    holder = host.port_holder(dep.port)
    while holder is not None and time.monotonic() < deadline:
        time.sleep(0.2)
        holder = host.port_holder(dep.port)
    res.port_free = holder is None
    if holder is not None:
        who_holds = f"pid {holder.pid}" if holder.pid else "another process"
        res.message = (res.message + "; " if res.message else "") + (
            f"port {dep.port} is still in use by {who_holds}"
        )
    return res


def _open(dep: Deployment) -> Host:
    if dep.host is None:
        return open_host(None)
    from dflashctl.hosts.ssh import SSHOptions

    return open_host(dep.host, ssh=SSHOptions(ssh_config=dep.ssh_config))


def stop_deployment(dep: Deployment, *, grace: float = 10.0) -> StopResult:
    """Stop one deployment on its own host and forget it."""
    with _open(dep) as host:
        res = stop_on_host(host, dep, grace=grace)
    if res.gone:
        state.remove(dep.name)
    return res


def select(names: list[str], all_: bool) -> tuple[list[Deployment], list[BadRecord]]:
    """The deployments `stop`/`status` act on (NAMEs, a playbook's, or all of them), and the
    corrupt records skipped on the way (all of them, or the named ones)."""
    deps, bad = state.scan()
    if all_:
        return deps, bad
    if names:
        bad_named = [b for b in bad if b.name in names]
        wanted = [n for n in names if n not in {b.name for b in bad_named}]
        return _select(deps, wanted, bad) if wanted else [], bad_named
    return _select(deps, names, bad), bad


def _select(deps: list[Deployment], names: list[str], bad: list[BadRecord]) -> list[Deployment]:
    if not names:
        if len(deps) <= 1:
            return deps
        raise UsageError(
            f"{len(deps)} deployments are running: name one, or pass --all",
            "see them with: dflashctl status",
        )
    by_name = {d.name: d for d in deps}
    chosen: list[Deployment] = []
    for name in names:
        if name in by_name:
            chosen.append(by_name[name])
            continue
        from dflashctl.playbook import find_playbook, load_playbook

        path = find_playbook(name)
        if path is not None and path.is_file():
            from dflashctl.playbook import deployment_name

            book = load_playbook(path)
            wanted = {deployment_name(book, entry) for entry in book.hosts}
            chosen.extend(d for d in deps if d.name in wanted)
            continue
        known = ", ".join(sorted(by_name)) or "none"
        corrupt = f"; corrupt records: {', '.join(b.name for b in bad)}" if bad else ""
        raise UsageError(f"no deployment named {name!r}", f"running deployments: {known}{corrupt}")
    return chosen


def _by_host(deps: list[Deployment]) -> dict[str | None, list[Deployment]]:
    groups: dict[str | None, list[Deployment]] = defaultdict(list)
    for d in deps:
        groups[d.host].append(d)
    return groups


def stop(names: list[str], *, all_: bool = False, grace: float = 10.0) -> list[StopResult]:
    require_finite(timeout=grace)
    if grace < 0:
        raise UsageError("--timeout must be 0 or more seconds")
    deps, bad = select(names, all_)

    def on_host(group: list[Deployment]) -> list[StopResult]:
        out: list[StopResult] = []
        try:
            host = _open(group[0])
        except DflashError as e:
            return [
                StopResult(d.name, d.host or "local", d.pid, "error", None, e.message)
                for d in group
            ]
        with host:
            for dep in group:
                try:
                    res = stop_on_host(host, dep, grace=grace)
                except DflashError as e:
                    label = dep.host or "local"
                    out.append(StopResult(dep.name, label, dep.pid, "error", None, e.message))
                    continue
                out.append(res)
                if res.gone:  # a process that may still run keeps its record
                    state.remove(dep.name)
        return out

    skipped = [StopResult(b.name, "?", 0, "skipped", None, f"{b.why}; {b.hint}") for b in bad]
    return _parallel(on_host, list(_by_host(deps).values())) + skipped


def status(names: list[str] | None = None) -> list[StatusRow]:
    deps, bad = select(names or [], all_=not names)

    def on_host(group: list[Deployment]) -> list[StatusRow]:
        try:
            host = _open(group[0])
        except DflashError as e:
            return [_row(d, "unknown", None, e.message) for d in group]
        rows = []
        with host:
            for dep in group:
                try:
                    who = _ours(host, dep)
                    if who == "unverified":
                        msg = f"pid {dep.pid} alive, but the record has no start time"
                        rows.append(_row(dep, "unknown", None, msg))
                        continue
                    if who != "alive":
                        msg = "process exited" if who == "gone" else "pid reused by another process"
                        rows.append(_row(dep, "down", None, msg))
                        continue
                    reply = host.http_get(dep.bind, dep.port, "/health", timeout=3.0)
                    code = reply.status if reply is not None else None
                    st = "up" if code == 200 else "unhealthy"
                    msg = "" if code == 200 else f"/health {code if code else 'unreachable'}"
                    rows.append(_row(dep, st, code, msg))
                except DflashError as e:
                    rows.append(_row(dep, "unknown", None, e.message))
        return rows

    corrupt = [
        StatusRow(b.name, "?", "?", 0, "corrupt", None, "", str(b.path), None, "", b.why)
        for b in bad
    ]
    return _parallel(on_host, list(_by_host(deps).values())) + corrupt


def _row(dep: Deployment, st: str, health: int | None, message: str) -> StatusRow:
    return StatusRow(
        name=dep.name,
        host=dep.host or "local",
        engine=dep.engine,
        pid=dep.pid,
        state=st,
        health=health,
        url=dep.url,
        log=dep.log,
        uptime_s=dep.uptime_s() if st in ("up", "unhealthy") else None,
        model=dep.model_id,
        message=message,
    )


def _parallel(fn: Any, groups: list[list[Deployment]]) -> list[Any]:
    if not groups:
        return []
    if len(groups) == 1:
        return list(fn(groups[0]))
    with ThreadPoolExecutor(max_workers=min(8, len(groups))) as pool:
        results = list(pool.map(fn, groups))
    return [r for rs in results for r in rs]
