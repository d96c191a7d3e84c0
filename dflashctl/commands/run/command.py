"""The `dflashctl run` command: the Typer signature, parse, one call, render."""

from typing import Annotated

import typer

from dflashctl.commands.options import (
    AcceptNewHostKeyOpt,
    JsonOpt,
    SSHConfigOpt,
    complete_playbook,
    exit_for,
)
from dflashctl.console import emit_json
from dflashctl.errors import UsageError


def run(
    playbook: Annotated[
        str,
        typer.Argument(
            help="Playbook file, or a bundled playbook's name.", autocompletion=complete_playbook
        ),
    ],
    teardown: Annotated[
        bool, typer.Option("--teardown", help="Stop the servers this run started at the end.")
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Print every command on every host; run nothing, connect to nothing.",
        ),
    ] = False,
    check: Annotated[
        bool,
        typer.Option(
            "--check", help="With --dry-run: connect to each host and read the facts there."
        ),
    ] = False,
    limit: Annotated[
        str | None,
        typer.Option(
            "--limit",
            "-l",
            help="Only these hosts: comma-separated host or deployment names, shell wildcards, "
            "!NAME to leave one out (as Ansible's --limit).",
        ),
    ] = None,
    ssh_config: SSHConfigOpt = None,
    accept_new_host_key: AcceptNewHostKeyOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Run a playbook end to end: fetch, verify-config, serve, smoke, metrics, per host.

    A host stops at its first failing step. Servers stay up unless --teardown.

    Examples:
      dflashctl run playbooks/demo.yaml --teardown
      dflashctl run playbooks/vllm-2xa100-tp2.yaml --dry-run
      dflashctl run vllm-fleet --limit 'gpu-*,!gpu-c'
    """
    from dflashctl.commands.run.render import render_run, step_line
    from dflashctl.commands.run.run import run_playbook
    from dflashctl.hosts import set_command_ssh
    from dflashctl.playbook import find_playbook

    set_command_ssh(ssh_config, accept_new_host_key)
    path = find_playbook(playbook)
    if path is None:
        raise UsageError(f"{playbook!r} is not a playbook file or a bundled playbook name")
    if check and not dry_run:
        raise UsageError("--check goes with --dry-run", "dflashctl run PLAYBOOK --dry-run --check")
    report = run_playbook(
        path,
        teardown=teardown,
        dry_run=dry_run,
        check=check,
        limit=limit,
        on_step=None if json_out else step_line,
    )
    if json_out:
        emit_json(report.to_json())
    else:
        render_run(report)
    if report.could_not_run:
        raise typer.Exit(2)
    exit_for(report.ok)
