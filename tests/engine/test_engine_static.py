"""The engine's device-resident step (engine/fast.py) against its plain loop, on the CPU.

`StaticSteps` keeps the anchor and the start position on the device, attends over power-of-two
buckets of cache slots, writes the drafter's block into its cache and every verified position's
context, and reads the host once per step. On a GPU it also captures each bucket as a CUDA
graph (tests marked `gpu`). Here it runs the same work eagerly: the tokens, the committed chunks
and the acceptance statistics must be exactly the plain loop's, across bucket boundaries.
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

from dflashctl.engine.fast import MIN_BUCKET, StaticSteps, greedy
from dflashctl.engine.generate import Engine, SpecStats
from dflashctl.errors import EngineError


def run(engine: Engine, ids: list[int], n: int, static: bool) -> tuple[list[list[int]], SpecStats]:
    engine.static = static
    stats = SpecStats()
    return list(engine.stream(ids, n, stats)), stats


@pytest.fixture(scope="module")
def accepting(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write_accepting_pair(tmp_path_factory.mktemp("accepting"))


def test_a_sometimes_right_drafter_commits_the_same_chunks(accepting) -> None:
    spec = Engine.load(*accepting, max_model_len=512)
    spec.eos_ids = set()
    ids = spec.tokenizer.apply_chat_template(ACCEPT_CHAT)
    n = 3 * MIN_BUCKET  # crosses two bucket boundaries
    chunks, stats = run(spec, ids, n, static=False)
    chunks_s, stats_s = run(spec, ids, n, static=True)
    assert chunks_s == chunks
    assert stats_s.accepted_per_pos == stats.accepted_per_pos and stats.num_accepted_tokens > 0
    assert max(len(c) for c in chunks_s) == spec.k + 1  # whole blocks were accepted


@pytest.mark.parametrize("drafted", [False, True], ids=["plain", "speculative"])
def test_random_pairs_write_the_plain_greedy_text(tmp_path: Path, drafted: bool) -> None:
    write_target(tmp_path / "t", seed=4, arch="llama")
    write_drafter(tmp_path / "d")
    engine = Engine.load(tmp_path / "t", tmp_path / "d" if drafted else None, max_model_len=256)
    engine.eos_ids = set()
    ids = torch.randint(0, VOCAB, (40,), generator=torch.Generator().manual_seed(2)).tolist()
    chunks, _ = run(engine, ids, 120, static=False)
    chunks_s, _ = run(engine, ids, 120, static=True)
    assert chunks_s == chunks


def test_a_second_request_reuses_the_steps(accepting) -> None:
    spec = Engine.load(*accepting, max_model_len=512)
    ids = spec.tokenizer.apply_chat_template(ACCEPT_CHAT)
    first, _ = run(spec, ids, 50, static=True)
    steps = spec._steps
    again, _ = run(spec, ids, 50, static=True)
    assert again == first and spec._steps is steps


def test_buckets_are_powers_of_two_within_the_cache(accepting) -> None:
    spec = Engine.load(*accepting, max_model_len=300)
    steps = StaticSteps(spec, graphs=False)
    assert [steps.bucket(n) for n in (1, 64, 65, 200)] == [64, 64, 128, 256]
    assert steps.bucket(299) == steps.cache_len == 300 + spec.k + 1


def test_sliding_and_causal_drafter_layers_mask_the_same_keys(tmp_path: Path) -> None:
    """A drafter with a causal 8-token sliding layer next to a full one: one mask per kind."""
    write_target(tmp_path / "t", seed=5)
    write_drafter(
        tmp_path / "d",
        layer_types=["sliding_attention", "full_attention"],
        sliding_window=8,
        use_sliding_window=True,
    )
    engine = Engine.load(tmp_path / "t", tmp_path / "d", max_model_len=256)
    assert {(a.causal, a.window) for a in (layer.self_attn for layer in engine.drafter.layers)} == {
        (True, 8),
        (False, None),
    }
    engine.eos_ids = set()
    ids = torch.randint(0, VOCAB, (30,), generator=torch.Generator().manual_seed(9)).tolist()
    chunks, stats = run(engine, ids, 90, static=False)
    chunks_s, stats_s = run(engine, ids, 90, static=True)
    assert chunks_s == chunks and stats_s.accepted_per_pos == stats.accepted_per_pos


def test_the_compiled_step_commits_the_same_chunks(accepting) -> None:
    """torch.compile of the step (Inductor on the CPU here; the GPU's graphs capture the same
    compiled step): fused norms, cache writes as indexed stores, attention as batched products
    (model.attend) — the same tokens and statistics as the plain loop."""
    spec = Engine.load(*accepting, max_model_len=512)
    spec.eos_ids = set()
    ids = spec.tokenizer.apply_chat_template(ACCEPT_CHAT)
    chunks, stats = run(spec, ids, 40, static=False)
    spec.compile_mode = "default"
    chunks_c, stats_c = run(spec, ids, 40, static=True)
    assert spec._steps is not None and spec._steps._run is not spec._steps._work
    assert chunks_c == chunks and stats_c.accepted_per_pos == stats.accepted_per_pos


def test_an_unknown_compile_mode_is_refused_at_load(accepting, monkeypatch) -> None:
    monkeypatch.setenv("DFLASHCTL_ENGINE_COMPILE", "reduce-overhead")
    with pytest.raises(EngineError, match="not a compile mode this engine runs"):
        Engine.load(*accepting, max_model_len=128)


@pytest.mark.parametrize("vocab", [512, 49152, 151936, 1000])  # the last does not split in 64
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_chunked_greedy_pick_is_argmax_ties_included(vocab: int, dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(vocab)
    logits = torch.randint(0, 5, (16, vocab), generator=g).to(dtype)  # every row full of ties
    assert torch.equal(greedy(logits), logits.argmax(-1))
    assert torch.equal(greedy(logits[3]), logits[3].argmax())  # one row, as the decode step
    logits[7, vocab - 1] = 9  # the maximum alone in the last chunk
    logits[8, :] = -1
    logits[8, 5] = 0  # and alone in the first
    assert greedy(logits)[7].item() == vocab - 1 and greedy(logits)[8].item() == 5
