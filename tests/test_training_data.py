"""The held-out prompts stay out of the demo drafter's training data (training/demo_pair.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from training.demo_pair import EVAL_PROMPTS, leaks_held_out


def test_a_training_prompt_holding_a_held_out_prompt_is_a_leak() -> None:
    # the committed data's own case: a longer request around a held-out one, other punctuation
    assert leaks_held_out(
        "write a Python function that REMOVES duplicates from a list, while preserving order"
    )
    for prompts in EVAL_PROMPTS.values():
        for prompt in prompts:
            assert leaks_held_out(f"Please: {prompt.upper()} Thanks!")


def test_a_near_miss_is_not_a_leak() -> None:
    assert not leaks_held_out("Write a Python function that removes spaces from a string.")
    assert not leaks_held_out("Write a Python function that checks if a number is even.")
    assert not leaks_held_out("")
