"""The `dflashctl alerts` command: the Typer signature, parse, one call, render."""

from pathlib import Path
from typing import Annotated

import typer

from dflashctl.commands.options import JsonOpt
from dflashctl.console import emit_json


def alerts(
    out_file: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Write the rules here (default: stdout)."),
    ] = None,
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            help="rules (a Prometheus rule file) or prometheusrule (the Prometheus Operator's "
            "Kubernetes object).",
        ),
    ] = "rules",
    drafter: Annotated[
        list[str] | None,
        typer.Option(
            "--drafter",
            help="NAME=MATCHER: alert below this registry drafter's expected range on the "
            "series MATCHER selects (a label matcher: an example below; repeatable).",
        ),
    ] = None,
    for_: Annotated[
        str, typer.Option("--for", help="How long a condition holds before an alert fires.")
    ] = "5m",
    min_drafts_per_s: Annotated[
        float,
        typer.Option("--min-drafts-per-s", help="Traffic below which nothing is judged."),
    ] = 0.1,
    decay_offset: Annotated[
        str, typer.Option("--decay-offset", help="The decay alert compares with this long ago.")
    ] = "6h",
    tests: Annotated[
        Path | None,
        typer.Option("--tests", help="Also write the promtool unit tests for the rules here."),
    ] = None,
    check: Annotated[
        bool,
        typer.Option(
            "--check", help="Run promtool check rules (and test rules with --tests) on them."
        ),
    ] = False,
    name: Annotated[
        str, typer.Option("--name", help="With --format prometheusrule: its metadata.name.")
    ] = "dflashctl-spec-decode",
    namespace: Annotated[
        str | None,
        typer.Option("--namespace", help="With --format prometheusrule: its namespace."),
    ] = None,
    runbook_base: Annotated[
        str,
        typer.Option("--runbook-base", help="Where docs/monitoring.md is served (runbook_url)."),
    ] = "docs/monitoring.md",
    playbook: Annotated[
        str | None,
        typer.Option(
            "--playbook",
            help="A fleet: every host of this playbook gets a below-expected alert for its "
            "verify.registry drafter (its series by instance); no host is contacted.",
        ),
    ] = None,
    scrape_config: Annotated[
        Path | None,
        typer.Option(
            "--scrape-config", help="With --playbook: write the fleet's scrape_configs here."
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Write Prometheus alert rules for speculative-decoding acceptance, from the thresholds
    `metrics` judges with: collapse, every draft rejected, decay, prefix caching, speculation
    off, and below a drafter's expected range.

    Recording rules bring vLLM's counters, SGLang's gauges and the exporter's series
    (`metrics --serve-metrics`) into one shape per job, instance and model_name; each alert has
    a `for:`, a traffic guard, a severity, the likely causes with the command that checks each,
    and a runbook_url.

    Exit 0 written (and, with --check, passed promtool), 1 promtool found a problem, 2 could
    not run.

    Examples:
      dflashctl alerts --out dflashctl-rules.yml --tests dflashctl-rules-test.yml --check
      dflashctl alerts --format prometheusrule --namespace monitoring > rule.yaml
      dflashctl alerts --drafter 'qwen3-8b-dflash-b16=model_name="Qwen/Qwen3-8B"'
      dflashctl alerts --playbook vllm-fleet -o rules.yml --scrape-config scrape.yml --check
    """
    from dflashctl.commands.alerts.render import render_alerts
    from dflashctl.commands.alerts.run import AlertOptions, write_alerts

    report = write_alerts(
        AlertOptions(
            out=out_file,
            fmt=fmt,
            drafters=list(drafter or []),
            interval=for_,
            min_drafts_per_s=min_drafts_per_s,
            decay_offset=decay_offset,
            tests=tests,
            check=check,
            name=name,
            namespace=namespace,
            runbook_base=runbook_base,
            playbook=playbook,
            scrape_config=scrape_config,
        )
    )
    if json_out:
        emit_json(report.to_json())
    else:
        render_alerts(report)
    if not report.ok:
        raise typer.Exit(1)
