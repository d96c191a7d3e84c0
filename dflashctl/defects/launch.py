"""An engine's launch settings, as the known-defect rules need them, from its command line or its
own start-up log.

`from_argv(engine, argv)` reads a vLLM, SGLang or llama.cpp (`llama-server`) command line (what
`serve` renders, what a user pastes); `from_vllm_config(fields)` reads the engine-config fields vLLM
logs at start-up (`enable_prefix_caching=True, enforce_eager=False, …`). Both give a
`LaunchSettings` whose fields are None where the source says nothing and the engine's default is not
known either. No I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# What vLLM's V1 engine does when a flag is absent (`vllm serve --help`, EngineArgs defaults).
VLLM_DEFAULTS: dict[str, object] = {
    "enable_prefix_caching": True,
    "enforce_eager": False,
    "tensor_parallel_size": 1,
}
# SGLang: the radix (prefix) cache is on unless --disable-radix-cache; CUDA graphs unless
# --disable-cuda-graph.
SGLANG_DEFAULTS: dict[str, object] = {
    "enable_prefix_caching": True,
    "enforce_eager": False,
    "tensor_parallel_size": 1,
}


@dataclass
class LaunchSettings:
    enable_prefix_caching: bool | None = None
    enforce_eager: bool | None = None  # True: no CUDA graphs
    tensor_parallel_size: int | None = None
    method: str | None = None  # the speculative method (dflash, dspark, eagle3, …)
    draft_sample_method: str | None = None  # vLLM: greedy | probabilistic
    max_num_batched_tokens: int | None = None  # SGLang: --chunked-prefill-size
    max_model_len: int | None = None  # SGLang: --context-length
    dtype: str | None = None
    disable_custom_all_reduce: bool | None = None
    split_mode: str | None = None  # llama.cpp -sm: none | layer | row | tensor
    # llama.cpp --spec-draft-p-min as given; None when absent (the build's default: 0.0 since
    # b9235, ggml-org/llama.cpp#23269)
    spec_draft_p_min: float | None = None
    source: str = ""  # where the settings were read
    # None: every field is known, a None value meaning the engine's default (a command line);
    # else the fields a server or a log told (the others are not known)
    known: frozenset[str] | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None and k != "known"}


def _value(argv: Sequence[str], i: int) -> tuple[str, str | None]:
    """(flag, value) for argv[i]: `--flag=value` or `--flag value`."""
    arg = argv[i]
    if "=" in arg:
        flag, value = arg.split("=", 1)
        return flag, value
    nxt = argv[i + 1] if i + 1 < len(argv) else None
    return arg, nxt if nxt is not None and not nxt.startswith("-") else None


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


# llama-server: layers split across GPUs unless -sm says otherwise (common/common.h); a
# request's prompt is cached (its KV prefix reused by the next) unless --no-cache-prompt.
LLAMA_CPP_DEFAULTS: dict[str, object] = {"split_mode": "layer", "enable_prefix_caching": True}


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def _from_llama_argv(argv: Sequence[str]) -> LaunchSettings:
    """llama-server's flags: split mode, the speculative type (`--spec-type draft-dflash` is
    method dflash), `--spec-draft-p-min` (older builds: `--draft-p-min`), and the A/B settings
    it has: prompt caching (`--no-cache-prompt`), the context (`-c`, max-model-len's part) and
    the logical batch (`-b`, max-num-batched-tokens')."""
    s = LaunchSettings(source="the launch command")
    for i in range(len(argv)):
        flag, value = _value(argv, i)
        if flag in ("-sm", "--split-mode"):
            s.split_mode = (value or "").lower() or None
        elif flag in ("--cache-prompt", "--no-cache-prompt"):
            s.enable_prefix_caching = flag == "--cache-prompt"
        elif flag in ("-c", "--ctx-size"):
            s.max_model_len = _int(value)
        elif flag in ("-b", "--batch-size"):
            s.max_num_batched_tokens = _int(value)
        elif flag == "--spec-type" and value:
            first = value.split(",")[0].strip().lower()
            s.method = first.removeprefix("draft-") or None
        elif flag in ("--spec-draft-p-min", "--draft-p-min"):
            s.spec_draft_p_min = _float(value)
    for key, default in LLAMA_CPP_DEFAULTS.items():
        if getattr(s, key) is None:
            setattr(s, key, default)
    return s


def from_argv(engine: str, argv: Sequence[str]) -> LaunchSettings:
    """vLLM's, SGLang's or llama-server's launch flags; absent flags take the engine's
    default."""
    if engine == "llama.cpp":
        return _from_llama_argv(argv)
    s = LaunchSettings(source="the launch command")
    spec_json: str | None = None
    for i in range(len(argv)):
        flag, value = _value(argv, i)
        flag = flag.replace("_", "-")
        if flag == "--no-enable-prefix-caching" or flag == "--disable-radix-cache":
            s.enable_prefix_caching = False
        elif flag == "--enable-prefix-caching":
            s.enable_prefix_caching = value is None or value.lower() not in ("false", "0")
        elif flag in ("--enforce-eager", "--disable-cuda-graph"):
            s.enforce_eager = True
        elif flag in ("--tensor-parallel-size", "-tp", "--tp-size", "--tp"):
            s.tensor_parallel_size = _int(value)
        elif flag in ("--max-num-batched-tokens", "--chunked-prefill-size"):
            s.max_num_batched_tokens = _int(value)
        elif flag in ("--max-model-len", "--context-length"):
            s.max_model_len = _int(value)
        elif flag == "--dtype":
            s.dtype = value
        elif flag == "--disable-custom-all-reduce":
            s.disable_custom_all_reduce = True
        elif flag == "--speculative-config":
            spec_json = value
        elif flag == "--speculative-algorithm":
            s.method = (value or "").lower() or None
    if spec_json:
        try:
            cfg = json.loads(spec_json)
        except ValueError:
            cfg = None
        if isinstance(cfg, dict):
            _from_spec_config(s, cfg)
    defaults = {"vllm": VLLM_DEFAULTS, "sglang": SGLANG_DEFAULTS}.get(engine, {})
    for key, default in defaults.items():
        if getattr(s, key) is None:
            setattr(s, key, default)
    return s


def _from_spec_config(s: LaunchSettings, cfg: Mapping[str, Any]) -> None:
    if isinstance(cfg.get("method"), str):
        s.method = cfg["method"].lower()
    if isinstance(cfg.get("draft_sample_method"), str):
        s.draft_sample_method = cfg["draft_sample_method"]
    if cfg.get("enforce_eager") is True:
        s.enforce_eager = True


def from_vllm_config(fields: Mapping[str, Any]) -> LaunchSettings:
    """The engine config vLLM logs at start-up (`… with config: model=…, enforce_eager=False,
    enable_prefix_caching=True, …` and the speculative config read from it)."""
    s = LaunchSettings(source="the engine's start-up config in the log")

    def flag(name: str) -> bool | None:
        v = fields.get(name)
        if isinstance(v, bool):
            return v
        if isinstance(v, str) and v in ("True", "False"):
            return v == "True"
        return None

    s.enable_prefix_caching = flag("enable_prefix_caching")
    s.enforce_eager = flag("enforce_eager")
    tp = fields.get("tensor_parallel_size")
    s.tensor_parallel_size = _int(str(tp)) if tp is not None else None
    if isinstance(fields.get("method"), str):
        s.method = str(fields["method"]).lower()
    if isinstance(fields.get("draft_sample_method"), str):
        s.draft_sample_method = str(fields["draft_sample_method"])
    return s


# What two servers of an A/B must share (vllm#50722: prefix caching on in one run only, custom
# all-reduce off in one only, different batched tokens and lengths made DFlash look useless)
AB_FIELDS = {
    "enable_prefix_caching": "prefix caching",
    "max_num_batched_tokens": "max-num-batched-tokens",
    "max_model_len": "max-model-len",
    "dtype": "dtype",
    "enforce_eager": "eager mode (--enforce-eager)",
    "disable_custom_all_reduce": "custom all-reduce (--disable-custom-all-reduce)",
    "tensor_parallel_size": "tensor parallel size",
}
# llama-server's own: how the model is split over the GPUs (-sm row or tensor against layer moved
# throughput from about 80 to 18 tokens/s in llama.cpp#27342)
LLAMA_CPP_AB_FIELDS = {**AB_FIELDS, "split_mode": "split mode (-sm)"}


def ab_fields(engine: str) -> dict[str, str]:
    """The settings two servers of `engine` must share in an A/B (name -> label)."""
    return LLAMA_CPP_AB_FIELDS if engine == "llama.cpp" else AB_FIELDS


def comparable(a: LaunchSettings, b: LaunchSettings, name: str) -> bool:
    """Whether both sides know `name`: a server or log that did not tell it does not; a flag
    left off a command line is the engine's default, whose value cannot be set against what
    another source read (a served max_model_len)."""
    for s, other in ((a, b), (b, a)):
        if s.known is not None and name not in s.known:
            return False
        if getattr(s, name) is None and s.known is None and other.known is not None:
            return False
    return True


def ab_differences(
    a: LaunchSettings, b: LaunchSettings, fields: Mapping[str, str] = AB_FIELDS
) -> list[tuple[str, object, object]]:
    """(setting, a's value, b's value) for each A/B setting the two launches set differently,
    among those both sides know."""
    return [
        (label, getattr(a, name), getattr(b, name))
        for name, label in fields.items()
        if comparable(a, b, name) and getattr(a, name) != getattr(b, name)
    ]


def ab_unknown(
    a: LaunchSettings, b: LaunchSettings, fields: Mapping[str, str] = AB_FIELDS
) -> list[str]:
    """The A/B settings that could not be compared (one side does not know them)."""
    return [label for name, label in fields.items() if not comparable(a, b, name)]
