"""`fetch` into the shared Hugging Face cache, the default without --dir: what `hf download`
does, so that vLLM or SGLang given the hub id (same HF_HOME) find the files instead of
downloading them again. Each file is hashed and checked against the registry's pin (or the
hash the Hub published: the cache names each blob by it); a file that fails is removed from the
cache, link and blob, so it is never served and a retry downloads it anew.

The cache holds no file of ours: the lock (commit, every sha256; trust on first use for a
registry entry without a pinned commit) is `$DFLASHCTL_HOME/locks/ORG--NAME/dflashctl.lock.json`.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from dflashctl.commands.fetch.checks import check_download, lock_data, resolve_revision
from dflashctl.commands.fetch.report import FetchReport
from dflashctl.commands.fetch.target import Target, mismatch_error, pins_of
from dflashctl.drafter.lock import read_lock
from dflashctl.drafter.registry import LOCK_NAME
from dflashctl.files import write_json_atomic
from dflashctl.hub import (
    FetchProgress,
    HubEnv,
    download_snapshot,
    matches_any,
    short_sha,
)


def lock_folder(repo: str) -> Path:
    """Where the lock of a repo fetched into the cache lives (one per repo, as a directory's)."""
    from dflashctl.server.deployments import home

    return home() / "locks" / repo.replace("/", "--")


def _drop_from_cache(snapshot: Path, name: str) -> None:
    """The snapshot's link and the blob it points to: a rejected file is gone from the cache."""
    link = snapshot / name
    blob = Path(os.path.realpath(link))
    for path in (link, blob):
        with contextlib.suppress(OSError):
            path.unlink()


def fetch_to_cache(
    target: Target,
    patterns: list[str],
    allow_unpinned: bool,
    progress: FetchProgress | None,
) -> FetchReport:
    """Download (or find) the files at the resolved commit in the shared cache and check them;
    verify-config is the caller's."""
    env = HubEnv.from_environ()
    pins = pins_of(target.entry)
    folder = lock_folder(target.repo)
    lock = read_lock(folder) if folder.is_dir() else None
    target, commit, ref, at_pinned, notes = resolve_revision(target, env, lock, progress)
    if progress is not None:
        progress.step(f"downloading {target.repo}@{short_sha(commit)} into the Hugging Face cache")
    snapshot, etags = download_snapshot(target.repo, commit, patterns, env, progress)
    names = sorted(
        p.relative_to(snapshot).as_posix()
        for p in snapshot.rglob("*")
        if p.is_file() and matches_any(p.relative_to(snapshot).as_posix(), patterns)
    )
    files, bad, check_notes = check_download(
        snapshot,
        names,
        kept=[],
        target=target,
        commit=commit,
        patterns=patterns,
        etags=etags,
        pins=pins,
        env=env,
        at_pinned=at_pinned,
        allow_unpinned=allow_unpinned,
        progress=progress,
    )
    if bad:
        for b in bad:
            _drop_from_cache(snapshot, b.name)
        raise mismatch_error(bad, target, commit, env, at_pinned)
    same = (
        lock is not None
        and lock.get("revision") == commit
        and lock.get("files") == {f.name: f.sha256 for f in files}
    )
    data = lock_data(target, commit, ref, patterns, files)
    if same and lock is not None:
        data["fetched_at"] = lock.get("fetched_at") or data["fetched_at"]
    data["directory"] = str(snapshot)
    folder.mkdir(parents=True, exist_ok=True)
    write_json_atomic(folder / LOCK_NAME, data)
    return FetchReport(
        repo=target.repo,
        revision=commit,
        ref=ref,
        registry=target.entry.name if target.entry else None,
        directory=snapshot,
        lock_path=folder / LOCK_NAME,
        action="verified" if same else "downloaded",
        files=files,
        fetched_at=str(data["fetched_at"]),
        patterns=patterns,
        downloaded=[] if same else [f.name for f in files],
        notes=notes + check_notes,
        in_cache=True,
    )
