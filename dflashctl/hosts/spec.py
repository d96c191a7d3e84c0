"""What `--host` may name, checked before anything connects, and the running command's SSH
options (`--ssh-config`, `--accept-new-host-key`) that every connection it opens uses."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from typing import Any

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


def listen_address(spec: str | None) -> str | None:
    """The address to bind when `--host` holds one (`vllm serve --host 0.0.0.0`): a listen
    address, or bare loopback (which names no sshd). None for a machine to reach over SSH."""
    if spec is None:
        return None
    bare = spec.strip()
    if bare in LISTEN_ADDRESSES or bare in LOOPBACK:
        return bare.strip("[]")
    return None


_SPEC = re.compile(r"^(?:(?P<user>[^@\s]+)@)?(?P<host>\[[^\]]+\]|[^:@\s\[\]]+)(?::(?P<port>\d+))?$")


def parse_spec(spec: str) -> tuple[str | None, str, int | None]:
    """`[user@]host[:port]` (IPv6 as `[addr]:port`) -> (user, host, port)."""
    from dflashctl.errors import InputError

    m = _SPEC.match(spec.strip())
    if not m or not spec.strip():
        raise InputError(
            f"--host {spec!r} is not [user@]host[:port] or an ssh_config alias",
            "e.g. --host gpu1, --host alice@10.0.0.5, --host alice@10.0.0.5:2222",
        )
    host = m.group("host").strip("[]")
    port = int(m.group("port")) if m.group("port") else None
    if port is not None and not 0 < port < 65536:
        raise InputError(f"--host {spec!r}: port {port} is out of range")
    return m.group("user"), host, port


def _remote_word(arg: str) -> str:
    """One word for the remote shell; a leading `~/` stays unquoted so that it expands there."""
    if arg.startswith("~/"):
        return "~/" + shlex.quote(arg[2:]) if arg[2:] else "~/"
    return shlex.quote(arg)


def ssh_line(spec: str, argv: Sequence[str], ssh_config: str | None = None) -> str:
    """The OpenSSH command line that runs argv on `spec` when pasted into a shell: `-p PORT`
    (OpenSSH has no `host:port`), and the remote command quoted once more, since ssh hands
    its arguments joined by spaces to the remote shell (which would strip a JSON's quotes)."""
    user, host, port = parse_spec(spec)
    remote = " ".join(_remote_word(str(a)) for a in argv)
    words = ["ssh", *(["-F", shlex.quote(ssh_config)] if ssh_config else [])]
    words += [*(["-p", str(port)] if port else []), shlex.quote(f"{user}@{host}" if user else host)]
    return " ".join([*words, shlex.quote(remote)])


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
    parse_spec(spec)  # `a\nb`, `a b`: refused here, before a dry run prints a line of it
