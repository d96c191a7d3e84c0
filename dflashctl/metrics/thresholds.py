"""What the alarm rules judge against: `Thresholds`, one frozen set per analysis (the defaults,
the user's floor, the registry's range for the drafter, the server's URL for the commands that
causes name). docs/metrics.md gives each value's reason. Pure data."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Thresholds:
    collapse_length: float = 1.30  # mean acceptance length at or below: collapse
    collapse_rate: float = 0.05  # draft acceptance below: collapse
    min_drafted_tokens: int = 200  # evidence needed before calling a collapse …
    min_drafts: int = 30  # … and this many drafts where counted: τ's evidence is in drafts
    # (200 drafted tokens are 67 drafts at K = 3 but 13 at K = 15, one short answer's worth)
    min_acceptance_length: float | None = None
    expected_min: float | None = None
    expected_max: float | None = None
    drafter: str | None = None
    interval: float | None = None  # expected seconds between windows (default: estimated)
    stale_intervals: float = 3.0
    min_stale_seconds: float = 30.0
    decay_min_windows: int = 6
    decay_ratio: float = 0.8  # late median ≤ ratio × early median
    decay_min_drop: float = 0.3  # in mean acceptance length
    weak_position_rate: float = 0.02  # "near zero" for a later position
    healthy_first_position: float = 0.4
    follow: bool = False
    url: str | None = None  # the server, when known, for the commands in causes
    source: str = "LOG"
    block_size: int | None = None  # the drafter's trained block (registry), when known
    cliff_drop: float = 0.1  # a position under this fraction of the one before it …
    cliff_from: float = 0.05  # … when that one accepted at least this much: a cliff
    cliff_min_count: float = 10.0  # … and at least this many drafts reached it (else a zero
    # after it is what a gradual fall gives by chance: 4 drafts at 20 % then 0 is no cliff)
    large_batch: int = 16  # SGLang: running requests from which speculation may be off
    loop_rate: float = 0.995  # every position at least this: the target is probably looping
