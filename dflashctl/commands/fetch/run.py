"""fetch.py — a drafter at a pinned commit, its bytes verified, a lock file; no printing.

`fetch()` resolves DRAFTER (a registry name, or `org/repo`) and a revision to a commit,
downloads the files a server needs through huggingface_hub's `snapshot_download` into a staging
folder inside the target directory, checks each file's sha256 against the registry's pin (and,
where the registry has none, against the hash the Hub publishes for it: the LFS sha256 or the
git blob id), moves the verified files into place with `os.replace`, writes
`dflashctl.lock.json` atomically, then runs verify-config on what arrived.

A file that fails its check is deleted from staging: it never appears under its final name.
A directory whose lock names the same repo, commit and file patterns, and whose files still
hash to the lock, is verified and left alone: no network at all. Hub failures (gated, missing
repo or revision, unreachable, offline) are `FetchError`s (exit 2) with a hint.

With a host, the verified directory is pushed over SFTP and re-hashed there (`push_to_host`),
or, with `remote_fetch`, the host runs `python -m dflashctl fetch` itself (`fetch_on_host`:
HF_ENDPOINT in its environment, HF_TOKEN on stdin) and its files are re-hashed there and
compared with the pins here.

huggingface_hub is imported inside the functions, so `dflashctl --help` never loads it; the
environment (`HF_ENDPOINT`, `HF_HUB_OFFLINE`, `HF_HOME`/`HF_HUB_CACHE`) is read at call time
and `HF_TOKEN` by huggingface_hub itself on every request.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dflashctl.commands.fetch.checks import (
    check_download,
    check_files,
    lock_data,
    resolve_revision,
)
from dflashctl.commands.fetch.remote import COMMAND_TIMEOUT, fetch_on_host, push_to_host
from dflashctl.commands.fetch.report import FetchedFile, FetchReport
from dflashctl.commands.fetch.target import (
    DEFAULT_PATTERNS,
    STAGING_NAME,
    Target,
    mismatch_error,
    pins_of,
    resolve_target,
)
from dflashctl.drafter.lock import read_lock
from dflashctl.drafter.registry import LOCK_NAME, FileSpec, embedded_dir
from dflashctl.errors import (
    FetchError,
    OutputError,
    RemoteError,
    UsageError,
)
from dflashctl.files import backup_path, check_target, fsync_dir, hash_file, write_json_atomic
from dflashctl.hub import (
    FetchProgress,
    HubEnv,
    download,
    matches_any,
    short_sha,
)

CHUNK = 1 << 20


def dir_option(value: str | None) -> Path | None:
    """`--dir` as given: None (the default directory) or a path; an empty one is refused
    rather than read as the current directory, as is a name longer than the system allows."""
    if value is None:
        return None
    if not value.strip():
        raise UsageError("--dir is empty", "pass a directory, e.g. --dir ./drafter")
    path = Path(value)
    try:
        os.stat(path)
    except FileNotFoundError:
        pass
    except OSError as e:
        raise UsageError(f"--dir {value}: {e.strerror}") from None
    return path


def _disk_error(e: OSError, directory: Path) -> FetchError:
    if e.errno == 28:  # ENOSPC
        return FetchError(
            f"disk full while writing under {directory}",
            "free some space (or pass --dir on another disk) and run fetch again: "
            "what was downloaded so far is kept and the download resumes",
        )
    return FetchError(
        f"cannot write under {directory}: {e.strerror or e}", "check the path and permissions"
    )


def _staged_files(staging: Path) -> list[str]:
    names = []
    for path in staging.rglob("*"):
        rel = path.relative_to(staging)
        if rel.parts[0] == ".cache" or not path.is_file() or path.name.endswith(".incomplete"):
            continue
        names.append(rel.as_posix())
    return sorted(names)


def _verify_in_place(
    directory: Path,
    lock: dict[str, Any],
    pins: dict[str, FileSpec],
    patterns: list[str],
    *,
    accept_unpinned: bool,
    progress: FetchProgress | None,
) -> tuple[list[FetchedFile], list[str]]:
    """Hash the lock's files that `patterns` still ask for: (the good ones, those to fetch).

    A file that differs from its registry pin counts as good only when `accept_unpinned`
    (another revision than the pinned one, fetched with --allow-unpinned)."""
    good: list[FetchedFile] = []
    redo: list[str] = []
    for name, locked in sorted(lock["files"].items()):
        if not matches_any(name, patterns):
            continue
        path = directory / name
        if not path.is_file():
            redo.append(name)
            continue
        digest = hash_file(path, progress=progress, name=name)
        pin = pins[name].sha256 if name in pins else None
        if digest.sha256 != locked:
            redo.append(name)
            continue
        if pin is not None and pin != locked and not accept_unpinned:
            redo.append(name)
            continue
        status = "locked" if pin is None else "pinned" if pin == locked else "accepted"
        good.append(FetchedFile(name, digest.sha256, digest.size, status, pin))
    return good, redo


def _place(
    directory: Path,
    staging: Path,
    files: list[FetchedFile],
    final_names: set[str],
    old_lock: dict[str, Any] | None,
) -> tuple[list[str], list[str]]:
    """Move verified files from staging into `directory`; returns (backups, removed).

    A file already there with other bytes that the old lock does not vouch for (edited by
    hand, or not ours) is renamed to `NAME.bak-<time>` first; files the old lock listed that
    the new set lacks are removed when unmodified (stale shards would confuse engines).
    """
    old_files: dict[str, str] = dict((old_lock or {}).get("files") or {})
    for f in files:  # nothing moves when one target is a directory, device or FIFO
        _refuse_non_regular(directory / f.name)
    backups: list[str] = []
    for f in files:
        final = directory / f.name
        final.parent.mkdir(parents=True, exist_ok=True)
        if final.is_file() and not final.is_symlink():
            current = hash_file(final).sha256
            if current != f.sha256 and old_files.get(f.name) != current:
                backup = backup_path(final)
                os.replace(final, backup)
                backups.append(backup.name)
        elif final.is_symlink():
            final.unlink()
        os.replace(staging / f.name, final)
    removed: list[str] = []
    for name, sha in sorted(old_files.items()):
        path = directory / name
        if name in final_names or not path.is_file():
            continue
        if hash_file(path).sha256 == sha:
            path.unlink()
            removed.append(name)
    fsync_dir(directory)
    return backups, removed


def fetch(
    drafter: str,
    *,
    revision: str | None = None,
    directory: Path | None = None,
    include: Sequence[str] = (),
    allow_unpinned: bool = False,
    host: str | None = None,
    remote_dir: str | None = None,
    remote_fetch: bool = False,
    python: str | None = None,
    verify: bool = True,
    progress: FetchProgress | None = None,
) -> FetchReport:
    """Fetch DRAFTER into `directory` (default: the shared Hugging Face cache), verified and
    locked.

    Raises UsageError for bad arguments, FetchError for Hub and hash failures, RemoteError for
    the host. Verify-config problems are data
    in `report.verify`. With `host`, the host is reached before anything is downloaded.
    """
    target = resolve_target(drafter, revision, allow_unpinned=allow_unpinned)
    if remote_dir is not None and host is None:
        raise UsageError(
            "--remote-dir needs --host", "add --host H, or use --dir for a local directory"
        )
    if remote_fetch and host is None:
        raise UsageError(
            "--remote-fetch needs --host", "add --host H: the host that downloads the drafter"
        )
    if remote_fetch and directory is not None:
        raise UsageError(
            "--dir is a local directory; with --remote-fetch nothing is written here",
            "pass --remote-dir for the directory on the host",
        )
    if python is not None and not remote_fetch:
        raise UsageError(
            "--python needs --remote-fetch", "it names the Python that runs fetch on the host"
        )
    if python is not None and not python.strip():
        raise UsageError("--python is empty", "pass the interpreter on the host, e.g. python3")
    patterns = sorted({p.strip() for p in include if p.strip()} or set(DEFAULT_PATTERNS))
    shipped = embedded_dir(target.entry.name) if target.entry is not None else None
    if shipped is not None and target.entry is not None:
        if directory is not None or host is not None:
            raise UsageError(
                f"{target.entry.name} ships inside dflashctl ({shipped}): there is nothing to "
                "download",
                f"serve it as it is, or copy that folder; `dflashctl fetch {target.entry.name}` "
                "checks its files against the registry's pins",
            )
        return _verify_config(_verify_embedded(target, shipped, progress), verify, progress)
    if directory is not None:
        directory = directory.expanduser().absolute()
        if directory.exists() and not directory.is_dir():
            raise UsageError(f"--dir {directory} exists and is not a directory")
    remote_target = remote_dir or target.repo.split("/", 1)[1]
    if host is None:
        return _fetch_here(target, directory, patterns, allow_unpinned, verify, progress)
    from dflashctl.hosts import open_host

    if progress is not None:
        progress.step(f"reaching {host}")
    with open_host(host) as on:
        res = on.run(["mkdir", "-p", "--", remote_target], timeout=COMMAND_TIMEOUT)
        if res.rc != 0:
            raise RemoteError(
                f"{host}: cannot create {remote_target}: {res.stderr.strip()[:200]}",
                "pass --remote-dir with a writable directory on the host",
            )
        if remote_fetch:
            return fetch_on_host(
                on,
                target,
                remote_dir=remote_target,
                patterns=patterns,
                allow_unpinned=allow_unpinned,
                python=python.strip() if python else on.python,
                verify=verify,
                progress=progress,
            )
        report = _fetch_here(target, directory, patterns, allow_unpinned, verify, progress)
        if progress is not None:
            progress.step(f"copying to {host} and hashing it there")
        report.remote = push_to_host(on, report.directory, remote_target)
        return report


def _verify_embedded(target: Target, folder: Path, progress: FetchProgress | None) -> FetchReport:
    """A drafter that ships with dflashctl: its files hashed against the registry's pins."""
    assert target.entry is not None
    pins = pins_of(target.entry)
    names = sorted(n for n in pins if (folder / n).is_file())
    missing = sorted(set(pins) - set(names))
    if missing:
        raise FetchError(
            f"the embedded {target.entry.name} drafter has no {missing[0]} ({folder})",
            "reinstall dflashctl",
        )
    files, bad, _ = check_files(
        folder,
        names,
        etags={},
        pins=pins,
        at_pinned_revision=True,
        allow_unpinned=False,
        progress=progress,
    )
    if bad:
        b = bad[0]
        raise FetchError(
            f"{folder / b.name}: sha256 {b.found} is not the pinned {b.expected}: the embedded "
            "drafter was changed",
            "reinstall dflashctl (or, in a checkout, git checkout dflashctl/assets/demo)",
        )
    return FetchReport(
        repo=target.repo,
        revision=target.requested,
        ref=None,
        registry=target.entry.name,
        directory=folder,
        lock_path=folder,
        action="embedded",
        files=files,
        fetched_at="",
        patterns=sorted(pins),
    )


def _fetch_here(
    target: Target,
    directory: Path | None,
    patterns: list[str],
    allow_unpinned: bool,
    verify: bool,
    progress: FetchProgress | None,
) -> FetchReport:
    """Fetch into `directory` on this machine (or verify what the lock vouches for), or into
    the shared Hugging Face cache without one; then verify-config on what arrived."""
    if directory is None:
        from dflashctl.commands.fetch.cache import fetch_to_cache

        report = fetch_to_cache(target, patterns, allow_unpinned, progress)
        return _verify_config(report, verify, progress)
    env = HubEnv.from_environ()
    pins = pins_of(target.entry)
    lock = read_lock(directory) if directory.is_dir() else None
    target, commit, ref, at_pinned, notes = resolve_revision(target, env, lock, progress)

    # Files already in place at this commit (the lock vouches for them and they still hash to
    # it) are kept; if that is everything asked for, verify and do nothing else: no network.
    kept: list[FetchedFile] = []
    same_commit = (
        lock is not None and lock.get("repo") == target.repo and lock.get("revision") == commit
    )
    if lock is not None and same_commit:
        if progress is not None:
            progress.step("verifying the files in place")
        kept, redo = _verify_in_place(
            directory,
            lock,
            pins,
            patterns,
            accept_unpinned=allow_unpinned and not at_pinned,
            progress=progress,
        )
        if not redo and sorted(lock.get("include") or []) == patterns:
            report = FetchReport(
                repo=target.repo,
                revision=commit,
                ref=lock.get("ref") if ref is None else ref,
                registry=target.entry.name if target.entry else None,
                directory=directory,
                lock_path=directory / LOCK_NAME,
                action="verified",
                files=kept,
                fetched_at=str(lock.get("fetched_at") or ""),
                patterns=patterns,
                notes=notes,
            )
            return _verify_config(report, verify, progress)
        if redo:
            notes.append(
                "changed or missing since the lock was written, downloaded again: "
                + ", ".join(redo)
            )
    report = _download_and_place(
        target,
        commit,
        ref,
        directory,
        patterns,
        kept,
        lock,
        env=env,
        pins=pins,
        at_pinned=at_pinned,
        allow_unpinned=allow_unpinned,
        progress=progress,
    )
    report.notes[:0] = notes
    return _verify_config(report, verify, progress)


def _download_and_place(
    target: Target,
    commit: str,
    ref: str | None,
    directory: Path,
    patterns: list[str],
    kept: list[FetchedFile],
    lock: dict[str, Any] | None,
    *,
    env: HubEnv,
    pins: dict[str, FileSpec],
    at_pinned: bool,
    allow_unpinned: bool,
    progress: FetchProgress | None,
) -> FetchReport:
    """Download what is not kept into staging, check it, move it into place, write the lock."""
    notes: list[str] = []
    # Names known before downloading (pins, plain --include names) that a directory, device or
    # FIFO holds: refused now, before anything is downloaded or staged.
    for name in {*pins, *(p for p in patterns if not any(c in p for c in "*?["))}:
        _refuse_non_regular(directory / name)
    created = not directory.exists()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        staging = directory / STAGING_NAME / commit
        staging.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _disk_error(e, directory) from None
    if progress is not None:
        progress.step(f"downloading {target.repo}@{short_sha(commit)}")
    skip = [f.name for f in kept]
    try:
        etags = download(target.repo, commit, patterns, skip, staging, env, progress)
    except FetchError:
        _drop_empty_staging(directory, created)
        raise
    except OSError as e:
        _drop_empty_staging(directory, created)
        raise _disk_error(e, directory) from None
    names = [n for n in _staged_files(staging) if matches_any(n, patterns) and n not in skip]
    fetched, bad, check_notes = check_download(
        staging,
        names,
        kept=skip,
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
    notes += check_notes
    if bad:  # nothing of this download is kept: a retry fetches anew, nothing lingers
        shutil.rmtree(directory / STAGING_NAME, ignore_errors=True)
        if created:
            with contextlib.suppress(OSError):
                directory.rmdir()
        raise mismatch_error(bad, target, commit, env, at_pinned)

    files = sorted(kept + fetched, key=lambda f: f.name)
    lock_path = directory / LOCK_NAME
    try:
        if lock_path.exists():
            lock_path.unlink()  # nothing may vouch for the directory while it changes
            fsync_dir(directory)
        backups, removed = _place(directory, staging, fetched, {f.name for f in files}, lock)
        data = lock_data(target, commit, ref, patterns, files)
        write_json_atomic(lock_path, data)
        shutil.rmtree(directory / STAGING_NAME, ignore_errors=True)
    except OSError as e:
        raise _disk_error(e, directory) from None
    for name in backups:
        notes.append(f"a local file with other bytes was kept as {name}")
    return FetchReport(
        repo=target.repo,
        revision=commit,
        ref=ref,
        registry=target.entry.name if target.entry else None,
        directory=directory,
        lock_path=lock_path,
        action="updated" if kept else "downloaded",
        files=files,
        fetched_at=data["fetched_at"],
        patterns=patterns,
        downloaded=[f.name for f in fetched],
        removed=removed,
        backups=backups,
        notes=notes,
    )


def _refuse_non_regular(path: Path) -> None:
    """OutputError when `path` is there and is neither a regular file nor a symlink (a link
    is replaced, never followed); nothing else is checked."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as e:
        raise OutputError(f"cannot write {path}: {e.strerror}") from None
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        check_target(path)


def _drop_empty_staging(directory: Path, created: bool) -> None:
    """After a failed download: remove staging when it holds nothing to resume from, and the
    directory too when this run created it and it is empty again."""
    staging = directory / STAGING_NAME
    partial = [p for p in staging.rglob("*") if p.is_file() and p.suffix != ".lock"]
    if any(p.name.endswith(".incomplete") or ".cache" not in p.parts for p in partial):
        return
    shutil.rmtree(staging, ignore_errors=True)
    if created:
        with contextlib.suppress(OSError):
            directory.rmdir()


def _verify_config(
    report: FetchReport, verify: bool, progress: FetchProgress | None
) -> FetchReport:
    """verify-config on what arrived."""
    names = {f.name for f in report.files}
    if verify and "config.json" in names:
        from dflashctl.drafter.verify import run_verify

        if progress is not None:
            progress.step("verify-config")
        report.verify = run_verify(report.directory, drafter=report.registry)
    elif verify:
        report.notes.append("no config.json fetched: verify-config skipped")
    return report
