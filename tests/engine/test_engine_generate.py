"""Speculative decoding is token-for-token identical to plain greedy decoding (fp32).

Two drafters: the real DFlash drafter with random weights (its proposals are almost always
rejected, which exercises the bonus-only path and the rollback of K rejected slots per step), and
an *oracle* drafter: a subclass of the engine whose `propose` returns the true greedy continuation
with its first wrong token at a chosen slot, cycling through every slot and "all right". The
oracle is a test drafter plugged in at the engine's proposal seam, not a mock of the verifier:
acceptance, bonus tokens, cache rollback, stop handling and statistics all run for real.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest
import torch
from support.tiny_checkpoints import (
    ACCEPT_CHAT,
    VOCAB,
    write_accepting_pair,
    write_drafter,
)

from dflashctl.engine.generate import Engine
from dflashctl.errors import EngineError

pytest.importorskip("transformers")


class OracleEngine(Engine):
    """Proposes `truth` (the plain greedy continuation of the current prompt) with the first
    wrong token at slot `next(cuts)` (K = all right); records the cut used at each step."""

    truth: list[int]
    prompt_len: int
    cuts: itertools.cycle[int]
    used: list[int]

    def draft_logits(self, anchor: int, start: int) -> torch.Tensor:
        """[K, VOCAB]: a sure logit for each right proposal; the wrong one at the cut is the
        argmax of an almost flat row (the drafter unsure of it), the slots after it sure."""
        at = start + 1 - self.prompt_len  # index in `truth` of the token at start + 1
        drafts = self.truth[at : at + self.k]
        assert len(drafts) == self.k, "the test's truth is too short"
        cut = next(self.cuts)
        self.used.append(cut)
        logits = torch.zeros(self.k, VOCAB)
        for i, t in enumerate(drafts):
            if i == cut:
                logits[i, (t + 1) % VOCAB] = 0.5
            else:
                logits[i, t] = 30.0
        return logits


@pytest.fixture(scope="module")
def plain(pair) -> Engine:
    return Engine.load(pair[0], None, max_model_len=256)


@pytest.fixture(scope="module")
def spec(pair) -> Engine:
    return Engine.load(pair[0], pair[1], max_model_len=256)


@pytest.fixture(scope="module")
def oracle(pair) -> OracleEngine:
    engine = Engine.load(pair[0], pair[1], max_model_len=256)
    engine.__class__ = OracleEngine
    assert isinstance(engine, OracleEngine)
    return engine


def prompts() -> list[list[int]]:
    g = torch.Generator().manual_seed(8)
    return [torch.randint(0, 256, (n,), generator=g).tolist() for n in (1, 7, 31)]


def run_oracle(oracle: OracleEngine, plain: Engine, ids: list[int], n: int, cuts: list[int]):
    eos, plain.eos_ids = plain.eos_ids, set()
    oracle.truth = plain.generate(ids, n + oracle.k + 1).tokens  # past any eos
    plain.eos_ids = eos
    oracle.prompt_len, oracle.cuts, oracle.used = len(ids), itertools.cycle(cuts), []
    return oracle.generate(ids, n)


@pytest.mark.parametrize("max_tokens", [1, 2, 5, 6, 23, 60])
def test_random_drafter_output_equals_plain_greedy(spec, plain, max_tokens: int) -> None:
    spec.eos_ids = plain.eos_ids = set()
    for ids in prompts():
        want = plain.generate(ids, max_tokens)
        got = spec.generate(ids, max_tokens)
        assert got.tokens == want.tokens
        assert len(got.tokens) == max_tokens and got.finish_reason == "length"
        s = got.stats
        assert s.num_draft_tokens == spec.k * s.num_drafts
        assert 0 <= s.num_accepted_tokens <= s.num_draft_tokens
        assert s.num_accepted_tokens == sum(s.accepted_per_pos)
        # each step commits accepted + 1 tokens; the first token comes from the prefill
        assert s.num_drafts + s.num_accepted_tokens >= max_tokens - 1


def test_oracle_drafter_every_acceptance_length(oracle, plain) -> None:
    oracle.eos_ids = plain.eos_ids = set()
    k = oracle.k
    cuts = [0, 3, k, 1, k, 2, k, k, 0, 0]
    for ids in prompts():
        n = 80
        got = run_oracle(oracle, plain, ids, n, cuts)
        assert got.tokens == plain.generate(ids, n).tokens
        s = got.stats
        assert s.num_drafts == len(oracle.used)
        assert s.num_accepted_tokens == sum(oracle.used)
        assert s.accepted_per_pos == [sum(c > i for c in oracle.used) for i in range(k)]
        assert s.mean_acceptance_length == pytest.approx(1 + sum(oracle.used) / len(oracle.used))
        assert s.mean_acceptance_length > 2  # the oracle is usually right


def test_draft_confidence_verifies_the_confident_prefix_and_keeps_the_text(oracle, plain) -> None:
    """Engine.draft_confidence: each step verifies the proposals before the first unsure one
    (at least one); the text is the target's greedy text; the statistics count what was
    verified (vLLM's num_draft_tokens), so τ is unchanged when the cut is where it is wrong."""
    oracle.eos_ids = plain.eos_ids = set()
    k = oracle.k
    cuts = [0, 3, k, 1, k, 2]
    oracle.draft_confidence = 0.5
    try:
        for ids in prompts():
            got = run_oracle(oracle, plain, ids, 60, cuts)
            assert got.tokens == plain.generate(ids, 60).tokens
            s = got.stats
            verified = [max(1, c) if c < k else k for c in oracle.used]
            assert s.num_draft_tokens == sum(verified) < k * s.num_drafts
            assert s.num_accepted_tokens == sum(oracle.used)
    finally:
        oracle.draft_confidence = 0.0


def test_all_accepted_overshooting_max_tokens_is_cut(oracle, plain) -> None:
    oracle.eos_ids = plain.eos_ids = set()
    ids = prompts()[1]
    for n in range(1, 2 * oracle.k + 3):
        got = run_oracle(oracle, plain, ids, n, [oracle.k])
        assert got.tokens == plain.generate(ids, n).tokens
        assert len(got.tokens) == n and got.finish_reason == "length"


def test_eos_inside_an_accepted_block_stops_there(oracle, spec, plain) -> None:
    ids = prompts()[2]
    plain.eos_ids = oracle.eos_ids = spec.eos_ids = set()
    free = plain.generate(ids, 40).tokens
    for i in (0, 3, 9, 17):  # eos = a token first generated at index i
        eos = free[i]
        if eos in free[:i]:
            continue
        plain.eos_ids = oracle.eos_ids = spec.eos_ids = {eos}
        want = plain.generate(ids, 40)
        assert want.tokens == free[: i + 1] and want.finish_reason == "stop"
        for cuts in ([oracle.k], [2, oracle.k, 0]):
            got = run_oracle(oracle, plain, ids, 40, cuts)
            assert (got.tokens, got.finish_reason) == (want.tokens, "stop")
        got = spec.generate(ids, 40)
        assert (got.tokens, got.finish_reason) == (want.tokens, "stop")
        plain.eos_ids = oracle.eos_ids = spec.eos_ids = set()


def test_real_drafter_that_is_sometimes_right(tmp_path: Path) -> None:
    """Through the real drafter: rejected blocks, then whole blocks accepted (the bonus token
    each time), and partial blocks where the target enters its repetition."""
    t_dir, d_dir = write_accepting_pair(tmp_path)
    plain = Engine.load(t_dir, None, max_model_len=512)
    spec = Engine.load(t_dir, d_dir, max_model_len=512)
    plain.eos_ids = spec.eos_ids = set()
    ids = spec.tokenizer.apply_chat_template(ACCEPT_CHAT)
    for n in (150, 151, 153):
        got = spec.generate(ids, n)
        assert got.tokens == plain.generate(ids, n).tokens
        s = got.stats
        assert s.accepted_per_pos[-1] > 0 and s.accepted_per_pos[0] < s.num_drafts
        assert s.mean_acceptance_length > 1.5


def test_stream_chunks_are_the_committed_steps(oracle, plain) -> None:
    oracle.eos_ids = plain.eos_ids = set()
    ids = prompts()[1]
    oracle.truth = plain.generate(ids, 50).tokens
    oracle.prompt_len, oracle.cuts, oracle.used = len(ids), itertools.cycle([1, oracle.k]), []
    chunks = list(oracle.stream(ids, 30))
    assert [t for c in chunks for t in c] == oracle.truth[:30]
    assert len(chunks[0]) == 1  # the prefill's token
    assert [len(c) for c in chunks[1:-1]] == [c + 1 for c in oracle.used[: len(chunks) - 2]]


def test_context_limit_and_empty_prompt(spec) -> None:
    with pytest.raises(EngineError, match="exceeds the context"):
        spec.generate([1] * 200, spec.max_model_len - 199)
    with pytest.raises(EngineError, match="empty prompt"):
        spec.generate([], 5)
    # exactly at the limit works, with the verify slack past it
    spec.eos_ids = set()
    got = spec.generate([1] * 200, spec.max_model_len - 200)
    assert len(got.tokens) == spec.max_model_len - 200


def test_short_drafter_rope_table_at_the_context_limit(pair, plain, tmp_path: Path) -> None:
    """A drafter config with a smaller max_position_embeddings than the target's still drafts
    up to the target's context (RoPE is defined at every position; vLLM serves the target's
    max_model_len); the last verify steps reach K positions past the limit."""
    write_drafter(tmp_path / "d", seed=6, max_position_embeddings=64)
    spec = Engine.load(pair[0], tmp_path / "d", max_model_len=100)
    assert spec.max_model_len == 100
    spec.eos_ids = plain.eos_ids = set()
    ids = prompts()[2]
    got = spec.generate(ids, 100 - len(ids))
    assert got.tokens == plain.generate(ids, 100 - len(ids)).tokens


def test_demo_pair_speculation_is_lossless_and_accepts() -> None:
    """The shipped pair: SmolLM2-135M-Instruct (Llama) and its DFlash drafter (block 16)."""
    from support.pairs import demo_pair

    target, drafter = demo_pair()
    plain = Engine.load(target, None, max_model_len=512)
    spec = Engine.load(target, drafter, max_model_len=512)
    assert spec.target.args.model_type == "llama" and spec.k == 15
    msgs = [{"role": "user", "content": "Write a Python function is_prime(n)."}]
    ids = spec.tokenizer.apply_chat_template(msgs)
    got, want = spec.generate(ids, 64), plain.generate(ids, 64)
    assert got.tokens == want.tokens
    assert "def is_prime" in spec.tokenizer.decode(got.tokens)
    assert got.stats.num_accepted_tokens > 0


def test_bfloat16_runs_both_modes(pair) -> None:
    plain = Engine.load(pair[0], None, dtype=torch.bfloat16, max_model_len=128)
    spec = Engine.load(pair[0], pair[1], dtype=torch.bfloat16, max_model_len=128)
    plain.eos_ids = spec.eos_ids = set()
    ids = prompts()[1]
    a, b = plain.generate(ids, 24), spec.generate(ids, 24)
    assert len(a.tokens) == len(b.tokens) == 24 and a.tokens[0] == b.tokens[0]
    assert spec.target.lm_head.weight.dtype == spec.drafter.ctx_k[0].dtype == torch.bfloat16


ZLAB_GENERATE = textwrap.dedent(
    """
    import json, sys, time, torch
    import dflash.model as dm
    from transformers import Qwen3ForCausalLM
    dm._cuda_time = time.perf_counter  # its step timer syncs CUDA; there is none here
    root, ids, n = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
    target = Qwen3ForCausalLM.from_pretrained(root + "/target", dtype=torch.float32).eval()
    drafter = dm.DFlashDraftModel.from_pretrained(root + "/drafter", dtype=torch.float32).eval()
    out = dm.dflash_generate(drafter, target, torch.tensor([ids]), n, None, return_stats=True)
    print(json.dumps({"tokens": out.output_ids[0, len(ids):].tolist(),
                      "steps": [int(a) for a in out.acceptance_lengths]}))
    """
)


def test_zlab_dflash_generate_accepts_the_same_tokens_per_step(tmp_path: Path) -> None:
    """z-lab's `dflash_generate` (PyPI `dflash`, own environment: DFLASH_REFERENCE_PYTHON) on a
    pair whose drafter is sometimes right: the same tokens and the same tokens committed per
    verify step (its last step counts min(accepted + 1, tokens left), as our last chunk)."""
    python = os.environ.get("DFLASH_REFERENCE_PYTHON")
    if not python or not Path(python).exists():
        pytest.skip("set DFLASH_REFERENCE_PYTHON to a python with z-lab's `dflash` installed")
    t_dir, d_dir = write_accepting_pair(tmp_path)
    spec = Engine.load(t_dir, d_dir, max_model_len=512)
    spec.eos_ids = set()
    ids = spec.tokenizer.apply_chat_template(ACCEPT_CHAT)
    n = 150
    chunks = list(spec.stream(ids, n))
    run = subprocess.run(
        [python, "-c", ZLAB_GENERATE, str(tmp_path), json.dumps(ids), str(n)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    theirs = json.loads(run.stdout.strip().splitlines()[-1])
    assert [t for c in chunks for t in c] == theirs["tokens"]
    assert [len(c) for c in chunks[1:]] == theirs["steps"]
    assert max(theirs["steps"]) == spec.k + 1  # whole blocks were accepted
