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

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from packaging.version import Version

from dflashctl.defects.predicates import LLAMA_CPP, PREDICATES, parse_version, show_version
from dflashctl.errors import InputError
from dflashctl.files import read_bounded
from dflashctl.yaml_bounds import MAX_YAML_BYTES, check_bounds

CATALOGUE_PATH = Path(__file__).with_name("defects.yaml")


UNKNOWN = "unknown"


ENGINES = ("vllm", "sglang", "llama.cpp", "local")


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
    "not_lossless",
)


CERTAINTIES = ("confirmed", "likely", "possible")


# `dflashctl metrics` alarm kinds -> the defect effects that can explain them.
ALARM_EFFECTS: dict[str, tuple[str, ...]] = {
    "collapse": ("zero_acceptance", "low_acceptance", "wrong_layers"),
    "below_expected": ("low_acceptance", "wrong_layers", "long_context_cliff"),
    "decay": ("long_context_cliff",),
    "weak_later_positions": ("low_acceptance", "long_context_cliff"),
    "no_speculation": ("startup_failure", "crash_on_request", "crash"),
    "position_cliff": ("low_acceptance", "wrong_layers", "long_context_cliff"),
    "engine_crash": ("crash_on_request", "crash"),
}


@dataclass(frozen=True)
class VersionRange:
    """Affected releases: [introduced, fixed), either bound possibly unknown (None)."""

    introduced: Version | None
    fixed: Version | None
    fixed_by: str | None = None
    confirmed_affected: tuple[Version, ...] = ()
    confirmed_unaffected: tuple[Version, ...] = ()
    engine: str | None = None  # how versions are shown (llama.cpp builds as b9235)

    def show(self, v: Version | None) -> str:
        return show_version(self.engine, v) if v is not None else UNKNOWN

    def describe(self, floor: Version | None = None) -> str:
        lo = self.show(self.introduced)
        if self.introduced is None and floor is not None:
            lo += f" (DFlash support from {self.show(floor)})"
        hi = self.show(self.fixed)
        if self.fixed is None and self.fixed_by:
            hi += f" (fix: {self.fixed_by})"
        text = f"introduced {lo}; fixed {hi}"
        if self.confirmed_affected:
            text += "; affected: " + ", ".join(map(self.show, self.confirmed_affected))
        if self.confirmed_unaffected:
            text += "; not affected: " + ", ".join(map(self.show, self.confirmed_unaffected))
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "introduced": self.show(self.introduced),
            "fixed": self.show(self.fixed),
            "fixed_by": self.fixed_by,
            "confirmed_affected": [self.show(v) for v in self.confirmed_affected],
            "confirmed_unaffected": [self.show(v) for v in self.confirmed_unaffected],
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
    # serve refuses a `likely` match too (not only a `confirmed` one): the launch flags and the
    # build decide it, and no release needs measuring (llama.cpp: -sm tensor, the p-min default)
    serve_refuses_likely: bool = False

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
    dflash_since: Version | None  # None: the first release with DFlash is not known
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


class _Reader:
    """Typed access to one entry, every problem a one-line error naming file, entry and key."""

    def __init__(self, path: Path, where: str, data: Any, engine: str | None = None) -> None:
        if not isinstance(data, dict):
            raise InputError(f"{path}: {where} must be a mapping")
        self.path, self.where, self.data = path, where, data
        self.engine = engine  # whose version syntax bounds use (llama.cpp: builds)

    def _version(self, key: str, value: str) -> Version:
        try:
            return parse_version(value, "", self.engine)
        except InputError:
            form = "a llama.cpp build (b<number>)" if self.engine == LLAMA_CPP else "a version"
            if self.engine != LLAMA_CPP:
                form += " (PEP 440)"
            raise self.fail(key, f"{value!r} is not {form}") from None

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
        return self._version(key, value)

    def versions(self, key: str) -> tuple[Version, ...]:
        value = self.data.get(key, [])
        if not isinstance(value, list):
            raise self.fail(key, "must be a list of version strings")
        out = []
        for v in value:
            if not isinstance(v, str):
                raise self.fail(key, f"{v!r}: quote versions as strings")
            out.append(self._version(key, v))
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
        engine=r.engine,
    )
    show = vr.show
    if vr.introduced and vr.fixed and vr.introduced >= vr.fixed:
        raise r.fail("fixed", f"{show(vr.fixed)} is not after introduced {show(vr.introduced)}")
    for v in vr.confirmed_affected:
        if (vr.introduced and v < vr.introduced) or (vr.fixed and v >= vr.fixed):
            raise r.fail("confirmed_affected", f"{show(v)} is outside [introduced, fixed)")
        if any(v >= u for u in vr.confirmed_unaffected):
            raise r.fail(
                "confirmed_affected", f"{show(v)} is at or after a release listed unaffected"
            )
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
    if spec.takes_value:
        if not isinstance(arg, str | int) or isinstance(arg, bool):
            raise r.fail("conditions", f"{name} takes one value (a name or a number)")
        return Condition(str(name), arg)
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
        {"mitigation", "serve_refuses_likely"},
    )
    defect_id = r.text("id")
    refuses = r.data.get("serve_refuses_likely", False)
    if not isinstance(refuses, bool):
        raise r.fail("serve_refuses_likely", "must be true or false")
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", defect_id):
        raise r.fail("id", f"{defect_id!r}: use lowercase letters, digits and dashes")
    conditions = r.data["conditions"]
    if not isinstance(conditions, list):
        raise r.fail("conditions", "must be a list ([] for none)")
    sources = r.data["sources"]
    if not isinstance(sources, list) or not sources or not all(isinstance(s, str) for s in sources):
        raise r.fail("sources", "must be a non-empty list of strings")
    engine = r.choice("engine", ENGINES)
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
        engine=engine,
        versions=_parse_versions(
            _Reader(path, f"defect {defect_id}: versions", r.data["versions"], engine)
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
        serve_refuses_likely=refuses,
    )


def parse_catalogue(text: str, path: Path) -> Catalogue:
    """Parse and validate catalogue YAML; any problem is a one-line `InputError`."""
    try:
        check_bounds(text)
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
        er = _Reader(path, f"engines: {name}", body, str(name))
        er.keys({"dflash_since", "source"})
        # `unknown` only where the sources do not give the first release with DFlash
        engines[str(name)] = EngineInfo(str(name), er.bound("dflash_since"), er.text("source"))
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
        text = read_bounded(path, MAX_YAML_BYTES, "defect catalogue").decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read the defect catalogue {path}: {e}") from None
    return parse_catalogue(text, path)


def load_catalogue(path: Path | None = None) -> Catalogue:
    """The catalogue at `path`, default the package's defects.yaml (parsed once per process)."""
    return _load((path or CATALOGUE_PATH).resolve())
