"""Where a speculative step's time goes on the CPU, and the acceptance it would need to pay.

One process, one prompt (prefilled once), the demo pair in float32 (or --model/--drafter): the
median of --reps timings of each part of a step at the same position:

    decode        one target token (plain greedy's step)
    verify        the target on the K+1 block (anchor + K drafts), hidden-state taps included
    verify_N      the same on a block of N tokens (2, 4, 8): what a step that verifies only the
                  confident prefix (--draft-confidence) pays
    propose       the drafter's pass over [anchor, mask x K] with the shared lm_head
    lm_head       the drafter's lm_head alone on K+1 rows and on 1 row (the vocabulary's share:
                  the target's, or its rows over a reduced draft vocabulary)
    step          Engine.speculate: propose + verify + acceptance (write_context is separate)

    break-even τ  = step / decode: the mean acceptance length at which speculation only matches
                    plain decoding; 2x needs twice that

    .venv/bin/python perf/bench_cpu_step.py                 # one thread, K = 15
    .venv/bin/python perf/bench_cpu_step.py -k 7 --threads 2
    .venv/bin/python perf/bench_cpu_step.py --shape 8x2048 --draft-vocab \
        dflashctl/assets/demo/draft_vocab.safetensors          # a larger drafter's cost

--shape LAYERSxMLP times a drafter of that many layers and MLP width, built from --drafter's
config with random weights (a step's cost does not depend on the values): what a larger
drafter would cost per draft before one is trained.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from dflashctl.engine.generate import Engine  # noqa: E402
from perf.machine import cpu  # noqa: E402

PROMPT = "Write a Python function that checks whether a number is prime, with a docstring."


def median_ms(fn: Callable[[], object], reps: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def shape_arg(text: str) -> tuple[int, int]:
    """LAYERSxMLP (e.g. 8x2048) -> (layers, mlp); argparse reports anything else (exit 2)."""
    parts = text.lower().split("x")
    if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r} is not LAYERSxMLP (e.g. 8x2048)")
    return int(parts[0]), int(parts[1])


def sized_drafter(src: Path, shape: tuple[int, int], out: Path) -> Path:
    """src's config with LAYERSxMLP layers and MLP width, random weights of src's dtype, in out."""
    from safetensors.torch import load_file, save_file

    layers, mlp = shape
    cfg = json.loads((src / "config.json").read_text())
    old_mlp = cfg["intermediate_size"]
    cfg["num_hidden_layers"], cfg["intermediate_size"] = layers, mlp
    cfg["layer_types"] = [cfg["layer_types"][0]] * layers
    state = load_file(src / "model.safetensors")
    one = {k.split(".", 2)[2]: v for k, v in state.items() if k.startswith("layers.0.")}
    sized = {k: v for k, v in state.items() if not k.startswith("layers.")}
    gen = torch.Generator().manual_seed(0)
    for i in range(layers):
        for name, v in one.items():
            dims = [mlp if name.startswith("mlp.") and d == old_mlp else d for d in v.shape]
            w = torch.randn(dims, generator=gen) * 0.02 if len(dims) == 2 else torch.ones(dims)
            sized[f"layers.{i}.{name}"] = w.to(v.dtype)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(cfg, indent=1))
    save_file(sized, out / "model.safetensors")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--model", type=Path, help="target (default: the demo pair's, set up once)")
    ap.add_argument("--drafter", type=Path, default=REPO / "dflashctl/assets/demo/drafter")
    ap.add_argument("-k", "--num-speculative-tokens", type=int, help="K (default: block - 1)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--draft-vocab", type=Path, help="a reduced draft vocabulary (d2t) to use")
    ap.add_argument(
        "--shape", type=shape_arg, help="LAYERSxMLP: time a drafter of this shape (random weights)"
    )
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.model is None:
        from dflashctl.demo_target import ensure

        args.model = ensure()
    if args.shape:
        tmp = tempfile.TemporaryDirectory()  # removed when main returns
        args.drafter = sized_drafter(args.drafter, args.shape, Path(tmp.name))
    eng = Engine.load(
        args.model,
        args.drafter,
        max_model_len=1024,
        num_speculative_tokens=args.num_speculative_tokens,
        draft_vocab=args.draft_vocab,
    )
    assert eng.drafter is not None
    ids = eng.tokenizer.apply_chat_template([{"role": "user", "content": PROMPT}])
    k, r = eng.k, args.reps
    with torch.inference_mode():
        tok, taps = eng.prefill(ids)
        pos = len(ids)
        eng.drafter.write_context(taps, eng._positions(0, pos))
        block = torch.full((1, k + 1), tok)
        rows = torch.zeros(1, k + 1, eng.target.args.hidden_size)
        head = eng.draft_head if eng.draft_head is not None else eng.target.lm_head
        ms = {
            "decode": median_ms(lambda: eng.decode_one(tok, pos), r),
            "verify": median_ms(
                lambda: eng.target(block, eng._positions(pos, k + 1), taps=eng.taps), r
            ),
            **{
                f"verify_{n}": median_ms(
                    lambda n=n: eng.target(block[:, :n], eng._positions(pos, n), taps=eng.taps), r
                )
                for n in (2, 4, 8)
                if n < k + 1
            },
            "propose": median_ms(lambda: eng.propose(tok, pos), r),
            "lm_head_block": median_ms(lambda: head(rows), r),
            "lm_head_1": median_ms(lambda: head(rows[:, :1]), r),
            "step": median_ms(lambda: eng.speculate(tok, pos), r),
        }
    out = {
        "cpu": cpu(),
        "k": k,
        "threads": args.threads,
        "drafter": {
            "shape": f"{eng.drafter.args.num_hidden_layers}x{eng.drafter.args.intermediate_size}",
            "weights": "random" if args.shape else str(args.drafter),
            "draft_vocab": str(args.draft_vocab) if args.draft_vocab else None,
        },
        "prompt_tokens": len(ids),
        "ms": {name: round(v, 2) for name, v in ms.items()},
        "break_even_tau": round(ms["step"] / ms["decode"], 2),
        "tau_for_2x": round(2 * ms["step"] / ms["decode"], 2),
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
