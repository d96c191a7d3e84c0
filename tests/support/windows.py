"""SpecWindow builders shared by the alarm tests: one vLLM 0.10.2+ window per call, its
drafts and accepted tokens derived from τ and the drafted tokens at K."""

from __future__ import annotations

from datetime import datetime, timedelta

from dflashctl.metrics.window import SpecWindow

T0 = datetime(2026, 11, 20, 10, 0, 0)


def win(
    mean: float | None = 2.5,
    *,
    rate: float | None = 0.5,
    drafted: int | None = 3000,
    k: int = 3,
    pp: list[float] | None = None,
    i: int = 0,
    launch: int = 0,
    stream: str = "engine 0",
    engine: str = "vllm",
    raw: bool = True,
    **kw: object,
) -> SpecWindow:
    drafts = drafted // k if drafted is not None else None
    acc = round((mean - 1) * drafts) if drafts and mean is not None else None
    w = SpecWindow(
        engine=engine,
        format="vllm-0.10.2+",
        timestamp=T0 + timedelta(seconds=10 * i),
        timestamp_raw=f"w{i}" if raw else None,
        stream=stream,
        launch=launch,
        mean_acceptance_length=mean,
        accepted_tokens=acc,
        drafted_tokens=drafted,
        num_drafts=drafts,
        per_position=pp if pp is not None else [0.7, 0.5, 0.3][:k] + [0.2] * max(0, k - 3),
        draft_acceptance_rate=rate,
    )
    for name, value in kw.items():
        setattr(w, name, value)
    return w
