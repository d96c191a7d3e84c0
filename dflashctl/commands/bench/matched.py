"""The A/B guard of `bench`: servers compared must differ only in speculation.

For each target whose launch command is known (a deployment `dflashctl serve` recorded, or a
playbook host's), its settings are read with `defects.launch.from_argv`; any pair of the same
engine (vLLM or SGLang) that differs in an `AB_FIELDS` setting — prefix caching,
max-num-batched-tokens, max-model-len, dtype, eager mode, custom all-reduce, tensor parallel
size — is refused (`UnmatchedRuns`, exit 2) unless `--allow-unmatched`, naming each difference
(vllm#50722). Targets given as URLs have no known command: a note says they were not checked.
No printing.
"""

from __future__ import annotations

from dflashctl.commands.bench.targets import BenchTarget
from dflashctl.defects.launch import LaunchSettings, ab_differences, from_argv
from dflashctl.errors import UsageError

GUARDED_ENGINES = ("vllm", "sglang")


class UnmatchedRuns(UsageError):
    """Two servers of the comparison were launched with different settings."""


def launch_of(t: BenchTarget) -> tuple[str, LaunchSettings] | None:
    """(engine, settings) of a target whose launch command dflashctl recorded."""
    if t.kind not in ("deployment", "playbook"):
        return None
    from dflashctl.server import deployments as state

    dep = state.load(t.label)
    if dep is None or dep.engine not in GUARDED_ENGINES or not dep.cmd:
        return None
    return dep.engine, from_argv(dep.engine, dep.cmd)


def check_matched(targets: list[BenchTarget], allow_unmatched: bool) -> list[str]:
    """Notes for the report; raises `UnmatchedRuns` on a difference unless allowed."""
    known = {t.label: launch_of(t) for t in targets}
    notes = []
    unknown = [label for label, k in known.items() if k is None]
    if unknown and len(unknown) < len(targets):
        notes.append(
            "launch settings not known for " + ", ".join(unknown) + " (not a deployment "
            "dflashctl started): prefix caching and the other A/B settings were not compared"
        )
    base_label = targets[0].label
    base = known[base_label]
    problems = []
    for t in targets[1:]:
        other = known[t.label]
        if base is None or other is None or base[0] != other[0]:
            continue
        for what, a, b in ab_differences(base[1], other[1]):
            problems.append(f"{what}: {a} on {base_label}, {b} on {t.label}")
    if problems and not allow_unmatched:
        raise UnmatchedRuns(
            "the servers differ in more than speculation, so their speeds do not compare: "
            + "; ".join(problems),
            "launch them with the same settings, or compare anyway with --allow-unmatched",
        )
    if problems:
        notes.append("unmatched A/B (--allow-unmatched): " + "; ".join(problems))
    return notes
