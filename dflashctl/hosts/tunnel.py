"""A port on this machine forwarded to an address on an SSH host (like `ssh -L`).

`diagnose --host` launches the bundled engine bound to 127.0.0.1 on the host, so nothing listens
on the host's network; streamed chat requests and `/metrics` reach it through this forward. Each
accepted local connection gets its own paramiko `direct-tcpip` channel over the host's existing
SSH transport (`dflashctl.hosts.ssh.SSHHost.transport`); two threads per connection would do, one
`select` loop per connection does it with less. No printing; errors close the connection.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from collections.abc import Callable
from typing import Any

CHUNK = 65536


class Tunnel:
    """`with Tunnel(lambda: host.transport, "127.0.0.1", port) as local_port:` forwards
    127.0.0.1:local_port here to 127.0.0.1:port as seen from the host."""

    def __init__(
        self, transport: Callable[[], Any], remote_addr: str, remote_port: int, *, timeout=10.0
    ) -> None:
        self.transport = transport
        self.remote = (remote_addr, int(remote_port))
        self.timeout = timeout
        self.stop = threading.Event()
        self.server: socket.socket | None = None
        self.threads: list[threading.Thread] = []
        self.port = 0

    def __enter__(self) -> int:
        srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("127.0.0.1", 0))
        srv.listen(16)
        srv.settimeout(0.25)
        self.server, self.port = srv, int(srv.getsockname()[1])
        t = threading.Thread(target=self._accept, name=f"tunnel-{self.port}", daemon=True)
        t.start()
        self.threads.append(t)
        return self.port

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.stop.set()
        if self.server is not None:
            with contextlib.suppress(OSError):
                self.server.close()
        for t in list(self.threads):
            t.join(timeout=2.0)

    def _accept(self) -> None:
        assert self.server is not None
        while not self.stop.is_set():
            try:
                conn, peer = self.server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            t = threading.Thread(target=self._pipe, args=(conn, peer), daemon=True)
            t.start()
            self.threads = [x for x in self.threads if x.is_alive()] + [t]

    def _pipe(self, conn: socket.socket, peer: tuple[str, int]) -> None:
        try:
            chan = self.transport().open_channel(
                "direct-tcpip", self.remote, peer, timeout=self.timeout
            )
        except Exception:  # nothing listens there, or the transport is gone: refuse this one
            conn.close()
            return
        try:
            while not self.stop.is_set():
                ready, _, _ = select.select([conn, chan], [], [], 0.25)
                if conn in ready:
                    data = conn.recv(CHUNK)
                    if not data:
                        break
                    chan.sendall(data)
                if chan in ready:
                    data = chan.recv(CHUNK)
                    if not data:
                        break
                    conn.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(Exception):
                chan.close()
            with contextlib.suppress(OSError):
                conn.close()
