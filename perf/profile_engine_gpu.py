"""Where the bundled engine's GPU steps spend their time, kernel by kernel (issue 34's first run).

The same shapes as perf/bench_engine_gpu.py (a Qwen3-8B-shaped bf16 target at a 1024-token
context, a 5-layer block-16 drafter). For each step — decode (1 token), verify (16 tokens),
drafter pass — two views:

    kernels      (GPU only) torch.profiler over --reps CUDA-graph replays: each kernel's
                 time per step, the share of the step, and the step's kernel sum against
                 its replay time
    ops          one eager call with shapes recorded: each (op, input shapes) row's device
                 time per call (CPU time off a GPU); for a matrix product with a weight
                 operand, the bytes it must read (the weight) and the bandwidth it reached
                 against the copy bandwidth

    python3 perf/profile_engine_gpu.py > profile.json            # on an H100 or H200
    python3 perf/profile_engine_gpu.py --preset tiny             # a smoke run on the CPU
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_engine_gpu import PRESETS, build, copy_bandwidth, floors, graphed, timer

from dflashctl.engine.fast import StaticSteps


def device_us(evt: Any) -> float:
    """Total device time of a profiler row in microseconds (the attribute moved across versions)."""
    for name in ("device_time_total", "cuda_time_total", "self_device_time_total"):
        if hasattr(evt, name):
            return float(getattr(evt, name))
    return 0.0


def kernels(fn: Callable[[], None], reps: int, dev: torch.device) -> list[dict[str, Any]]:
    """Each kernel's device time per call of fn (fn already warm), largest first."""
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    with profile(activities=acts) as prof:
        for _ in range(reps):
            fn()
        if dev.type == "cuda":
            torch.cuda.synchronize()
    per: dict[str, list[float]] = defaultdict(list)
    for e in prof.events():
        if dev.type == "cuda" and getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA:
            per[e.name].append(e.device_time if hasattr(e, "device_time") else e.cuda_time)
    rows = [
        {"kernel": name[:160], "calls_per_step": len(t) / reps, "us_per_step": sum(t) / reps}
        for name, t in per.items()
    ]
    return sorted(rows, key=lambda r: -r["us_per_step"])


def ops(fn: Callable[[], None], dev: torch.device, bw: float, item: int) -> list[dict[str, Any]]:
    """One eager call of fn: device time per (op, shapes), and a matmul's weight-read bandwidth."""
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    with profile(activities=acts, record_shapes=True) as prof:
        fn()
        if dev.type == "cuda":
            torch.cuda.synchronize()
    rows = []
    for evt in prof.key_averages(group_by_input_shape=True):
        if not evt.key.startswith("aten::") or evt.key in (
            "aten::empty",
            "aten::to",
            "aten::copy_",
        ):
            continue
        total = device_us(evt) if dev.type == "cuda" else float(evt.self_cpu_time_total)
        us = total / max(evt.count, 1)
        if us <= 0:
            continue
        row: dict[str, Any] = {"op": evt.key, "shapes": str(evt.input_shapes)[:200],
                               "calls": evt.count, "us_per_call": us}  # fmt: skip
        shapes = evt.input_shapes or []
        if (
            evt.key in ("aten::mm", "aten::linear", "aten::addmm", "aten::matmul")
            and len(shapes) >= 2
        ):
            w = shapes[1] if evt.key != "aten::addmm" else shapes[2]
            if len(w) == 2:
                weight_bytes = w[0] * w[1] * item
                row["weight_MB"] = weight_bytes / 1e6
                row["x_copy_bw"] = (weight_bytes / bw * 1e6) / us  # 1.0 = at the copy bandwidth
        rows.append(row)
    return sorted(rows, key=lambda r: -r["us_per_call"] * r["calls"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--preset", choices=sorted(PRESETS), default="qwen3-8b")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--top", type=int, default=30, help="kernels and ops kept per step")
    ap.add_argument(
        "--compile",
        default="",
        metavar="MODE",
        help="profile the steps compiled by torch.compile in this mode",
    )
    args = ap.parse_args()
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    item = torch.empty(0, dtype=dtype).element_size()
    p = PRESETS[args.preset]
    out: dict[str, Any] = {"device": torch.cuda.get_device_name() if dev.type == "cuda" else "cpu",
                           "torch": torch.__version__, "preset": args.preset,
                           "compile": args.compile or None}  # fmt: skip
    with torch.inference_mode(), tempfile.TemporaryDirectory() as tmp:
        bw = copy_bandwidth(dev) if dev.type == "cuda" else 20e9
        engine = build(p, dev, dtype, Path(tmp))
        out["copy_bandwidth_GBps"] = bw / 1e9
        out["floor_ms"] = floors(engine, p, bw, item)
        ctx, k = p["ctx"], engine.k
        prompt = torch.randint(1, p["vocab"], (ctx,)).tolist()
        steps = StaticSteps(engine)
        steps.prefill(prompt)
        length = steps.bucket(ctx + k + 1)
        pos = torch.arange(ctx, ctx + k + 1, device=dev)
        mask = steps.k_pos[None, :length] <= pos[:, None]
        verify_ids = torch.randint(1, p["vocab"], (1, k + 1), device=dev)
        start = torch.tensor(ctx, device=dev)
        assert engine.drafter is not None
        drafter = engine.drafter

        def decode() -> None:
            steps._decode(length)
            steps.start.fill_(ctx)

        sink = torch.zeros(k + 1, dtype=torch.long, device=dev)

        # each step keeps its greedy tokens, as the real one does (compiled, unused logits
        # would lose the lm_head and the layers only they need)
        def verify() -> None:
            logits, _ = engine.target(verify_ids, pos, taps=engine.taps, mask=mask)
            sink.copy_(logits[0].argmax(-1))

        def draft() -> None:
            emb, head = engine.target.embed_tokens, engine.target.lm_head
            logits = drafter.forward_static(steps.block, start, length, emb, head)
            sink[:k].copy_(logits[0].argmax(-1))

        run = timer(dev)
        for name, fn in (("decode", decode), ("verify", verify), ("drafter", draft)):
            step = torch.compile(fn, mode=args.compile, dynamic=False) if args.compile else fn
            replay = graphed(step, dev)
            ms = run(replay, 20)
            ks = kernels(replay, args.reps, dev)
            total_us = sum(r["us_per_step"] for r in ks)
            for r in ks:
                r["share"] = r["us_per_step"] / total_us if total_us else 0.0
            fl = out["floor_ms"][name]
            out[name] = {
                "replay_ms": ms,
                "x_floor": ms / fl,
                "kernel_sum_ms": total_us / 1000,
                "kernels": ks[: args.top],
                "ops_eager": [] if args.compile else ops(fn, dev, bw, item)[: args.top],
            }
            print(f"{name}: {ms:.3f} ms ({ms / fl:.2f}x floor), kernels {total_us / 1000:.3f} ms",
                  file=sys.stderr, flush=True)  # fmt: skip
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
