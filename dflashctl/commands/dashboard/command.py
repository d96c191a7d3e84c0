"""The `dflashctl dashboard` command: the Typer signature, parse, one call, render."""

from pathlib import Path
from typing import Annotated

import typer

from dflashctl.commands.options import JsonOpt
from dflashctl.console import emit_json


def dashboard(
    out_file: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Write the dashboard here (default: stdout)."),
    ] = None,
    drafter: Annotated[
        list[str] | None,
        typer.Option(
            "--drafter",
            help="NAME=MATCHER: draw this registry drafter's expected range on the τ panel, "
            "as for `alerts` (a label matcher: an example below; repeatable).",
        ),
    ] = None,
    prometheus: Annotated[
        str | None,
        typer.Option(
            "--prometheus",
            help="Run every panel's query against this Prometheus (e.g. http://127.0.0.1:9090) "
            "and say which have series.",
        ),
    ] = None,
    title: Annotated[str, typer.Option("--title", help="The dashboard's title.")] = (
        "DFlash speculative decoding"
    ),
    uid: Annotated[str, typer.Option("--uid", help="Its Grafana uid.")] = "dflashctl-spec-decode",
    json_out: JsonOpt = False,
) -> None:
    """Write a Grafana dashboard for speculative decoding: τ against the collapse line and each
    drafter's expected range, per-position acceptance, drafted and accepted throughput, the
    prefix-cache hit rate beside τ, and the DFlash alerts' states.

    It reads the recording rules `dflashctl alerts` writes (load those into Prometheus first),
    so vLLM, SGLang and the exporter's engines share one dashboard. Built with Grafana's own
    model (grafana-foundation-sdk) and read back through it before writing; import the file in
    Grafana (Dashboards → New → Import) and pick your Prometheus data source.

    Exit 0 written (and every query accepted by --prometheus), 1 a check failed, 2 could not
    run.

    Examples:
      dflashctl dashboard --out dflash-dashboard.json
      dflashctl dashboard --drafter 'qwen3-8b-dflash-b16=model_name="Qwen/Qwen3-8B"' -o d.json
      dflashctl dashboard -o d.json --prometheus http://127.0.0.1:9090
    """
    from dflashctl.commands.dashboard.render import render_dashboard
    from dflashctl.commands.dashboard.run import DashboardRequest, write_dashboard

    report = write_dashboard(
        DashboardRequest(
            out=out_file, drafters=list(drafter or []), title=title, uid=uid, prometheus=prometheus
        )
    )
    if json_out:
        emit_json(report.to_json())
    else:
        render_dashboard(report)
    if not report.ok:
        raise typer.Exit(1)
