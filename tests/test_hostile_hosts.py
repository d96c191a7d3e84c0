"""Hostile host names, ssh configs and URLs (issue 19, item 9): one line, exit 2, no password
on the terminal, nothing contacted."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.hostile import assert_clean_error, dflashctl


@pytest.mark.parametrize("command", [("doctor",), ("verify-config", "drafter")])
def test_a_host_name_label_over_63_characters(command: tuple[str, ...]):
    res = dflashctl(*command, "--host", "h" * 70, timeout=30)
    assert_clean_error(res, 2, contains="not a valid DNS name")


def test_a_host_name_over_63_characters_from_ssh_config(tmp_path: Path):
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config").write_text(f"Host gpu\n  HostName {'x' * 80}.example\n")
    res = dflashctl("doctor", "--host", "gpu", HOME=str(tmp_path), timeout=30)
    assert_clean_error(res, 2, contains="HostName of gpu")


def test_non_utf8_ssh_config(tmp_path: Path):
    (tmp_path / ".ssh").mkdir()
    cfg = tmp_path / ".ssh" / "config"
    cfg.write_bytes(b"Host a\n  HostName \xff\xfe\n")
    res = dflashctl("doctor", "--host", "a", HOME=str(tmp_path), timeout=30)
    assert_clean_error(res, 2, contains=f"{cfg}:2: the ssh config is not UTF-8")


@pytest.mark.parametrize(
    "args",
    [("smoke", "http://[::1"), ("metrics", "http://[::1/metrics"), ("bench", "http://[::1:80"),
     ("smoke", "http://127.0.0.1:99999")],
)  # fmt: skip
def test_a_malformed_url(args: tuple[str, ...]):
    res = dflashctl(*args, timeout=30)
    assert_clean_error(res, 2, contains="not a valid URL")


@pytest.mark.parametrize(
    "args",
    [("smoke", "http://alice:s3cr3t@127.0.0.1:9"),
     ("metrics", "http://alice:s3cr3t@127.0.0.1:9/metrics"),
     ("bench", "http://alice:s3cr3t@127.0.0.1:9"),
     ("smoke", "http://alice:s3cr3t@[::1")],
)  # fmt: skip
def test_a_password_in_a_url_is_never_printed(args: tuple[str, ...]):
    res = dflashctl(*args, timeout=30)
    line = assert_clean_error(res, 2)
    assert "s3cr3t" not in res.stdout + res.stderr
    assert "alice:***@" in line


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory):
    from support.sshd import sshd_server

    yield from sshd_server(tmp_path_factory)


@pytest.mark.ssh
def test_writes_over_ssh_refuse_what_is_not_a_regular_file(sshd, tmp_path: Path, monkeypatch):
    """The atomic writer's rule holds on a host too (the real sshd fixture): a FIFO, a
    directory, or a symlink to one is refused; nothing there changes."""
    import os

    from support.hostile import snapshot

    from dflashctl.errors import OutputError
    from dflashctl.hosts.ssh import SSHHost, SSHOptions

    monkeypatch.setenv("DFLASHCTL_SSH_CONFIG", str(sshd.ssh_config))
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "fifo")
    before = snapshot(tmp_path)
    with SSHHost.connect("testhost", SSHOptions()) as host:
        for name in ("fifo", "dir", "link"):
            with pytest.raises(OutputError, match="not a regular file"):
                host.write_file(str(tmp_path / name), b"x")
        host.write_file(str(tmp_path / "ok.json"), b"{}\n")
    assert (tmp_path / "ok.json").read_bytes() == b"{}\n"
    after = snapshot(tmp_path)
    del after["ok.json"]
    assert after == before


@pytest.mark.parametrize("spec", ["a\nb", "a b", "a;b c"])
def test_a_dry_run_checks_host_before_it_prints(spec: str):
    """Issue 30 #11: `serve --dry-run --host $'a\\nb'` printed a shell line before refusing."""
    res = dflashctl("serve", "--engine", "vllm", "m", "--drafter", "d", "-k", "3", "--host",
                    spec, "--dry-run")  # fmt: skip
    assert_clean_error(res, 2, contains="is not [user@]host[:port]")
    assert res.stdout == ""
