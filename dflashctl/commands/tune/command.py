"""The `dflashctl tune` command: the Typer signature, parse, one call, render."""

from pathlib import Path
from typing import Annotated

import typer

from dflashctl.commands.options import FixturesOpt, JsonOpt, PromptsOpt


def tune(
    model: Annotated[
        str | None, typer.Option("--model", help="Target (default: the embedded demo pair).")
    ] = None,
    drafter: Annotated[str | None, typer.Option("--drafter", help="Drafter directory.")] = None,
    engine: Annotated[str, typer.Option("--engine", help="local, vllm or sglang.")] = "local",
    k: Annotated[
        str | None,
        typer.Option(
            "--k",
            help="K values to measure, e.g. 0,3,7,15 (0 = speculation off; default: off, 1, 3, "
            "7 and block size - 1).",
        ),
    ] = None,
    fixtures: FixturesOpt = None,
    prompts: PromptsOpt = None,
    repetitions: Annotated[
        int, typer.Option("--repetitions", help="Measured runs per prompt and K.")
    ] = 2,
    rounds: Annotated[
        int,
        typer.Option(
            "--rounds",
            help="Relaunch and measure every K this many times, the rounds interleaved: the "
            "spread then holds what a relaunch or the machine's drift moves.",
        ),
    ] = 1,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Tokens per answer.")] = 96,
    concurrency: Annotated[
        str | None,
        typer.Option("--concurrency", help="Load levels, e.g. 1,4,16: a K per batch-size range."),
    ] = None,
    state: Annotated[
        Path | None,
        typer.Option("--state", help="Keep results here after each K; a rerun resumes from it."),
    ] = None,
    early_stop: Annotated[
        bool,
        typer.Option(
            "--early-stop/--no-early-stop",
            help="Stop the ladder at a K clearly slower than a smaller K on every kind.",
        ),
    ] = True,
    plot: Annotated[
        Path | None,
        typer.Option("--plot", help="Draw decode speed against K per kind (.png, .svg, .pdf)."),
    ] = None,
    write_playbook: Annotated[
        Path | None,
        typer.Option(
            "--write-playbook",
            help="Write the recommendation as a playbook that serve and run launch (.yaml).",
        ),
    ] = None,
    port: Annotated[int | None, typer.Option("--port", help="Port of the servers.")] = None,
    python: Annotated[
        str | None, typer.Option("--python", help="The engine's Python interpreter.")
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Choose K by measured decode speed: serve the pair at each K in turn (and with
    speculation off), run the matched benchmark, recommend the fastest K per prompt kind.

    Exit 0 measured, 1 a measurement failed, 2 could not run.

    Examples:
      dflashctl tune                                   # the demo pair, K = off, 1, 3, 7, 15
      dflashctl tune --k 0,3,7 --fixtures code,prose --state tune.json
      dflashctl tune --plot tune.png --write-playbook tuned.yaml
      dflashctl serve tuned.yaml                       # what tune recommended
      dflashctl tune --engine vllm --model Qwen/Qwen3-8B --drafter DIR --concurrency 1,4,16
    """
    from dflashctl.commands.tune.render import emit_tune_json, progress, render_tune
    from dflashctl.commands.tune.run import TuneOptions, run_tune

    opts = TuneOptions(
        engine=engine, model=model, drafter=drafter, python=python, port=port, ladder=k,
        fixtures=fixtures, prompts_file=prompts, repetitions=repetitions, rounds=rounds,
        max_tokens=max_tokens,
        concurrency=concurrency, state_file=state, early_stop=early_stop, plot=plot,
        write_playbook=write_playbook,
    )  # fmt: skip
    report = run_tune(opts, say=progress)
    if json_out:
        emit_tune_json(report)
    else:
        render_tune(report)
    failed = any(r.errors for r in report.results)
    raise typer.Exit(1 if failed else 0)
