"""The engine on a CUDA GPU (marked `gpu`; skipped without one, so CI never runs them).

Run on a GPU machine with `python -m pytest -m gpu tests/engine`. The device-resident step with
CUDA graphs (engine/fast.py) must commit exactly what the eager loop commits in float32; in
bfloat16 (where a 16-token verify rounds differently from a 1-token decode) both modes run on
graphs and agree on the first tokens.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from support.tiny_checkpoints import (
    ACCEPT_CHAT,
    VOCAB,
    write_accepting_pair,
    write_drafter,
    write_target,
)

from dflashctl.engine.generate import Engine, SpecStats

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def chunks(engine: Engine, ids: list[int], n: int, static: bool) -> tuple[list, SpecStats]:
    engine.static = static
    stats = SpecStats()
    return list(engine.stream(ids, n, stats)), stats


def test_graphs_commit_what_the_eager_loop_commits(tmp_path: Path) -> None:
    t, d = write_accepting_pair(tmp_path)
    engine = Engine.load(t, d, device="cuda", dtype=torch.float32, max_model_len=512)
    engine.eos_ids = set()
    ids = engine.tokenizer.apply_chat_template(ACCEPT_CHAT)
    eager, s1 = chunks(engine, ids, 200, static=False)
    graphed, s2 = chunks(engine, ids, 200, static=True)
    assert graphed == eager and s2.accepted_per_pos == s1.accepted_per_pos
    assert engine._steps is not None and engine._steps._graphs  # captured, replayed


def test_bfloat16_runs_both_modes_on_graphs(tmp_path: Path) -> None:
    write_target(tmp_path / "t", seed=4, arch="llama")
    write_drafter(tmp_path / "d")
    ids = torch.randint(0, VOCAB, (40,), generator=torch.Generator().manual_seed(2)).tolist()
    texts = []
    for drafter in (None, tmp_path / "d"):
        engine = Engine.load(tmp_path / "t", drafter, device="cuda", dtype=torch.bfloat16,
                             max_model_len=256)  # fmt: skip
        engine.eos_ids = set()
        got, _ = chunks(engine, ids, 100, static=True)
        texts.append([t for c in got for t in c])
    assert len(texts[0]) == len(texts[1]) == 100 and texts[0][:8] == texts[1][:8]


def test_the_compiled_step_commits_what_the_eager_loop_commits(tmp_path: Path) -> None:
    t, d = write_accepting_pair(tmp_path)
    engine = Engine.load(t, d, device="cuda", dtype=torch.float32, max_model_len=512)
    engine.eos_ids = set()
    ids = engine.tokenizer.apply_chat_template(ACCEPT_CHAT)
    eager, s1 = chunks(engine, ids, 200, static=False)
    engine.compile_mode = "default"
    engine._steps = None
    compiled, s2 = chunks(engine, ids, 200, static=True)
    assert compiled == eager and s2.accepted_per_pos == s1.accepted_per_pos
