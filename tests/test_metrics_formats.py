"""Every acceptance format users paste, from a corpus of our own excerpts written from the
engines' source (tests/data/metrics/formats/; vLLM 0.34 `bench serve` and offline example,
llama.cpp's server and speculative statistics, a TensorRT-LLM-like line nobody here reads).

Each excerpt must get its verdict and its figures; a file with figures in a format not read gets
"format not recognised", never "no speculative-decoding metrics"; and the result does not
depend on where the chunks are cut.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from support.vllm_metrics import DATA

from dflashctl.metrics import MetricsOptions, analyze_chunks, analyze_source

FORMATS = DATA / "formats"

# file: (format of the windows, windows, alarm kinds, mean acceptance length of the latest)
CORPUS = {
    "vllm_bench_serve_healthy.txt": ("vllm-bench-serve", 1, [], 3.98),
    "vllm_bench_serve_collapsed.txt": ("vllm-bench-serve", 1, ["collapse"], 1.0),
    "vllm_offline_healthy.txt": ("vllm-offline", 1, [], 3.35),
    "vllm_offline_collapsed.txt": ("vllm-offline", 1, ["collapse"], 1.01),
    "llamacpp_server_healthy.log": ("llama.cpp-slot", 4, [], 2.77),
    "llamacpp_server_collapsed_old_format.log": ("llama.cpp-slot", 3, ["collapse"], None),
    "llamacpp_statistics.log": ("llama.cpp-stats draft-dflash", 1, [], 3.71),
    "llamacpp_server_inline_positions.log": ("llama.cpp-slot", 2, [], 2.5),
    "vllm_fields_looping.txt": ("vllm-fields", 1, [], 4.0),
    "vllm_fields_one_line.txt": ("vllm-fields", 1, [], 2.21),
}


def alarms(report) -> list[str]:
    return [f.kind for f in report.findings if f.severity == "alarm"]


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_each_format_gets_its_verdict_and_figures(name: str) -> None:
    fmt, n, want, mean = CORPUS[name]
    r = analyze_source(str(FORMATS / name), MetricsOptions())
    assert [w.format for w in r.state.windows] == [fmt] * n
    assert alarms(r) == want
    latest = r.state.windows[-1]
    assert latest.mean_acceptance_length == mean
    assert "no_metrics" not in [f.kind for f in r.findings]


def test_the_bench_block_reads_every_counter_and_position() -> None:
    w = analyze_source(str(FORMATS / "vllm_bench_serve_healthy.txt"), MetricsOptions()).state.latest
    assert w is not None and w.cumulative
    assert (w.num_drafts, w.drafted_tokens, w.accepted_tokens) == (9000, 63000, 26820)
    assert w.per_position == pytest.approx([0.812, 0.64, 0.499, 0.381, 0.287, 0.21, 0.151])
    assert w.draft_acceptance_rate == pytest.approx(0.4257, abs=1e-4)


def test_a_collapsed_bench_names_the_wiring_first() -> None:
    r = analyze_source(str(FORMATS / "vllm_bench_serve_collapsed.txt"), MetricsOptions())
    collapse = next(f for f in r.findings if f.kind == "collapse")
    assert "every draft rejected" in collapse.likely_causes[0].cause


def test_llama_cpp_statistics_read_the_profile_and_drafts() -> None:
    w = analyze_source(str(FORMATS / "llamacpp_statistics.log"), MetricsOptions()).state.latest
    assert w is not None and w.engine == "llama.cpp"
    assert (w.num_drafts, w.drafted_tokens, w.accepted_tokens) == (1116, 16740, 3020)
    assert w.per_position is not None and len(w.per_position) == 15 and w.per_position[0] == 0.812


def test_figures_in_an_unknown_format_are_said_to_be_unread() -> None:
    r = analyze_source(str(FORMATS / "trtllm_unrecognised.log"), MetricsOptions())
    kinds = [f.kind for f in r.findings]
    assert kinds == ["format_not_recognised"]
    assert (
        "TensorRT-LLM" in r.findings[0].message
        and "not the same as healthy" in r.findings[0].message
    )


def test_a_log_without_figures_still_has_no_metrics(tmp_path: Path) -> None:
    log = tmp_path / "plain.log"
    log.write_text("INFO starting\nINFO Accept: application/json header seen\nINFO ready\n")
    r = analyze_source(str(log), MetricsOptions())
    assert [f.kind for f in r.findings] == ["no_metrics"]


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_any_chunking_reads_the_same(name: str) -> None:
    data = (FORMATS / name).read_bytes()
    whole = analyze_chunks([data], source=name, opts=MetricsOptions())
    rnd = random.Random(name)
    chunks, i = [], 0
    while i < len(data):
        n = rnd.randint(1, 40)
        chunks.append(data[i : i + n])
        i += n
    cut = analyze_chunks(chunks, source=name, opts=MetricsOptions())
    assert [w.to_json() for w in cut.state.windows] == [w.to_json() for w in whole.state.windows]
    assert alarms(cut) == alarms(whole)


def test_engine_lines_win_over_a_summary_in_the_same_log(tmp_path: Path) -> None:
    from support.vllm_metrics import engine_line, spec_line

    log = tmp_path / "both.log"
    lines = [engine_line(0), spec_line(0, mean=3.0)]
    log.write_text(
        "\n".join(lines) + "\n" + (FORMATS / "vllm_bench_serve_collapsed.txt").read_text()
    )
    r = analyze_source(str(log), MetricsOptions())
    assert [w.format for w in r.state.windows] == ["vllm-0.10.2+"]


def _prefix_log(tmp_path: Path, hits: list[float]) -> Path:
    from support.vllm_metrics import engine_line, spec_line, write_log

    lines = []
    for i, hit in enumerate(hits):
        pp = [0.8, 0.6, 0.45, 0.3, 0.2] if hit < 10 else [0.35, 0.15, 0.05, 0.02, 0.01]
        lines += [engine_line(10 * i, running=4, hit=hit), spec_line(10 * i, per_position=pp)]
    return write_log(tmp_path / "prefix.log", lines)


def test_acceptance_low_where_the_prefix_cache_hits_names_prefix_caching_first(tmp_path):
    """The vllm#47930 signature in vLLM's own lines: the windows whose `Prefix cache hit rate`
    is high accept far less than those where it is ~0."""
    r = analyze_source(str(_prefix_log(tmp_path, [0.0] * 6 + [62.0] * 6)), MetricsOptions())
    judged = [f for f in r.findings if f.kind in ("decay", "collapse", "below_expected")]
    assert judged, [f.kind for f in r.findings]
    first = judged[0].likely_causes[0].cause
    assert first.startswith("prefix caching:") and "vllm#47930" in first
    assert r.state.windows[-1].prefix_cache_hit_rate == 0.62


def test_the_same_fall_without_prefix_hits_does_not_blame_the_cache(tmp_path):
    from support.vllm_metrics import engine_line, spec_line, write_log

    lines = []
    for i in range(12):
        pp = [0.8, 0.6, 0.45, 0.3, 0.2] if i < 6 else [0.35, 0.15, 0.05, 0.02, 0.01]
        lines += [engine_line(10 * i, running=4), spec_line(10 * i, per_position=pp)]
    r = analyze_source(str(write_log(tmp_path / "fall.log", lines)), MetricsOptions())
    causes = [c.cause for f in r.findings for c in f.likely_causes]
    assert causes and not any(c.startswith("prefix caching:") for c in causes)


def test_prometheus_windows_carry_the_prefix_cache_hit_rate():
    from datetime import datetime

    from dflashctl.metrics import prom

    def page(drafts, accepted, hits, queries):
        return (
            "# TYPE vllm:spec_decode_num_drafts counter\n"
            f'vllm:spec_decode_num_drafts_total{{engine="0"}} {drafts}\n'
            "# TYPE vllm:spec_decode_num_draft_tokens counter\n"
            f'vllm:spec_decode_num_draft_tokens_total{{engine="0"}} {drafts * 5}\n'
            "# TYPE vllm:spec_decode_num_accepted_tokens counter\n"
            f'vllm:spec_decode_num_accepted_tokens_total{{engine="0"}} {accepted}\n'
            "# TYPE vllm:prefix_cache_hits counter\n"
            f'vllm:prefix_cache_hits_total{{engine="0"}} {hits}\n'
            "# TYPE vllm:prefix_cache_queries counter\n"
            f'vllm:prefix_cache_queries_total{{engine="0"}} {queries}\n'
        )

    now = datetime(2026, 12, 6, 12, 0, 0)
    a = prom.parse_reading(page(100, 200, 1000, 4000), at=now, monotonic=0.0, url="u")
    b = prom.parse_reading(page(300, 300, 4000, 8000), at=now, monotonic=10.0, url="u")
    w, reset = prom.window_between(a, b)
    assert w is not None and not reset and w.prefix_cache_hit_rate == 0.75


def test_vllms_prefix_reuse_warning_is_named_with_its_issue(tmp_path: Path) -> None:
    """vllm#57032: at start-up on a hybrid target, vLLM finds no KV cache group for the DFlash
    drafter and switches prefix reuse off. Acceptance stays healthy; the finding is a warning
    naming the issue, wherever the chunks are cut."""
    from support.vllm_metrics import spec_line, startup_lines, write_log

    warning = (
        "(EngineCore pid=7) WARNING 11-20 10:00:03 [kv_cache_utils.py:1210] Speculative "
        "decoding (method=dflash) is enabled but no KV cache group could be identified as the "
        "draft model's, so every group -- including Mamba groups [0, 1, 2, 3] -- will be "
        "treated as a draft group; prefix-cache reuse across requests will be disabled"
    )
    good = [spec_line(10 * i + 20, per_position=[0.9, 0.8, 0.7]) for i in range(6)]  # τ 3.4
    lines = [*startup_lines(0), warning, *good]
    log = write_log(tmp_path / "vllm.log", lines)
    r = analyze_source(str(log), MetricsOptions())
    found = [f for f in r.findings if f.kind == "prefix_reuse_disabled"]
    assert [f.to_json() for f in found] == [reuse_off_finding(" at 11-20 10:00:03", str(log))]
    assert alarms(r) == []
    data = log.read_bytes()
    for cut in (len(data) // 3, data.index(b"no KV cache group") + 5):
        cuts = analyze_chunks([data[:cut], data[cut:]], source=str(log), opts=MetricsOptions())
        assert [f.kind for f in cuts.findings] == [f.kind for f in r.findings]
    # the same log without the warning: no such finding
    plain = write_log(tmp_path / "plain.log", [ln for ln in lines if ln != warning])
    assert "prefix_reuse_disabled" not in [
        f.kind for f in analyze_source(str(plain), MetricsOptions()).findings
    ]


def test_the_newer_slot_line_and_the_bare_vllm_fields_read_every_figure() -> None:
    """llama-server builds of mid-2026 print τ and the positions on the slot line itself; vLLM's
    fields pasted without their `SpecDecoding metrics:` prefix, one line or one per line."""
    slot = analyze_source(str(FORMATS / "llamacpp_server_inline_positions.log"), MetricsOptions())
    w = slot.state.windows[0]
    assert (w.accepted_tokens, w.drafted_tokens, w.mean_acceptance_length) == (132, 240, 2.65)
    assert w.per_position == [0.7, 0.45, 0.3, 0.2] and w.num_drafts == 80
    one = analyze_source(str(FORMATS / "vllm_fields_one_line.txt"), MetricsOptions()).state.latest
    assert one is not None and (one.accepted_tokens, one.drafted_tokens) == (242, 1400)
    assert one.num_drafts == 200 and one.draft_acceptance_rate == pytest.approx(0.173)
    assert one.per_position == [0.6, 0.35, 0.17, 0.06, 0.03, 0.0, 0.0]
    loop = analyze_source(str(FORMATS / "vllm_fields_looping.txt"), MetricsOptions())
    assert [f.kind for f in loop.findings if f.kind != "no_expected_range"][:1] == ["possible_loop"]


def test_an_unread_engine_is_named_by_its_own_name(capsys, monkeypatch) -> None:
    """xinfer's stats line inside a container named vllm-rs-…: named xinfer, not vLLM; the
    verdict says nothing was judged."""
    from support.cli import run_main

    r = analyze_source(str(FORMATS / "xinfer_unrecognised.log"), MetricsOptions())
    f = next(f for f in r.findings if f.kind == "format_not_recognised")
    assert r.state.engine_hint == "xinfer" and r.state.windows == []
    assert "DFlash Stats" in f.message
    code, out, _err = run_main(monkeypatch, capsys, "metrics",
                               str(FORMATS / "xinfer_unrecognised.log"))  # fmt: skip
    assert code == 0 and "verdict: nothing judged (exit 0): format not recognised" in out


def reuse_off_finding(when: str, source: str) -> dict:
    """The prefix-reuse finding, word for word (the rule's whole output is this text)."""
    from dflashctl.metrics.window import Cause, Finding

    return Finding(
        "prefix_reuse_disabled",
        "warning",
        f"vLLM switched prefix-cache reuse off at start-up{when}: no KV cache group was "
        "identified as the DFlash drafter's, so every group is treated as the drafter's "
        "(vllm#57032, open): every turn re-prefills its whole prompt, and long multi-turn "
        "prompts lose the cache's speed-up whatever the acceptance",
        [
            Cause(
                "a hybrid (Mamba / GDN) target with DFlash on an affected vLLM: "
                "_uses_trailing_mtp_layers() handles only `mtp`; no fix upstream yet",
                f"grep -n 'no KV cache group' {source}; compare TTFT with the drafter "
                "off (dflashctl bench)",
            )
        ],
    ).to_json()


def test_the_prefix_reuse_finding_without_a_timestamp() -> None:
    """A warning line with no time of its own: the finding says no time."""
    from dflashctl.metrics.startup import startup_warnings
    from dflashctl.metrics.thresholds import Thresholds
    from dflashctl.metrics.window import Marker, MetricsState

    state = MetricsState("x.log", "log", "vllm", [], 0, prefix_reuse_off=Marker(0, "w"))
    found = startup_warnings(state, Thresholds(source="x.log"))
    assert [f.to_json() for f in found] == [reuse_off_finding("", "x.log")]
    state.prefix_reuse_off = None
    assert startup_warnings(state, Thresholds(source="x.log")) == []


def test_the_latest_window_heading_names_its_time_only_when_there_is_one(
    capsys, monkeypatch
) -> None:
    """A pasted line without a time: the heading is just 'Latest window' (no trailing blank);
    a vLLM log's shows the time as vLLM wrote it."""
    from support.cli import run_main

    _code, out, _err = run_main(monkeypatch, capsys, "metrics",
                                str(FORMATS / "vllm_fields_one_line.txt"))  # fmt: skip
    assert "Latest window" in out.splitlines()
    _code, out, _err = run_main(monkeypatch, capsys, "metrics", str(DATA / "vllm_034_healthy.log"))
    heading = [ln for ln in out.splitlines() if ln.startswith("Latest window")]
    assert heading == ["Latest window 11-20 10:02:20 (engine 0)"]
