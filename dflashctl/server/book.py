"""`dflashctl serve` as one call: from options or a playbook to plans (dry run) or launches.

One deployment (no playbook, or a playbook with one host) may run in the foreground; a playbook
with several hosts launches them in parallel, detached, and reports per host. Each host gets its
own SSH connection. No printing: progress goes to `on_event`.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dflashctl.errors import DflashError, UsageError
from dflashctl.hosts import offline_host, open_host
from dflashctl.hosts.ssh import SSHOptions
from dflashctl.playbook import Playbook, deployment_name, load_playbook
from dflashctl.server.launch import LaunchResult, OnEvent, launch, serve_foreground
from dflashctl.server.plan import Plan, ServeOptions, plan


@dataclass
class ServeOutcome:
    dry_run: bool
    plans: list[Plan] = field(default_factory=list)
    results: list[LaunchResult] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)  # host that could not run -> why

    @property
    def ok(self) -> bool:
        return not self.errors and all(r.ok or r.ended == "interrupted" for r in self.results)

    def to_json(self) -> Any:
        if self.dry_run:
            data: Any = [p.to_json() for p in self.plans]
        else:
            data = [r.to_json() for r in self.results]
        data += [{"ok": False, "host": h, "reason": why} for h, why in self.errors.items()]
        return data[0] if len(data) == 1 else data


def options_from_playbook(
    path: Path, overrides: dict[str, Any]
) -> tuple[Playbook, list[ServeOptions]]:
    book = load_playbook(path)
    out = []
    for entry in book.hosts:
        settings = book.serve_settings(entry)
        opts = ServeOptions.from_settings(settings, **overrides)
        opts.host = entry.host
        opts.name = deployment_name(book, entry)
        out.append(opts)
    return book, out


def run_serve(
    targets: list[ServeOptions],
    *,
    ssh: SSHOptions,
    detach: bool,
    dry_run: bool,
    check: bool = False,
    on_event: OnEvent | None = None,
    poll: float | None = None,
) -> ServeOutcome:
    """`dry_run` plans without connecting to any host (what it could not check is in the
    notes); `check` with it connects and reads the facts there (drafter config, ~, python)."""
    if not targets:
        raise UsageError("nothing to serve")
    outcome = ServeOutcome(dry_run=dry_run)
    if len(targets) > 1 and not detach and not dry_run:
        detach = True  # several hosts: parallel and detached

    def one(opts: ServeOptions) -> Plan | LaunchResult:
        offline = dry_run and not check
        if offline and opts.host is not None:
            opened = offline_host(opts.host, ssh=ssh, python=opts.python)
        else:
            opened = open_host(opts.host, ssh=ssh, python=opts.python)
        with opened as host:
            p = plan(opts, host, setup=not offline)
            if dry_run:
                return p
            if detach:
                return launch(p, host, on_event=on_event, poll=poll)
            return serve_foreground(p, host, on_event=on_event, poll=poll)

    if len(targets) == 1:
        items: list[Plan | LaunchResult | DflashError] = [one(targets[0])]
    else:

        def safe(opts: ServeOptions) -> Plan | LaunchResult | DflashError:
            try:
                return one(opts)
            except DflashError as e:
                return e

        with ThreadPoolExecutor(max_workers=min(16, len(targets))) as pool:
            items = list(pool.map(safe, targets))
    for opts, item in zip(targets, items, strict=True):
        if isinstance(item, DflashError):
            label = opts.name or opts.host or "local"
            outcome.errors[label] = item.message + (f" ({item.hint})" if item.hint else "")
        elif isinstance(item, Plan):
            outcome.plans.append(item)
        else:
            outcome.results.append(item)
    return outcome
