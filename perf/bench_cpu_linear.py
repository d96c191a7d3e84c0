"""Would the target's linear layers cost less on this CPU with their weights stored transposed?

A verify of 2 tokens costs 1.7-1.9 decodes on an AVX2 CPU (perf/bench_cpu_step.py): MKL's
matrix product on 2 rows of `x @ W.T` costs twice its product on 1. This measures, in one
process, the target's decode and its verify of N tokens with the engine's layout (`F.linear`,
W [out, in]) and with every target linear layer computing `x @ Wt` on a transposed copy
(Wt [in, out]); then whether the greedy text stays the same: plain decoding of the first
--prompts held-out prompts in both layouts, token for token (the order of float additions
changes, so a near-tie may flip). An experiment, not the engine: the engine is unchanged.

    .venv/bin/python perf/bench_cpu_linear.py [--reps 30] [--prompts 12] [--tokens 64]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from torch import nn

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from dflashctl.engine.generate import Engine  # noqa: E402
from perf.bench_cpu_step import median_ms  # noqa: E402
from perf.machine import cpu  # noqa: E402

PROMPT = "Write a Python function that checks whether a number is prime, with a docstring."


class TransposedLinear(nn.Module):
    """`x @ Wt` with Wt [in, out] a contiguous copy of the layer's weight (no bias: SmolLM2's)."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        assert linear.bias is None
        self.wt = linear.weight.detach().t().contiguous()  # [in, out]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.wt


def transpose_linears(model: nn.Module) -> int:
    """Swap every nn.Linear under `model` for a TransposedLinear; returns how many."""
    swaps = [
        (parent, name, child)
        for parent in model.modules()
        for name, child in parent.named_children()
        if isinstance(child, nn.Linear)
    ]
    for parent, name, child in swaps:
        setattr(parent, name, TransposedLinear(child))
    return len(swaps)


def timings(eng: Engine, reps: int) -> dict[str, float]:
    ids = eng.tokenizer.apply_chat_template([{"role": "user", "content": PROMPT}])
    with torch.inference_mode():
        tok, _ = eng.prefill(ids)
        pos = len(ids)
        block = torch.full((1, 16), tok)
        out = {"decode": median_ms(lambda: eng.decode_one(tok, pos), reps)}
        for n in (2, 4, 8, 16):
            out[f"verify_{n}"] = median_ms(
                lambda n=n: eng.target(block[:, :n], eng._positions(pos, n), taps=eng.taps), reps
            )
    return {k: round(v, 2) for k, v in out.items()}


def greedy(eng: Engine, prompts: list[str], tokens: int) -> list[list[int]]:
    return [
        eng.generate(
            eng.tokenizer.apply_chat_template([{"role": "user", "content": p}]), tokens
        ).tokens
        for p in prompts
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--prompts", type=int, default=12)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from dflashctl.demo_target import ensure

    eng = Engine.load(ensure(), None, max_model_len=1024)
    prompts = json.loads((REPO / "dflashctl/assets/demo/eval_prompts.json").read_text("utf-8"))
    texts = [p if isinstance(p, str) else p["prompt"] for p in prompts][: args.prompts]
    before = timings(eng, args.reps)
    plain = greedy(eng, texts, args.tokens)
    swapped = transpose_linears(eng.target)
    after = timings(eng, args.reps)
    again = greedy(eng, texts, args.tokens)
    same = sum(a == b for a, b in zip(plain, again, strict=True))
    out = {
        "cpu": cpu(),
        "threads": args.threads,
        "linear_layers_transposed": swapped,
        "ms_engine_layout": before,
        "ms_transposed": after,
        "ratio_transposed": {k: round(after[k] / before[k], 2) for k in before},
        "verify_2_in_decodes": {
            "engine_layout": round(before["verify_2"] / before["decode"], 2),
            "transposed": round(after["verify_2"] / after["decode"], 2),
        },
        "same_greedy_text": f"{same} / {len(texts)} prompts, {args.tokens} tokens",
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
