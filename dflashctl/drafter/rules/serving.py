"""Rules on how the drafter is about to be served, from the registry's training facts: a
drafter trained without thinking traces beside a target whose chat template thinks by default,
and a serving context longer than the drafter was trained on."""

from __future__ import annotations

from dflashctl.drafter.config import is_int
from dflashctl.drafter.rules.base import Ctx


def check_serving(c: Ctx) -> None:
    _thinking(c)
    _context(c)


def _thinking(c: Ctx) -> None:
    entry = c.entry
    if entry is None or entry.thinking is not False or c.target_thinks is None:
        return
    if c.target_thinks:
        c.add(
            "serving: thinking",
            "warning",
            "the target's chat template thinks by default",
            "thinking off",
            f"{entry.name} was trained without thinking traces: with thinking on, acceptance "
            "falls to about a quarter (60 % → 25 %, z-lab#133); send chat_template_kwargs "
            '{"enable_thinking": false} with each request (vLLM, SGLang), or set it as the '
            "server's default chat template kwargs",
        )
    else:
        c.add("serving: thinking", "ok", "the target's template does not think by default",
              None, f"{entry.name} was trained without thinking traces")  # fmt: skip


def _context(c: Ctx) -> None:
    entry, n = c.entry, c.max_model_len
    if n is None or entry is None or entry.training_context is None:
        return
    trained = entry.training_context
    scaling = c.cfg.get("rope_scaling")
    if n <= trained:
        hint = f"within the {trained}-token contexts {entry.name} was trained on"
        c.add("serving: context", "ok", n, f"≤ {trained}", hint)
        return
    if isinstance(scaling, dict) and is_int(scaling.get("original_max_position_embeddings")):
        hint = (
            f"the drafter's rope_scaling ({scaling.get('rope_type') or scaling.get('type')}) "
            "extends its positions; acceptance past the training context is not published: "
            "watch it by prompt length (dflashctl metrics)"
        )
    else:
        hint = (
            f"{entry.name} was trained on {trained}-token contexts: "
            "past them its RoPE positions are extrapolated and acceptance falls with the "
            "prompt's length (73 % at 3.4 K → 13 % at 16 K in a llama.cpp fork, "
            f"buun-llama-cpp#32); serve --max-model-len {trained} where prompts allow, or "
            "expect speculation to help only on short prompts"
        )
    c.add("serving: context", "warning", n, f"≤ {trained}", hint)
