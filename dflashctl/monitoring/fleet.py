"""A playbook's fleet as Prometheus sees it: every host's server as a scrape target, and the
alert that ties each one to its drafter's expected range (`alerts --playbook BOOK`).

Each host's address is the one `serve` gives its clients (server.plan.client_address: the
serve port on the host's name, or its ssh_config HostName; 127.0.0.1 for `local`), worked out
without connecting to any host or reading its drafter. Hosts that serve without speculation
(`spec: none`) are scraped but not held to a drafter's range. Reads the playbook and the
registry only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dflashctl.errors import UsageError
from dflashctl.monitoring.rules import Expected


@dataclass(frozen=True)
class FleetTarget:
    deployment: str  # the deployment's name (NAME-HOST), a label on its series
    instance: str  # host:port, as Prometheus labels what it scrapes
    engine: str  # local | vllm | sglang
    speculates: bool


@dataclass(frozen=True)
class Fleet:
    name: str
    targets: list[FleetTarget]
    drafter: str | None  # the playbook's verify.registry entry
    expected: list[Expected]  # one per speculating host, when the entry has a range


def load_fleet(book_arg: str) -> Fleet:
    from dflashctl.drafter.registry import get_entry
    from dflashctl.hosts import offline_host, open_host
    from dflashctl.hosts.ssh import SSHOptions
    from dflashctl.playbook import find_playbook
    from dflashctl.server.book import options_from_playbook
    from dflashctl.server.plan import client_address

    path = find_playbook(book_arg)
    if path is None:
        raise UsageError(
            f"--playbook {book_arg!r} is neither a .yaml file nor a bundled playbook",
            "e.g. --playbook playbooks/vllm-fleet.yaml, or a name from playbooks/",
        )
    book, options = options_from_playbook(path, {})
    targets = []
    for opts in options:
        if opts.host is None:
            opened = open_host(None)
        else:
            opened = offline_host(opts.host, ssh=SSHOptions(), python=opts.python)
        with opened as host:
            address, port = client_address(opts, host)
        targets.append(
            FleetTarget(
                deployment=opts.name or opts.host or "local",
                instance=f"{address}:{port}",
                engine=opts.engine,
                speculates=opts.spec != "none",
            )
        )
    registry = (book.sections.get("verify") or {}).get("registry")
    expected: list[Expected] = []
    if registry:
        entry = get_entry(str(registry))
        exp = entry.expected_acceptance
        if exp is not None:
            expected = [
                Expected(entry.name, f'instance="{t.instance}"', exp.min, exp.max)
                for t in targets
                if t.speculates
            ]
    return Fleet(book.name, targets, str(registry) if registry else None, expected)


def scrape_config(fleet: Fleet, interval: str = "15s") -> dict[str, Any]:
    """The `scrape_configs` entry that scrapes every host of the fleet: one job named after
    the playbook, each target labelled with its deployment and engine."""
    return {
        "scrape_configs": [
            {
                "job_name": fleet.name,
                "scrape_interval": interval,
                "metrics_path": "/metrics",
                "static_configs": [
                    {
                        "targets": [t.instance],
                        "labels": {
                            "playbook": fleet.name,
                            "deployment": t.deployment,
                            "server_engine": t.engine,
                        },
                    }
                    for t in fleet.targets
                ],
            }
        ]
    }
