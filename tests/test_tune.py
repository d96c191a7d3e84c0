"""`dflashctl tune` on the embedded demo pair with the bundled engine (real servers launched and
stopped in turn, the matched benchmark against each), a resumed run, and the recommendation's
formats."""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.cli import run_json, run_main
from support.startup import free_port

from dflashctl.commands.tune.run import KResult, TuneOptions, TuneReport, parse_ladder
from dflashctl.server import deployments as state

pytestmark = pytest.mark.usefixtures("stop_all")

# a port of its own: the engines' default (8000) may be someone else's on this machine
ARGS = ["tune", "--k", "0,3", "--fixtures", "code", "--repetitions", "1", "--max-tokens", "24",
        "--port", str(free_port())]  # fmt: skip


def test_tune_measures_each_k_and_resumes_from_its_state(monkeypatch, capsys, tmp_path):
    st = tmp_path / "tune.json"
    code, data, err = run_json(monkeypatch, capsys, *ARGS, "--state", str(st))
    assert code == 0, err
    by_k = {r["k"]: r for r in data["results"]}
    assert sorted(by_k) == [0, 3] and data["resumed"] == []
    off, k3 = by_k[0]["decode_tokens_per_s"]["code"], by_k[3]["decode_tokens_per_s"]["code"]
    assert off > 0 and k3 > 0
    assert by_k[0]["mean_acceptance_length"]["code"] is None  # no speculation at K = 0
    assert by_k[3]["mean_acceptance_length"]["code"] > 1.0  # the demo drafter accepts code
    assert data["best"]["k"] in (0, 3) and data["best_per_fixture"] == {"code": data["best"]["k"]}
    assert state.all_deployments() == []  # every server stopped
    assert json.loads(st.read_text())["results"] == data["results"]
    # the same command again: nothing is launched, the figures are the kept ones
    code, again, err = run_json(monkeypatch, capsys, *ARGS, "--state", str(st))
    assert code == 0 and again["resumed"] == [0, 3] and again["results"] == data["results"]
    assert "launching" not in err


def test_an_interrupted_sweep_measures_only_what_is_missing(monkeypatch, capsys, tmp_path):
    st = tmp_path / "tune.json"
    opts = TuneOptions(ladder="0,3", fixtures="code", repetitions=1, max_tokens=24, state_file=st)
    kept = KResult(0, {"code": 10.0}, {"code": [9.0, 11.0]}, {"code": None})
    st.write_text(json.dumps({"key": opts.key(), "results": [kept.to_json()]}))
    code, data, err = run_json(monkeypatch, capsys, *ARGS, "--state", str(st))
    assert code == 0, err
    assert data["resumed"] == [0] and [r["k"] for r in data["results"]] == [0, 3]
    assert data["results"][0]["decode_tokens_per_s"]["code"] == 10.0  # kept, not remeasured
    assert "K=3: launching" in err and "K=0: launching" not in err


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--k", "three"], "not a list of integers"),
        (["--k", "0,99"], "drafts at most"),
        (["--repetitions", "0"], "at least 1"),
    ],
)
def test_bad_input_exits_2(monkeypatch, capsys, extra, needle):
    code, out, err = run_main(monkeypatch, capsys, "tune", *extra)
    assert code == 2 and out == "" and needle in err and "Traceback" not in err


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_mid_sweep_stops_the_server_it_launched(tmp_path, signum):
    """SIGTERM (a `timeout`, a supervisor) or SIGHUP (a closed terminal) while a K is measured
    stops that K's engine as Ctrl-C does: no engine left running, no deployment left recorded."""
    with open(tmp_path / "err", "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "dflashctl", *ARGS, "--repetitions", "50"],
            env=dict(os.environ), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=err, start_new_session=True,
        )  # fmt: skip
    deadline, engine = time.monotonic() + 90, None
    try:
        while engine is None and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
            if "measuring" in (tmp_path / "err").read_text():
                engine = state.all_deployments()[0].pid
        assert engine is not None, (tmp_path / "err").read_text()
        proc.send_signal(signum)
        assert proc.wait(timeout=30) != 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert state.all_deployments() == []
    for _ in range(40):  # the engine is stopped by then; its /proc entry may linger a moment
        if not Path(f"/proc/{engine}").exists():
            break
        time.sleep(0.25)
    assert not Path(f"/proc/{engine}").exists(), "the K's engine outlived the signalled tune"


def test_a_drafter_alone_is_served_with_the_demo_target_not_swapped_for_the_demo_drafter(
    monkeypatch, capsys, tmp_path
):
    code, _out, err = run_main(monkeypatch, capsys, "tune", "--drafter", str(tmp_path / "none"))
    assert code == 2 and f"--drafter {tmp_path / 'none'}: no config.json there" in err, err
    assert "launching" not in err


def test_a_state_file_of_other_settings_is_refused(monkeypatch, capsys, tmp_path):
    st = tmp_path / "tune.json"
    st.write_text(json.dumps({"key": {"engine": "vllm"}, "results": []}))
    code, _out, err = run_main(monkeypatch, capsys, *ARGS, "--state", str(st))
    assert code == 2 and "other settings" in err


def test_ladders_and_the_batch_size_table():
    assert parse_ladder(None, 15) == [0, 1, 3, 7, 15]
    assert parse_ladder(None, 3) == [0, 1, 3]
    assert parse_ladder("7,3", 15) == [0, 3, 7]
    r = [
        KResult(0, {"a": 10.0}, {}, {}, {1: 10.0, 4: 40.0, 16: 150.0}),
        KResult(3, {"a": 14.0}, {}, {}, {1: 16.0, 4: 45.0, 16: 120.0}),
        KResult(7, {"a": 15.0}, {}, {}, {1: 18.0, 4: 42.0, 16: 100.0}),
    ]
    report = TuneReport(TuneOptions(), [0, 3, 7], r)
    assert report.best() == (7, 15.0) and report.speedup(r[2], "a") == 1.5
    # fastest K per level: 7 at batch 1, 3 up to 4, plain decoding beyond
    assert report.batch_size_table() == [[1, 1, 7], [2, 4, 3], [5, 65536, 0]]


def test_state_is_written_atomically_after_each_k(tmp_path: Path):
    from dflashctl.commands.tune.run import _save_state

    st = tmp_path / "s.json"
    opts = TuneOptions(state_file=st)
    _save_state(opts, {0: KResult(0, {"a": 1.0}, {}, {})})
    assert json.loads(st.read_text())["results"][0]["k"] == 0
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]  # no temporary left behind


def test_overlapping_spreads_are_named_as_ties():
    r = [
        KResult(0, {"code": 18.1}, {"code": [17.9, 18.2]}, {}),
        KResult(1, {"code": 22.8}, {"code": [22.6, 22.9]}, {}),
        KResult(3, {"code": 22.9}, {"code": [22.7, 23.0]}, {}),
        KResult(7, {"code": 18.5}, {"code": [18.5, 18.5]}, {}),
    ]
    report = TuneReport(TuneOptions(), [0, 1, 3, 7], r)
    assert report.best("code") == (3, 22.9) and report.ties("code") == [1]
    assert report.to_json()["ties_per_fixture"] == {"code": [1]}


def _kept(tmp_path: Path, ladder: str, results: list[KResult]) -> Path:
    """A state file holding `results` for the demo pair's code fixture (as ARGS measure it)."""
    st = tmp_path / "tune.json"
    opts = TuneOptions(ladder=ladder, fixtures="code", repetitions=1, max_tokens=24, state_file=st)
    st.write_text(json.dumps({"key": opts.key(), "results": [r.to_json() for r in results]}))
    return st


def test_a_clearly_slower_k_stops_the_ladder(monkeypatch, capsys, tmp_path):
    kept = [
        KResult(0, {"code": 17.7}, {"code": [17.6, 17.8]}, {"code": None}),
        KResult(1, {"code": 22.4}, {"code": [21.5, 23.2]}, {"code": 1.6}),
        KResult(3, {"code": 17.3}, {"code": [17.0, 17.9]}, {"code": 2.2}),  # 17.9 < .85 × 21.5
    ]
    st = _kept(tmp_path, "0,1,3,7", kept)
    args = [a if a != "0,3" else "0,1,3,7" for a in ARGS]
    code, data, err = run_json(monkeypatch, capsys, *args, "--state", str(st))
    assert code == 0, err
    assert data["skipped_by_early_stop"] == [7] and data["stopped_by"] == 3
    assert "launching" not in err  # K = 7 was never served
    assert any("K=3 was clearly slower than K=1" in n for n in data["notes"])
    assert data["best"]["k"] == 1


def test_no_early_stop_on_overlap_or_when_asked():
    from dflashctl.commands.tune.run import clearly_better_k

    k1 = KResult(1, {"code": 22.4}, {"code": [21.5, 23.2]}, {})
    at_the_edge = KResult(3, {"code": 18.0}, {"code": [17.5, 18.3]}, {})  # 18.3 ≥ .85 × 21.5
    assert clearly_better_k([k1, at_the_edge], at_the_edge) is None
    under = KResult(3, {"code": 18.0}, {"code": [17.5, 18.2]}, {})  # 18.2 < 18.275
    assert clearly_better_k([k1, under], under) == 1
    # one kind where the larger K holds up is enough to go on
    k1b = KResult(1, {"a": 22.0, "b": 10.0}, {"a": [21.0, 23.0], "b": [9.0, 11.0]}, {})
    k3b = KResult(3, {"a": 15.0, "b": 12.0}, {"a": [14.0, 16.0], "b": [11.0, 13.0]}, {})
    assert clearly_better_k([k1b, k3b], k3b) is None
    # speculation off is the control, never the K that stops the ladder
    off = KResult(0, {"code": 30.0}, {"code": [29.0, 31.0]}, {})
    assert clearly_better_k([off, under], under) is None


def test_the_recommendation_as_a_plot_and_a_playbook_that_serve_launches(
    monkeypatch, capsys, tmp_path
):
    import yaml

    kept = [
        KResult(0, {"code": 17.7}, {"code": [17.6, 17.8]}, {"code": None}),
        KResult(3, {"code": 20.4}, {"code": [20.1, 20.8]}, {"code": 2.1}),
    ]
    st = _kept(tmp_path, "0,3", kept)
    plot, book = tmp_path / "tune.png", tmp_path / "tuned.yaml"
    port = int(ARGS[ARGS.index("--port") + 1])
    code, text, err = run_main(monkeypatch, capsys, *ARGS, "--state", str(st), "--plot",
                               str(plot), "--write-playbook", str(book))  # fmt: skip
    assert code == 0, err
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and plot.stat().st_size > 10_000
    assert f"wrote {book}: serve it with dflashctl serve {book}" in text
    data = yaml.safe_load(book.read_text())
    assert data["serve"] == {"engine": "local", "port": port, "num_speculative_tokens": 3}
    assert "# Best overall: K=3 (20.4 tokens/s" in book.read_text()
    # the playbook launches through serve, at the K it names
    code, out, err = run_main(monkeypatch, capsys, "serve", str(book), "--detach", "--json")
    assert code == 0, err
    launched = json.loads(out)
    argv = launched["cmd"]
    assert launched["ok"] and argv[argv.index("--num-speculative-tokens") + 1] == "3", launched
    code, _out, err = run_main(monkeypatch, capsys, "stop", launched["name"])
    assert code == 0, err


def test_plain_decoding_winning_writes_spec_none(tmp_path: Path) -> None:
    import yaml

    from dflashctl.commands.tune.playbook import write_playbook

    r = [KResult(0, {"a": 20.0}, {}, {}), KResult(3, {"a": 14.0}, {}, {})]
    serve = write_playbook(TuneReport(TuneOptions(), [0, 3], r), tmp_path / "b.yaml")
    assert serve == {"engine": "local", "spec": "none"}
    assert yaml.safe_load((tmp_path / "b.yaml").read_text())["serve"] == serve


def test_vllm_gets_the_batch_size_table(tmp_path: Path) -> None:
    from dflashctl.commands.tune.playbook import write_playbook
    from dflashctl.playbook import load_playbook
    from dflashctl.server.book import options_from_playbook

    r = [
        KResult(0, {"a": 10.0}, {}, {}, {1: 10.0, 4: 40.0, 16: 150.0}),
        KResult(3, {"a": 14.0}, {}, {}, {1: 16.0, 4: 45.0, 16: 120.0}),
        KResult(7, {"a": 15.0}, {}, {}, {1: 18.0, 4: 42.0, 16: 100.0}),
    ]
    opts = TuneOptions(engine="vllm", model="Qwen/Qwen3-8B", drafter="/models/d", host="gpu1")
    serve = write_playbook(TuneReport(opts, [0, 3, 7], r), tmp_path / "b.yaml")
    table = [[1, 1, 7], [2, 4, 3], [5, 65536, 0]]
    assert serve["num_speculative_tokens"] == 7
    assert serve["speculative_config"] == {"num_speculative_tokens_per_batch_size": table}
    book = load_playbook(tmp_path / "b.yaml")
    assert [h.host for h in book.hosts] == ["gpu1"]
    _book, options = options_from_playbook(tmp_path / "b.yaml", {})
    assert options[0].num_speculative_tokens == 7 and options[0].model == "Qwen/Qwen3-8B"


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--plot", "tune.gif"], "name a .png, .svg or .pdf file"),
        (["--plot", "no/such/dir/t.png"], "does not exist"),
        (["--write-playbook", "tuned.json"], "a playbook is a .yaml or .yml file"),
    ],
)
def test_bad_outputs_are_refused_before_any_server_starts(monkeypatch, capsys, tmp_path, extra,
                                                          needle):  # fmt: skip
    monkeypatch.chdir(tmp_path)
    code, _out, err = run_main(monkeypatch, capsys, *ARGS, *extra)
    assert code == 2 and needle in err and "launching" not in err, err
    assert state.all_deployments() == []


def test_rounds_relaunch_every_k_in_turn_and_pool_their_answers(monkeypatch, capsys, tmp_path):
    st = tmp_path / "tune.json"
    code, data, err = run_json(monkeypatch, capsys, *ARGS, "--rounds", "2", "--state", str(st))
    assert code == 0, err
    order = [ln.split(": launching")[0] for ln in err.splitlines() if ": launching" in ln]
    assert order == ["round 1/2: K=0", "round 1/2: K=3", "round 2/2: K=0", "round 2/2: K=3"]
    for r in data["results"]:
        xs = r["decode_samples"]["code"]
        assert r["rounds"] == 2 and len(xs) >= 2
        assert r["spread"]["code"] == [min(xs), max(xs)]
        assert r["decode_tokens_per_s"]["code"] == pytest.approx(statistics.median(xs))
    lo, hi = data["speedup_vs_off"]["3"]["code"]["by_round"]  # K=3 over off, round by round
    by_k = {r["k"]: r["decode_by_round"]["code"] for r in data["results"]}
    ratios = [a / b for a, b in zip(by_k[3], by_k[0], strict=True)]
    assert (lo, hi) == (pytest.approx(min(ratios)), pytest.approx(max(ratios)))
    assert state.all_deployments() == []
    # the same command resumes nothing; other rounds are other settings
    code, again, err = run_json(monkeypatch, capsys, *ARGS, "--rounds", "2", "--state", str(st))
    assert code == 0 and again["resumed"] == [0, 3] and "launching" not in err
    code, _out, err = run_main(monkeypatch, capsys, *ARGS, "--rounds", "3", "--state", str(st))
    assert code == 2 and "other settings" in err


def test_merged_rounds_pool_samples_and_keep_tau():
    a = KResult(3, {"code": 20.0}, {"code": [19.0, 21.0]}, {"code": 2.1}, {4: 40.0}, [],
                {"code": [19.0, 20.0, 21.0]})  # fmt: skip
    b = KResult(3, {"code": 23.0}, {"code": [22.0, 24.0]}, {"code": 2.1}, {4: 44.0}, ["x"],
                {"code": [22.0, 23.0, 24.0]})  # fmt: skip
    m = a.merged(b)
    assert m.decode == {"code": 21.5} and m.spread == {"code": [19.0, 24.0]}
    assert m.tau == {"code": 2.1} and m.by_level == {4: 42.0}
    assert m.rounds == 2 and m.errors == ["x"] and len(m.samples["code"]) == 6
    assert KResult.from_json(m.to_json()) == m


def test_speedups_pair_each_round_with_its_own_control():
    """The machine got 10 % faster between the rounds: each round's ratio is the same 1.25."""
    off = KResult(0, {"a": 22.0}, {"a": [20.0, 24.0]}, {}, by_round={"a": [20.0, 24.0]}, rounds=2)
    k3 = KResult(3, {"a": 27.5}, {"a": [25.0, 30.0]}, {}, by_round={"a": [25.0, 30.0]}, rounds=2)
    report = TuneReport(TuneOptions(rounds=2), [0, 3], [off, k3])
    assert report.speedup_range(k3, "a") == [pytest.approx(1.25), pytest.approx(1.25)]
    assert report.speedup_range(off, "a") is None
    one = KResult(3, {"a": 27.5}, {}, {}, by_round={"a": [27.5]})
    assert TuneReport(TuneOptions(), [0, 3], [off, one]).speedup_range(one, "a") is None


@pytest.mark.parametrize(
    ("rounds", "half"),
    [
        ([20.0], None),  # one round: no spread to estimate
        ([1.0, 2.0, 3.0], 4.303 * 1.0 * (2 / 3) ** 0.5),  # t(0.975, 2) · s · √(2/n)
        ([5.0, 5.0], 0.0),
        ([1.0] * 12 + [2.0], 1.96 * statistics.stdev([1.0] * 12 + [2.0]) * (2 / 13) ** 0.5),
    ],
)  # fmt: skip
def test_the_rerun_interval_is_where_a_second_run_lands(rounds, half):
    from dflashctl.commands.tune.rerun import rerun_interval

    got = rerun_interval(rounds)
    if half is None:
        assert got is None
    else:
        mean = statistics.fmean(rounds)
        assert got == [pytest.approx(mean - half, abs=1e-3), pytest.approx(mean + half, abs=1e-3)]


def test_the_json_carries_each_figure_with_its_rerun_interval():
    off = KResult(0, {"a": 21.0}, {}, {}, by_round={"a": [20.0, 21.0, 22.0]}, rounds=3)
    k3 = KResult(3, {"a": 26.0}, {}, {}, by_round={"a": [26.0, 26.25, 26.4]}, rounds=3)
    data = TuneReport(TuneOptions(rounds=3), [0, 3], [off, k3]).to_json()
    lo, hi = data["decode_rerun_interval"]["0"]["a"]
    assert lo < 21.0 < hi and hi - 21.0 == pytest.approx(4.303 * (2 / 3) ** 0.5)
    s = data["speedup_vs_off"]["3"]["a"]
    ratios = [26.0 / 20.0, 26.25 / 21.0, 26.4 / 22.0]
    assert s["round_mean"] == pytest.approx(statistics.fmean(ratios))
    assert s["by_round"] == [pytest.approx(min(ratios)), pytest.approx(max(ratios))]
    assert s["rerun_interval"][0] < s["round_mean"] < s["rerun_interval"][1]


def test_sglang_gets_one_k_that_serves_every_level_best(tmp_path: Path) -> None:
    """SGLang has no per-batch K: the recommendation is the K whose geometric mean over the
    levels is highest — here 3 (16·45·120 beats off's 10·40·150 and 7's 18·42·100)."""
    from dflashctl.commands.tune.playbook import write_playbook

    r = [
        KResult(0, {"a": 10.0}, {}, {}, {1: 10.0, 4: 40.0, 16: 150.0}),
        KResult(3, {"a": 14.0}, {}, {}, {1: 16.0, 4: 45.0, 16: 120.0}),
        KResult(7, {"a": 15.0}, {}, {}, {1: 18.0, 4: 42.0, 16: 100.0}),
    ]
    opts = TuneOptions(engine="sglang", model="Qwen/Qwen3-8B", drafter="/models/d")
    report = TuneReport(opts, [0, 3, 7], r)
    k, v = report.one_k_over_levels()
    assert k == 3 and v == pytest.approx((16 * 45 * 120) ** (1 / 3))
    assert report.to_json()["one_k_over_concurrency"]["k"] == 3
    serve = write_playbook(report, tmp_path / "s.yaml")
    assert serve["num_speculative_tokens"] == 3 and "speculative_config" not in serve
    # plain decoding best over the levels: spec none
    r[0].by_level = {1: 10.0, 4: 60.0, 16: 300.0}
    assert report.one_k_over_levels()[0] == 0
    assert write_playbook(report, tmp_path / "t.yaml")["spec"] == "none"
    # a K missing a level is not ranked; no levels at all: None
    r[1].by_level = {1: 99.0}
    assert report.one_k_over_levels()[0] == 0
    assert TuneReport(opts, [0], [KResult(0, {"a": 1.0}, {}, {})]).one_k_over_levels() is None


def test_sglang_one_k_is_printed_as_its_flag(capsys) -> None:
    from dflashctl.commands.tune.render import render_tune

    r = [
        KResult(0, {"a": 10.0}, {}, {}, {1: 10.0, 4: 40.0}),
        KResult(3, {"a": 14.0}, {}, {}, {1: 16.0, 4: 45.0}),
    ]
    render_tune(TuneReport(TuneOptions(engine="sglang"), [0, 3], r))
    shown = " ".join(capsys.readouterr().out.split())
    assert "SGLang (one K at every batch size): K = 3," in shown
    assert "--speculative-num-draft-tokens 4" in shown
