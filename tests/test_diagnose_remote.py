"""`dflashctl diagnose --host`: the reference engine is launched on the host that has the
checkpoints (serve's launch over SSH, on the host's paths), bound to 127.0.0.1 there, reached
through an SSH forward (dflashctl/hosts/tunnel.py), and stopped by pid afterwards.

The "host" is this machine through a real OpenSSH sshd on 127.0.0.1 (tests/support/sshd.py);
production is the real bundled engine serving the always-accepting tiny pair locally.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import run_main
from support.pairs import write_accepting_pair
from support.served_engine import MAX_TOKENS, served
from support.sshd import Sshd, sshd_server

from dflashctl.server import deployments as state

pytestmark = pytest.mark.ssh


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    yield from sshd_server(tmp_path_factory)


@pytest.fixture(scope="module")
def accepting(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write_accepting_pair(tmp_path_factory.mktemp("accepting"))


def test_reference_launched_on_the_host(monkeypatch, capsys, sshd, accepting, tmp_path):
    target, drafter = accepting
    monkeypatch.setenv("DFLASHCTL_SSH_CONFIG", str(sshd.ssh_config))
    monkeypatch.setenv("DFLASHCTL_REMOTE_HOME", str(tmp_path / "remote-home"))
    with served(target, drafter, "dg-remote-prod") as (url, log):
        code, out, err = run_main(
            monkeypatch, capsys, "diagnose", url, "--model", str(target),
            "--drafter", str(drafter), "--host", "testhost", "--python", sys.executable,
            "--log", log, "--max-tokens", MAX_TOKENS, "--json",
        )  # fmt: skip
    assert code == 0, err
    data = json.loads(out)
    assert data["verdict"] == "healthy", data["findings"]
    ref = data["reference"]
    assert ref["where"].startswith("testhost: bundled engine on 127.0.0.1:")
    assert ref["source"] == "prometheus" and ref["engine"] == "local"
    assert ref["mean_acceptance_length"] == data["production"]["mean_acceptance_length"] == 4.0
    assert data["comparison"]["same_text_prompts"] == 2
    assert any(c.startswith("verify-config testhost:") for c in data["config_checked"])
    # the reference deployment was stopped and forgotten
    assert not [d for d in state.all_deployments() if d.name.startswith("diagnose-ref-")]
    run = tmp_path / "remote-home" / "run"
    logs = list(run.glob("diagnose-ref-*/server.log"))
    assert logs and "Application startup complete" in logs[0].read_text()
    assert Path(sys.executable).exists()
