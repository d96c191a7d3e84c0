"""The `dflashctl demo` command: the Typer signature, parse, one call, render."""

from typing import Annotated

import typer

from dflashctl.commands.options import (
    JsonOpt,
    exit_for,
)
from dflashctl.console import emit_json


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
    from dflashctl.commands.demo.render import render_demo, story_line
    from dflashctl.commands.demo.run import run_demo
    from dflashctl.commands.run.render import step_line
    from dflashctl.commands.views import setup_line

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
    exit_for(report.ok)
