"""The demo drafter's training (training/demo_pair.py) end to end on the CPU at its tiny preset,
as the GPU run will call it: prompts written by the real demo target, its greedy answers, the
DFlash training steps (the chunked lm_head loss, a profiled step), the export in Hugging Face
format, then a second run that starts from that export (`init_from`, how a lost GPU run resumes).
The exported drafter must pass verify-config against the target it was trained for."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import run_json
from support.pairs import demo_target

pytest.importorskip("torch")
REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def train(work: Path, out: Path, *extra: str, env: dict[str, str] | None = None) -> str:
    cmd = [
        sys.executable, str(REPO / "training" / "demo_pair.py"),
        "--work", str(work), "--out", str(out), "--preset", "tiny",
        "--target-dir", str(demo_target()), *extra,
    ]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=500, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return r.stdout + r.stderr


def test_tiny_training_exports_a_drafter_for_its_target_and_resumes_from_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import os

    env = {**os.environ, "PROFILE_STEP": "2"}
    log = train(
        tmp_path / "w1", tmp_path / "o1", "--stages", "prompts,answers,drafter,export", env=env
    )
    assert "drafter trained for" in log and "Self CPU time total" in log  # the profiled step
    again = train(tmp_path / "w1", tmp_path / "o1", "--stages", "answers")
    assert "answers: all" in again  # every prompt answered: not encoded again (a GPU call's 80 s)
    drafter = tmp_path / "o1" / "drafter"
    cfg = json.loads((drafter / "config.json").read_text())
    assert cfg["architectures"] == ["DFlashDraftModel"]
    assert cfg["dflash_config"]["mask_token_id"] == 6  # `<filename>`: the demo pair's mask

    code, report, err = run_json(
        monkeypatch, capsys, "verify-config", str(drafter), "--target", str(demo_target())
    )
    assert code == 0, (report, err)

    # a work directory that holds this run's drafter refuses a run of another shape (it would
    # resume, export and evaluate the wrong drafter), and a --set it cannot read, in one line
    demo_pair = [sys.executable, str(REPO / "training" / "demo_pair.py"), "--preset", "tiny"]
    for extra, said in [
        ("draft_layers=2", "drafter.pt is another run's drafter (draft_layers 1 there, 2 here)"),
        ("draft_layer=2", "--set draft_layer=2: no size named 'draft_layer'"),
        ("draft_layers=two", "--set draft_layers=two: draft_layers takes a whole number"),
    ]:
        r = subprocess.run(
            [*demo_pair, "--work", str(tmp_path / "w1"), "--out", str(tmp_path / "o1"),
             "--target-dir", str(demo_target()), "--stages", "drafter,export", "--set", extra],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert r.returncode == 2 and said in r.stderr, r.stderr[-2000:]
        assert "Traceback" not in r.stderr and said in r.stderr.strip().splitlines()[-1]

    resumed = train(
        tmp_path / "w2", tmp_path / "o2", "--stages", "prompts,answers,drafter",
        "--set", f"init_from={drafter / 'model.safetensors'}", "--set", "distill=0.5",
    )  # fmt: skip
    assert f"round 1: from {drafter / 'model.safetensors'}" in resumed
    assert "loss: 0.5 x ce + 0.5 x KL from the target's distribution" in resumed
    assert "drafter trained for" in resumed


def test_a_second_round_of_prompts_is_appended_and_the_answers_made_keep_their_rows(
    tmp_path: Path,
) -> None:
    import torch

    work = tmp_path / "w"
    train(work, tmp_path / "o", "--stages", "prompts,answers")
    first = json.loads((work / "prompts.json").read_text())
    made = torch.load(work / "answers-000000.pt")
    assert first["report"]["rounds"] == {"1": len(first["prompts"])}

    log = train(work, tmp_path / "o", "--stages", "prompts,answers", "--set", "prompt_round=2")
    second = json.loads((work / "prompts.json").read_text())
    n1 = len(first["prompts"])
    assert second["prompts"][:n1] == first["prompts"]  # round 1 untouched, in place
    fresh = second["prompts"][n1:]
    assert fresh and all(p["round"] == 2 for p in fresh)
    assert second["report"]["rounds"] == {"1": n1, "2": len(fresh)}
    texts = [p["prompt"] for p in second["prompts"]]
    assert len(set(texts)) == len(texts)  # nothing sampled twice is kept twice

    # the first chunk is as it was; the new round is answered in a chunk from where it stopped
    again = torch.load(work / "answers-000000.pt")
    assert again["prompt_index"] == made["prompt_index"] and torch.equal(
        again["tokens"], made["tokens"]
    )
    rows = len(made["lens"])
    follow = torch.load(work / f"answers-{rows:06d}.pt")
    assert set(made["prompt_index"]) == set(range(n1))  # tiny turns: every prompt fits
    assert set(follow["prompt_index"]) == set(range(n1, len(texts)))
    assert f"answers-{rows:06d}.pt" in log

    # a third call with the same round samples nothing and answers nothing new
    train(work, tmp_path / "o", "--stages", "prompts,answers", "--set", "prompt_round=2")
    assert json.loads((work / "prompts.json").read_text()) == second
    assert sorted(p.name for p in work.glob("answers-*.pt")) == sorted(
        ["answers-000000.pt", f"answers-{rows:06d}.pt"]
    )
