"""What fetch resolves and checks wherever the files land (a directory, the shared cache): the
revision asked for as a commit (trust on first use included), each file's bytes against the
registry's pin or the hash the Hub published, and the lock that records them."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path
from typing import Any

from dflashctl import __version__
from dflashctl.commands.fetch.report import FetchedFile
from dflashctl.commands.fetch.target import Mismatch, Target
from dflashctl.drafter.registry import HEX40, HEX64, FileSpec
from dflashctl.errors import FetchError
from dflashctl.files import hash_file
from dflashctl.hub import (
    FetchProgress,
    HubEnv,
    cache_folder,
    hub_error,
    matches_any,
    published_hashes,
    quiet_hub,
    short_sha,
)


def _now() -> str:
    return (
        dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    )


def resolve_commit(target: Target, env: HubEnv, lock: dict[str, Any] | None) -> tuple[str, str]:
    """(commit, how): a 40-hex revision as is; a branch or tag through the Hub (one call), or
    offline through the cache's refs/ or the lock that recorded it."""
    rev = target.requested
    if HEX40.fullmatch(rev):
        return rev, "pinned"
    if env.offline:
        ref_file = cache_folder(env, target.repo) / "refs" / rev
        if ref_file.is_file():
            commit = ref_file.read_text().strip()
            if HEX40.fullmatch(commit):
                return commit, f"offline: '{rev}' read from the cache's refs ({commit})"
        if lock and lock.get("repo") == target.repo and lock.get("ref") == rev:
            commit = str(lock["revision"])
            return commit, f"offline: '{rev}' taken from the lock file ({commit})"
        raise FetchError(
            f"offline mode (HF_HUB_OFFLINE) and '{rev}' of {target.repo} is not known here",
            "pass --revision <40-hex commit>, or run once with network access",
        )
    from huggingface_hub import HfApi

    with quiet_hub():
        try:
            info = HfApi(endpoint=env.endpoint).model_info(
                target.repo, revision=rev, timeout=env.timeout
            )
        except Exception as e:
            raise hub_error(e, repo=target.repo, revision=rev, env=env) from e
    sha = info.sha
    if not isinstance(sha, str) or not HEX40.fullmatch(sha):
        raise FetchError(
            f"{env.endpoint} returned no commit for {target.repo}@{rev}",
            "is HF_ENDPOINT a Hugging Face Hub (or a mirror of one)?",
        )
    return sha, f"'{rev}' resolved to commit {sha}"


def resolve_revision(
    target: Target, env: HubEnv, lock: dict[str, Any] | None, progress: FetchProgress | None
) -> tuple[Target, str, str | None, bool, list[str]]:
    """(target, commit, ref, at the registry's pinned commit?, notes): the revision asked for
    resolved to a commit; trust on first use keeps the commit the lock recorded."""
    notes: list[str] = []
    sticky = None  # trust on first use, later fetches: the commit the lock recorded
    if target.tofu and lock is not None and lock.get("repo") == target.repo:
        locked = lock.get("revision")
        if isinstance(locked, str) and HEX40.fullmatch(locked):
            sticky = lock
            target = dataclasses.replace(target, requested=locked)
            notes.append(
                f"trust on first use: the lock pins {target.repo} at {locked} (first fetched "
                f"{lock.get('fetched_at') or '?'}), verified against it; --revision to move"
            )
    if progress is not None:
        where = "the local cache (HF_HUB_OFFLINE)" if env.offline else env.endpoint
        progress.step(f"resolving {target.repo}@{target.requested} at {where}")
    commit, how = resolve_commit(target, env, lock)
    ref = None if HEX40.fullmatch(target.requested) else target.requested
    if sticky is not None:
        ref = sticky.get("ref") or "main"
    elif ref is not None:
        notes.append(how if how.startswith("offline") else f"{how} (recorded in the lock)")
        if ref == "main" and target.tofu:
            name = target.entry.name if target.entry else target.repo
            notes.append(
                f"trust on first use: the registry pins no revision of {name}; main is "
                f"{commit} now, recorded with every file's sha256 in the lock: later fetches "
                "into this directory stay on it and verify against it (--revision COMMIT to "
                "move; the registry's file pins still apply)"
            )
        elif ref == "main":
            notes.append(f"unpinned: main was at {commit} when fetched (--allow-unpinned)")
    pinned_rev = target.pinned_revision
    at_pinned = pinned_rev is not None and commit == pinned_rev
    if target.entry is not None and pinned_rev is not None and not at_pinned:
        notes.append(
            f"the registry pins {target.entry.name} at {pinned_rev}; this is {commit}: "
            "file pins still apply"
        )
    return target, commit, ref, at_pinned, notes


def check_files(
    staging: Path,
    names: list[str],
    *,
    etags: dict[str, str],
    pins: dict[str, FileSpec],
    at_pinned_revision: bool,
    allow_unpinned: bool,
    progress: FetchProgress | None,
) -> tuple[list[FetchedFile], list[Mismatch], list[str]]:
    results: list[FetchedFile] = []
    bad: list[Mismatch] = []
    notes: list[str] = []
    for name in names:
        hub = etags.get(name)
        digest = hash_file(
            staging / name,
            git=hub is not None and HEX40.fullmatch(hub) is not None,
            progress=progress,
            name=name,
        )
        spec = pins.get(name)
        pin = spec.sha256 if spec is not None else None
        if pin is not None:
            if digest.sha256 == pin:
                results.append(FetchedFile(name, digest.sha256, digest.size, "pinned", pin))
                continue
            if not at_pinned_revision and allow_unpinned:
                results.append(FetchedFile(name, digest.sha256, digest.size, "accepted", pin))
                notes.append(
                    f"{name} differs from the registry's pin ({short_sha(pin)}): accepted because "
                    "of --allow-unpinned; the lock records the new hash"
                )
                continue
            bad.append(Mismatch(name, digest.sha256, pin, "pin"))
            continue
        if hub is not None:
            found = digest.sha256 if HEX64.fullmatch(hub) else digest.git_sha1
            if found != hub:
                bad.append(Mismatch(name, found or "", hub, "hub"))
                continue
            results.append(FetchedFile(name, digest.sha256, digest.size, "hub"))
            continue
        results.append(FetchedFile(name, digest.sha256, digest.size, "recorded"))
    return results, bad, notes


def check_download(
    root: Path,
    names: list[str],
    *,
    kept: list[str],
    target: Target,
    commit: str,
    patterns: list[str],
    etags: dict[str, str],
    pins: dict[str, FileSpec],
    env: HubEnv,
    at_pinned: bool,
    allow_unpinned: bool,
    progress: FetchProgress | None,
) -> tuple[list[FetchedFile], list[Mismatch], list[str]]:
    """What a download brought (`names` under `root`; `kept`: files already in place), checked
    wherever it landed: something matched, every pinned file is there, each file's bytes
    against its pin or the hash the Hub published (asked for only where no pin covers a file)."""
    if not names and not kept:
        raise FetchError(
            f"no file of {target.repo}@{short_sha(commit)} matches {', '.join(patterns)}",
            "check --include against the repo's file list",
        )
    missing = [n for n in pins if matches_any(n, patterns) and n not in names + kept]
    if missing:
        raise FetchError(
            f"{target.repo}@{short_sha(commit)} has no {missing[0]}, which the registry pins",
            "the repo's layout changed: fetch the pinned revision",
        )
    if any(n not in pins and n not in etags for n in names):  # no pin: the Hub's own hash
        etags = {**published_hashes(target.repo, commit, env), **etags}
    if progress is not None:
        progress.step("checking sha256")
    return check_files(
        root,
        names,
        etags=etags,
        pins=pins,
        at_pinned_revision=at_pinned,
        allow_unpinned=allow_unpinned,
        progress=progress,
    )


def lock_data(
    target: Target, commit: str, ref: str | None, patterns: list[str], files: list[FetchedFile]
) -> dict[str, Any]:
    return {
        "repo": target.repo,
        "revision": commit,
        "files": {f.name: f.sha256 for f in sorted(files, key=lambda f: f.name)},
        "fetched_at": _now(),
        "ref": ref,
        "registry": target.entry.name if target.entry is not None else None,
        "include": patterns,
        "sizes": {f.name: f.size for f in sorted(files, key=lambda f: f.name)},
        "tool": f"dflashctl {__version__}",
    }
