"""Has a drafter repo's branch moved off its pin? No downloads, no printing.

`check_upstream()` resolves the pinned commit (`--revision`, else the registry's pin, else the
lock in the fetch directory) and the branch's current commit (one `model_info` call). When they
are the same commit, that is the answer. Otherwise it lists both trees (`list_repo_tree`,
recursive) and compares the tracked files (`--include`, default: the files a server needs) by
the hash the Hub publishes for each: the LFS sha256 for weights, the git blob id for small
files. Nothing is downloaded: a re-uploaded weight shows up as a different LFS sha256 under the
same name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dflashctl.drafter.registry import HEX40, HEX64, LOCK_NAME
from dflashctl.errors import FetchError, UsageError

# A tracked file's fate between the pinned commit and the branch's commit.
CHANGES = ("changed", "added", "removed")


@dataclass(frozen=True)
class HubFile:
    """A file as the Hub lists it: the hash it publishes and what kind of hash that is."""

    name: str
    size: int
    hash: str
    kind: str  # "sha256" (LFS) | "git-sha1" (the git blob id)

    def to_json(self) -> dict[str, Any]:
        return {"size": self.size, "hash": self.hash, "kind": self.kind}


@dataclass
class FileChange:
    name: str
    change: str  # one of CHANGES
    pinned: HubFile | None
    upstream: HubFile | None
    registry_sha256: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "change": self.change,
            "pinned": self.pinned.to_json() if self.pinned is not None else None,
            "upstream": self.upstream.to_json() if self.upstream is not None else None,
            "registry_sha256": self.registry_sha256,
        }


@dataclass
class UpstreamReport:
    repo: str
    registry: str | None
    pinned: str  # the pinned commit
    pin_source: str  # "--revision" | "registry" | "lock"
    branch: str
    upstream: str  # the branch's current commit
    patterns: list[str]
    changes: list[FileChange] = field(default_factory=list)
    tracked: int = 0  # tracked files at the branch's commit (0 when not listed: same commit)
    notes: list[str] = field(default_factory=list)

    @property
    def moved(self) -> bool:
        return self.upstream != self.pinned

    @property
    def ok(self) -> bool:
        """No drift: the branch is the pinned commit, or no tracked file changed."""
        return not self.changes

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "repo": self.repo,
            "registry": self.registry,
            "pinned": self.pinned,
            "pin_source": self.pin_source,
            "branch": self.branch,
            "upstream": self.upstream,
            "moved": self.moved,
            "include": self.patterns,
            "tracked": self.tracked,
            "changes": [c.to_json() for c in self.changes],
            "notes": self.notes,
        }


def _pinned_commit(
    target_repo: str,
    entry_revision: str | None,
    revision: str | None,
    directory: Path | None,
) -> tuple[str, str] | None:
    """(requested pin, where it came from), or None when nothing pins the repo."""
    if revision is not None:
        if not revision.strip():
            raise UsageError("--revision is empty", "pass the 40-hex commit you pinned")
        return revision.strip(), "--revision"
    if entry_revision is not None:
        return entry_revision, "registry"
    if directory is not None and (directory / LOCK_NAME).is_file():
        from dflashctl.drafter.lock import read_lock

        lock = read_lock(directory)
        if lock is not None and lock.get("repo") == target_repo:
            return str(lock["revision"]), "lock"
    return None


def _tree(api: Any, repo: str, commit: str) -> dict[str, HubFile]:
    from huggingface_hub.hf_api import RepoFile

    files: dict[str, HubFile] = {}
    for item in api.list_repo_tree(repo, revision=commit, recursive=True):
        if not isinstance(item, RepoFile):
            continue
        lfs = item.lfs
        sha = getattr(lfs, "sha256", None) if lfs is not None else None
        if sha is None and isinstance(lfs, dict):
            sha = lfs.get("sha256")
        if isinstance(sha, str) and HEX64.fullmatch(sha.lower()):
            files[item.path] = HubFile(item.path, int(item.size), sha.lower(), "sha256")
        else:
            files[item.path] = HubFile(item.path, int(item.size), str(item.blob_id), "git-sha1")
    return files


def check_upstream(
    drafter: str,
    *,
    branch: str = "main",
    revision: str | None = None,
    include: Sequence[str] = (),
    directory: Path | None = None,
) -> UpstreamReport:
    """Compare the pinned commit of DRAFTER with `branch`'s current commit, file by file.

    Raises UsageError (nothing pins the repo, bad arguments) and FetchError (the Hub failed:
    unknown repo or branch, gated, unreachable). Drift is data: `report.ok` is False.
    """
    from dflashctl.commands.fetch.cache import lock_folder
    from dflashctl.commands.fetch.target import DEFAULT_PATTERNS, resolve_target
    from dflashctl.hub import HubEnv, hub_error, matches_any, quiet_hub

    branch = branch.strip()
    if not branch:
        raise UsageError("--branch is empty", "pass a branch name, e.g. main")
    # allow_unpinned: the pin is looked up below, with the lock as a last resort
    target = resolve_target(drafter, None, allow_unpinned=True)
    patterns = sorted({p.strip() for p in include if p.strip()} or set(DEFAULT_PATTERNS))
    folder = directory.expanduser().absolute() if directory else lock_folder(target.repo)
    found = _pinned_commit(target.repo, target.pinned_revision, revision, folder)
    if found is None:
        raise UsageError(
            f"nothing pins {target.repo}: not in the registry with a revision, no --revision, "
            f"and no {LOCK_NAME} for it in {folder}",
            "pass --revision <the 40-hex commit you use>, or --dir of a fetched copy",
        )
    requested, source = found
    env = HubEnv.from_environ()
    if env.offline:
        raise FetchError(
            "offline mode (HF_HUB_OFFLINE): checking upstream needs the Hub",
            "unset HF_HUB_OFFLINE, or run it where the Hub can be reached",
        )
    from huggingface_hub import HfApi

    api = HfApi(endpoint=env.endpoint)
    notes: list[str] = []
    with quiet_hub():
        try:
            upstream = api.model_info(target.repo, revision=branch, timeout=env.timeout).sha
        except Exception as e:
            raise hub_error(e, repo=target.repo, revision=branch, env=env) from e
        if not isinstance(upstream, str) or not HEX40.fullmatch(upstream):
            raise FetchError(
                f"{env.endpoint} returned no commit for {target.repo}@{branch}",
                "is HF_ENDPOINT a Hugging Face Hub (or a mirror of one)?",
            )
        pinned = requested
        if not HEX40.fullmatch(requested):  # a tag given as --revision: its commit
            try:
                info = api.model_info(target.repo, revision=requested, timeout=env.timeout)
                pinned = str(info.sha)
            except Exception as e:
                raise hub_error(e, repo=target.repo, revision=requested, env=env) from e
            notes.append(f"'{requested}' resolved to commit {pinned}")
        report = UpstreamReport(
            repo=target.repo,
            registry=target.entry.name if target.entry is not None else None,
            pinned=pinned,
            pin_source=source,
            branch=branch,
            upstream=upstream,
            patterns=patterns,
            notes=notes,
        )
        if not report.moved:
            return report
        try:
            before = _tree(api, target.repo, pinned)
        except Exception as e:
            err = hub_error(e, repo=target.repo, revision=pinned, env=env)
            if "not found in" in err.message:
                err = FetchError(
                    f"the pinned commit {pinned} is no longer in {target.repo} "
                    f"(history rewritten?); {branch} is at {upstream}",
                    "compare the files by hand, then pin a commit that exists",
                )
            raise err from e
        try:
            after = _tree(api, target.repo, upstream)
        except Exception as e:
            raise hub_error(e, repo=target.repo, revision=upstream, env=env) from e

    pins = {f.path: f.sha256 for f in target.entry.files if f.sha256} if target.entry else {}
    names = sorted(n for n in set(before) | set(after) if matches_any(n, patterns))
    report.tracked = sum(1 for n in after if matches_any(n, patterns))
    for name in names:
        old, new = before.get(name), after.get(name)
        pin = pins.get(name)
        if old is None:
            change = "added"
        elif new is None:
            change = "removed"
        elif (old.hash, old.size) != (new.hash, new.size):
            change = "changed"
        else:
            continue
        report.changes.append(FileChange(name, change, old, new, pin))
    for name, pin in sorted(pins.items()):
        old = before.get(name)
        if (
            old is not None
            and old.kind == "sha256"
            and old.hash != pin
            and matches_any(name, patterns)
        ):
            report.notes.append(
                f"{name} at the pinned commit has sha256 {old.hash[:12]}, not the registry's "
                f"{pin[:12]}: check HF_ENDPOINT or the registry entry"
            )
    return report
