"""playbook.py — deployment playbooks (`playbooks/*.yaml`): a small validated schema.

A playbook names what to serve and where:

    name: vllm-2xa100-tp2
    description: ...
    hosts:                      # default: [local]
      - gpu1                    # an ~/.ssh/config alias, [user@]host[:port], or `local`
      - host: alice@10.0.0.7:2222
        port: 8001              # any serve key may be overridden per host
    serve:
      engine: vllm              # local | vllm | sglang | llama.cpp
      model: Qwen/Qwen3-8B
      drafter: /models/Qwen3-8B-DFlash-b16
      tensor_parallel_size: 2
      extra_args: [--max-model-len, "8192"]
      speculative_config: {attention_backend: flash_attn}   # merged into vLLM's (yours win)
      env: {VLLM_USE_V2_MODEL_RUNNER: "1", HF_TOKEN: "${HF_TOKEN}"}

String values may hold `${NAME}` (or `${NAME:-default}`) references to this machine's
environment, expanded at load time (`$${` is a literal `${`); a reference to an unset variable
with no default is an error. An `env` value that holds a reference is a secret: it travels like
`pass_env` (never on a command line, never printed). docs/playbooks.md is the reference.

Every problem is a `PlaybookError` naming `file:line`, the key and what is wrong (line numbers
come from the YAML node marks). `SECTIONS` holds the schema of each top-level section; a later
command (`run`) adds its own sections there. Pure: no network, no printing.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dflashctl.errors import MAX_OPTION, InputError, PlaybookError, RegistryError
from dflashctl.files import read_bounded

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
ENV_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# ${NAME} or ${NAME:-default}; $${ is a literal ${
REF_RE = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")

# kind: str | int | posint | port | number | list | mapping | env | enum:a|b
SERVE_KEYS: dict[str, str] = {
    "engine": "enum:local|vllm|sglang|llama.cpp",
    "model": "str",
    "drafter": "str",
    "port": "port",
    "bind": "str",
    "num_speculative_tokens": "posint",
    "spec": "enum:dflash|none",
    "tensor_parallel_size": "posint",
    "served_model_name": "str",
    "python": "str",
    "executable": "str",
    "extra_args": "args",
    "speculative_config": "mapping",
    "env": "env",
    "pass_env": "envnames",
    "ready_timeout": "number",
}
HOST_KEYS: dict[str, str] = {"host": "str", "name": "name", **SERVE_KEYS}
TOP_KEYS: dict[str, str] = {"name": "name", "description": "str", "hosts": "hosts"}
# section name -> schema of its keys; `run` adds fetch/smoke/metrics sections here
# the steps `dflashctl run` adds around serve (see commands/run/run.py)
RUN_SECTIONS: dict[str, dict[str, str]] = {
    "fetch": {"drafter": "source", "revision": "str", "dir": "str"},
    "verify": {"registry": "registry", "engine": "enum:local|vllm|sglang"},
    "smoke": {"max_tokens": "posint", "min_tokens_per_s": "number", "timeout": "number",
              "prompts": "texts", "repetition": "enum:fail|warn"},
    "metrics": {"min_acceptance_length": "acceptance"},
}  # fmt: skip
SECTIONS: dict[str, dict[str, str]] = {"serve": SERVE_KEYS, **RUN_SECTIONS}

WORDS = {
    "str": "a non-empty string",
    "name": "a name of letters, digits, '.', '-', '_'",
    "posint": "a positive integer",
    "port": "a port number (1-65535)",
    "number": "a positive finite number",
    "acceptance": "a number of at least 1.0 (acceptance length counts the bonus token)",
    "texts": "a list of non-empty strings",
    "registry": "a drafter name from the registry",
    "source": "a drafter name from the registry, or org/repo",
    "args": "a list of strings (engine arguments)",
    "env": "a mapping of VARIABLE: value",
    "mapping": "a mapping of key: value (vLLM's --speculative-config keys)",
    "envnames": "a list of environment variable names",
    "hosts": "a list of hosts",
}


@dataclass(frozen=True)
class HostEntry:
    """One host of a playbook: `host` None is this machine; `serve` holds its overrides."""

    host: str | None
    name: str | None
    serve: dict[str, Any]
    line: int | None = None
    secret_env: frozenset[str] = frozenset()  # env keys whose value came from ${...}


@dataclass(frozen=True)
class Playbook:
    path: Path
    name: str
    description: str | None
    hosts: tuple[HostEntry, ...]
    sections: dict[str, dict[str, Any]] = field(default_factory=dict)
    secret_env: frozenset[str] = frozenset()  # serve.env keys whose value came from ${...}

    @property
    def serve(self) -> dict[str, Any]:
        return self.sections.get("serve", {})

    def serve_settings(self, entry: HostEntry) -> dict[str, Any]:
        """The `serve` section with this host's overrides applied (env maps are merged);
        `secret_env` lists the env keys whose value came from a `${...}` reference."""
        merged = dict(self.serve)
        for key, value in entry.serve.items():
            if key in ("env", "speculative_config") and isinstance(merged.get(key), dict):
                merged[key] = {**merged[key], **value}
            else:
                merged[key] = value
        secrets = {k for k in self.secret_env if k not in entry.serve.get("env", {})}
        secrets |= entry.secret_env
        if secrets:
            merged["secret_env"] = sorted(secrets)
        return merged


class _Doc:
    """The YAML document plus the line of each key path (from the node marks)."""

    def __init__(self, path: Path, text: str, environ: Mapping[str, str]) -> None:
        import yaml

        from dflashctl.yaml_bounds import load_with_lines, yaml_problem

        self.path = path
        self.environ = environ
        self.secret_env: dict[tuple[str, ...], set[str]] = {}  # mapping key path -> env keys
        try:
            loaded = load_with_lines(text)
        except yaml.YAMLError as e:
            raise PlaybookError(f"{path}{yaml_problem(e)}") from None
        if loaded is None:
            raise PlaybookError(f"{path}: empty playbook", "a playbook is a YAML mapping")
        self.data, self.lines = loaded

    def line(self, key: tuple[str, ...]) -> int | None:
        for n in range(len(key), -1, -1):
            line = self.lines.get(key[:n])
            if line is not None:
                return line
        return None

    def error(self, key: tuple[str, ...], message: str, hint: str | None = None) -> PlaybookError:
        line = self.line(key)
        where = f"{self.path}:{line}" if line else str(self.path)
        dotted = ".".join(key) if key else "(top level)"
        return PlaybookError(f"{where}: key '{dotted}': {message}", hint)

    def expand(self, key: tuple[str, ...], value: Any) -> tuple[Any, bool]:
        """`value` with its `${NAME}` references replaced from the environment (strings, and the
        strings inside lists and mappings): (expanded, whether it held a reference)."""
        if isinstance(value, list):
            pairs = [self.expand((*key, str(i)), v) for i, v in enumerate(value)]
            return [v for v, _ in pairs], any(r for _, r in pairs)
        if isinstance(value, dict):
            out, any_ref = {}, False
            for k, v in value.items():
                out[k], ref = self.expand((*key, str(k)), v)
                any_ref = any_ref or ref
            return out, any_ref
        if not isinstance(value, str) or "$" not in value:
            return value, False
        referenced = False

        def one(m: re.Match[str]) -> str:
            nonlocal referenced
            if m.group(0) == "$${":
                return "${"
            referenced = True
            name, default = m.group(1), m.group(2)
            got = self.environ.get(name)
            if got is None or (got == "" and default is not None):
                if default is None:
                    raise self.error(
                        key,
                        f"${{{name}}} is not set in the environment",
                        f"export {name}=... before running, or write ${{{name}:-default}}",
                    )
                return default
            return got

        return REF_RE.sub(one, value), referenced


def _ok(kind: str, value: Any) -> bool:
    if kind in ("str", "name", "registry", "source"):
        if not isinstance(value, str) or not value.strip():
            return False
        return kind != "name" or NAME_RE.fullmatch(value) is not None
    if kind == "posint":
        return isinstance(value, int) and not isinstance(value, bool) and value >= 1
    if kind == "port":
        return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 65536
    if kind in ("number", "acceptance"):  # finite and in range, as the commands' options
        if not isinstance(value, int | float) or isinstance(value, bool):
            return False
        if not math.isfinite(value) or value > MAX_OPTION:
            return False
        return value >= 1 if kind == "acceptance" else value > 0
    if kind == "texts":
        return isinstance(value, list) and all(isinstance(v, str) and v.strip() for v in value)
    if kind == "args":
        return isinstance(value, list) and all(
            isinstance(v, str | int | float) and not isinstance(v, bool) for v in value
        )
    if kind == "env":
        return isinstance(value, dict) and all(
            isinstance(k, str)
            and ENV_RE.fullmatch(k) is not None
            and isinstance(v, str | int | float | bool)
            for k, v in value.items()
        )
    if kind == "mapping":
        return isinstance(value, dict) and all(isinstance(k, str) for k in value)
    if kind == "envnames":
        return isinstance(value, list) and all(
            isinstance(v, str) and ENV_RE.fullmatch(v) is not None for v in value
        )
    if kind.startswith("enum:"):
        return value in kind[5:].split("|")
    return False


def _words(kind: str) -> str:
    if kind.startswith("enum:"):
        return "one of " + ", ".join(kind[5:].split("|"))
    return WORDS.get(kind, kind)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_mapping(
    doc: _Doc, data: Any, schema: dict[str, str], prefix: tuple[str, ...]
) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise doc.error(prefix, f"must be a mapping, found {type(data).__name__}")
    out: dict[str, Any] = {}
    for key, value in data.items():
        if not isinstance(key, str) or key not in schema:
            close = difflib.get_close_matches(str(key), list(schema), n=1)
            hint = f"did you mean '{close[0]}'?" if close else f"allowed: {', '.join(schema)}"
            raise doc.error((*prefix, str(key)), "unknown key", hint)
        kind = schema[key]
        if kind == "hosts":
            continue
        if kind == "env" and isinstance(value, dict):
            # each value on its own: the keys whose value holds a reference are secrets
            expanded = {k: doc.expand((*prefix, key, str(k)), v) for k, v in value.items()}
            value = {k: v for k, (v, _) in expanded.items()}
            if refs := {k for k, (_, ref) in expanded.items() if ref}:
                doc.secret_env[prefix] = refs
        else:
            value, referenced = doc.expand((*prefix, key), value)
            if referenced and kind in ("posint", "port", "number") and isinstance(value, str):
                value = _number(value)
        if not _ok(kind, value):
            raise doc.error((*prefix, key), f"must be {_words(kind)}, found {_shown(value)}")
        if kind == "registry" or (kind == "source" and "/" not in value):
            _check_registered(doc, (*prefix, key), value)
        if kind == "args":
            value = [str(v) for v in value]
        elif kind == "env":
            value = {k: _env_value(v) for k, v in value.items()}
        out[key] = value
    return out


def _check_registered(doc: _Doc, key: tuple[str, ...], name: str) -> None:
    """A drafter name the registry does not know is an error here, before anything runs."""
    from dflashctl.drafter.registry import get_entry

    try:
        get_entry(name)
    except RegistryError as e:  # an unreadable registry file says so itself, with its path
        raise doc.error(key, f"no drafter {name!r} in the registry", e.hint) from None


def _number(text: str) -> int | float | str:
    """A referenced value for a numeric key: `${PORT}` -> 8001 (left as text if not a number)."""
    for kind in (int, float):
        try:
            return kind(text.strip())
        except ValueError:
            pass
    return text


def _env_value(v: Any) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    return str(v)


def _host_entry(doc: _Doc, item: Any, i: int) -> HostEntry:
    key = ("hosts", str(i))
    line = doc.line(key)
    if isinstance(item, str):
        item = doc.expand(key, item)[0]
        if not item.strip():
            raise doc.error(key, "a host must be a non-empty string")
        return HostEntry(None if item == "local" else item.strip(), None, {}, line)
    data = _check_mapping(doc, item, HOST_KEYS, key)
    if "host" not in data:
        raise doc.error(key, "missing required key 'host'", "use `host: local` for this machine")
    host = data.pop("host")
    name = data.pop("name", None)
    secrets = frozenset(doc.secret_env.get(key, set()))
    return HostEntry(None if host == "local" else host, name, data, line, secrets)


def parse_playbook(path: Path, text: str, environ: Mapping[str, str] | None = None) -> Playbook:
    """Validate a playbook's text; `${NAME}` references are read from `environ` (default: this
    process's environment)."""
    doc = _Doc(path, text, os.environ if environ is None else environ)
    schema = {**TOP_KEYS, **dict.fromkeys(SECTIONS, "section")}
    top = doc.data
    if not isinstance(top, dict):
        raise doc.error((), f"a playbook is a mapping, found {type(top).__name__}")
    for key in top:
        if not isinstance(key, str) or key not in schema:
            close = difflib.get_close_matches(str(key), list(schema), n=1)
            hint = f"did you mean '{close[0]}'?" if close else f"allowed: {', '.join(schema)}"
            raise doc.error((str(key),), "unknown key", hint)
    plain = _check_mapping(doc, {k: v for k, v in top.items() if k in TOP_KEYS}, TOP_KEYS, ())
    sections = {
        name: _check_mapping(doc, top[name], keys, (name,))
        for name, keys in SECTIONS.items()
        if name in top
    }
    raw_hosts = top.get("hosts", ["local"])
    if not isinstance(raw_hosts, list) or not raw_hosts:
        raise doc.error(("hosts",), "must be a non-empty list of hosts")
    hosts = tuple(_host_entry(doc, item, i) for i, item in enumerate(raw_hosts))
    labels = [h.name or h.host or "local" for h in hosts]
    for i, label in enumerate(labels):
        if label in labels[:i]:
            raise doc.error(
                ("hosts", str(i)),
                f"host {label!r} is listed twice",
                "give each entry its own `name:`",
            )
    name = plain.get("name") or re.sub(r"[^A-Za-z0-9._-]+", "-", path.stem)
    secrets = frozenset(doc.secret_env.get(("serve",), set()))
    return Playbook(path, name, plain.get("description"), hosts, sections, secrets)


def load_playbook(path: Path) -> Playbook:
    from dflashctl.yaml_bounds import MAX_YAML_BYTES

    try:
        text = read_bounded(path, MAX_YAML_BYTES, "playbook").decode("utf-8")
    except InputError as e:
        raise PlaybookError(e.message) from None
    except UnicodeDecodeError:
        raise PlaybookError(f"{path} is not UTF-8 text") from None
    except OSError as e:
        raise PlaybookError(f"cannot read {path}: {e.strerror}") from None
    return parse_playbook(path, text)


def find_playbook(arg: str) -> Path | None:
    """`arg` as a playbook: a .yaml/.yml path, or a name in the bundled playbooks/ directory."""
    p = Path(arg)
    if p.suffix in (".yaml", ".yml"):
        return p
    if p.is_file():
        return p
    if NAME_RE.fullmatch(arg):
        from dflashctl.drafter.registry import playbooks_dir

        for suffix in (".yaml", ".yml"):
            candidate = playbooks_dir() / f"{arg}{suffix}"
            if candidate.is_file():
                return candidate
    return None


def deployment_name(book: Playbook, entry: HostEntry) -> str:
    """`NAME` for a one-host playbook, `NAME-HOST` for each host of a larger one."""
    if entry.name:
        return entry.name
    if len(book.hosts) == 1:
        return book.name
    label = (entry.host or "local").split("@")[-1]
    return f"{book.name}-{re.sub(r'[^A-Za-z0-9._-]+', '-', label).strip('-.')}"[:64]
