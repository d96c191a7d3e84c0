"""Diagnosis on logs nobody here wrote (issue 17): each failure pattern from a constructed excerpt
in the engine's real format, and the rule or parser change that makes it pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.vllm_metrics import engine_line, spec_line, startup_lines, write_log

from dflashctl.metrics.alarms import evaluate
from dflashctl.metrics.analyze import MetricsOptions, analyze_chunks, analyze_source
from dflashctl.metrics.causes import signature_of
from dflashctl.metrics.log_parse import line_info, parse_vllm, unwrap_json
from dflashctl.metrics.thresholds import Thresholds
from dflashctl.metrics.window import MetricsReport


def report(lines: list[str], **opts) -> MetricsReport:
    data = ("\n".join(lines) + "\n").encode()
    return analyze_chunks([data], source="LOG", opts=MetricsOptions(**opts))


def kinds(r: MetricsReport, severity: str | None = None) -> list[str]:
    return [f.kind for f in r.findings if severity is None or f.severity == severity]


V05 = (
    "INFO 08-14 03:1{m}:05 metrics.py:396] Speculative metrics: Draft acceptance rate: 0.000, "
    "System efficiency: 0.062, Number of speculative tokens: 16, Number of accepted tokens: 0, "
    "Number of draft tokens tokens: {d}, Number of emitted tokens tokens: {e}."
)


class TestOldVllmLines:
    def test_doubled_field_names_parse_and_collapse(self):
        line = V05.format(m=1, d=42272, e=2642)
        pl = parse_vllm(line)
        assert pl.v0_cumulative == (16, 0, 42272, 2642) and not pl.unknown
        r = report([V05.format(m=1, d=13440, e=840), V05.format(m=2, d=42272, e=2642)])
        assert kinds(r, "alarm") == ["collapse"]
        assert r.state.latest is not None and r.state.latest.mean_acceptance_length == 1.0

    def test_a_line_with_only_a_rate_is_judged(self):
        line = (
            "INFO 08-14 03:11:05 metrics.py:396] Speculative metrics: Draft acceptance rate: "
            "0.012, System efficiency: 0.070, Number of speculative tokens: 5,"
        )
        r = report([line])
        assert r.state.windows and r.state.latest.draft_acceptance_rate == 0.012
        assert kinds(r, "alarm") == ["collapse"]

    def test_lines_without_usable_fields_are_not_no_metrics(self):
        line = "INFO 08-14 03:11:05 metrics.py:396] SpecDecoding metrics: Foo: bar, Baz: qux"
        r = report([line, line])
        assert "no_metrics" not in kinds(r)
        (f,) = r.findings
        assert f.kind == "unreadable_metrics" and "2 metrics line(s)" in f.message


CRASH = [
    "(Worker_TP1 pid=39839) ERROR 12-08 03:17:31 [multiproc_executor.py:671] WorkerProc hit an "
    "exception.",
    "(Worker_TP1 pid=39839) ERROR 12-08 03:17:31 [multiproc_executor.py:671] Traceback (most "
    "recent call last):",
    "(Worker_TP1 pid=39839) ERROR 12-08 03:17:31 [multiproc_executor.py:671] RuntimeError: CUDA "
    "error: an illegal memory access was encountered",
]


class TestCrash:
    def test_a_crash_after_the_last_window_leads(self):
        lines = startup_lines(0)
        lines += [engine_line(20), spec_line(20, per_position=[0.03, 0.0, 0.0])]
        r = report(lines + CRASH)
        assert kinds(r, "alarm")[:2] == ["engine_crash", "collapse"]
        crash = r.findings[0]
        assert "WorkerProc hit an exception" in crash.message
        assert "RuntimeError: CUDA error" in crash.message  # the exception it ended with
        assert "the numbers below describe the engine before it died" in crash.message

    def test_a_crash_between_windows_is_a_warning_first(self):
        lines = [*startup_lines(0, pid=1), engine_line(20), spec_line(20)]
        lines += CRASH + startup_lines(60, pid=7)
        lines += [engine_line(80, pid=7), spec_line(80, pid=7)]
        r = report(lines)
        assert r.ok and r.findings[0].kind == "engine_crash"
        assert r.findings[0].severity == "warning" and "between metrics windows" in (
            r.findings[0].message
        )

    def test_an_orderly_stop_is_not_a_crash(self):
        # vLLM 0.32 stopped by SIGTERM: the API server then logs the engine it stopped as dead
        # (seen in this project's own vLLM tier, every time a server is stopped)
        stop = [
            "(EngineCore pid=28627) INFO 12-04 21:51:51 [core.py:1454] [shutdown] EngineCore: "
            "trigger received signal=SIGTERM",
            "(APIServer pid=28522) INFO 12-04 21:51:51 [launcher.py:254] [shutdown] API server: "
            "shutdown triggered",
            "(APIServer pid=28522) ERROR 12-04 21:51:51 [async_llm.py:906] AsyncLLM "
            "output_handler failed.",
            "(APIServer pid=28522) ERROR 12-04 21:51:51 [async_llm.py:906] Traceback (most "
            "recent call last):",
            "(APIServer pid=28522) ERROR 12-04 21:51:51 [async_llm.py:906] vllm.v1.engine."
            "exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace "
            "(above) for the root cause.",
            "INFO:     Shutting down",
        ]
        lines = [*startup_lines(0), engine_line(20), spec_line(20)]
        r = report(lines + stop)
        assert r.ok and "engine_crash" not in kinds(r)
        # a crash that comes first is still one, whatever stop follows it
        assert kinds(report(lines + CRASH + stop), "alarm")[0] == "engine_crash"

    def test_a_cancelled_request_traceback_is_not_a_crash(self):
        lines = [engine_line(10), spec_line(10)]
        lines += [
            "Traceback (most recent call last):",
            "asyncio.exceptions.CancelledError",
            "(APIServer pid=1) ERROR 11-20 10:00:11 [serving_chat.py:1200] Error in chat "
            "completion stream generator.",
        ]
        assert "engine_crash" not in kinds(report(lines))


DEMO_WRONG_MASK = [0.65, 0.02, 0.01, 0.004, 0.002, 0.0, 0.0]


class TestSignature:
    def test_signatures(self):
        th = Thresholds()
        assert signature_of(DEMO_WRONG_MASK, th) == ("cliff", 2)
        cliff6 = [0.600, 0.385, 0.215, 0.108, 0.062] + [0.0] * 10
        assert signature_of(cliff6, th) == ("cliff", 6)
        healthy = [0.905, 0.78, 0.655, 0.54, 0.44, 0.355, 0.28, 0.215, 0.165, 0.12, 0.085]
        assert signature_of(healthy, th) == ("gradual", None)
        assert signature_of([0.82, 0.41, 0.12, 0.03, 0.01, 0.005, 0.0], th)[0] == "gradual"
        assert signature_of([0.03, 0.0, 0.0], th) == ("dead", None)

    def test_every_draft_rejected_names_the_wiring_not_a_weak_drafter(self):
        """Issue 28 #4: mean acceptance length 1.00 with every position 0.000 (a drafter whose
        lm_head or draft vocabulary belongs to the target, taps off by a layer, a CUDA-graph
        mode that breaks its attention): the collapse alarm leads with the wiring."""
        th = Thresholds()
        assert signature_of([0.0] * 7, th) == ("all_rejected", None)
        assert signature_of([0.004, 0.0, 0.0], th) == ("all_rejected", None)
        assert signature_of([0.006, 0.0, 0.0], th) == ("dead", None)  # the edge: not all zero
        lines = [x for i in range(3)
                 for x in (engine_line(10 * i), spec_line(10 * i, per_position=[0.0] * 7,
                                                          drafts=200))]  # fmt: skip
        r = report(lines)
        assert kinds(r, "alarm") == ["collapse"]
        f = r.findings[0]
        assert "every position ~0 (every draft rejected: a wiring or config fault" in f.message
        first, second = f.likely_causes[:2]
        assert "lm_head or draft vocabulary" in first.cause
        assert first.check.startswith("dflashctl verify-config")
        # a wrong mask id can reject position 1 too (real vLLM 0.32 CPU, bf16): named next
        assert "wrong mask_token_id" in second.cause
        assert not any("weak or undertrained" in c.cause for c in f.likely_causes)

    def test_a_zero_after_few_drafts_is_no_cliff(self):
        # the healthy demo pair's own smoke log: 19 drafts, position 5 accepted in 4 of them,
        # positions 6.. in none: what a gradual fall gives by chance, not a config signature
        th = Thresholds()
        few = [1.0, 0.6, 0.4, 0.3, 0.2] + [0.0] * 10
        assert signature_of(few, th, drafts=19) == ("gradual", None)
        assert signature_of(few, th, drafts=200) == ("cliff", 6)
        assert signature_of(DEMO_WRONG_MASK, th, drafts=40) == ("cliff", 2)

    @pytest.mark.parametrize(
        ("drafts", "shape"),
        [
            (60, "thin"),  # ≈4 drafts reached position 5: too few to tell
            (149, "thin"),  # 0.067 × 149 = 9.98: one short of the cliff rule's 10
            (150, "cliff"),  # 10.05 drafts: a cliff, the config causes
        ],
    )  # fmt: skip
    def test_a_thinly_sampled_cliff_names_the_config_beside_a_weak_drafter(self, drafts, shape):
        """One window whose positions 6-15 are 0 after a few drafts reached position 5 looks
        the same from a healthy drafter's smoke run and from sliding-window layers run as
        full attention: neither cause is ranked away; the config check comes first."""
        pp = [0.583, 0.367, 0.2, 0.1, 0.067] + [0.0] * 10
        lines = [engine_line(0, running=1),
                 spec_line(0, per_position=pp, drafts=drafts)]  # fmt: skip
        r = report(lines)
        if shape == "cliff":
            assert "weak_later_positions" not in kinds(r)
            return
        f = next(f for f in r.findings if f.kind == "weak_later_positions")
        assert f.severity == "warning" and kinds(r, "alarm") == []
        assert "only ≈" in f.message and "too few to tell a cliff" in f.message
        assert f.message.startswith("positions 6-15 accept nothing after position 5")
        assert f.likely_causes[0].cause.startswith("layer_types / sliding window")
        assert f.likely_causes[1].cause.startswith("a weak or undertrained drafter")

    def test_the_demo_pairs_wrong_mask_is_a_config_problem(self):
        # the demo pair with a wrong mask id: τ 1.69, position 1 65 %, positions 2-7 ≤ 2 %
        lines = [
            x
            for i in range(3)
            for x in (
                engine_line(10 * i),
                spec_line(10 * i, per_position=DEMO_WRONG_MASK, drafts=100),
            )
        ]
        r = report(lines)
        assert kinds(r, "alarm") == ["position_cliff"]
        f = r.findings[0]
        assert "positions 2-7 accept ~0" in f.message
        first = f.likely_causes[0]
        assert "mask_token_id" in first.cause and first.check.startswith("dflashctl verify-config")
        assert not any("weak or undertrained" in c.cause for c in f.likely_causes[:3])
        assert any(c.check.startswith("dflashctl doctor") for c in f.likely_causes)

    def test_a_late_cliff_names_the_sliding_window_first(self):
        pp = [0.600, 0.385, 0.215, 0.108, 0.062] + [0.0] * 10
        r = report([engine_line(10), spec_line(10, per_position=pp, drafts=300)])
        assert "layer_types" in r.findings[0].likely_causes[0].cause

    def test_a_block_larger_than_trained_leads_when_the_registry_knows_the_block(self):
        pp = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3] + [0.0] * 8  # K=15 on a block-8 drafter
        th = Thresholds(block_size=8)
        from tests.test_metrics_alarms import judge, win

        f = judge([win(4.2, rate=0.28, k=15, pp=pp)], th)
        assert f[0].kind == "position_cliff"
        assert "larger than the block" in f[0].likely_causes[0].cause
        assert "-k 15" in f[0].likely_causes[0].check

    def test_a_gradual_decay_is_a_weak_drafter(self):
        pp = [0.55, 0.33, 0.19, 0.11, 0.06, 0.035, 0.02, 0.012, 0.008, 0.005, 0.003, 0.0, 0.0]
        r = report([engine_line(10), spec_line(10, per_position=pp, drafts=300)])
        assert kinds(r) == ["weak_later_positions"]
        assert "weak or undertrained" in r.findings[0].likely_causes[0].cause

    def test_warnings_need_the_collapse_rules_evidence(self):
        pp = [0.82, 0.41, 0.12, 0.03, 0.01, 0.005, 0.0, 0.0]
        few = report([engine_line(10), spec_line(10, per_position=pp, drafts=2)])
        assert few.state.latest.drafted_tokens == 16 and kinds(few) == []
        enough = report([engine_line(10), spec_line(10, per_position=pp, drafts=100)])
        assert kinds(enough) == ["weak_later_positions"]

    def test_the_stated_method_gets_its_own_causes(self):
        for method, expect in (
            ("eagle3", "EAGLE head"),
            ("deepseek_mtp", "MTP layer"),
            ("medusa", "Medusa heads"),
            ("ngram", "n-gram lookup"),
        ):
            lines = startup_lines(0)
            lines[1] = lines[1].replace("method='dflash'", f"method='{method}'")
            lines += [engine_line(20), spec_line(20, per_position=[0.03, 0.004, 0.0])]
            r = report(lines)
            (f,) = [x for x in r.findings if x.kind == "collapse"]
            assert expect in f.likely_causes[0].cause, method
            assert not any("mask_token_id" in c.cause for c in f.likely_causes), method
            assert not any("Qwen3 b16" in c.cause for c in f.likely_causes), method


def sgl(tags: str, running: int, acc: float, rate: float = 0.5) -> str:
    return (
        f"[{tags}] Decode batch. #running-req: {running}, #token: 9000, token usage: 0.05, "
        f"accept len: {acc:.2f}, accept rate: {rate:.2f}, cuda graph: True, gen throughput "
        "(token/s): 600.00, #queue-req: 0"
    )


class TestLargeBatch:
    def test_sglang_large_batch_at_exactly_one_is_speculation_off(self):
        r = report([sgl("2025-06-01 12:00:00 TP0", 48, 1.00, 0.11)] * 3)
        assert r.ok and kinds(r) == ["speculation_off_large_batch"]
        assert "speculation disabled for large batches" in r.findings[0].likely_causes[0].cause

    def test_the_latest_window_with_speculation_on_is_judged(self):
        lines = [sgl("2025-06-01 12:00:00 TP0", 2, 1.01, 0.0)] * 2
        lines += [sgl("2025-06-01 12:01:00 TP0", 48, 1.00, 0.11)]
        r = report(lines)
        assert kinds(r) == ["speculation_off_large_batch", "collapse"]
        assert not r.ok

    def test_a_small_batch_at_one_is_a_collapse(self):
        r = report([sgl("2025-06-01 12:00:00 TP0", 2, 1.00, 0.0)] * 3)
        assert kinds(r, "alarm") == ["collapse"]

    def test_vllm_disable_by_batch_size_from_the_launch_args(self):
        lines = [
            "(APIServer pid=1) INFO 11-20 09:59:50 [utils.py:253] non-default args: {'model': "
            "'Qwen/Qwen3-8B', 'speculative_config': {'method': 'eagle', 'model': 'x/eagle', "
            "'num_speculative_tokens': 3, 'disable_by_batch_size': 32}}"
        ]
        lines += [engine_line(10, running=40), spec_line(10, mean=1.0, accepted=0)]
        r = report(lines)
        assert r.state.spec_config and r.state.spec_config["disable_by_batch_size"] == 32
        assert kinds(r) == ["speculation_off_large_batch"] and "= 32" in (
            r.findings[0].likely_causes[0].cause
        )

    # the rule's edge on both sides (issue 31): at the limit speculation is off, one under it
    # a 1.00 is a collapse; SGLang's own edge is Thresholds.large_batch
    @pytest.mark.parametrize(
        ("running", "want"),
        [(31, ["collapse"]), (32, ["speculation_off_large_batch"]),
         (33, ["speculation_off_large_batch"])],
    )  # fmt: skip
    def test_vllm_batch_limit_edge(self, running: int, want: list[str]):
        lines = [
            "(APIServer pid=1) INFO 11-20 09:59:50 [utils.py:253] non-default args: {'model': "
            "'Qwen/Qwen3-8B', 'speculative_config': {'method': 'eagle', 'model': 'x/eagle', "
            "'num_speculative_tokens': 3, 'disable_by_batch_size': 32}}"
        ]
        lines += [engine_line(10, running=running), spec_line(10, mean=1.0, accepted=0)]
        assert kinds(report(lines)) == want

    @pytest.mark.parametrize("delta", [-1, 0, 1])
    def test_sglang_large_batch_edge(self, delta: int):
        n = Thresholds().large_batch + delta
        r = report([sgl("2025-06-01 12:00:00 TP0", n, 1.00, 0.11)] * 3)
        assert kinds(r) == (["speculation_off_large_batch"] if delta >= 0 else ["collapse"])

    def test_python_logging_prefixes(self):
        info = line_info("2025-06-01 12:00:00,123 - sglang.srt.managers.scheduler - INFO - x")
        assert info.ts is not None and info.ts.text() == "2025-06-01 12:00:00"
        r = report(["INFO:sglang.srt.managers.scheduler:" + sgl("x", 1, 1.01)[4:]] * 2)
        assert kinds(r, "alarm") == ["collapse"]


class TestStreams:
    def test_docker_timestamps_that_differ_still_merge(self):
        lines = []
        for i in range(3):
            t = f"2025-06-01T17:37:3{i}"
            lines.append(f"{t}.199Z " + engine_line(10 * i, gen=280.0))
            lines.append(f"{t}.200Z " + spec_line(10 * i))
        r = report(lines)
        assert {w.stream for w in r.state.windows} == {"engine 0"}
        assert all(w.generation_throughput == 280.0 for w in r.state.windows)

    def test_a_window_before_the_first_engine_line_is_not_a_stream(self):
        dead = [0.03, 0.003, 0.0]
        lines = [spec_line(0, per_position=dead)]
        lines += [
            x for i in (1, 2) for x in (engine_line(10 * i), spec_line(10 * i, per_position=dead))
        ]
        r = report(lines)
        assert {w.stream for w in r.state.windows} == {"engine 0"}
        assert kinds(r, "alarm") == ["collapse"]  # once

    def test_two_api_servers_aggregated_lines_are_two_streams(self):
        lines = []
        for pid, name in ((10, "ApiServer_0"), (11, "ApiServer_1")):
            line = engine_line(10, pid=pid).replace("APIServer", name)
            lines.append(line.replace("Engine 000", "2 Engines Aggregated"))
            lines.append(spec_line(10, pid=pid).replace("APIServer", name))
        r = report(lines)
        assert {w.stream for w in r.state.windows} == {
            "aggregated, ApiServer_0 pid=10",
            "aggregated, ApiServer_1 pid=11",
        }

    def test_dp_rank_without_a_date(self):
        r = report([sgl("DP0 TP0", 3, 3.4), sgl("DP1 TP0", 3, 1.02, 0.01)] * 2)
        assert {w.stream for w in r.state.windows} == {"DP0", "DP1"}
        (f,) = [x for x in r.findings if x.severity == "alarm"]
        assert f.kind == "collapse" and f.stream == "DP1"

    def test_json_logging(self):
        msg = spec_line(10).split("] ", 1)[1]
        rec = json.dumps(
            {"asctime": "2026-11-28 10:01:10,100", "levelname": "INFO", "message": msg}
        )
        assert unwrap_json(rec).startswith("2026-11-28 10:01:10,100 INFO SpecDecoding metrics:")
        r = report([rec, rec])
        w = r.state.latest
        assert (
            w is not None
            and w.mean_acceptance_length == 2.5
            and w.timestamp_raw == ("2026-11-28 10:01:10")
        )
        assert w.draft_acceptance_rate is not None and abs(w.draft_acceptance_rate - 0.5) < 1e-3


class TestExpectedRange:
    def test_no_range_is_said(self):
        lines = [engine_line(10), spec_line(10, per_position=[0.7, 0.5, 0.3])]
        r = report(lines)
        assert r.ok and r.state.expected is None
        assert any(n.startswith("no expected acceptance range is known") for n in r.state.notes)
        assert r.to_json()["expected_acceptance"] is None

    def test_the_drafter_named_in_the_config_line(self):
        lines = startup_lines(0)
        for t in (20, 30):  # two windows: the first after start-up alone is a cold start
            lines += [engine_line(t), spec_line(t, per_position=[0.5, 0.3, 0.2])]
        r = report(lines)  # z-lab/Qwen3-8B-DFlash-b16: 3.16-7.87; τ 2.00
        assert r.state.expected is not None and r.state.expected.drafter == "qwen3-8b-dflash-b16"
        assert "the log's speculative config" in r.state.expected.found_by
        assert kinds(r, "alarm") == ["below_expected"]
        assert r.to_json()["expected_acceptance"]["min"] == 3.16

    def test_a_lock_file_in_the_drafter_directory(self, tmp_path: Path):
        d = tmp_path / "drafter"
        d.mkdir()
        lock = {"repo": "z-lab/Qwen3-8B-DFlash-b16", "revision": "a" * 40, "files": {}}
        (d / "dflashctl.lock.json").write_text(json.dumps(lock))
        lines = startup_lines(0)
        lines[1] = lines[1].replace("model='z-lab/Qwen3-8B-DFlash-b16'", f"model='{d}'")
        for t in (20, 30):
            lines += [engine_line(t), spec_line(t, per_position=[0.5, 0.3, 0.2])]
        log = write_log(tmp_path / "server.log", lines)
        r = analyze_source(str(log), MetricsOptions())
        assert r.state.expected is not None and r.state.expected.found_by.endswith(
            "dflashctl.lock.json"
        )
        assert kinds(r, "alarm") == ["below_expected"]

    def test_a_deployment_record_names_the_drafter(self, tmp_path: Path):
        from dflashctl.server.deployments import Deployment, save

        log = write_log(tmp_path / "server.log", [engine_line(20), spec_line(20)])
        save(
            Deployment(
                name="prod",
                engine="vllm",
                host=None,
                url="http://127.0.0.1:8000",
                pid=1,
                starttime=0,
                log=str(log),
                run_dir=str(tmp_path),
                port=8000,
                bind="127.0.0.1",
                model="Qwen/Qwen3-8B",
                model_id="Qwen/Qwen3-8B",
                drafter="qwen3-8b-dflash-b16",
                cmd=["vllm"],
                started_at="2026-11-20T10:00:00+00:00",
            )
        )
        r = analyze_source(str(log), MetricsOptions())
        assert r.state.expected is not None and r.state.expected.found_by == "deployment prod"
        assert kinds(r, "alarm") == ["below_expected"]


def test_every_position_accepted_is_probably_a_loop():
    r = report([engine_line(10), spec_line(10, per_position=[1.0, 1.0, 1.0], drafts=300)])
    assert r.ok and kinds(r) == ["possible_loop"]
    assert "looping" in r.findings[0].message
    few = report([engine_line(10), spec_line(10, per_position=[1.0, 1.0, 1.0], drafts=5)])
    assert kinds(few) == []


def test_evaluate_is_pure_over_a_state():
    # the rules take the state as data: the same state judged twice gives the same findings
    r = report([engine_line(10), spec_line(10, per_position=DEMO_WRONG_MASK, drafts=100)])
    a = [f.to_json() for f in evaluate(r.state, Thresholds())]
    b = [f.to_json() for f in evaluate(r.state, Thresholds())]
    assert a == b and a
