"""The exporter (`dflashctl metrics LOG --serve-metrics`) on a large vLLM log: how long it takes
to read the existing log (the history, until /metrics shows every window), its CPU time and
peak RSS, then its CPU while following new lines.

The log is perf/bench_metrics.py's generated vLLM 0.32 log (mostly access lines, an `Engine
000:` + `SpecDecoding metrics:` pair every 10 s). One run:

    .venv/bin/python perf/bench_exporter.py                 # ~1 GB
    .venv/bin/python perf/bench_exporter.py --size-mb 200
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "perf"))
sys.path.insert(0, str(REPO / "tests"))

from bench_metrics import generate  # noqa: E402
from support.startup import free_port  # noqa: E402


def proc_stats(pid: int) -> tuple[float, int]:
    """(CPU seconds, peak RSS bytes) of a live process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    peak = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            peak = int(line.split()[1]) * 1024
    return cpu, peak


def windows(url: str) -> float | None:
    try:
        text = httpx.get(url, timeout=5).text
    except httpx.HTTPError:
        return None
    for line in text.splitlines():
        if line.startswith("dflashctl_exporter_windows_total"):
            return float(line.split()[-1])
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--follow-s", type=float, default=20.0, help="seconds of following to time")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "vllm.log"
        n = generate(log, args.size_mb << 20)
        size = log.stat().st_size
        port = free_port()
        url = f"http://127.0.0.1:{port}/metrics"
        t0 = time.monotonic()
        proc = subprocess.Popen(
            [str(REPO / ".venv" / "bin" / "python"), "-m", "dflashctl", "metrics", str(log),
             "--serve-metrics", f"127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        try:
            seen = None
            while seen is None or seen < n:  # every window of the log counted
                if proc.poll() is not None or time.monotonic() - t0 > 900:
                    raise SystemExit(f"the exporter stopped or read {seen} of {n} windows")
                time.sleep(0.1)
                seen = windows(url)
            history_s = time.monotonic() - t0
            cpu0, peak0 = proc_stats(proc.pid)
            time.sleep(args.follow_s)  # following an idle log: the poll loop's cost
            cpu1, peak1 = proc_stats(proc.pid)
        finally:
            os.kill(proc.pid, signal.SIGTERM)
            proc.wait(10)
    print(f"log {size / 1e6:.0f} MB, {n} windows")
    print(f"history read (start to /metrics showing every window): {history_s:.2f} s, "
          f"CPU {cpu0:.2f} s, peak RSS {peak0 / 2**20:.0f} MiB")  # fmt: skip
    print(f"following an idle log for {args.follow_s:.0f} s: CPU {cpu1 - cpu0:.2f} s "
          f"({100 * (cpu1 - cpu0) / args.follow_s:.1f} % of a core), peak RSS "
          f"{peak1 / 2**20:.0f} MiB")  # fmt: skip


if __name__ == "__main__":
    main()
