"""`run_bench`: the matched benchmark over one or more running servers.

Order: validate → resolve every TARGET (exit 2 before any request) → per target the model
(`/v1/models`) and the engine (`/version`, `/metrics`) → warm-up, one request of
`warmup_tokens` per target (A B …) → `repetitions` rounds; in each round every fixture is sent to
every target in turn (A B A B …), so slow drift of the machine hits all targets alike → the
concurrency sweep, if asked for (`load.py`).

The state and the report live in `session.py`. Each request is one streamed chat completion at
temperature 0 through `dflashctl.server.client` (`stream_chat`): TTFT is the time to the first
text event; decode tokens/s counts the tokens after the first over the time from the first text
event to the last, so prefill and the first token are excluded; inter-token latency (ITL) is the
inverse, seconds per decoded token. Before and after each request the target's `/metrics`
counters are read (`metrics.spec_probe.PromProbe`, the window code of `dflashctl metrics`): one
spec-
decode window per request, pooled per target × fixture into the mean acceptance length. A cell's
figures are MEDIANS over its repetitions, with their spread (min–max decode tokens/s; TTFT and
ITL p90); speedup is a cell's median over the first target's for the same fixture, and its
spread the min–max of the per-round ratios (round r of a target over round r of the first).

A server that cannot be reached at the start is a `ServerError` (exit 2). Once measuring, a
request that fails (an HTTP error, a cut stream, a server gone) is recorded in its cell and the
run goes on; the report's `ok` is then False (exit 1). No printing: progress goes to a callback.
"""

from __future__ import annotations

import time

import httpx

from dflashctl.commands.bench.matched import check_matched
from dflashctl.commands.bench.session import (
    MEASURE,
    WARMUP,
    Bench,
    BenchOptions,
    BenchReport,
    Cell,
    Progress,
    Sample,
    Sleep,
    TargetResult,
)
from dflashctl.commands.bench.targets import BenchTarget, resolve_targets
from dflashctl.errors import ServerError
from dflashctl.fixtures import Prompt, load_prompts
from dflashctl.metrics.spec_probe import (
    NOT_CONFIGURED,
    UNREADABLE,
)
from dflashctl.server.client import get_version, list_models


def detect_engine(client: httpx.Client, target: BenchTarget) -> None:
    """The engine behind a URL when the deployment did not say: `/version` of the bundled
    engine is `dflashctl-…`; vLLM's is a bare version number."""
    if target.engine:
        return
    data = get_version(client, target.url, wait=5.0)
    version = str(data.get("version", "")) if data else ""
    if version.startswith("dflashctl"):
        target.engine = "local"
    elif version[:1].isdigit():
        target.engine = "vllm"


def prepare(b: Bench, targets: list[BenchTarget], fixtures: list[str]) -> list[TargetResult]:
    out = []
    for t in targets:
        ids, err, hint = list_models(b.client, t.url)  # unreachable: ServerError (exit 2)
        if err:
            raise ServerError(f"{t.label}: {err}", hint)
        if t.model is None or t.model not in ids:
            if t.model is not None:
                b.say(f"{t.label}: its model {t.model!r} is not listed; using {ids[0]}")
            t.model = ids[0]
        detect_engine(b.client, t)
        tr = TargetResult(t, {f: Cell(f) for f in fixtures})
        if len(ids) > 1:
            tr.notes.append(f"the server lists {len(ids)} models; measured {t.model}")
        out.append(tr)
    return out


def warm_up(b: Bench, results: list[TargetResult], prompt: Prompt) -> None:
    n = b.opts.warmup_tokens
    for tr in results:
        b.say(f"warm-up {tr.label}: {n} tokens")
        b.record(WARMUP, tr, prompt.id, None)
        p = b.probe(tr)
        tr.warmup = c = b.send(tr, prompt, n)
        if c.ok:
            b.finish(tr, p, c.completion_tokens)


def measure(b: Bench, results: list[TargetResult], prompts: list[Prompt]) -> None:
    reps = b.opts.repetitions
    for rep in range(1, reps + 1):
        for prompt in prompts:
            for tr in results:
                seq = b.record(MEASURE, tr, prompt.id, rep)
                p = b.probe(tr)
                c = b.send(tr, prompt, b.opts.max_tokens)
                spec = b.finish(tr, p, c.completion_tokens) if c.ok else None
                tr.cells[prompt.id].samples.append(Sample(seq, rep, c, spec))
                tps = c.decode_tokens_per_s
                b.say(
                    f"{rep}/{reps} {prompt.id} {tr.label}: "
                    + (
                        f"{c.completion_tokens if c.completion_tokens is not None else '?'} tokens"
                        + (f", {tps:.1f} tok/s" if tps else "")
                        + (f", τ {spec.window.mean_acceptance_length:.2f}"
                           if spec and spec.window and spec.window.mean_acceptance_length
                           else "")
                        if c.ok
                        else f"failed: {c.error}"
                    )
                )  # fmt: skip


MIN_DECODE_TOKENS = 32  # fewer decoded tokens than this: no speed worth comparing


def compare(results: list[TargetResult], max_tokens: int | None = None) -> None:
    """Speedup against the first target, and whether greedy output matches it. A fixture whose
    answers stop early (an end-of-sequence after a few tokens) on either side gets no speedup:
    a decode speed over a handful of tokens measures the request overhead, not decoding."""
    base = results[0]
    floor = min(MIN_DECODE_TOKENS, max(2, (max_tokens or MIN_DECODE_TOKENS) // 4))
    for tr in results:
        for fixture, cell in tr.cells.items():
            ref = base.cells[fixture]
            mine, theirs = cell.decode_tokens_per_s, ref.decode_tokens_per_s
            cell.speedup = mine / theirs if mine and theirs else None
            a, b = cell.by_repetition(), ref.by_repetition()
            paired = [a[r] / b[r] for r in a if r in b]  # the same round: drift hits both
            if paired:
                cell.speedup_min, cell.speedup_max = min(paired), max(paired)
            sides = {tr.label: cell, base.label: ref}  # one entry for the baseline itself
            short = {  # an unknown count (no usage in the stream) is not a short answer
                k: c
                for k, c in sides.items()
                if c.good and c.completion_tokens is not None and c.completion_tokens < floor
            }
            if short:
                cell.speedup = cell.speedup_min = cell.speedup_max = None
                who = ", ".join(f"{k}'s ({c.completion_tokens:.0f})" for k, c in short.items())
                cell.left_out = f"answers of {who} tokens: fewer than {floor}"
                tr.notes.append(
                    f"{fixture}: {who} answers ended before {floor} tokens: too few to compare "
                    "decode speeds; left out of the speedup"
                )
            uncounted = [c for c in cell.good if c.completion_tokens is None]
            if uncounted and not any("no token counts" in n for n in tr.notes):
                tr.notes.append(
                    "no token counts in the stream (no usage chunk): decode tokens/s cannot be "
                    "measured; servers send them when asked (stream_options.include_usage)"
                )
            if tr is not base and cell.good and ref.good:
                cell.matches_first_target = cell.good[0].text == ref.good[0].text


def run_bench(
    opts: BenchOptions,
    *,
    progress: Progress | None = None,
    sleep: Sleep = time.sleep,
) -> BenchReport:
    opts.validate()
    levels = opts.levels()
    prompts = opts.prompts()
    say = progress or (lambda _msg: None)
    targets = resolve_targets(opts.targets)
    matched_notes = check_matched(targets, opts.allow_unmatched, opts.logs, min(opts.timeout, 10.0))
    fixtures = [p.id for p in prompts]
    t0 = time.monotonic()
    b = Bench(opts, say, sleep)
    try:
        results = prepare(b, targets, fixtures)
        report = BenchReport(opts, fixtures, levels, results, b.order)
        report.notes += matched_notes
        if opts.warmup_tokens > 0:
            warm_up(b, results, load_prompts("smoke")[0])
        measure(b, results, prompts)
        compare(results, opts.max_tokens)
        for tr in results:
            if tr.metrics_state == UNREADABLE:
                tr.notes.append(f"acceptance unknown: {tr.metrics_message}")
            elif tr.metrics_state == NOT_CONFIGURED:
                tr.notes.append("no speculative decoding: the counters show none configured")
        if levels:
            from dflashctl.commands.bench.load import sweep

            report.sweep = sweep(b, results, prompts, levels)
    finally:
        b.close()
    report.wall_s = time.monotonic() - t0
    return report
