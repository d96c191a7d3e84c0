"""A reduced draft vocabulary (speculators' `draft_vocab_size` + `d2t`, the drafter's own
`lm_head` [N, H]): the drafter proposes only among N target ids, the text stays the target's
greedy text, and a map that cannot be right is an error at load."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from support.tiny_checkpoints import VOCAB

from dflashctl.engine.generate import Engine
from dflashctl.errors import EngineError

pytest.importorskip("transformers")


def reduced(drafter: Path, target: Path, ids: list[int], out: Path, **bad: object) -> Path:
    """A copy of `drafter` that drafts among `ids` (ascending): d2t and the target's rows."""
    shutil.copytree(drafter, out)
    cfg = json.loads((out / "config.json").read_text())
    cfg["draft_vocab_size"] = bad.get("size", len(ids))
    (out / "config.json").write_text(json.dumps(cfg))
    state = load_file(str(out / "model.safetensors"))
    head = load_file(str(target / "model.safetensors"))["lm_head.weight"]
    t = torch.tensor(ids)
    state["d2t"] = bad.get("d2t", t - torch.arange(len(ids)))  # type: ignore[assignment]
    state["lm_head.weight"] = bad.get("head", head[t].clone())  # type: ignore[assignment]
    save_file({k: v.contiguous() for k, v in state.items()}, str(out / "model.safetensors"))
    return out


def test_proposals_stay_inside_the_draft_vocabulary_and_the_text_is_the_targets(
    pair, tmp_path: Path
) -> None:
    target, drafter = pair
    keep = sorted(torch.randperm(VOCAB, generator=torch.Generator().manual_seed(0))[:120].tolist())
    plain = Engine.load(target, None, max_model_len=256)
    full = Engine.load(target, drafter, max_model_len=256)
    small = Engine.load(target, reduced(drafter, target, keep, tmp_path / "d"), max_model_len=256)
    assert small.draft_ids is not None and small.draft_ids.tolist() == keep
    assert small.static is False  # the device step scores the whole vocabulary
    ids = small.tokenizer.apply_chat_template([{"role": "user", "content": "sort a list"}])
    for e in (plain, full, small):
        e.eos_ids = set()
    want = plain.generate(ids, 40).tokens
    assert small.generate(ids, 40).tokens == want == full.generate(ids, 40).tokens
    # the proposals: argmax over the kept rows, mapped back to target ids
    logits = small.draft_logits(ids[-1], len(ids) - 1)  # [K, 120]
    assert logits.shape == (small.k, len(keep))
    proposals = small.propose(ids[-1], len(ids) - 1).tolist()
    assert set(proposals) <= set(keep)
    full_logits = full.draft_logits(ids[-1], len(ids) - 1)[:, keep]  # the same rows, same scores
    assert torch.allclose(logits, full_logits, atol=1e-5)
    assert proposals == [keep[i] for i in full_logits.argmax(-1).tolist()]


def test_a_vocabulary_of_every_token_drafts_as_the_whole_one(pair, tmp_path: Path) -> None:
    target, drafter = pair
    every = list(range(VOCAB - 1))  # N < V: one padding row left out, never the argmax here
    full = Engine.load(target, drafter, max_model_len=256)
    small = Engine.load(target, reduced(drafter, target, every, tmp_path / "d"), max_model_len=256)
    ids = small.tokenizer.apply_chat_template([{"role": "user", "content": "hello"}])
    full.eos_ids = small.eos_ids = set()
    a, b = full.generate(ids, 30), small.generate(ids, 30)
    assert a.tokens == b.tokens and a.stats.accepted_per_pos == b.stats.accepted_per_pos


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"d2t": torch.zeros(5, dtype=torch.int64)}, "needs a d2t map of 120 entries"),
        ({"d2t": torch.full((120,), VOCAB, dtype=torch.int64)}, "outside the target's"),
        ({"d2t": torch.zeros(120, dtype=torch.int64) - torch.arange(120)}, "twice onto one"),
        ({"head": torch.zeros(7, 3)}, "lm_head.weight is [7, 3]"),
    ],
)  # fmt: skip
def test_a_map_that_cannot_be_right_is_an_error(pair, tmp_path: Path, bad, message) -> None:
    target, drafter = pair
    d = reduced(drafter, target, list(range(120)), tmp_path / "d", **bad)
    with pytest.raises(EngineError, match=message.replace("[", r"\[").replace("]", r"\]")):
        Engine.load(target, d, max_model_len=256)


def test_a_vocabulary_file_beside_an_unchanged_drafter_drafts_the_same(
    pair, tmp_path: Path
) -> None:
    """`--draft-vocab FILE` (the demo pair's default on the bundled engine): the drafter's files
    stay the whole vocabulary's, a `d2t` map kept beside them gives the same proposals as the
    speculators-format copy, scored by the target's own rows."""
    target, drafter = pair
    keep = sorted(torch.randperm(VOCAB, generator=torch.Generator().manual_seed(1))[:90].tolist())
    vocab = tmp_path / "draft_vocab.safetensors"
    save_file({"d2t": torch.tensor(keep) - torch.arange(len(keep))}, str(vocab))
    beside = Engine.load(target, drafter, max_model_len=256, draft_vocab=vocab)
    copy = Engine.load(target, reduced(drafter, target, keep, tmp_path / "d"), max_model_len=256)
    assert beside.draft_ids is not None and beside.draft_ids.tolist() == keep
    ids = beside.tokenizer.apply_chat_template([{"role": "user", "content": "sort a list"}])
    beside.eos_ids = copy.eos_ids = set()
    assert (
        beside.propose(ids[-1], len(ids) - 1).tolist()
        == copy.propose(ids[-1], len(ids) - 1).tolist()
    )
    a, b = beside.generate(ids, 30), copy.generate(ids, 30)
    assert a.tokens == b.tokens and a.stats.accepted_per_pos == b.stats.accepted_per_pos


@pytest.mark.parametrize(
    ("tensors", "message"),
    [
        (None, "no such file"),
        ({"t2d": torch.zeros(3, dtype=torch.int64)}, f"below the target's {VOCAB}; found none"),
        ({"d2t": torch.zeros(VOCAB, dtype=torch.int64)}, f"below the target's {VOCAB}"),
        ({"d2t": torch.zeros(2, 2, dtype=torch.int64)}, "found [2, 2]"),
        ({"d2t": torch.tensor([0, VOCAB])}, "outside the target's"),
    ],
)
def test_a_vocabulary_file_that_cannot_be_right_is_an_error(
    pair, tmp_path: Path, tensors, message
) -> None:
    target, drafter = pair
    vocab = tmp_path / "draft_vocab.safetensors"
    if tensors is not None:
        save_file(tensors, str(vocab))
    with pytest.raises(EngineError, match=message.replace("[", r"\[").replace("]", r"\]")):
        Engine.load(target, drafter, max_model_len=256, draft_vocab=vocab)
