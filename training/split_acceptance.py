"""A drafter's acceptance on prompts like its training data against the 36 held-out ones.

The held-out prompts (training/demo_pair.py's EVAL_PROMPTS) were written for this project; the
training prompts were written by the target itself. If the drafter accepts far more on
training-like prompts it has never seen than on the held-out ones, the held-out τ is held down
by how unlike the training prompts they are (a data-mix question), not by what the drafter can
learn. The training-like prompts here are validation rows (every 100th answer by row number,
which training/demo_pair.py holds out) from row `--from-row` on — by default the rows answered
for the thirteenth run (rounds 3 and 4), which no run before had and the thirteenth held out —
the first `--per-kind` of each held-out kind. Both sets run on this machine in float32,
greedy, the whole vocabulary, K = 15.

    .venv/bin/python training/split_acceptance.py --drafter DIR [--per-kind 12] [--tokens 96]
"""

from __future__ import annotations

import argparse
import json
import lzma
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from training.demo_pair import EVAL_PROMPTS, Sizes, run_prompts  # noqa: E402

DATA = REPO / "training" / "data"


def validation_prompts(from_row: int, per_kind: int) -> dict[str, list[str]]:
    """The first `per_kind` validation rows at or after `from_row` of each held-out kind."""
    with lzma.open(DATA / "prompts.json.xz") as fh:
        prompts = json.load(fh)["prompts"]
    picked: dict[str, list[str]] = {kind: [] for kind in EVAL_PROMPTS}
    for path in sorted((DATA / "answers").glob("answers-*.pt.xz")):
        first = int(path.name.split("-")[1].split(".")[0])
        with lzma.open(path) as fh:
            data = torch.load(fh)
        for j, (kind, index) in enumerate(zip(data["kinds"], data["prompt_index"], strict=True)):
            row = first + j
            if row < from_row or row % 100 or kind not in picked or len(picked[kind]) >= per_kind:
                continue
            picked[kind].append(prompts[index]["prompt"])
        if all(len(v) >= per_kind for v in picked.values()):
            break
    return picked


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--drafter", type=Path, required=True)
    ap.add_argument("--per-kind", type=int, default=12)
    ap.add_argument("--tokens", type=int, default=96, help="greedy tokens per prompt")
    ap.add_argument("--from-row", type=int, default=335872)
    args = ap.parse_args()
    from dflashctl.demo_target import ensure
    from dflashctl.engine.generate import Engine

    torch.set_num_threads(1)
    engine = Engine.load(ensure(), args.drafter, device="cpu", dtype=torch.float32)
    sz = Sizes(eval_tokens=args.tokens)
    sets = {
        "validation": validation_prompts(args.from_row, args.per_kind),
        "held-out": {k: v[: args.per_kind] for k, v in EVAL_PROMPTS.items()},
    }
    print(f"{'prompts':<12}{'kind':<13}{'tau':>6}{'pos 1':>7}{'pos 2':>7}{'drafts':>8}")
    for name, by_kind in sets.items():
        res = run_prompts(engine, sz, by_kind)
        for kind, r in [("all", res), *res["by_kind"].items()]:
            pos = r["per_position"]
            print(f"{name:<12}{kind:<13}{r['mean_acceptance_length']:>6.2f}{pos[0]:>7.2f}"
                  f"{pos[1]:>7.2f}{r['drafts']:>8}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
