"""The SSH layer against a real OpenSSH sshd on 127.0.0.1 (support/sshd.py).

Host keys (unknown, accepted, changed), authentication, quoting of hostile arguments, SFTP ranged
reads and atomic writes, detached processes and their identity, ProxyJump, a dropped connection,
and following a remote log through rotation.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.sshd import Sshd, keygen, sshd_server
from support.startup import free_port

from dflashctl.errors import HostKeyError, InputError, RemoteError
from dflashctl.hosts.spec import parse_spec
from dflashctl.hosts.ssh import ROTATED, TRUNCATED, SSHHost, SSHOptions, resolve

pytestmark = pytest.mark.ssh


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    yield from sshd_server(tmp_path_factory)


@pytest.fixture
def opts(sshd, monkeypatch) -> SSHOptions:
    monkeypatch.setenv("DFLASHCTL_SSH_CONFIG", str(sshd.ssh_config))
    return SSHOptions()


@pytest.fixture
def host(opts):
    with SSHHost.connect("testhost", opts) as h:
        yield h


@pytest.mark.parametrize(
    ("spec", "port"),
    [("h:0", None), ("h:1", 1), ("h:65535", 65535), ("h:65536", None), ("u@[::1]:65536", None),
     ("u@h:99999", None)],
)  # fmt: skip
def test_the_ssh_port_edge(spec: str, port: int | None) -> None:
    """A TCP port is 1 to 65535: both edges and one past each (issue 31)."""
    from dflashctl.errors import InputError

    if port is None:
        with pytest.raises(InputError, match="out of range"):
            parse_spec(spec)
    else:
        assert parse_spec(spec)[2] == port


def test_parse_spec():
    assert parse_spec("alice@10.0.0.5:2222") == ("alice", "10.0.0.5", 2222)
    assert parse_spec("gpu1") == (None, "gpu1", None)
    assert parse_spec("bob@[::1]:22") == ("bob", "::1", 22)
    assert parse_spec("Xeon-1X") == (None, "Xeon-1X", None)  # only the brackets come off
    with pytest.raises(InputError):
        parse_spec("a b")
    with pytest.raises(InputError):
        parse_spec("host:99999")


def test_a_malformed_spec_says_what_a_spec_is() -> None:
    with pytest.raises(InputError) as e:
        parse_spec("a b")
    assert e.value.message == "--host 'a b' is not [user@]host[:port] or an ssh_config alias"
    assert e.value.hint == "e.g. --host gpu1, --host alice@10.0.0.5, --host alice@10.0.0.5:2222"
    with pytest.raises(InputError) as e:
        parse_spec("h:65536")
    assert (e.value.message, e.value.hint) == ("--host 'h:65536': port 65536 is out of range", None)


# what `--host` holds -> the address to bind (listen_address), or None for a machine over SSH
@pytest.mark.parametrize(
    ("spec", "bind"),
    [(None, None), ("0.0.0.0", "0.0.0.0"), (" :: ", "::"), ("[::]", "::"), ("*", "*"),
     ("127.0.0.1", "127.0.0.1"), ("localhost", "localhost"), ("[::1]", "::1"), ("::1", "::1"),
     ("gpu1", None), ("alice@127.0.0.1", None), ("127.0.0.1:2222", None)],
)  # fmt: skip
def test_listen_address(spec: str | None, bind: str | None) -> None:
    from dflashctl.hosts.spec import listen_address

    assert listen_address(spec) == bind


# `--host` refused before anything connects: the exact message and hint (None: accepted)
@pytest.mark.parametrize(
    ("spec", "what"),
    [(None, None), ("gpu1", None), ("alice@127.0.0.1", None), ("127.0.0.1:2222", None),
     ("0.0.0.0", "a listen address"), ("[::]", "a listen address"),
     (" 127.0.0.1 ", "this machine's loopback"), ("localhost", "this machine's loopback")],
)  # fmt: skip
def test_check_host_spec(spec: str | None, what: str | None) -> None:
    from dflashctl.errors import UsageError
    from dflashctl.hosts.spec import check_host_spec

    if what is None:
        assert check_host_spec(spec) is None
        return
    bare = spec.strip() if spec else spec
    with pytest.raises(UsageError) as e:
        check_host_spec(spec)
    assert e.value.message == (
        f"--host {bare} is {what}: dflashctl's --host is the machine to run on over SSH"
    )
    assert e.value.hint == (
        f"leave --host out to run here; the server's listen address is serve --bind {bare}"
    )


def test_check_host_spec_refuses_what_parse_spec_refuses() -> None:
    from dflashctl.hosts.spec import check_host_spec

    with pytest.raises(InputError, match="is not"):
        check_host_spec("a b")


@pytest.mark.parametrize(
    ("spec", "argv", "config", "line"),
    [("gpu1", ["ls"], None, "ssh gpu1 ls"),
     ("alice@h:2222", ["echo", "a b"], None, "ssh -p 2222 alice@h 'echo '\"'\"'a b'\"'\"''"),
     ("h", ["cat", "~/"], "/c f", "ssh -F '/c f' h 'cat ~/'"),
     ("h", ["cat", "~/x"], None, "ssh h 'cat ~/x'"),
     ("h", ["cat", "~/x y"], None, "ssh h 'cat ~/'\"'\"'x y'\"'\"''"),
     ("[::1]:22", ["ls"], None, "ssh -p 22 ::1 ls")],
)  # fmt: skip
def test_ssh_line(spec: str, argv: list[str], config: str | None, line: str) -> None:
    from dflashctl.hosts.spec import ssh_line

    assert ssh_line(spec, argv, config) == line


def test_set_command_ssh_defaults() -> None:
    from dflashctl.hosts.spec import COMMAND_SSH, set_command_ssh

    set_command_ssh()
    assert COMMAND_SSH == {"ssh_config": None, "accept_new_host_key": False}
    set_command_ssh("cfg", True)
    assert COMMAND_SSH == {"ssh_config": "cfg", "accept_new_host_key": True}


def test_ssh_config_alias_is_honoured(sshd, opts):
    t = resolve("testhost", opts)
    assert (t.hostname, t.port, t.user) == ("127.0.0.1", sshd.port, sshd.user)
    assert t.identity_files == [str(sshd.client_key)] and t.identities_only
    assert t.known_hosts == [str(sshd.known_hosts)]
    # an explicit user@host:port wins over the alias's own values
    assert resolve(f"nobody@testhost:{sshd.port + 1}", opts).user == "nobody"


def test_hostile_arguments_arrive_intact_and_run_nothing(host, tmp_path):
    pwned = tmp_path / "PWNED"
    args = ["a b", "it's", '"dq"', f";touch {pwned}", f"$(touch {pwned})", "`id`", "\\n", "*"]
    res = host.run(["printf", "%s\\n", *args])
    assert res.stdout.splitlines() == args
    assert not pwned.exists()


def test_command_timeout(host):
    t0 = time.monotonic()
    with pytest.raises(RemoteError, match=r"timed out after 0\.5 s"):
        host.sh("sleep 5", timeout=0.5)
    assert time.monotonic() - t0 < 3


def test_unknown_host_key_is_refused_then_accepted(sshd, tmp_path, monkeypatch):
    known = tmp_path / "known_hosts"  # empty: the host is unknown
    cfg = tmp_path / "ssh_config"
    cfg.write_text(sshd.ssh_config.read_text().replace(str(sshd.known_hosts), str(known)))
    monkeypatch.setenv("DFLASHCTL_SSH_CONFIG", str(cfg))
    with pytest.raises(HostKeyError) as info:
        SSHHost.connect("testhost", SSHOptions())
    assert "not in known_hosts" in info.value.message
    assert "ssh-ed25519 SHA256:" in info.value.message
    assert "--accept-new-host-key" in (info.value.hint or "")
    assert not known.exists()
    with SSHHost.connect("testhost", SSHOptions(accept_new_host_key=True)) as h:
        assert h.sh("echo ok").stdout.strip() == "ok"
    assert f"[127.0.0.1]:{sshd.port} ssh-ed25519 " in known.read_text()
    with SSHHost.connect("testhost", SSHOptions()) as h:  # now known: no flag needed
        assert h.sh("echo ok").rc == 0


def test_changed_host_key_is_refused_even_when_accepting_new(sshd, tmp_path, monkeypatch):
    keygen(tmp_path / "other")
    kind, b64 = (tmp_path / "other.pub").read_text().split()[:2]
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{sshd.port} {kind} {b64}\n")
    cfg = tmp_path / "ssh_config"
    cfg.write_text(sshd.ssh_config.read_text().replace(str(sshd.known_hosts), str(known)))
    monkeypatch.setenv("DFLASHCTL_SSH_CONFIG", str(cfg))
    with pytest.raises(HostKeyError, match="has CHANGED") as info:
        SSHHost.connect("testhost", SSHOptions(accept_new_host_key=True))
    # the alias names its own UserKnownHostsFile: plain `ssh-keygen -R` would not touch it
    assert f"ssh-keygen -R '[127.0.0.1]:{sshd.port}' -f {known}" in (info.value.hint or "")


def test_wrong_key_and_closed_port(sshd, tmp_path, monkeypatch):
    keygen(tmp_path / "stranger")
    cfg = tmp_path / "ssh_config"
    cfg.write_text(
        sshd.ssh_config.read_text().replace(str(sshd.client_key), str(tmp_path / "stranger"))
    )
    monkeypatch.setenv("DFLASHCTL_SSH_CONFIG", str(cfg))
    with pytest.raises(RemoteError, match="authentication failed"):
        SSHHost.connect("testhost", SSHOptions())
    with pytest.raises(RemoteError, match="connection refused"):
        SSHHost.connect(f"127.0.0.1:{free_port()}", SSHOptions())


def test_sftp_ranges_and_atomic_writes(host, tmp_path):
    f = tmp_path / "data.log"
    f.write_bytes(b"".join(b"line %06d\n" % i for i in range(20000)))  # 240 kB
    size = f.stat().st_size
    st = host.stat(str(f))
    assert st is not None and st.size == size
    assert host.read_range(str(f), 12, 12) == b"line 000001\n"
    assert host.tail_bytes(str(f), 12) == b"line 019999\n"
    assert b"".join(host.iter_file(str(f), chunk=65536)) == f.read_bytes()
    assert host.stat(str(tmp_path / "nope")) is None
    with pytest.raises(InputError, match="no such file"):
        host.read_file(str(tmp_path / "nope"))
    target = tmp_path / "sub" / "out.json"
    host.makedirs(str(target.parent))
    host.write_file(str(target), b'{"a": 1}\n', 0o600)
    assert target.read_bytes() == b'{"a": 1}\n' and (target.stat().st_mode & 0o777) == 0o600
    assert host.listdir(str(target.parent)) == ["out.json"]
    assert host.is_dir(str(tmp_path)) and not host.is_dir(str(target))


def test_detached_process_identity_and_group_kill(host, tmp_path):
    pid = host.start_detached(
        ["sh", "-c", "echo started; sleep 60 & sleep 60"],
        cwd=str(tmp_path),
        log=str(tmp_path / "bg.log"),
        env={"GREETING": "hi there"},
    )
    info = host.proc(pid)
    assert info is not None and info.pgid == pid and info.sid == pid  # its own session
    assert "sleep 60" in info.cmdline
    assert not host.signal_group(pid, "TERM", starttime=info.starttime + 1)  # not ours
    assert host.proc(pid) is not None
    assert host.signal_group(pid, "TERM", starttime=info.starttime)
    deadline = time.monotonic() + 5
    while host.proc(pid) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert host.proc(pid) is None
    assert (tmp_path / "bg.log").read_text().startswith("started")


def test_secrets_travel_on_stdin(host, tmp_path):
    pid = host.start_detached(
        ["sh", "-c", 'echo "token=$HF_TOKEN"'],
        cwd=str(tmp_path),
        log=str(tmp_path / "s.log"),
        secret_env={"HF_TOKEN": "hf_s3cret value"},
    )
    deadline = time.monotonic() + 5
    while "token=" not in (tmp_path / "s.log").read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (tmp_path / "s.log").read_text().strip() == "token=hf_s3cret value"
    assert host.proc(pid) is None


def test_port_holder_and_http_through_the_connection(host):
    import http.server
    import threading

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        holder = host.port_holder(port)
        assert holder is not None and holder.pid == os.getpid()
        reply = host.http_get("0.0.0.0", port, "/")
        assert reply is not None and reply.status == 200
    finally:
        server.shutdown()
        server.server_close()
    assert host.port_holder(port) is None
    assert host.http_get("127.0.0.1", port, "/") is None  # nothing listens: refused


def test_proxy_jump(sshd, opts):
    with SSHHost.connect("jumped", opts) as h:
        assert h.sh("echo via-jump").stdout.strip() == "via-jump"
        assert len(h._jumps) == 1


def test_a_dropped_connection_is_reopened(sshd, host):
    assert host.sh("echo one").stdout.strip() == "one"
    for pid in sshd.children():  # drop every open connection on the server side
        os.kill(pid, signal.SIGKILL)
    time.sleep(0.3)
    assert host.sh("echo two").stdout.strip() == "two"  # reconnected once, transparently
    assert host.proc(os.getpid()) is not None


def test_follow_a_remote_log_through_rotation(host, tmp_path):
    log = tmp_path / "f.log"
    log.write_text("old 1\n")
    got: list[object] = []
    deadline = time.monotonic() + 30

    def text() -> str:
        return "".join(x.decode() for x in got if isinstance(x, bytes))

    def rotate() -> None:
        log.rename(tmp_path / "f.log.1")
        log.write_text("new 1\n")

    # each step once the follower has shown what came before it
    steps = [
        ("old 1\n", lambda: log.open("a").write("old 2\n")),
        ("old 2\n", rotate),
        ("new 1\n", lambda: log.open("a").write("new 2\n")),
    ]

    # tail's "has been replaced" notice comes on stderr, which sshd may deliver after the new
    # file's first bytes on stdout: follow until both the text and the marker are in
    def stop() -> bool:
        done = text().endswith("new 2\n") and (ROTATED in got or TRUNCATED in got)
        return done or time.monotonic() > deadline

    for item in host.follow(str(log), poll=0.1, should_stop=stop):
        got.append(item)
        if steps and text().endswith(steps[0][0]):
            steps.pop(0)[1]()
    assert text() == "old 1\nold 2\nnew 1\nnew 2\n"
    assert ROTATED in got or TRUNCATED in got


@pytest.mark.parametrize(
    "command",
    [
        ["metrics", "metrics/vllm_034_healthy.log"],
        ["verify-config", "qwen3.6-27b-dflash-stale"],
        ["smoke", "http://127.0.0.1:9", "--log", "metrics/vllm_034_healthy.log"],
    ],
)
def test_every_host_command_takes_the_ssh_options(sshd, tmp_path, monkeypatch, capsys, command):
    """The hint for an unknown key names --accept-new-host-key: every --host command has it, and
    --ssh-config, with the same meaning as serve's."""
    from pathlib import Path

    from support.cli import run_main

    data = Path(__file__).parent / "data"
    command = [command[0], *(str(data / a) if (data / a).exists() else a for a in command[1:])]
    cfg = tmp_path / "ssh_config"
    cfg.write_text(sshd.ssh_config.read_text().replace(str(sshd.known_hosts), str(tmp_path / "kh")))
    monkeypatch.delenv("DFLASHCTL_SSH_CONFIG", raising=False)
    args = [*command, "--host", "testhost", "--ssh-config", str(cfg)]
    code, _, err = run_main(monkeypatch, capsys, *args)
    assert code == 2 and "is not in known_hosts" in err and "--accept-new-host-key" in err
    code, _, err = run_main(monkeypatch, capsys, *args, "--accept-new-host-key")
    assert "known_hosts" not in err, err
    if command[0] == "metrics":
        assert code == 0, err  # the healthy log, read over SSH
    assert (tmp_path / "kh").read_text().startswith(f"[127.0.0.1]:{sshd.port} ")


class TestPastedLines:
    """The `ssh ...` lines a dry run prints, pasted into a shell as a user does: OpenSSH's own
    client against the real sshd, each argument arriving as the engine must see it."""

    @pytest.fixture
    def client_config(self, sshd: Sshd, tmp_path) -> str:
        path = tmp_path / "ssh_config"
        path.write_text(
            f"Host *\n  IdentityFile {sshd.client_key}\n  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {sshd.known_hosts}\n  BatchMode yes\n  ConnectTimeout 5\n"
        )
        return str(path)

    @pytest.fixture
    def echo_vllm(self, tmp_path) -> Path:
        """A `vllm` beside a `python` in a venv-like bin/: prints the argv it got, as JSON."""
        import sys

        bin_dir = tmp_path / "venv" / "bin"
        bin_dir.mkdir(parents=True)
        (bin_dir / "python").symlink_to(sys.executable)
        vllm = bin_dir / "vllm"
        vllm.write_text(
            f"#!{sys.executable}\nimport json, sys\nprint('ARGV ' + json.dumps(sys.argv[1:]))\n"
        )
        vllm.chmod(0o755)
        return bin_dir / "python"

    def test_the_engine_line_of_serve_dry_run(
        self, sshd: Sshd, client_config, echo_vllm, monkeypatch, capsys
    ):
        import json
        import subprocess

        from support.cli import run_json, run_main

        spec = f"{sshd.user}@127.0.0.1:{sshd.port}"
        args = ["serve", "--engine", "vllm", "--model", "Qwen/Qwen3-8B", "--drafter",
                "/models/My Drafter", "--host", spec, "--python", str(echo_vllm),
                "--ssh-config", client_config, "-k", "15", "--dry-run", "--",
                "--max-model-len", "8192"]  # fmt: skip
        code, data, err = run_json(monkeypatch, capsys, *args)
        assert code == 0, err
        cmd = data["cmd"]
        assert data["launch_line"].startswith("ssh -F ")
        code, out, err = run_main(monkeypatch, capsys, *args)
        assert code == 0, err
        line = out.strip().splitlines()[-1]
        assert line.startswith(f"ssh -F {client_config} -p {sshd.port} {sshd.user}@127.0.0.1 ")
        done = subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        got = json.loads(done.stdout.split("ARGV ", 1)[1])
        assert got == cmd[1:]  # the JSON's quotes, the space in the path: all intact
        spec_json = json.loads(got[got.index("--speculative-config") + 1])
        assert spec_json["method"] == "dflash" and spec_json["model"] == "/models/My Drafter"

    def test_a_tilde_expands_on_the_remote_side(self, sshd: Sshd, client_config):
        import subprocess

        from dflashctl.hosts.spec import ssh_line

        line = ssh_line(f"{sshd.user}@127.0.0.1:{sshd.port}", ["echo", "~/x y", "$HOME"],
                        client_config)  # fmt: skip
        done = subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == f"{os.path.expanduser('~')}/x y $HOME"
