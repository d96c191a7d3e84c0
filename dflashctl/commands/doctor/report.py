"""What `dflashctl doctor` reports: one `Row` (dflashctl/report.py) per fact judged, the options,
the report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dflashctl.defects.match import DefectMatch
from dflashctl.report import Row, rows_ok

ENGINES = ("vllm", "sglang", "llama.cpp", "local")


STATUSES = ("ok", "warning", "error", "skip")  # levels: dflashctl/report.py

# doctor's documented JSON keys -> the Row attribute each shows (`fix` and `hint` both the hint)
JSON_KEYS = {
    "id": "id",
    "name": "name",
    "status": "status",
    "found": "found",
    "fix": "hint",
    "details": "details",
    "hint": "hint",
}


DEFAULT_PORT = {"vllm": 8000, "sglang": 30000, "llama.cpp": 8080, "local": 8000}


PYTHON_ENV = {"vllm": "DFLASHCTL_VLLM_PYTHON", "sglang": "DFLASHCTL_SGLANG_PYTHON"}


LAUNCHER = {"vllm": "vllm", "sglang": "sglang"}


GPU_QUERY = "index,name,compute_cap,driver_version,memory.total,memory.used,memory.free"


APPS_QUERY = "pid,process_name,used_memory"


MIN_FREE_DISK = 10 * 1024**3


# vLLM takes --gpu-memory-utilization (0.9 by default) of each GPU's total memory.
VLLM_GPU_UTIL = 0.9


GIB = 1024**3


HUB_CACHE = "@hub-cache"  # hosts/facts.py resolves it on the host (HF_HUB_CACHE, HF_HOME, ~)


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    compute_cap: str | None
    driver: str | None
    memory_total_mib: int | None
    memory_used_mib: int | None
    memory_free_mib: int | None

    @property
    def sm(self) -> int | None:
        """Compute capability as an SM number: "8.6" -> 86, "10.0" -> 100."""
        if not self.compute_cap:
            return None
        major, _, minor = self.compute_cap.partition(".")
        try:
            return int(major) * 10 + int(minor or 0)
        except ValueError:
            return None

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "compute_cap": self.compute_cap,
            "sm": self.sm,
            "driver": self.driver,
            "memory_total_mib": self.memory_total_mib,
            "memory_used_mib": self.memory_used_mib,
            "memory_free_mib": self.memory_free_mib,
        }


@dataclass
class GpuFacts:
    available: bool  # nvidia-smi ran and listed GPUs
    error: str | None = None  # why not (not found, failed)
    gpus: list[Gpu] = field(default_factory=list)
    cuda: str | None = None  # the highest CUDA version the driver supports
    apps: list[dict[str, Any]] = field(default_factory=list)

    @property
    def min_sm(self) -> int | None:
        sms = [g.sm for g in self.gpus if g.sm is not None]
        return min(sms) if sms else None

    def to_json(self) -> dict[str, Any]:
        return {
            "available": self.available,
            "error": self.error,
            "gpus": [g.to_json() for g in self.gpus],
            "cuda": self.cuda,
            "apps": self.apps,
        }


@dataclass
class DoctorOptions:
    host: str | None = None
    engine: str | None = None  # None: auto
    python: str | None = None
    port: int | None = None
    model: str | None = None
    drafter: str | None = None
    num_speculative_tokens: int | None = None
    hub_timeout: float = 3.0
    launch_args: list[str] | None = None  # the engine's flags, given after `--`
    llama_server: str | None = None  # llama.cpp's server binary (default: llama-server on PATH)


@dataclass
class DoctorReport:
    host: str
    engine: str
    engine_why: str
    python: str
    checks: list[Row]
    defects: list[DefectMatch]
    facts: dict[str, Any]

    @property
    def counts(self) -> dict[str, int]:
        return {s: sum(c.status == s for c in self.checks) for s in STATUSES}

    @property
    def ok(self) -> bool:
        return rows_ok(self.checks)  # warnings never fail

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "host": self.host,
            "engine": self.engine,
            "engine_why": self.engine_why,
            "python": self.python,
            "counts": self.counts,
            "checks": [c.to_json(JSON_KEYS) for c in self.checks],
            "defects": [m.to_json() for m in self.defects],
            "facts": self.facts,
        }
