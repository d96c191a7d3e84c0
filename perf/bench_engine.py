"""Benchmark the bundled engine on CPU: speculative vs plain decode speed, and the server's RSS.

In one run (SPEC.md's matched methodology: batch one, greedy, the same prompts for both modes):

    decode tokens/s   for each prompt (a code task, English prose, a Chinese-to-English
                      translation) and each mode (DFlash speculative, plain greedy), in this
                      process: one 128-token warm-up per mode, then the median of 3 repetitions
                      (interleaved between the modes) of decode speed excluding the first token
                      (so prefill is not counted);
                      goal: speculative >= 2.0x plain on the demo pair
    held-out          the same measurement on the demo pair's 36 held-out evaluation prompts
                      (dflashctl/assets/demo/eval_prompts.json: code, prose and translation
                      requests absent from its training prompts; docs/demo-pair.md): the median
                      over prompts of each prompt's speedup
    peak RSS          of the real server (`python -m dflashctl.engine.server`, speculative),
                      after it served the three prompts: /proc/PID/status VmHWM; goal < 1 GB

    .venv/bin/python perf/bench_engine.py                       # the embedded demo pair
    .venv/bin/python perf/bench_engine.py --model T --drafter D --max-tokens 256 --json
    .venv/bin/python perf/bench_engine.py --heldout none      # the three fixtures only
    .venv/bin/python perf/bench_engine.py --draft-confidence 0.3,0.5   # more modes, same run
    .venv/bin/python perf/bench_engine.py --also-drafter /tmp/dv8192/drafter  # another drafter

`--draft-confidence C` adds a mode per value: the same speculative engine verifying only the
proposals before the first its drafter gives a probability below C (Engine.draft_confidence;
the text is the same). Held-out speedups are also given per kind (code, prose, translation).
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from perf.machine import cpu  # noqa: E402

DEMO = REPO / "dflashctl" / "assets" / "demo"
WARMUP_TOKENS = 128
REPEATS = 3
SPEEDUP_GOAL = 2.0  # issue 14: speculative >= 2.0x plain on the demo pair, one thread
RSS_GOAL_MB = 1024
PROMPTS = {
    "code": "Write a Python function is_prime(n) that returns True when n is a prime number.",
    "prose": "Write a short paragraph in English about why people enjoy walking in the rain.",
    "translation": "Translate into English: 我们明天早上九点在火车站见面，然后一起去博物馆。",
}


def decode_rate(engine: Any, ids: list[int], max_tokens: int) -> tuple[float, int, Any]:
    """(decode tokens/s excluding the first token, tokens generated, spec stats) for one run."""
    from dflashctl.engine.generate import SpecStats

    stats = SpecStats()
    n, first, last = 0, 0.0, 0.0
    for chunk in engine.stream(ids, max_tokens, stats):
        now = time.perf_counter()
        if n == 0:
            first = now
        n += len(chunk)
        last = now
    return ((n - 1) / (last - first) if n > 1 and last > first else 0.0), n, stats


class Confident:
    """The speculative engine verifying only its confident proposals, as a mode of its own."""

    def __init__(self, engine: Any, confidence: float) -> None:
        self.engine, self.confidence = engine, confidence

    def stream(self, ids: list[int], max_tokens: int, stats: Any) -> Any:
        self.engine.draft_confidence = self.confidence
        try:
            yield from self.engine.stream(ids, max_tokens, stats)
        finally:
            self.engine.draft_confidence = 0.0


def bench_modes(
    engines: dict[str, Any],
    prompts: dict[str, list[int]],
    max_tokens: int,
    repeats: int = REPEATS,
) -> dict[str, dict[str, Any]]:
    """Per mode and prompt: the median of `repeats` runs. Runs are interleaved (plain, spec,
    plain, spec, ...) so that load from other processes hits both modes alike."""
    first = next(iter(prompts.values()))
    for engine in engines.values():
        decode_rate(engine, first, WARMUP_TOKENS)
    out: dict[str, dict[str, Any]] = {mode: {} for mode in engines}
    for name, ids in prompts.items():
        runs: dict[str, list[tuple[float, int, Any]]] = {mode: [] for mode in engines}
        for _ in range(repeats):
            for mode, engine in engines.items():
                runs[mode].append(decode_rate(engine, ids, max_tokens))
        for mode, rs in runs.items():
            out[mode][name] = {
                "tokens_per_s": statistics.median(r[0] for r in rs),
                "runs_tokens_per_s": [round(r[0], 2) for r in rs],
                "tokens": rs[-1][1],
                "mean_acceptance_length": rs[-1][2].mean_acceptance_length or None,
            }
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_peak_rss(
    model: Path, drafter: Path | None, max_tokens: int, threads: int | None, dtype: str
) -> dict[str, Any]:
    """Start the real server, send each prompt once, read its peak RSS, stop it (by pid)."""
    import httpx

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = [sys.executable, "-m", "dflashctl.engine.server", "--model", str(model)]
    argv += ["--drafter", str(drafter)] if drafter else ["--spec", "none"]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--served-model-name", "bench"]
    argv += ["--threads", str(threads)] if threads else []
    argv += ["--dtype", dtype]
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(argv, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 300
            while True:
                if proc.poll() is not None:
                    log.seek(0)
                    tail = log.read().decode(errors="replace")[-2000:]
                    raise SystemExit(f"the server exited {proc.returncode}:\n{tail}")
                try:
                    if httpx.get(url + "/health", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise SystemExit("the server was not ready in 300 s")
                time.sleep(0.2)
            rss_ready = vm(proc.pid, "VmRSS")
            for text in PROMPTS.values():
                body = {"model": "bench", "max_tokens": max_tokens, "temperature": 0}
                body["messages"] = [{"role": "user", "content": text}]
                r = httpx.post(url + "/v1/chat/completions", json=body, timeout=600)
                r.raise_for_status()
            return {"ready_rss_mb": rss_ready, "peak_rss_mb": vm(proc.pid, "VmHWM")}
        finally:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def vm(pid: int, field: str) -> float:
    """A /proc/PID/status memory field in MiB (VmHWM = peak resident set)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise SystemExit(f"no {field} in /proc/{pid}/status (Linux only)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--model", type=Path, help="target (default: the demo pair's, set up once)")
    ap.add_argument("--drafter", type=Path, default=DEMO / "drafter")
    ap.add_argument("--max-tokens", type=int, default=256, help="per measured run")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument(
        "--dtype", choices=["float32", "bfloat16"], default="float32",
        help="bfloat16 runs the matrix units of CPUs that have them (AMX); the server too",
    )  # fmt: skip
    ap.add_argument("-k", "--num-speculative-tokens", type=int, help="K (default: block - 1)")
    ap.add_argument("--ignore-eos", action="store_true", help="always decode --max-tokens")
    ap.add_argument("--no-server", action="store_true", help="skip the server RSS measurement")
    ap.add_argument(
        "--heldout",
        default=str(DEMO / "eval_prompts.json"),
        help="a JSON list of prompts measured as a second set ('none' to skip); default: the "
        "demo pair's held-out evaluation prompts",
    )
    ap.add_argument("--heldout-tokens", type=int, default=128, help="per held-out run")
    ap.add_argument(
        "--draft-confidence",
        default="",
        help="comma-separated thresholds: a speculative mode per value that verifies only the "
        "confident prefix of each draft",
    )
    ap.add_argument(
        "--also-drafter", type=Path, action="append", default=[],
        help="another drafter measured in the same run (e.g. one with a reduced draft "
        "vocabulary, training/draft_vocab.py): modes of its own, named by its directory",
    )  # fmt: skip
    ap.add_argument("--repeats", type=int, default=REPEATS, help="interleaved runs per prompt")
    ap.add_argument("--json", action="store_true", help="figures as JSON on stdout")
    args = ap.parse_args()
    confidences = [float(c) for c in args.draft_confidence.split(",") if c.strip()]
    if args.model is None:
        from dflashctl.demo_target import ensure

        args.model = ensure(progress=lambda m: print("demo target:", m, file=sys.stderr))
    for path in (args.model, args.drafter):
        if not (path / "config.json").exists():
            raise SystemExit(
                f"no model at {path}: the embedded demo pair is not built yet; "
                "pass --model TARGET_DIR --drafter DRAFTER_DIR"
            )

    import torch

    from dflashctl.engine.generate import Engine

    if args.threads:
        torch.set_num_threads(args.threads)
    max_len = 4096
    dtype = getattr(torch, args.dtype)
    plain = Engine.load(args.model, None, max_model_len=max_len, dtype=dtype)
    spec = Engine.load(
        args.model, args.drafter, max_model_len=max_len, dtype=dtype,
        num_speculative_tokens=args.num_speculative_tokens,
    )  # fmt: skip
    if args.ignore_eos:
        plain.eos_ids = spec.eos_ids = set()
    tok = spec.tokenizer
    prompts = {
        name: tok.apply_chat_template([{"role": "user", "content": text}])
        if tok.template
        else tok.encode(text)
        for name, text in PROMPTS.items()
    }
    t0 = time.perf_counter()
    result: dict[str, Any] = {
        "cpu": cpu(),
        "model": str(args.model),
        "drafter": str(args.drafter),
        "num_speculative_tokens": spec.k,
        "max_tokens": args.max_tokens,
        "torch_threads": torch.get_num_threads(),
        "dtype": args.dtype,
    }
    engines: dict[str, Any] = {"plain": plain, "speculative": spec}
    engines |= {f"confident {c:g}": Confident(spec, c) for c in confidences}
    for other in args.also_drafter:
        name = other.parent.name if other.name == "drafter" else other.name
        eng = Engine.load(
            args.model, other, max_model_len=max_len, dtype=dtype,
            num_speculative_tokens=args.num_speculative_tokens,
        )  # fmt: skip
        if args.ignore_eos:
            eng.eos_ids = set()
        if not confidences:  # with thresholds, only its confident modes
            engines[name] = eng
        engines |= {f"{name} confident {c:g}": Confident(eng, c) for c in confidences}
    spec_modes = [m for m in engines if m != "plain"]
    result["modes"] = spec_modes
    result |= bench_modes(engines, prompts, args.max_tokens, args.repeats)
    result["speedups"] = {
        mode: {
            name: result[mode][name]["tokens_per_s"] / result["plain"][name]["tokens_per_s"]
            for name in prompts
        }
        for mode in spec_modes
    }
    result["speedup"] = result["speedups"]["speculative"]
    if args.heldout != "none":
        items = json.loads(Path(args.heldout).read_text("utf-8"))
        texts = [t["prompt"] if isinstance(t, dict) else t for t in items]  # {id, kind, prompt}
        held = {
            f"heldout-{i:02d}": tok.apply_chat_template([{"role": "user", "content": t}])
            for i, t in enumerate(texts)
        }
        kinds = {
            f"heldout-{i:02d}": t.get("kind", "?") if isinstance(t, dict) else "?"
            for i, t in enumerate(items)
        }
        runs = bench_modes(engines, held, args.heldout_tokens, args.repeats)
        per_mode = {}
        for mode in spec_modes:
            sp = {n: runs[mode][n]["tokens_per_s"] / runs["plain"][n]["tokens_per_s"] for n in held}
            taus = [runs[mode][n]["mean_acceptance_length"] or 0.0 for n in held]
            per_mode[mode] = {
                "median_speedup": statistics.median(sp.values()),
                "min_speedup": min(sp.values()),
                "max_speedup": max(sp.values()),
                "median_speedup_by_kind": {
                    k: statistics.median(v for n, v in sp.items() if kinds[n] == k)
                    for k in sorted(set(kinds.values()))
                },
                "mean_acceptance_length": statistics.mean(taus),
                "median_tokens_per_s": statistics.median(
                    runs[mode][n]["tokens_per_s"] for n in held
                ),
            }
        result["heldout"] = {
            "prompts": args.heldout,
            "count": len(held),
            "max_tokens": args.heldout_tokens,
            "plain_median_tokens_per_s": statistics.median(
                runs["plain"][n]["tokens_per_s"] for n in held
            ),
            "modes": per_mode,
            **per_mode["speculative"],
            "runs": runs,
        }
    result["bench_seconds"] = round(time.perf_counter() - t0, 1)
    del plain, spec
    if not args.no_server:
        result["server"] = server_peak_rss(
            args.model, args.drafter, args.max_tokens, args.threads, args.dtype
        )

    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"cpu {result['cpu']}")
    print(f"model {result['model']}")
    print(f"drafter {result['drafter']} (K={result['num_speculative_tokens']})")
    print(
        f"{args.repeats} runs of up to {args.max_tokens} tokens after a {WARMUP_TOKENS}-token "
        "warm-up, "
        f"median decode tokens/s excluding the first token, {result['torch_threads']} threads"
    )
    for mode in spec_modes:
        print(f"\n{mode}")
        print(f"{'prompt':<12} {'plain':>9} {'spec':>9} {'speedup':>8} {'tau':>6} {'tokens':>7}")
        for name in prompts:
            p, s = result["plain"][name], result[mode][name]
            tau = s["mean_acceptance_length"] or 0.0
            print(
                f"{name:<12} {p['tokens_per_s']:>9.1f} {s['tokens_per_s']:>9.1f} "
                f"{result['speedups'][mode][name]:>7.2f}x {tau:>6.2f} {s['tokens']:>7d}"
            )
        median_speedup = statistics.median(result["speedups"][mode].values())
        print(f"median speedup {median_speedup:.2f}x (goal >= {SPEEDUP_GOAL}x)")
        if "heldout" in result:
            h, m = result["heldout"], result["heldout"]["modes"][mode]
            kinds = ", ".join(f"{k} {v:.2f}x" for k, v in m["median_speedup_by_kind"].items())
            print(
                f"held-out prompts ({h['count']}, up to {h['max_tokens']} tokens): plain "
                f"{h['plain_median_tokens_per_s']:.1f} tok/s, spec "
                f"{m['median_tokens_per_s']:.1f} tok/s (medians), speedup median "
                f"{m['median_speedup']:.2f}x (min {m['min_speedup']:.2f}x, max "
                f"{m['max_speedup']:.2f}x; {kinds}), mean tau {m['mean_acceptance_length']:.2f}"
            )
    if "server" in result:
        srv = result["server"]
        print(
            f"server RSS: {srv['ready_rss_mb']:.0f} MiB when ready, peak {srv['peak_rss_mb']:.0f} "
            f"MiB after serving the prompts (goal < {RSS_GOAL_MB} MiB)"
        )


if __name__ == "__main__":
    main()
