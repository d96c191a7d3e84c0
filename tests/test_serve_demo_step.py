"""The demo pair's cheaper CPU step on the bundled engine (issue 33): serve adds the draft
vocabulary kept beside the embedded drafter and --draft-confidence 0.5, before the user's own
flags (theirs win), and only for the embedded pair on the bundled engine."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from support.cli import run_json

from dflashctl import demo_target
from dflashctl.server.plan import DEMO_DRAFT_VOCAB

ASSETS = Path(__file__).resolve().parent.parent / "dflashctl" / "assets" / "demo"


@pytest.fixture(autouse=True)
def _no_setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(demo_target.CACHE_ENV, str(tmp_path / "cache"))  # a dry run sets up nothing


def _flag(cmd: list[str], flag: str) -> list[str]:
    return [cmd[i + 1] for i, a in enumerate(cmd[:-1]) if a == flag]


def test_the_embedded_pair_is_served_with_the_cheaper_step(monkeypatch, capsys):
    code, plan, err = run_json(monkeypatch, capsys, "serve", "--dry-run")
    assert code == 0, err
    cmd = plan["cmd"]
    assert _flag(cmd, "--draft-vocab") == [str(ASSETS / DEMO_DRAFT_VOCAB)]
    assert _flag(cmd, "--draft-confidence") == ["0.5"]
    assert any(n.startswith("the demo pair's CPU step: --draft-vocab") for n in plan["notes"])


def test_the_users_own_flags_win_and_ours_are_not_doubled(monkeypatch, capsys):
    args = ["serve", "--dry-run", "--", "--draft-confidence", "0", "--draft-vocab=none"]
    code, plan, err = run_json(monkeypatch, capsys, *args)
    assert code == 0, err
    cmd = plan["cmd"]
    assert _flag(cmd, "--draft-confidence") == ["0"] and "--draft-vocab=none" in cmd
    assert "--draft-vocab" not in cmd
    assert not any("CPU step" in n for n in plan["notes"])
    code, plan, err = run_json(
        monkeypatch, capsys, "serve", "--dry-run", "--", "--draft-vocab", "none"
    )
    assert code == 0, err
    assert _flag(plan["cmd"], "--draft-vocab") == ["none"]
    assert _flag(plan["cmd"], "--draft-confidence") == ["0.5"]  # the other one is still ours


def test_a_plain_control_and_another_pair_get_none_of_it(monkeypatch, capsys, tmp_path):
    code, plan, err = run_json(monkeypatch, capsys, "serve", "--dry-run", "--spec", "none")
    assert code == 0, err
    assert "--draft-vocab" not in plan["cmd"] and "--draft-confidence" not in plan["cmd"]
    drafter = tmp_path / "drafter"
    drafter.mkdir()
    args = ["serve", "--dry-run", "--model", str(tmp_path), "--drafter", str(drafter), "-k", "7"]
    code, plan, err = run_json(monkeypatch, capsys, *args)
    assert code == 0, err
    assert "--draft-vocab" not in plan["cmd"] and "--draft-confidence" not in plan["cmd"]


def test_the_shipped_vocabulary_is_a_map_into_the_demo_targets_vocabulary():
    with safe_open(str(ASSETS / DEMO_DRAFT_VOCAB), framework="pt") as f:
        assert list(f.keys()) == ["d2t"]
        d2t = f.get_tensor("d2t")
    ids = d2t + torch.arange(len(d2t))
    assert len(d2t) == 8192 and int(ids.min()) >= 0 and int(ids.max()) < 49152
    assert len(set(ids.tolist())) == 8192 and ids.tolist() == sorted(ids.tolist())
