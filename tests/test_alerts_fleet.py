"""`alerts --playbook BOOK` (issue 29): a fleet's rules and scrape config from the playbook,
every host's series held to its drafter's expected range. promtool checks the rules, their
unit tests and a Prometheus config built on the scrape config; then Debian's Prometheus,
configured by that scrape config, scrapes a real HTTP server on 127.0.0.1 serving a vLLM
/metrics page (tests/support/vllm_metrics.py) and the below-expected alert goes pending for
exactly that host."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from support.cli import run_main

from dflashctl.drafter.registry import get_entry

needs_promtool = pytest.mark.skipif(shutil.which("promtool") is None, reason="no promtool")


def write_book(path: Path, port: int, *, registry: str | None = "demo") -> Path:
    verify = f"verify:\n  registry: {registry}\n" if registry else ""
    path.write_text(
        "name: lab\n"
        "hosts:\n"
        "  - local\n"
        "  - host: ops@gpu-z.example:2222\n"
        "    name: control\n"
        "    spec: none\n"
        "  - host: gpu-y\n"
        "    port: 8001\n"
        "serve:\n"
        "  engine: vllm\n"
        "  model: m\n"
        "  drafter: /models/drafter\n"
        f"  port: {port}\n" + verify
    )
    return path


@needs_promtool
def test_a_playbook_gives_every_host_its_rules_and_a_scrape_target(tmp_path, monkeypatch, capsys):
    book = write_book(tmp_path / "lab.yaml", 18123)
    rules, tests, scrape = tmp_path / "rules.yml", tmp_path / "tests.yml", tmp_path / "scrape.yml"
    code, text, err = run_main(monkeypatch, capsys, "alerts", "--playbook", str(book), "--out",
                               str(rules), "--tests", str(tests), "--scrape-config", str(scrape),
                               "--check")  # fmt: skip
    assert code == 0, err + text
    assert "fleet lab: lab-local (127.0.0.1:18123), control (gpu-z.example:18123), " in text
    assert "lab-gpu-y (gpu-y:8001)" in text
    exp = get_entry("demo").expected_acceptance
    assert exp is not None
    assert f"below-expected alert on each of 2 speculating hosts: demo's range {exp.min:g}" in text
    assert "ok promtool test rules" in text
    groups = yaml.safe_load(rules.read_text())["groups"]
    below = [r for g in groups for r in g["rules"] if r.get("alert") == "DFlashBelowExpected"]
    assert [r["expr"].split("}")[0].split("{")[1] for r in below] == [
        'instance="127.0.0.1:18123"',
        'instance="gpu-y:8001"',
    ]  # the control host (spec: none) is scraped, not held to the drafter's range
    jobs = yaml.safe_load(scrape.read_text())["scrape_configs"]
    assert [(c["targets"], c["labels"]["deployment"]) for c in jobs[0]["static_configs"]] == [
        (["127.0.0.1:18123"], "lab-local"),
        (["gpu-z.example:18123"], "control"),
        (["gpu-y:8001"], "lab-gpu-y"),
    ]
    # what an operator pastes into prometheus.yml passes Prometheus' own config check
    config = tmp_path / "prometheus.yml"
    config.write_text(
        yaml.safe_dump({"rule_files": [str(rules)], **yaml.safe_load(scrape.read_text())})
    )
    done = subprocess.run(["promtool", "check", "config", str(config)], capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_no_registry_means_no_below_expected_alert(tmp_path, monkeypatch, capsys) -> None:
    book = write_book(tmp_path / "lab.yaml", 18123, registry=None)
    code, text, err = run_main(monkeypatch, capsys, "alerts", "--playbook", str(book), "--out",
                               str(tmp_path / "r.yml"))  # fmt: skip
    assert code == 0, err
    assert "no below-expected alert: the playbook names no verify.registry drafter" in text
    assert "DFlashBelowExpected" not in (tmp_path / "r.yml").read_text()


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--scrape-config", "s.yml"], "--scrape-config needs --playbook"),
        (["--playbook", "no-such-book"], "neither a .yaml file nor a bundled playbook"),
        (["--playbook", "bad.yaml", "--scrape-config", "s.yml"], "key 'serve.prot'"),
    ],
)
def test_bad_fleet_input_is_one_line_and_writes_nothing(
    tmp_path, monkeypatch, capsys, args, words
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.yaml").write_text("name: x\nserve:\n  engine: vllm\n  prot: 1\n")
    code, _, err = run_main(monkeypatch, capsys, "alerts", "--out", "r.yml", *args)
    assert code == 2 and words in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "r.yml").exists() and not (tmp_path / "s.yml").exists()


@pytest.mark.skipif(
    shutil.which("prometheus") is None
    or (shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")) is None,
    reason="no Prometheus/Alertmanager (./bin/setup-system installs them)",
)
def test_prometheus_scrapes_the_fleet_and_judges_each_host(tmp_path, monkeypatch, capsys) -> None:
    """Two servers on 127.0.0.1, both below the demo drafter's range: the one the playbook
    speculates on goes pending, the `spec: none` control never does."""
    from support.prometheus import Stack
    from support.vllm_metrics import MetricsServer, vllm_page

    exp = get_entry("demo").expected_acceptance
    assert exp is not None
    accepted = round((exp.min - 1) * 100 * 0.6)  # τ = 1 + accepted / 100: under the floor
    pages = [MetricsServer(lambda n: vllm_page(n, drafts=100, accepted=accepted)) for _ in "ab"]
    port, control = (int(m.url.split(":")[2].split("/")[0]) for m in pages)
    try:
        book = tmp_path / "lab.yaml"
        book.write_text(
            "name: lab\nhosts:\n  - local\n"
            f"  - host: gpu-z\n    name: control\n    spec: none\n    port: {control}\n"
            "    bind: 127.0.0.1\n"  # reached through a tunnel: here, this test's server
            f"serve:\n  engine: vllm\n  model: m\n  drafter: /models/d\n  port: {port}\n"
            "verify:\n  registry: demo\n"
        )
        rules, scrape = tmp_path / "rules.yml", tmp_path / "scrape.yml"
        code, _, err = run_main(monkeypatch, capsys, "alerts", "--playbook", str(book), "--out",
                                str(rules), "--scrape-config", str(scrape), "--for",
                                "2s")  # fmt: skip
        assert code == 0, err
        jobs = yaml.safe_load(scrape.read_text())["scrape_configs"]
        jobs[0]["scrape_interval"] = "1s"  # the test's pace; the rest as written
        stack = Stack.start(tmp_path / "stack", {}, rules, scrape_configs=jobs)
        try:
            ours, theirs = f"127.0.0.1:{port}", f"127.0.0.1:{control}"
            below = 'ALERTS{alertname="DFlashBelowExpected"}'
            pending: list = []
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not pending:
                pending = stack.query(below)
                time.sleep(0.5)
            assert pending, stack.query("ALERTS")
            time.sleep(3)  # the control's series are there too by now: still not judged
            judged = {r["metric"]["instance"]: r["metric"] for r in stack.query(below)}
            assert list(judged) == [ours], judged
            assert judged[ours]["drafter"] == "demo" and judged[ours]["job"] == "lab"
            tau = "dflashctl:spec_decode_mean_acceptance_length:rate5m"
            got = {r["metric"]["instance"]: float(r["value"][1]) for r in stack.query(tau)}
            assert set(got) == {ours, theirs}
            assert abs(got[ours] - (1 + accepted / 100)) < 0.01
            deployments = {r["metric"]["deployment"] for r in stack.query('up{job="lab"} == 1')}
            assert deployments == {"lab-local", "control"}
        finally:
            stack.stop()
    finally:
        for m in pages:
            m.close()
