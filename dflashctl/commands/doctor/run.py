"""doctor.py — environment and engine-version checks before anything is launched.

`run_doctor(DoctorOptions)` gathers facts through a `Host` (this machine or one over SSH):
`nvidia-smi` for GPUs, driver, CUDA and GPU processes; `llama-server --version` for llama.cpp's
build; one run of `hosts/facts.py` with the engine's Python for its distributions, torch build,
flash-attn layout, engine processes, the port, disk space, Hub reachability and token presence;
the drafter's and target's config.json (and the drafter's k_norm weights) for the catalogue of
known engine defects (`defects/catalogue.py`). It returns a `DoctorReport` of rows, each ok /
warning / error / skip with what was found and the fix. Nothing is changed and nothing is killed;
no secret is read back. No printing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from dflashctl.commands.doctor.facts import (
    LlamaServer,
    auto_engine,
    choose_python,
    engine_version,
    find_llama_server,
    gather_facts,
    gather_gpus,
)
from dflashctl.commands.doctor.report import (
    DEFAULT_PORT,
    ENGINES,
    HUB_CACHE,
    DoctorOptions,
    DoctorReport,
)
from dflashctl.commands.doctor.rows import (
    Rows,
    row_engine,
    row_gpu_memory,
    row_launch,
    row_port,
    row_processes,
    row_runner,
    row_spec_tokens,
    rows_defects,
    rows_disk,
    rows_flash_attn,
    rows_gpu,
    rows_hub,
    rows_torch,
)
from dflashctl.defects.catalogue import Catalogue, load_catalogue
from dflashctl.defects.k_norm import k_norm_from_facts
from dflashctl.defects.launch import LaunchSettings
from dflashctl.defects.match import DefectMatch, assess
from dflashctl.defects.predicates import (
    LLAMA_CPP,
    Facts,
    infer_build,
    infer_runner,
    normalize_dist,
)
from dflashctl.drafter.config import V1_UNSUPPORTED, parse_json_object, resolve, target_text_config
from dflashctl.errors import InputError, UsageError, require_finite
from dflashctl.hosts import open_host
from dflashctl.hosts.host import Host


def _read_config(host: Host, path: str, what: str) -> dict[str, Any]:
    p = path.rstrip("/") or "/"
    if not host.exists(p):
        raise InputError(
            f"{what} {path}: not found on {host.label}", f"pass the {what} directory (config.json)"
        )
    target = p if p.endswith(".json") else p + "/config.json"
    text = host.read_text(target)
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


def row_drafter(
    rows: Rows,
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


def run_doctor(opts: DoctorOptions, host: Host | None = None) -> DoctorReport:
    """Gather the facts on `host` (default: `opts.host`, this machine when None or "local"),
    judge them, return the rows. Bad options: `UsageError` (exit 2)."""
    if opts.engine is not None and opts.engine not in ENGINES:
        raise UsageError(f"--engine {opts.engine!r}: use one of {', '.join(ENGINES)}")
    if opts.port is not None and not 1 <= opts.port <= 65535:
        raise UsageError(f"--port {opts.port}: not a TCP port (1–65535)")
    if opts.num_speculative_tokens is not None and opts.num_speculative_tokens < 1:
        raise UsageError("--num-speculative-tokens must be at least 1")
    require_finite(hub_timeout=opts.hub_timeout)
    if opts.hub_timeout <= 0:
        raise UsageError("--hub-timeout must be positive")
    cat = load_catalogue()
    if host is not None:
        return _doctor_on(host, opts, cat)
    with open_host(None if opts.host in (None, "", "local") else opts.host) as opened:
        return _doctor_on(opened, opts, cat)


def _doctor_on(host: Host, opts: DoctorOptions, cat: Catalogue) -> DoctorReport:
    # a GGUF drafter (llama.cpp) has no config.json: `dflashctl verify-config FILE` reads it
    gguf = bool(opts.drafter and opts.drafter.lower().endswith(".gguf"))
    drafter_cfg = _read_config(host, opts.drafter, "drafter") if opts.drafter and not gguf else None
    model_cfg = _read_config(host, opts.model, "model") if opts.model else None
    env = dict(os.environ) if host.is_local else {}
    python, python_why, engine = choose_python(host, opts, env)

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
    remote_k_norm = opts.drafter if (opts.drafter and not host.is_local) else None
    facts = gather_facts(
        host,
        python,
        ports=ports,
        paths=paths,
        hub_timeout=opts.hub_timeout,
        k_norm=remote_k_norm,
    )
    dists = {normalize_dist(k): str(v) for k, v in (facts.get("distributions") or {}).items()}
    llama: LlamaServer | None = None
    if engine == LLAMA_CPP or (engine is None and auto_engine(dists) is None):
        llama = find_llama_server(host, opts.llama_server, env)
    if engine is None:
        engine = auto_engine(dists) or (LLAMA_CPP if llama and llama.path else "local")
        engine_why = "auto: " + (
            f"{llama.path} ({llama.why})"
            if engine == LLAMA_CPP and llama
            else f"{engine} installed in {python}"
            if engine != "local"
            else f"no vLLM, SGLang or llama-server in {python}"
        )
    else:
        engine_why = "--engine" if opts.engine else f"auto: {python_why}"
    port = opts.port or DEFAULT_PORT[engine]
    facts["port"] = next((p for p in facts.get("ports") or [] if p.get("port") == port), None)
    g = gather_gpus(host)
    version, _dist = engine_version(engine, dists)
    if engine == LLAMA_CPP:
        version = llama.build if llama else None
    n_target, n_source = _target_layers(opts.model, model_cfg, drafter_cfg)

    dfacts = Facts(
        engine=engine,
        version=version,
        drafter_config=drafter_cfg,
        drafter_dir=Path(opts.drafter) if (opts.drafter and host.is_local) else None,
        num_target_layers=n_target,
        env=facts.get("env") or {},
        distributions=dists,
        k_norm=k_norm_from_facts(facts.get("k_norm")),
        launch=launch_settings(engine, opts.launch_args, facts.get("processes"), port),
    )
    build = infer_build(dfacts)
    runner, runner_why = infer_runner(dfacts, build)
    found = assess(dfacts, cat, include_possible=True) if engine != "local" else None
    matches = found.matches if found else []

    rows = Rows()
    py = facts.get("python") or {}
    rows.add(
        "python",
        "Python",
        "ok",
        f"{py.get('executable', python)} (Python {py.get('version', '?')}; {python_why})",
    )
    row_engine(rows, engine, dists, python, cat, build, llama)
    if engine == "vllm":
        row_runner(rows, runner, runner_why)
    rows_gpu(rows, engine, build, g)
    if engine != LLAMA_CPP:  # llama.cpp is C++: no torch, no flash-attn wheel
        rows_torch(rows, engine, build, facts.get("torch"), g)
        rows_flash_attn(rows, facts, g)
    if gguf:
        rows.add(
            "drafter",
            "drafter config",
            "skip",
            f"{opts.drafter} is a GGUF file: its keys are not read here",
            f"dflashctl verify-config {opts.drafter}",
        )
    if drafter_cfg is not None:
        row_drafter(
            rows, engine, opts.drafter or "", drafter_cfg, n_target, n_source, runner, matches
        )
        r = resolve(drafter_cfg, n_target, runner or "v1")
        row_spec_tokens(
            rows, engine, r.block_size, opts.num_speculative_tokens, r.block_size_source
        )
    row_launch(rows, engine, dfacts.launch)
    shown = rows_defects(rows, matches, found.ruled_out if found else [], engine, version)
    row_gpu_memory(rows, engine, g)
    row_processes(rows, facts)
    row_port(rows, facts, engine)
    rows_disk(rows, facts, labels)
    rows_hub(rows, facts)

    facts["gpus"] = g.to_json()
    if llama is not None:
        facts["llama_server"] = llama.__dict__
    return DoctorReport(
        host=host.label,
        engine=engine,
        engine_why=engine_why,
        python=python,
        checks=rows.checks,
        defects=shown,
        facts=facts,
    )


def launch_settings(
    engine: str, args: list[str] | None, processes: list[dict[str, Any]] | None, port: int
) -> LaunchSettings | None:
    """The engine's launch flags: those given after `--`, else the running engine's own (the
    process serving `port`, or the only one of this engine on the host); None when unknown."""
    from dflashctl.defects.launch import from_argv

    if engine not in ("vllm", "sglang", LLAMA_CPP):
        return None
    if args:
        s = from_argv(engine, args)
        s.source = "the flags after --"
        return s
    mine = [p for p in processes or [] if p.get("engine") == engine and p.get("argv")]
    on_port = [p for p in mine if _serves_port(p["argv"], port)]
    pick = on_port[0] if len(on_port) == 1 else mine[0] if len(mine) == 1 else None
    if pick is None:
        return None
    s = from_argv(engine, pick["argv"])
    s.source = f"the running {engine} (pid {pick['pid']})"
    return s


def _serves_port(argv: list[str], port: int) -> bool:
    for i, a in enumerate(argv):
        if a == "--port" and i + 1 < len(argv) and argv[i + 1] == str(port):
            return True
        if a == f"--port={port}":
            return True
    return False
