"""`promtool test rules` cases for the rules of `rules.py`: series a server would export in each
situation the alerts are about, and the alerts that must (and must not) fire.

    healthy          τ 4 at 1 draft/s: nothing fires
    low traffic      every draft rejected, but 3 drafts a minute: nothing fires (no verdict on
                     a handful)
    collapse         τ 1.05 at 1 draft/s: DFlashAcceptanceCollapse after `for:`, only that
    all rejected     τ 1.00, every position 0: DFlashAcceptanceCollapse and DFlashAllDraftsRejected
    decay            τ 4 for 7 hours, then 2.5: DFlashAcceptanceDecay (not a collapse)
    prefix cache     τ 4 then 2.5 while prefix-cache hits go from 10 % to 60 %:
                     DFlashPrefixCacheSuspect
    speculation off  requests running, no drafts: DFlashSpeculationOff
    SGLang           its gauges at τ 1.1 with verify calls: DFlashAcceptanceCollapse, engine sglang
    llama.cpp        its counters (no model_name label) at τ 1.05: the collapse, engine llama.cpp;
                     at τ 3: nothing
    below expected   (with `--drafter`) τ 1.5 against the range's floor: DFlashBelowExpected

Each case fixes the exact labels and annotations of what fires (annotations hold no `$value`).
Pure: the caller writes the file.
"""

from __future__ import annotations

import re
from typing import Any

from dflashctl.monitoring.rules import RuleOptions, alert_rules

LABELS = {"job": "vllm", "instance": "gpu1:8000", "model_name": "Qwen/Qwen3-8B"}
LLAMA = {"job": "llamacpp", "instance": "gpu2:8080"}
_LABEL_REF = re.compile(r"\{\{ \$labels\.(\w+) \}\}")


def _series(name: str, labels: dict[str, str], values: str) -> dict[str, str]:
    inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{inner}}}", "values": values}


def _counter(per_minute: float, minutes: int, start: float = 0.0) -> str:
    """Prometheus' expanding notation for a counter growing `per_minute` each 1m step."""
    return f"{start:g}+{per_minute:g}x{minutes}"


def _vllm(
    labels: dict[str, str], minutes: int, drafts: float, accepted: list[float], prefix: str = "vllm"
) -> list:
    """vLLM's spec-decode counters (or llama.cpp's: `prefix` llamacpp) at `drafts` per minute,
    `accepted[i]` per minute at position i (K = len(accepted)); the accepted total is their
    sum."""
    k = len(accepted)
    out = [
        _series(f"{prefix}:spec_decode_num_drafts_total", labels, _counter(drafts, minutes)),
        _series(
            f"{prefix}:spec_decode_num_draft_tokens_total", labels, _counter(drafts * k, minutes)
        ),
        _series(
            f"{prefix}:spec_decode_num_accepted_tokens_total",
            labels,
            _counter(sum(accepted), minutes),
        ),
    ]
    for i, a in enumerate(accepted):
        out.append(
            _series(
                f"{prefix}:spec_decode_num_accepted_tokens_per_pos_total",
                {**labels, "position": str(i)},
                _counter(a, minutes),
            )
        )
    return out


def _two_phase(per_minute_a: float, minutes_a: int, per_minute_b: float, minutes_b: int) -> str:
    """A counter at one rate for `minutes_a` steps, then at another for `minutes_b`."""
    end_a = per_minute_a * minutes_a
    return (
        f"0+{per_minute_a:g}x{minutes_a} {end_a + per_minute_b:g}+{per_minute_b:g}x{minutes_b - 1}"
    )


def _vllm_two_phase(labels: dict[str, str], a: tuple[int, list[float]], b: tuple[int, list[float]]):
    """Drafts at 60 a minute throughout; acceptance per position as in `a` for its minutes,
    then as in `b`."""
    (ma, acc_a), (mb, acc_b) = a, b
    k = len(acc_a)
    out = [
        _series("vllm:spec_decode_num_drafts_total", labels, _two_phase(60, ma, 60, mb)),
        _series(
            "vllm:spec_decode_num_draft_tokens_total", labels, _two_phase(60 * k, ma, 60 * k, mb)
        ),
        _series(
            "vllm:spec_decode_num_accepted_tokens_total",
            labels,
            _two_phase(sum(acc_a), ma, sum(acc_b), mb),
        ),
    ]
    for i in range(k):
        out.append(
            _series(
                "vllm:spec_decode_num_accepted_tokens_per_pos_total",
                {**labels, "position": str(i)},
                _two_phase(acc_a[i], ma, acc_b[i], mb),
            )
        )
    return out


def _expect(o: RuleOptions, name: str, labels: dict[str, str]) -> dict[str, Any]:
    """The alert `name` as it fires for a series with `labels`: its own labels added, its
    annotations' `{{ $labels.x }}` filled in."""
    rule = next(
        r
        for r in alert_rules(o)
        if r["alert"] == name
        and ("drafter" not in r["labels"] or r["labels"]["drafter"] == labels.get("drafter"))
    )
    series = {k: v for k, v in labels.items() if k != "drafter"}
    ann = {k: _LABEL_REF.sub(lambda m: series.get(m.group(1), ""), v)
           for k, v in rule["annotations"].items()}  # fmt: skip
    return {"exp_labels": {**series, **rule["labels"]}, "exp_annotations": ann}


def _case(
    o: RuleOptions,
    name: str,
    series: list[dict[str, str]],
    at: str,
    fired: dict[str, list[dict[str, str]]],
    checked: tuple[str, ...],
) -> dict[str, Any]:
    """One test: `fired` maps an alert to the label sets it fires for at `at`; every other alert
    of `checked` must be silent then."""
    tests = [
        {
            "eval_time": at,
            "alertname": alert,
            "exp_alerts": [_expect(o, alert, ls) for ls in fired.get(alert, [])],
        }
        for alert in checked
    ]
    return {"name": name, "interval": "1m", "input_series": series, "alert_rule_test": tests}


def rule_tests(o: RuleOptions, rule_file: str) -> dict[str, Any]:
    """The `promtool test rules` file for the rules written to `rule_file`."""
    vllm = {**LABELS, "engine": "vllm"}
    core = ("DFlashAcceptanceCollapse", "DFlashAllDraftsRejected", "DFlashAcceptanceDecay")
    running = _series("vllm:num_requests_running", LABELS, "2x60")
    cases = [
        _case(o, "healthy", [*_vllm(LABELS, 60, 60, [50, 40, 30, 20, 15, 10, 5, 10]), running],
              "30m", {}, (*core, "DFlashSpeculationOff")),
        _case(o, "low traffic", _vllm(LABELS, 60, 3, [0, 0, 0]), "30m", {}, core),
        _case(o, "collapse", _vllm(LABELS, 60, 60, [3, 0, 0]), "30m",
              {"DFlashAcceptanceCollapse": [vllm]}, core),
        _case(o, "all rejected", _vllm(LABELS, 60, 60, [0, 0, 0]), "30m",
              {"DFlashAcceptanceCollapse": [vllm], "DFlashAllDraftsRejected": [vllm]}, core),
        _case(o, "decay", _vllm_two_phase(LABELS, (420, [60, 60, 60]), (60, [50, 30, 10])),
              "470m", {"DFlashAcceptanceDecay": [vllm]}, core),
        _case(
            o,
            "prefix cache",
            [
                *_vllm_two_phase(LABELS, (120, [60, 60, 60]), (60, [50, 30, 10])),
                _series("vllm:prefix_cache_queries_total", LABELS, _counter(1000, 180)),
                _series("vllm:prefix_cache_hits_total", LABELS, _two_phase(100, 120, 600, 60)),
            ],
            "170m",
            {"DFlashPrefixCacheSuspect": [vllm]},
            ("DFlashPrefixCacheSuspect", "DFlashAcceptanceCollapse"),
        ),
        _case(o, "speculation off", [running, *_vllm(LABELS, 60, 0, [0, 0])], "30m",
              {"DFlashSpeculationOff": [LABELS]}, ("DFlashSpeculationOff",)),
        _case(
            o,
            "sglang",
            [
                _series("sglang:spec_accept_length", {**LABELS, "job": "sglang"}, "1.1x60"),
                _series("sglang:spec_accept_rate", {**LABELS, "job": "sglang"}, "0.01x60"),
                _series("sglang:spec_verify_calls_total", {**LABELS, "job": "sglang"},
                        _counter(60, 60)),
            ],
            "30m",
            {"DFlashAcceptanceCollapse": [{**LABELS, "job": "sglang", "engine": "sglang"}]},
            ("DFlashAcceptanceCollapse",),
        ),
        # llama.cpp's server labels nothing: no model_name on its series
        _case(o, "llama.cpp", _vllm(LLAMA, 60, 60, [3, 0, 0], prefix="llamacpp"), "30m",
              {"DFlashAcceptanceCollapse": [{**LLAMA, "engine": "llama.cpp"}]}, core),
        _case(o, "llama.cpp healthy", _vllm(LLAMA, 60, 60, [50, 40, 30], prefix="llamacpp"),
              "30m", {}, core),
    ]  # fmt: skip
    for e in o.expected:  # a series its matchers select, at τ between collapse and its floor
        labels = dict(LABELS)
        for m in re.finditer(r'(\w+)\s*=\s*"([^"]*)"', e.matchers):
            labels[m.group(1)] = m.group(2)
        floor = max(e.min - 0.3, o.collapse_length + 0.2)
        accepted_per_min = round((floor - 1) * 60, 3)
        cases.append(
            _case(
                o,
                f"below expected ({e.drafter})",
                _vllm(labels, 60, 60, [accepted_per_min, 0, 0]),
                "30m",
                {"DFlashBelowExpected": [{**labels, "engine": "vllm", "drafter": e.drafter}]},
                ("DFlashBelowExpected",),
            )
        )
    return {"rule_files": [rule_file], "evaluation_interval": "1m", "tests": cases}
