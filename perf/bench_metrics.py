"""Benchmark `dflashctl metrics` on a large generated vLLM 0.32 log against `grep -c`.

Generates a realistic log (mostly uvicorn access lines and other INFO/WARNING lines, a
traceback now and then, an `Engine 000:` + `SpecDecoding metrics:` pair every 10 s) in a
temporary directory, warms the page cache, then times in one run:

    grep -c 'SpecDecoding metrics' FILE
    dflashctl metrics FILE --json > /dev/null

(median of --repeat runs each) and reports the ratio and the peak RSS of each process, for a
small and the full-size file, so a flat RSS shows. Goal: ratio ≤ 2, RSS independent of size.

The dflashctl package that runs is byte-compiled first (`compileall`, as pip does on install):
with PYTHONDONTWRITEBYTECODE=1 in the environment every run would otherwise compile its ~60
modules from source again (~0.03 s of CPU), which an installed dflashctl never does.

    .venv/bin/python perf/bench_metrics.py            # ~1 GB
    .venv/bin/python perf/bench_metrics.py --size-mb 200 --repeat 5
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MEASURE = (
    "import resource, subprocess, sys, time\n"
    "t = time.perf_counter()\n"
    "p = subprocess.run(sys.argv[2:], stdout=open(sys.argv[1], 'wb'))\n"
    "dt = time.perf_counter() - t\n"
    "print(dt, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, p.returncode)\n"
)

DF = [0.905, 0.78, 0.655, 0.54, 0.44, 0.355, 0.28, 0.215, 0.165, 0.12, 0.085, 0.06, 0.04]


def _ts(sec: int) -> str:
    day = 1 + sec // 86400
    s = sec % 86400
    return f"12-{day:02d} {s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}"


def generate(path: Path, size: int, seed: int = 0) -> int:
    """Write ~`size` bytes of log; returns the number of SpecDecoding lines."""
    rnd = random.Random(seed)
    access = [
        f"INFO:     10.0.{rnd.randint(0, 255)}.{rnd.randint(1, 254)}:{rnd.randint(30000, 65000)} - "
        f'"POST /v1/chat/completions HTTP/1.1" 200 OK'
        for _ in range(512)
    ]
    other = [
        "(APIServer pid=19247) INFO {ts} [chat_utils.py:560] Detected the chat template content "
        "format to be 'string'. You can set `--chat-template-content-format` to override this.",
        "(APIServer pid=19247) WARNING {ts} [protocol.py:93] The following fields were present in "
        "the request but ignored: {{'reasoning_effort'}}",
        "(EngineCore pid=21768) INFO {ts} [block_pool.py:321] Successfully reset prefix cache",
        "(APIServer pid=19247) INFO {ts} [logger.py:49] Received request chatcmpl-{rid}: "
        "params: SamplingParams(n=1, temperature=0.0, max_tokens=512), lora_request: None.",
    ]
    traceback = (
        "Traceback (most recent call last):\n"
        '  File "/opt/venv/lib/python3.12/site-packages/vllm/entrypoints/openai/serving_chat.py",'
        " line 1195, in chat_completion_stream_generator\n"
        "    async for res in result_generator:\n"
        "asyncio.exceptions.CancelledError\n"
    )
    written = 0
    windows = 0
    sec = 0
    with open(path, "w", encoding="utf-8", buffering=1 << 22) as f:
        while written < size:
            sec += 10
            ts = _ts(sec)
            parts = []
            for _ in range(rnd.randint(80, 120)):
                if rnd.random() < 0.85:
                    parts.append(access[rnd.randrange(512)])
                else:
                    parts.append(
                        other[rnd.randrange(len(other))].format(ts=ts, rid=rnd.getrandbits(64))
                    )
            if rnd.random() < 0.02:
                parts.append(traceback.rstrip("\n"))
            scale = 0.9 + rnd.random() * 0.2
            drafts = rnd.randint(200, 600)
            acc_pos = [round(p * scale * drafts) for p in DF]
            acc, dra = sum(acc_pos), drafts * len(DF)
            pps = ", ".join(f"{a / drafts:.3f}" for a in acc_pos)
            parts.append(
                f"(APIServer pid=19247) INFO {ts} [loggers.py:335] Engine 000: Avg prompt "
                f"throughput: {rnd.random() * 900:.1f} tokens/s, Avg generation throughput: "
                f"{rnd.random() * 600:.1f} tokens/s, Running: {rnd.randint(1, 8)} reqs, Waiting: 0 "
                "reqs, GPU KV cache usage: 3.1%, Prefix cache hit rate: 41.0%"
            )
            parts.append(
                f"(APIServer pid=19247) INFO {ts} [metrics.py:120] SpecDecoding metrics: Mean "
                f"acceptance length: {1 + acc / drafts:.2f}, Accepted throughput: {acc / 10:.2f} "
                f"tokens/s, Drafted throughput: {dra / 10:.2f} tokens/s, Accepted: {acc} tokens, "
                f"Drafted: {dra} tokens, Per-position acceptance rate: {pps}, Avg Draft "
                f"acceptance rate: {acc / dra * 100:.1f}%"
            )
            block = "\n".join(parts) + "\n"
            f.write(block)
            written += len(block)
            windows += 1
    return windows


def measure(cmd: list[str], out: Path) -> tuple[float, int, int]:
    r = subprocess.run(
        [sys.executable, "-c", MEASURE, str(out), *cmd], capture_output=True, text=True, check=True
    )
    dt, rss, rc = r.stdout.split()
    return float(dt), int(rss), int(rc)


def bench(path: Path, repeat: int, dflashctl: list[str]) -> dict[str, float]:
    subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)  # warm the cache
    grep_t, ours_t = [], []
    grep_rss = ours_rss = 0
    out = path.with_suffix(".out")
    count = None
    for _ in range(repeat):
        t, rss, _rc = measure(["grep", "-c", "SpecDecoding metrics", str(path)], out)
        grep_t.append(t)
        grep_rss = max(grep_rss, rss)
        count = int(out.read_text().strip())
        t, rss, rc = measure([*dflashctl, "metrics", str(path), "--json"], out)
        ours_t.append(t)
        ours_rss = max(ours_rss, rss)
        if rc not in (0, 1):
            raise SystemExit(f"dflashctl metrics failed (exit {rc})")
    report = json.loads(out.read_text())
    help_t = [measure([*dflashctl, "--help"], out)[0] for _ in range(repeat)]
    g, o = statistics.median(grep_t), statistics.median(ours_t)
    return {
        "size_mb": path.stat().st_size / 1e6,
        "grep_lines": float(count or 0),
        "windows": float(report["windows"]),
        "grep_s": g,
        "dflashctl_s": o,
        "ratio": o / g,
        "startup_s": statistics.median(help_t),
        "grep_rss_mb": grep_rss / 1024,
        "dflashctl_rss_mb": ours_rss / 1024,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=1024, help="size of the big log (MB)")
    ap.add_argument("--small-mb", type=int, default=64, help="size of the small log (MB)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", action="store_true", help="keep the generated logs")
    args = ap.parse_args()
    dflashctl = [sys.executable, "-m", "dflashctl"]
    pkg = subprocess.run(
        [sys.executable, "-c", "import dflashctl, os; print(os.path.dirname(dflashctl.__file__))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    subprocess.run([sys.executable, "-m", "compileall", "-q", pkg], check=True)
    tmp = Path(tempfile.mkdtemp(prefix="bench-metrics-"))
    try:
        rows = []
        for mb in (args.small_mb, args.size_mb):
            path = tmp / f"vllm-{mb}mb.log"
            t0 = time.perf_counter()
            n = generate(path, mb * 1024 * 1024)
            print(f"generated {path.name}: {n} metrics windows in {time.perf_counter() - t0:.0f} s")
            rows.append(bench(path, args.repeat, dflashctl))
        print()
        print(
            f"{'size MB':>8} {'windows':>8} {'grep -c s':>10} {'dflashctl s':>12} {'ratio':>6} "
            f"{'grep RSS MB':>12} {'dflashctl RSS MB':>17} {'CLI start-up s':>15}"
        )
        for r in rows:
            print(
                f"{r['size_mb']:8.0f} {r['windows']:8.0f} {r['grep_s']:10.3f} "
                f"{r['dflashctl_s']:12.3f} {r['ratio']:6.2f} {r['grep_rss_mb']:12.1f} "
                f"{r['dflashctl_rss_mb']:17.1f} {r['startup_s']:15.3f}"
            )
        big = rows[-1]
        work = (big["dflashctl_s"] - big["startup_s"]) / big["grep_s"]
        print(
            f"\nratio {big['ratio']:.2f}x (goal <= 2x); without the CLI's fixed start-up "
            f"(`dflashctl --help`: {big['startup_s']:.2f} s) {work:.2f}x"
        )
        print(
            f"RSS {rows[0]['dflashctl_rss_mb']:.0f} MB "
            f"at {rows[0]['size_mb']:.0f} MB vs {big['dflashctl_rss_mb']:.0f} MB at "
            f"{big['size_mb']:.0f} MB"
        )
    finally:
        if args.keep:
            print(f"logs kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
