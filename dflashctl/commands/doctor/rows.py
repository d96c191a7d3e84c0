"""The judgement: one or more rows per fact (GPU and build, torch, flash-attn, engine version and
known defects, model runner, speculative tokens, GPU memory, leftover engines, port, disk, Hub)."""

from __future__ import annotations

import re
from typing import Any

from packaging.version import Version

from dflashctl.commands.doctor.facts import (
    LlamaServer,
    engine_version,
    gib,
    parse_version_text,
    size_text,
)
from dflashctl.commands.doctor.report import (
    DEFAULT_PORT,
    MIN_FREE_DISK,
    PYTHON_ENV,
    STATUSES,
    VLLM_GPU_UTIL,
    GpuFacts,
)
from dflashctl.defects.catalogue import Catalogue
from dflashctl.defects.launch import LaunchSettings
from dflashctl.defects.match import DefectMatch, RuledOut
from dflashctl.defects.predicates import LLAMA_CPP, public
from dflashctl.report import Row
from dflashctl.server.engines import LOCAL_ENGINE_INSTALL, LOCAL_ENGINE_MODULES


class Rows:
    def __init__(self) -> None:
        self.checks: list[Row] = []

    def add(
        self, id: str, name: str, status: str, found: str, fix: str | None = None, **details: Any
    ) -> None:
        assert status in STATUSES
        hint = fix if status != "ok" or fix else None
        self.checks.append(Row(name, status, found, hint=hint, id=id, details=details))


def rows_gpu(rows: Rows, engine: str, build: str | None, g: GpuFacts) -> None:
    if not g.available:
        if engine == "vllm" and build == "cpu":
            rows.add("gpu", "GPUs", "ok", f"none ({g.error}); the vLLM CPU build needs none")
        elif engine == LLAMA_CPP:
            rows.add("gpu", "GPUs", "ok", f"none ({g.error}); llama.cpp runs on the CPU too")
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


def rows_torch(
    rows: Rows, engine: str, build: str | None, torch: dict[str, Any] | None, g: GpuFacts
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
    built, driver = parse_version_text(cuda), parse_version_text(g.cuda)
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


def rows_flash_attn(rows: Rows, facts: dict[str, Any], g: GpuFacts) -> None:
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
        if n == "flash-attn-4" or ((parse_version_text(v) or Version("0")).major >= 3)
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


def row_engine(
    rows: Rows,
    engine: str,
    dists: dict[str, str],
    python: str,
    cat: Catalogue,
    build: str | None,
    llama: LlamaServer | None = None,
) -> None:
    if engine == LLAMA_CPP:
        row_llama_server(rows, llama, cat)
        return
    if engine == "local":
        missing = [d for d in LOCAL_ENGINE_MODULES if d not in dists]
        if missing:
            rows.add(
                "engine",
                "bundled engine",
                "error",
                f"missing in {python}: {', '.join(missing)}",
                LOCAL_ENGINE_INSTALL,
            )
        else:
            rows.add(
                "engine", "bundled engine", "ok", "torch, tokenizers, fastapi, uvicorn installed"
            )
        return
    version, dist = engine_version(engine, dists)
    floor = cat.engines[engine].dflash_since
    assert floor is not None  # the catalogue gives vLLM's and SGLang's first DFlash release
    name = {"vllm": "vLLM", "sglang": "SGLang"}[engine]
    if version is None:
        hint = f"pip install '{engine}>={floor}'"
        if engine in PYTHON_ENV:
            hint += f", or point --python / {PYTHON_ENV[engine]} at the environment that has it"
        rows.add("engine", name, "error", f"not installed in {python}", hint)
        return
    v = parse_version_text(version)
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


def row_llama_server(rows: Rows, llama: LlamaServer | None, cat: Catalogue) -> None:
    """llama.cpp's build, read from its server binary."""
    info = cat.engines.get(LLAMA_CPP)
    since = f" ({info.source})" if info else ""
    if llama is None or llama.path is None:
        rows.add(
            "engine",
            "llama.cpp",
            "error",
            f"not installed: {llama.why if llama else 'llama-server not looked for'}",
            "build llama.cpp with its server (cmake --build … --target llama-server) and put "
            "llama-server on PATH, or pass --llama-server PATH / set DFLASHCTL_LLAMA_SERVER",
        )
    elif llama.build is None:
        rows.add(
            "engine",
            "llama.cpp",
            "warning",
            f"{llama.path} ({llama.why}): {llama.error}",
            "the build-dependent known defects stay unchecked; check that it is llama.cpp's "
            "llama-server",
        )
    else:
        rows.add(
            "engine",
            "llama.cpp",
            "ok",
            f"build {llama.build} (commit {llama.commit}) from {llama.path} ({llama.why}); "
            f"DFlash: --spec-type draft-dflash{since}",
            build=llama.build,
        )


def rows_defects(
    rows: Rows,
    matches: list[DefectMatch],
    ruled_out: list[RuledOut],
    engine: str,
    version: str | None,
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
        if ruled_out:
            by_version = sum(r.by == "version" for r in ruled_out)
            by_facts = [f"{r.defect.id} ({r.why})" for r in ruled_out if r.by != "version"]
            parts = [f"{by_version} by the version (fixed, or not yet there)"] if by_version else []
            text += f"; {len(ruled_out)} ruled out: " + ", ".join(parts + by_facts)
        rows.add(
            "defects",
            "known defects",
            "ok",
            text,
            "pass --drafter DIR and --model DIR to check the rest" if possible else None,
            possible=[m.defect.id for m in possible],
            ruled_out=[r.to_json() for r in ruled_out],
        )
    return shown


def row_runner(rows: Rows, runner: str | None, why: str) -> None:
    if runner:
        rows.add("runner", "vLLM model runner", "ok", f"{runner.upper()}: {why}")


def row_spec_tokens(
    rows: Rows, engine: str, block: int | None, k: int | None, source: str | None
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


def row_gpu_memory(rows: Rows, engine: str, g: GpuFacts) -> None:
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


def row_launch(rows: Rows, engine: str, launch: LaunchSettings | None) -> None:
    """The engine's launch flags the defect matrix judged (or why flag-based defects stay
    "possible")."""
    if engine not in ("vllm", "sglang", LLAMA_CPP):
        return
    if launch is None:
        example = (
            "--spec-type draft-dflash -sm layer"
            if engine == LLAMA_CPP
            else "--tensor-parallel-size 4"
        )
        rows.add(
            "launch",
            "launch flags",
            "skip",
            "not known: no running engine to read them from",
            f"pass the flags you will launch with after `--` (dflashctl doctor --engine {engine} "
            f"-- {example} …) to check the defects that depend on them",
        )
        return
    shown: dict[str, object] = {
        "prefix caching": launch.enable_prefix_caching,
        "CUDA graphs": None if launch.enforce_eager is None else not launch.enforce_eager,
        "TP": launch.tensor_parallel_size,
        "method": launch.method,
        "draft sampling": launch.draft_sample_method,
    }
    if engine == LLAMA_CPP:
        p_min = launch.spec_draft_p_min
        shown = {
            "method": launch.method,
            "split mode": launch.split_mode,
            "spec-draft-p-min": "the build's default" if p_min is None else f"{p_min:g}",
        }
    text = ", ".join(f"{k} {v}" for k, v in shown.items() if v is not None)
    rows.add("launch", "launch flags", "ok", f"{text} (from {launch.source})",
             launch=launch.to_json())  # fmt: skip


def row_processes(rows: Rows, facts: dict[str, Any]) -> None:
    procs = facts.get("processes")
    if procs is None:
        rows.add("processes", "engine processes", "skip", "no /proc on this host")
        return
    if not procs:
        rows.add(
            "processes",
            "engine processes",
            "ok",
            "no vLLM, SGLang, llama-server or dflashctl engine running",
        )
        return
    listed = "; ".join(
        f"pid {p['pid']} ({p['engine']}): {_short_cmdline(p['cmdline'])}" for p in procs
    )
    rows.add(
        "processes",
        "engine processes",
        "warning",
        f"{len(procs)} running: {listed}",
        "if they are leftovers, stop them (`dflashctl stop --all` for servers dflashctl started, "
        "`dflashctl status` lists them; otherwise `kill PID` yourself); doctor never kills "
        "anything",
        processes=procs,
    )


def _short_cmdline(cmdline: str, width: int = 72) -> str:
    return cmdline if len(cmdline) <= width else cmdline[: width - 1] + "…"


def row_port(rows: Rows, facts: dict[str, Any], engine: str) -> None:
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


def rows_disk(rows: Rows, facts: dict[str, Any], labels: list[str]) -> None:
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
        have = f"{size_text(size)} on disk; " if size is not None and info.get("exists") else ""
        text = f"{info['path']}: {have}{gib(free)} free on its filesystem"
        if free < MIN_FREE_DISK:
            rows.add(
                f"disk.{label}",
                f"disk: {label}",
                "warning",
                text,
                f"free space there: under {gib(MIN_FREE_DISK)} leaves no room for downloads, "
                "compile caches and logs",
            )
        else:
            rows.add(f"disk.{label}", f"disk: {label}", "ok", text)


def rows_hub(rows: Rows, facts: dict[str, Any]) -> None:
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
