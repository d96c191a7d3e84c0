"""`dflashctl alerts` (issue 29): the rule file passes the real `promtool check rules`, and the
promtool unit tests it writes beside it pass `promtool test rules` — and fail when a rule is
wrong (a moved threshold). Bad input is one line, exit 2, nothing written."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from support.cli import run_main

pytestmark = pytest.mark.skipif(
    shutil.which("promtool") is None, reason="no promtool (./bin/setup-system installs it)"
)


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["promtool", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    "drafters",
    [
        [],
        ['demo=model_name="demo"', 'qwen3-8b-dflash-b16=model_name=~"Qwen/Qwen3-8B.*",job="vllm"'],
    ],
)
def test_the_rules_pass_promtool_and_their_unit_tests(
    tmp_path: Path, monkeypatch, capsys, drafters
) -> None:
    args = ["alerts", "--out", str(tmp_path / "rules.yml"), "--tests", str(tmp_path / "t.yml")]
    for d in drafters:
        args += ["--drafter", d]
    code, out, err = run_main(monkeypatch, capsys, *args, "--check")
    assert code == 0, out + err
    assert "ok promtool check rules" in out and "ok promtool test rules" in out
    done = promtool("test", "rules", "t.yml", cwd=tmp_path)  # the file as a user runs it
    assert done.returncode == 0, done.stdout + done.stderr
    tests = yaml.safe_load((tmp_path / "t.yml").read_text())["tests"]
    names = {t["name"] for t in tests}
    assert {"healthy", "low traffic", "collapse", "all rejected", "decay", "prefix cache",
            "speculation off", "sglang"} <= names  # fmt: skip
    assert len([n for n in names if n.startswith("below expected")]) == len(drafters)
    fired = {a["alertname"] for t in tests for a in t["alert_rule_test"] if a["exp_alerts"]}
    assert fired >= {"DFlashAcceptanceCollapse", "DFlashAllDraftsRejected", "DFlashAcceptanceDecay",
                     "DFlashPrefixCacheSuspect", "DFlashSpeculationOff"}  # fmt: skip


@pytest.mark.parametrize(
    "change, failing",
    [
        ({"collapse_length": 1.01}, "collapse"),  # a collapse no longer caught
        ({"min_drafts_per_s": 0.01}, "low traffic"),  # a handful of drafts judged
        ({"decay_ratio": 0.5}, "decay"),
    ],
)
def test_the_unit_tests_catch_a_wrong_rule(tmp_path: Path, change: dict, failing: str) -> None:
    from dflashctl.monitoring.rule_tests import rule_tests
    from dflashctl.monitoring.rules import RuleOptions, rule_groups

    right, wrong = RuleOptions(), RuleOptions(**change)
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rule_groups(wrong), sort_keys=False))
    (tmp_path / "t.yml").write_text(yaml.safe_dump(rule_tests(right, "rules.yml"), sort_keys=False))
    done = promtool("test", "rules", "t.yml", cwd=tmp_path)
    assert done.returncode != 0
    assert f"name: {failing}," in done.stdout + done.stderr


def test_prometheus_rule_object(monkeypatch, capsys, tmp_path: Path) -> None:
    code, out, err = run_main(monkeypatch, capsys, "alerts", "--format", "prometheusrule",
                              "--namespace", "monitoring")  # fmt: skip
    assert code == 0, err
    obj = yaml.safe_load(out)
    assert obj["apiVersion"] == "monitoring.coreos.com/v1" and obj["kind"] == "PrometheusRule"
    assert obj["metadata"]["namespace"] == "monitoring"
    (tmp_path / "spec.yml").write_text(yaml.safe_dump(obj["spec"]))
    done = promtool("check", "rules", "spec.yml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    "args, words",
    [
        (["--drafter", "demo"], "is not NAME=MATCHER"),
        (["--drafter", "demo=model_name"], "is not a label matcher"),
        (["--drafter", 'nosuch=model_name="x"'], "nosuch"),
        (["--for", "5 minutes"], "is not a duration"),
        (["--format", "json"], "one of rules, prometheusrule"),
        (["--tests", "t.yml"], "--tests needs --out"),
        (["--format", "prometheusrule", "--name", ""], "is not a Kubernetes object name"),
        (["--format", "prometheusrule", "--namespace", "Prod"], "is not a Kubernetes namespace"),
    ],
)
def test_bad_input_is_one_line(tmp_path: Path, monkeypatch, capsys, args, words) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run_main(monkeypatch, capsys, "alerts", *args)
    assert code == 2 and out == "" and words in err.splitlines()[0], err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("bad", ["--tests", "--out"])
def test_an_output_refused_means_none_is_written(tmp_path: Path, monkeypatch, capsys, bad) -> None:
    """Every output path is checked before the first is written: a directory given as the
    tests file leaves no rule file behind (and the other way round)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    paths = {"--out": "rules.yml", "--tests": "tests.yml", bad: "sub"}
    code, out, err = run_main(
        monkeypatch, capsys, "alerts", *[x for kv in paths.items() for x in kv]
    )
    assert code == 2 and out == "" and "refusing to write" in err.splitlines()[0], err
    assert [p.name for p in tmp_path.iterdir()] == ["sub"] and not any((tmp_path / "sub").iterdir())
