"""Machines dflashctl talks to: this one or a serving host over SSH (noun; never prints).

`open_host(spec)` is the way in. Modules: `host` (the `Host` vocabulary and `LocalHost`), `ssh`
(paramiko: `SSHHost`, config, keys, known hosts, commands, files), `tunnel` (a local port
forwarded to a remote one), `probe` (doctor's fact runner), `facts` (the script a host runs to
report its facts).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dflashctl.hosts.host import Host
    from dflashctl.hosts.ssh import SSHOptions


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
