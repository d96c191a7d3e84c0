"""The `dflashctl install` command: the Typer signature, parse, one call, render."""

from pathlib import Path
from typing import Annotated

import typer

from dflashctl.commands.options import (
    AcceptNewHostKeyOpt,
    JsonOpt,
    SSHConfigOpt,
    exit_for,
)
from dflashctl.console import emit_json


def install(
    host: Annotated[
        str,
        typer.Option(
            "--host",
            help="The host to install on, reached over SSH: \\[user@]host[:port] or an "
            "~/.ssh/config alias.",
        ),
    ],
    ssh_config: SSHConfigOpt = None,
    accept_new_host_key: AcceptNewHostKeyOpt = False,
    wheel: Annotated[
        Path | None,
        typer.Option("--wheel", help="The wheel to install (default: built from this tree)."),
    ] = None,
    venv: Annotated[
        str, typer.Option("--venv", help="The venv on the host (created once).")
    ] = "~/.dflashctl/venv",
    python: Annotated[
        str, typer.Option("--python", help="The host's interpreter that creates the venv.")
    ] = "python3",
    extras: Annotated[
        str | None,
        typer.Option("--extras", help="Extras to install with it, e.g. engine or engine,demo."),
    ] = None,
    no_deps: Annotated[
        bool,
        typer.Option("--no-deps", help="Install the wheel alone (its dependencies are there)."),
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Install this dflashctl on a host: its wheel copied over SSH into a venv there.

    For the commands that run dflashctl on the GPU host (fetch --remote-fetch, diagnose
    --host): afterwards pass them --python VENV/bin/python. Exit 0 installed, 2 could not.

    Examples:
      dflashctl install --host gpu1
      dflashctl install --host gpu1 --extras engine --venv ~/venvs/dflashctl
      dflashctl install --host gpu1 --wheel dist/dflashctl-0.1.0-py3-none-any.whl --no-deps
    """
    from dflashctl.hosts import set_command_ssh

    set_command_ssh(ssh_config, accept_new_host_key)
    from dflashctl.commands.install.run import install as run_install
    from dflashctl.console import err

    report = run_install(
        host,
        wheel=wheel,
        venv=venv,
        python=python,
        extras=(extras or "").split(",") if extras else [],
        deps=not no_deps,
        say=None if json_out else (lambda m: err.print(f"[dim]{m}[/dim]", soft_wrap=True)),
    )
    if json_out:
        emit_json(report.to_json())
    else:
        from dflashctl.commands.install.render import render_install

        render_install(report)
    exit_for(report.ok)
