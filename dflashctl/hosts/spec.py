"""What `--host` may name, checked before anything connects, and the running command's SSH
options (`--ssh-config`, `--accept-new-host-key`) that every connection it opens uses."""

from __future__ import annotations

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
