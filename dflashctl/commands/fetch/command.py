"""The `dflashctl fetch` command: the Typer signature, parse, one call, render."""

from typing import Annotated

import typer

from dflashctl.commands.options import (
    AcceptNewHostKeyOpt,
    HostOpt,
    JsonOpt,
    SSHConfigOpt,
    complete_drafter,
    exit_for,
)
from dflashctl.console import emit_json
from dflashctl.errors import UsageError


def fetch(
    drafter: Annotated[
        str,
        typer.Argument(
            help="Registry name (see playbooks/drafters/) or org/repo.",
            autocompletion=complete_drafter,
        ),
    ],
    revision: Annotated[
        str | None,
        typer.Option(
            "--revision",
            help="40-hex commit; a tag or branch is resolved and recorded. "
            "Default: the registry's pin.",
        ),
    ] = None,
    dir_opt: Annotated[
        str | None,
        typer.Option(
            "--dir",
            "--local-dir",
            metavar="<path>",
            help="A directory for the files, with a lock beside them (default: the shared "
            "Hugging Face cache, as hf download; vLLM given the hub id then finds them).",
        ),
    ] = None,
    include: Annotated[
        list[str] | None,
        typer.Option(
            "--include",
            help="Glob of repo files to fetch (repeatable). Default: config.json, "
            "*.safetensors, model.safetensors.index.json.",
        ),
    ] = None,
    host: HostOpt = None,
    ssh_config: SSHConfigOpt = None,
    accept_new_host_key: AcceptNewHostKeyOpt = False,
    remote_dir: Annotated[
        str | None,
        typer.Option("--remote-dir", help="With --host: the directory there (default: repo name)."),
    ] = None,
    allow_unpinned: Annotated[
        bool,
        typer.Option(
            "--allow-unpinned",
            help="Take a moving revision (main) or bytes the registry does not pin; "
            "the commit and hashes are recorded in the lock.",
        ),
    ] = False,
    remote_fetch: Annotated[
        bool,
        typer.Option(
            "--remote-fetch",
            help="With --host: download on the host itself (it must reach the Hub), "
            "then re-hash there and compare with the pins.",
        ),
    ] = False,
    python: Annotated[
        str | None,
        typer.Option(
            "--python", help="With --remote-fetch: Python on --host with dflashctl (python3)."
        ),
    ] = None,
    check_upstream: Annotated[
        bool,
        typer.Option(
            "--check-upstream",
            help="Download nothing: has the branch moved off the pinned commit, and which "
            "tracked files changed? Exit 1 on drift.",
        ),
    ] = False,
    branch: Annotated[
        str | None,
        typer.Option("--branch", help="With --check-upstream: the branch to compare (main)."),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Download a drafter at its pinned revision, verify sha256 pins, write a lock file,
    then run verify-config on what arrived.

    Without --dir the files go into the shared Hugging Face cache (HF_HOME), where an engine
    given the hub id finds them, and the lock into $DFLASHCTL_HOME/locks/.

    Revisions: the registry's pinned commit by default; --revision takes a commit, or a branch
    or tag, which is resolved to its commit and recorded in the lock. A registry drafter
    without a pinned revision is trusted on first use: main's commit is taken, said, and
    locked with every sha256; later fetches stay on it until --revision moves them.

    Exit 0: verified, and verify-config is healthy. Exit 1: verify-config found a problem
    (with --check-upstream: the branch drifted from the pin). Exit 2: could not fetch (bad
    arguments, Hub error, sha256 mismatch, unreachable host).

    Examples:
      dflashctl fetch qwen3.8-27b-dflash2 --dir /models/Qwen3.8-27B-DFlash2
      dflashctl fetch z-lab/Qwen3-8B-DFlash-b16 --revision <40-hex commit> --json
      dflashctl fetch org/drafter --allow-unpinned --include config.json
      dflashctl fetch qwen3.8-27b-dflash2 --check-upstream
      dflashctl fetch qwen3.8-27b-dflash2 --host gpu1 --remote-fetch --python /opt/venv/bin/python
    """
    from dflashctl.hosts import set_command_ssh

    set_command_ssh(ssh_config, accept_new_host_key)
    from dflashctl.commands.fetch.render import RichFetchProgress, render_fetch
    from dflashctl.commands.fetch.run import dir_option
    from dflashctl.commands.fetch.run import fetch as run_fetch

    directory = dir_option(dir_opt)

    if check_upstream:
        from dflashctl.commands.fetch.render import render_upstream
        from dflashctl.commands.fetch.upstream import check_upstream as run_check

        for flag, used in (
            ("--host", host),
            ("--remote-dir", remote_dir),
            ("--remote-fetch", remote_fetch),
            ("--python", python),
            ("--allow-unpinned", allow_unpinned),
        ):
            if used:
                raise UsageError(
                    f"--check-upstream does not take {flag}", "it downloads nothing; drop " + flag
                )
        upstream = run_check(
            drafter,
            branch=branch or "main",
            revision=revision,
            include=include or (),
            directory=directory,
        )
        if json_out:
            emit_json(upstream.to_json())
        else:
            render_upstream(upstream)
        exit_for(upstream.ok)
        return
    if branch is not None:
        raise UsageError("--branch needs --check-upstream", "use --revision to fetch a branch")

    with RichFetchProgress() as progress:
        report = run_fetch(
            drafter,
            revision=revision,
            directory=directory,
            include=include or (),
            allow_unpinned=allow_unpinned,
            host=host,
            remote_dir=remote_dir,
            remote_fetch=remote_fetch,
            python=python,
            progress=progress,
        )
    if json_out:
        emit_json(report.to_json())
    else:
        render_fetch(report)
    exit_for(report.ok)
