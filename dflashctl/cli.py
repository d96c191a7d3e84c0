"""The dflashctl command line: each command parses arguments, calls one domain function, renders.

Wiring only. Domain modules return data and raise `DflashError`s; `main()` turns those into a
one-line error, a hint and exit code 2 (`DFLASHCTL_DEBUG=1` shows the traceback). Heavy imports
(torch, huggingface_hub, paramiko, fastapi) happen inside the commands that need them, so
`dflashctl --help` stays fast.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from dflashctl import __version__
from dflashctl.console import emit_json, error
from dflashctl.errors import DflashError, UsageError

app = typer.Typer(
    name="dflashctl",
    help="Deploy and diagnose DFlash speculative decoding.",
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    add_completion=True,
)

# Shared option aliases.
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output on stdout.")]
HostOpt = Annotated[
    str | None,
    typer.Option("--host", help="Remote host: \\[user@]host[:port] or an ~/.ssh/config alias."),
]
DrafterNameOpt = Annotated[
    str | None,
    typer.Option("--drafter", help="Registry name of the drafter (see playbooks/drafters/)."),
]
EngineOpt = Annotated[
    str,
    typer.Option("--engine", help="Engine whose reading to check: vllm, sglang or local."),
]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"dflashctl {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
) -> None:
    """Deploy and diagnose DFlash speculative decoding: pinned drafters, config checks, a bundled
    engine, smoke tests and acceptance alarms.

    Exit codes: 0 healthy, 1 a problem was found, 2 could not run.
    """


def _exit_for(ok: bool) -> None:
    if not ok:
        raise typer.Exit(1)


@app.command("verify-config")
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
    host: HostOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Check a drafter's config.json (and safetensors header) against canonical values and rules.

    Examples:
      dflashctl verify-config ./Qwen3.6-27B-DFlash --drafter qwen3.6-27b-dflash
      dflashctl verify-config ./drafter --target ./target --json
      dflashctl verify-config ./drafter --drafter demo --fix
    """
    from dflashctl.config_check import run_verify
    from dflashctl.render import render_verify

    report = run_verify(path, drafter=drafter, target=target, engine=engine, fix=fix, host=host)
    if json_out:
        emit_json(report.to_json())
    else:
        render_verify(report)
    _exit_for(report.ok)


@app.command()
def fetch(
    drafter: Annotated[
        str, typer.Argument(help="Registry name (see playbooks/drafters/) or org/repo.")
    ],
    revision: Annotated[
        str | None,
        typer.Option(
            "--revision",
            help="40-hex commit; a tag or branch is resolved and recorded. "
            "Default: the registry's pin.",
        ),
    ] = None,
    directory: Annotated[
        Path | None, typer.Option("--dir", help="Where the files go (default: ./<repo name>).")
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
    from dflashctl.fetch import fetch as run_fetch
    from dflashctl.fetch_render import RichFetchProgress, render_fetch

    if check_upstream:
        from dflashctl.fetch_render import render_upstream
        from dflashctl.fetch_upstream import check_upstream as run_check

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
        _exit_for(upstream.ok)
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
    _exit_for(report.ok)


@app.command(
    epilog="Examples:\n\n"
    "  dflashctl serve                                   # bundled engine, demo pair, :8000\n\n"
    "  dflashctl serve --detach --json\n\n"
    "  dflashctl serve --model ./target --drafter ./drafter --spec none --port 8001\n\n"
    "  dflashctl serve --engine vllm --model Qwen/Qwen3-8B --drafter /models/d --host gpu1 "
    "--dry-run\n\n"
    "  dflashctl serve playbooks/vllm-2xa100-tp2.yaml -- --max-model-len 8192"
)
def serve(
    args: Annotated[
        list[str] | None,
        typer.Argument(
            help="Optional PLAYBOOK (.yaml), then `--` and extra engine arguments.",
            show_default=False,
        ),
    ] = None,
    engine: Annotated[
        str | None, typer.Option("--engine", help="local (the bundled engine), vllm or sglang.")
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
        int | None, typer.Option("--port", help="Port (default 8000; SGLang 30000).")
    ] = None,
    bind: Annotated[
        str | None,
        typer.Option("--bind", help="Listen address (default 127.0.0.1 here, 0.0.0.0 remote)."),
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
    ssh_config: Annotated[
        str | None, typer.Option("--ssh-config", help="ssh_config file (default ~/.ssh/config).")
    ] = None,
    accept_new_host_key: Annotated[
        bool,
        typer.Option(
            "--accept-new-host-key", help="Add an unknown host key (never a changed one)."
        ),
    ] = False,
    python: Annotated[
        str | None,
        typer.Option(
            "--python", "--remote-python", help="Interpreter for the engine on the serving host."
        ),
    ] = None,
    detach: Annotated[
        bool, typer.Option("--detach", "-d", help="Return once ready; the server keeps running.")
    ] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the command only.")] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Launch even if verify-config finds a problem.")
    ] = False,
    ready_timeout: Annotated[
        float | None, typer.Option("--ready-timeout", help="Seconds to wait for ready (600).")
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Launch the bundled engine (default: the demo pair), vLLM or SGLang, locally or over SSH.

    Waits until the server is really up: process alive, /health 200, /v1/models lists the
    model, and the log shows the engine's ready line.

    Exit 0 ready (or stopped with Ctrl-C in the foreground), 1 the launch failed (the log's
    root-cause lines are shown), 2 could not run (bad arguments, port in use, unreachable host).
    """
    from dflashctl.playbook import find_playbook
    from dflashctl.remote import SSHOptions
    from dflashctl.serve.book import options_from_playbook
    from dflashctl.serve.launch import ServeOptions

    items = list(args or [])
    book = find_playbook(items[0]) if items and not items[0].startswith("-") else None
    if book is not None:
        items = items[1:]
    elif items and not items[0].startswith("-"):
        raise UsageError(
            f"{items[0]!r} is not a playbook (.yaml)", "extra engine arguments go after `--`"
        )
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
    if any(t.engine == "local" and t.model is None and t.host is None for t in targets):
        _ensure_demo_target(quiet=json_out)
    _serve_run(targets, ssh, detach=detach, dry_run=dry_run, json_out=json_out)


def _ensure_demo_target(quiet: bool = False) -> None:
    """Set the demo pair's target up here once (download, convert), saying so as it goes."""
    from dflashctl.demo_target import ensure
    from dflashctl.pipeline_render import setup_line

    ensure(progress=None if quiet else setup_line)


def _serve_run(
    targets: list[Any], ssh: Any, *, detach: bool, dry_run: bool, json_out: bool
) -> None:
    from dflashctl.serve.book import run_serve
    from dflashctl.serve.render import Progress, render_plans, render_results

    several = len(targets) > 1
    foreground = not detach and not dry_run and not several
    with Progress(stream_log=foreground, prefix=several or foreground or dry_run) as progress:
        outcome = run_serve(targets, ssh=ssh, detach=detach, dry_run=dry_run, on_event=progress)
    if json_out:
        emit_json(outcome.to_json())
    elif dry_run:
        render_plans(outcome.plans)
    else:
        render_results(outcome)
    if outcome.errors:
        raise typer.Exit(2)
    _exit_for(outcome.ok)


@app.command()
def stop(
    names: Annotated[
        list[str] | None,
        typer.Argument(help="Deployment names (or a playbook); default: the only one running."),
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
    from dflashctl.serve.control import stop as stop_deployments
    from dflashctl.serve.render import render_stop

    results = stop_deployments(names or [], all_=all_, grace=timeout)
    if json_out:
        emit_json({"ok": all(r.ok for r in results), "stopped": [r.to_json() for r in results]})
    else:
        render_stop(results)
    _exit_for(all(r.ok for r in results))


@app.command()
def status(
    names: Annotated[
        list[str] | None, typer.Argument(help="Deployment names (default: all).")
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """List deployments: host, engine, pid alive?, /health, url, uptime, log.

    Exit 0 all up, 1 any down or unhealthy.
    """
    from dflashctl.serve.control import status as deployment_status
    from dflashctl.serve.render import render_status

    rows = deployment_status(names or None)
    ok = all(r.state == "up" for r in rows)
    if json_out:
        emit_json({"ok": ok, "deployments": [r.to_json() for r in rows]})
    else:
        render_status(rows)
    _exit_for(ok)


@app.command()
def smoke(
    target: Annotated[
        str, typer.Argument(help="Server URL (or HOST:PORT) of an OpenAI-compatible engine.")
    ] = "http://127.0.0.1:8000",
    log: Annotated[
        Path | None,
        typer.Option("--log", help="Read spec metrics from the lines this log gains instead."),
    ] = None,
    metrics_url: Annotated[
        str | None, typer.Option("--metrics-url", help="Prometheus URL (default: URL/metrics).")
    ] = None,
    host: HostOpt = None,
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
        typer.Option("--baseline", help="A server without speculation: speedup and lossless."),
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
    """
    from dflashctl.smoke import SmokeOptions, run_smoke
    from dflashctl.smoke.render import emit_smoke_json, progress, render_smoke

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
    )
    report = run_smoke(opts, progress=progress)
    if json_out:
        emit_smoke_json(report)
    else:
        render_smoke(report)
    _exit_for(report.ok)


@app.command()
def metrics(
    source: Annotated[
        str, typer.Argument(help="Log file, '-' for stdin, or http(s)://HOST:PORT/metrics.")
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
) -> None:
    """Parse spec-decode metrics from a log, a remote log or a /metrics URL; alarm on collapse.

    Exit 0 healthy (warnings allowed), 1 an alarm (collapse, below_expected, decay, stale,
    no_speculation), 2 could not run.

    Examples:
      dflashctl metrics vllm.log
      dflashctl metrics http://127.0.0.1:8000/metrics --interval 30 --json
      dflashctl metrics server.log --drafter qwen3-8b-dflash-b16 --min-acceptance-length 2.5
      dflashctl metrics server.log --follow --exit-on-alarm
    """
    from dflashctl.metrics import MetricsOptions, analyze_source

    opts = MetricsOptions(
        engine=engine.lower(),
        interval=interval,
        timeout=timeout,
        drafter=drafter,
        min_acceptance_length=min_acceptance_length,
        host=host,
    )
    if follow:
        from dflashctl.metrics.follow import follow_source
        from dflashctl.metrics.render import run_follow

        events = follow_source(source, opts)
        raise typer.Exit(run_follow(events, json_out=json_out, exit_on_alarm=exit_on_alarm))
    report = analyze_source(source, opts)
    if plot is not None:
        from dflashctl.metrics.plot import write_plot

        write_plot(report, plot)
    from dflashctl.metrics.render import emit_report_json, render_report

    if json_out:
        emit_report_json(report)
    else:
        render_report(report)
    _exit_for(report.ok)


@app.command()
def bench(
    targets: Annotated[
        list[str],
        typer.Argument(
            help="Servers to compare: URLs, deployment names or playbooks. The first is the "
            "baseline of the speedup.",
            show_default=False,
        ),
    ],
    fixtures: Annotated[
        str | None,
        typer.Option("--fixtures", help="Comma-separated: code, prose, translation (default all)."),
    ] = None,
    repetitions: Annotated[
        int, typer.Option("--repetitions", help="Measured runs per fixture and target.")
    ] = 3,
    warmup_tokens: Annotated[
        int, typer.Option("--warmup-tokens", help="Warm-up request per target (0: none).")
    ] = 128,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Tokens per answer.")] = 256,
    concurrency: Annotated[
        str | None,
        typer.Option("--concurrency", help="Load sweep levels, e.g. 1,2,4,8 (engines that batch)."),
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds one answer may take.")
    ] = 120.0,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Write a PNG chart (needs matplotlib).")
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """The matched benchmark: same fixtures, batch one, greedy, a warm-up, repetitions
    interleaved across targets; median decode tokens/s (first token, prefill and warm-up
    excluded), acceptance from each request's /metrics window, speedup vs the first target.

    Exit 0 measured, 1 some request failed, 2 could not run.

    Examples:
      dflashctl bench http://127.0.0.1:8001 http://127.0.0.1:8000
      dflashctl bench plain dflash --repetitions 5 --json
      dflashctl bench http://gpu1:8000 --concurrency 1,2,4,8 --plot bench.png
    """
    from dflashctl.bench import BenchOptions, run_bench
    from dflashctl.bench.render import emit_bench_json, progress, render_bench

    if plot is not None:
        from dflashctl.bench.plot import check_plot

        check_plot(plot)
    opts = BenchOptions(
        targets=list(targets),
        fixtures=fixtures,
        repetitions=repetitions,
        warmup_tokens=warmup_tokens,
        max_tokens=max_tokens,
        concurrency=concurrency,
        timeout=timeout,
    )
    report = run_bench(opts, progress=progress)
    if plot is not None:
        from dflashctl.bench.plot import write_plot

        write_plot(report, plot)
    if json_out:
        emit_bench_json(report)
    else:
        render_bench(report)
    _exit_for(report.ok)


@app.command()
def run(
    playbook: Annotated[str, typer.Argument(help="Playbook file, or a bundled playbook's name.")],
    teardown: Annotated[
        bool, typer.Option("--teardown", help="Stop the servers this run started at the end.")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print every command on every host; run nothing.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Run a playbook end to end: fetch, verify-config, serve, smoke, metrics, per host.

    A host stops at its first failing step. Servers stay up unless --teardown.

    Examples:
      dflashctl run playbooks/demo.yaml --teardown
      dflashctl run playbooks/vllm-2xa100-tp2.yaml --dry-run
    """
    from dflashctl.errors import UsageError
    from dflashctl.pipeline import run_playbook
    from dflashctl.pipeline_render import render_run, step_line
    from dflashctl.playbook import find_playbook

    path = find_playbook(playbook)
    if path is None:
        raise UsageError(f"{playbook!r} is not a playbook file or a bundled playbook name")
    report = run_playbook(
        path, teardown=teardown, dry_run=dry_run, on_step=None if json_out else step_line
    )
    if json_out:
        emit_json(report.to_json())
    else:
        render_run(report)
    if report.could_not_run:
        raise typer.Exit(2)
    _exit_for(report.ok)


@app.command()
def demo(
    quick: Annotated[
        bool, typer.Option("--quick", help="Only the pipeline, without the field story.")
    ] = False,
    keep: Annotated[
        bool, typer.Option("--keep", help="Leave the healthy demo server running.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Run the whole pipeline on the embedded demo pair, then replay the field story.

    The field story: a stale drafter config (shifted target_layer_ids, a mask id off by six,
    changed layer_types) is served and collapses; verify-config names the fields; --fix
    repairs them; served again, acceptance is healthy. Every figure is measured.
    """
    from dflashctl.demo import run_demo
    from dflashctl.pipeline_render import render_demo, setup_line, step_line, story_line

    report = run_demo(
        quick=quick,
        keep=keep,
        on_step=None if json_out else step_line,
        on_story=None if json_out else story_line,
        on_setup=None if json_out else setup_line,
    )
    if json_out:
        emit_json(report.to_json())
    else:
        render_demo(report)
    if report.run.could_not_run:
        raise typer.Exit(2)
    _exit_for(report.ok)


@app.command()
def doctor(
    host: HostOpt = None,
    engine: Annotated[
        str | None,
        typer.Option("--engine", help="vllm, sglang or local (default: what is installed)."),
    ] = None,
    port: Annotated[
        int | None, typer.Option("--port", help="Port to check (default 8000; SGLang 30000).")
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
    version and known engine defects, GPU memory, leftover engines, port, disk, Hub and token.

    Exit 0 all ok, 1 a warning or an error was found, 2 could not run.

    Examples:
      dflashctl doctor
      dflashctl doctor --engine vllm --python .venv-vllm/bin/python --drafter ./drafter --json
      dflashctl doctor --engine sglang --model /models/target --drafter /models/drafter -k 15
    """
    from dflashctl.doctor import DoctorOptions, run_doctor

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
        )
    )
    if json_out:
        emit_json(report.to_json())
    else:
        from dflashctl.doctor_render import render_doctor

        render_doctor(report)
    _exit_for(report.ok)


@app.command()
def diagnose(
    url: Annotated[str, typer.Argument(help="The production server's URL (or HOST:PORT).")],
    model: Annotated[
        str, typer.Option("--model", help="Target model directory (on --host: its path there).")
    ],
    drafter: Annotated[
        str, typer.Option("--drafter", help="Drafter directory (on --host: its path there).")
    ],
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
      dflashctl diagnose URL --model T --drafter D --prompts prompts.json --max-tokens 64 --json
    """
    from dflashctl.diagnose import DiagnoseOptions, run_diagnose
    from dflashctl.diagnose_render import progress, render_diagnose

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
    _exit_for(report.ok)


def main() -> None:
    """Console-script entry point: one-line errors with a hint, exit 2 on DflashError."""
    try:
        app()
    except DflashError as e:
        if os.environ.get("DFLASHCTL_DEBUG"):
            raise
        error(e.message, e.hint)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        error("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
