"""The `dflashctl doctor` command: the Typer signature, parse, one call, render."""

from typing import Annotated

import typer

from dflashctl.commands.options import (
    AcceptNewHostKeyOpt,
    HostOpt,
    JsonOpt,
    SSHConfigOpt,
    complete_engine,
    exit_for,
)
from dflashctl.console import emit_json


def doctor(
    launch_args: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[-- ENGINE_FLAGS]",
            help="The flags you will launch the engine with (after --); default: read from "
            "the running engine.",
        ),
    ] = None,
    host: HostOpt = None,
    ssh_config: SSHConfigOpt = None,
    accept_new_host_key: AcceptNewHostKeyOpt = False,
    engine: Annotated[
        str | None,
        typer.Option(
            "--engine",
            help="vllm, sglang, llama.cpp or local (default: what is installed).",
            autocompletion=complete_engine,
        ),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option("--port", help="Port to check (default 8000; SGLang 30000; llama.cpp 8080)."),
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="Target model directory (config.json).")
    ] = None,
    drafter: Annotated[
        str | None,
        typer.Option("--drafter", help="Drafter directory: config and k_norm weights checked."),
    ] = None,
    python: Annotated[
        str | None,
        typer.Option(
            "--python",
            help="The engine's Python (default: $DFLASHCTL_VLLM_PYTHON / "
            "$DFLASHCTL_SGLANG_PYTHON, the vllm/sglang launcher's, else this one).",
        ),
    ] = None,
    llama_server: Annotated[
        str | None,
        typer.Option(
            "--llama-server",
            help="llama.cpp's server binary, asked for its build (default: "
            "$DFLASHCTL_LLAMA_SERVER, else llama-server on PATH).",
        ),
    ] = None,
    num_speculative_tokens: Annotated[
        int | None,
        typer.Option("--num-speculative-tokens", "-k", help="The K you will pass the engine."),
    ] = None,
    hub_timeout: Annotated[
        float, typer.Option("--hub-timeout", help="Seconds to wait for the Hub.")
    ] = 3.0,
    json_out: JsonOpt = False,
) -> None:
    """Check the serving environment before launching: GPUs, driver, torch, flash-attn, engine
    version (llama.cpp: its build) and known engine defects, GPU memory, leftover engines, port,
    disk, Hub and token.

    Exit 0 no error (warnings are shown and never fail), 1 an error was found, 2 could not run.

    Examples:
      dflashctl doctor
      dflashctl doctor --engine vllm --python .venv-vllm/bin/python --drafter ./drafter --json
      dflashctl doctor --engine sglang --model /models/target --drafter /models/drafter -k 15
      dflashctl doctor --engine vllm --drafter ./drafter -- --enable-prefix-caching -tp 4
      dflashctl doctor --engine llama.cpp -- --spec-type draft-dflash -sm layer
    """
    from dflashctl.hosts import set_command_ssh

    set_command_ssh(ssh_config, accept_new_host_key)
    from dflashctl.commands.doctor.report import DoctorOptions
    from dflashctl.commands.doctor.run import run_doctor

    report = run_doctor(
        DoctorOptions(
            host=host,
            engine=engine,
            python=python,
            port=port,
            model=model,
            drafter=drafter,
            num_speculative_tokens=num_speculative_tokens,
            hub_timeout=hub_timeout,
            launch_args=list(launch_args or []) or None,
            llama_server=llama_server,
        )
    )
    if json_out:
        emit_json(report.to_json())
    else:
        from dflashctl.commands.doctor.render import render_doctor

        render_doctor(report)
    exit_for(report.ok)
