"""Machines dflashctl talks to: this one or a serving host over SSH (noun; never prints).

`open_host(spec)` is the way in. Modules: `host` (the `Host` vocabulary and `LocalHost`), `ssh`
(paramiko: `SSHHost`, config, keys, known hosts, commands, files), `tunnel` (a local port
forwarded to a remote one), `facts` (the script a host runs to report its facts, sent as
`FACTS_SCRIPT`'s text to the host's Python).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dflashctl.hosts.host import Host
    from dflashctl.hosts.ssh import SSHOptions


FACTS_SCRIPT = Path(__file__).with_name("facts.py")  # sent to a host's Python as -c


# The running command's --ssh-config / --accept-new-host-key: every SSH connection it opens
# uses them, whoever builds its SSHOptions (an explicit SSHOptions field still wins; the
# environment, DFLASHCTL_SSH_CONFIG / DFLASHCTL_ACCEPT_NEW_HOST_KEY, comes after).
COMMAND_SSH: dict[str, Any] = {}


def set_command_ssh(ssh_config: str | None = None, accept_new_host_key: bool = False) -> None:
    """Set by each command from its SSH options (cleared for every command by the CLI)."""
    COMMAND_SSH.clear()
    COMMAND_SSH.update(ssh_config=ssh_config, accept_new_host_key=accept_new_host_key)


# Addresses a server listens on, not machines to reach: `vllm serve --host 0.0.0.0` habits.
LISTEN_ADDRESSES = ("0.0.0.0", "::", "[::]", "*")
LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


def check_host_spec(spec: str | None) -> None:
    """Refuse a listen address given to `--host` (it names the machine reached over SSH), before
    anything connects. Loopback is refused too unless it says how to reach sshd
    (`user@127.0.0.1` or `127.0.0.1:2222`): bare, it is a `vllm serve --host` habit."""
    from dflashctl.errors import UsageError

    if spec is None:
        return
    bare = spec.strip()
    if bare in LISTEN_ADDRESSES or bare in LOOPBACK:
        what = "a listen address" if bare in LISTEN_ADDRESSES else "this machine's loopback"
        raise UsageError(
            f"--host {bare} is {what}: dflashctl's --host is the machine to run on over SSH",
            f"leave --host out to run here; the server's listen address is serve --bind {bare}",
        )


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
