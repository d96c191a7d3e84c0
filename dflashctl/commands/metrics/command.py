"""The `dflashctl metrics` command: the Typer signature, parse, one call, render."""

from pathlib import Path
from typing import Annotated

import typer

from dflashctl.commands.options import (
    AcceptNewHostKeyOpt,
    DrafterNameOpt,
    HostOpt,
    JsonOpt,
    SSHConfigOpt,
    complete_source,
    exit_for,
)


def metrics(
    source: Annotated[
        str,
        typer.Argument(
            help="Log file, '-' for stdin, http(s)://HOST:PORT (its /metrics is read), "
            "HOST:PORT, or a deployment name (its log).",
            autocompletion=complete_source,
        ),
    ],
    json_out: JsonOpt = False,
    interval: Annotated[
        float | None,
        typer.Option(
            "--interval",
            help="Seconds between the two /metrics scrapes (default 10); for logs, the "
            "expected seconds between metrics lines (default: estimated).",
        ),
    ] = None,
    drafter: DrafterNameOpt = None,
    min_acceptance_length: Annotated[
        float | None,
        typer.Option(
            "--min-acceptance-length", help="Alarm below this mean acceptance length (τ)."
        ),
    ] = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Watch live: survive rotation, truncation.")
    ] = False,
    exit_on_alarm: Annotated[
        bool, typer.Option("--exit-on-alarm", help="With --follow: exit 1 at the first alarm.")
    ] = False,
    serve_metrics: Annotated[
        str | None,
        typer.Option(
            "--serve-metrics",
            metavar="ADDR:PORT",
            help="Follow the source and expose what it reads on http://ADDR:PORT/metrics "
            "(dflashctl_spec_* counters, dflashctl_alarm) for Prometheus; implies --follow.",
        ),
    ] = None,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Write a PNG chart (needs matplotlib).")
    ] = None,
    engine: Annotated[
        str, typer.Option("--engine", help="Log format: auto, vllm or sglang.")
    ] = "auto",
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds to wait for a /metrics answer.")
    ] = 10.0,
    host: HostOpt = None,
    ssh_config: SSHConfigOpt = None,
    accept_new_host_key: AcceptNewHostKeyOpt = False,
) -> None:
    """Parse spec-decode metrics from a log, a remote log or a /metrics URL; alarm on collapse.

    Exit 0 healthy (warnings allowed), 1 an alarm (collapse, below_expected, decay, stale,
    no_speculation), 2 could not run.

    Examples:
      dflashctl metrics vllm.log
      dflashctl metrics http://127.0.0.1:8000 --interval 30 --json
      dflashctl metrics local-8000                  # a deployment: its log
      dflashctl metrics server.log --drafter qwen3-8b-dflash-b16 --min-acceptance-length 2.5
      dflashctl metrics server.log --follow --exit-on-alarm
      dflashctl metrics sglang.log --serve-metrics 127.0.0.1:9400   # for Prometheus
    """
    from dflashctl.hosts import set_command_ssh

    set_command_ssh(ssh_config, accept_new_host_key)
    from dflashctl.commands.metrics.source import resolve_source
    from dflashctl.metrics import MetricsOptions, analyze_source

    if exit_on_alarm and not (follow or serve_metrics):
        from dflashctl.errors import UsageError

        raise UsageError(
            "--exit-on-alarm goes with --follow",
            "a one-shot read already exits 1 when it raises an alarm",
        )
    src = resolve_source(source, host)
    source, host = src.source, src.host
    if plot is not None:
        from dflashctl.files import check_target

        check_target(plot)  # before reading anything: a device or directory is refused

    ssh = None
    if src.ssh_config:  # paramiko only for a remote source: a local log starts faster
        from dflashctl.hosts.ssh import SSHOptions

        ssh = SSHOptions(ssh_config=src.ssh_config)
    opts = MetricsOptions(
        engine=engine.lower(),
        interval=interval,
        timeout=timeout,
        drafter=drafter,
        min_acceptance_length=min_acceptance_length,
        host=host,
        ssh=ssh,
    )
    if follow or serve_metrics:
        from dflashctl.commands.metrics.render import run_follow
        from dflashctl.metrics.follow import follow_source

        events = follow_source(source, opts)
        if serve_metrics:
            from dflashctl.commands.metrics.render import say_serving
            from dflashctl.monitoring.exporter import SpecExporter, start

            exporter = SpecExporter(source)
            server = start(exporter, serve_metrics)
            say_serving(server.server_address, json_out=json_out)
            events = exporter.tap(events)
        raise typer.Exit(run_follow(events, json_out=json_out, exit_on_alarm=exit_on_alarm))
    report = analyze_source(source, opts)
    if plot is not None:
        from dflashctl.commands.metrics.plot import write_plot
        from dflashctl.metrics.analyze import thresholds_for

        write_plot(report, plot, thresholds_for(source, opts))
    from dflashctl.commands.metrics.render import emit_report_json, render_report

    if json_out:
        emit_report_json(report)
    else:
        render_report(report)
    exit_for(report.ok)
