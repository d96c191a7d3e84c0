"""The `dflashctl smoke` command: the Typer signature, parse, one call, render."""

from pathlib import Path
from typing import Annotated

import typer

from dflashctl.commands.options import (
    AcceptNewHostKeyOpt,
    DrafterNameOpt,
    HostOpt,
    JsonOpt,
    SSHConfigOpt,
    complete_server,
    exit_for,
)


def smoke(
    target: Annotated[
        str | None,
        typer.Argument(
            help="Server URL (or HOST:PORT) of an OpenAI-compatible engine, or a deployment "
            "name (default: the only deployment running, else http://127.0.0.1:8000).",
            autocompletion=complete_server,
        ),
    ] = None,
    log: Annotated[
        Path | None,
        typer.Option("--log", help="Read spec metrics from the lines this log gains instead."),
    ] = None,
    metrics_url: Annotated[
        str | None, typer.Option("--metrics-url", help="Prometheus URL (default: URL/metrics).")
    ] = None,
    host: HostOpt = None,
    ssh_config: SSHConfigOpt = None,
    accept_new_host_key: AcceptNewHostKeyOpt = False,
    model: Annotated[
        str | None, typer.Option("--model", help="Model name (default: from /v1/models).")
    ] = None,
    prompt: Annotated[
        list[str] | None,
        typer.Option("--prompt", help="A prompt to send (repeatable); replaces the defaults."),
    ] = None,
    fixtures: Annotated[
        bool, typer.Option("--fixtures", help="Send the code / prose / translation fixtures.")
    ] = False,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Tokens per answer.")] = 256,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds one answer may take.")
    ] = 60.0,
    min_tokens_per_s: Annotated[
        float | None,
        typer.Option("--min-tokens-per-s", help="Fail below this decode speed (tokens/s)."),
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option(
            "--baseline",
            help="A server without speculation (URL, HOST:PORT or deployment name): speedup "
            "and lossless.",
            autocompletion=complete_server,
        ),
    ] = None,
    expect_no_spec: Annotated[
        bool,
        typer.Option("--expect-no-spec", help="The server is meant to run without speculation."),
    ] = False,
    allow_repetition: Annotated[
        bool,
        typer.Option(
            "--allow-repetition",
            help="A repetition loop is a warning, not a failure (tiny test models loop).",
        ),
    ] = False,
    min_acceptance_length: Annotated[
        float | None,
        typer.Option("--min-acceptance-length", help="Fail below this mean acceptance length."),
    ] = None,
    drafter: DrafterNameOpt = None,
    prefix_cache_probe: Annotated[
        bool,
        typer.Option(
            "--prefix-cache-probe",
            help="Also send one long prompt twice: fail if acceptance falls when its prefix "
            "comes from the prefix cache (vllm#47930).",
        ),
    ] = False,
    log_interval: Annotated[
        float,
        typer.Option("--log-interval", help="The engine's stats interval, for --log (s)."),
    ] = 10.0,
    json_out: JsonOpt = False,
) -> None:
    """Send real chat requests at temperature 0; check the answers, the decode speed and the
    speculative acceptance of exactly that window.

    Exit 0 pass, 1 a check failed (bad answer, a misbehaving server, collapsed or absent
    speculation, too slow), 2 could not run.

    Examples:
      dflashctl smoke http://127.0.0.1:8000
      dflashctl smoke http://gpu1:8000 --fixtures --max-tokens 512 --json
      dflashctl smoke http://gpu1:8000 --log vllm.log --min-tokens-per-s 30
      dflashctl smoke http://gpu1:8000 --baseline http://gpu1:8001
      dflashctl smoke http://gpu1:8000 --prefix-cache-probe
    """
    from dflashctl.hosts import set_command_ssh

    set_command_ssh(ssh_config, accept_new_host_key)
    from dflashctl.commands.smoke.render import emit_smoke_json, progress, render_smoke
    from dflashctl.commands.smoke.run import SmokeOptions, run_smoke

    opts = SmokeOptions(
        target=target,
        model=model,
        prompts=list(prompt or []),
        fixtures=fixtures,
        max_tokens=max_tokens,
        timeout=timeout,
        min_tokens_per_s=min_tokens_per_s,
        baseline=baseline,
        log=log,
        metrics_url=metrics_url,
        host=host,
        log_interval=log_interval,
        expect_no_spec=expect_no_spec,
        allow_repetition=allow_repetition,
        min_acceptance_length=min_acceptance_length,
        drafter=drafter,
        prefix_probe=prefix_cache_probe,
    )
    report = run_smoke(opts, progress=progress)
    if json_out:
        emit_smoke_json(report)
    else:
        render_smoke(report)
    exit_for(report.ok)
