"""Alarm rules at their boundaries, warnings, likely causes, and the registry's expected range."""

from __future__ import annotations

from datetime import timedelta

import pytest
from support.windows import T0, win

from dflashctl.errors import DflashError
from dflashctl.metrics.alarms import evaluate
from dflashctl.metrics.analyze import MetricsOptions, expected_range
from dflashctl.metrics.thresholds import Thresholds
from dflashctl.metrics.window import Marker, MetricsReport, MetricsState, SpecWindow


def state(windows: list[SpecWindow], **kw) -> MetricsState:
    return MetricsState(
        source="LOG", kind="log", engine="vllm", windows=windows, total_windows=len(windows), **kw
    )


def judge(windows: list[SpecWindow], th: Thresholds | None = None, **kw):
    return evaluate(state(windows, **kw), th or Thresholds())


def alarms(findings) -> list[str]:
    return [f.kind for f in findings if f.severity == "alarm"]


def warnings(findings) -> list[str]:
    return [f.kind for f in findings if f.severity == "warning"]


class TestCollapse:
    @pytest.mark.parametrize("mean, collapsed", [(1.30, True), (1.31, False), (1.29, True)])
    def test_mean_length_boundary(self, mean, collapsed):
        f = judge([win(mean, rate=0.4)])
        assert alarms(f) == (["collapse"] if collapsed else [])

    def test_printed_value_is_what_counts(self):
        # 1.304 prints as 1.30 in the log, so it is judged as 1.30
        assert alarms(judge([win(1.304, rate=0.4)])) == ["collapse"]

    @pytest.mark.parametrize("rate, collapsed", [(0.049, True), (0.050, False), (0.0504, False)])
    def test_draft_acceptance_boundary_without_tau(self, rate, collapsed):
        # a format that prints no τ (vLLM ≈0.8.3): the rate is the only evidence
        f = judge([win(None, rate=rate, k=15)])
        assert alarms(f) == (["collapse"] if collapsed else [])

    def test_rate_does_not_judge_when_tau_is_printed(self):
        # τ 1.57 at K = 15 is 3.8 % draft acceptance: the demo pair's healthy floor, not a
        # collapse (the rate is (τ − 1) / K, so a 5 % line means τ 1.75 at K = 15)
        assert alarms(judge([win(1.57, rate=0.038, k=15)])) == []

    @pytest.mark.parametrize("drafted, severity", [(199, "warning"), (200, "alarm")])
    def test_enough_drafted_tokens(self, drafted, severity):
        f = judge([win(1.05, rate=0.01, drafted=drafted, k=1, pp=[0.05])])
        assert [(x.kind, x.severity) for x in f] == [("collapse", severity)]

    def test_small_windows_are_pooled(self):
        ws = [win(1.1, rate=0.02, drafted=120, k=3, i=0), win(1.1, rate=0.02, drafted=90, k=3, i=1)]
        assert alarms(judge(ws)) == ["collapse"]  # 210 drafted together

    def test_sglang_lines_need_no_token_counts(self):
        w = win(1.02, rate=0.0, drafted=None, engine="sglang")
        w.per_position = None
        assert alarms(judge([w])) == ["collapse"]

    def test_causes_position_one_dead_means_mismatch(self):
        f = judge(
            [win(1.03, rate=0.002, k=3, pp=[0.03, 0.0, 0.0])],
            Thresholds(drafter="qwen3-8b-dflash-b16", url="http://127.0.0.1:8000/metrics"),
        )
        causes = f[0].likely_causes
        assert "mismatch" in causes[0].cause
        assert causes[0].check.startswith(
            "dflashctl verify-config DRAFTER_DIR --drafter qwen3-8b-dflash-b16"
        )
        assert any(c.check == "dflashctl smoke http://127.0.0.1:8000" for c in causes)

    def test_causes_position_one_alive_then_a_cliff_is_a_config_signature(self):
        # position 1 at 20 %, every later one at 0: a wrong mask id, not a weak drafter
        f = judge([win(1.2, rate=0.03, k=15, pp=[0.2] + [0.0] * 14)])
        assert "mask_token_id" in f[0].likely_causes[0].cause
        assert "positions 2-15 ~0" in f[0].message

    def test_causes_position_one_alive_and_gradual_start_with_the_drafter(self):
        pp = [0.3, 0.12, 0.05, 0.02, 0.01, 0.005, 0.002, 0.0]
        f = judge([win(1.3, rate=0.06, k=8, pp=pp)])
        assert "weak or undertrained" in f[0].likely_causes[0].cause

    def test_cold_start_does_not_hide_a_collapse(self):
        f = judge([win(1.03, rate=0.002)], latest_launch_has_startup=True)
        assert alarms(f) == ["collapse"] and "first window after start-up" in f[0].message


class TestBelowExpected:
    @pytest.mark.parametrize("mean, fails", [(2.49, True), (2.50, False), (2.51, False)])
    def test_min_acceptance_length(self, mean, fails):
        f = judge([win(mean, i=0), win(mean, i=1)], Thresholds(min_acceptance_length=2.5))
        assert alarms(f) == (["below_expected"] if fails else [])

    def test_registry_range(self):
        th = Thresholds(expected_min=3.16, expected_max=7.87, drafter="qwen3-8b-dflash-b16")
        f = judge([win(3.05, i=0), win(3.05, i=1)], th)
        assert alarms(f) == ["below_expected"]
        assert "3.16-7.87 for qwen3-8b-dflash-b16" in f[0].message
        assert alarms(judge([win(3.16)], th)) == []

    def test_registry_floor_allows_for_the_noise_of_few_drafts(self):
        """The registry's floor is the 10th percentile over prompts: a pooled window of a few
        drafts under it by less than two standard errors is a warning; far under it, an alarm.
        A floor the user sets (--min-acceptance-length) stays a hard line."""
        th = Thresholds(expected_min=1.57, expected_max=4.24, drafter="demo")
        pp = [0.4, 0.1, 0.02] + [0.0] * 12  # two windows of 14 drafts, pooled: ± 0.28
        few = judge([win(1.52, drafted=210, k=15, pp=pp, i=i) for i in range(2)], th)
        assert alarms(few) == [] and "below_expected" in warnings(few)
        assert "within the noise of its 28 drafts" in few[0].message
        many = judge([win(1.45, drafted=15000, k=15, pp=pp, i=i) for i in range(2)], th)
        assert alarms(many) == ["below_expected"]
        hard = Thresholds(min_acceptance_length=1.57)
        assert alarms(
            judge([win(1.52, drafted=210, k=15, pp=pp, i=i) for i in range(2)], hard)
        ) == ["below_expected"]

    def test_a_shortfall_of_more_than_half_names_a_mismatch_first(self):
        th = Thresholds(expected_min=5.2, expected_max=7.6, drafter="demo")
        slight = judge([win(4.9, i=0), win(4.9, i=1)], th)[0].likely_causes
        deep = judge([win(1.52, i=0), win(1.52, i=1)], th)[0].likely_causes
        assert "workload" in slight[0].cause and "mismatch" in deep[0].cause

    def test_first_window_after_startup_is_a_cold_start(self):
        th = Thresholds(min_acceptance_length=2.7)
        f = judge([win(2.52)], th, latest_launch_has_startup=True)
        assert alarms(f) == [] and warnings(f) == ["cold_start"]
        assert "cold start" in f[0].message
        # the second window is judged
        f = judge([win(2.52, i=0), win(2.55, i=1)], th, latest_launch_has_startup=True)
        assert alarms(f) == ["below_expected"]

    def test_a_lone_window_without_startup_is_judged(self):
        assert alarms(judge([win(2.52)], Thresholds(min_acceptance_length=2.7))) == [
            "below_expected"
        ]

    def test_format_without_mean(self):
        w = win(None, rate=0.5)
        f = judge([w], Thresholds(min_acceptance_length=2.0))
        assert warnings(f) == ["below_expected"] and "cannot compare" in f[0].message


class TestDecay:
    def test_trend(self):
        vals = [3.0, 2.9, 2.7, 2.4, 2.1, 1.9]
        f = judge([win(v, i=i) for i, v in enumerate(vals)])
        assert alarms(f) == ["decay"]
        assert "fell from 2.95" in f[0].message and "to 2.00" in f[0].message

    def test_one_request_at_a_time_new_requests_is_a_warning(self):
        """Serial traffic (`Running: 1 reqs` in every window) where new requests were admitted
        since the first windows (prompt throughput > 0): the late windows are other requests
        (code first, prose later reads as a fall), so a warning led by the workload. One long
        request (no new prefill) that decays is still an alarm."""
        vals = [3.0, 2.9, 2.7, 2.4, 2.1, 1.9]

        def serial(prefill_at: int | None) -> list[SpecWindow]:
            ws = [win(v, i=i) for i, v in enumerate(vals)]
            for i, w in enumerate(ws):
                w.running_reqs, w.prompt_throughput = 1, 40.0 if i in (0, prefill_at) else 0.0
            return ws

        f = judge(serial(prefill_at=3))
        assert alarms(f) == [] and warnings(f) == ["decay"]
        assert "one at a time" in f[0].message and "workload" in f[0].likely_causes[0].cause
        assert alarms(judge(serial(prefill_at=None))) == ["decay"]  # one long request
        busy = serial(prefill_at=3)
        busy[4].running_reqs = 8  # concurrent traffic: windows mix requests, the rule stands
        assert alarms(judge(busy)) == ["decay"]

    def test_one_noisy_window_is_not_a_trend(self):
        for vals in ([3, 3, 3, 3, 3, 1.5], [3, 3, 1.5, 3, 3, 3], [3, 3, 3, 1.5, 3, 3, 3, 3, 3]):
            assert alarms(judge([win(v, i=i) for i, v in enumerate(vals)])) == [], vals

    def test_too_few_windows(self):
        vals = [3.0, 2.7, 2.4, 2.1, 1.8]
        assert alarms(judge([win(v, i=i) for i, v in enumerate(vals)])) == []

    def test_small_drop_is_not_decay(self):
        vals = [3.0, 3.0, 2.9, 2.85, 2.8, 2.8]
        assert alarms(judge([win(v, i=i) for i, v in enumerate(vals)])) == []

    def test_cold_first_window_is_left_out(self):
        # a high first window after start-up must not make the warm ones look like decay
        vals = [4.5, 2.8, 2.8, 2.8, 2.7, 2.8, 2.8]
        ws = [win(v, i=i) for i, v in enumerate(vals)]
        assert alarms(judge(ws, latest_launch_has_startup=True)) == []
        # without a start-up line the first window is an ordinary one, and this is a drop
        assert alarms(judge(ws)) == ["decay"]

    def test_long_context_cliff_named(self):
        early = [0.9, 0.8, 0.6, 0.5, 0.4]
        late = [0.5, 0.4, 0.0, 0.0, 0.0]
        ws = [win(4.2, i=i, k=5, pp=early) for i in range(3)]
        ws += [win(2.0, i=3 + i, k=5, pp=late) for i in range(3)]
        f = judge(ws)
        assert alarms(f) == ["decay"] and "positions 3-5 fell to ~0" in f[0].message
        assert "long-context cliff" in f[0].likely_causes[0].cause

    def test_only_the_latest_launch_counts(self):
        old = [win(3.0, i=i, launch=0) for i in range(6)]
        new = [win(1.9, i=10 + i, launch=1) for i in range(6)]
        assert alarms(judge(old + new)) == []


class TestWeakPositions:
    def test_later_positions_near_zero(self):
        pp = [0.82, 0.41, 0.12, 0.03, 0.01, 0.005, 0.0, 0.0]
        f = judge([win(2.4, rate=0.18, k=8, pp=pp)])
        assert alarms(f) == [] and warnings(f) == ["weak_later_positions"]
        assert "positions 5-8" in f[0].message and "num_speculative_tokens=4" in f[0].message

    def test_weak_first_position_is_not_this_warning(self):
        pp = [0.39, 0.1, 0.0, 0.0, 0.0]
        assert "weak_later_positions" not in warnings(judge([win(1.5, rate=0.1, k=5, pp=pp)]))

    def test_one_zero_tail_position_is_fine(self):
        pp = [0.9, 0.7, 0.5, 0.3, 0.01]
        assert warnings(judge([win(3.4, rate=0.5, k=5, pp=pp)])) == []


class TestStale:
    def _busy_state(self, gap_s: float, *, busy: bool = True, interval: float = 10.0):
        ws = [win(2.5, i=i) for i in range(5)]
        last = ws[-1].timestamp
        assert last is not None
        newest = Marker(10**6, "newest", last + timedelta(seconds=gap_s))
        return state(
            ws,
            busy_after_last_window=Marker(10**6, "Engine 000: Running: 4 reqs", None)
            if busy
            else None,
            newest_line=newest,
        )

    @pytest.mark.parametrize("gap, stale", [(30, False), (31, True), (300, True)])
    def test_gap_boundary(self, gap, stale):
        f = evaluate(self._busy_state(gap), Thresholds())
        assert alarms(f) == (["stale"] if stale else [])

    def test_interval_scales_the_limit(self):
        assert alarms(evaluate(self._busy_state(100), Thresholds(interval=60))) == []
        assert alarms(evaluate(self._busy_state(181), Thresholds(interval=60))) == ["stale"]

    def test_idle_engine_is_not_stale(self):
        assert alarms(evaluate(self._busy_state(3600, busy=False), Thresholds())) == []

    def test_later_launch(self):
        st = state(
            [win(1.05, rate=0.01)],
            startup_after_last_window=Marker(99, "Starting vLLM server on http://0.0.0.0:8000", T0),
        )
        f = evaluate(st, Thresholds())
        assert alarms(f) == ["stale"]  # and the old collapse is not judged
        assert warnings(evaluate(st, Thresholds(follow=True))) == ["restart"]


class TestNoWindows:
    def test_spec_off(self):
        f = evaluate(state([], spec_config={"enabled": False}), Thresholds())
        assert alarms(f) == ["no_speculation"]

    def test_nothing_yet(self):
        f = evaluate(state([]), Thresholds())
        assert warnings(f) == ["no_metrics"] and MetricsReport(state([]), f).ok
        assert evaluate(state([]), Thresholds(follow=True)) == []


class TestRegistry:
    def test_real_registry_entry(self):
        lo, hi = expected_range("qwen3-8b-dflash-b16")
        assert lo is not None and hi is not None and 1 <= lo <= hi

    def test_unknown_drafter_is_a_clear_error(self):
        with pytest.raises(DflashError) as e:
            expected_range("no-such-drafter")
        assert e.value.exit_code == 2

    def test_the_entries_as_the_registry_holds_them(self):
        """The real registry (no stand-in): a measured range, and an entry without one."""
        from dflashctl.drafter.registry import get_entry

        exp = get_entry("demo").expected_acceptance
        assert exp is not None and expected_range("demo") == (exp.min, exp.max)
        assert get_entry("qwen3.5-27b-dflash").expected_acceptance is None
        assert expected_range("qwen3.5-27b-dflash") == (None, None)


# ---- known engine defects from the catalogue ----------------------------------------------

REAL_032 = (
    "(APIServer pid=7) INFO 12-02 12:50:01 [api_server.py:1901] vLLM API server version 0.32.0\n"
    "(APIServer pid=7) INFO 12-02 12:54:50 [loggers.py:335] Engine 000: Avg prompt throughput: "
    "1.7 tokens/s, Avg generation throughput: 5.4 tokens/s, Running: 1 reqs, Waiting: 0 reqs, "
    "CPU KV cache usage: 0.1%, Prefix cache hit rate: 0.0%\n"
    "(APIServer pid=7) INFO 12-02 12:56:32 [metrics.py:120] SpecDecoding metrics: Mean acceptance "
    "length: 1.09, Accepted throughput: 0.61 tokens/s, Drafted throughput: 46.92 tokens/s, "
    "Accepted: 53 tokens, Drafted: 4109 tokens, Per-position acceptance rate: 0.070, 0.010, "
    "0.003, 0.001, 0.000, 0.000, 0.000, Avg Draft acceptance rate: 1.3%\n"
)


def _judged(text: str):
    from dflashctl.metrics.analyze import analyze_chunks

    return analyze_chunks([text.encode()], source="server.log", opts=MetricsOptions())


def test_a_collapse_on_a_known_engine_version_names_its_catalogued_defects():
    rep = _judged(REAL_032)
    assert (rep.state.engine_version, rep.state.engine_build) == ("0.32.0", "cpu")
    (alarm,) = [f for f in rep.findings if f.severity == "alarm"]
    causes = [c.cause for c in alarm.likely_causes]
    assert causes[0].startswith("target/drafter mismatch")  # the metrics' own reading first
    k_norm = [c for c in alarm.likely_causes if "vllm-cpu-context-k-norm" in c.cause]
    assert k_norm and "dflashctl doctor --engine vllm" in k_norm[0].check


def test_no_version_no_catalogue_claims():
    text = REAL_032.split("\n", 1)[1]  # the same log without its version line
    rep = _judged(text)
    assert rep.state.engine_version is None
    (alarm,) = [f for f in rep.findings if f.severity == "alarm"]
    assert not any("known engine defect" in c.cause for c in alarm.likely_causes)
    gpu = _judged(REAL_032.replace("CPU KV cache", "GPU KV cache"))  # the defect is CPU-only
    assert gpu.state.engine_build == "gpu"
    (alarm,) = [f for f in gpu.findings if f.severity == "alarm"]
    assert not any("vllm-cpu-context-k-norm" in c.cause for c in alarm.likely_causes)
