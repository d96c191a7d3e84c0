"""`dflashctl tune`'s output: the table per K and prompt kind, the recommendation."""

from __future__ import annotations

import json
import shlex

from rich.markup import escape
from rich.table import Table

from dflashctl.commands.tune.run import TuneReport
from dflashctl.console import emit_json, err, out


def progress(msg: str) -> None:
    err.print(f"[dim]{escape(msg)}[/dim]")


def _f(x: float | None, fmt: str) -> str:
    return fmt.format(x) if x is not None else "—"


def tune_table(report: TuneReport) -> Table:
    title = "Decode tokens/s by K (median, min–max; τ; speed vs off"
    if report.options.rounds > 1:
        title += " with the interval a second run lands in (95 %)"
    t = Table(title=title + ")", title_justify="left")
    t.add_column("K")
    for f in report.fixtures():
        t.add_column(f, justify="right")
    for r in report.results:
        row = ["off" if r.k == 0 else str(r.k)]
        for f in report.fixtures():
            v, rng = r.decode.get(f), r.spread.get(f) or []
            cell = _f(v, "{:.1f}")
            if len(rng) == 2:
                cell += f" ({rng[0]:.1f}–{rng[1]:.1f})"
            tau, sp = r.tau.get(f), report.speedup(r, f)
            if r.k and tau is not None:
                cell += f"; τ {tau:.2f}"
            if r.k and sp is not None:
                cell += f"; {sp:.2f}×"
                rr = report.speedup_rerun(r, f)
                if rr is not None:
                    cell += f" ({rr[0]:.2f}–{rr[1]:.2f})"
            row.append(cell)
        t.add_row(*row)
    return t


def render_tune(report: TuneReport) -> None:
    out.print(tune_table(report))
    best = report.best()
    if best is None:
        out.print("no K was measured")
        return
    name = "off (plain decoding)" if best[0] == 0 else f"K = {best[0]}"
    out.print(f"best overall: {name} ({best[1]:.1f} tokens/s, geometric mean over the kinds)")
    for f in report.fixtures():
        b = report.best(f)
        if b:
            tied = ", ".join("off" if k == 0 else f"K = {k}" for k in report.ties(f))
            tie = f" (a tie with {tied}: within each other's spread)" if tied else ""
            out.print(f"  {escape(f)}: {'off' if b[0] == 0 else f'K = {b[0]}'}{tie}")
    table = report.batch_size_table()
    if table is not None:
        out.print(
            'vLLM: --speculative-config \'{"num_speculative_tokens_per_batch_size": '
            + escape(json.dumps(table))
            + "}' (0: no speculation at that batch size)",
            soft_wrap=True,
        )
    one_k = report.one_k_over_levels() if report.options.engine == "sglang" else None
    if one_k is not None:
        k, v = one_k
        flags = ("no --speculative-algorithm (plain decoding)" if k == 0
                 else f"--speculative-num-draft-tokens {k + 1}")  # fmt: skip
        out.print(f"SGLang (one K at every batch size): {'off' if k == 0 else f'K = {k}'}, "
                  f"{v:.1f} output tokens/s, geometric mean over the concurrency levels: "
                  + escape(flags), soft_wrap=True)  # fmt: skip
    if best[0]:
        o = report.options
        argv = ["dflashctl", "serve"]
        if o.engine != "local":
            argv += ["--engine", o.engine]
        for flag, value in (("--model", o.model), ("--drafter", o.drafter)):
            if value:
                argv += [flag, value]
        out.print("serve it: " + escape(shlex.join([*argv, "--num-speculative-tokens",
                                                     str(best[0])])), soft_wrap=True)  # fmt: skip
    for n in report.notes:
        out.print(f"note: {escape(n)}", soft_wrap=True)
    if report.plot is not None:
        out.print(escape(f"wrote {report.plot}: decode speed against K"), soft_wrap=True)
    if report.playbook is not None:
        out.print(
            escape(f"wrote {report.playbook}: serve it with dflashctl serve {report.playbook}"),
            soft_wrap=True,
        )


def emit_tune_json(report: TuneReport) -> None:
    emit_json(report.to_json())
