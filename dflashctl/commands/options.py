"""Options shared by several commands, and the exit rule: 0 healthy, 1 a problem was found
(2, could not run, comes from `cli.main` for any `DflashError`)."""

from __future__ import annotations

from typing import Annotated

import typer

# Shared option aliases.
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output on stdout.")]
HostOpt = Annotated[
    str | None,
    typer.Option(
        "--host",
        help="Remote host, reached over SSH: \\[user@]host[:port] or an ~/.ssh/config alias "
        "(not a listen address: that is serve --bind).",
    ),
]
SSHConfigOpt = Annotated[
    str | None,
    typer.Option(
        "--ssh-config",
        help="ssh_config file for --host (default ~/.ssh/config; env DFLASHCTL_SSH_CONFIG).",
    ),
]
AcceptNewHostKeyOpt = Annotated[
    bool,
    typer.Option(
        "--accept-new-host-key",
        help="With --host: add an unknown host key to known_hosts (never a changed one; env "
        "DFLASHCTL_ACCEPT_NEW_HOST_KEY=1).",
    ),
]
DrafterNameOpt = Annotated[
    str | None,
    typer.Option("--drafter", help="Registry name of the drafter (see playbooks/drafters/)."),
]
EngineOpt = Annotated[
    str,
    typer.Option("--engine", help="Engine whose reading to check: vllm, sglang or local."),
]


def exit_for(ok: bool) -> None:
    """Exit 1 when the report found a problem."""
    if not ok:
        raise typer.Exit(1)
