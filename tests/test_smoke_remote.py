"""`dflashctl smoke --host H --log PATH`: the log read over SSH (SFTP byte ranges) from a real
OpenSSH sshd on 127.0.0.1, through the SSH layer (dflashctl/hosts/)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from support.cli import run_main
from support.engine_http import COLLAPSED, FakeEngine
from support.sshd import Sshd, sshd_server

pytestmark = pytest.mark.ssh


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    yield from sshd_server(tmp_path_factory)


def test_collapse_from_a_remote_log(sshd, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("DFLASHCTL_SSH_CONFIG", str(sshd.ssh_config))
    log = tmp_path / "vllm.log"
    srv = FakeEngine(spec=COLLAPSED, log=log, log_interval=0.3)
    try:
        code, out, err = run_main(
            monkeypatch, capsys, "smoke", srv.url, "--host", "testhost", "--log", str(log),
            "--log-interval", "0.5", "--max-tokens", "512", "--json",
        )  # fmt: skip
    finally:
        srv.close()
    assert code == 1, err
    d = json.loads(out)
    assert d["speculation"]["source"] == "log"
    assert d["speculation"]["where"] == f"testhost:{log}"
    assert [a["kind"] for a in d["alarms"] if a["severity"] == "alarm"] == ["collapse"]


def test_missing_remote_log_is_exit_2(sshd, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("DFLASHCTL_SSH_CONFIG", str(sshd.ssh_config))
    code, out, err = run_main(
        monkeypatch, capsys, "smoke", "http://127.0.0.1:9", "--host", "testhost", "--log",
        str(tmp_path / "nope.log"),
    )  # fmt: skip
    assert code == 2 and out == ""
    assert f"testhost:{tmp_path}/nope.log: no such log file" in err
    assert "Traceback" not in err
