"""The CPU a benchmark ran on, in one line, so that figures from different machines are not
read as one machine's noise (the sessions' VMs differ: an AMD EPYC without AVX-512 on
2026-12-07; the vector units decide what a verify of K + 1 tokens costs against a decode)."""

from __future__ import annotations

import os
import platform
from pathlib import Path

UNITS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile", "amx_bf16")


def cpu() -> str:
    """e.g. 'AMD EPYC, 2 cores, avx2 fma' (Linux: /proc/cpuinfo; elsewhere what platform says)."""
    name, flags = platform.processor() or platform.machine(), set()
    info = Path("/proc/cpuinfo")
    if info.exists():
        for line in info.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and value.strip():
                name = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
    units = " ".join(u for u in UNITS if u in flags) or "no AVX2"
    return f"{name}, {os.cpu_count()} cores, {units}"


if __name__ == "__main__":
    print(cpu())
