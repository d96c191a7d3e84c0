"""Every parser of dflashctl/metrics/log_parse.py on its exact output: each figure a line carries
(the whole window, field by field), each prefix's time and stream, each helper's edges.

Table-driven: one row per line shape (vLLM V0 to 0.34, SGLang, the `Engine 000:` companion,
the speculative config, JSON records), asserted on every field the parser sets, so a figure
read from the wrong label, scaled wrongly or dropped fails a row. Real lines, real parsers.
"""

from __future__ import annotations

from dataclasses import asdict, fields
from datetime import datetime

import pytest

from dflashctl.metrics.log_parse import (
    RawTs,
    _floats,
    _int,
    _num,
    _plain,
    clean,
    companion_busy,
    kv_cache_build,
    line_info,
    parse_companion,
    parse_sglang,
    parse_spec_config,
    parse_vllm,
    split_fields,
    timestamp_of,
    unwrap_json,
    v0_window,
)
from dflashctl.metrics.window import SpecWindow

_DEFAULTS = {f.name: f.default for f in fields(SpecWindow) if f.name not in ("engine", "format")}


def figures(w: SpecWindow | None) -> dict[str, object] | None:
    """The fields a parser set (those that differ from a blank window's), engine and format."""
    if w is None:
        return None
    return {k: v for k, v in asdict(w).items() if k not in _DEFAULTS or v != _DEFAULTS[k]}


SPEC = "(APIServer pid=7) INFO 12-02 12:56:32 [metrics.py:120] SpecDecoding metrics: "
CURRENT = (
    SPEC + "Mean acceptance length: 2.31, Accepted throughput: 12.50 tokens/s, Drafted "
    "throughput: 40.00 tokens/s, Accepted: 125 tokens, Drafted: 400 tokens, Per-position "
    "acceptance rate: 0.700, 0.400, 0.210, 0.000, Avg Draft acceptance rate: 31.2%"
)
CURRENT_WINDOW = {  # CURRENT's figures, as the window holds them
    "accepted_throughput": 12.5,
    "accepted_tokens": 125,
    "draft_acceptance_rate": 0.312,
    "drafted_throughput": 40.0,
    "drafted_tokens": 400,
    "engine": "vllm",
    "format": "vllm-0.10.2+",
    "mean_acceptance_length": 2.31,
    "num_drafts": 100,
    "per_position": [0.7, 0.4, 0.21, 0.0],
}
LEG = "INFO 10-16 19:05:47 metrics.py:367] Speculative metrics: "
SG = "[2026-11-20 10:02:15 TP0] "

# (line, (the window's figures or None, unknown labels, skipped, V0 counters))
VLLM_CASES: list[tuple[str, object]] = [
    (
        CURRENT,
        (
            CURRENT_WINDOW,
            [],
            False,
            None,
        ),
    ),
    (CURRENT.replace("Drafted: 400", "Drafted: 0"), (None, [], True, None)),
    (
        CURRENT.replace("Per-position", "Rejected: 275 tokens, Per-position"),
        (
            CURRENT_WINDOW,
            [],
            False,
            None,
        ),
    ),
    (
        CURRENT.replace("Drafted: 400", "Drafted: 3"),
        (
            {
                "accepted_throughput": 12.5,
                "accepted_tokens": 125,
                "draft_acceptance_rate": 0.312,
                "drafted_throughput": 40.0,
                "drafted_tokens": 3,
                "engine": "vllm",
                "format": "vllm-0.10.2+",
                "mean_acceptance_length": 2.31,
                "num_drafts": 1,
                "per_position": [0.7, 0.4, 0.21, 0.0],
            },
            [],
            False,
            None,
        ),
    ),
    (
        SPEC
        + (
            "Draft acceptance rate: 0.312, Mean acceptance length: 2.25, Accepted:"
            " 125 tokens, Drafted: 400 tokens, Per-position acceptance rate: 0.7,"
            " 0.4, 0.2, 0.0"
        ),
        (
            {
                "accepted_tokens": 125,
                "draft_acceptance_rate": 0.312,
                "drafted_tokens": 400,
                "engine": "vllm",
                "format": "vllm-0.8.5",
                "mean_acceptance_length": 2.25,
                "num_drafts": 100,
                "per_position": [0.7, 0.4, 0.2, 0.0],
            },
            [],
            False,
            None,
        ),
    ),
    (
        SPEC + "Draft acceptance rate: 31.2%, Accepted: 125 tokens, Drafted: 400 tokens",
        (
            {
                "accepted_tokens": 125,
                "draft_acceptance_rate": 0.312,
                "drafted_tokens": 400,
                "engine": "vllm",
                "format": "vllm-0.8.3",
            },
            [],
            False,
            None,
        ),
    ),
    (
        SPEC + "Mean acceptance length: 2.00, Accepted: 100 tokens",
        (
            {
                "accepted_tokens": 100,
                "engine": "vllm",
                "format": "vllm-0.8.5",
                "mean_acceptance_length": 2.0,
                "num_drafts": 100,
            },
            [],
            False,
            None,
        ),
    ),
    (
        SPEC + "Mean acceptance length: 1.00, Accepted: 0 tokens, Drafted: 90 tokens",
        (
            {
                "accepted_tokens": 0,
                "draft_acceptance_rate": 0.0,
                "drafted_tokens": 90,
                "engine": "vllm",
                "format": "vllm-0.8.5",
                "mean_acceptance_length": 1.0,
            },
            [],
            False,
            None,
        ),
    ),
    (
        SPEC
        + (
            "Mean acceptance length: nan, Accepted: 90 tokens, Drafted: 90 tokens,"
            " Per-position acceptance rate: 0.5, 0.3, 0.2"
        ),
        (
            {
                "accepted_tokens": 90,
                "draft_acceptance_rate": 1.0,
                "drafted_tokens": 90,
                "engine": "vllm",
                "format": "vllm-0.8.5",
                "mean_acceptance_length": 4.0,
                "num_drafts": 30,
                "per_position": [0.5, 0.3, 0.2],
            },
            [],
            False,
            None,
        ),
    ),
    (
        SPEC
        + (
            "Accepted: 90 tokens, Drafted: 90 tokens, Per-position acceptance rate:"
            " 0.5, 0.3, 0.2, Avg Draft acceptance rate: nan%"
        ),
        (
            {
                "accepted_tokens": 90,
                "draft_acceptance_rate": 1.0,
                "drafted_tokens": 90,
                "engine": "vllm",
                "format": "vllm-0.8.3",
                "mean_acceptance_length": 4.0,
                "num_drafts": 30,
                "per_position": [0.5, 0.3, 0.2],
            },
            [],
            False,
            None,
        ),
    ),
    (
        SPEC + "Accepted: 1 tokens, Drafted: 1 tokens, Per-position acceptance rate: 0.5, 0.3, 0.2",
        (
            {
                "accepted_tokens": 1,
                "draft_acceptance_rate": 1.0,
                "drafted_tokens": 1,
                "engine": "vllm",
                "format": "vllm-0.8.3",
                "mean_acceptance_length": 2.0,  # one draft at least: a token was drafted
                "num_drafts": 1,
                "per_position": [0.5, 0.3, 0.2],
            },
            [],
            False,
            None,
        ),
    ),
    (
        SPEC + "Accepted: 5 tokens, Drafted: 0 tokens, Avg Draft acceptance rate: 0.0%",
        (None, [], True, None),
    ),
    (SPEC + "Foo: bar, Zed: 1", (None, ["foo", "zed"], False, None)),
    (
        SPEC + "Accepted throughput: 1.0 tokens/s, Per-position acceptance rate: 0.5, x",
        (None, [], False, None),
    ),
    (
        SPEC + "Mean acceptance length: 2.5, Per-position acceptance rate: 0.5, inf",
        (
            {"engine": "vllm", "format": "vllm-0.8.5", "mean_acceptance_length": 2.5},
            [],
            False,
            None,
        ),
    ),
    (
        LEG
        + (
            "Draft acceptance rate: 0.642, System efficiency: 0.598, Number of"
            " speculative tokens: 3, Number of accepted tokens: 8547, Number of"
            " draft tokens: 13311, Number of emitted tokens: 10616."
        ),
        ({"engine": "vllm", "format": "vllm-v0"}, [], False, (3, 8547, 13311, 10616)),
    ),
    (
        LEG + "Draft acceptance rate: 45.0%, System efficiency: 0.4",
        (
            {
                "cumulative": True,
                "draft_acceptance_rate": 0.45,
                "engine": "vllm",
                "format": "vllm-v0",
            },
            [],
            False,
            None,
        ),
    ),
    (
        LEG + "Draft acceptance rate: 0.45, Number of emitted tokens: 10",
        (
            {
                "cumulative": True,
                "draft_acceptance_rate": 0.45,
                "engine": "vllm",
                "format": "vllm-v0",
            },
            [],
            False,
            None,
        ),
    ),
    (
        LEG
        + (
            "Draft acceptance rate: 1.0, System efficiency: 0.4, Number of"
            " speculative tokens: 0, Number of accepted tokens: 1, Number of draft"
            " tokens: 2, Number of emitted tokens: 3"
        ),
        (
            {
                "cumulative": True,
                "draft_acceptance_rate": 1.0,
                "engine": "vllm",
                "format": "vllm-v0",
            },
            [],
            False,
            None,
        ),
    ),
    (LEG + "System efficiency: 0.4", (None, [], False, None)),
    (LEG + "Draft acceptance rate: nan, System efficiency: 0.4", (None, [], False, None)),
    (
        LEG
        + (
            "Draft acceptance rate: 0.552, Number of accepted tokens: 331, Number"
            " of draft tokens: 600, "
        ),
        (
            {
                "accepted_tokens": 331,
                "draft_acceptance_rate": 0.552,
                "drafted_tokens": 600,
                "engine": "vllm",
                "format": "vllm-v1-early",
            },
            [],
            False,
            None,
        ),
    ),
    (
        LEG + "Number of accepted tokens: 331, Number of draft tokens: 600",
        (
            {
                "accepted_tokens": 331,
                "draft_acceptance_rate": 0.5516666666666666,
                "drafted_tokens": 600,
                "engine": "vllm",
                "format": "vllm-v1-early",
            },
            [],
            False,
            None,
        ),
    ),
    (LEG + "Number of accepted tokens: 0, Number of draft tokens: 0", (None, [], False, None)),
    (LEG + "Draft acceptance rate: nan, Number of draft tokens: 0", (None, [], False, None)),
    (LEG + "Number of accepted tokens: 3", (None, [], False, None)),
    ("INFO 10-16 19:05:47 nothing to see", (None, [], False, None)),
    # added: each a line shape a survivor needed
    (
        SPEC + "Foo: SpecDecoding metrics: Mean acceptance length: 2.00, Accepted: 100 tokens",
        (None, ["foo"], False, None),
    ),
    (
        LEG
        + "Foo: Speculative metrics: Number of accepted tokens: 331, Number of draft tokens: 600",
        (
            {"drafted_tokens": 600, "engine": "vllm", "format": "vllm-v1-early"},
            ["foo"],
            False,
            None,
        ),
    ),
    (
        (
            "Speculative metrics: Draft acceptance rate: 0.5, Number of accepted"
            " tokens: 1, Number of draft tokens: 2"
        ),
        (
            {
                "accepted_tokens": 1,
                "draft_acceptance_rate": 0.5,
                "drafted_tokens": 2,
                "engine": "vllm",
                "format": "vllm-v1-early",
            },
            [],
            False,
            None,
        ),
    ),
    (LEG + "System efficiency: 0.4, Foo: 1", (None, ["foo"], False, None)),
    (
        LEG + "Draft acceptance rate: 45.0%, System efficiency: 0.4, Foo: 1",
        (
            {
                "cumulative": True,
                "draft_acceptance_rate": 0.45,
                "engine": "vllm",
                "format": "vllm-v0",
            },
            ["foo"],
            False,
            None,
        ),
    ),
    (
        LEG + "Draft acceptance rate: 1.5%, System efficiency: 0.4",
        (
            {
                "cumulative": True,
                "draft_acceptance_rate": 0.015,
                "engine": "vllm",
                "format": "vllm-v0",
            },
            [],
            False,
            None,
        ),
    ),
    (
        LEG + "Number of accepted tokens: 331, Number of draft tokens: 600, Foo: 1",
        (
            {
                "accepted_tokens": 331,
                "draft_acceptance_rate": 0.5516666666666666,
                "drafted_tokens": 600,
                "engine": "vllm",
                "format": "vllm-v1-early",
            },
            ["foo"],
            False,
            None,
        ),
    ),
    (
        LEG + "Number of draft tokens: 600",
        ({"drafted_tokens": 600, "engine": "vllm", "format": "vllm-v1-early"}, [], False, None),
    ),
    (SPEC + "Accepted: 5 tokens, Drafted: 0 tokens, Foo: 1", (None, ["foo"], True, None)),
    (
        SPEC + "Mean acceptance length: 1.00, Accepted: 5 tokens",
        (
            {
                "accepted_tokens": 5,
                "engine": "vllm",
                "format": "vllm-0.8.5",
                "mean_acceptance_length": 1.0,
            },
            [],
            False,
            None,
        ),
    ),
    (  # two writers' lines run together: the exact 0.10.2+ shape is read, not the first label
        SPEC + "Foo: " + CURRENT[len(SPEC) - len("SpecDecoding metrics: ") :],
        (
            CURRENT_WINDOW,
            [],
            False,
            None,
        ),
    ),
    (
        SPEC + "Mean acceptance length: 3.00, Accepted: 100 tokens",
        (
            {
                "accepted_tokens": 100,
                "engine": "vllm",
                "format": "vllm-0.8.5",
                "mean_acceptance_length": 3.0,
                "num_drafts": 50,
            },
            [],
            False,
            None,
        ),
    ),
]

# (line, (the window's figures or None, unknown labels))
SGLANG_CASES: list[tuple[str, object]] = [
    (
        SG
        + (
            "Decode batch, #running-req: 4, #token: 1234, token usage: 0.05, accept"
            " len: 3.21, accept rate: 0.45, cuda graph: True, gen throughput"
            " (token/s): 123.45, #queue-req: 2, "
        ),
        (
            {
                "draft_acceptance_rate": 0.45,
                "engine": "sglang",
                "format": "sglang",
                "generation_throughput": 123.45,
                "mean_acceptance_length": 3.21,
                "running_reqs": 4,
                "waiting_reqs": 2,
            },
            [],
        ),
    ),
    (
        SG
        + (
            "Decode batch. #running-req: 1, accept len: 2.50, gen throughput"
            " (token/s): 50.0, spec verify: 3"
        ),
        (
            {
                "engine": "sglang",
                "format": "sglang-accept-len",
                "generation_throughput": 50.0,
                "mean_acceptance_length": 2.5,
                "running_reqs": 1,
            },
            ["spec verify"],
        ),
    ),
    (
        SG
        + (
            "Decode batch [12], #running-req: 1, #token: 5, cuda graph: False, gen"
            " throughput (token/s): 9.5"
        ),
        (None, []),
    ),
    (
        SG
        + (
            "Decode batch, accept len: n/a, accept rate: 0.5, full token usage:"
            " 0.1, swa token usage: 0.2, mamba usage: 0.1, pre-allocated usage:"
            " 0.0, cap len: 3, block accept len: 2.0, npu graph: False, cpu graph:"
            " False, largest-len: 9, input throughput (token/s): 3.0"
        ),
        (None, []),
    ),
    (SG + "Prefill batch, #new-seq: 1", (None, [])),
    (SG + "Decode batch, #running-req: 1, foo: 2", (None, ["foo"])),
]

# (line, (parse_companion, companion_busy, kv_cache_build))
COMPANION_CASES: list[tuple[str, object]] = [
    (
        (
            "(APIServer pid=9) INFO 12-02 12:54:50 [loggers.py:335] Engine 001: Avg"
            " prompt throughput: 1.7 tokens/s, Avg generation throughput: 5.4"
            " tokens/s, Running: 2 reqs, Waiting: 3 reqs, GPU KV cache usage: 0.5%,"
            " Prefix cache hit rate: 42.5%"
        ),
        (
            {
                "engine": "engine 1",
                "generation_throughput": 5.4,
                "prefix_cache_hit_rate": 0.425,
                "prompt_throughput": 1.7,
                "running": 2.0,
                "waiting": 3.0,
            },
            True,
            "gpu",
        ),
    ),
    (
        (
            "INFO 01-01 00:00:00 [loggers.py:1] 2 Engines Aggregated: Running: 3"
            " reqs, Avg generation throughput: 10.0 tokens/s, Waiting: 1 reqs, Avg"
            " prompt throughput: 5.0 tokens/s, Preemptions: 2, Foo: x, Prefix cache"
            " hit rate: 7%"
        ),
        (
            {
                "engine": "aggregated",
                "generation_throughput": 10.0,
                "prefix_cache_hit_rate": 0.07,
                "prompt_throughput": 5.0,
                "running": 3.0,
                "waiting": 1.0,
            },
            True,
            None,
        ),
    ),
    (
        "INFO 01-01 00:00:00 Engine 012: Avg generation throughput: 0.0 tokens/s, Running: 0 reqs",
        ({"engine": "engine 12", "generation_throughput": 0.0, "running": 0.0}, False, None),
    ),
    (
        "INFO 01-01 00:00:00 Prefix cache hit rate: 0.0%",
        ({"prefix_cache_hit_rate": 0.0}, False, None),
    ),
    ("INFO 01-01 00:00:00 nothing", ({}, False, None)),
    (
        "2 Engines Aggregated: Foo: x, Running: 3 reqs",
        ({"engine": "aggregated", "running": 3.0}, True, None),
    ),
    ("Engine 000: Running: 2 reqs", ({"engine": "engine 0", "running": 2.0}, True, None)),
    (
        "Engine 000: Avg generation throughput: 3.0 tokens/s",
        ({"engine": "engine 0", "generation_throughput": 3.0}, True, None),
    ),
    (  # two writers' lines run together: the exact `Engine NNN: Avg prompt …` shape is read
        (
            "(EngineCore pid=2) Engine 001: Running: 3 reqs, Waiting: 0 reqs(APIServer pid=1)"
            " INFO 12-02 12:54:50 [loggers.py:335] Engine 000: Avg prompt throughput: 1.0"
            " tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs"
        ),
        (
            {
                "engine": "engine 0",
                "generation_throughput": 2.0,
                "prompt_throughput": 1.0,
                "running": 1.0,
                "waiting": 0.0,
            },
            True,
            None,
        ),
    ),
]

CONFIG_CASES: list[tuple[str, object]] = [
    (
        (
            "INFO [config] speculative_config=SpeculativeConfig(method='dflash',"
            " model='z-lab/Qwen3-8B-DFlash-b16', num_spec_tokens=15,"
            " draft_tensor_parallel_size=1, prompt_lookup_max=None,"
            ' acceptance_rate=0.5, dtype="bf16"), tokenizer=x'
        ),
        {
            "acceptance_rate": 0.5,
            "draft_tensor_parallel_size": 1,
            "dtype": "bf16",
            "enabled": True,
            "engine": "vllm",
            "method": "dflash",
            "model": "z-lab/Qwen3-8B-DFlash-b16",
            "num_spec_tokens": 15,
            "prompt_lookup_max": None,
        },
    ),
    (
        "Initializing ... speculative_config=None, tokenizer_mode=auto",
        {"enabled": False, "engine": "vllm"},
    ),
    ("speculative_config=None", {"enabled": False, "engine": "vllm"}),
    (
        (
            "server_args=ServerArgs(model_path='Qwen/Qwen3-8B',"
            " speculative_algorithm='DFLASH',"
            " speculative_draft_model_path='z-lab/d',"
            " speculative_num_draft_tokens=16, speculative_num_steps=None,"
            " decode_log_interval=40, tp_size=1)"
        ),
        {
            "decode_log_interval": 40,
            "enabled": True,
            "engine": "sglang",
            "method": "DFLASH",
            "speculative_draft_model_path": "z-lab/d",
            "speculative_num_draft_tokens": 16,
            "speculative_num_steps": None,
        },
    ),
    (
        "server_args=ServerArgs(model_path='Qwen/Qwen3-8B', speculative_algorithm=None, tp_size=1)",
        {"enabled": False, "engine": "sglang", "method": None},
    ),
    (
        "server_args=ServerArgs(model_path='Qwen/Qwen3-8B')",
        {"enabled": False, "engine": "sglang", "method": None},
    ),
    ("no config here", None),
    (
        (
            "server_args=ServerArgs(model_path='a')"
            " server_args=ServerArgs(speculative_algorithm='EAGLE')"
        ),
        {"enabled": True, "engine": "sglang", "method": "EAGLE"},
    ),
    (  # two start-up lines run together: the fields after the first `server_args=` all count
        (
            "server_args=ServerArgs(speculative_algorithm='EAGLE')"
            " server_args=ServerArgs(model_path='a')"
        ),
        {"enabled": True, "engine": "sglang", "method": "EAGLE"},
    ),
    (
        "server_args=ServerArgs(speculative_algorithm='None')",
        {"enabled": False, "engine": "sglang", "method": "None"},
    ),
]

# (line, (time as printed, stream, vLLM process key))
PREFIX_CASES: list[tuple[str, object]] = [
    (
        "(APIServer pid=7) INFO 12-02 12:56:32 [metrics.py:120] x",
        ("12-02 12:56:32", "APIServer pid=7", "APIServer pid=7"),
    ),
    (
        "(EngineCore_DP1 pid=77) WARNING 01-02 03:04:05 [core.py:1] x",
        ("01-02 03:04:05", "EngineCore_DP1 pid=77", "EngineCore_DP1 pid=77"),
    ),
    ("INFO 10-16 19:05:47 (VllmWorkerProcess pid=5) x", ("10-16 19:05:47", "", None)),
    (
        "(VllmWorkerProcess pid=5) INFO 10-16 19:05:47 x",
        ("10-16 19:05:47", "VllmWorkerProcess pid=5", "VllmWorkerProcess pid=5"),
    ),
    (
        "INFO 10-16 19:05:47 [metrics.py:367] (VllmWorker rank=2 pid=9) x",
        ("10-16 19:05:47", "VllmWorker rank=2", "VllmWorker rank=2"),
    ),
    (
        "(VllmWorkerProcess rank=1 pid=9) INFO 10-16 19:05:47 x",
        ("10-16 19:05:47", "VllmWorkerProcess rank=1", "VllmWorkerProcess rank=1"),
    ),
    ("[2026-11-20 10:02:15 DP1 TP0] Decode batch", ("2026-11-20 10:02:15", "DP1", None)),
    (
        "[2026-11-20 10:02:15,123 DP0 PP1 TP3] Decode batch",
        ("2026-11-20 10:02:15", "DP0 PP1", None),
    ),
    ("[2026-11-20 10:02:15] Decode batch", ("2026-11-20 10:02:15", "", None)),
    ("[DP1 TP0 EP2] Decode batch, accept len: 2.0", (None, "DP1 EP2", None)),
    ("[TP0] Decode batch", (None, "", None)),
    (
        "2026-11-20 10:00:00,123 - vllm - INFO - SpecDecoding metrics: x",
        ("2026-11-20 10:00:00", "", None),
    ),
    ("2026-11-20T10:00:00.123456789Z INFO 11-20 10:00:01 [m.py:1] x", ("11-20 10:00:01", "", None)),
    ("ERROR 12-31 23:59:59 x", ("12-31 23:59:59", "", None)),
    ("CRITICAL 12-31 23:59:59:1 x", (None, "", None)),
    ("DEBUG 12-31 23:59:5 x", (None, "", None)),
    ("Traceback (most recent call last):", (None, "", None)),
    ("x" * 50 + "[DP1] Decode batch", (None, "DP1", None)),
    ("x" * 70 + "[DP1] Decode batch", (None, "", None)),
    (" " * 50 + "[2026-11-20 10:02:15 DP1 TP0] Decode batch", ("2026-11-20 10:02:15", "", None)),
    ("x" * 90 + "2026-11-20 10:00:00", (None, "", None)),
    ("x" * 130 + "(APIServer pid=7) x", (None, "", None)),
    (
        "x" * 190 + "(APIServer pid=7) INFO 12-02 12:56:32 x",
        ("12-02 12:56:32", "APIServer pid=7", "APIServer pid=7"),
    ),
    (
        "x" * 210 + "(APIServer pid=7) INFO 12-02 12:56:32 x",
        ("12-02 12:56:32", "APIServer pid=7", "APIServer pid=7"),
    ),
    ("[a] " + "y" * 80 + "[2026-11-20 10:02:15 DP1 TP0] x", (None, "", None)),
    ("[a]" + "y" * 49 + "[2026-11-20 10:02:15 DP1 TP0] x", ("2026-11-20 10:02:15", "", None)),
    ("y" * 40 + "[2026-11-20 10:02:15 DP1 TP0] x", ("2026-11-20 10:02:15", "", None)),
    ("x" * 62 + "2026-11-20 10:00:00", (None, "", None)),
    ("(APIServer pid=7) hello", (None, "APIServer pid=7", "APIServer pid=7")),
    ("x" * 104 + "(APIServer pid=7) hello", (None, "", None)),
    ("x" * 103 + "(APIServer pid=7) hello", (None, "APIServer pid=7", "APIServer pid=7")),
    ("x" * 130 + "(VllmWorkerProcess rank=1 pid=9)", (None, "", None)),
    ("x" * 96 + "(VllmWorkerProcess rank=1 pid=9)", (None, "", None)),
    (
        "x" * 95 + "(VllmWorkerProcess rank=1 pid=9)",
        (None, "VllmWorkerProcess rank=1", "VllmWorkerProcess rank=1"),
    ),
    ("[a]" + "y" * 80 + "[DP1] x", (None, "", None)),
    ("[a]" + "y" * 73 + "[DP1] x", (None, "", None)),
    ("[a]" + "y" * 72 + "[DP1] x", (None, "DP1", None)),
    ("y" * 60 + "[DP1] x", (None, "", None)),
    ("INFO 10-16 19:05:47 [DP1 TP0] x", ("10-16 19:05:47", "DP1", None)),
    # vLLM's prefix in the first 200 characters wins over a bracketed date (a collector's
    # stamp before it, a message after it); past 200, the bracketed date at the start wins
    (
        "[2026-11-20 10:02:15] (APIServer pid=7) INFO 12-02 12:56:32 [m.py:1] x",
        ("12-02 12:56:32", "APIServer pid=7", "APIServer pid=7"),
    ),
    (
        "(APIServer pid=7) INFO 12-02 12:56:32 [2026-11-20 10:02:15] x",
        ("12-02 12:56:32", "APIServer pid=7", "APIServer pid=7"),
    ),
    (
        "[2026-11-20 10:02:15] " + "y" * 141 + "(APIServer pid=7) INFO 12-02 12:56:32 x",
        ("12-02 12:56:32", "APIServer pid=7", "APIServer pid=7"),
    ),
    (
        "[2026-11-20 10:02:15] " + "y" * 142 + "(APIServer pid=7) INFO 12-02 12:56:32 x",
        ("2026-11-20 10:02:15", "", None),
    ),
]

# (line, the plain line)
JSON_CASES: list[tuple[str, str]] = [
    (
        (
            '{"asctime": "2026-11-20 10:00:00", "levelname": "INFO", "message":'
            ' "SpecDecoding metrics: x\\n"}'
        ),
        "2026-11-20 10:00:00 INFO SpecDecoding metrics: x",
    ),
    ('  {"time": "t1", "level": "WARNING", "msg": "hello"}', "t1 WARNING hello"),
    (
        '{"ts": "t2", "log": "{\\"timestamp\\": \\"t3\\", \\"message\\": \\"inner\\"}"}',
        "t2 t3 inner",
    ),
    ('{"timestamp": 5, "level": 3, "message": "m"}', "m"),
    ('{"message": 1, "msg": "second"}', "second"),
    ('{"nothing": "here"}', '{"nothing": "here"}'),
    ("[1, 2]", "[1, 2]"),
    ('{"a": 1', '{"a": 1'),
    ('[1] {"message": "m"}', '[1] {"message": "m"}'),
    ('{"message": "{not json"}', "{not json"),
    (
        (
            '{"asctime": "a", "timestamp": "b", "levelname": "L", "level": "l",'
            ' "message": "m", "log": "g"}'
        ),
        "a L m",
    ),
    ('{"log": " {\\"message\\": \\"m\\"}"}', "m"),
    ('{"message": "{\\"message\\": \\"m\\"}X"}', '{"message": "m"}X'),
    # a message loses its trailing newlines only, whether or not it looks like a record
    ('{"message": "{not json  \\n"}', "{not json  "),
    ('{"message": "plain  \\n"}', "plain  "),
    ('{"message": "endX\\n"}', "endX"),
]


@pytest.mark.parametrize("line, want", VLLM_CASES)
def test_vllm_line(line: str, want: object) -> None:
    p = parse_vllm(line)
    assert (figures(p.window), p.unknown, p.skipped, p.v0_cumulative) == want


@pytest.mark.parametrize("line, want", SGLANG_CASES)
def test_sglang_line(line: str, want: object) -> None:
    p = parse_sglang(line)
    assert (figures(p.window), p.unknown) == want


@pytest.mark.parametrize("line, want", COMPANION_CASES)
def test_companion_line(line: str, want: object) -> None:
    assert (parse_companion(line), companion_busy(line), kv_cache_build(line)) == want


@pytest.mark.parametrize("line, want", CONFIG_CASES)
def test_spec_config_line(line: str, want: object) -> None:
    assert parse_spec_config(line) == want


@pytest.mark.parametrize("line, want", PREFIX_CASES)
def test_line_prefix(line: str, want: object) -> None:
    i = line_info(line)
    assert (i.ts.text() if i.ts else None, i.stream, i.pid_key) == want


@pytest.mark.parametrize("line, want", JSON_CASES)
def test_json_record(line: str, want: str) -> None:
    assert unwrap_json(line) == want


def test_busy_when_only_waiting() -> None:
    assert companion_busy("Engine 000: Running: 0 reqs, Waiting: 2 reqs")
    assert (
        kv_cache_build("Engine 000: Running: 0 reqs, CPU KV cache usage: 1%, GPU KV cache") == "cpu"
    )


@pytest.mark.parametrize(
    "text, want",
    [
        ("4.61 tokens/s", 4.61),
        ("53 tokens", 53.0),
        ("9.8%", 9.8),
        (" 9.8 % ", 9.8),
        ("3 reqs", 3.0),
        ("2.5", 2.5),
        ("nan%", None),
        ("inf", None),
        ("-inf tokens", None),
        ("n/a", None),
        ("", None),
        ("5 tokens/s tokens", None),
    ],
)
def test_num(text: str, want: float | None) -> None:
    assert _num(text) == want


@pytest.mark.parametrize(
    "text, want", [("53 tokens", 53), ("2.9", 2), ("-1", -1), ("nan", None), ("x", None)]
)
def test_int(text: str, want: int | None) -> None:
    got = _int(text)
    assert got == want and (got is None or isinstance(got, int))


@pytest.mark.parametrize(
    "text, want",
    [
        ("0.7, 0.4,0.2", [0.7, 0.4, 0.2]),
        ("0.5, ", [0.5]),
        (" , ", None),
        ("0.5, x", None),
        ("0.5, nan", None),
        ("inf", None),
    ],
)
def test_floats(text: str, want: list[float] | None) -> None:
    assert _floats(text) == want


@pytest.mark.parametrize(
    "text, want",
    [
        (" 'dflash' ", "dflash"),
        ('"bf16"', "bf16"),
        ("'x\"", "'x\""),
        ("'", ""),  # one quote opens and closes
        ("None", None),
        ("15", 15),
        ("0.5", 0.5),
        ("1e3", 1000.0),
        ("auto", "auto"),
        ("XautoX", "XautoX"),
    ],
)
def test_plain(text: str, want: object) -> None:
    got = _plain(text)
    assert got == want and type(got) is type(want)


@pytest.mark.parametrize(
    "body, want",
    [
        ("A: 1, B: 0.1, 0.2, C: 3%", [("a", "1"), ("b", "0.1, 0.2"), ("c", "3%")]),
        (
            " Accepted: 5 tokens, Drafted: 9 tokens., ",
            [("accepted", "5 tokens"), ("drafted", "9 tokens")],
        ),
        ("orphan, A:  2 , , B: x", [("a", "2"), ("b", "x")]),
        ("Number of draft tokens tokens: 7", [("number of draft tokens", "7")]),
        ("Tokens tokens: 7, Time: 1: 2", [("tokens", "7"), ("time", "1: 2")]),
        ("a:1", []),
        ("A: X", [("a", "X")]),
    ],
)
def test_split_fields(body: str, want: list[tuple[str, str]]) -> None:
    assert split_fields(body) == want


@pytest.mark.parametrize(
    "raw, want",
    [
        (b"\x1b[32mINFO\x1b[0m x\r\n", "INFO x"),
        (b"\x1b[?25lbar\n", "bar"),
        (b"a\rb\n\n", "ab"),
        (b"caf\xe9 ok", "caf\ufffd ok"),
        (b"plain [1m", "plain [1m"),
        (b"trailing  \n", "trailing  "),
        (b"endsX\n", "endsX"),
    ],
)
def test_clean(raw: bytes, want: str) -> None:
    assert clean(raw) == want


def test_timestamp_of_raw_bytes() -> None:
    assert timestamp_of(b"\x1b[32mINFO\x1b[0m 01-02 03:04:05 x\n") == RawTs(None, 1, 2, 3, 4, 5)
    assert timestamp_of(b"Traceback") is None


def test_raw_timestamp() -> None:
    ts = RawTs(None, 2, 29, 7, 8, 9)
    assert (ts.text(), ts.key()) == ("02-29 07:08:09", (2, 29, 7, 8, 9))
    assert RawTs(26, 1, 2, 3, 4, 5).text() == "0026-01-02 03:04:05"
    assert ts.at_year(2027) == datetime(2027, 2, 28, 7, 8, 9)  # no 29th: the 28th
    assert ts.at_year(2028) == datetime(2028, 2, 29, 7, 8, 9)
    assert RawTs(None, 3, 29, 0, 0, 0).at_year(2027) == datetime(2027, 3, 29)
    assert RawTs(None, 4, 31, 0, 0, 0).at_year(2027) is None
    assert RawTs(None, 2, 30, 0, 0, 0).at_year(2027) is None


@pytest.mark.parametrize(
    "prev, cur, want",
    [
        (
            None,
            (3, 8547, 13311, 10616),
            {
                "num_drafts": 4437,
                "drafted_tokens": 13311,
                "accepted_tokens": 6179,
                "mean_acceptance_length": 10616 / 4437,
                "draft_acceptance_rate": 6179 / 13311,
                "cumulative": True,
            },
        ),
        (
            (3, 0, 13311, 10616),
            (3, 5, 16311, 12616),
            {
                "num_drafts": 1000,
                "drafted_tokens": 3000,
                "accepted_tokens": 1000,
                "mean_acceptance_length": 2.0,
                "draft_acceptance_rate": 1 / 3,
            },
        ),
        (  # the same counts: the deltas equal the previous reading's
            (3, 0, 300, 200),
            (3, 0, 600, 400),
            {
                "num_drafts": 100,
                "drafted_tokens": 300,
                "accepted_tokens": 100,
                "mean_acceptance_length": 2.0,
                "draft_acceptance_rate": 1 / 3,
            },
        ),
        (  # another K: a new run, its totals
            (2, 0, 300, 200),
            (3, 0, 600, 400),
            {
                "num_drafts": 200,
                "drafted_tokens": 600,
                "accepted_tokens": 200,
                "mean_acceptance_length": 2.0,
                "draft_acceptance_rate": 1 / 3,
            },
        ),
        (  # fewer drafted than before: a restart, its totals
            (3, 0, 900, 100),
            (3, 0, 600, 400),
            {
                "num_drafts": 200,
                "drafted_tokens": 600,
                "accepted_tokens": 200,
                "mean_acceptance_length": 2.0,
                "draft_acceptance_rate": 1 / 3,
            },
        ),
        (  # fewer emitted than before: a restart, its totals
            (3, 0, 300, 500),
            (3, 0, 600, 400),
            {
                "num_drafts": 200,
                "drafted_tokens": 600,
                "accepted_tokens": 200,
                "mean_acceptance_length": 2.0,
                "draft_acceptance_rate": 1 / 3,
            },
        ),
        (  # emitted under drafts (an inconsistent reading): none accepted, not negative
            None,
            (3, 0, 300, 50),
            {
                "num_drafts": 100,
                "drafted_tokens": 300,
                "accepted_tokens": 0,
                "mean_acceptance_length": 0.5,
                "draft_acceptance_rate": 0.0,
                "cumulative": True,
            },
        ),
        ((3, 0, 600, 400), (3, 0, 600, 400), None),  # nothing drafted since
        (  # one token drafted since, at K = 1
            (1, 0, 600, 900),
            (1, 0, 601, 902),
            {
                "num_drafts": 1,
                "drafted_tokens": 1,
                "accepted_tokens": 1,
                "mean_acceptance_length": 2.0,
                "draft_acceptance_rate": 1.0,
            },
        ),
        (None, (0, 0, 600, 400), None),
        (None, (3, 0, 0, 0), None),
    ],
)
def test_v0_window(prev, cur, want) -> None:  # type: ignore[no-untyped-def]
    w = v0_window(prev, cur)
    if want is None:
        assert w is None
        return
    assert figures(w) == {"engine": "vllm", "format": "vllm-v0", **want}


@pytest.mark.parametrize(
    ("drafted", "want"),
    [
        (150, 10),  # every draft proposed K = 15: drafted / K, the mean agrees
        (100, 10),  # steps cut short (near max_tokens): drafted / K = 7 would print 5.29
        (16, 2),  # two drafts, one of a single token
    ],
)
def test_vllm_drafts_when_steps_propose_fewer_than_k(drafted: int, want: int) -> None:
    """vLLM prints 1 + accepted / drafts; drafted / K undercounts drafts that were cut short."""
    drafts = want
    accepted = 3 * drafts if drafted >= 3 * drafts else drafted
    rates = ", ".join(["0.700"] + ["0.000"] * 14)
    line = (
        f"{SPEC}Mean acceptance length: {1 + accepted / drafts:.2f}, Accepted throughput: 3.00 "
        f"tokens/s, Drafted throughput: 10.00 tokens/s, Accepted: {accepted} tokens, Drafted: "
        f"{drafted} tokens, Per-position acceptance rate: {rates}, Avg Draft acceptance rate: "
        f"{100 * accepted / drafted:.1f}%"
    )
    w = parse_vllm(line).window
    assert w is not None and w.num_drafts == want
