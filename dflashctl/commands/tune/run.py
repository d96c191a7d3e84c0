"""`dflashctl tune`: choose K — and whether to speculate at all — by measured decode speed.

For each K of a ladder (0 = speculation off, the plain control), one server is launched the way
`serve` launches it (detached, its own deployment name), measured with `bench`'s matched method
(the same fixtures or prompts, batch one, greedy, a warm-up, repetitions; concurrency levels if
asked) and stopped before the next K starts, so servers never share the machine. With
`rounds` > 1 the ladder is walked that many times, each K relaunched per round and its answers
pooled; its speed over speculation off is taken round by round. A K clearly slower than a
smaller one on every kind ends the ladder in the first round (`early_stop`). Every K's
figures are written to a state file as soon as they exist: a run that stops (a lost connection
to a remote host, Ctrl-C) resumes from it with the same command. The recommendation is the
fastest K per prompt kind and overall (the geometric mean over kinds), "off" where plain
decoding wins, and — with concurrency levels — the fastest K per level as vLLM's
`num_speculative_tokens_per_batch_size` table. No printing.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dflashctl.commands.tune.rerun import rerun_interval, round_mean
from dflashctl.errors import DflashError, UsageError

Say = Callable[[str], None]
MAX_LADDER = 12
CLEARLY_WORSE = 0.85  # a K whose best repetition is under this × the best K's worst, every kind


@dataclass
class TuneOptions:
    engine: str = "local"
    model: str | None = None
    drafter: str | None = None
    host: str | None = None
    python: str | None = None
    port: int | None = None
    ladder: str | None = None  # "0,3,7,15"; None: off, 1, 3, 7 and block_size - 1
    fixtures: str | None = None
    prompts_file: Path | None = None
    repetitions: int = 2
    rounds: int = 1  # each K relaunched and measured once per round, the rounds interleaved
    warmup_tokens: int = 32
    max_tokens: int = 96
    concurrency: str | None = None
    timeout: float = 120.0
    state_file: Path | None = None  # results so far, for a resumed run
    extra_args: list[str] = field(default_factory=list)
    early_stop: bool = True  # stop the ladder at a K clearly worse than a smaller one
    plot: Path | None = None  # goodput against K, per prompt kind (and per load)
    write_playbook: Path | None = None  # the recommendation as a playbook

    def key(self) -> dict[str, Any]:
        """What a state file must match to be resumed."""
        return {
            "engine": self.engine, "model": self.model, "drafter": self.drafter,
            "host": self.host, "fixtures": self.fixtures,
            "prompts": str(self.prompts_file) if self.prompts_file else None,
            "repetitions": self.repetitions, "rounds": self.rounds,
            "max_tokens": self.max_tokens,
            "concurrency": self.concurrency,
        }  # fmt: skip


@dataclass
class KResult:
    k: int  # 0: speculation off
    decode: dict[str, float | None]  # fixture -> median decode tokens/s
    spread: dict[str, list[float]]  # fixture -> [min, max] over repetitions
    tau: dict[str, float | None]  # fixture -> mean acceptance length
    by_level: dict[int, float | None] = field(default_factory=dict)  # concurrency -> tokens/s
    errors: list[str] = field(default_factory=list)
    samples: dict[str, list[float]] = field(default_factory=dict)  # fixture -> every answer's
    rounds: int = 1  # launches measured (interleaved rounds)
    by_round: dict[str, list[float]] = field(default_factory=dict)  # fixture -> each launch's

    def to_json(self) -> dict[str, Any]:
        return {"k": self.k, "decode_tokens_per_s": self.decode, "spread": self.spread,
                "mean_acceptance_length": self.tau,
                "output_tokens_per_s_by_concurrency": {str(c): v for c, v in self.by_level.items()},
                "errors": self.errors, "decode_samples": self.samples,
                "rounds": self.rounds, "decode_by_round": self.by_round}  # fmt: skip

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> KResult:
        return cls(
            int(d["k"]), dict(d["decode_tokens_per_s"]), dict(d["spread"]),
            dict(d["mean_acceptance_length"]),
            {int(c): v for c, v in (d.get("output_tokens_per_s_by_concurrency") or {}).items()},
            list(d.get("errors") or []),
            {f: [float(x) for x in v] for f, v in (d.get("decode_samples") or {}).items()},
            int(d.get("rounds") or 1),
            {f: [float(x) for x in v] for f, v in (d.get("decode_by_round") or {}).items()},
        )  # fmt: skip

    def merged(self, later: KResult) -> KResult:
        """This K's figures with another round's: medians and min–max over every answer of
        both launches, so the spread holds what a relaunch moves as well as a repetition."""
        samples = {f: self.samples.get(f, []) + later.samples.get(f, [])
                   for f in {*self.samples, *later.samples}}  # fmt: skip
        decode = {f: statistics.median(v) if v else None for f, v in samples.items()}
        spread = {f: [min(v), max(v)] if v else [] for f, v in samples.items()}
        tau = {f: self.tau.get(f) if self.tau.get(f) is not None else later.tau.get(f)
               for f in {*self.tau, *later.tau}}  # fmt: skip
        levels = {}
        for c in {*self.by_level, *later.by_level}:
            vals = [v for v in (self.by_level.get(c), later.by_level.get(c)) if v is not None]
            levels[c] = sum(vals) / len(vals) if vals else None
        by_round = {f: self.by_round.get(f, []) + later.by_round.get(f, [])
                    for f in {*self.by_round, *later.by_round}}  # fmt: skip
        return KResult(self.k, decode, spread, tau, levels, self.errors + later.errors, samples,
                       self.rounds + later.rounds, by_round)  # fmt: skip


@dataclass
class TuneReport:
    options: TuneOptions
    ladder: list[int]
    results: list[KResult]
    resumed: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)  # K values left out by the early stop
    stopped_by: int | None = None  # the K that was clearly worse
    plot: Path | None = None  # written
    playbook: Path | None = None  # written
    playbook_serve: dict[str, Any] | None = None  # its serve section

    def fixtures(self) -> list[str]:
        return sorted({f for r in self.results for f in r.decode})

    def best(self, fixture: str | None = None) -> tuple[int, float] | None:
        """(K, tokens/s) of the fastest K for one fixture, or overall (geometric mean)."""
        scored = []
        for r in self.results:
            if fixture is not None:
                v = r.decode.get(fixture)
            else:
                vals = [r.decode.get(f) for f in self.fixtures()]
                v = (math.prod(vals) ** (1 / len(vals))  # type: ignore[arg-type]
                     if vals and all(x for x in vals) else None)  # fmt: skip
            if v:
                scored.append((v, r.k))
        if not scored:
            return None
        v, k = max(scored)
        return k, v

    def ties(self, fixture: str) -> list[int]:
        """Other K whose min–max over the repetitions overlaps the best K's on `fixture`: the
        measurement does not tell them apart."""
        best = self.best(fixture)
        if best is None:
            return []
        top = next(r for r in self.results if r.k == best[0])
        lo_hi = top.spread.get(fixture) or []
        if len(lo_hi) != 2:
            return []
        out = []
        for r in self.results:
            rng = r.spread.get(fixture) or []
            if r.k != top.k and len(rng) == 2 and rng[1] >= lo_hi[0] and rng[0] <= lo_hi[1]:
                out.append(r.k)
        return out

    def round_speedups(self, r: KResult, fixture: str) -> list[float]:
        """This K's speed over speculation off's in the same round, round by round (both
        launched minutes apart, in turn): the drift of the machine between rounds cancels out
        of each ratio."""
        off = next((x for x in self.results if x.k == 0), None)
        if off is None or r.k == 0:
            return []
        mine, base = r.by_round.get(fixture, []), off.by_round.get(fixture, [])
        return [m / b for m, b in zip(mine, base, strict=False) if m and b]

    def speedup_range(self, r: KResult, fixture: str) -> list[float] | None:
        """[min, max] over the rounds of `round_speedups`; None with one round."""
        ratios = self.round_speedups(r, fixture)
        return [min(ratios), max(ratios)] if len(ratios) >= 2 else None

    def speedup_rerun(self, r: KResult, fixture: str) -> list[float] | None:
        """Where a second run's mean speed-up over the rounds lands 95 % of the time."""
        return rerun_interval(self.round_speedups(r, fixture))

    def speedup(self, r: KResult, fixture: str) -> float | None:
        off = next((x for x in self.results if x.k == 0), None)
        base = off.decode.get(fixture) if off else None
        mine = r.decode.get(fixture)
        return mine / base if base and mine else None

    def batch_size_table(self) -> list[list[int]] | None:
        """vLLM's `num_speculative_tokens_per_batch_size`: [[lo, hi, k], …] from the fastest K
        at each concurrency level (0 where plain decoding wins); None without levels."""
        levels = sorted({c for r in self.results for c in r.by_level})
        if not levels:
            return None
        table: list[list[int]] = []
        for i, c in enumerate(levels):
            scored = [(r.by_level.get(c) or 0.0, r.k) for r in self.results]
            k = max(scored)[1]
            lo = 1 if i == 0 else levels[i - 1] + 1
            hi = c if i < len(levels) - 1 else 1 << 16
            if table and table[-1][2] == k:
                table[-1][1] = hi
            else:
                table.append([lo, hi, k])
        return table

    def one_k_over_levels(self) -> tuple[int, float] | None:
        """(K, geometric mean of output tokens/s over the concurrency levels) of the K that
        serves every level best as one value — for an engine with one K at every batch size
        (SGLang); 0 where plain decoding does. None without levels or a K measured at all."""
        levels = sorted({c for r in self.results for c in r.by_level})
        scored = []
        for r in self.results:
            vals = [r.by_level.get(c) for c in levels]
            if levels and all(vals):
                scored.append((math.prod(vals) ** (1 / len(vals)), r.k))  # type: ignore[arg-type]
        if not scored:
            return None
        v, k = max(scored)
        return k, v

    def to_json(self) -> dict[str, Any]:
        best = self.best()
        one_k = self.one_k_over_levels()
        return {
            "ladder": self.ladder,
            "resumed": self.resumed,
            "results": [r.to_json() for r in self.results],
            "best": {"k": best[0], "geomean_decode_tokens_per_s": round(best[1], 2)}
            if best
            else None,
            "best_per_fixture": {
                f: (b[0] if (b := self.best(f)) else None) for f in self.fixtures()
            },
            "ties_per_fixture": {f: self.ties(f) for f in self.fixtures()},
            "decode_rerun_interval": {
                str(r.k): {f: rerun_interval(r.by_round.get(f, [])) for f in self.fixtures()}
                for r in self.results
            },
            "speedup_vs_off": {
                str(r.k): {
                    f: {
                        "median": self.speedup(r, f),
                        "by_round": self.speedup_range(r, f),
                        "round_mean": round_mean(self.round_speedups(r, f)),
                        "rerun_interval": self.speedup_rerun(r, f),
                    }
                    for f in self.fixtures()
                }
                for r in self.results
                if r.k
            },
            "skipped_by_early_stop": self.skipped,
            "plot": str(self.plot) if self.plot else None,
            "playbook": {"path": str(self.playbook), "serve": self.playbook_serve}
            if self.playbook
            else None,
            "stopped_by": self.stopped_by,
            "num_speculative_tokens_per_batch_size": self.batch_size_table(),
            "one_k_over_concurrency": (
                {"k": one_k[0], "geomean_output_tokens_per_s": round(one_k[1], 2)}
                if one_k
                else None
            ),
            "notes": self.notes,
        }


def parse_ladder(text: str | None, block_k: int | None) -> list[int]:
    """The K values, 0 first (the control); the default ladder stops at block_size - 1."""
    if text is None:
        top = block_k or 15
        return [0, *sorted({k for k in (1, 3, 7, top) if k <= top})]
    try:
        ks = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise UsageError(f"--k {text!r} is not a list of integers", "e.g. --k 0,3,7,15") from None
    if not ks or ks[0] < 0 or len(ks) > MAX_LADDER:
        raise UsageError(
            f"--k {text!r}: give 1 to {MAX_LADDER} values ≥ 0 (0 = speculation off)",
            "e.g. --k 0,3,7,15",
        )
    if block_k is not None and ks[-1] > block_k:
        raise UsageError(
            f"--k {ks[-1]}: the drafter's block drafts at most {block_k} tokens",
            f"keep K ≤ {block_k} (block_size − 1)",
        )
    return ks if ks[0] == 0 else [0, *ks]


def _load_state(opts: TuneOptions) -> dict[int, KResult]:
    path = opts.state_file
    if path is None or not path.exists():
        return {}
    try:
        data = json.loads(path.read_text("utf-8"))
        if not isinstance(data, dict):
            raise TypeError("not a JSON object")
        if data.get("key") != opts.key():
            raise UsageError(
                f"{path} holds a tune run with other settings",
                "use the same command to resume, or another --state file",
            )
        return {r.k: r for r in (KResult.from_json(x) for x in data["results"])}
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise UsageError(f"{path}: not a tune state file ({e})") from None
    except OSError as e:
        raise UsageError(f"{path}: cannot read the tune state ({e.strerror or e})") from None


def _save_state(opts: TuneOptions, done: dict[int, KResult]) -> None:
    if opts.state_file is None:
        return
    from dflashctl.files import write_json_atomic

    write_json_atomic(
        opts.state_file,
        {"key": opts.key(), "results": [done[k].to_json() for k in sorted(done)]},
    )


def run_tune(opts: TuneOptions, *, say: Say | None = None) -> TuneReport:
    say = say or (lambda _m: None)
    if opts.repetitions < 1:
        raise UsageError("--repetitions must be at least 1")
    if not 1 <= opts.rounds <= 10:
        raise UsageError("--rounds must be 1 to 10")
    _check_outputs(opts)  # before a sweep of many minutes, not after it
    done = _load_state(opts)
    from dflashctl.hosts import open_host
    from dflashctl.server.plan import demo_pair_dirs, require_local_dirs, speculative_tokens

    model, drafter = opts.model, opts.drafter
    with open_host(opts.host, python=opts.python) as host:
        if model is None:
            if opts.engine != "local":
                raise UsageError(f"--engine {opts.engine} needs --model (and --drafter)")
            model, demo_drafter = demo_pair_dirs(host)
            drafter = drafter or demo_drafter  # --drafter alone: the demo target with it
        if drafter is None:
            raise UsageError("tune needs a drafter: --drafter DIR (or neither, for the demo pair)")
        if opts.engine == "local":  # before K=0, which launches without the drafter
            require_local_dirs(host, model, drafter)
        block_k, _src = speculative_tokens(host, drafter)
    ladder = parse_ladder(opts.ladder, block_k)
    complete = [k for k in ladder if k in done and done[k].rounds >= opts.rounds]
    report = TuneReport(opts, ladder, [], resumed=complete)
    for rnd in range(1, opts.rounds + 1):
        tag = f"round {rnd}/{opts.rounds}: " if opts.rounds > 1 else ""
        for i, k in enumerate(ladder):
            if k in report.skipped:
                continue
            have = done.get(k)
            if have is not None and have.rounds >= rnd:
                if rnd == 1:
                    say(f"{tag}K={k}: kept from {opts.state_file}")
            else:
                say(f"{tag}K={k}: launching" + (" (speculation off)" if k == 0 else ""))
                result = _measure(opts, model, drafter, k, say)
                done[k] = have.merged(result) if have is not None else result
                _save_state(opts, done)
            if rnd > 1 or not opts.early_stop:
                continue
            measured = [done[x] for x in ladder[: i + 1] if x in done]
            better = clearly_better_k(measured, done[k])
            if better is not None and i + 1 < len(ladder):
                report.stopped_by, report.skipped = k, ladder[i + 1 :]
                left = ", ".join(map(str, report.skipped))
                report.notes.append(
                    f"stopped early: K={k} was clearly slower than K={better} on every kind "
                    f"(its best repetition under {CLEARLY_WORSE:g}× K={better}'s worst); "
                    f"K={left} not measured (--no-early-stop measures them)"
                )
                say(f"K={k}: clearly slower than K={better}; skipping K={left}")
                break
    report.results = [done[k] for k in ladder if k in done and k not in report.skipped]
    _notes(report)
    if opts.plot is not None:
        from dflashctl.commands.tune.plot import write_plot

        write_plot(report, opts.plot)
        report.plot = opts.plot
    if opts.write_playbook is not None and report.best() is not None:
        from dflashctl.commands.tune.playbook import write_playbook

        report.playbook_serve = write_playbook(report, opts.write_playbook)
        report.playbook = opts.write_playbook
    return report


def _check_outputs(opts: TuneOptions) -> None:
    for flag, path in (("--plot", opts.plot), ("--write-playbook", opts.write_playbook)):
        if path is None:
            continue
        if not path.parent.is_dir():
            raise UsageError(f"{flag} {path}: the directory {path.parent} does not exist")
        if path.is_dir():
            raise UsageError(f"{flag} {path} is a directory", "name a file")
    if opts.plot is not None:
        from dflashctl.commands.tune.plot import plot_format

        plot_format(opts.plot)
    if opts.write_playbook is not None and opts.write_playbook.suffix not in (".yaml", ".yml"):
        raise UsageError(
            f"--write-playbook {opts.write_playbook}: a playbook is a .yaml or .yml file"
        )


def clearly_better_k(results: list[KResult], last: KResult) -> int | None:
    """A smaller speculative K that beats `last` beyond doubt on every prompt kind (its worst
    repetition above `last`'s best by 1 / CLEARLY_WORSE), or None. Past the best K, speed
    only falls as K grows: the verify gets longer while the extra drafts are rarely kept."""
    if last.k == 0 or last.errors or not last.spread:
        return None
    for r in results:
        if r.k == 0 or r.k >= last.k or r.errors:
            continue
        kinds = [f for f in last.spread if len(last.spread[f]) == 2]
        if kinds and all(
            len(r.spread.get(f) or []) == 2 and last.spread[f][1] < CLEARLY_WORSE * r.spread[f][0]
            for f in kinds
        ):
            return r.k
    return None


def _measure(opts: TuneOptions, model: str, drafter: str, k: int, say: Say) -> KResult:
    from dflashctl.commands.bench.run import run_bench
    from dflashctl.commands.bench.session import BenchOptions
    from dflashctl.hosts.ssh import SSHOptions
    from dflashctl.server import deployments as state
    from dflashctl.server.book import run_serve
    from dflashctl.server.control import stop_deployment
    from dflashctl.server.launch import signals_stop_the_engine
    from dflashctl.server.plan import ServeOptions

    name = f"tune-k{k}"
    serve = ServeOptions(
        engine=opts.engine, model=model, drafter=drafter, host=opts.host, python=opts.python,
        port=opts.port, name=name, spec="none" if k == 0 else "dflash",
        num_speculative_tokens=k or None, extra_args=list(opts.extra_args),
    )  # fmt: skip
    t0 = time.monotonic()
    # SIGTERM or SIGHUP, like Ctrl-C, stops the server this K launched (from the launch on)
    with signals_stop_the_engine():
        try:
            outcome = run_serve([serve], ssh=SSHOptions(), detach=True, dry_run=False)
            launched = outcome.results[0] if outcome.results else None
            if launched is None or not launched.ok:
                why = (launched.reason if launched else None) or "; ".join(outcome.errors.values())
                raise DflashError(f"tune: the server at K={k} did not start: {why}")
            say(f"K={k}: up in {time.monotonic() - t0:.0f} s; measuring")
            bench = run_bench(
                BenchOptions(
                    targets=[name], fixtures=opts.fixtures, prompts_file=opts.prompts_file,
                    repetitions=opts.repetitions, warmup_tokens=opts.warmup_tokens,
                    max_tokens=opts.max_tokens, concurrency=opts.concurrency, timeout=opts.timeout,
                )
            )  # fmt: skip
        finally:
            dep = state.load(name)
            if dep is not None:
                stop_deployment(dep, grace=10.0)
    tr = bench.targets[0]
    decode, spread, tau, samples = {}, {}, {}, {}
    for fixture, cell in tr.cells.items():
        decode[fixture] = cell.decode_tokens_per_s
        samples[fixture] = [c.decode_tokens_per_s for c in cell.good if c.decode_tokens_per_s]
        rng = cell.decode_range
        spread[fixture] = [rng[0], rng[1]] if rng else []
        _s, w, _m = cell.acceptance()
        tau[fixture] = w.mean_acceptance_length if (w and k) else None
    levels = {lv.concurrency: lv.throughput for lv in bench.sweep}
    by_round = {f: [v] for f, v in decode.items() if v}
    return KResult(k, decode, spread, tau, levels, bench.failures, samples, 1, by_round)


def _notes(report: TuneReport) -> None:
    best = report.best()
    off = next((r for r in report.results if r.k == 0), None)
    if best and off and best[0] == 0:
        report.notes.append("plain decoding is fastest overall here: do not speculate")
    for r in report.results:
        if r.k == 0:
            continue
        worse = [f for f in report.fixtures() if (s := report.speedup(r, f)) and s < 0.8]
        if worse and len(worse) == len(report.fixtures()):
            report.notes.append(f"K={r.k} is clearly worse than speculation off on every kind")
