"""The `dflashctl verify-config` command: the Typer signature, parse, one call, render."""

from pathlib import Path
from typing import Annotated

import typer

from dflashctl.commands.options import (
    AcceptNewHostKeyOpt,
    DrafterNameOpt,
    EngineOpt,
    HostOpt,
    JsonOpt,
    SSHConfigOpt,
    exit_for,
)
from dflashctl.console import emit_json


def verify_config(
    path: Annotated[Path, typer.Argument(help="Drafter directory or its config.json.")],
    drafter: DrafterNameOpt = None,
    target: Annotated[
        Path | None, typer.Option("--target", help="Target model directory or config.json.")
    ] = None,
    engine: EngineOpt = "vllm",
    fix: Annotated[
        bool, typer.Option("--fix", help="Write canonical values (atomic, with a backup).")
    ] = False,
    max_model_len: Annotated[
        int | None,
        typer.Option(
            "--max-model-len",
            min=1,
            help="The serving context: warn where it exceeds the drafter's training context.",
        ),
    ] = None,
    host: HostOpt = None,
    ssh_config: SSHConfigOpt = None,
    accept_new_host_key: AcceptNewHostKeyOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Check a drafter's config.json (and safetensors header) against canonical values and rules.

    Examples:
      dflashctl verify-config ./Qwen3.6-27B-DFlash --drafter qwen3.6-27b-dflash
      dflashctl verify-config ./drafter --target ./target --json
      dflashctl verify-config ./drafter --drafter demo --fix
      dflashctl verify-config ./drafter --drafter qwen3.5-27b-dflash --max-model-len 32768
    """
    from dflashctl.hosts import set_command_ssh

    set_command_ssh(ssh_config, accept_new_host_key)
    from dflashctl.commands.verify_config.render import render_verify
    from dflashctl.drafter.verify import run_verify

    report = run_verify(path, drafter=drafter, target=target, engine=engine, fix=fix, host=host,
                        max_model_len=max_model_len)  # fmt: skip
    if json_out:
        emit_json(report.to_json())
    else:
        render_verify(report)
    exit_for(report.ok)
