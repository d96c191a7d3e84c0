"""SSH to one host with paramiko: ssh_config, known_hosts, timeouts, SFTP, tunnels.

`SSHHost.connect("[user@]host[:port]" or an ~/.ssh/config alias, SSHOptions(...))` honours
HostName, User, Port, IdentityFile, IdentitiesOnly, UserKnownHostsFile, StrictHostKeyChecking
(accept-new), ConnectTimeout, ProxyJump (a chain of hosts) and ProxyCommand; keys come from the
files named there, the default ~/.ssh keys and the agent. Host keys are checked against
known_hosts: an unknown key is refused unless the user accepts new keys, a changed key is always
refused. Commands run through `sh -c` with every argument quoted (`hosts.quote_argv`); secrets
travel on stdin; every connection, command and read has a timeout; a dropped connection is
re-opened once for operations that are safe to repeat.

Files are read with SFTP in ranges (`read_range`, `tail_bytes`, `iter_file`), never copied
whole. `http_get` reaches a port of the remote host through a direct-tcpip channel, so a server
bound to the remote's 127.0.0.1 is still reachable. `follow` streams a growing log (`tail -F`).

Everything that goes wrong is a one-line `RemoteError` (or `HostKeyError`) with a hint; nothing
here prints or exits. paramiko is imported only when this module is.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import logging
import os
import posixpath
import shlex
import socket
import stat as stat_mod
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import paramiko

from dflashctl.errors import HostKeyError, InputError, OutputError, RemoteError
from dflashctl.files import kind_of
from dflashctl.hosts.host import MAX_OUTPUT, CommandResult, FileStat, Host, HttpReply
from dflashctl.hosts.spec import parse_spec

# paramiko logs refused tunnels ("Secsh channel 7 open FAILED") and dropped connections itself;
# they are expected while waiting for a port and reach the user as RemoteErrors instead.
logging.getLogger("paramiko").addHandler(logging.NullHandler())

T = TypeVar("T")
ROTATED = "rotated"
TRUNCATED = "truncated"

# A connection problem that a fresh connection may cure (not an auth or host-key refusal).
_DROPPED = (EOFError, ConnectionError, socket.error, paramiko.SSHException)


@dataclass
class SSHOptions:
    """How to reach hosts. `ssh_config` defaults to $DFLASHCTL_SSH_CONFIG, else ~/.ssh/config."""

    ssh_config: str | None = None
    accept_new_host_key: bool = False
    timeout: float = 10.0

    def config_path(self) -> Path | None:
        from dflashctl.hosts.spec import COMMAND_SSH

        path = (
            self.ssh_config
            or COMMAND_SSH.get("ssh_config")
            or os.environ.get("DFLASHCTL_SSH_CONFIG")
        )
        if path:
            p = Path(path).expanduser()
            if not p.is_file():
                raise InputError(f"ssh config file not found: {p}")
            return p
        default = Path.home() / ".ssh" / "config"
        return default if default.is_file() else None

    def accept_new(self) -> bool:
        from dflashctl.hosts.spec import COMMAND_SSH

        return (
            self.accept_new_host_key
            or bool(COMMAND_SSH.get("accept_new_host_key"))
            or os.environ.get("DFLASHCTL_ACCEPT_NEW_HOST_KEY") == "1"
        )


@dataclass
class HostTarget:
    """One host resolved through ssh_config."""

    spec: str
    alias: str
    hostname: str
    port: int
    user: str
    identity_files: list[str] = field(default_factory=list)
    identities_only: bool = False
    known_hosts: list[str] = field(default_factory=list)
    strict: str = "yes"
    timeout: float = 10.0
    proxy_jump: str | None = None
    proxy_command: str | None = None

    @property
    def label(self) -> str:
        return self.spec

    @property
    def key_name(self) -> str:
        """How known_hosts names this host: `host` on port 22, `[host]:port` otherwise."""
        return self.hostname if self.port == 22 else f"[{self.hostname}]:{self.port}"


def check_hostname(host: str, where: str) -> None:
    """InputError for a DNS name no resolver takes: a label over 63 characters, a name over
    253 (IPv6 addresses, which hold ':', are left to the connection)."""
    if ":" in host:
        return
    labels = host.rstrip(".").split(".")
    longest = max((len(label) for label in labels), default=0)
    if len(host) > 253 or longest > 63:
        raise InputError(
            f"{where}: the host name {host[:40]}… is not a valid DNS name "
            f"({len(host)} characters, a label of {longest}; at most 253 and 63)",
            "use the host's real name, an IP address, or an ~/.ssh/config alias",
        )


def _ssh_config(path: Path | None) -> paramiko.SSHConfig:
    if path is None:
        return paramiko.SSHConfig()
    from dflashctl.files import read_bounded

    raw = read_bounded(path, 1 << 20, "ssh config")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise InputError(
            f"{path}:{line}: the ssh config is not UTF-8 text (byte 0x{raw[e.start]:02x})",
            "fix that line (ssh_config is plain text)",
        ) from None
    return paramiko.SSHConfig.from_text(text)


def resolve(spec: str, opts: SSHOptions) -> HostTarget:
    user, host, port = parse_spec(spec)
    cfg_path = opts.config_path()
    cfg = _ssh_config(Path(cfg_path) if cfg_path else None)
    try:
        d = cfg.lookup(host)
    except Exception as e:  # paramiko raises plain exceptions for bad Match/Include lines
        raise InputError(f"{cfg_path}: cannot read ssh config: {e}") from None
    try:
        cfg_port = int(d.get("port", 22))
        timeout = float(d.get("connecttimeout", opts.timeout))
    except ValueError:
        raise InputError(f"{cfg_path}: Port/ConnectTimeout of {host} is not a number") from None
    known = d.get("userknownhostsfile")
    known_files = (
        [os.path.expanduser(f) for f in shlex.split(known)]
        if known
        else [str(Path.home() / ".ssh" / "known_hosts")]
    )
    import getpass

    hostname = str(d.get("hostname", host))
    check_hostname(hostname, f"--host {spec!r}" if hostname == host else f"HostName of {host}")
    return HostTarget(
        spec=spec,
        alias=host,
        hostname=d.get("hostname", host),
        port=port or cfg_port,
        user=user or d.get("user") or getpass.getuser(),
        identity_files=[os.path.expanduser(f) for f in d.get("identityfile", [])],
        identities_only=str(d.get("identitiesonly", "no")).lower() == "yes",
        known_hosts=known_files,
        strict=str(d.get("stricthostkeychecking", "yes")).lower(),
        timeout=timeout,
        proxy_jump=d.get("proxyjump") if str(d.get("proxyjump", "none")) != "none" else None,
        proxy_command=d.get("proxycommand")
        if str(d.get("proxycommand", "none")) != "none"
        else None,
    )


def fingerprint(key: paramiko.PKey) -> str:
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


class _UnknownHostKey(Exception):
    def __init__(self, name: str, key: paramiko.PKey) -> None:
        super().__init__(name)
        self.name, self.key = name, key


class _Reject(paramiko.MissingHostKeyPolicy):
    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: Any) -> None:
        raise _UnknownHostKey(hostname, key)


class _AcceptNew(paramiko.MissingHostKeyPolicy):
    """Add an unknown key to the first known_hosts file (a changed key never gets here)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: Any) -> None:
        client.get_host_keys().add(hostname, key.get_name(), key)
        p = Path(self.path)
        p.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with p.open("a") as f:
            f.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")


def forget_key_command(t: HostTarget) -> str:
    """`ssh-keygen -R` for the file the key is in: `-f FILE` when the alias sets its own
    UserKnownHostsFile (plain `ssh-keygen -R` only edits ~/.ssh/known_hosts)."""
    cmd = f"ssh-keygen -R {shlex.quote(t.key_name)}"
    default = str(Path.home() / ".ssh" / "known_hosts")
    files = [f for f in t.known_hosts if f != default]
    if files:
        cmd += f" -f {shlex.quote(files[0])}"
    return cmd


def _connect_error(t: HostTarget, e: BaseException) -> RemoteError:
    where = f"{t.user}@{t.hostname}:{t.port}"
    if isinstance(e, _UnknownHostKey):
        return HostKeyError(
            f"{t.spec}: host key of {e.name} is not in known_hosts "
            f"({e.key.get_name()} {fingerprint(e.key)}): refusing to connect",
            "check the fingerprint with the host's owner, then re-run with "
            "--accept-new-host-key (or add it with ssh-keyscan)",
        )
    if isinstance(e, paramiko.BadHostKeyException):
        return HostKeyError(
            f"{t.spec}: host key of {t.key_name} has CHANGED (now {fingerprint(e.key)}, "
            f"known_hosts has {fingerprint(e.expected_key)}): refusing to connect",
            "if the host was reinstalled, remove the old key with "
            f"`{forget_key_command(t)}`; otherwise someone may be intercepting the connection",
        )
    if isinstance(e, paramiko.PasswordRequiredException):
        return RemoteError(
            f"{t.spec}: the private key is encrypted", "load it into ssh-agent (ssh-add KEY)"
        )
    if isinstance(e, paramiko.AuthenticationException):
        keys = ", ".join(t.identity_files) or "default keys and the agent"
        return RemoteError(
            f"{t.spec}: authentication failed as {where} (tried {keys})",
            "check User/IdentityFile in ~/.ssh/config and that the key is authorized there",
        )
    if isinstance(e, paramiko.ssh_exception.NoValidConnectionsError):
        return RemoteError(
            f"{t.spec}: cannot connect to {t.hostname}:{t.port} (connection refused)",
            "is sshd running there and the port right?",
        )
    if isinstance(e, socket.gaierror):
        return RemoteError(
            f"{t.spec}: unknown host name {t.hostname!r}",
            "use an ~/.ssh/config alias or an address (another config: --ssh-config FILE or "
            "DFLASHCTL_SSH_CONFIG=FILE)",
        )
    if isinstance(e, socket.timeout | TimeoutError):
        return RemoteError(
            f"{t.spec}: connection to {t.hostname}:{t.port} timed out after {t.timeout:g} s",
            "is the host up and reachable from here?",
        )
    msg = str(e).splitlines()[0] if str(e) else type(e).__name__
    return RemoteError(f"{t.spec}: SSH connection to {where} failed: {msg}")


class SSHHost(Host):
    """A remote host reached over SSH (see the module docstring)."""

    is_local = False

    def __init__(self, target: HostTarget, opts: SSHOptions) -> None:
        self.target = target
        self.opts = opts
        self.label = target.spec
        self.python = "python3"
        self._client: paramiko.SSHClient | None = None
        self._sftp: paramiko.SFTPClient | None = None
        self._jumps: list[SSHHost] = []
        self._home: str | None = None

    # ---- connection --------------------------------------------------------------------------

    @classmethod
    def connect(cls, spec: str, opts: SSHOptions | None = None) -> SSHHost:
        from dflashctl.hosts.spec import check_host_spec

        check_host_spec(spec)  # `--host 0.0.0.0` is a listen address, never a machine to reach
        opts = opts or SSHOptions()
        host = cls(resolve(spec, opts), opts)
        host._open()
        return host

    def _open(self) -> None:
        t = self.target
        client = paramiko.SSHClient()
        for i, path in enumerate(t.known_hosts):
            if i == 0:
                if Path(path).is_file():
                    client.load_host_keys(path)
            elif Path(path).is_file():
                client.load_system_host_keys(path)
        if Path("/etc/ssh/ssh_known_hosts").is_file():
            with contextlib.suppress(OSError):
                client.load_system_host_keys("/etc/ssh/ssh_known_hosts")
        accept = self.opts.accept_new() or t.strict in ("accept-new", "no", "off")
        client.set_missing_host_key_policy(_AcceptNew(t.known_hosts[0]) if accept else _Reject())
        sock: Any = None
        keys = [f for f in t.identity_files if Path(f).is_file()]
        try:
            if t.proxy_jump:
                sock = self._jump_channel()
            elif t.proxy_command:
                sock = paramiko.ProxyCommand(t.proxy_command)
            client.connect(
                t.hostname,
                port=t.port,
                username=t.user,
                key_filename=keys or None,  # type: ignore[arg-type]  # a list is accepted
                allow_agent=not t.identities_only,
                look_for_keys=not t.identities_only,
                timeout=t.timeout,
                banner_timeout=t.timeout,
                auth_timeout=t.timeout,
                channel_timeout=t.timeout,
                sock=sock,
            )
        except RemoteError:
            client.close()
            raise
        except (
            _UnknownHostKey,
            paramiko.SSHException,
            OSError,
            EOFError,
        ) as e:
            client.close()
            raise _connect_error(t, e) from None
        transport = client.get_transport()
        if transport is not None:
            transport.set_keepalive(15)
        self._client = client
        self._sftp = None

    def _jump_channel(self) -> Any:
        t = self.target
        assert t.proxy_jump
        hops = [h.strip() for h in t.proxy_jump.split(",") if h.strip()]
        last = hops[-1]
        jump_target = resolve(last, self.opts)
        # an earlier hop of the chain is the jump host's own jump
        jump_target.proxy_jump = ",".join(hops[:-1]) or None
        jump = SSHHost(jump_target, self.opts)
        jump._open()
        self._jumps.append(jump)
        assert jump._client is not None
        transport = jump._client.get_transport()
        assert transport is not None
        try:
            return transport.open_channel(
                "direct-tcpip", (t.hostname, t.port), ("127.0.0.1", 0), timeout=t.timeout
            )
        except (paramiko.SSHException, OSError) as e:
            raise RemoteError(
                f"{t.spec}: jump host {last} could not reach {t.hostname}:{t.port}: {e}"
            ) from None

    def _alive(self) -> bool:
        if self._client is None:
            return False
        tr = self._client.get_transport()
        return tr is not None and tr.is_active()

    def reconnect(self) -> None:
        self.close()
        self._open()

    def _retrying(self, fn: Callable[[], T], retry: bool = True) -> T:
        try:
            if not self._alive():
                self.reconnect()
            return fn()
        except RemoteError:
            raise
        except _DROPPED as e:
            if not retry or self._alive():
                raise RemoteError(
                    f"{self.label}: SSH operation failed: {e or type(e).__name__}"
                ) from None
            self.reconnect()  # the connection dropped: one fresh try
            try:
                return fn()
            except _DROPPED as e2:
                raise RemoteError(
                    f"{self.label}: connection lost and the retry failed: {e2 or type(e2)}",
                    "check the host and the network",
                ) from None

    def close(self) -> None:
        if self._sftp is not None:
            with contextlib.suppress(Exception):
                self._sftp.close()
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()
        for jump in self._jumps:
            jump.close()
        self._jumps = []
        self._client = self._sftp = None

    @property
    def transport(self) -> paramiko.Transport:
        if not self._alive():
            self.reconnect()
        assert self._client is not None
        tr = self._client.get_transport()
        assert tr is not None
        return tr

    @property
    def sftp(self) -> paramiko.SFTPClient:
        if self._sftp is None or not self._alive():
            if not self._alive():
                self.reconnect()
            assert self._client is not None
            self._sftp = self._client.open_sftp()
            channel = self._sftp.get_channel()
            if channel is not None:
                channel.settimeout(max(self.target.timeout, 30.0))
        return self._sftp

    # ---- commands ----------------------------------------------------------------------------

    def sh(
        self,
        script: str,
        *,
        timeout: float = 30.0,
        stdin: bytes | None = None,
        retry: bool = True,
    ) -> CommandResult:
        return self._retrying(lambda: self._exec(script, timeout, stdin), retry=retry)

    def _exec(self, script: str, timeout: float, stdin: bytes | None) -> CommandResult:
        chan = self.transport.open_session(timeout=self.target.timeout)
        try:
            chan.settimeout(0.2)
            chan.exec_command("sh -c " + shlex.quote(script))
            if stdin:
                chan.sendall(stdin)
            chan.shutdown_write()
            out, err = bytearray(), bytearray()
            deadline = time.monotonic() + timeout
            nap = 0.001
            while True:
                got = False
                while chan.recv_ready():
                    out += chan.recv(65536)
                    got = True
                while chan.recv_stderr_ready():
                    err += chan.recv_stderr(65536)
                    got = True
                del out[:-MAX_OUTPUT], err[:-MAX_OUTPUT]
                done = chan.exit_status_ready() or chan.closed
                if done and not chan.recv_ready() and not chan.recv_stderr_ready():
                    break
                if time.monotonic() > deadline:
                    first = script.strip().splitlines()[0][:80] if script.strip() else ""
                    raise RemoteError(
                        f"{self.label}: command timed out after {timeout:g} s: {first}",
                        "the host is slow or the command hangs",
                    )
                if got:
                    nap = 0.001
                else:
                    time.sleep(nap)
                    nap = min(nap * 2, 0.05)
            rc = chan.recv_exit_status()
            return CommandResult(rc, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))
        finally:
            chan.close()

    # ---- files -------------------------------------------------------------------------------

    def home(self) -> str:
        if self._home is None:
            self._home = self._retrying(lambda: self.sftp.normalize("."))
        return self._home

    def _file_error(self, path: str, e: OSError) -> InputError:
        if isinstance(e, FileNotFoundError) or getattr(e, "errno", None) == 2:
            return InputError(f"{self.label}:{path}: no such file")
        if isinstance(e, PermissionError) or getattr(e, "errno", None) == 13:
            return InputError(f"{self.label}:{path}: permission denied")
        return InputError(f"{self.label}:{path}: {e.strerror or e}")

    def stat(self, path: str) -> FileStat | None:
        apath = self.abspath(path)

        def go() -> FileStat | None:
            try:
                st = self.sftp.stat(apath)
            except FileNotFoundError:
                return None
            except PermissionError as e:
                raise self._file_error(path, e) from None
            if st.st_mode is not None and stat_mod.S_ISDIR(st.st_mode):
                raise InputError(f"{self.label}:{path} is a directory, not a file")
            return FileStat(
                int(st.st_size or 0), float(st.st_mtime or 0), (st.st_mode or 0o644) & 0o7777
            )

        return self._retrying(go)

    def is_dir(self, path: str) -> bool:
        apath = self.abspath(path)

        def go() -> bool:
            try:
                st = self.sftp.stat(apath)
            except FileNotFoundError:
                return False
            return st.st_mode is not None and stat_mod.S_ISDIR(st.st_mode)

        return self._retrying(go)

    def listdir(self, path: str) -> list[str]:
        apath = self.abspath(path)

        def go() -> list[str]:
            try:
                return sorted(self.sftp.listdir(apath))
            except OSError as e:
                raise self._file_error(path, e) from None

        return self._retrying(go)

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        apath = self.abspath(path)
        if length <= 0:
            return b""

        def go() -> bytes:
            try:
                with self.sftp.open(apath, "rb") as f:
                    # pipelined 32 KiB requests: one round trip for the whole range
                    step = 32768
                    chunks = [
                        (o, min(step, offset + length - o))
                        for o in range(offset, offset + length, step)
                    ]
                    return b"".join(f.readv(chunks))
            except OSError as e:
                raise self._file_error(path, e) from None

        return self._retrying(go)

    def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        apath = self.abspath(path)
        tmp = f"{apath}.{os.getpid()}.tmp"

        def go() -> None:
            try:
                st = self.sftp.stat(apath)  # follows a link, as the rename's target would
            except FileNotFoundError:
                st = None
            except OSError as e:
                raise self._file_error(path, e) from None
            if st is not None and st.st_mode is not None and not stat_mod.S_ISREG(st.st_mode):
                raise OutputError(
                    f"refusing to write {self.label}:{path}: it is "
                    f"{kind_of(st.st_mode)}, not a regular file"
                )
            try:
                with self.sftp.open(tmp, "wb") as f:
                    f.write(data)
                self.sftp.chmod(tmp, mode)
                self.sftp.posix_rename(tmp, apath)
            except OSError as e:
                with contextlib.suppress(OSError):
                    self.sftp.remove(tmp)
                raise self._file_error(path, e) from None

        self._retrying(go)

    def makedirs(self, path: str) -> None:
        res = self.sh(f"mkdir -p -- {shlex.quote(self.abspath(path))}", timeout=15.0)
        if res.rc != 0:
            raise InputError(f"{self.label}:{path}: cannot create directory: {res.tail()}")

    def upload(self, local: str | Path, path: str) -> None:
        self.makedirs(posixpath.dirname(self.abspath(path)) or "/")
        apath = self.abspath(path)
        self._retrying(lambda: self.sftp.put(str(local), apath))

    # ---- network -----------------------------------------------------------------------------

    def http_get(self, host: str, port: int, path: str, timeout: float = 5.0) -> HttpReply | None:
        addr = "127.0.0.1" if host in ("0.0.0.0", "", "::") else host

        def go() -> HttpReply | None:
            try:
                chan = self.transport.open_channel(
                    "direct-tcpip", (addr, int(port)), ("127.0.0.1", 0), timeout=timeout
                )
            except paramiko.ChannelException as e:
                if e.code == 1:  # administratively prohibited: no TCP forwarding there
                    return self._http_via_python(addr, port, path, timeout)
                return None  # connect failed: nothing listens
            try:
                chan.settimeout(timeout)
                chan.sendall(
                    f"GET {path} HTTP/1.0\r\nHost: {addr}:{port}\r\n"
                    "Connection: close\r\n\r\n".encode()
                )
                buf = bytearray()
                try:
                    while len(buf) < MAX_OUTPUT:
                        data = chan.recv(65536)
                        if not data:
                            break
                        buf += data
                except TimeoutError:
                    pass
                return _parse_http(bytes(buf))
            finally:
                chan.close()

        return self._retrying(go)

    def _http_via_python(self, addr: str, port: int, path: str, timeout: float) -> HttpReply | None:
        code = (
            "import sys,urllib.request,urllib.error\n"
            "try:\n"
            f" r=urllib.request.urlopen({f'http://{addr}:{port}{path}'!r},timeout={timeout})\n"
            " sys.stdout.write(str(r.status)+'\\n'+r.read().decode('utf-8','replace'))\n"
            "except urllib.error.HTTPError as e:\n"
            " sys.stdout.write(str(e.code)+'\\n')\n"
            "except Exception:\n"
            " sys.exit(3)\n"
        )
        res = self.sh(f"{shlex.quote(self.python)} -c {shlex.quote(code)}", timeout=timeout + 10)
        if res.rc != 0:
            return None
        status, _, body = res.stdout.partition("\n")
        try:
            return HttpReply(int(status), body.encode())
        except ValueError:
            return HttpReply(0, b"")

    # ---- following a growing file ------------------------------------------------------------

    def follow(
        self, path: str, *, poll: float = 0.2, should_stop: Callable[[], bool] | None = None
    ) -> Iterator[bytes | str | None]:
        """New bytes of a remote log as they are written (`tail -F`): None when idle, ROTATED or
        TRUNCATED markers, like `metrics.follow.tail_file`. Reconnects (and resumes at the byte
        it had reached) if the connection drops."""
        apath = self.abspath(path)
        pos = 0
        while not (should_stop and should_stop()):
            chan = self.transport.open_session(timeout=self.target.timeout)
            try:
                chan.settimeout(poll)
                chan.exec_command(f"exec tail -c +{pos + 1} -F -- {shlex.quote(apath)}")
                chan.shutdown_write()
                err = b""
                while not (should_stop and should_stop()):
                    if chan.recv_stderr_ready():
                        err += chan.recv_stderr(65536)
                        lines = err.split(b"\n")
                        err = lines.pop()
                        for line in lines:
                            if b"has been replaced" in line or b"has appeared" in line:
                                pos = 0
                                yield ROTATED
                            elif b"truncated" in line:
                                pos = 0
                                yield TRUNCATED
                        continue
                    try:
                        data = chan.recv(1 << 20)
                    except TimeoutError:
                        yield None
                        continue
                    if not data:
                        break  # tail ended: the connection dropped or tail died
                    pos += len(data)
                    yield data
            except _DROPPED:
                pass
            finally:
                chan.close()
            if should_stop and should_stop():
                return
            time.sleep(poll)
            with contextlib.suppress(RemoteError):
                self.reconnect()


def _parse_http(raw: bytes) -> HttpReply:
    head, _, body = raw.partition(b"\r\n\r\n")
    first = head.split(b"\r\n", 1)[0].split()
    try:
        return HttpReply(int(first[1]), body)
    except (IndexError, ValueError):
        return HttpReply(0, b"")
