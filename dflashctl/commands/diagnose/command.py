"""The `dflashctl diagnose` command: the Typer signature, parse, one call, render."""

from pathlib import Path
from typing import Annotated

import typer

from dflashctl.commands.options import (
    AcceptNewHostKeyOpt,
    JsonOpt,
    SSHConfigOpt,
    complete_server,
    exit_for,
)
from dflashctl.console import emit_json


def diagnose(
    url: Annotated[
        str,
        typer.Argument(
            help="The production server: a URL, HOST:PORT, or a deployment name (its record "
            "gives --model, --drafter, --log and --host).",
            autocompletion=complete_server,
        ),
    ],
    model: Annotated[
        str | None,
        typer.Option("--model", help="Target model directory (on --host: its path there)."),
    ] = None,
    drafter: Annotated[
        str | None,
        typer.Option("--drafter", help="Drafter directory (on --host: its path there)."),
    ] = None,
    log: Annotated[
        str | None,
        typer.Option("--log", help="The production server's log: its effective config."),
    ] = None,
    host: Annotated[
        str | None,
        typer.Option(
            "--host",
            help="The host that has the checkpoints; the reference engine is launched there.",
        ),
    ] = None,
    ssh_config: SSHConfigOpt = None,
    accept_new_host_key: AcceptNewHostKeyOpt = False,
    prompts: Annotated[
        Path | None,
        typer.Option("--prompts", help="Prompts file: JSON list, JSON lines or one per line."),
    ] = None,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Tokens per answer.")] = 128,
    min_acceptance_length: Annotated[
        float | None,
        typer.Option("--min-acceptance-length", help="Below this, acceptance is low."),
    ] = None,
    dtype: Annotated[
        str, typer.Option("--dtype", help="Reference engine dtype: auto, float32, bfloat16.")
    ] = "auto",
    python: Annotated[
        str | None, typer.Option("--python", help="Python on --host for the reference engine.")
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds one answer may take.")
    ] = 120.0,
    json_out: JsonOpt = False,
) -> None:
    """Is low acceptance the drafter, its config, or the serving engine?

    Sends the same greedy prompts to the production server and to the bundled reference engine on
    the same target and drafter, compares acceptance per position and the greedy text, and checks
    the config (verify-config, the server's start-up lines, the mask token).

    Verdict: healthy, config, engine or drafter. Exit 0 healthy, 1 a problem found, 2 could not
    run.

    Examples:
      dflashctl diagnose http://127.0.0.1:8000 --model ./target --drafter ./drafter --log vllm.log
      dflashctl diagnose http://gpu1:8000 --model /models/t --drafter /models/d --host gpu1
      dflashctl diagnose gpu1-8000                  # a deployment dflashctl serve started
      dflashctl diagnose URL --model T --drafter D --prompts prompts.json --max-tokens 64 --json
    """
    from dflashctl.hosts import set_command_ssh

    set_command_ssh(ssh_config, accept_new_host_key)
    from dflashctl.commands.diagnose.render import progress, render_diagnose
    from dflashctl.commands.diagnose.run import DiagnoseOptions, run_diagnose

    report = run_diagnose(
        DiagnoseOptions(
            url=url,
            model=model,
            drafter=drafter,
            log=log,
            host=host,
            prompts_file=prompts,
            max_tokens=max_tokens,
            timeout=timeout,
            min_acceptance_length=min_acceptance_length,
            dtype=dtype,
            python=python,
        ),
        progress=None if json_out else progress,
    )
    if json_out:
        emit_json(report.to_json())
    else:
        render_diagnose(report)
    exit_for(report.ok)
