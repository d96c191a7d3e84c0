"""Files on this machine, written so that a crash leaves the old file or the new one, never half
of either, and read with bounds: the one atomic writer every written file goes through
(`write_atomic`: regular targets only, temp + fsync + rename), the one bounded reader
(`read_bounded`, `open_regular`: regular files only, never more than a cap), directory fsync,
backup names, and streaming hashes.

Frame: used by every layer; imports only dflashctl.errors; never prints.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import stat
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from dflashctl.errors import InputError, OutputError

CHUNK = 1 << 20


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words."""
    for test, word in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return word
    return "not a regular file"


def _why(e: OSError) -> str:
    if e.errno == errno.ENAMETOOLONG:
        return "the file name is too long for this file system"
    if e.errno == errno.ENOTDIR:
        return "a component of the path is not a directory"
    if e.errno == errno.ELOOP:
        return "too many levels of symbolic links"
    if e.errno == errno.ENOSPC:
        return "no space left on the device"
    if e.errno == errno.EFBIG:
        return "the file would exceed the size this process may write (a full disk or quota)"
    return e.strerror or str(e)


def check_target(path: Path) -> os.stat_result | None:
    """The stat of what `path` names now (following links), or None when nothing is there.

    Raises OutputError when it is not a regular file (a directory, a device such as /dev/null,
    a FIFO, a socket, or a symlink to one) or its directory cannot hold a file.
    """
    path = Path(path)
    if not path.name or str(path).endswith(os.sep):
        raise OutputError(f"cannot write {str(path)!r}: it names a directory, not a file")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise OutputError(f"cannot write {path}: {_why(e)}") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise OutputError(
            f"refusing to write {path}: it is {kind_of(st.st_mode)}, not a regular file",
            "give the path of a new or ordinary file",
        )
    parent = path.parent
    try:
        pst = os.stat(parent)
    except FileNotFoundError:
        raise OutputError(f"cannot write {path}: the directory {parent} does not exist") from None
    except OSError as e:
        raise OutputError(f"cannot write {path}: {_why(e)}") from None
    if not stat.S_ISDIR(pst.st_mode):
        raise OutputError(f"cannot write {path}: {parent} is not a directory")
    return st


def _umask() -> int:
    """The process umask, read without setting it (os.umask would race other threads)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def write_atomic(
    path: Path,
    data: bytes | Callable[[IO[bytes]], None],
    *,
    mode: int | None = None,
    owner: tuple[int, int] | None = None,
    before_replace: Callable[[], None] | None = None,
) -> Path:
    """The one writer: `data` (bytes, or a function writing into a binary file) into a temp file
    beside `path`, fsync, rename over `path`, fsync the directory: the old file or the new one,
    never half of either, and never a device, directory or FIFO replaced.

    `mode` (default: the old file's, else 0o666 less the umask, as open() would) and `owner`
    (best effort) are set on the temp file; `before_replace` runs just before the rename and
    may raise to abort it.
    Raises OutputError, with nothing changed, when the target is refused or the write fails.
    """
    path = Path(path)
    st = check_target(path)
    if mode is None and st is not None:
        mode = stat.S_IMODE(st.st_mode)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:40]}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise OutputError(f"cannot write {path}: {_why(e)}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            if callable(data):
                data(f)
            else:
                f.write(data)
            f.flush()
            if mode is None:
                mode = 0o666 & ~_umask()
            os.fchmod(f.fileno(), mode)
            if owner is not None:
                with contextlib.suppress(OSError):
                    os.fchown(f.fileno(), *owner)
            os.fsync(f.fileno())
        if before_replace is not None:
            before_replace()
        check_target(path)  # still not a device or directory (a race since the first look)
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise OutputError(f"cannot write {path}: {_why(e)}; nothing was changed") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)
    return path


def open_regular(path: Path, what: str = "file") -> IO[bytes]:
    """`path` opened for reading in binary, only when it is a regular file (following links).

    A FIFO is opened without blocking and refused, as are devices (/dev/zero), directories and
    sockets: an InputError of one line, never a hang. The caller closes the file.
    """
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise InputError(f"{what} not found: {path}") from None
    except IsADirectoryError:
        raise InputError(f"{path} is a directory, not a {what}") from None
    except OSError as e:
        raise InputError(f"cannot read {path}: {_why(e)}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"refusing to read {path}: it is {kind_of(st.st_mode)}, not a {what}")
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bounded(path: Path, cap: int, what: str = "file") -> bytes:
    """All of regular file `path`, refused (InputError) when it holds more than `cap` bytes."""
    with open_regular(path, what) as f:
        try:
            data = f.read(cap + 1)
        except OSError as e:
            raise InputError(f"cannot read {path}: {_why(e)}") from None
    if len(data) > cap:
        raise InputError(f"{path}: more than {cap} bytes, too large for a {what}")
    return data


class HashProgress(Protocol):
    def hashing(self, name: str, done: int, total: int) -> None: ...


@dataclass(frozen=True)
class Digest:
    sha256: str
    size: int
    git_sha1: str | None = None


def hash_file(
    path: Path, *, git: bool = False, progress: HashProgress | None = None, name: str | None = None
) -> Digest:
    """sha256 of `path` (and its git blob id when `git`), read once in 1 MiB chunks."""
    size = path.stat().st_size
    sha = hashlib.sha256()
    blob = hashlib.sha1(b"blob %d\x00" % size) if git else None
    done = 0
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            sha.update(chunk)
            if blob is not None:
                blob.update(chunk)
            done += len(chunk)
            if progress is not None:
                progress.hashing(name or path.name, done, size)
    return Digest(sha.hexdigest(), done, blob.hexdigest() if blob is not None else None)


def fsync_dir(directory: Path) -> None:
    """Make a rename in `directory` durable (best effort: some filesystems refuse)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_json_atomic(path: Path, data: Any, *, mode: int | None = None) -> Path:
    """`data` as indented JSON through `write_atomic`: all or nothing."""
    return write_atomic(path, (json.dumps(data, indent=2) + "\n").encode("utf-8"), mode=mode)


def backup_path(path: Path) -> Path:
    """A free `NAME.bak-YYYYmmdd-HHMMSS[-N]` beside `path`."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    candidate = path.with_name(f"{path.name}.bak-{stamp}")
    n = 1
    while candidate.exists() or candidate.is_symlink():
        candidate = path.with_name(f"{path.name}.bak-{stamp}-{n}")
        n += 1
    return candidate
