"""Does the bundled engine's memory grow with the requests it serves? (issue 30 #12)

Starts the real server (`python -m dflashctl.engine.server`) on 127.0.0.1 with a pair — the
tiny random pair of the tests by default, or `--model/--drafter` — sends `--requests`
sequential streamed chat requests (prompts of varying length, `--max-tokens` each), and reads
its resident set (/proc/PID/status VmRSS) every `--every` requests. A leak grows without end
(a slope over the second half); a step early on that then stays flat is the allocator keeping
pages it has freed (glibc's arenas, torch's caches), not a leak. With `--tracemalloc` the
server runs under Python's tracemalloc and writes a snapshot at the first sample after warm-up
and at the end (on SIGUSR1): the growth of the memory Python objects hold between the two, and
the lines that allocated most of it.

Prints the series and, over the second half, the RSS slope in KiB per 1,000 requests.

    .venv/bin/python perf/bench_engine_memory.py --requests 5000
    .venv/bin/python perf/bench_engine_memory.py --model T --drafter D --requests 1000
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def slope_per_1000(points: list[tuple[int, int]]) -> float:
    """Least-squares slope of RSS (KiB) against requests, per 1,000 requests."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.mean(xs), statistics.mean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return (
        1000 * sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else 0.0
    )


def wait_written(path: Path, timeout: float = 300.0) -> None:
    """Until the server has written the snapshot (its size steady for a second)."""
    deadline, last = time.monotonic() + timeout, -1
    while time.monotonic() < deadline:
        size = path.stat().st_size if path.exists() else -1
        if size > 0 and size == last:
            return
        last = size
        time.sleep(1.0)
    raise SystemExit(f"no tracemalloc snapshot at {path} after {timeout:g} s")


def compare_snapshots(prefix: Path) -> dict[str, object]:
    """Growth of Python's traced memory between snapshot 0 and 1, and its top lines."""
    import tracemalloc

    first = tracemalloc.Snapshot.load(f"{prefix}0")
    last = tracemalloc.Snapshot.load(f"{prefix}1")
    diff = last.compare_to(first, "lineno")
    total = sum(s.size for s in last.traces) - sum(s.size for s in first.traces)
    top = [
        {"where": str(d.traceback[0]), "kib": round(d.size_diff / 1024, 1), "count": d.count_diff}
        for d in diff[:8]
    ]
    return {"growth_kib": round(total / 1024, 1), "top": top}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--model", type=Path)
    ap.add_argument("--drafter", type=Path)
    ap.add_argument("--requests", type=int, default=5000)
    ap.add_argument("--every", type=int, default=250)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--tracemalloc", action="store_true", help="snapshots of Python's memory")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    import httpx
    from support.pairs import write_tiny_pair
    from support.startup import free_port

    with tempfile.TemporaryDirectory(prefix="bench-mem-") as tmp:
        if args.model is None:
            args.model, args.drafter = write_tiny_pair(Path(tmp) / "pair")
        port = free_port()
        snaps = Path(tmp) / "snap"
        boot = (  # tracemalloc from the start; SIGUSR1 writes the next numbered snapshot
            "import signal, sys, tracemalloc, itertools; tracemalloc.start(8); "
            "n = itertools.count(); "
            f"signal.signal(signal.SIGUSR1, lambda *a: tracemalloc.take_snapshot().dump("
            f"'{snaps}' + str(next(n)))); "
            "from dflashctl.engine.server import main; main(sys.argv[1:])"
        )
        head = [sys.executable, "-c", boot] if args.tracemalloc else [
            sys.executable, "-m", "dflashctl.engine.server"]  # fmt: skip
        argv = [*head, "--model", str(args.model)]
        argv += ["--port", str(port), "--served-model-name", "m", "--log-interval", "60"]
        argv += ["--drafter", str(args.drafter)] if args.drafter else ["--spec", "none"]
        log = open(Path(tmp) / "server.log", "w")  # noqa: SIM115 (closed below)
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                                env=dict(os.environ, PYTHONPATH=str(REPO)))  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 600  # tracemalloc slows the start-up several times
            while True:
                try:
                    if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit(
                        "the server did not start: " + (Path(tmp) / "server.log").read_text()[-800:]
                    )
                time.sleep(0.2)
            points = [(0, rss_kib(proc.pid))]
            t0 = time.perf_counter()
            with httpx.Client(timeout=60) as client:
                for i in range(1, args.requests + 1):
                    words = " ".join(["word"] * (1 + i % 37))  # prompts of varying length
                    msgs = [{"role": "user", "content": words}]
                    body = {"model": "m", "max_tokens": args.max_tokens, "temperature": 0,
                            "stream": True, "messages": msgs}  # fmt: skip
                    with client.stream("POST", f"{url}/v1/chat/completions", json=body) as r:
                        for _ in r.iter_lines():
                            pass
                    if i % args.every == 0:
                        points.append((i, rss_kib(proc.pid)))
                        if args.tracemalloc and i in (args.every, args.requests):
                            n = 0 if i == args.every else 1
                            proc.send_signal(signal.SIGUSR1)
                            wait_written(Path(f"{snaps}{n}"))
            seconds = time.perf_counter() - t0
            python = compare_snapshots(snaps) if args.tracemalloc else None
        finally:
            proc.terminate()
            proc.wait(10)
            log.close()
    half = [p for p in points if p[0] >= args.requests // 2]
    result = {
        "requests": args.requests,
        "seconds": round(seconds, 1),
        "rss_kib": points,
        "first_kib": points[0][1],
        "after_first_every_kib": points[1][1],
        "last_kib": points[-1][1],
        "peak_kib": max(p[1] for p in points),
        "slope_second_half_kib_per_1000": round(slope_per_1000(half), 1),
        "python": python,
    }
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"{args.requests} sequential requests in {seconds:.0f} s (max_tokens {args.max_tokens})")
    for n, kib in points:
        print(f"  after {n:>6} requests: RSS {kib / 1024:8.1f} MiB")
    print(
        f"start {result['first_kib'] / 1024:.1f} MiB, after {args.every} "
        f"{result['after_first_every_kib'] / 1024:.1f}, peak {result['peak_kib'] / 1024:.1f}, "
        f"last {result['last_kib'] / 1024:.1f}; second-half slope "
        f"{result['slope_second_half_kib_per_1000']:.1f} KiB per 1,000 requests"
    )
    if python is not None:
        print(
            f"Python objects between request {args.every} and {args.requests}: "
            f"{python['growth_kib']:+.1f} KiB (tracemalloc); the lines that grew most:"
        )
        for t in python["top"]:  # type: ignore[attr-defined]
            print(f"  {t['kib']:+9.1f} KiB {t['count']:+7d} blocks  {t['where']}")


if __name__ == "__main__":
    main()
