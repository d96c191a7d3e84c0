"""The `dflashctl serve`, `stop` and `status` commands: the Typer signatures, parse, one call,
render."""

from typing import Annotated, Any

import typer

from dflashctl.commands.options import (
    AcceptNewHostKeyOpt,
    HostOpt,
    JsonOpt,
    SSHConfigOpt,
    complete_deployment,
    complete_engine,
    exit_for,
)
from dflashctl.console import emit_json
from dflashctl.errors import UsageError

# Options serve does not know go to the engine, so a `vllm serve MODEL …` line works as it is
# (`--` still marks the start of the engine's arguments).
CONTEXT = {"ignore_unknown_options": True, "allow_extra_args": True}

EPILOG = (
    "Examples:\n\n"
    "  dflashctl serve                                   # bundled engine, demo pair, :8000\n\n"
    "  dflashctl serve --detach --json\n\n"
    "  dflashctl serve --model ./target --drafter ./drafter --spec none --port 8001\n\n"
    "  dflashctl serve Qwen/Qwen3-8B --engine vllm --drafter /models/d --host gpu1 "
    "--bind 0.0.0.0 --dry-run\n\n"
    "  dflashctl serve playbooks/vllm-2xa100-tp2.yaml -- --max-model-len 8192\n\n"
    "  dflashctl serve --engine llama.cpp --model target.gguf --drafter dflash.gguf --dry-run "
    "-- --spec-draft-p-min 0.75\n\n"
    "  dflashctl serve Qwen/Qwen3-8B --engine vllm --speculative-config "
    '\'{"method":"dflash","model":"z-lab/Qwen3-8B-DFlash-b16"}\' --max-model-len 8192'
)


def serve(
    args: Annotated[
        list[str] | None,
        typer.Argument(
            help="MODEL (a hub id or a directory, as `vllm serve MODEL`) or a PLAYBOOK "
            "(.yaml or a bundled name); then the engine's own arguments (options serve does "
            "not know, or anything after `--`).",
            show_default=False,
        ),
    ] = None,
    engine: Annotated[
        str | None,
        typer.Option(
            "--engine",
            help="local (the bundled engine), vllm, sglang or llama.cpp (llama-server with a "
            "GGUF drafter; $DFLASHCTL_LLAMA_SERVER names the binary).",
            autocompletion=complete_engine,
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", help="Target: a directory on the serving host or a hub id."),
    ] = None,
    drafter: Annotated[
        str | None,
        typer.Option(
            "--drafter", help="DFlash drafter: a directory on the serving host or a hub id."
        ),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option("--port", help="Port (default 8000; SGLang 30000, llama.cpp 8080)."),
    ] = None,
    bind: Annotated[
        str | None,
        typer.Option(
            "--bind",
            help="Listen address, vllm serve's --host (default 127.0.0.1 here, 0.0.0.0 remote).",
        ),
    ] = None,
    num_speculative_tokens: Annotated[
        int | None,
        typer.Option(
            "--num-speculative-tokens", "-k", help="K (default: block size - 1 of the drafter)."
        ),
    ] = None,
    spec: Annotated[
        str | None, typer.Option("--spec", help="dflash, or none for a plain greedy control.")
    ] = None,
    tensor_parallel_size: Annotated[
        int | None, typer.Option("--tensor-parallel-size", "--tp", help="GPUs per server.")
    ] = None,
    served_model_name: Annotated[
        str | None, typer.Option("--served-model-name", help="Model name in the API.")
    ] = None,
    name: Annotated[
        str | None, typer.Option("--name", help="Deployment name (default HOST-PORT).")
    ] = None,
    host: HostOpt = None,
    ssh_config: SSHConfigOpt = None,
    accept_new_host_key: AcceptNewHostKeyOpt = False,
    python: Annotated[
        str | None,
        typer.Option(
            "--python", "--remote-python", help="Interpreter for the engine on the serving host."
        ),
    ] = None,
    detach: Annotated[
        bool, typer.Option("--detach", "-d", help="Return once ready; the server keeps running.")
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Print the command only; connects to nothing (the notes say what was not "
            "checked).",
        ),
    ] = False,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="With --dry-run: connect to the host and read the facts there (the drafter's "
            "config.json, ~, the demo pair).",
        ),
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Launch even if verify-config finds a problem or a known engine defect applies.",
        ),
    ] = False,
    ready_timeout: Annotated[
        float | None, typer.Option("--ready-timeout", help="Seconds to wait for ready (600).")
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Launch the bundled engine (default: the demo pair), vLLM, SGLang or llama.cpp's
    llama-server, locally or over SSH.

    Waits until the server is really up: process alive, /health 200, /v1/models lists the
    model, and the log shows the engine's ready line.

    Exit 0 ready (or stopped with Ctrl-C in the foreground), 1 the launch failed (the log's
    root-cause lines are shown), 2 could not run (bad arguments, port in use, unreachable host).
    """
    from dflashctl.hosts import check_host_spec, set_command_ssh
    from dflashctl.hosts.spec import listen_address
    from dflashctl.hosts.ssh import SSHOptions
    from dflashctl.playbook import find_playbook
    from dflashctl.server.book import options_from_playbook
    from dflashctl.server.plan import ServeOptions

    address = listen_address(host)
    if address is not None:  # `vllm serve ... --host 0.0.0.0` as typed: the listen address
        if bind is not None and bind != address:
            raise UsageError(
                f"--host {host} and --bind {bind} both give the listen address",
                "give it once (dflashctl's --host names a machine reached over SSH)",
            )
        bind, host = address, None
        if not json_out:
            from dflashctl.commands.serve.render import listen_note

            listen_note(address)
    check_host_spec(host)
    set_command_ssh(ssh_config, accept_new_host_key)
    items = list(args or [])
    book = find_playbook(items[0]) if items and not items[0].startswith("-") else None
    if book is not None:
        items = items[1:]
    elif items and not items[0].startswith("-"):
        # `vllm serve MODEL`: the positional is the model, as there
        if model is not None and model != items[0]:
            raise UsageError(
                f"the model is given twice: {items[0]!r} and --model {model!r}",
                "give it once, as `dflashctl serve MODEL` or --model MODEL",
            )
        model, items = items[0], items[1:]
    if items and not items[0].startswith("-"):
        raise UsageError(
            f"unexpected argument {items[0]!r}", "extra engine arguments go after `--`"
        )
    _refuse_near_misses(items)
    cli = dict(
        engine=engine,
        model=model,
        drafter=drafter,
        port=port,
        bind=bind,
        num_speculative_tokens=num_speculative_tokens,
        spec=spec,
        tensor_parallel_size=tensor_parallel_size,
        served_model_name=served_model_name,
        python=python,
        ready_timeout=ready_timeout,
        force=force or None,
    )
    if book is not None:
        if host is not None or name is not None:
            raise UsageError("--host and --name come from the playbook's hosts")
        _, targets = options_from_playbook(book, cli)
        for t in targets:
            t.extra_args += items
    else:
        targets = [ServeOptions.from_settings({}, **cli, host=host, name=name, extra_args=items)]
    ssh = SSHOptions(ssh_config=ssh_config, accept_new_host_key=accept_new_host_key)
    if check and not dry_run:
        raise UsageError("--check goes with --dry-run", "dflashctl serve ... --dry-run --check")
    demo_here = any(t.engine == "local" and t.model is None and t.host is None for t in targets)
    if demo_here and (not dry_run or check):  # a plain dry run downloads nothing
        _ensure_demo_target(quiet=json_out)
    _serve_run(targets, ssh, detach=detach, dry_run=dry_run, check=check, json_out=json_out)


def _refuse_near_misses(engine_args: list[str]) -> None:
    """An engine argument one typo away from serve's own option is the typo, not the engine's."""
    import difflib

    from typer._click.globals import get_current_context  # Typer's own click

    ctx = get_current_context(silent=True)
    if ctx is None:
        return
    ours = [o for p in ctx.command.params for o in getattr(p, "opts", []) if o.startswith("--")]
    for arg in engine_args:
        flag = arg.split("=", 1)[0]
        if flag.startswith("--") and flag not in ours:
            close = difflib.get_close_matches(flag, ours, n=1, cutoff=0.85)
            if close:
                raise UsageError(
                    f"{flag} is neither serve's nor, likely, the engine's",
                    f"did you mean {close[0]}?",
                )


def _ensure_demo_target(quiet: bool = False) -> None:
    """Set the demo pair's target up here once (download, convert), saying so as it goes."""
    from dflashctl.commands.views import setup_line
    from dflashctl.demo_target import ensure

    ensure(progress=None if quiet else setup_line)


def _serve_run(
    targets: list[Any],
    ssh: Any,
    *,
    detach: bool,
    dry_run: bool,
    json_out: bool,
    check: bool = False,
) -> None:
    from dflashctl.commands.serve.render import Progress, render_plans, render_results
    from dflashctl.server.book import run_serve

    several = len(targets) > 1
    foreground = not detach and not dry_run and not several
    with Progress(stream_log=foreground, prefix=several or foreground or dry_run) as progress:
        outcome = run_serve(
            targets, ssh=ssh, detach=detach, dry_run=dry_run, check=check, on_event=progress
        )
    if json_out:
        emit_json(outcome.to_json())
    elif dry_run:
        render_plans(outcome.plans)
    else:
        render_results(outcome)
    if outcome.errors:
        raise typer.Exit(2)
    exit_for(outcome.ok)


def stop(
    names: Annotated[
        list[str] | None,
        typer.Argument(
            help="Deployment names (or a playbook); default: the only one running.",
            autocompletion=complete_deployment,
        ),
    ] = None,
    all_: Annotated[bool, typer.Option("--all", help="Stop every deployment.")] = False,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds between SIGTERM and SIGKILL.")
    ] = 10.0,
    json_out: JsonOpt = False,
) -> None:
    """Stop deployments dflashctl started, by their recorded pid.

    SIGTERM to the process group, SIGKILL after --timeout, then check the port is free. Never by
    process name; a recycled pid is left alone. Exit 0 stopped, 1 something is still running or
    a host could not be reached.
    """
    from dflashctl.commands.serve.render import render_stop
    from dflashctl.server.control import stop as stop_deployments

    results = stop_deployments(names or [], all_=all_, grace=timeout)
    if json_out:
        emit_json({"ok": all(r.ok for r in results), "stopped": [r.to_json() for r in results]})
    else:
        render_stop(results)
    exit_for(all(r.ok for r in results))


def status(
    names: Annotated[
        list[str] | None,
        typer.Argument(help="Deployment names (default: all).", autocompletion=complete_deployment),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """List deployments: host, engine, pid alive?, /health, url, uptime, log.

    Exit 0 all up, 1 any down or unhealthy.
    """
    from dflashctl.commands.serve.render import render_status
    from dflashctl.server.control import status as deployment_status

    rows = deployment_status(names or None)
    ok = all(r.state == "up" for r in rows)
    if json_out:
        emit_json({"ok": ok, "deployments": [r.to_json() for r in rows]})
    else:
        render_status(rows)
    exit_for(ok)
