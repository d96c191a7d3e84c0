"""The bundled engine on a GPU against its weight-read floor, transformers and z-lab's dflash.

Issue 16's method, in one run (random bf16 weights, a Qwen3-8B-shaped target: 36 layers, hidden
4096, 32/8 heads, head_dim 128, MLP 12288, vocab 151936; a 5-layer block-16 drafter; a
1024-token context):

    floor             bytes a step must read (weights, the KV cache it attends, lm_head) /
                      the copy bandwidth measured here (a device-to-device copy, read + write)
    ours, eager       decode (1 token), verify (16 tokens), drafter pass (block 16 + lm_head)
    ours, graphs      the same steps on engine/fast.py's device-resident path, CUDA graphs
    ours, compiled    those steps compiled by torch.compile (--compile MODE; Inductor fuses the
                      norms, RoPE, residuals and cache writes, attention as batched products)
                      and then captured as CUDA graphs
    transformers      Qwen3ForCausalLM with a StaticCache: decode and verify at the same context
    z-lab dflash      its DFlashDraftModel pass, and its dflash_generate per step (if the
                      `dflash` package imports; carry its wheel)
    end to end        our speculative loop (Engine.stream, graphs), time per step, against the
                      sum of its parts

Every time is the median of --reps CUDA-event timings after warm-up; the contenders are measured
in interleaved rounds. `--check-demo TARGET` also compares our greedy text on the GPU (float32,
eager and graphs) with the CPU's recorded in dflashctl/assets/demo/eval.json.

    python3 perf/bench_engine_gpu.py                      # on an H200
    python3 perf/bench_engine_gpu.py --preset tiny        # a smoke run (CPU or GPU)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from dflashctl.drafter.config import build_target_layer_ids  # noqa: E402
from dflashctl.engine.drafter import Drafter, DrafterArgs  # noqa: E402
from dflashctl.engine.fast import StaticSteps, greedy  # noqa: E402
from dflashctl.engine.generate import Engine, SpecStats  # noqa: E402
from dflashctl.engine.model import ModelArgs, Transformer, fuse_projections, rope_cache  # noqa: E402

PRESETS = {
    "qwen3-8b": dict(vocab=151936, hidden=4096, inter=12288, layers=36, heads=32, kv=8, hd=128,
                     d_layers=5, taps=5, block=16, ctx=1024),
    "tiny": dict(vocab=512, hidden=128, inter=256, layers=6, heads=4, kv=2, hd=32, d_layers=2,
                 taps=2, block=8, ctx=64),
}  # fmt: skip


def log(*parts: object) -> None:
    print(*parts, file=sys.stderr, flush=True)


def timer(dev: torch.device):
    """fn, reps -> median milliseconds (CUDA events on a GPU, perf_counter otherwise)."""

    def run(fn, reps: int) -> float:
        for _ in range(3):
            fn()
        times = []
        for _ in range(reps):
            if dev.type == "cuda":
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                fn()
                b.record()
                b.synchronize()
                times.append(a.elapsed_time(b))
            else:
                t0 = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t0) * 1000)
        return statistics.median(times)

    return run


def copy_bandwidth(dev: torch.device, gib: float = 4.0) -> float:
    """Bytes per second of a device-to-device copy (read + write counted)."""
    n = int(gib * 2**30) // 2
    src = torch.randn(n // 2, device=dev, dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    ms = timer(dev)(lambda: dst.copy_(src), 10)
    return 2 * src.numel() * 2 / (ms / 1000)


def randomize(module: torch.nn.Module, seed: int) -> None:
    g = torch.Generator(device=next(module.parameters()).device).manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            if p.ndim == 1:
                p.fill_(1.0)
            else:
                p.normal_(0, 0.02, generator=g)


def tiny_tokenizer(root: Path) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.save(str(root / "tokenizer.json"))
    return root


def build(p: dict[str, Any], dev: torch.device, dtype: torch.dtype, tmp: Path) -> Engine:
    from dflashctl.engine.tokenizer import ChatTokenizer

    args = ModelArgs(vocab_size=p["vocab"], hidden_size=p["hidden"], intermediate_size=p["inter"],
                     num_hidden_layers=p["layers"], num_attention_heads=p["heads"],
                     num_key_value_heads=p["kv"], head_dim=p["hd"], max_position_embeddings=4096,
                     model_type="qwen3", qk_norm=True)  # fmt: skip
    with torch.device(dev):
        target = Transformer(args).to(dtype)
    randomize(target, 0)
    fuse_projections(target)
    ids = build_target_layer_ids(p["layers"], p["taps"])
    cfg = {"hidden_size": p["hidden"], "intermediate_size": p["inter"],
           "num_hidden_layers": p["d_layers"], "num_attention_heads": p["heads"],
           "num_key_value_heads": p["kv"], "head_dim": p["hd"], "vocab_size": p["vocab"],
           "block_size": p["block"], "num_target_layers": p["layers"],
           "dflash_config": {"mask_token_id": 0, "target_layer_ids": ids},
           "layer_types": ["full_attention"] * p["d_layers"]}  # fmt: skip
    with torch.device(dev):
        drafter = Drafter(DrafterArgs.from_hf_config(cfg, p["layers"])).to(dtype)
    randomize(drafter, 1)
    fuse_projections(drafter)
    max_len = p["ctx"] + 256
    for m, hd in ((target, p["hd"]), (drafter, p["hd"])):
        cos, sin = rope_cache(hd, max_len + p["block"] + 1, 1e6)
        m.rope_cos, m.rope_sin = cos.to(dev), sin.to(dev)
    return Engine(target.eval(), drafter.eval(), ChatTokenizer(tiny_tokenizer(tmp)), [],
                  max_len, p["block"] - 1)  # fmt: skip


def floors(engine: Engine, p: dict[str, Any], bw: float, item: int) -> dict[str, float]:
    t_weights = sum(x.numel() for x in engine.target.parameters()) * item
    assert engine.drafter is not None
    d_weights = sum(x.numel() for x in engine.drafter.parameters()) * item
    lm_head = p["vocab"] * p["hidden"] * item
    kv = 2 * p["layers"] * p["kv"] * p["hd"] * p["ctx"] * item
    d_kv = 2 * p["d_layers"] * p["kv"] * p["hd"] * p["ctx"] * item
    return {
        "decode": (t_weights + kv) / bw * 1000,
        "verify": (t_weights + kv) / bw * 1000,
        "drafter": (d_weights + lm_head + d_kv) / bw * 1000,
    }


COMPILED: dict[str, Any] = {}  # name -> the compiled step's graph replay, built in round one


def ours(
    engine: Engine, p: dict[str, Any], dev: torch.device, reps: int, compile_mode: str = ""
) -> dict[str, float]:
    """Eager, graph and compiled-graph timings of our steps at a `ctx`-token context."""
    run = timer(dev)
    k, ctx = engine.k, p["ctx"]
    prompt = torch.randint(1, p["vocab"], (ctx,)).tolist()
    token, taps = engine.prefill(prompt)
    assert engine.drafter is not None
    engine.drafter.write_context(taps, torch.arange(ctx, device=dev))
    res: dict[str, float] = {}
    res["eager_decode"] = run(lambda: engine.decode_one(token, ctx), reps)
    verify = torch.randint(1, p["vocab"], (1, k + 1), device=dev)
    pos = torch.arange(ctx, ctx + k + 1, device=dev)
    res["eager_verify"] = run(lambda: engine.target(verify, pos, taps=engine.taps), reps)
    res["eager_drafter"] = run(lambda: engine.propose(token, ctx), reps)
    res["eager_step"] = run(lambda: engine.speculate(token, ctx), reps)
    steps = StaticSteps(engine)
    steps.prefill(prompt)
    length = steps.bucket(ctx + k + 1)
    mask = steps.k_pos[None, :length] <= pos[:, None]
    start = torch.tensor(ctx, device=dev)
    block = steps.block
    sink = torch.zeros(k + 1, dtype=torch.long, device=dev)

    # each timed step keeps its greedy tokens (as the real step does): a compiled step whose
    # logits went unused would lose its lm_head and every layer the logits alone need
    def verify_only() -> None:
        logits, _ = engine.target(verify, pos, taps=engine.taps, mask=mask)
        sink.copy_(greedy(logits[0]))

    def draft_only() -> None:
        assert engine.drafter is not None
        logits = engine.drafter.forward_static(
            block, start, length, engine.target.embed_tokens, engine.target.lm_head
        )
        sink[:k].copy_(greedy(logits[0]))

    def decode_only() -> None:
        steps._decode(length)
        steps.start.fill_(ctx)

    def step_only() -> None:
        steps._speculate(length)
        steps.start.fill_(ctx)

    for name, fn in (("verify", verify_only), ("drafter", draft_only), ("decode", decode_only),
                     ("step", step_only)):  # fmt: skip
        res[f"graph_{name}"] = run(graphed(fn, dev), reps)
    if compile_mode:
        for name, fn in (("verify", verify_only), ("drafter", draft_only), ("decode", decode_only),
                         ("step", step_only)):  # fmt: skip
            if name not in COMPILED:  # compiled and captured once; later rounds replay it
                t0 = time.perf_counter()
                COMPILED[name] = graphed(torch.compile(fn, mode=compile_mode, dynamic=False), dev)
                log(f"compiled {name} in {time.perf_counter() - t0:.1f} s")
            res[f"compiled_{name}"] = run(COMPILED[name], reps)
    return res


def graphed(fn, dev: torch.device):
    """fn captured as a CUDA graph (replayed), or fn itself off CUDA."""
    if dev.type != "cuda":
        return fn
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()

    def replay(fn=fn) -> None:  # holds fn, and so every tensor the graph reads, alive
        g.replay()

    return replay


def transformers_static(p: dict[str, Any], dev: torch.device, dtype, reps: int) -> dict[str, float]:
    from transformers import Qwen3Config, Qwen3ForCausalLM, StaticCache

    cfg = Qwen3Config(vocab_size=p["vocab"], hidden_size=p["hidden"], intermediate_size=p["inter"],
                      num_hidden_layers=p["layers"], num_attention_heads=p["heads"],
                      num_key_value_heads=p["kv"], head_dim=p["hd"],
                      max_position_embeddings=4096)  # fmt: skip
    with torch.device(dev):
        model = Qwen3ForCausalLM(cfg).to(dtype).eval()
    run = timer(dev)
    ctx, k = p["ctx"], p["block"] - 1
    # room for every timed call past the context: on the H200 (transformers 5.17) a cache of
    # ctx + 64 slots hit a device-side `index_copy_` out-of-bounds assert during these calls,
    # as if each call wrote past the last instead of at `cache_position` (5.25 here writes at
    # `cache_position`); the slots beyond add under 1 % to the bytes a step reads at this size
    cache = StaticCache(config=cfg, max_cache_len=ctx + (reps + 3) * (k + 2) + 64)
    ids = torch.randint(1, p["vocab"], (1, ctx), device=dev)
    with torch.no_grad():
        model(ids, past_key_values=cache, cache_position=torch.arange(ctx, device=dev))
        one = torch.randint(1, p["vocab"], (1, 1), device=dev)
        blk = torch.randint(1, p["vocab"], (1, k + 1), device=dev)
        c1 = torch.tensor([ctx], device=dev)
        cb = torch.arange(ctx, ctx + k + 1, device=dev)
        res = {
            "hf_decode": run(lambda: model(one, past_key_values=cache, cache_position=c1), reps),
            "hf_verify": run(lambda: model(blk, past_key_values=cache, cache_position=cb), reps),
        }
    return res


def zlab(p: dict[str, Any], dev: torch.device, dtype, reps: int) -> dict[str, float]:
    try:
        import dflash.model as dm
        from transformers import DynamicCache, Qwen3Config
    except Exception as e:  # the package is optional here
        log(f"z-lab dflash not measured: {e}")
        return {}
    ids = build_target_layer_ids(p["layers"], p["taps"])
    cfg = Qwen3Config(vocab_size=p["vocab"], hidden_size=p["hidden"], intermediate_size=p["inter"],
                      num_hidden_layers=p["d_layers"], num_attention_heads=p["heads"],
                      num_key_value_heads=p["kv"], head_dim=p["hd"], max_position_embeddings=4096,
                      num_target_layers=p["layers"], block_size=p["block"],
                      dflash_config={"mask_token_id": 0, "target_layer_ids": ids})  # fmt: skip
    with torch.device(dev):
        model = dm.DFlashDraftModel(cfg).to(dtype).eval()
        head = torch.nn.Linear(p["hidden"], p["vocab"], bias=False).to(dtype)
    run = timer(dev)
    ctx, b = p["ctx"], p["block"]
    feats = torch.randn(1, ctx, p["taps"] * p["hidden"], device=dev, dtype=dtype)
    noise = torch.randn(1, b, p["hidden"], device=dev, dtype=dtype)
    cache = DynamicCache()
    with torch.no_grad():
        model(target_hidden=feats, noise_embedding=noise[:, :1],
              position_ids=torch.arange(ctx + 1, device=dev)[None], past_key_values=cache,
              use_cache=True)  # fmt: skip
        dm._crop_to(cache, ctx)
        new = feats[:, :4]  # a typical accepted run's features
        pos = torch.arange(ctx - 4, ctx + b, device=dev)[None]

        def one_pass() -> None:
            h = model(target_hidden=new, noise_embedding=noise, position_ids=pos,
                      past_key_values=cache, use_cache=True)[:, 1 - b :]  # fmt: skip
            model.compute_logits(h, head).argmax(-1)
            dm._crop_to(cache, ctx - 4)

        dm._crop_to(cache, ctx - 4)
        res = {"zlab_drafter": run(one_pass, reps)}
        res |= zlab_steps(model, cfg, p, dev, dtype)
    return res


def zlab_steps(model, cfg, p: dict[str, Any], dev: torch.device, dtype) -> dict[str, float]:
    """z-lab's own loop (dflash_generate: drafter pass, a transformers target verifying the
    block with a DynamicCache, acceptance, crop) timed per step over a 64-token answer."""
    import dflash.model as dm
    from transformers import Qwen3ForCausalLM

    tcfg = type(cfg)(**{**cfg.to_dict(), "num_hidden_layers": p["layers"], "layer_types": None})
    with torch.device(dev):
        target = Qwen3ForCausalLM(tcfg).to(dtype).eval()
    ids = torch.randint(1, p["vocab"], (1, p["ctx"]), device=dev)
    dm.dflash_generate(model, target, ids, 8, None)  # warm-up
    per_step = []
    for _ in range(3):
        got = dm.dflash_generate(model, target, ids, 64, None, return_stats=True)
        decode_s = got.time_per_output_token * got.num_output_tokens
        per_step.append(decode_s * 1000 / len(got.acceptance_lengths))
    del target
    return {"zlab_step": statistics.median(per_step)}


def end_to_end(
    engine: Engine, p: dict[str, Any], dev: torch.device, compile_mode: str = ""
) -> dict[str, float]:
    """The real speculative loop: time per step over a 128-token answer (graphs on CUDA;
    compiled first with `compile_mode`)."""
    engine.static = True
    engine.compile_mode = compile_mode or None
    engine._steps = None
    prompt = torch.randint(1, p["vocab"], (p["ctx"],)).tolist()
    n = 128
    list(engine.stream(prompt, 8))  # warm-up and graph capture
    if dev.type == "cuda":
        torch.cuda.synchronize()
    stats = SpecStats()
    t0 = time.perf_counter()
    chunks = list(engine.stream(prompt, n, stats))
    if dev.type == "cuda":
        torch.cuda.synchronize()
    total = (time.perf_counter() - t0) * 1000
    steps = max(len(chunks) - 1, 1)
    tag = "e2e_compiled" if compile_mode else "e2e"
    return {f"{tag}_ms_per_step": total / steps, f"{tag}_steps": steps}


def check_demo(target: Path, dev: torch.device, compile_mode: str = "") -> dict[str, Any]:
    """Our greedy text on this device (float32; eager, graphs and compiled graphs) against the
    CPU's eval.json."""
    demo = REPO / "dflashctl" / "assets" / "demo"
    rows = json.loads((demo / "eval.json").read_text("utf-8"))["rows"]
    engine = Engine.load(target, demo / "drafter", device=str(dev), dtype=torch.float32)
    same = {"eager": 0, "graphs": 0} | ({"compiled": 0} if compile_mode else {})
    for mode in same:
        engine.static = mode != "eager"
        engine.compile_mode = compile_mode if mode == "compiled" else None
        engine._steps = None
        for r in rows:
            ids = engine.tokenizer.apply_chat_template([{"role": "user", "content": r["prompt"]}])
            text = engine.tokenizer.decode(engine.generate(ids, 192).tokens)
            same[mode] += text == r["text"]
    return {"prompts": len(rows), "same_text": same}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--preset", choices=sorted(PRESETS), default="qwen3-8b")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds per contender")
    ap.add_argument("--check-demo", type=Path, help="the demo target's directory")
    ap.add_argument("--check-demo-only", action="store_true", help="only the --check-demo run")
    ap.add_argument(
        "--compile",
        default="default",
        metavar="MODE",
        help="torch.compile mode of the compiled rows ('' = none)",
    )
    ap.add_argument(
        "--contenders",
        default="zlab,transformers",
        help="which others to measure (comma-separated; '' = none)",
    )
    args = ap.parse_args()
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    p = PRESETS[args.preset]
    out: dict[str, Any] = {"device": torch.cuda.get_device_name() if dev.type == "cuda" else "cpu",
                           "torch": torch.__version__, "preset": args.preset, **p}  # fmt: skip
    if args.check_demo and args.check_demo_only:
        with torch.inference_mode():
            out["demo_check"] = check_demo(args.check_demo, dev, args.compile)
        print(json.dumps(out, indent=1))
        return
    with torch.inference_mode(), tempfile.TemporaryDirectory() as tmp:
        bw = copy_bandwidth(dev) if dev.type == "cuda" else 20e9
        out["copy_bandwidth_GBps"] = bw / 1e9
        engine = build(p, dev, dtype, Path(tmp))
        out["floor_ms"] = floors(engine, p, bw, torch.empty(0, dtype=dtype).element_size())
        log("bandwidth GB/s", round(bw / 1e9), "floors ms", json.dumps(out["floor_ms"]))
        rounds: dict[str, list[float]] = {}
        errors: dict[str, str] = {}
        parts = [("ours", lambda e=engine: ours(e, p, dev, args.reps, args.compile))]
        others = {
            "zlab": lambda: zlab(p, dev, dtype, args.reps),
            "transformers": lambda: transformers_static(p, dev, dtype, args.reps),
        }
        if dev.type == "cuda":  # transformers last: a device-side assert ends the CUDA context
            parts += [(n, f) for n, f in others.items() if n in args.contenders.split(",")]
        for r in range(args.rounds):
            log(f"round {r + 1}/{args.rounds}")
            for name, fn in parts:
                if name in errors:
                    continue
                try:
                    got = fn()
                    if dev.type == "cuda":
                        torch.cuda.synchronize()  # an asynchronous error is this part's
                except Exception as e:  # recorded; the others still run
                    errors[name] = f"{type(e).__name__}: {e}"[:400]
                    log(f"{name} failed: {errors[name]}")
                    continue
                log(f"{name}: " + json.dumps({k: round(v, 3) for k, v in got.items()}))
                for key, ms in got.items():
                    rounds.setdefault(key, []).append(ms)
        out["ms"] = {k: statistics.median(v) for k, v in rounds.items()}
        out["ms_spread"] = {k: [min(v), max(v)] for k, v in rounds.items()}
        for mode in ("", args.compile) if args.compile else ("",):
            try:
                out |= end_to_end(engine, p, dev, mode)
            except Exception as e:  # recorded
                errors[f"end_to_end{mode and '_compiled'}"] = f"{type(e).__name__}: {e}"[:400]
            key = "e2e_compiled_ms_per_step" if mode else "e2e_ms_per_step"
            log("end to end" + (f" ({mode})" if mode else ""), json.dumps(out.get(key)))
        if args.check_demo:
            out["demo_check"] = check_demo(args.check_demo, dev, args.compile)
        out["errors"] = errors
    ms, fl = out["ms"], out["floor_ms"]
    out["x_floor"] = {
        name: ms[key] / fl[kind]
        for name, key, kind in (("graph_decode", "graph_decode", "decode"),
                                ("graph_verify", "graph_verify", "verify"),
                                ("graph_drafter", "graph_drafter", "drafter"),
                                ("eager_decode", "eager_decode", "decode"),
                                ("eager_verify", "eager_verify", "verify"),
                                ("eager_drafter", "eager_drafter", "drafter"),
                                ("compiled_decode", "compiled_decode", "decode"),
                                ("compiled_verify", "compiled_verify", "verify"),
                                ("compiled_drafter", "compiled_drafter", "drafter"))
        if key in ms
    }  # fmt: skip
    # per step, against the others: transformers' verify alone (no drafter) and z-lab's loop
    ours_step = ms.get("compiled_step") or ms.get("graph_step")
    ours_e2e = out.get("e2e_compiled_ms_per_step") or out.get("e2e_ms_per_step")
    out["x_faster"] = {
        name: theirs / mine
        for name, theirs, mine in (("than_hf_verify", ms.get("hf_verify"), ours_step),
                                   ("than_zlab_drafter", ms.get("zlab_drafter"),
                                    ms.get("compiled_drafter") or ms.get("graph_drafter")),
                                   ("than_zlab_step", ms.get("zlab_step"), ours_e2e))
        if theirs and mine
    }  # fmt: skip
    for tag, pre in (("e2e", "graph"), ("e2e_compiled", "compiled")):
        parts_sum = ms.get(f"{pre}_drafter", 0) + ms.get(f"{pre}_verify", 0)
        e2e = out.get(f"{tag}_ms_per_step")
        out[f"{tag}_over_parts"] = e2e / parts_sum if parts_sum and e2e else None
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
