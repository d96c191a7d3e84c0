"""Files on this machine, written so that a crash leaves the old file or the new one, never half
of either: atomic JSON writes, directory fsync, backup names, and streaming hashes.

Frame: used by every layer; imports nothing from dflashctl; never prints.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

CHUNK = 1 << 20


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


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Temp file beside `path`, fsync, rename, fsync the directory: all or nothing."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(data, indent=2) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def backup_path(path: Path) -> Path:
    """A free `NAME.bak-YYYYmmdd-HHMMSS[-N]` beside `path`."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    candidate = path.with_name(f"{path.name}.bak-{stamp}")
    n = 1
    while candidate.exists() or candidate.is_symlink():
        candidate = path.with_name(f"{path.name}.bak-{stamp}-{n}")
        n += 1
    return candidate
