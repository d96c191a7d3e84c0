"""Pinned drafters from playbooks/drafters/*.yaml; no network, no printing.

One YAML file per drafter holds its repo, pinned revision, files with sha256 pins, the canonical
config values and the target it was trained for (shared docs: dflash-facts.md §4). Values the
sources do not confirm are listed under `unconfirmed:`; a difference from one of them is a
warning, never a mismatch. Unknown values are `null` and are not checked; the fields the sources
do not publish at all are named under `not_published:` (null there, never a made-up number; even
the required `architectures`, `num_hidden_layers` and `hidden_size` may be null when listed).
The registry is data with a schema: a malformed file is a `RegistryError` naming the file, the
line and the key.

The playbooks directory is `$DFLASHCTL_PLAYBOOKS` when set (a site's own registry, or a test's),
else `playbooks/` next to the package in a checkout, else the copy the wheel carries as
`dflashctl/_playbooks` (pyproject force-includes it).
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from dflashctl.drafter.config import FULL, SLIDING
from dflashctl.errors import InputError, RegistryError
from dflashctl.files import read_bounded

LOCK_NAME = "dflashctl.lock.json"
HEX40 = re.compile(r"[0-9a-f]{40}")
HEX64 = re.compile(r"[0-9a-f]{64}")
REPO_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")
NAME_RE = re.compile(r"[a-z0-9][a-z0-9._-]*")
KINDS = ("dflash", "dflash2", "dspark")
CONFIG_FORMATS = ("native", "speculators", "gguf")  # z-lab's dflash_config, vLLM's, llama.cpp's
CONFIDENCE = ("high", "medium-high", "medium", "low")
PLAYBOOKS_ENV = "DFLASHCTL_PLAYBOOKS"


# Drafters that ship inside dflashctl (no Hub repo): registry name -> package folder
EMBEDDED = {"demo": ("assets", "demo", "drafter")}


def embedded_dir(name: str) -> Path | None:
    """The folder of a drafter that ships with dflashctl, for its registry name."""
    parts = EMBEDDED.get(name)
    return Path(__file__).resolve().parents[1].joinpath(*parts) if parts else None


def playbooks_dir() -> Path:
    """`$DFLASHCTL_PLAYBOOKS`, else `playbooks/` of a checkout, else the installed copy."""
    override = os.environ.get(PLAYBOOKS_ENV)
    if override:
        return Path(override).expanduser()
    package = Path(__file__).resolve().parents[1]
    checkout = package.parent / "playbooks"
    if (checkout / "drafters").is_dir():
        return checkout
    return package / "_playbooks"


@dataclass(frozen=True)
class FileSpec:
    path: str
    sha256: str | None = None
    size: int | None = None


@dataclass(frozen=True)
class ExpectedAcceptance:
    """Mean acceptance length τ (tokens per verify, bonus included) a healthy deploy shows."""

    min: float
    max: float
    source: str


@dataclass(frozen=True)
class PublishedAcceptance:
    """One published τ on one benchmark: shown, never used as a floor for other traffic (a
    GSM8K figure is far above what chat reaches on a healthy deploy)."""

    tau: float
    benchmark: str
    source: str


@dataclass(frozen=True)
class TargetPackage:
    """A target shipped inside a package (the demo pair's: a GGUF in a PyPI wheel)."""

    name: str
    version: str
    wheel: str  # the wheel's file name
    sha256: str
    member: str  # the model file's path inside the wheel


@dataclass(frozen=True)
class TargetSpec:
    repo: str | None
    num_hidden_layers: int | None
    hidden_size: int | None
    vocab_size: int | None
    package: TargetPackage | None = None
    files: tuple[FileSpec, ...] = ()  # what setting the target up must produce


@dataclass(frozen=True)
class DrafterEntry:
    name: str
    repo: str
    revision: str | None
    kind: str
    confidence: str
    source: str
    architectures: tuple[str, ...] | None  # None: not published
    num_hidden_layers: int | None
    hidden_size: int | None
    target: TargetSpec
    model_type: str | None = None
    intermediate_size: int | None = None
    num_attention_heads: int | None = None
    num_key_value_heads: int | None = None
    head_dim: int | None = None
    attention_bias: bool | None = None
    vocab_size: int | None = None
    draft_vocab_size: int | None = None  # speculators: the drafter's own, reduced vocabulary
    block_size: int | None = None
    mask_token_id: int | None = None
    target_layer_ids: tuple[int, ...] | None = None
    layer_types: tuple[str, ...] | None = None
    sliding_window: int | None = None
    is_causal: bool | None = None
    rope_theta: float | None = None
    # other canonical `dflash_config` keys (DFlash 2: conv_kernel_size, selector_rank, ...)
    dflash_config: tuple[tuple[str, Any], ...] = ()
    files: tuple[FileSpec, ...] = ()
    expected_acceptance: ExpectedAcceptance | None = None
    published_acceptance: tuple[PublishedAcceptance, ...] = ()
    unconfirmed: frozenset[str] = frozenset()
    notes: str | None = None
    # trained with thinking traces (False: serve with thinking off, enable_thinking=False)
    thinking: bool | None = None
    training_context: int | None = None  # tokens the drafter saw in training (RoPE beyond it)
    config_format: str | None = None  # native | speculators | gguf, as published
    # fields the sources give no value for: null in the entry and never checked against it
    not_published: frozenset[str] = frozenset()
    source_file: Path | None = field(default=None, compare=False)

    def is_unconfirmed(self, key: str) -> bool:
        return key in self.unconfirmed

    @property
    def has_sliding_layers(self) -> bool:
        return bool(self.layer_types) and SLIDING in (self.layer_types or ())


# ---- schema ---------------------------------------------------------------------------------

# key -> (kind, required). Kinds: str, int, num, bool, strlist, intlist, layertypes, mapping
# names handled by dedicated parsers: files, expected_acceptance, target, dflash_config.
TOP_KEYS: dict[str, tuple[str, bool]] = {
    "name": ("str", True),
    "repo": ("str", True),
    "revision": ("revision", True),
    "kind": ("str", True),
    "confidence": ("str", True),
    "source": ("str", True),
    "notes": ("str", False),
    "files": ("files", False),
    "architectures": ("strlist", True),
    "model_type": ("str", False),
    "num_hidden_layers": ("int", True),
    "hidden_size": ("int", True),
    "intermediate_size": ("int", False),
    "num_attention_heads": ("int", False),
    "num_key_value_heads": ("int", False),
    "head_dim": ("int", False),
    "attention_bias": ("bool", False),
    "vocab_size": ("int", False),
    "draft_vocab_size": ("int", False),
    "block_size": ("int", False),
    "mask_token_id": ("int", False),
    "target_layer_ids": ("intlist", False),
    "layer_types": ("layertypes", False),
    "sliding_window": ("int", False),
    "is_causal": ("bool", False),
    "rope_theta": ("num", False),
    "dflash_config": ("mapping", False),
    "expected_acceptance": ("acceptance", False),
    "published_acceptance": ("published", False),
    "target": ("target", True),
    "unconfirmed": ("strlist", False),
    "thinking": ("bool", False),
    "training_context": ("int", False),
    "config_format": ("str", False),
    "not_published": ("strlist", False),
}
# Required keys that may be null when `not_published:` names them.
MAY_BE_UNPUBLISHED = ("architectures", "num_hidden_layers", "hidden_size")
TARGET_KEYS: dict[str, tuple[str, bool]] = {
    "repo": ("str", False),
    "num_hidden_layers": ("int", False),
    "hidden_size": ("int", False),
    "vocab_size": ("int", False),
    "package": ("package", False),
    "files": ("files", False),
}
PACKAGE_KEYS: dict[str, tuple[str, bool]] = {
    "name": ("str", True),
    "version": ("str", True),
    "wheel": ("str", True),
    "sha256": ("sha256", True),
    "member": ("str", True),
}
FILE_KEYS: dict[str, tuple[str, bool]] = {
    "path": ("str", True),
    "sha256": ("sha256", False),
    "size": ("int", False),
}
PUBLISHED_KEYS: dict[str, tuple[str, bool]] = {
    "tau": ("num", True),
    "benchmark": ("str", True),
    "source": ("str", True),
}
ACCEPTANCE_KEYS: dict[str, tuple[str, bool]] = {
    "min": ("num", True),
    "max": ("num", True),
    "source": ("str", True),
}
# Fields `unconfirmed:` may name.
UNCONFIRMABLE = frozenset(
    [
        k
        for k in TOP_KEYS
        if k not in ("name", "repo", "kind", "confidence", "source", "notes", "not_published")
    ]
    + [f"target.{k}" for k in TARGET_KEYS]
)
TYPE_WORDS = {
    "str": "a string",
    "int": "an integer",
    "num": "a number",
    "bool": "true or false",
    "strlist": "a list of strings",
    "intlist": "a list of integers",
    "layertypes": f"a list of {SLIDING!r} / {FULL!r}",
    "revision": "a 40-hex commit id or null",
    "sha256": "a 64-hex sha256 or null",
    "mapping": "a mapping",
    "files": "a list of {path, sha256, size}",
    "acceptance": "a mapping {min, max, source}",
    "published": "a list of {tau, benchmark, source}",
    "target": "a mapping {repo, num_hidden_layers, hidden_size, vocab_size, package, files}",
    "package": "a mapping {name, version, wheel, sha256, member}",
}


class _Doc:
    """One YAML file: its data plus the line of every key, for error messages."""

    def __init__(self, path: Path, text: str) -> None:
        import yaml

        from dflashctl.yaml_bounds import load_with_lines, yaml_problem

        self.path = path
        try:
            loaded = load_with_lines(text)
        except yaml.YAMLError as e:
            raise RegistryError(f"{path}{yaml_problem(e)}") from None
        if loaded is None:
            raise RegistryError(f"{path}: empty file", "a drafter entry is a YAML mapping")
        self.data, self.lines = loaded

    def error(self, key: tuple[str, ...], message: str, hint: str | None = None) -> RegistryError:
        line = None
        for n in range(len(key), 0, -1):
            line = self.lines.get(key[:n])
            if line is not None:
                break
        where = f"{self.path}:{line}" if line else str(self.path)
        dotted = ".".join(key) if key else "(top level)"
        return RegistryError(f"{where}: key '{dotted}': {message}", hint)


def _type_ok(kind: str, value: Any) -> bool:
    if value is None:
        return True
    if kind == "str":
        return isinstance(value, str) and bool(value.strip())
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "num":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "strlist":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if kind == "intlist":
        return isinstance(value, list) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        )
    if kind == "layertypes":
        return isinstance(value, list) and all(v in (SLIDING, FULL) for v in value)
    if kind == "revision":
        return isinstance(value, str) and HEX40.fullmatch(value) is not None
    if kind == "sha256":
        return isinstance(value, str) and HEX64.fullmatch(value) is not None
    if kind in ("mapping", "acceptance", "target", "package"):
        return isinstance(value, dict)
    if kind in ("files", "published"):
        return isinstance(value, list)
    return False


def _check_keys(
    doc: _Doc, data: Any, schema: dict[str, tuple[str, bool]], prefix: tuple[str, ...]
) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise doc.error(prefix, f"must be a mapping, found {type(data).__name__}")
    for key in data:
        if not isinstance(key, str) or key not in schema:
            close = difflib.get_close_matches(str(key), list(schema), n=1)
            hint = f"did you mean '{close[0]}'?" if close else f"allowed: {', '.join(schema)}"
            raise doc.error((*prefix, str(key)), "unknown key", hint)
    for key, (kind, required) in schema.items():
        if key not in data:
            if required:
                raise doc.error(prefix, f"missing required key '{key}'")
            continue
        value = data[key]
        unpublished = key in MAY_BE_UNPUBLISHED and key in (data.get("not_published") or [])
        if required and value is None and kind != "revision" and not unpublished:
            raise doc.error((*prefix, key), f"must be {TYPE_WORDS[kind]}, found null")
        if not _type_ok(kind, value):
            shown = repr(value) if not isinstance(value, dict | list) else type(value).__name__
            if isinstance(value, list) and len(repr(value)) < 80:
                shown = repr(value)
            raise doc.error((*prefix, key), f"must be {TYPE_WORDS[kind]}, found {shown}")
    return data


def _files(doc: _Doc, items: Any, prefix: tuple[str, ...]) -> tuple[FileSpec, ...]:
    files = []
    for i, item in enumerate(items or []):
        item = _check_keys(doc, item, FILE_KEYS, (*prefix, str(i)))
        files.append(FileSpec(item["path"], item.get("sha256"), item.get("size")))
    return tuple(files)


def _tuple(value: Any) -> tuple[Any, ...] | None:
    return tuple(value) if value is not None else None


def parse_entry(path: Path, text: str) -> DrafterEntry:
    """Validate one YAML document and build its entry (RegistryError on any problem)."""
    doc = _Doc(path, text)
    data = _check_keys(doc, doc.data, TOP_KEYS, ())

    name = data["name"]
    if not NAME_RE.fullmatch(name):
        raise doc.error(("name",), f"{name!r} must be lowercase letters, digits, '.', '-', '_'")
    if path.suffix in (".yaml", ".yml") and path.stem != name:
        raise doc.error(("name",), f"{name!r} differs from the file name {path.name!r}")
    if not REPO_RE.fullmatch(data["repo"]):
        raise doc.error(("repo",), f"{data['repo']!r} is not 'org/name'")
    if data["kind"] not in KINDS:
        raise doc.error(("kind",), f"{data['kind']!r} is not one of {', '.join(KINDS)}")
    if data["confidence"] not in CONFIDENCE:
        raise doc.error(
            ("confidence",), f"{data['confidence']!r} is not one of {', '.join(CONFIDENCE)}"
        )
    fmt = data.get("config_format")
    if fmt is not None and fmt not in CONFIG_FORMATS:
        raise doc.error(("config_format",), f"{fmt!r} is not one of {', '.join(CONFIG_FORMATS)}")
    not_published = data.get("not_published") or []
    for i, key in enumerate(not_published):
        if key not in UNCONFIRMABLE:
            raise doc.error(("not_published", str(i)), f"{key!r} is not a field of an entry")
        where = data.get("target") if key.startswith("target.") else data
        value = where.get(key.removeprefix("target.")) if isinstance(where, dict) else None
        if value is not None:
            raise doc.error(
                ("not_published", str(i)),
                f"{key} is listed as not published but has the value {value!r}",
                "a published value stays; an unknown one is null",
            )
    for key in (
        "num_hidden_layers",
        "hidden_size",
        "vocab_size",
        "draft_vocab_size",
        "block_size",
        "sliding_window",
    ):
        value = data.get(key)
        if value is not None and value <= 0:
            raise doc.error((key,), f"must be positive, found {value}")

    target_data = _check_keys(doc, data["target"], TARGET_KEYS, ("target",))
    package = None
    if target_data.get("package") is not None:
        pkg = _check_keys(doc, target_data["package"], PACKAGE_KEYS, ("target", "package"))
        package = TargetPackage(
            pkg["name"], pkg["version"], pkg["wheel"], pkg["sha256"], pkg["member"]
        )
    target = TargetSpec(
        repo=target_data.get("repo"),
        num_hidden_layers=target_data.get("num_hidden_layers"),
        hidden_size=target_data.get("hidden_size"),
        vocab_size=target_data.get("vocab_size"),
        package=package,
        files=_files(doc, target_data.get("files"), ("target", "files")),
    )
    files = _files(doc, data.get("files"), ("files",))

    acceptance = None
    if data.get("expected_acceptance") is not None:
        acc = _check_keys(
            doc, data["expected_acceptance"], ACCEPTANCE_KEYS, ("expected_acceptance",)
        )
        if not 1 <= acc["min"] <= acc["max"]:
            raise doc.error(
                ("expected_acceptance",),
                f"needs 1 <= min <= max (acceptance length counts the bonus token), "
                f"found {acc['min']}..{acc['max']}",
            )
        acceptance = ExpectedAcceptance(float(acc["min"]), float(acc["max"]), acc["source"])

    published = []
    for i, item in enumerate(data.get("published_acceptance") or []):
        key = ("published_acceptance", str(i))
        item = _check_keys(doc, item, PUBLISHED_KEYS, key)
        if not item["tau"] >= 1:
            raise doc.error(key, f"tau counts the bonus token: at least 1, found {item['tau']}")
        published.append(PublishedAcceptance(float(item["tau"]), item["benchmark"], item["source"]))

    dflash_extra = data.get("dflash_config") or {}
    for key, value in dflash_extra.items():
        if not isinstance(value, int | float | bool | str):
            raise doc.error(("dflash_config", str(key)), "must be a scalar")

    unconfirmed = data.get("unconfirmed") or []
    for i, key in enumerate(unconfirmed):
        if key not in UNCONFIRMABLE:
            close = difflib.get_close_matches(key, sorted(UNCONFIRMABLE), n=1)
            raise doc.error(
                ("unconfirmed", str(i)),
                f"{key!r} is not a field that can be unconfirmed",
                f"did you mean '{close[0]}'?" if close else None,
            )

    layer_types = data.get("layer_types")
    if (
        layer_types is not None
        and data["num_hidden_layers"] is not None
        and len(layer_types) != data["num_hidden_layers"]
    ):
        raise doc.error(
            ("layer_types",),
            f"has {len(layer_types)} entries but num_hidden_layers is {data['num_hidden_layers']}",
        )
    ids = data.get("target_layer_ids")
    n_target = target.num_hidden_layers
    if ids is not None and n_target is not None and any(not 0 <= i < n_target for i in ids):
        raise doc.error(("target_layer_ids",), f"{ids} has ids outside 0..{n_target - 1}")
    mask, vocab = data.get("mask_token_id"), data.get("vocab_size")
    if mask is not None and vocab is not None and not 0 <= mask < vocab:
        raise doc.error(("mask_token_id",), f"{mask} is not below vocab_size {vocab}")
    if (
        layer_types
        and SLIDING in layer_types
        and data.get("sliding_window") is None
        and "sliding_window" not in unconfirmed
    ):
        raise doc.error(
            ("sliding_window",), "sliding layers need a window (or mark it unconfirmed)"
        )

    if data.get("training_context") is not None and data["training_context"] <= 0:
        raise doc.error(("training_context",), "a number of tokens above 0")

    return DrafterEntry(
        name=name,
        repo=data["repo"],
        revision=data.get("revision"),
        kind=data["kind"],
        confidence=data["confidence"],
        source=data["source"],
        architectures=_tuple(data["architectures"]),
        num_hidden_layers=data["num_hidden_layers"],
        hidden_size=data["hidden_size"],
        target=target,
        model_type=data.get("model_type"),
        intermediate_size=data.get("intermediate_size"),
        num_attention_heads=data.get("num_attention_heads"),
        num_key_value_heads=data.get("num_key_value_heads"),
        head_dim=data.get("head_dim"),
        attention_bias=data.get("attention_bias"),
        vocab_size=vocab,
        draft_vocab_size=data.get("draft_vocab_size"),
        block_size=data.get("block_size"),
        mask_token_id=mask,
        target_layer_ids=_tuple(ids),
        layer_types=_tuple(layer_types),
        sliding_window=data.get("sliding_window"),
        is_causal=data.get("is_causal"),
        rope_theta=float(data["rope_theta"]) if data.get("rope_theta") is not None else None,
        dflash_config=tuple(sorted(dflash_extra.items())),
        files=files,
        expected_acceptance=acceptance,
        published_acceptance=tuple(published),
        unconfirmed=frozenset(unconfirmed),
        notes=data.get("notes"),
        thinking=data.get("thinking"),
        training_context=data.get("training_context"),
        config_format=fmt,
        not_published=frozenset(not_published),
        source_file=path,
    )


def load_entries(directory: Path | None = None) -> tuple[DrafterEntry, ...]:
    """Every entry under `directory/drafters/` (default: the installed playbooks), sorted."""
    from dflashctl.yaml_bounds import MAX_YAML_BYTES

    base = directory if directory is not None else playbooks_dir()
    drafters = base / "drafters"
    if not drafters.is_dir():
        raise RegistryError(
            f"drafter registry not found: {drafters}",
            "reinstall dflashctl, or run from a checkout that has playbooks/drafters/",
        )
    entries: list[DrafterEntry] = []
    seen: dict[str, Path] = {}
    for path in sorted([*drafters.glob("*.yaml"), *drafters.glob("*.yml")]):
        try:
            text = read_bounded(path, MAX_YAML_BYTES, "registry entry").decode("utf-8")
        except InputError as e:
            raise RegistryError(e.message) from None
        except (OSError, UnicodeDecodeError) as e:
            raise RegistryError(f"{path}: cannot read: {e}") from None
        entry = parse_entry(path, text)
        for key in (entry.name, entry.repo.lower()):
            if key in seen:
                raise RegistryError(f"{path}: '{key}' is already defined in {seen[key]}")
            seen[key] = path
        entries.append(entry)
    return tuple(entries)


@cache
def _entries_in(directory: Path) -> tuple[DrafterEntry, ...]:
    return load_entries(directory)


def all_entries(directory: Path | None = None) -> tuple[DrafterEntry, ...]:
    """The entries of `directory`, or of `playbooks_dir()` (read once per directory)."""
    return _entries_in(playbooks_dir()) if directory is None else load_entries(directory)


def _keys(entry: DrafterEntry) -> set[str]:
    return {entry.name, entry.repo.lower(), entry.repo.split("/", 1)[1].lower()}


def find_entry(name: str, directory: Path | None = None) -> DrafterEntry | None:
    """The entry called `name` (registry name, `org/repo` or repo name; any case), or None."""
    wanted = name.strip().lower()
    for entry in all_entries(directory):
        if wanted in _keys(entry):
            return entry
    return None


def get_entry(name: str, directory: Path | None = None) -> DrafterEntry:
    """The entry called `name`; an unknown name is a RegistryError with close matches."""
    entry = find_entry(name, directory)
    if entry is not None:
        return entry
    entries = all_entries(directory)
    known = sorted({k for e in entries for k in (e.name, e.repo)})
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    close += [
        e.repo
        for e in entries
        if name.strip().lower() in e.repo.lower() and e.repo not in close and name.strip()
    ][:3]
    hint = (
        f"did you mean {', '.join(close)}?"
        if close
        else f"known drafters: {', '.join(e.name for e in entries)}"
    )
    raise RegistryError(f"unknown drafter '{name}'", hint)


# ---- identification -------------------------------------------------------------------------


@dataclass(frozen=True)
class Identification:
    """Which entry a config belongs to, how that was decided, and the near misses."""

    entry: DrafterEntry | None
    how: str
    candidates: tuple[str, ...] = ()


# What identifies a drafter: these must be known and confirmed in an entry, and equal in the
# config, for the structure alone to pick the entry (fields that go stale, like the mask id,
# layer ids or layer types, never take part).
IDENTITY_FIELDS = ("architectures", "hidden_size", "num_hidden_layers", "vocab_size")
# Further confirmed fields that must not contradict the entry.
SHAPE_FIELDS = ("intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim")


def _num_target_layers(cfg: dict[str, Any]) -> Any:
    dfc = cfg.get("dflash_config")
    if isinstance(dfc, dict) and dfc.get("num_target_layers") is not None:
        return dfc["num_target_layers"]
    return cfg.get("num_target_layers")


def _entry_value(entry: DrafterEntry, key: str) -> Any:
    if key == "target.num_hidden_layers":
        return entry.target.num_hidden_layers
    value = getattr(entry, key)
    return list(value) if isinstance(value, tuple) else value


def _conflicts(cfg: dict[str, Any], entry: DrafterEntry) -> list[str]:
    """Confirmed entry fields the config contradicts (absent config fields never conflict)."""
    bad = []
    for key in (*IDENTITY_FIELDS, *SHAPE_FIELDS, "target.num_hidden_layers"):
        expected = _entry_value(entry, key)
        found = _num_target_layers(cfg) if key == "target.num_hidden_layers" else cfg.get(key)
        if found is None or expected is None or entry.is_unconfirmed(key):
            continue
        if found != expected:
            bad.append(key)
    return bad


def _structural_fit(cfg: dict[str, Any], entry: DrafterEntry) -> list[str] | None:
    """The fields that tie `cfg` to `entry`, or None when the structure does not identify it."""
    for key in IDENTITY_FIELDS:
        expected = _entry_value(entry, key)
        if expected is None or entry.is_unconfirmed(key) or cfg.get(key) != expected:
            return None
    if _conflicts(cfg, entry):
        return None
    matched = list(IDENTITY_FIELDS)
    if _num_target_layers(cfg) is not None:
        matched.append("num_target_layers")
    matched += [k for k in SHAPE_FIELDS if cfg.get(k) is not None and _entry_value(entry, k)]
    return matched


def _path_repo_hints(path: Path | None, cfg: dict[str, Any]) -> list[str]:
    hints: list[str] = []
    if path is not None:
        directory = path if path.is_dir() else path.parent
        for part in directory.resolve().parts:
            if part.startswith("models--"):
                hints.append(part[len("models--") :].replace("--", "/", 1))
        hints.append(directory.resolve().name)
    name_or_path = cfg.get("_name_or_path")
    if isinstance(name_or_path, str) and name_or_path:
        hints.append(name_or_path.rstrip("/"))
        hints.append(name_or_path.rstrip("/").rsplit("/", 1)[-1])
    return hints


def identify_explained(
    cfg: dict[str, Any],
    lock: dict[str, Any] | None = None,
    *,
    path: Path | None = None,
    directory: Path | None = None,
) -> Identification:
    """Pick the registry entry `cfg` belongs to, when exactly one fits.

    In order: a lock file naming the repo; the path (a hub cache `models--org--name` folder or
    a directory named like the repo) or `_name_or_path`, provided the structure does not
    contradict it; then the structure alone: architectures, hidden_size, num_hidden_layers and
    vocab_size equal to an entry's confirmed values (and num_target_layers, head counts and
    intermediate_size, where present, not contradicting them), for exactly one entry.
    """
    entries = all_entries(directory)
    if lock:
        for key in ("repo", "repo_id", "drafter", "name"):
            value = lock.get(key)
            if isinstance(value, str):
                found = find_entry(value, directory)
                if found is not None:
                    return Identification(found, f"lock file names {value}")
    for hint in _path_repo_hints(path, cfg):
        found = find_entry(hint, directory)
        if found is not None and not _conflicts(cfg, found):
            return Identification(found, f"name '{hint}'")

    fits = [(e, m) for e in entries if (m := _structural_fit(cfg, e)) is not None]
    if len(fits) == 1:
        entry, matched = fits[0]
        return Identification(entry, "structure: " + ", ".join(matched))
    if not fits:
        return Identification(None, "no registry entry has this structure")
    names = tuple(e.repo for e, _ in fits)
    return Identification(None, f"the structure fits {len(fits)} entries", names)


def identify(
    cfg: dict[str, Any], lock: dict[str, Any] | None = None, *, path: Path | None = None
) -> DrafterEntry | None:
    """The registry entry `cfg` belongs to when exactly one fits, else None."""
    return identify_explained(cfg, lock, path=path).entry
