"""A real OpenSSH sshd on 127.0.0.1 for the SSH tests (recipe: shared testing-recipes.md §1).

`Sshd.start(directory)` generates a host key and a client key, writes sshd_config, starts
`/usr/sbin/sshd -D -e` on a free port and waits for its banner. `ssh_config` is a test-local
~/.ssh/config with the alias `testhost` (HostName, Port, User, IdentityFile, IdentitiesOnly,
UserKnownHostsFile) and `jumped` (the same host reached through `ProxyJump testhost`). The test
user is the current user. A test module makes its fixture with `yield from sshd_server(...)`.
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from .startup import free_port

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
        check=True,
        capture_output=True,
    )


@dataclass
class Sshd:
    directory: Path
    port: int
    proc: subprocess.Popen[bytes]
    client_key: Path
    known_hosts: Path
    ssh_config: Path
    user: str

    @classmethod
    def start(
        cls,
        d: Path,
        *,
        listen: str = "127.0.0.1",
        port: int | None = None,
        wrap: tuple[str, ...] = (),
    ) -> Sshd:
        """`wrap`: a command prefix, e.g. ("ip", "netns", "exec", NS) for a namespace host."""
        d.mkdir(parents=True, exist_ok=True)
        keygen(d / "host_key")
        if not (d / "client_key").exists():
            keygen(d / "client_key")
        shutil.copy(d / "client_key.pub", d / "authorized_keys")
        port = port or free_port()
        (d / "sshd_config").write_text(
            f"ListenAddress {listen}\nPort {port}\nHostKey {d}/host_key\nPidFile {d}/sshd.pid\n"
            f"AuthorizedKeysFile {d}/authorized_keys\nPubkeyAuthentication yes\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
            "StrictModes no\nPermitRootLogin prohibit-password\nAllowTcpForwarding yes\n"
            "Subsystem sftp internal-sftp\nLogLevel VERBOSE\n"
        )
        if os.geteuid() == 0:
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        log = (d / "sshd.log").open("ab")
        proc = subprocess.Popen(
            [*wrap, SSHD, "-D", "-e", "-f", str(d / "sshd_config")], stdout=log, stderr=log
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection((listen, port), timeout=1) as s:
                    if s.recv(64).startswith(b"SSH-2.0-"):
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"sshd did not start: {(d / 'sshd.log').read_text()[-500:]}")
            time.sleep(0.02)
        key = (d / "host_key.pub").read_text().split()
        name = listen if port == 22 else f"[{listen}]:{port}"
        (d / "known_hosts").write_text(f"{name} {key[0]} {key[1]}\n")
        user = getpass.getuser()
        (d / "ssh_config").write_text(
            f"Host testhost\n  HostName {listen}\n  Port {port}\n  User {user}\n"
            f"  IdentityFile {d}/client_key\n  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {d}/known_hosts\n  ConnectTimeout 5\n"
            f"Host jumped\n  HostName {listen}\n  Port {port}\n  User {user}\n"
            f"  IdentityFile {d}/client_key\n  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {d}/known_hosts\n  ProxyJump testhost\n"
        )
        return cls(d, port, proc, d / "client_key", d / "known_hosts", d / "ssh_config", user)

    def children(self) -> list[int]:
        """Pids of the per-connection sshd processes (to drop connections on purpose)."""
        out = subprocess.run(
            ["sh", "-c", f"cat /proc/[0-9]*/stat 2>/dev/null | awk '$4 == {self.proc.pid}'"],
            capture_output=True,
            text=True,
        ).stdout
        return [int(line.split()[0]) for line in out.splitlines() if line.strip()]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def sshd_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    """The body of a test module's session `sshd` fixture: one server, stopped afterwards."""
    if not Path(SSHD).exists():
        pytest.skip("no OpenSSH sshd here (./bin/setup-system installs openssh-server)")
    server = Sshd.start(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()
