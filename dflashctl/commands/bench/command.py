"""The `dflashctl bench` command: the Typer signature, parse, one call, render."""

from pathlib import Path
from typing import Annotated

import typer

from dflashctl.commands.options import (
    FixturesOpt,
    JsonOpt,
    PromptsOpt,
    complete_server_or_playbook,
    exit_for,
)


def bench(
    targets: Annotated[
        list[str],
        typer.Argument(
            help="Servers to compare: URLs, deployment names or playbooks. The first is the "
            "baseline of the speedup.",
            show_default=False,
            autocompletion=complete_server_or_playbook,
        ),
    ],
    fixtures: FixturesOpt = None,
    prompts: PromptsOpt = None,
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
    allow_unmatched: Annotated[
        bool,
        typer.Option(
            "--allow-unmatched",
            help="Compare servers launched with different prefix caching, batched tokens, "
            "max-model-len, dtype, eager mode, all-reduce or TP (refused otherwise).",
        ),
    ] = False,
    log: Annotated[
        list[Path] | None,
        typer.Option(
            "--log",
            help="A URL target's start-up log (vLLM), once per URL target in order: the A/B "
            "settings its /v1/models and /metrics do not tell.",
        ),
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
      dflashctl bench http://gpu1:8001 http://gpu1:8000 --log plain.log --log dflash.log
    """
    from dflashctl.commands.bench.render import emit_bench_json, progress, render_bench
    from dflashctl.commands.bench.run import run_bench
    from dflashctl.commands.bench.session import BenchOptions

    if plot is not None:
        from dflashctl.commands.bench.plot import check_plot

        check_plot(plot)
    opts = BenchOptions(
        targets=list(targets),
        fixtures=fixtures,
        prompts_file=prompts,
        repetitions=repetitions,
        warmup_tokens=warmup_tokens,
        max_tokens=max_tokens,
        concurrency=concurrency,
        timeout=timeout,
        allow_unmatched=allow_unmatched,
        logs=list(log or []),
    )
    report = run_bench(opts, progress=progress)
    if plot is not None:
        from dflashctl.commands.bench.plot import write_plot

        write_plot(report, plot)
    if json_out:
        emit_bench_json(report)
    else:
        render_bench(report)
    exit_for(report.ok)
