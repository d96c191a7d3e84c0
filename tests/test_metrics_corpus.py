"""The diagnosis corpus: real-format log excerpts (constructed from the engines' format strings,
values chosen to show one pattern each), each with the verdict it must get.

Each file in tests/data/metrics/corpus/ starts with `#` lines (foreign lines to the scanner):
`# expect: ok` or `# expect: alarm KIND`; optionally `# first-cause: TEXT` (a substring of the
first likely cause of that alarm, or of the first warning for an `ok` excerpt) and
`# warns: KIND` (a warning that must be raised). The tally sorts each excerpt into correct,
missed (a problem not reported, or an expected warning missing), false alarm (an alarm on a
healthy excerpt, or the same alarm twice) and wrong cause (another alarm, or the right alarm
with the wrong cause first). docs/metrics.md
reports it; reproduce with:

    PYTHONPATH=. .venv/bin/python tests/test_metrics_corpus.py
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

CORPUS = Path(__file__).resolve().parent / "data" / "metrics" / "corpus"
EXCERPTS = sorted(CORPUS.glob("*.log"))


@dataclass
class Expectation:
    verdict: str  # "ok" | "alarm"
    kind: str | None
    first_cause: str | None
    warns: list[str]


def expectation(path: Path) -> Expectation:
    head = {}
    warns: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("# "):
            break
        key, _, value = line[2:].partition(": ")
        if key == "warns":
            warns.append(value.strip())
        else:
            head[key] = value.strip()
    verdict, _, kind = head["expect"].partition(" ")
    return Expectation(verdict, kind or None, head.get("first-cause"), warns)


def classify(path: Path) -> tuple[str, str]:
    """("correct" | "missed" | "false alarm" | "wrong cause", what was found)."""
    from dflashctl.metrics.analyze import MetricsOptions, analyze_source

    exp = expectation(path)
    rep = analyze_source(str(path), MetricsOptions())
    alarms = [f for f in rep.findings if f.severity == "alarm"]
    warnings = [f for f in rep.findings if f.severity == "warning"]
    got = ", ".join(f"{f.severity} {f.kind}" for f in rep.findings) or "nothing"
    if exp.verdict == "ok":
        if alarms:
            return "false alarm", got
        if any(w not in {f.kind for f in warnings} for w in exp.warns):
            return "missed", got
        if exp.first_cause:
            first = warnings[0].likely_causes[0].cause if warnings else ""
            if exp.first_cause.lower() not in first.lower():
                return "wrong cause", got
        return "correct", got
    hit = [f for f in alarms if f.kind == exp.kind]
    if not hit:
        return ("wrong cause" if alarms else "missed"), got
    if len(hit) > 1:
        return "false alarm", f"{got} (the same alarm {len(hit)} times)"
    if exp.first_cause:
        first = hit[0].likely_causes[0].cause if hit[0].likely_causes else ""
        if exp.first_cause.lower() not in first.lower():
            return "wrong cause", f"{got}; first cause: {first[:80]}"
    return "correct", got


@pytest.mark.parametrize("path", EXCERPTS, ids=[p.stem for p in EXCERPTS])
def test_excerpt_gets_its_verdict(path: Path):
    outcome, got = classify(path)
    assert outcome == "correct", f"{path.name}: {outcome} ({got})"


def test_the_corpus_covers_each_pattern():
    kinds = {expectation(p).kind for p in EXCERPTS} | {
        w for p in EXCERPTS for w in expectation(p).warns
    }
    assert {
        "collapse",
        "position_cliff",
        "engine_crash",
        "below_expected",
        "decay",
        "speculation_off_large_batch",
        "possible_loop",
    } <= kinds
    assert len(EXCERPTS) >= 20


def tally() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {"correct": [], "missed": [], "false alarm": [], "wrong cause": []}
    for p in EXCERPTS:
        outcome, got = classify(p)
        out[outcome].append(f"{p.name}: {got}")
    return out


if __name__ == "__main__":
    # the tests' isolation: no deployment records or registry overrides of this machine
    os.environ["DFLASHCTL_HOME"] = tempfile.mkdtemp()
    os.environ.pop("DFLASHCTL_PLAYBOOKS", None)
    t = tally()
    for outcome, items in t.items():
        print(f"{outcome}: {len(items)}")
        for item in items if outcome != "correct" else []:
            print(f"  {item}")
    print(f"total: {len(EXCERPTS)}")
    sys.exit(0 if len(t["correct"]) == len(EXCERPTS) else 1)
