"""`dflashctl bench` against small real HTTP servers on 127.0.0.1 (tests/support/engine_http.py): a
target without /metrics (acceptance unknown, not a crash), a server that answers 500 (exit 1,
the run goes on), bad input (exit 2, one line, before any request), and the statistics."""

from __future__ import annotations

import json

import pytest
from support.cli import run_main
from support.engine_http import HEALTHY, Behaviour, serve_many

from dflashctl.commands.bench.session import BenchOptions, geomean, median, percentile
from dflashctl.commands.bench.targets import parse_concurrency

FAST = ["--timeout", "10", "--max-tokens", "64", "--warmup-tokens", "4"]


def bench_json(monkeypatch, capsys, *args: str) -> tuple[int, dict, str]:
    code, out, err = run_main(monkeypatch, capsys, "bench", *args, "--json", *FAST)
    # the servers keep dropped connections quiet (support/engine_http.QuietServer): a traceback
    # here is dflashctl's or a server bug; filtering the server's reports out of stderr raced
    # with the CLI's own lines written between them
    assert "Traceback" not in err
    return code, json.loads(out), err


CAPPED = Behaviour(cap_at_max_tokens=True)


@pytest.fixture(scope="module")
def idle():
    """One server for the bad-input cases, which must never reach it."""
    start, made = serve_many()
    yield start(CAPPED)
    for s in made:
        s.close()


class TestNoMetrics:
    def test_acceptance_unknown_not_a_crash(self, serve, monkeypatch, capsys):
        blind = serve(CAPPED, metrics="missing")  # /metrics answers 404
        healthy = serve(CAPPED, spec=HEALTHY)
        code, d, err = bench_json(monkeypatch, capsys, blind.url, healthy.url)
        assert code == 0, (d["failures"], err)
        a, b = d["targets"]
        assert a["metrics"]["state"] == "unreadable" and "404" in a["metrics"]["message"]
        assert any(n.startswith("acceptance unknown") for n in a["notes"])
        for f, cell in a["fixtures"].items():
            assert cell["mean_acceptance_length"] is None, f
            assert cell["speculation"] == "unreadable"
            assert "404" in cell["speculation_message"]
            assert cell["decode_tokens_per_s"] > 0 and cell["speedup"] == 1.0
        for cell in b["fixtures"].values():
            assert cell["speculation"] == "speculating"
            assert cell["mean_acceptance_length"] == pytest.approx(HEALTHY.mean_length, rel=0.1)
            assert cell["speedup"] > 0
            assert cell["matches_first_target"] is True
        assert a["fixtures"].keys() == b["fixtures"].keys() == {"code", "prose", "translation"}

    def test_table_says_unknown(self, serve, monkeypatch, capsys):
        blind = serve(CAPPED, metrics="missing")
        code, out, _ = run_main(
            monkeypatch, capsys, "bench", blind.url, "--repetitions", "1", "--fixtures", "code",
            *FAST,
        )  # fmt: skip
        assert code == 0
        assert "τ ?" in out and "acceptance unknown" in out


class TestShortAnswers:
    def test_an_answer_that_stops_early_gets_no_speedup(self, serve, monkeypatch, capsys):
        """An end-of-sequence after a few tokens: a decode speed over them measures request
        overhead, so the fixture is left out of the speedup and a note says why."""
        plain = serve(CAPPED, spec=None)
        terse = serve(Behaviour(text="Fine, done.", tokens=3), spec=HEALTHY)
        code, d, _ = bench_json(monkeypatch, capsys, plain.url, terse.url)
        assert code == 0
        _, b = d["targets"]
        for cell in b["fixtures"].values():
            assert cell["completion_tokens"] == 3 and cell["speedup"] is None
        assert b["mean_speedup"] is None
        assert any("answers ended before 16 tokens" in n for n in b["notes"]), b["notes"]
        for cell in b["fixtures"].values():  # said in the cell too, for the table and the plot
            assert "fewer than 16" in cell["left_out_of_speedup"]
            assert cell["speedup_min"] is None and cell["speedup_max"] is None

    def test_the_table_and_the_plot_leave_it_out_too(self, serve, monkeypatch, capsys, tmp_path):
        pytest.importorskip("matplotlib")
        from dflashctl.commands.bench.plot import write_plot
        from dflashctl.commands.bench.run import run_bench
        from dflashctl.commands.bench.session import BenchOptions

        plain = serve(CAPPED, spec=None)
        terse = serve(Behaviour(text="Fine, done.", tokens=3), spec=HEALTHY)
        code, out, _ = run_main(
            monkeypatch, capsys, "bench", plain.url, terse.url, "--fixtures", "code",
            "--repetitions", "1", *FAST,
        )  # fmt: skip
        assert code == 0 and "left out" in out
        report = run_bench(
            BenchOptions([plain.url, terse.url], fixtures="code", repetitions=1, warmup_tokens=0)
        )
        import matplotlib.pyplot as plt

        captured = {}
        real_close = plt.close
        monkeypatch.setattr(plt, "close", lambda fig: captured.setdefault("fig", fig))
        write_plot(report, tmp_path / "b.png")
        real_close(captured["fig"])
        ax = captured["fig"].axes[0]
        texts = [t.get_text() for t in ax.texts]
        assert texts.count("left out:\ntoo short") == 2  # both bars of the fixture
        assert not any("×" in t for t in texts)  # no speedup drawn for it


class TestSpreadAndPrompts:
    def test_spread_over_repetitions_and_percentiles(self, serve, monkeypatch, capsys):
        """Medians hide a 3.19× and a 1.76× of the same pair: min–max over the rounds, and p90
        of TTFT and ITL, are in every cell."""
        plain = serve(CAPPED, spec=None)
        spec = serve(CAPPED, spec=HEALTHY)
        code, d, _ = bench_json(monkeypatch, capsys, plain.url, spec.url, "--fixtures", "code")
        assert code == 0
        a, b = d["targets"]
        for t in (a, b):
            cell = t["fixtures"]["code"]
            rates = [x["decode_tokens_per_s"] for x in cell["samples"]]
            assert cell["decode_tokens_per_s_min"] == pytest.approx(min(rates), abs=0.01)
            assert cell["decode_tokens_per_s_max"] == pytest.approx(max(rates), abs=0.01)
            assert cell["ttft_p90_s"] >= cell["ttft_s"] - 1e-4
            assert cell["itl_p90_s"] >= cell["itl_s"] - 1e-6
        mine = [x["decode_tokens_per_s"] for x in b["fixtures"]["code"]["samples"]]
        base = [x["decode_tokens_per_s"] for x in a["fixtures"]["code"]["samples"]]
        ratios = [m / r for m, r in zip(mine, base, strict=True)]
        cell = b["fixtures"]["code"]
        assert cell["speedup_min"] == pytest.approx(min(ratios), rel=0.01)
        assert cell["speedup_max"] == pytest.approx(max(ratios), rel=0.01)

    def test_prompts_file(self, serve, monkeypatch, capsys, tmp_path):
        srv = serve(CAPPED)
        prompts = tmp_path / "p.jsonl"
        prompts.write_text('{"id": "sql", "prompt": "Write a SQL join."}\n"Name three rivers."\n')
        code, d, _ = bench_json(
            monkeypatch, capsys, srv.url, "--prompts", str(prompts), "--repetitions", "1"
        )
        assert code == 0
        assert list(d["targets"][0]["fixtures"]) == ["sql", "prompt2"]
        code, _, err = run_main(
            monkeypatch, capsys, "bench", srv.url, "--prompts", str(prompts), "--fixtures", "code"
        )
        assert code == 2 and "--prompts and --fixtures" in err


class TestFailedRequests:
    def test_500_is_recorded_and_exit_1(self, serve, monkeypatch, capsys):
        good = serve(CAPPED, spec=None)  # no spec counters: a plain server
        broken = serve(Behaviour(mode="error500"))
        code, d, _ = bench_json(
            monkeypatch, capsys, good.url, broken.url, "--fixtures", "code,prose"
        )
        assert code == 1 and d["ok"] is False
        g, b = d["targets"]
        assert g["fixtures"]["code"]["speculation"] == "not_configured"
        assert b["warmup"]["ok"] is False
        for cell in b["fixtures"].values():
            assert cell["measured"] == 0 and len(cell["errors"]) == 3
            assert cell["decode_tokens_per_s"] is None and cell["speedup"] is None
            assert "HTTP 500" in cell["errors"][0]
        assert len(d["failures"]) == 1 + 2 * 3
        # the broken server did not stop the run: every request was still sent, in turn
        measured = [e["target"] for e in d["order"] if e["phase"] == "measure"]
        assert measured == [good.url, broken.url] * 6
        assert len(broken.requests) == 1 + 6

    def test_table_marks_failures(self, serve, monkeypatch, capsys):
        good = serve(CAPPED)
        broken = serve(Behaviour(mode="error500"))
        code, out, _ = run_main(
            monkeypatch, capsys, "bench", good.url, broken.url, "--repetitions", "1",
            "--fixtures", "code", *FAST,
        )  # fmt: skip
        assert code == 1
        assert "failed" in out and "HTTP 500" in out


class TestBadInput:
    @pytest.mark.parametrize(
        ("args", "needle"),
        [
            (["nowhere"], "unknown target 'nowhere'"),
            (["demo"], "playbook demo: its deployment 'demo' is not running"),
            (["missing.yaml"], "playbook not found: missing.yaml"),
            (["URL", "--concurrency", "1,,2"], "'' is not a whole number"),
            (["URL", "--concurrency", "2.5"], "'2.5' is not a whole number"),
            (["URL", "--concurrency", "-1"], "-1 is outside 1..1024"),
            (["URL", "--concurrency", "4096"], "4096 is outside 1..1024"),
            (["URL", "--fixtures", "code,poetry"], "unknown fixture 'poetry'"),
            (["URL", "--fixtures", ","], "--fixtures is empty"),
            (["URL", "--repetitions", "0"], "--repetitions must be at least 1"),
            (["URL", "--warmup-tokens", "-1"], "--warmup-tokens must be 0"),
            (["URL", "--max-tokens", "1"], "--max-tokens must be at least 2"),
            (["URL", "--timeout", "0"], "--timeout must be a positive"),
            (["URL", "--plot", "chart.jpg"], "must end in .png"),
            (["URL", "--plot", "no/such/dir/b.png"], "does not exist"),
            (["http://127.0.0.1:9"], "cannot reach http://127.0.0.1:9"),
        ],
    )
    def test_exit_2_one_line_nothing_sent(self, idle, monkeypatch, capsys, args, needle):
        srv = idle
        srv.requests.clear()
        args = [srv.url if a == "URL" else a for a in args]
        code, out, err = run_main(monkeypatch, capsys, "bench", *args)
        assert code == 2, err
        assert out == "" and "Traceback" not in err
        first, *rest = err.strip().splitlines()
        assert first.startswith("Error: ") and needle in first, err
        assert all(line.startswith("Hint: ") for line in rest)
        assert srv.requests == []  # validated before any request

    def test_no_target(self, monkeypatch, capsys):
        code, _, err = run_main(monkeypatch, capsys, "bench")
        assert code == 2 and "Missing argument" in err and "Traceback" not in err

    def test_unknown_target_names_the_running_deployments(self, monkeypatch, capsys):
        from dflashctl.server import deployments as state

        dep = state.Deployment(
            name="dflash", engine="local", host=None, url="http://127.0.0.1:9", pid=1,
            starttime=0, log="", run_dir="", port=9, bind="127.0.0.1", model="m",
            model_id="m", drafter=None, cmd=[], started_at=state.now_iso(),
        )  # fmt: skip
        state.save(dep)
        code, _, err = run_main(monkeypatch, capsys, "bench", "dflsah")
        assert code == 2 and "Hint: running deployments: dflash" in err


class TestStatistics:
    def test_median_percentile_geomean(self):
        assert median([3.0, 1.0, 2.0]) == 2.0
        assert median([4.0, 1.0, 3.0, 2.0]) == 2.5  # an even count: the mean of the middle two
        assert median([]) is None
        xs = [float(i) for i in range(1, 101)]
        assert percentile(xs, 50) == pytest.approx(50.5)
        assert percentile(xs, 99) == pytest.approx(99.01)
        assert percentile([2.0], 99) == 2.0 and percentile([], 50) is None
        assert geomean([2.0, 8.0]) == pytest.approx(4.0)
        assert geomean([]) is None

    def test_concurrency_levels(self):
        assert parse_concurrency("1,2,4,8") == [1, 2, 4, 8]
        assert parse_concurrency(" 8, 1 ,8") == [8, 1]

    def test_fixture_selection_keeps_the_order_given(self):
        ids = [p.id for p in BenchOptions(["x"], fixtures="translation,code").prompts()]
        assert ids == ["translation", "code"]
        assert [p.id for p in BenchOptions(["x"]).prompts()] == ["code", "prose", "translation"]
