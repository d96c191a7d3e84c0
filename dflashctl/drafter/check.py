"""Is a DFlash drafter's config.json right, and will the engine read it right?

`check_drafter()` is pure: it compares a config (and optionally the safetensors header and the
target's config) with the registry's canonical values and with the rules that need no registry
(`rules/`), and returns one `Row` (dflashctl/report.py) per checked thing; a failed check is
data, not an exception.
`drafter.verify` reads the files, runs it, applies `--fix` and builds the `VerifyReport`.
Nothing here prints or exits. Facts: shared dflash-facts.md §2–§8; field resolution mirrors
vLLM 0.32 through `drafter.config.resolve()`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dflashctl.drafter.config import (
    config_path,
    dflash_section,
    is_int,
    read_json_bytes,
    read_json_object,
    resolve,
    target_text_config,
)
from dflashctl.drafter.formats import Reading, read_format
from dflashctl.drafter.gguf_config import is_gguf
from dflashctl.drafter.header import Header
from dflashctl.drafter.registry import DrafterEntry, Identification
from dflashctl.drafter.report import VerifyReport, layer_table, read_lock, registry_rows
from dflashctl.drafter.rules.base import ENGINES, Ctx
from dflashctl.drafter.rules.config import (
    check_block,
    check_layer_ids,
    check_layers,
    check_mask,
    check_misc,
    check_structure,
    check_transformers,
)
from dflashctl.drafter.rules.serving import check_serving
from dflashctl.drafter.rules.target import check_engine, check_target
from dflashctl.drafter.rules.weights import check_weights
from dflashctl.drafter.schema import require_types
from dflashctl.errors import UsageError
from dflashctl.report import Row


def _n_target_layers(
    cfg: dict[str, Any], target: dict[str, Any] | None, entry: DrafterEntry | None
) -> tuple[int | None, str | None]:
    if target is not None and is_int(target.get("num_hidden_layers")):
        return target["num_hidden_layers"], "target config"
    for value, source in (
        (dflash_section(cfg).get("num_target_layers"), "dflash_config.num_target_layers"),
        (cfg.get("num_target_layers"), "num_target_layers"),
    ):
        if is_int(value) and value > 0:
            return value, f"drafter {source}"
    if entry is not None and entry.target.num_hidden_layers is not None:
        return entry.target.num_hidden_layers, f"registry ({entry.repo})"
    return None, None


def check_drafter(
    cfg: dict[str, Any],
    *,
    entry: DrafterEntry | None = None,
    target: dict[str, Any] | None = None,
    header: Header | None = None,
    engine: str = "vllm",
) -> list[Row]:
    """All checks of one drafter config (pure). `target` is the target's config (its text part
    is used), `header` the drafter's safetensors tensor table, `engine` vllm|sglang|local."""
    return context(cfg, entry=entry, target=target, header=header, engine=engine).checks


def context(
    cfg: dict[str, Any],
    *,
    entry: DrafterEntry | None,
    target: dict[str, Any] | None,
    header: Header | None,
    engine: str,
    reading: Reading | None = None,
    max_model_len: int | None = None,
    target_thinks: bool | None = None,
) -> Ctx:
    """`reading`: a config already read from another format (a GGUF drafter); else `cfg` is
    read as z-lab native or speculators."""
    if engine not in ENGINES:
        raise UsageError(f"unknown engine '{engine}'", f"use one of: {', '.join(ENGINES)}")
    reading = reading or read_format(cfg)
    cfg = reading.native
    text = target_text_config(target) if target is not None else None
    n_target, n_src = _n_target_layers(cfg, text, entry)
    r_v1 = resolve(cfg, num_target_layers=n_target, runner="v1")
    r_v2 = resolve(cfg, num_target_layers=n_target, runner="v2")
    c = Ctx(
        cfg=cfg,
        entry=entry,
        target=text,
        header=header,
        engine=engine,
        n_target=n_target,
        n_target_source=n_src,
        r=r_v1 if engine == "vllm" else r_v2,
        r_v2=r_v2,
        max_model_len=max_model_len,
        target_thinks=target_thinks,
    )
    if reading.format != "z-lab native":
        how = "vLLM's speculators loader" if reading.is_speculators else "llama.cpp"
        c.add("format", "ok", reading.format, None, f"read as {how} reads it")
        for name, status, found, hint in reading.notes:
            c.add(name, status, found, None, hint)
        for name, status, found, expected, hint in reading.problems:
            c.add(name, status, found, expected, hint)
        if reading.speculative_tokens is not None:
            c.add("speculative_tokens", "ok", reading.speculative_tokens, None,
                  "K from speculators_config.proposal_methods[0]")  # fmt: skip
    check_structure(c)
    check_mask(c)
    check_layer_ids(c)
    check_layers(c)
    check_transformers(c)
    check_block(c)
    check_misc(c)
    if header is not None:
        check_weights(c, header)
    if text is not None:
        check_target(c, text, target is not text)
    check_engine(c)
    check_serving(c)
    return c


def verify_local(
    path: Path,
    *,
    drafter: str | None = None,
    target: Path | None = None,
    engine: str = "vllm",
    fix: bool = False,
    max_model_len: int | None = None,
) -> VerifyReport:
    """Read the drafter at `path` on this machine (a directory or its config.json), check it,
    optionally fix it (`drafter.verify.run_verify` also reaches a serving host).

    Raises `DflashError`s (exit 2) when it cannot run; failed checks are in the report.
    """
    if engine not in ENGINES:
        raise UsageError(f"unknown engine '{engine}'", f"use one of: {', '.join(ENGINES)}")
    from dflashctl.drafter import registry
    from dflashctl.drafter.header import find_checkpoint, read_header

    if is_gguf(path):
        return _verify_gguf(path, drafter=drafter, target=target, engine=engine, fix=fix,
                            max_model_len=max_model_len)  # fmt: skip

    cfg_file = config_path(path)
    directory = cfg_file.parent
    if fix:
        from dflashctl.drafter.fix import read_for_fix

        original, stat0 = read_for_fix(cfg_file)
        cfg = _parse(original, cfg_file)
    else:
        original, cfg = read_json_bytes(cfg_file)
        stat0 = None

    require_types(cfg, cfg_file)
    lock = read_lock(directory)
    ident: Identification | None
    if drafter:
        entry: DrafterEntry | None = registry.get_entry(drafter)
        ident = Identification(entry, f"--drafter {drafter}")
    else:
        ident = registry.identify_explained(cfg, lock, path=cfg_file)
        entry = ident.entry

    checkpoint = find_checkpoint(directory)
    header = read_header(checkpoint) if checkpoint is not None else None

    target_cfg = None
    target_file = None
    thinks = None
    if target is not None:
        target_file = config_path(target)
        target_cfg = read_json_object(target_file, what="target config")
        thinks = _target_thinks(target_file.parent)

    def evaluate(data: dict[str, Any]) -> tuple[list[Row], Ctx]:
        ctx = context(data, entry=entry, target=target_cfg, header=header, engine=engine,
                      max_model_len=max_model_len, target_thinks=thinks)  # fmt: skip
        rows = registry_rows(directory, cfg_file, entry, ident, lock)
        if header is None:
            rows.append(
                Row(
                    "weights",
                    "warning",
                    None,
                    "model.safetensors",
                    "no safetensors beside the config: weight shapes not checked",
                )
            )
        return rows + ctx.checks, ctx

    checks, ctx = evaluate(cfg)
    report = _report(cfg_file, engine, checks, entry, ident, ctx, checkpoint, target_file)
    if not fix:
        return report

    from dflashctl.drafter.fix import apply_fix

    if read_format(cfg).is_speculators:
        raise UsageError(
            f"--fix edits z-lab native configs; {cfg_file} is in the speculators format",
            "edit aux_hidden_state_layer_ids / mask_token_id / speculators_config by hand "
            "(verify-config names what is wrong)",
        )
    assert stat0 is not None
    result = apply_fix(cfg_file, original, stat0, cfg, entry, checks)
    if not result.written:
        report.fix = result
        return report
    # The proof the write landed: read the file again from disk and check it again.
    _raw, fresh = read_json_bytes(cfg_file)
    after, ctx_after = evaluate(fresh)
    report.checks_before = checks
    report.checks = after
    report.resolved = ctx_after.r
    report.layers = layer_table(fresh, ctx_after.r)
    report.fix = result
    return report


def _target_thinks(target_dir: Path) -> bool | None:
    from dflashctl.drafter.chat_template import read_chat_template, thinks_by_default

    template = read_chat_template(target_dir)
    return thinks_by_default(template) if template is not None else None


def _parse(raw: bytes, path: Path) -> dict[str, Any]:
    from dflashctl.drafter.config import parse_json_object

    return parse_json_object(raw, path)


def _verify_gguf(
    path: Path,
    *,
    drafter: str | None,
    target: Path | None,
    engine: str,
    fix: bool,
    max_model_len: int | None = None,
) -> VerifyReport:
    """A llama.cpp drafter: its metadata read as the native view, judged by the same rules."""
    from dflashctl.drafter import registry
    from dflashctl.drafter.gguf_config import read_gguf

    if fix:
        raise UsageError(
            f"--fix edits config.json files; {path} is a GGUF drafter",
            "reconvert it from a corrected config (llama.cpp's convert_hf_to_gguf.py)",
        )
    reading = read_gguf(path)
    entry = registry.get_entry(drafter) if drafter else None
    ident = Identification(entry, f"--drafter {drafter}") if drafter else None
    target_file = config_path(target) if target is not None else None
    target_cfg = read_json_object(target_file, what="target config") if target_file else None
    thinks = _target_thinks(target_file.parent) if target_file else None
    ctx = context(reading.native, entry=entry, target=target_cfg, header=None, engine=engine,
                  reading=reading, max_model_len=max_model_len,
                  target_thinks=thinks)  # fmt: skip
    return _report(path, engine, ctx.checks, entry, ident, ctx, path, target_file)


def _report(
    path: Path,
    engine: str,
    checks: list[Row],
    entry: DrafterEntry | None,
    ident: Identification | None,
    ctx: Ctx,
    weights: Path | None,
    target: Path | None,
) -> VerifyReport:
    return VerifyReport(
        path=path,
        engine=engine,
        checks=checks,
        entry=entry,
        identification=ident,
        resolved=ctx.r,
        layers=layer_table(ctx.cfg, ctx.r),
        num_target_layers=ctx.n_target,
        num_target_layers_source=ctx.n_target_source,
        weights=weights,
        target=target,
    )
