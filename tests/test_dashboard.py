"""`dflashctl dashboard` (issue 29): the Grafana dashboard on `alerts`' recording rules, read
back through Grafana's own model (grafana-foundation-sdk). Its queries run against a real
Prometheus in tests/test_exporter.py (the exporter's end-to-end test)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import run_main

from dflashctl.drafter.registry import get_entry
from dflashctl.monitoring.dashboard import DashboardOptions, dashboard, panel_queries, validate
from dflashctl.monitoring.rules import DRAFTS, HIT_RATE, POSITION, TAU, recording_rules


def test_the_written_dashboard_is_grafanas_model_with_every_panel(tmp_path, monkeypatch, capsys):
    out = tmp_path / "dash.json"
    code, text, err = run_main(monkeypatch, capsys, "dashboard", "--out", str(out))
    assert code == 0, err
    data = json.loads(out.read_text("utf-8"))
    assert validate(data) == []
    titles = [p["title"] for p in data["panels"] if p["type"] != "row"]
    assert titles == ["Mean acceptance length (τ)", "τ now", "Acceptance per draft position",
                      "Drafted and accepted", "Prefix-cache hit rate beside τ",
                      "DFlash alerts firing"]  # fmt: skip
    assert f"wrote {out}: 6 panels" in text
    ids = [p["id"] for p in data["panels"]]
    assert len(set(ids)) == len(ids)
    # panels never overlap on Grafana's 24-column grid
    cells = set()
    for p in data["panels"]:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24
        xs, ys = range(g["x"], g["x"] + g["w"]), range(g["y"], g["y"] + g["h"])
        mine = {(x, y) for x in xs for y in ys}
        assert not cells & mine, p["title"]
        cells |= mine
    # every query reads a series the recording rules define (or ALERTS), through the variables
    recorded = {r["record"] for r in recording_rules()}
    exprs = [e for _, e, _ in panel_queries(data)]
    for e in exprs:
        assert any(name in e for name in recorded) or e.startswith("ALERTS{"), e
    for name in (TAU, DRAFTS, POSITION, HIT_RATE):
        assert any(f'{name}{{job=~"$job", instance=~"$instance"}}' in e for e in exprs), name
    variables = {v["name"]: v for v in data["templating"]["list"]}
    assert variables["datasource"]["query"] == "prometheus"
    assert variables["instance"]["query"] == f'label_values({DRAFTS}{{job=~"$job"}}, instance)'
    # the collapse threshold is the one `metrics` and `alerts` judge with
    tau_panel = data["panels"][1]
    steps = tau_panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert steps == [{"color": "red", "value": None}, {"color": "green", "value": 1.3}]


def test_a_drafter_draws_its_registry_range(monkeypatch, capsys) -> None:
    code, text, err = run_main(monkeypatch, capsys, "dashboard", "--drafter",
                               'demo=model_name="demo"', "--json")  # fmt: skip
    assert code == 0, err
    data = json.loads(text)["dashboard"]
    exp = get_entry("demo").expected_acceptance
    assert exp is not None
    band = [(e, legend) for _, e, legend in panel_queries(data) if e.startswith("vector(")]
    assert band == [(f"vector({exp.min:g})", "demo expected min"),
                    (f"vector({exp.max:g})", "demo expected max")]  # fmt: skip
    overrides = data["panels"][1]["fieldConfig"]["overrides"]
    names = [o["matcher"]["options"] for o in overrides]
    assert names == ["demo expected min", "demo expected max"]


def test_the_model_check_names_what_grafana_would_drop() -> None:
    data = dashboard(DashboardOptions())
    data["panels"][1]["colour"] = "blue"  # not a panel field in Grafana's model
    data["templating"]["list"][0]["sort_by"] = 1
    problems = validate(data)
    assert ".panels[1].colour: not in Grafana's model" in problems
    assert ".templating.list[0].sort_by: not in Grafana's model" in problems
    assert len(problems) == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--drafter", "demo"], "is not NAME=MATCHER"),
        (["--drafter", 'no-such-drafter=job="x"'], "no-such-drafter"),
        (["--uid", "has space"], "is not a Grafana uid"),
        (["--uid", "x" * 41], "is not a Grafana uid"),
        (["--title", " "], "--title is empty"),
        (["--prometheus", "127.0.0.1:9090"], "is not an http(s) URL"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(monkeypatch, capsys, tmp_path, args, message) -> None:
    out = tmp_path / "dash.json"
    code, _, err = run_main(monkeypatch, capsys, "dashboard", "--out", str(out), *args)
    assert code == 2 and message in err, err
    assert "Traceback" not in err
    assert not out.exists()  # nothing half-written


def test_an_unreachable_prometheus_exits_2_and_writes_nothing(monkeypatch, capsys, tmp_path):
    from support.startup import free_port

    out = tmp_path / "dash.json"
    url = f"http://127.0.0.1:{free_port()}"
    code, _, err = run_main(monkeypatch, capsys, "dashboard", "-o", str(out), "--prometheus", url)
    assert code == 2 and "did not answer" in err, err
    assert not out.exists()


def test_stdout_is_the_dashboard_itself(monkeypatch, capsys) -> None:
    code, text, err = run_main(monkeypatch, capsys, "dashboard")
    assert code == 0, err
    assert json.loads(text)["uid"] == "dflashctl-spec-decode"
    assert "ok Grafana's dashboard model keeps every field" in err


def test_importable_by_path(tmp_path: Path) -> None:
    """The file is plain JSON Grafana imports: no NaN, ids and uid set, schema fields present."""
    data = dashboard(DashboardOptions(title="Fleet", uid="fleet_1"))
    text = json.dumps(data, allow_nan=False)
    assert json.loads(text)["title"] == "Fleet"
    assert data["uid"] == "fleet_1" and data["refresh"] == "30s"
