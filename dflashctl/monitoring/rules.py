"""Prometheus rules for speculative decoding, from the same thresholds `metrics` judges with.

Recording rules put every engine's series into one shape, per `job`, `instance` and `model_name`,
with an `engine` label:

    dflashctl:spec_decode_drafts:rate5m                 drafts (verify steps) per second
    dflashctl:spec_decode_mean_acceptance_length:rate5m 1 + accepted / drafts (τ)
    dflashctl:spec_decode_acceptance_rate:rate5m        accepted / drafted tokens
    dflashctl:spec_decode_position_acceptance:rate5m    per `position`: accepted there / drafts
    dflashctl:prefix_cache_hit_rate:rate5m              prefix-cache hits / queries (vLLM)

from vLLM's counters (`vllm:spec_decode_num_*_total`, `vllm:prefix_cache_*_total`), llama.cpp's
of the same names (`llamacpp:spec_decode_num_*_total`, its server's `--metrics`), SGLang's
gauges (`sglang:spec_accept_length`, `sglang:spec_accept_rate`, with
`sglang:spec_verify_calls_total` for traffic) and the exporter's `dflashctl_spec_*` counters
(`metrics --serve-metrics`, for engines that only log). The alerts read only those, so one
rule covers every engine. Annotations hold labels, never `$value`: what an alert says is
fixed by its series, so `promtool test rules` checks it exactly. Each alert has a `for:`, a
traffic guard (no verdict on a handful of drafts), a severity, and annotations with the likely
causes, the dflashctl command that checks each, and a `runbook_url` into docs/monitoring.md.
Pure: data in, dicts out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from dflashctl.errors import UsageError
from dflashctl.metrics.thresholds import Thresholds

BY = "job, instance, model_name"
RUNBOOK = "docs/monitoring.md"  # --runbook-base: where your copy of the docs is served
DRAFTS = "dflashctl:spec_decode_drafts:rate5m"
TAU = "dflashctl:spec_decode_mean_acceptance_length:rate5m"
RATE = "dflashctl:spec_decode_acceptance_rate:rate5m"
POSITION = "dflashctl:spec_decode_position_acceptance:rate5m"
HIT_RATE = "dflashctl:prefix_cache_hit_rate:rate5m"
_DURATION = re.compile(r"[1-9][0-9]*(s|m|h)")
_MATCHER = re.compile(r'^\s*[A-Za-z_][A-Za-z0-9_]*\s*(=|!=|=~|!~)\s*"[^"\\]*"\s*$')


@dataclass(frozen=True)
class Expected:
    """A registry drafter tied to the series that serve it: `matchers` is the inside of a
    PromQL selector (`model_name="Qwen/Qwen3-8B"`)."""

    drafter: str
    matchers: str
    min: float
    max: float


@dataclass
class RuleOptions:
    interval: str = "5m"  # how long a condition must hold before an alert fires (`for:`)
    min_drafts_per_s: float = 0.1  # traffic guard: ~30 drafts in the 5-minute window
    collapse_length: float = Thresholds.collapse_length
    decay_ratio: float = Thresholds.decay_ratio
    decay_offset: str = "6h"
    expected: list[Expected] = field(default_factory=list)
    runbook: str = RUNBOOK

    def validate(self) -> None:
        for name, value in (("--for", self.interval), ("--decay-offset", self.decay_offset)):
            if not _DURATION.fullmatch(value):
                raise UsageError(f"{name} {value!r} is not a duration", "e.g. 5m, 30s, 6h")
        if not 0 < self.min_drafts_per_s < 1e6:
            raise UsageError(
                f"--min-drafts-per-s {self.min_drafts_per_s:g}: give a rate above 0 and below 1e6"
            )


def parse_expected(spec: str) -> Expected:
    """`--drafter NAME=MATCHER[,MATCHER...]`: a registry drafter (its expected range) and the
    label matchers of the series that serve it."""
    from dflashctl.drafter.registry import get_entry

    name, eq, matchers = spec.partition("=")
    if not eq or not name.strip() or not matchers.strip():
        raise UsageError(
            f"--drafter {spec!r} is not NAME=MATCHER",
            """e.g. --drafter 'qwen3-8b-dflash-b16=model_name="Qwen/Qwen3-8B"'""",
        )
    parts = _split_matchers(matchers)
    bad = [p for p in parts if not _MATCHER.match(p)]
    if bad:
        raise UsageError(
            f"--drafter {name}: {bad[0]!r} is not a label matcher",
            """a matcher is label="value" (or !=, =~, !~), several joined by commas""",
        )
    entry = get_entry(name.strip())
    exp = entry.expected_acceptance
    if exp is None:
        raise UsageError(
            f"the registry has no expected acceptance range for {entry.name}",
            "alerts on collapse and decay still apply; or add expected_acceptance to its entry",
        )
    return Expected(entry.name, ", ".join(p.strip() for p in parts), exp.min, exp.max)


def _split_matchers(text: str) -> list[str]:
    """Comma-separated matchers, commas inside quoted values kept."""
    out, cur, quoted = [], "", False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return [p for p in out if p.strip()]


def recording_rules() -> list[dict[str, Any]]:
    def rec(name: str, expr: str, engine: str) -> dict[str, Any]:
        return {"record": name, "expr": expr, "labels": {"engine": engine}}

    def position(counter: str, drafts: str, engine: str) -> dict[str, Any]:
        """Accepted at each `position` per draft: a per-position counter over the drafts."""
        per_position = f"sum by ({BY}, position) (rate({counter}[5m]))"
        return rec(POSITION, f"{per_position} / on ({BY}) group_left () ({drafts} > 0)", engine)

    def counters(prefix: str, engine: str) -> list[dict[str, Any]]:
        """vLLM's counters, or llama.cpp's of the same meaning (`llamacpp:spec_decode_*`,
        its server's --metrics since ggml-org/llama.cpp#26389)."""

        def c(metric: str) -> str:
            return f"sum by ({BY}) (rate({prefix}:spec_decode_num_{metric}_total[5m]))"

        return [
            rec(DRAFTS, c("drafts"), engine),
            rec(TAU, f"1 + {c('accepted_tokens')} / ({c('drafts')} > 0)", engine),
            rec(RATE, f"{c('accepted_tokens')} / ({c('draft_tokens')} > 0)", engine),
            position(
                f"{prefix}:spec_decode_num_accepted_tokens_per_pos_total", c("drafts"), engine
            ),
        ]

    def exporter(metric: str) -> str:
        return f"sum by ({BY}) (rate(dflashctl_spec_{metric}_total[5m]))"

    rules = [
        *counters("vllm", "vllm"),
        rec(
            HIT_RATE,
            f"sum by ({BY}) (rate(vllm:prefix_cache_hits_total[5m]))"
            f" / (sum by ({BY}) (rate(vllm:prefix_cache_queries_total[5m])) > 0)",
            "vllm",
        ),
        *counters("llamacpp", "llama.cpp"),
        # SGLang reports τ and the rate as gauges; its verify calls count the drafts
        rec(DRAFTS, f"sum by ({BY}) (rate(sglang:spec_verify_calls_total[5m]))", "sglang"),
        rec(TAU, f"avg by ({BY}) (avg_over_time(sglang:spec_accept_length[5m]))", "sglang"),
        rec(RATE, f"avg by ({BY}) (avg_over_time(sglang:spec_accept_rate[5m]))", "sglang"),
        # the exporter (`dflashctl metrics LOG --serve-metrics`): vLLM's counters, other names
        rec(DRAFTS, exporter("drafts"), "exporter"),
        rec(TAU, f"1 + {exporter('accepted_tokens')} / ({exporter('drafts')} > 0)", "exporter"),
        rec(RATE, f"{exporter('accepted_tokens')} / ({exporter('draft_tokens')} > 0)", "exporter"),
        position(
            "dflashctl_spec_accepted_tokens_per_position_total", exporter("drafts"), "exporter"
        ),
    ]
    return rules


def _traffic(o: RuleOptions) -> str:
    return f"on ({BY}, engine) ({DRAFTS} > {o.min_drafts_per_s:g})"


def _annotations(o: RuleOptions, anchor: str, summary: str, causes: list[tuple[str, str]]):
    lines = [f"- {cause} (check: {check})" for cause, check in causes]
    return {
        "summary": summary,
        "description": "Likely causes, most likely first:\n" + "\n".join(lines),
        "runbook_url": f"{o.runbook}#{anchor}",
    }


def alert_rules(o: RuleOptions) -> list[dict[str, Any]]:
    o.validate()
    where = "{{ $labels.model_name }} on {{ $labels.instance }} ({{ $labels.engine }})"
    verify = "dflashctl verify-config DRAFTER_DIR --drafter NAME --target TARGET_DIR"
    metrics = "dflashctl metrics http://{{ $labels.instance }}/metrics"
    alerts: list[dict[str, Any]] = [
        {
            "alert": "DFlashAcceptanceCollapse",
            "expr": f"{TAU} <= {o.collapse_length:g} and {_traffic(o)}",
            "for": o.interval,
            "labels": {"severity": "critical"},
            "annotations": _annotations(
                o,
                "acceptance-collapse",
                f"speculative decoding collapsed on {where}: mean acceptance length at or "
                f"below {o.collapse_length:g}: every step pays the drafter for almost nothing",
                [
                    (
                        "a stale or wrong drafter config (mask_token_id, target_layer_ids, "
                        "layer_types): coherent text, no acceptance",
                        verify,
                    ),
                    ("the drafter's weights are not the pinned revision", "dflashctl fetch NAME"),
                    (
                        "a known engine defect for this layout or version",
                        "dflashctl doctor --engine vllm --drafter DRAFTER_DIR",
                    ),
                    ("thinking mode on a drafter trained without it", metrics),
                ],
            ),
        },
        {
            "alert": "DFlashAllDraftsRejected",
            "expr": f"{TAU} < 1.02 and on ({BY}, engine) "
            f"(max by ({BY}, engine) ({POSITION}) < 0.005) and {_traffic(o)}",
            "for": o.interval,
            "labels": {"severity": "critical"},
            "annotations": _annotations(
                o,
                "all-drafts-rejected",
                f"every draft rejected on {where}: mean acceptance length 1.00 with every "
                "position at 0: not a weak drafter, a wiring or config fault",
                [
                    (
                        "the drafter's lm_head or draft vocabulary (draft_vocab_size, d2t) "
                        "swapped with or overwritten by the target's",
                        verify,
                    ),
                    (
                        "a wrong mask_token_id (it can reject position 1 too: real vLLM 0.32 "
                        "CPU in bf16)",
                        verify,
                    ),
                    (
                        "target taps wired to other layers than trained (an off-by-one "
                        "aux-layer shift)",
                        verify,
                    ),
                    (
                        "a CUDA-graph mode that runs the drafter's attention wrongly "
                        "(piecewise graphs with attention inside)",
                        "dflashctl doctor --engine vllm --drafter DRAFTER_DIR",
                    ),
                ],
            ),
        },
        {
            "alert": "DFlashAcceptanceDecay",
            "expr": f"{TAU} < {o.decay_ratio:g} * ({TAU} offset {o.decay_offset}) "
            f"and {_traffic(o)}",
            "for": "30m",
            "labels": {"severity": "warning"},
            "annotations": _annotations(
                o,
                "acceptance-decay",
                f"mean acceptance length on {where} fell below {o.decay_ratio:g}× its value "
                f"{o.decay_offset} ago",
                [
                    (
                        "the workload changed (prompt length, domain, language, temperature)",
                        "dflashctl smoke http://{{ $labels.instance }} (fixed prompts)",
                    ),
                    (
                        "prefix caching restoring context the drafter never saw (acceptance "
                        "falls as cached prefixes grow)",
                        "relaunch with --no-enable-prefix-caching and compare",
                    ),
                    ("acceptance drift over hours until a restart", metrics),
                ],
            ),
        },
        {
            "alert": "DFlashPrefixCacheSuspect",
            "expr": f"{TAU} < {o.decay_ratio:g} * ({TAU} offset 1h) and on ({BY}) "
            f"({HIT_RATE} > ({HIT_RATE} offset 1h) + 0.2) and {_traffic(o)}",
            "for": o.interval,
            "labels": {"severity": "warning"},
            "annotations": _annotations(
                o,
                "prefix-cache",
                f"acceptance on {where} fell while prefix-cache hits rose: the drafter's "
                "context is restored from the cache without its own KV (vllm#47930)",
                [
                    (
                        "prefix caching with DFlash/DSpark/DFlash2 on an affected vLLM",
                        "relaunch with --no-enable-prefix-caching; dflashctl doctor --engine vllm",
                    ),
                ],
            ),
        },
        {
            "alert": "DFlashSpeculationOff",
            "expr": f"sum by ({BY}) (vllm:num_requests_running) > 0 and on ({BY}) "
            f"(sum by ({BY}) (rate(vllm:spec_decode_num_drafts_total[5m])) == 0)",
            "for": "10m",
            "labels": {"severity": "warning"},
            "annotations": _annotations(
                o,
                "speculation-off",
                f"{where} runs requests but verifies no drafts: speculation is off "
                "(disabled for large batches, or never enabled on this server)",
                [
                    (
                        "speculation disabled by batch size (disable_by_batch_size, "
                        "num_speculative_tokens_per_batch_size): expected at large batches",
                        "grep the server log for speculative_config",
                    ),
                    ("the server was started without --speculative-config", metrics),
                ],
            ),
        },
    ]
    for e in o.expected:
        sel = f"{{{e.matchers}}}"
        alerts.append(
            {
                "alert": "DFlashBelowExpected",
                "expr": f"{TAU}{sel} < {e.min:g} and {_traffic(o)}",
                "for": "15m",
                "labels": {"severity": "warning", "drafter": e.drafter},
                "annotations": _annotations(
                    o,
                    "below-expected",
                    f"mean acceptance length on {where} is below {e.drafter}'s expected range "
                    f"{e.min:g}-{e.max:g}",
                    [
                        (
                            "a config that differs from the registry's",
                            verify.replace("NAME", e.drafter),
                        ),
                        (
                            "prompts outside the drafter's training domain, or thinking mode on",
                            "dflashctl smoke http://{{ $labels.instance }} --drafter "
                            f"{e.drafter}",
                        ),
                    ],
                ),
            }
        )
    return alerts


def rule_groups(o: RuleOptions) -> dict[str, Any]:
    """The rule file: one group of recording rules, one of alerts."""
    return {
        "groups": [
            {"name": "dflashctl-spec-decode-recording", "rules": recording_rules()},
            {"name": "dflashctl-spec-decode-alerts", "rules": alert_rules(o)},
        ]
    }


def prometheus_rule(o: RuleOptions, name: str, namespace: str | None) -> dict[str, Any]:
    """The same groups as the Prometheus Operator's `PrometheusRule` object."""
    meta: dict[str, Any] = {"name": name, "labels": {"app.kubernetes.io/part-of": "dflashctl"}}
    if namespace:
        meta["namespace"] = namespace
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": meta,
        "spec": rule_groups(o),
    }
