"""dflashctl fetch --host: the copy lands on the serving host, proven by hashing it there.

A real OpenSSH sshd on 127.0.0.1 (tests/support/sshd.py, alias `testhost`), reached through the
`Host` of the SSH layer (dflashctl/hosts/ssh.py `SSHHost`: paramiko, known_hosts checked), and
the local Hub server of test_fetch.py. The "host" shares this machine's filesystem, so the test
can also read what arrived. Skipped while the sshd fixture is not in the tree.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest
from support.sshd import sshd_server
from test_fetch import LOCK_NAME, fetch, hub, listing, one_line_error  # noqa: F401

from dflashctl.hosts.ssh import SSHHost

pytestmark = pytest.mark.ssh


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    yield from sshd_server(tmp_path_factory)


@pytest.fixture
def ssh_env(sshd, monkeypatch):
    monkeypatch.setenv("DFLASHCTL_SSH_CONFIG", str(sshd.ssh_config))
    return sshd


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


# ---- --remote-fetch: the host downloads from the Hub itself ---------------------------------
#
# The sshd runs on this machine, so the "host" reaches the local Hub server on 127.0.0.1:
# HF_ENDPOINT (and HF_HUB_DISABLE_XET) travel in the remote command's environment, HF_TOKEN on
# its stdin. The host's dflashctl is this checkout's, run by this interpreter (--python); its
# registry is the bundled one, which does not know the test drafter: the pins checked are the
# ones of the registry here.


def remote_fetch(monkeypatch, capsys, there: Path, *args: str) -> tuple[int, str, str]:
    return fetch(
        monkeypatch,
        capsys,
        *args,
        "--host",
        "testhost",
        "--remote-fetch",
        "--remote-dir",
        str(there),
        "--python",
        sys.executable,
    )


@pytest.fixture
def scripts(monkeypatch):
    """Every script the SSH layer runs, with its stdin."""
    seen: list[tuple[str, bytes | None]] = []
    real = SSHHost.sh

    def sh(self, script, *, timeout=30.0, stdin=None, retry=True):
        seen.append((script, stdin))
        return real(self, script, timeout=timeout, stdin=stdin, retry=retry)

    monkeypatch.setattr(SSHHost, "sh", sh)
    return seen


def test_remote_fetch_downloads_on_the_host_and_re_hashes_there(
    hub,  # noqa: F811
    ssh_env,
    monkeypatch,
    capsys,
    tmp_path,
    scripts,
):
    there = tmp_path / "on-host" / "tiny"
    monkeypatch.chdir(tmp_path)
    code, out, err = remote_fetch(monkeypatch, capsys, there, "tiny-dflash", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["fetched_on"] == "testhost" and report["directory"] == str(there)
    assert {f["name"]: f["status"] for f in report["files"]} == {
        "config.json": "pinned",
        "model.safetensors": "pinned",
    }
    assert listing(there) == ["config.json", LOCK_NAME, "model.safetensors"]
    assert (there / "model.safetensors").read_bytes() == hub.weights
    lock = json.loads((there / LOCK_NAME).read_text())
    assert lock["revision"] == hub.c1
    assert report["remote"]["verified"] == lock["files"]
    assert report["remote"]["uploaded"] == [] and report["verify"]["ok"]
    assert not (tmp_path / "tiny-dflash").exists()  # nothing stored here
    # the host did the downloading, with the Hub given in its environment
    assert any(p.endswith("/model.safetensors") for m, p in hub.server.requests if m == "GET")
    fetch_script = next(s for s, _ in scripts if " -m dflashctl fetch " in s)
    assert f"export HF_ENDPOINT={hub.url}" in fetch_script

    # Human output, again: the host verifies what it has and downloads nothing.
    hub.server.requests.clear()
    code, out, err = remote_fetch(monkeypatch, capsys, there, "tiny-dflash")
    assert code == 0, err
    assert f"into testhost:{there}" in out
    assert "2 file(s) re-hashed there, equal to the lock (downloaded there)" in out
    assert "in place" in out
    assert not [p for _, p in hub.server.requests if "/resolve/" in p]


def test_remote_fetch_token_goes_on_stdin_never_on_a_command_line(
    hub,  # noqa: F811
    ssh_env,
    monkeypatch,
    capsys,
    tmp_path,
    scripts,
):
    from test_fetch import GATED, TOKEN

    there = tmp_path / "gated"
    args = [GATED, "--revision", hub.g1, "--include", "config.json"]
    monkeypatch.delenv("HF_TOKEN", raising=False)
    err = one_line_error(*remote_fetch(monkeypatch, capsys, there, *args))
    assert "testhost: fetch there failed" in err and "is gated" in err

    monkeypatch.setenv("HF_TOKEN", TOKEN)
    scripts.clear()
    code, _, err = remote_fetch(monkeypatch, capsys, there, *args)
    assert code == 0, err
    assert (there / "config.json").read_bytes() == hub.config
    assert all(TOKEN not in script for script, _ in scripts)
    assert any(stdin and TOKEN.encode() in stdin for _, stdin in scripts)


def test_remote_fetch_bytes_other_than_the_pin_are_removed_on_the_host(
    hub,  # noqa: F811
    ssh_env,
    monkeypatch,
    capsys,
    tmp_path,
):
    # The registry here pins other bytes for config.json than the Hub serves at the pinned
    # commit; the host's registry has no pin, so only the check here can catch it.
    entry = hub.playbooks / "drafters" / "tiny-dflash.yaml"
    good = hashlib.sha256(hub.config).hexdigest()
    entry.write_text(entry.read_text().replace(good, "a" * 64))
    there = tmp_path / "tiny"
    err = one_line_error(*remote_fetch(monkeypatch, capsys, there, "tiny-dflash"))
    assert "testhost: config.json: sha256 " in err and "is not the pinned aaaa" in err
    assert not (there / "config.json").exists() and not (there / LOCK_NAME).exists()
    assert (there / "model.safetensors").exists()  # it matched its pin


def test_remote_fetch_with_a_python_that_has_no_dflashctl(
    hub,  # noqa: F811
    ssh_env,
    monkeypatch,
    capsys,
    tmp_path,
):
    code, out, err = fetch(
        monkeypatch,
        capsys,
        "tiny-dflash",
        "--host",
        "testhost",
        "--remote-fetch",
        "--remote-dir",
        str(tmp_path / "t"),
        "--python",
        "/nonexistent/python3",
    )
    one_line_error(code, out, err)
    assert "cannot run there" in err and "--python" in err
    assert hub.server.requests == []
