"""`dflashctl.lock.json`: what `fetch` verified (repo, commit, patterns, every file's sha256),
read back and written (noun; never prints)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dflashctl.drafter.registry import LOCK_NAME
from dflashctl.errors import InputError


def read_lock(directory: Path) -> dict[str, Any] | None:
    """The lock in `directory`, or None when absent; a lock that is not ours is an InputError."""
    path = directory / LOCK_NAME
    if not path.is_file():
        return None
    from dflashctl.drafter.config import read_json_object

    lock = read_json_object(path, what="lock")
    files = lock.get("files")
    if (
        not isinstance(lock.get("repo"), str)
        or not isinstance(lock.get("revision"), str)
        or not isinstance(files, dict)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items())
    ):
        raise InputError(
            f"{path}: not a dflashctl lock (needs repo, revision and files {{name: sha256}})",
            "move it away, then run fetch again to write a new one",
        )
    for name in files:
        parts = name.split("/")
        if name.startswith("/") or "\\" in name or any(p in ("", ".", "..") for p in parts):
            raise InputError(
                f"{path}: file name {name!r} is not a plain path inside the directory",
                "move the lock away, then run fetch again to write a new one",
            )
    return lock
