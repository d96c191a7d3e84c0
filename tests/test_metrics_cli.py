"""`dflashctl metrics` as users run it: exit codes, --json shape, human view, --plot, errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import run_main
from support.vllm_metrics import DATA

from dflashctl.cli import app

REQUIRED = {
    "ok",
    "engine",
    "windows",
    "mean_acceptance_length",
    "per_position",
    "draft_acceptance_rate",
    "alarms",
    "series",
}
WINDOW_KEYS = {
    "timestamp",
    "engine",
    "stream",
    "mean_acceptance_length",
    "accepted_tokens",
    "drafted_tokens",
    "num_drafts",
    "per_position",
    "draft_acceptance_rate",
    "generation_throughput",
}


class TestExitCodes:
    @pytest.mark.parametrize(
        "name, code",
        [
            ("vllm_034_healthy.log", 0),
            # its config line names qwen3-8b-dflash-b16 (expected 3.16+): τ 2.40 is below that
            ("vllm_weak_positions.log", 1),
            ("vllm_034_collapsed.log", 1),
            ("vllm_stale_restart.log", 1),
            ("vllm_decay.log", 1),
            ("sglang_collapsed.log", 1),
        ],
    )
    def test_verdicts(self, runner, name, code):
        assert runner.invoke(app, ["metrics", str(DATA / name)]).exit_code == code

    @pytest.mark.parametrize(
        "args, needle",
        [
            (["binary_garbage.bin"], "not a text log"),
            (["nope.log"], "no such log file"),
            (["vllm_034_healthy.log", "--engine", "llamacpp"], "unknown --engine"),
            (["vllm_034_healthy.log", "--min-acceptance-length", "0.5"], "at least 1.0"),
            (["vllm_034_healthy.log", "--host", "127.0.0.1:1"], "connection refused"),
            (["vllm_034_healthy.log", "--interval", "0"], "--interval"),
        ],
    )
    def test_could_not_run(self, monkeypatch, capsys, args, needle):
        args = [str(DATA / args[0]), *args[1:]]
        code, out, err = run_main(monkeypatch, capsys, "metrics", *args)
        assert code == 2 and out == ""
        assert needle in err
        assert "Traceback" not in err

    def test_subprocess_one_line_error(self):
        r = subprocess.run(
            [sys.executable, "-m", "dflashctl", "metrics", str(DATA / "binary_garbage.bin")],
            capture_output=True,
            text=True,
        )
        assert r.returncode == 2 and r.stdout == ""
        assert r.stderr.startswith("Error: the input is not a text log")
        assert "Traceback" not in r.stderr


class TestJson:
    def test_shape_and_latest_window(self, runner):
        result = runner.invoke(app, ["metrics", str(DATA / "vllm_034_collapsed.log"), "--json"])
        assert result.exit_code == 1
        d = json.loads(result.stdout)
        assert set(d) >= REQUIRED
        assert d["ok"] is False and d["engine"] == "vllm" and d["windows"] == 5
        assert d["mean_acceptance_length"] == 1.03
        assert d["per_position"][:2] == [0.03, 0.003] and len(d["per_position"]) == 15
        assert d["draft_acceptance_rate"] == pytest.approx(0.002)
        (alarm,) = d["alarms"]
        assert {"kind", "severity", "message", "likely_causes"} <= set(alarm)
        assert alarm["kind"] == "collapse" and alarm["severity"] == "alarm"
        assert all({"cause", "check"} <= set(c) for c in alarm["likely_causes"])
        assert len(d["series"]) == 5 and set(d["series"][0]) >= WINDOW_KEYS
        assert d["series"][0]["mean_acceptance_length"] == 5.68
        assert d["series"][-1]["timestamp"].endswith("10:05:50")

    def test_stdin(self, runner):
        data = (DATA / "sglang_0523_healthy.log").read_bytes()
        result = runner.invoke(app, ["metrics", "-", "--json"], input=data)
        assert result.exit_code == 0
        d = json.loads(result.stdout)
        assert d["engine"] == "sglang" and d["windows"] == 6 and d["source"] == "stdin"

    def test_no_windows(self, runner):
        result = runner.invoke(app, ["metrics", str(DATA / "vllm_no_metrics.log"), "--json"])
        d = json.loads(result.stdout)
        assert result.exit_code == 0 and d["windows"] == 0 and d["series"] == []
        assert d["mean_acceptance_length"] is None

    def test_registry_drafter(self, runner):
        args = ["metrics", str(DATA / "vllm_034_healthy.log"), "--json"]
        result = runner.invoke(app, [*args, "--drafter", "qwen3-8b-dflash-b16"])
        d = json.loads(result.stdout)
        assert result.exit_code == 1  # 2.5 is below the 3.16 expected for this drafter
        assert [a["kind"] for a in d["alarms"]] == ["below_expected"]
        assert "--drafter qwen3-8b-dflash-b16" in json.dumps(d["alarms"][0]["likely_causes"])


class TestHuman:
    def test_table_bars_sparkline_causes(self, runner):
        result = runner.invoke(app, ["metrics", str(DATA / "vllm_decay.log")])
        out = result.stdout
        assert result.exit_code == 1
        assert "Per-position acceptance" in out and "pos 15" in out
        assert "█" in out  # bars
        assert "Acceptance over time" in out and any(c in out for c in "▁▂▃")
        assert "Recent windows" in out
        assert "ALARM" in out and "decay" in out and "check:" in out
        assert "verdict: alarm below_expected, decay (exit 1)" in out

    def test_healthy_verdict(self, runner):
        result = runner.invoke(app, ["metrics", str(DATA / "vllm_034_healthy.log")])
        assert "verdict: ok (exit 0)" in result.stdout


class TestPlot:
    def test_png_written(self, runner, tmp_path: Path):
        pytest.importorskip("matplotlib")
        png = tmp_path / "acc.png"
        args = ["metrics", str(DATA / "vllm_decay.log"), "--plot", str(png), "--json"]
        result = runner.invoke(app, args)
        assert result.exit_code == 1
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert json.loads(result.stdout)["windows"] == 12
        assert [p.name for p in tmp_path.iterdir()] == ["acc.png"]  # no temp file left

    def test_without_matplotlib(self, monkeypatch, capsys, tmp_path: Path):
        monkeypatch.setitem(sys.modules, "matplotlib", None)
        code, _, err = run_main(
            monkeypatch,
            capsys,
            "metrics",
            str(DATA / "vllm_034_healthy.log"),
            "--plot",
            str(tmp_path / "x.png"),
        )
        assert code == 2 and "matplotlib" in err and "dflashctl[plot]" in err
        assert not (tmp_path / "x.png").exists()


def test_reading_a_log_imports_no_http_or_plot_libraries():
    code = (
        "import sys\n"
        f"sys.argv = ['dflashctl', 'metrics', {str(DATA / 'vllm_034_healthy.log')!r}, '--json']\n"
        "from dflashctl.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('httpx', 'prometheus_client', 'matplotlib', 'torch', 'paramiko') "
        "if m in sys.modules]\n"
        "print('HEAVY=' + ','.join(heavy), file=sys.stderr)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "HEAVY=\n" in r.stderr


def test_report_json_writes_non_finite_numbers_as_null(capsys: pytest.CaptureFixture[str]):
    """--json encodes the report as it is when every number is finite (the fast path) and, when
    one is not (nan, inf), rewrites it as null first: the text stays JSON that `jq` reads."""
    from dflashctl.commands.metrics.render import emit_report_json
    from dflashctl.console import json_safe
    from dflashctl.metrics import MetricsOptions, analyze_source

    report = analyze_source(str(DATA / "vllm_034_healthy.log"), MetricsOptions())
    emit_report_json(report)
    assert json.loads(capsys.readouterr().out) == json_safe(report.to_json())
    report.state.windows[-1].generation_throughput = float("nan")
    report.state.windows[0].prompt_throughput = float("-inf")
    emit_report_json(report)
    text = capsys.readouterr().out
    assert "NaN" not in text and "Infinity" not in text
    d = json.loads(text)
    assert d["series"][-1]["generation_throughput"] is None
    assert d["series"][0]["prompt_throughput"] is None
    assert d == json_safe(report.to_json())
    assert text.count("\n    {") == len(d["series"])  # still one line per window


def test_plot_draws_the_criterion_that_fired(tmp_path: Path):
    """A format that prints no τ (vLLM ≈0.8.3) collapses on the draft acceptance rate: the chart
    draws the rate with its 5 % line, the title says why, and the windows are whole numbers.
    Where τ is printed the rate is drawn without a collapse line: τ 1.57 at K = 15 is 3.8 %, and
    it is τ that is judged."""
    from dflashctl.commands.metrics.plot import plot_spec
    from dflashctl.metrics import MetricsOptions, analyze_source

    line = (
        "INFO 04-02 10:05:{s:02d} [metrics.py:82] SpecDecoding metrics: Draft acceptance rate: "
        "3.8%, Accepted: 570 tokens, Drafted: 15000 tokens\n"
    )
    log = tmp_path / "v083.log"
    log.write_text("".join(line.format(s=10 * i) for i in range(3)))
    report = analyze_source(str(log), MetricsOptions())
    assert [f.kind for f in report.alarms] == ["collapse"]
    spec = plot_spec(report)
    assert {s["axis"] for s in spec["series"]} == {"rate"}
    rate_line = next(x for x in spec["lines"] if x["axis"] == "rate")
    assert rate_line["y"] == 5.0 and "draft acceptance < 5 %" in rate_line["label"]
    assert spec["title"] == "ALARM: collapse" and "draft acceptance" in spec["why"]

    per_pos = ", ".join(["0.400", "0.100", "0.040", "0.020"] + ["0.000"] * 11)
    with_tau = (
        "(APIServer pid=1) INFO 11-20 10:05:{s:02d} [metrics.py:120] SpecDecoding metrics: "
        "Mean acceptance length: 1.57, Accepted throughput: 5.70 tokens/s, Drafted throughput: "
        "150.00 tokens/s, Accepted: 570 tokens, Drafted: 15000 tokens, Per-position acceptance "
        f"rate: {per_pos}, Avg Draft acceptance rate: 3.8%\n"
    )
    log2 = tmp_path / "k15.log"
    log2.write_text("".join(with_tau.format(s=10 * i) for i in range(3)))
    spec2 = plot_spec(analyze_source(str(log2), MetricsOptions()))
    assert {s["axis"] for s in spec2["series"]} == {"tau", "rate"}
    assert [x["axis"] for x in spec2["lines"]] == ["tau"] and spec2["title"] == "OK"
    assert spec["xticks"] == [1, 2, 3] and all(isinstance(t, int) for t in spec["xticks"])
