"""The A/B settings of a server bench did not start: what the running server says about itself,
and what its start-up log says.

- vLLM: `/v1/models` gives each model's `max_model_len`; `/metrics` has the info gauge
  `vllm:cache_config_info{…,enable_prefix_caching="True",…} 1.0` (the labels are the engine's
  CacheConfig, every value a string: `PrometheusStatLogger.log_metrics_info` in
  vllm/v1/metrics/loggers.py).
- SGLang: `/server_info` (`/get_server_info` before) holds its server arguments:
  `context_length`, `chunked_prefill_size`, `disable_radix_cache`, `dtype`,
  `disable_cuda_graph`, `tp_size`, `disable_custom_all_reduce`.
- A vLLM log: the engine's config line (`Initializing a V1 LLM engine (vX) with config: …,
  dtype=torch.bfloat16, max_seq_len=N, tensor_parallel_size=N, disable_custom_all_reduce=B,
  …, enforce_eager=B, …, enable_prefix_caching=B, …`), the API server's `non-default args: {…}`
  and the scheduler's `Chunked prefill is enabled with max_num_batched_tokens=N.`; the last of
  each in the file (the latest launch).

Each gives a `LaunchSettings` whose `known` names only what was read. No printing.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from dflashctl.defects.launch import LaunchSettings
from dflashctl.errors import DflashError, InputError

# bytes of a line kept when scanning a log (the engine config line runs to a few KB)
MAX_LOG_LINE = 1 << 16


def _bool(v: Any) -> bool | None:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v in ("True", "False", "true", "false"):
        return v.lower() == "true"
    return None


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().isdigit():
        return int(v)
    return None


def _dtype(v: Any) -> str | None:
    return str(v).removeprefix("torch.") if isinstance(v, str) and v and v != "None" else None


def _set(s: LaunchSettings, known: set[str], name: str, value: Any) -> None:
    if value is not None:
        setattr(s, name, value)
        known.add(name)


def _done(s: LaunchSettings, known: set[str]) -> LaunchSettings | None:
    s.known = frozenset(known)
    return s if known else None


# ---- a running server ---------------------------------------------------------------------------


def _get_json(url: str, timeout: float) -> Any:
    import json

    from dflashctl.metrics.prom import get_page

    status, _ctype, raw = get_page(url, timeout, 4 << 20)
    if status >= 400:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _cache_config_labels(text: str) -> dict[str, str] | None:
    """The labels of the first `vllm:cache_config_info` sample, None without one."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        for fam in text_string_to_metric_families(text):
            if fam.name == "vllm:cache_config_info":
                for sample in fam.samples:
                    return dict(sample.labels)
    except ValueError:
        return None
    return None


def _vllm(base: str, timeout: float) -> tuple[str, LaunchSettings] | None:
    from dflashctl.metrics.prom import fetch_text

    known: set[str] = set()
    s = LaunchSettings(source=f"{base}/v1/models and /metrics")
    try:
        page = fetch_text(base + "/metrics", timeout)
    except DflashError:
        page = ""
    if "vllm:" not in page:
        return None
    labels = _cache_config_labels(page) or {}
    _set(s, known, "enable_prefix_caching", _bool(labels.get("enable_prefix_caching")))
    models = _get_json(base + "/v1/models", timeout)
    data = models.get("data") if isinstance(models, dict) else None
    card = data[0] if isinstance(data, list) and data and isinstance(data[0], dict) else {}
    if card.get("owned_by") == "dflashctl":
        return None  # the bundled engine speaks vLLM's metrics; it is not a guarded engine
    _set(s, known, "max_model_len", _int(card.get("max_model_len")))
    s.known = frozenset(known)
    return "vllm", s


def _sglang(base: str, timeout: float) -> tuple[str, LaunchSettings] | None:
    from dflashctl.metrics.prom import fetch_server_info

    info = fetch_server_info(base, timeout)
    if info is None:
        return None
    known: set[str] = set()
    s = LaunchSettings(source=f"{base}/server_info")
    radix_off = _bool(info.get("disable_radix_cache"))
    _set(s, known, "enable_prefix_caching", None if radix_off is None else not radix_off)
    _set(s, known, "enforce_eager", _bool(info.get("disable_cuda_graph")))
    _set(s, known, "tensor_parallel_size", _int(info.get("tp_size")))
    _set(s, known, "max_num_batched_tokens", _int(info.get("chunked_prefill_size")))
    _set(s, known, "max_model_len", _int(info.get("context_length")))
    _set(s, known, "dtype", _dtype(info.get("dtype")))
    _set(s, known, "disable_custom_all_reduce", _bool(info.get("disable_custom_all_reduce")))
    s.known = frozenset(known)
    return "sglang", s


def from_server(url: str, timeout: float) -> tuple[str, LaunchSettings] | None:
    """(engine, settings) a running vLLM or SGLang server tells about itself; None when it is
    neither, or does not answer (the benchmark reports that itself)."""
    from dflashctl.server.client import normalize_url

    try:
        base = normalize_url(url)
    except DflashError:
        return None
    return _vllm(base, timeout) or _sglang(base, timeout)


# ---- a vLLM log ---------------------------------------------------------------------------------

_CONFIG_MARK = b"LLM engine"
_CONFIG_FIELD_RE = re.compile(
    r"\b(enable_prefix_caching|enforce_eager|tensor_parallel_size|disable_custom_all_reduce|"
    r"max_seq_len|dtype)=([\w.]+)"
)
_ARGS_RE = re.compile(r"non-default args: (\{.*\})")
_CHUNKED_RE = re.compile(rb"Chunked prefill is enabled with max_num_batched_tokens=(\d+)")
_NON_DEFAULT = {
    "enable_prefix_caching": _bool,
    "enforce_eager": _bool,
    "tensor_parallel_size": _int,
    "max_num_batched_tokens": _int,
    "max_model_len": _int,
    "dtype": _dtype,
    "disable_custom_all_reduce": _bool,
}


def _literal(text: str) -> dict[str, Any]:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def from_log(path: Path) -> tuple[str, LaunchSettings] | None:
    """(engine "vllm", settings) from a vLLM log's latest start-up lines; None when the log has
    none of them. An unreadable file is an `InputError` (exit 2)."""
    from dflashctl.files import open_regular

    config: str | None = None
    args: str | None = None
    chunked: int | None = None
    try:
        with open_regular(path, "log") as f:
            while line := f.readline(MAX_LOG_LINE):  # a longer "line" comes in pieces
                if _CONFIG_MARK in line and b"with config:" in line:
                    config = line.decode("utf-8", "replace")
                elif b"non-default args:" in line:
                    args = line.decode("utf-8", "replace")
                elif (m := _CHUNKED_RE.search(line)) is not None:
                    chunked = int(m.group(1))
    except OSError as e:
        raise InputError(f"cannot read the log {path}: {e.strerror or e}") from None
    known: set[str] = set()
    s = LaunchSettings(source=f"the log {path}")
    if config is not None:
        fields = dict(_CONFIG_FIELD_RE.findall(config))
        for name in ("enable_prefix_caching", "enforce_eager", "disable_custom_all_reduce"):
            _set(s, known, name, _bool(fields.get(name)))
        _set(s, known, "tensor_parallel_size", _int(fields.get("tensor_parallel_size")))
        _set(s, known, "max_model_len", _int(fields.get("max_seq_len")))
        _set(s, known, "dtype", _dtype(fields.get("dtype")))
    given = _ARGS_RE.search(args) if args is not None else None
    if given is not None:
        values = _literal(given.group(1))
        for name, conv in _NON_DEFAULT.items():
            _set(s, known, name, conv(values.get(name)))
    _set(s, known, "max_num_batched_tokens", chunked)
    done = _done(s, known)
    return ("vllm", done) if done is not None else None


def merge(base: LaunchSettings, over: LaunchSettings) -> LaunchSettings:
    """`base` with what `over` knows laid on top; the sources named together."""
    known = set(base.known or ()) | set(over.known or ())
    s = LaunchSettings(**{k: v for k, v in base.__dict__.items() if k != "known"})
    for name in over.known or ():
        setattr(s, name, getattr(over, name))
    s.source = f"{base.source} and {over.source}"
    s.known = frozenset(known)
    return s
