"""`dflashctl tune` on the embedded demo pair with the bundled engine (real servers launched and
stopped in turn, the matched benchmark against each), a resumed run, and the recommendation's
formats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import run_json, run_main

from dflashctl.commands.tune.run import KResult, TuneOptions, TuneReport, parse_ladder
from dflashctl.server import deployments as state

pytestmark = pytest.mark.usefixtures("stop_all")

ARGS = ["tune", "--k", "0,3", "--fixtures", "code", "--repetitions", "1", "--max-tokens", "24"]


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
