"""Targets the engine does not implement natively run through transformers (engine/reference.py).

Tiny random checkpoints written by transformers itself: a Qwen3-MoE (the kind of target of the
field story's MoE drafters) and a Mistral. The engine must say it runs them on the reference
path, tap the same hidden states transformers computes (the final pre-norm state included),
write transformers' greedy text, and stay lossless with a DFlash drafter on top.
"""

from __future__ import annotations

import pytest
import torch
from support.tiny_checkpoints import VOCAB, write_drafter, write_target

from dflashctl.engine.generate import Engine
from dflashctl.engine.reference import ReferenceTarget

pytest.importorskip("transformers")

ARCHS = {
    "qwen3_moe": {
        "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
        "decoder_sparse_step": 1, "mlp_only_layers": [], "norm_topk_prob": True,
    },
    "mistral": {"sliding_window": None},
}  # fmt: skip


@pytest.fixture(scope="module", params=sorted(ARCHS))
def pair(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp(request.param)
    hf = write_target(root / "target", seed=3, arch=request.param, **ARCHS[request.param])
    write_drafter(root / "drafter")
    return root / "target", root / "drafter", hf


def prompt(n: int, seed: int = 7) -> list[int]:
    return torch.randint(0, VOCAB, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def test_the_engine_says_it_runs_the_reference_path(pair) -> None:
    target, _, hf = pair
    engine = Engine.load(target, None, max_model_len=128)
    assert isinstance(engine.target, ReferenceTarget)
    assert engine.target_path.startswith("transformers reference (" + type(hf).__name__)


@torch.no_grad()
def test_taps_are_transformers_hidden_states(pair) -> None:
    target, _, hf = pair
    ref = ReferenceTarget.load(target, {"num_hidden_layers": 3}, dtype=torch.float32, device="cpu")
    ref.setup_caches(64)
    ids = torch.tensor([prompt(20)])
    want = hf(ids, output_hidden_states=True)
    logits, taps = ref(ids, torch.arange(20), taps=(0, 1, 2, 3))
    torch.testing.assert_close(logits, want.logits)
    for i in range(3):
        torch.testing.assert_close(taps[i], want.hidden_states[i])
    # index 3 (= the number of layers) is the final state before the norm
    torch.testing.assert_close(hf.model.norm(taps[3]), want.hidden_states[3])


def test_greedy_text_is_transformers_and_speculation_is_lossless(pair) -> None:
    target, drafter, hf = pair
    plain = Engine.load(target, None, max_model_len=128)
    spec = Engine.load(target, drafter, max_model_len=128)
    plain.eos_ids = spec.eos_ids = set()
    ids = prompt(12, seed=5)
    want = hf.generate(torch.tensor([ids]), max_new_tokens=20, do_sample=False,
                       eos_token_id=None, pad_token_id=0)[0, 12:].tolist()  # fmt: skip
    got = plain.generate(ids, 20)
    assert got.tokens == want
    drafted = spec.generate(ids, 20)
    assert drafted.tokens == want and drafted.stats.num_drafts > 0
