"""One log line → one window: every vLLM and SGLang format, read by labels."""

from __future__ import annotations

from datetime import datetime

import pytest

from dflashctl.metrics.log_parse import (
    RawTs,
    clean,
    line_info,
    parse_companion,
    parse_sglang,
    parse_spec_config,
    parse_vllm,
    split_fields,
    v0_window,
)
from dflashctl.metrics.scanner import resolve_years

# engine-formats.md §9, verbatim.
V034_DFLASH_HEALTHY = (
    "(APIServer pid=1) INFO 11-20 10:05:20 [metrics.py:120] SpecDecoding metrics: Mean acceptance "
    "length: 5.68, Accepted throughput: 187.20 tokens/s, Drafted throughput: 600.00 tokens/s, "
    "Accepted: 1872 tokens, Drafted: 6000 tokens, Per-position acceptance rate: 0.905, 0.780, "
    "0.655, 0.540, 0.440, 0.355, 0.280, 0.215, 0.165, 0.120, 0.085, 0.060, 0.040, 0.025, 0.015, "
    "Avg Draft acceptance rate: 31.2%"
)
V032_CPU_REAL = (
    "(APIServer pid=1452) INFO 12-02 12:56:32 [metrics.py:120] SpecDecoding metrics: Mean "
    "acceptance length: 1.69, Accepted throughput: 4.61 tokens/s, Drafted throughput: 46.92 "
    "tokens/s, Accepted: 53 tokens, Drafted: 539 tokens, Per-position acceptance rate: 0.130, "
    "0.104, 0.091, 0.091, 0.091, 0.091, 0.091, Avg Draft acceptance rate: 9.8%"
)
V085 = (
    "INFO 07-01 09:12:40 [metrics.py:82] SpecDecoding metrics: Draft acceptance rate: 62.3%, "
    "Mean acceptance length: 2.87, Accepted: 1122 tokens, Drafted: 1800 tokens, Per-position "
    "acceptance rate: 0.800, 0.612, 0.458"
)
V083 = (
    "INFO 04-10 09:00:11 [metrics.py:55] SpecDecoding metrics: Draft acceptance rate: 48.2%, "
    "Accepted: 964 tokens, Drafted: 2000 tokens"
)
V0 = (
    "INFO 10-16 19:05:47 metrics.py:367] Speculative metrics: Draft acceptance rate: 0.642, "
    "System efficiency: 0.598, Number of speculative tokens: 3, Number of accepted tokens: 8547, "
    "Number of draft tokens: 13311, Number of emitted tokens: 10616."
)
V1_EARLY = (
    "INFO 03-20 08:00:21 [metrics.py:48] Speculative metrics: Draft acceptance rate: 0.552, "
    "Number of accepted tokens: 331, Number of draft tokens: 600, "
)
SGL_0523 = (
    "[2026-11-20 10:02:15 TP0] Decode batch, #running-req: 32, #token: 81920, token usage: 0.21, "
    "accept len: 2.41, accept rate: 0.47, cuda graph: True, gen throughput (token/s): 3120.55, "
    "#queue-req: 3"
)
SGL_052 = (
    "[2025-09-03 05:49:05 TP0] Decode batch. #running-req: 1, #token: 541, token usage: 0.03, "
    "accept len: 2.87, cuda graph: True, gen throughput (token/s): 175.29, #queue-req: 0, "
)


class TestVllm:
    def test_current_format_dflash(self):
        w = parse_vllm(V034_DFLASH_HEALTHY).window
        assert w is not None and w.format == "vllm-0.10.2+"
        assert w.mean_acceptance_length == 5.68
        assert (w.accepted_tokens, w.drafted_tokens, w.num_drafts) == (1872, 6000, 400)
        assert w.per_position is not None and len(w.per_position) == 15
        assert w.per_position[0] == 0.905 and w.per_position[-1] == 0.015
        assert w.draft_acceptance_rate == pytest.approx(0.312)
        assert (w.accepted_throughput, w.drafted_throughput) == (187.2, 600.0)

    def test_real_vllm_032_cpu_line(self):
        w = parse_vllm(V032_CPU_REAL).window
        assert w is not None
        assert w.num_drafts == 77  # 539 drafted / K=7
        assert w.mean_acceptance_length == 1.69
        assert 1 + w.accepted_tokens / w.num_drafts == pytest.approx(1.69, abs=0.005)
        assert w.draft_acceptance_rate == pytest.approx(0.098)

    def test_labels_not_positions(self):
        # fields reordered, a fork's extra label, a multi-value list in the middle
        line = (
            "SpecDecoding metrics: Drafted: 300 tokens, Rejected: 140 tokens, Per-position "
            "acceptance rate: 0.600, 0.400, 0.200, Accepted: 120 tokens, Avg Draft acceptance "
            "rate: 40.0%, Mean acceptance length: 2.20, Shiny new field: 7"
        )
        pl = parse_vllm(line)
        w = pl.window
        assert w is not None
        assert (w.accepted_tokens, w.drafted_tokens, w.num_drafts) == (120, 300, 100)
        assert w.per_position == [0.6, 0.4, 0.2]
        assert w.mean_acceptance_length == 2.2
        assert pl.unknown == ["shiny new field"]  # reported, "rejected" is a known fork label

    def test_missing_fields_tolerated(self):
        w = parse_vllm("SpecDecoding metrics: Accepted: 10 tokens, Drafted: 40 tokens").window
        assert w is not None
        assert w.mean_acceptance_length is None and w.per_position is None
        assert w.draft_acceptance_rate == pytest.approx(0.25)

    def test_no_drafts_window_is_skipped(self):
        line = V032_CPU_REAL.replace("Accepted: 53", "Accepted: 0").replace(
            "Drafted: 539", "Drafted: 0"
        )
        pl = parse_vllm(line.replace("9.8%", "nan%"))
        assert pl.window is None and pl.skipped

    def test_garbled_line_has_no_window(self):
        pl = parse_vllm("ERROR ... SpecDecoding metrics: are not in this message")
        assert pl.window is None and not pl.skipped

    def test_085_to_0101(self):
        w = parse_vllm(V085).window
        assert w is not None and w.format == "vllm-0.8.5"
        assert w.mean_acceptance_length == 2.87
        assert w.num_drafts == 600
        assert w.draft_acceptance_rate == pytest.approx(0.623)

    def test_pr15902(self):
        w = parse_vllm(V083).window
        assert w is not None and w.format == "vllm-0.8.3"
        assert w.mean_acceptance_length is None
        assert w.draft_acceptance_rate == pytest.approx(0.482)

    def test_v1_early_rate_is_a_fraction(self):
        w = parse_vllm(V1_EARLY).window
        assert w is not None and w.format == "vllm-v1-early"
        assert w.draft_acceptance_rate == pytest.approx(0.552)
        assert (w.accepted_tokens, w.drafted_tokens) == (331, 600)

    def test_v0_cumulative_normalised(self):
        pl = parse_vllm(V0)
        assert pl.v0_cumulative == (3, 8547, 13311, 10616)
        first = v0_window(None, pl.v0_cumulative)
        assert first is not None and first.cumulative
        # 13311 / 3 = 4437 drafts; emitted / drafts = 2.393 (= system efficiency × (k + 1))
        assert first.mean_acceptance_length == pytest.approx(10616 / 4437)
        assert first.mean_acceptance_length == pytest.approx(0.598 * 4, abs=0.01)
        later = v0_window((3, 5300, 8211, 6540), pl.v0_cumulative)
        assert later is not None and not later.cumulative
        assert later.drafted_tokens == 13311 - 8211
        assert later.mean_acceptance_length == pytest.approx((10616 - 6540) / (5100 / 3))


class TestSglang:
    def test_0523(self):
        w = parse_sglang(SGL_0523).window
        assert w is not None and w.engine == "sglang" and w.format == "sglang"
        assert w.mean_acceptance_length == 2.41  # accept len = vLLM mean acceptance length
        assert w.draft_acceptance_rate == 0.47
        assert (w.running_reqs, w.waiting_reqs, w.generation_throughput) == (32, 3, 3120.55)

    def test_052_dot_and_trailing_comma(self):
        w = parse_sglang(SGL_052).window
        assert w is not None and w.format == "sglang-accept-len"
        assert w.mean_acceptance_length == 2.87 and w.draft_acceptance_rate is None

    @pytest.mark.parametrize(
        "head", ["Decode batch [120], ", "Decode batch, ", "Decode batch. ", "Decode batch [7]. "]
    )
    def test_iter_and_separators(self, head):
        w = parse_sglang(f"[2026-01-01 00:00:00] {head}#running-req: 1, accept len: 3.10").window
        assert w is not None and w.mean_acceptance_length == 3.1

    def test_hybrid_and_unknown_fields(self):
        line = (
            "[2026-01-01 00:00:00 DP1 TP0] Decode batch, #running-req: 2, #full token: 700, "
            "full token usage: 0.03, #swa token: 120, swa token usage: 0.01, accept len: 2.70, "
            "accept rate: 0.57, cap len: 3, npu graph: True, gen throughput (token/s): 170.00, "
            "#queue-req: 0, novel field: 3"
        )
        pl = parse_sglang(line)
        assert pl.window is not None and pl.window.mean_acceptance_length == 2.7
        assert pl.unknown == ["novel field"]
        assert line_info(line).stream == "DP1"  # TP tags are not streams: only TP0 prints

    def test_without_speculation(self):
        line = SGL_0523.replace("accept len: 2.41, accept rate: 0.47, ", "")
        assert parse_sglang(line).window is None


class TestPrefixes:
    def test_decorated_and_current_prefix(self):
        info = line_info(V032_CPU_REAL)
        assert info.stream == "APIServer pid=1452"
        assert info.ts == RawTs(None, 12, 2, 12, 56, 32)

    def test_old_prefixes(self):
        assert line_info(V0).ts == RawTs(None, 10, 16, 19, 5, 47)
        assert line_info(V085).ts == RawTs(None, 7, 1, 9, 12, 40)
        assert line_info(V085).pid_key is None

    def test_logging_prefix_and_ansi(self):
        raw = (
            b"\x1b[32mmyprefix (EngineCore_DP1 pid=77)\x1b[0m \x1b[32mINFO\x1b[0m 01-02 03:04:05 "
            b"[core.py:1] hello\r\n"
        )
        text = clean(raw)
        assert "\x1b" not in text and not text.endswith("\r")
        info = line_info(text)
        assert info.stream == "EngineCore_DP1 pid=77"
        assert info.ts == RawTs(None, 1, 2, 3, 4, 5)

    def test_sglang_prefix_with_ms(self):
        info = line_info("[2026-11-20 10:02:15.123 DP0 TP1] Decode batch, accept len: 2.0")
        assert info.ts == RawTs(2026, 11, 20, 10, 2, 15) and info.stream == "DP0"

    def test_lenient_decoding(self):
        assert "caf" in clean(b"caf\xe9 \xc3\x28 ok\n")

    def test_split_fields_keeps_lists_together(self):
        assert split_fields("A: 1, B: 0.1, 0.2, 0.3, C: 3%") == [
            ("a", "1"),
            ("b", "0.1, 0.2, 0.3"),
            ("c", "3%"),
        ]


class TestCompanionAndConfig:
    def test_engine_line(self):
        line = (
            "(APIServer pid=19247) INFO 12-02 12:54:50 [loggers.py:335] Engine 000: Avg prompt "
            "throughput: 1.7 tokens/s, Avg generation throughput: 5.4 tokens/s, Running: 0 reqs, "
            "Waiting: 0 reqs, CPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%"
        )
        c = parse_companion(line)
        assert c["engine"] == "engine 0" and c["generation_throughput"] == 5.4
        assert c["running"] == 0

    def test_engines_aggregated_and_preemptions(self):
        c = parse_companion(
            "INFO 01-01 00:00:00 [loggers.py:1] 2 Engines Aggregated: Avg prompt throughput: 1.0 "
            "tokens/s, Avg generation throughput: 9.0 tokens/s, Running: 3 reqs, Waiting: 1 reqs, "
            "Preemptions: 2, GPU KV cache usage: 1.0%"
        )
        assert c["engine"] == "aggregated" and c["running"] == 3 and c["waiting"] == 1

    def test_vllm_spec_config(self):
        cfg = parse_spec_config(
            "Initializing a V1 LLM engine (v0.34.0) with config: model='Q', speculative_config="
            "SpeculativeConfig(method='dflash', model='z-lab/Qwen3-8B-DFlash-b16', "
            "num_spec_tokens=15), seed=0"
        )
        assert cfg == {
            "enabled": True,
            "engine": "vllm",
            "method": "dflash",
            "model": "z-lab/Qwen3-8B-DFlash-b16",
            "num_spec_tokens": 15,
        }
        assert parse_spec_config("... speculative_config=None, seed=0") == {
            "enabled": False,
            "engine": "vllm",
        }

    def test_sglang_server_args(self):
        cfg = parse_spec_config(
            "[2026-11-20 10:00:05] server_args=ServerArgs(model_path='Q', "
            "speculative_algorithm='DFLASH', speculative_num_draft_tokens=16)"
        )
        assert cfg is not None and cfg["method"] == "DFLASH" and cfg["enabled"]
        assert cfg["speculative_num_draft_tokens"] == 16


class TestYears:
    def test_newest_gets_the_reference_year(self):
        out = resolve_years([RawTs(None, 11, 20, 10, 0, 0)], datetime(2026, 12, 2))
        assert out == [datetime(2026, 11, 20, 10, 0, 0)]

    def test_rollover(self):
        stamps = [RawTs(None, 12, 31, 23, 59, 50), RawTs(None, 1, 1, 0, 0, 5)]
        out = resolve_years(stamps, datetime(2027, 1, 1, 1, 0, 0))
        assert out == [datetime(2026, 12, 31, 23, 59, 50), datetime(2027, 1, 1, 0, 0, 5)]

    def test_future_means_last_year(self):
        # a December line read in January of the next year
        out = resolve_years([RawTs(None, 12, 30, 0, 0, 0)], datetime(2027, 1, 3))
        assert out == [datetime(2026, 12, 30)]

    def test_sglang_years_are_kept_and_none_passes(self):
        out = resolve_years([RawTs(2025, 9, 3, 5, 49, 5), None], datetime(2026, 1, 1))
        assert out == [datetime(2025, 9, 3, 5, 49, 5), None]
