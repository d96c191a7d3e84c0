"""dflashctl fetch --host: the copy lands on the serving host, proven by hashing it there.

A real OpenSSH sshd on 127.0.0.1 (tests/sshd_fixture.py, alias `testhost`), reached through the
SSH layer (dflashctl/remote.py: paramiko, known_hosts checked), and the local Hub server of
test_fetch.py. The "host" shares this machine's filesystem, so the test can also read what
arrived. Skipped while the SSH layer or the sshd fixture is not in the tree.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

sshd_fixture = pytest.importorskip("sshd_fixture")
remote = pytest.importorskip("dflashctl.remote")
if not (callable(getattr(remote, "upload", None)) and callable(getattr(remote, "run", None))):
    pytest.skip("dflashctl/remote.py has no upload/run yet", allow_module_level=True)

from sshd_fixture import sshd_server  # noqa: E402
from test_fetch import LOCK_NAME, fetch, hub, listing, one_line_error  # noqa: E402, F401

pytestmark = pytest.mark.ssh


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    yield from sshd_server(tmp_path_factory)


@pytest.fixture
def ssh_env(sshd, monkeypatch):
    monkeypatch.setenv("DFLASHCTL_SSH_CONFIG", str(sshd.ssh_config))
    yield sshd
    remote.close_all()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_fetch_to_a_host_uploads_and_re_hashes_there(
    hub,  # noqa: F811
    ssh_env,
    monkeypatch,
    capsys,
    tmp_path,
):
    local, there = tmp_path / "local", tmp_path / "on-host" / "tiny"
    args = ["tiny-dflash", "--dir", str(local), "--host", "testhost", "--remote-dir", str(there)]
    code, out, err = fetch(monkeypatch, capsys, *args)
    assert code == 0, err
    assert f"on testhost: {there}: 2 file(s) re-hashed there, equal to the lock (2 sent)" in out
    assert listing(there) == ["config.json", LOCK_NAME, "model.safetensors"]
    lock = json.loads((local / LOCK_NAME).read_text())
    assert {n: sha256(there / n) for n in lock["files"]} == lock["files"]
    assert (there / LOCK_NAME).read_bytes() == (local / LOCK_NAME).read_bytes()

    # Again: nothing to download here, nothing to send there; still re-hashed there.
    hub.server.requests.clear()
    code, out, err = fetch(monkeypatch, capsys, *args, "--json")
    report = json.loads(out)
    assert code == 0, err
    assert report["action"] == "verified" and hub.server.requests == []
    assert report["remote"]["uploaded"] == []
    assert report["remote"]["verified"] == lock["files"]

    # The copy on the host drifted (the field story: a fix that never landed): only that
    # file is sent again.
    (there / "config.json").write_text('{"edited on the host": true}\n')
    code, out, err = fetch(monkeypatch, capsys, *args, "--json")
    assert code == 0, err
    assert json.loads(out)["remote"]["uploaded"] == ["config.json"]
    assert sha256(there / "config.json") == lock["files"]["config.json"]


def test_an_unknown_host_fails_before_anything_is_downloaded(
    hub,  # noqa: F811
    ssh_env,
    monkeypatch,
    capsys,
    tmp_path,
):
    code, out, err = fetch(
        monkeypatch, capsys, "tiny-dflash", "--dir", str(tmp_path / "l"), "--host", "nosuchalias"
    )
    one_line_error(code, out, err)
    assert "nosuchalias" in err
    assert hub.server.requests == [] and not (tmp_path / "l").exists()
