"""The A/B guard of `bench`: servers compared must differ only in speculation.

Each target's launch settings come from where they can be read: a deployment `dflashctl serve`
recorded, or a playbook host's, gives its command line (`defects.launch.from_argv`); a URL gives
what the running server tells (vLLM's `/v1/models` and `/metrics`, SGLang's `/server_info`) and
its start-up log when `--log` names one (bench/served.py; a llama-server's are read from its
deployment only). Any pair of the same engine (vLLM, SGLang or llama.cpp) that differs in a
setting of `ab_fields(engine)` both sides know — prefix caching (llama.cpp: prompt caching),
max-num-batched-tokens (`-b`), max-model-len (`-c`), dtype, eager mode, custom all-reduce,
tensor parallel size, llama.cpp's split mode — is refused (`UnmatchedRuns`, exit 2) unless
`--allow-unmatched`, naming each difference (vllm#50722); the settings one side does not know
are named in a note. No printing.
"""

from __future__ import annotations

from pathlib import Path

from dflashctl.commands.bench.targets import BenchTarget
from dflashctl.defects.launch import (
    LaunchSettings,
    ab_differences,
    ab_fields,
    ab_unknown,
    from_argv,
)
from dflashctl.errors import UsageError

GUARDED_ENGINES = ("vllm", "sglang", "llama.cpp")
PROBE_TIMEOUT = 10.0  # seconds for each page a running server is asked for


class UnmatchedRuns(UsageError):
    """Two servers of the comparison were launched with different settings."""


def launch_of(
    t: BenchTarget, log: Path | None = None, timeout: float = PROBE_TIMEOUT
) -> tuple[str, LaunchSettings] | None:
    """(engine, settings) of a target: its recorded command, else what the server and `log`
    say; None when nothing is known."""
    if t.kind in ("deployment", "playbook"):
        from dflashctl.server import deployments as state

        dep = state.load(t.label)
        if dep is None or dep.engine not in GUARDED_ENGINES or not dep.cmd:
            return None
        return dep.engine, from_argv(dep.engine, dep.cmd)
    from dflashctl.commands.bench.served import from_log, from_server, merge

    read_log = from_log(log) if log is not None else None
    served = from_server(t.url, timeout)
    if served and read_log and served[0] == read_log[0]:
        return served[0], merge(read_log[1], served[1])
    return served or read_log


def _logs_by_label(targets: list[BenchTarget], logs: list[Path]) -> dict[str, Path]:
    urls = [t for t in targets if t.kind == "url"]
    if logs and len(logs) != len(urls):
        raise UsageError(
            f"{len(logs)} --log for {len(urls)} URL target(s)",
            "give one --log per URL target, in the order the URLs are given (deployments "
            "dflashctl started need none)",
        )
    return {t.label: log for t, log in zip(urls, logs, strict=False)}


def check_matched(
    targets: list[BenchTarget],
    allow_unmatched: bool,
    logs: list[Path] | None = None,
    timeout: float = PROBE_TIMEOUT,
) -> list[str]:
    """Notes for the report; raises `UnmatchedRuns` on a difference unless allowed."""
    by_label = _logs_by_label(targets, list(logs or []))
    known = {t.label: launch_of(t, by_label.get(t.label), timeout) for t in targets}
    notes = []
    unknown = [label for label, k in known.items() if k is None]
    if unknown and len(unknown) < len(targets):
        notes.append(
            "launch settings not known for " + ", ".join(unknown) + " (not a deployment "
            "dflashctl started, and neither the server nor a --log told them): prefix caching "
            "and the other A/B settings were not compared"
        )
    base_label = targets[0].label
    base = known[base_label]
    problems = []
    for t in targets[1:]:
        other = known[t.label]
        if base is None or other is None or base[0] != other[0]:
            continue
        fields = ab_fields(base[0])
        for what, a, b in ab_differences(base[1], other[1], fields):
            problems.append(f"{what}: {a} on {base_label}, {b} on {t.label}")
        missing = ab_unknown(base[1], other[1], fields)
        if missing:
            notes.append(
                f"not compared between {base_label} and {t.label} (not known on both): "
                + ", ".join(missing)
                + "; a --log per URL target tells vLLM's"
            )
    if problems and not allow_unmatched:
        raise UnmatchedRuns(
            "the servers differ in more than speculation, so their speeds do not compare: "
            + "; ".join(problems),
            "launch them with the same settings, or compare anyway with --allow-unmatched",
        )
    if problems:
        notes.append("unmatched A/B (--allow-unmatched): " + "; ".join(problems))
    return notes
