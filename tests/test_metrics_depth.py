"""An engine that verifies fewer than K proposals per draft — the bundled engine's
--draft-confidence (the demo pair's default), a dynamic depth — leaves the later positions
seldom verified: their near-zero rates judge nothing. The depth is read from the log's own
figures, (τ − 1) · drafted / accepted (SpecWindow.verified_depth); the same profile verified
K deep is still a weak-positions warning or a cliff alarm. Logs in vLLM's 0.10.2+ format, as
the bundled engine writes them; parsed for real by `dflashctl metrics`."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import run_json

WEAK = [0.811, 0.473, 0.311, 0.189, 0.108, 0.068, 0.014] + [0.0] * 8  # τ 2.974
CLIFF = [0.8, 0.6, 0.45] + [0.0] * 12  # τ 2.85


def write_log(path: Path, pp: list[float], drafts: int, depth: float, n: int = 8) -> Path:
    tau = 1 + sum(pp)
    accepted = round(drafts * sum(pp))
    drafted = round(drafts * depth)
    rates = ", ".join(f"{p:.3f}" for p in pp)
    lines = [
        f"(APIServer pid=1) INFO 12-06 15:{10 + i:02d}:07 [serving_stats.py:136] SpecDecoding "
        f"metrics: Mean acceptance length: {tau:.2f}, Accepted throughput: {accepted / 60:.2f} "
        f"tokens/s, Drafted throughput: {drafted / 60:.2f} tokens/s, Accepted: {accepted} "
        f"tokens, Drafted: {drafted} tokens, Per-position acceptance rate: {rates}, Avg Draft "
        f"acceptance rate: {accepted / drafted * 100:.1f}%"
        for i in range(n)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def kinds(monkeypatch, capsys, log: Path) -> list[tuple[str, str]]:
    code, data, err = run_json(monkeypatch, capsys, "metrics", str(log))
    assert code in (0, 1), err
    assert (code == 1) == any(a["severity"] == "alarm" for a in data["alarms"])
    return [(a["kind"], a["severity"]) for a in data["alarms"]]


@pytest.mark.parametrize(
    ("pp", "full_k"),
    [(WEAK, [("weak_later_positions", "warning")]), (CLIFF, [("position_cliff", "alarm")])],
)
def test_positions_past_the_verified_depth_are_not_judged(
    monkeypatch, capsys, tmp_path, pp, full_k
):
    full = write_log(tmp_path / "full.log", pp, drafts=800, depth=15)
    assert kinds(monkeypatch, capsys, full) == full_k
    shallow = write_log(tmp_path / "shallow.log", pp, drafts=800, depth=2.7)
    assert kinds(monkeypatch, capsys, shallow) == []


@pytest.mark.parametrize(("depth", "judged"), [(13.9, False), (14.1, True), (15, True)])
def test_the_depth_edge_is_k_minus_one(monkeypatch, capsys, tmp_path, depth, judged):
    log = write_log(tmp_path / "d.log", CLIFF, drafts=800, depth=depth)
    assert bool(kinds(monkeypatch, capsys, log)) is judged


def test_a_collapse_is_judged_whatever_the_depth(monkeypatch, capsys, tmp_path):
    collapsed = [0.05] + [0.0] * 14  # τ 1.05: too close to 1 to read a depth from
    log = write_log(tmp_path / "c.log", collapsed, drafts=800, depth=2.0)
    assert ("collapse", "alarm") in kinds(monkeypatch, capsys, log)
