"""What `dflashctl fetch` reports: every file with its check, the remote copy, the lock, and the
verify-config run on what arrived."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dflashctl.drafter.report import VerifyReport

# How a file's bytes were established:
#   pinned   - sha256 equal to the registry's pin
#   hub      - no registry pin; equal to the hash the Hub publishes (LFS sha256 / git blob id)
#   locked   - already in place; equal to the lock file (and to the pin, when there is one)
#   accepted - differs from the registry's pin at a revision the registry does not pin,
#              taken because of --allow-unpinned
#   recorded - nothing to compare with: the hash is recorded in the lock from now on
FILE_STATUSES = ("pinned", "hub", "locked", "accepted", "recorded")


@dataclass
class FetchedFile:
    name: str
    sha256: str
    size: int
    status: str
    pinned: str | None = None  # the registry's sha256 for it, if any

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "sha256": self.sha256,
            "size": self.size,
            "status": self.status,
            "pinned_sha256": self.pinned,
        }


@dataclass
class RemoteCopy:
    """The copy on the serving host, re-hashed there."""

    host: str
    directory: str
    uploaded: list[str]
    verified: dict[str, str]

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "directory": self.directory,
            "uploaded": self.uploaded,
            "verified": self.verified,
        }


@dataclass
class FetchReport:
    repo: str
    revision: str
    ref: str | None
    registry: str | None
    directory: Path
    lock_path: Path
    # "downloaded" | "updated" (some files were in place) | "verified" (no-op) | "embedded"
    # (ships with dflashctl: its files checked where they are)
    action: str
    files: list[FetchedFile]
    fetched_at: str
    patterns: list[str]
    downloaded: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    backups: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    verify: VerifyReport | None = None
    remote: RemoteCopy | None = None
    fetched_on: str | None = None  # the host that downloaded it (--remote-fetch), else here
    in_cache: bool = False  # `directory` is a snapshot of the shared Hugging Face cache

    @property
    def ok(self) -> bool:
        return self.verify is None or self.verify.ok

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "action": self.action,
            "repo": self.repo,
            "revision": self.revision,
            "ref": self.ref,
            "registry": self.registry,
            "directory": str(self.directory),
            "lock": str(self.lock_path),
            "fetched_at": self.fetched_at,
            "include": self.patterns,
            "files": [f.to_json() for f in self.files],
            "downloaded": self.downloaded,
            "removed": self.removed,
            "backups": self.backups,
            "notes": self.notes,
            "verify": self.verify.to_json() if self.verify is not None else None,
            "remote": self.remote.to_json() if self.remote is not None else None,
            "fetched_on": self.fetched_on,
            "in_cache": self.in_cache,
        }
