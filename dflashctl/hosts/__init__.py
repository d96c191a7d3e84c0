"""Machines dflashctl talks to: this one or a serving host over SSH (noun; never prints).

`open_host(spec)` is the way in. Modules: `host` (the `Host` vocabulary and `LocalHost`), `ssh`
(paramiko: `SSHHost`, config, keys, known hosts, commands, files), `tunnel` (a local port
forwarded to a remote one), `spec` (what `--host` may name; the command's SSH options), `facts`
(the script a host runs to report its facts, sent as `FACTS_SCRIPT`'s text to the host's Python).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from dflashctl.hosts.spec import (
    COMMAND_SSH,
    LISTEN_ADDRESSES,
    LOOPBACK,
    check_host_spec,
    set_command_ssh,
)

if TYPE_CHECKING:
    from dflashctl.hosts.host import Host
    from dflashctl.hosts.ssh import SSHOptions


FACTS_SCRIPT = Path(__file__).with_name("facts.py")  # sent to a host's Python as -c

__all__ = [
    "COMMAND_SSH",
    "FACTS_SCRIPT",
    "LISTEN_ADDRESSES",
    "LOOPBACK",
    "check_host_spec",
    "offline_host",
    "open_host",
    "set_command_ssh",
]


def open_host(
    spec: str | None,
    *,
    ssh: SSHOptions | None = None,
    python: str | None = None,
) -> Host:
    """`None` is this machine; anything else is `[user@]host[:port]` or an ssh_config alias."""
    if spec is None:
        from dflashctl.hosts.host import LocalHost

        return LocalHost(python)
    from dflashctl.hosts.ssh import SSHHost, SSHOptions

    host = SSHHost.connect(spec, ssh or SSHOptions())
    if python:
        host.python = python
    return host


def offline_host(spec: str, *, ssh: SSHOptions | None = None, python: str | None = None) -> Host:
    """`spec` as a dry run sees it: named, its ssh_config alias read (a local file), never
    connected to (no DNS, no TCP)."""
    from dflashctl.errors import DflashError
    from dflashctl.hosts.host import OfflineHost
    from dflashctl.hosts.ssh import SSHOptions, resolve

    check_host_spec(spec)
    try:
        target = resolve(spec, ssh or SSHOptions())
    except DflashError:
        target = None  # a bad alias or config is for the real run (or --check) to report
    return OfflineHost(spec, python, target)
