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
import datetime as dt
import fnmatch
import json
import os
import shutil
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from dflashctl import __version__
from dflashctl.drafter.registry import HEX40, HEX64, LOCK_NAME, REPO_RE, DrafterEntry, FileSpec
from dflashctl.errors import (
    FetchError,
    InputError,
    RegistryError,
    RemoteError,
    UsageError,
)
from dflashctl.files import backup_path, fsync_dir, hash_file, write_json_atomic

if TYPE_CHECKING:
    from dflashctl.drafter.report import VerifyReport

DEFAULT_PATTERNS = ("config.json", "*.safetensors", "model.safetensors.index.json")
STAGING_NAME = ".dflashctl-download"
DEFAULT_ENDPOINT = "https://huggingface.co"
CHUNK = 1 << 20


# ---- progress ---------------------------------------------------------------------------------


class FetchProgress(Protocol):
    """What a caller may show while fetch runs (the CLI draws rich bars; tests pass None).

    Called from huggingface_hub's worker threads too: implementations must be thread-safe.
    """

    def step(self, text: str) -> None: ...

    def download(self, done: int, total: int | None) -> None: ...

    def hashing(self, name: str, done: int, total: int) -> None: ...


def _tqdm_class(progress: FetchProgress | None) -> type:
    """A stand-in for tqdm that huggingface_hub drives, forwarding byte counts to `progress`.

    snapshot_download opens two byte bars (network transfer, bytes written) that both count
    every chunk of a plain HTTP download, and a file-count bar: the largest byte count is the
    one reported, so no chunk counts twice.
    """
    lock = threading.Lock()
    byte_bars: list[_Bar] = []

    def report() -> None:
        if progress is None:
            return
        done = max((b.n for b in byte_bars), default=0)
        total = max((b.total or 0 for b in byte_bars), default=0)
        progress.download(int(done), int(total) or None)

    class _Bar:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.n: float = kwargs.get("initial") or 0
            self._total = kwargs.get("total")
            self.desc = kwargs.get("desc")
            self.format_dict: dict[str, Any] = {}
            if kwargs.get("unit") == "B":
                with lock:
                    byte_bars.append(self)

        @property
        def total(self) -> Any:
            return self._total

        @total.setter
        def total(self, value: Any) -> None:
            self._total = value
            if self in byte_bars:
                with lock:
                    report()

        def update(self, n: float | None = 1) -> None:
            with lock:
                self.n += n or 0
                if self in byte_bars:
                    report()

        def __enter__(self) -> _Bar:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def close(self) -> None:
            return None

        def refresh(self, *args: Any, **kwargs: Any) -> None:
            return None

        def set_description(self, *args: Any, **kwargs: Any) -> None:
            return None

        def set_description_str(self, *args: Any, **kwargs: Any) -> None:
            return None

        def set_postfix_str(self, *args: Any, **kwargs: Any) -> None:
            return None

    return _Bar


# ---- results ----------------------------------------------------------------------------------

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
    action: str  # "downloaded" | "updated" (some files were in place) | "verified" (no-op)
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
        }


# ---- the environment huggingface_hub reads ----------------------------------------------------


@dataclass(frozen=True)
class HubEnv:
    endpoint: str
    offline: bool
    cache_dir: Path

    @classmethod
    def from_environ(cls) -> HubEnv:
        env = os.environ
        endpoint = (env.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")
        offline = any(
            (env.get(k) or "").upper() in ("1", "ON", "YES", "TRUE")
            for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
        )
        if env.get("HF_HUB_CACHE"):
            cache = Path(env["HF_HUB_CACHE"])
        elif env.get("HF_HOME"):
            cache = Path(env["HF_HOME"]) / "hub"
        else:
            xdg = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
            cache = Path(xdg) / "huggingface" / "hub"
        return cls(endpoint, offline, cache.expanduser())


# ---- hashing and small file helpers -----------------------------------------------------------


def _now() -> str:
    return (
        dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    )


def _short(sha: str | None) -> str:
    return sha[:12] if sha else "—"


def _matches(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatch(name, p) for p in patterns)


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


# ---- the lock file ----------------------------------------------------------------------------


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


# ---- what to fetch ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    repo: str
    entry: DrafterEntry | None
    requested: str  # the revision as asked for (a commit, a branch or tag, or "main")
    implied_main: bool  # nothing pinned a revision: main by default

    @property
    def pinned_revision(self) -> str | None:
        return self.entry.revision if self.entry is not None else None


def resolve_target(drafter: str, revision: str | None, *, allow_unpinned: bool) -> Target:
    """Registry entry (if any), repo and the revision to ask for; UsageError when unpinned."""
    from dflashctl.drafter import registry

    name = drafter.strip()
    if not name:
        raise UsageError("DRAFTER is empty", "pass a registry name or org/repo")
    entry = registry.find_entry(name)
    if entry is None:
        if not REPO_RE.fullmatch(name):
            try:
                registry.get_entry(name)
            except RegistryError as e:  # unknown: its hint names close matches
                hint = e.hint
                raise UsageError(
                    f"unknown drafter '{name}': not a registry name and not org/repo",
                    (hint + "; " if hint else "") + "or pass org/repo with --revision",
                ) from None
        repo = name
    else:
        repo = entry.repo
    if revision is not None and not revision.strip():
        raise UsageError("--revision is empty", "pass a 40-hex commit id, a tag or a branch")
    requested = revision.strip() if revision else (entry.revision if entry else None)
    implied = requested is None
    requested = requested or "main"
    if requested == "main" and not allow_unpinned:
        if implied and entry is not None:
            why = f"the registry has no verified revision for {entry.name} ({repo})"
        elif implied:
            why = f"{repo} is not in the registry and no --revision was given"
        else:
            why = "'main' is a branch: it moves when the repo is updated"
        raise UsageError(
            f"refusing to fetch an unpinned revision: {why}",
            "pass --revision <40-hex commit> (or a tag), or --allow-unpinned to take main's "
            "current commit (it is recorded in the lock file)",
        )
    return Target(repo, entry, requested, implied)


def _pins(entry: DrafterEntry | None) -> dict[str, FileSpec]:
    return {f.path: f for f in entry.files} if entry is not None else {}


# ---- huggingface_hub calls and their errors ---------------------------------------------------


def _hub_error(e: BaseException, *, repo: str, revision: str, env: HubEnv) -> FetchError:
    """One actionable line for every way the Hub can fail (subclasses before their bases)."""
    import httpx2
    from huggingface_hub import errors as hf

    page = f"{env.endpoint}/{repo}"
    if isinstance(e, hf.GatedRepoError):
        status = e.response.status_code if e.response is not None else None
        has_token = bool(os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN"))
        if status == 403 or has_token:
            return FetchError(
                f"{repo} is gated and the token has no access to it (HTTP {status})",
                f"accept the licence on {page} with the account whose token is in HF_TOKEN",
            )
        return FetchError(
            f"{repo} is gated: downloads need an access token (HTTP {status})",
            f"accept the licence on {page}, then set HF_TOKEN (or run `hf auth login`)",
        )
    if isinstance(e, hf.RepositoryNotFoundError):
        return FetchError(
            f"repository {repo} not found on {env.endpoint}",
            "check the org/repo spelling; a private repo also needs HF_TOKEN",
        )
    if isinstance(e, hf.RevisionNotFoundError):
        return FetchError(
            f"revision '{revision}' not found in {repo}",
            f"check the commit id or branch on {page}/commits/main",
        )
    if isinstance(e, hf.RemoteEntryNotFoundError):
        return FetchError(
            f"a file of {repo}@{_short(revision)} is missing on the Hub: {_first_line(e)}",
            "check --include against the repo's files",
        )
    if isinstance(e, hf.OfflineModeIsEnabled) or (
        isinstance(e, hf.LocalEntryNotFoundError) and env.offline
    ):
        return FetchError(
            f"offline mode (HF_HUB_OFFLINE) and {repo}@{_short(revision)} is not on disk",
            "run fetch once with network access (unset HF_HUB_OFFLINE), or copy the files here",
        )
    if isinstance(e, hf.LocalEntryNotFoundError | httpx2.TransportError):
        return FetchError(
            f"cannot reach {env.endpoint} to download {repo}@{_short(revision)}",
            "check the network, a proxy, or HF_ENDPOINT; once downloaded, fetch works offline",
        )
    if isinstance(e, hf.HfHubHTTPError):
        status = e.response.status_code if e.response is not None else "?"
        return FetchError(
            f"the Hub answered HTTP {status} for {repo}@{_short(revision)}",
            "retry later; a download that stopped halfway resumes where it stopped",
        )
    if isinstance(e, OSError) and "Consistency check failed" in str(e):
        return FetchError(
            f"a download from {env.endpoint} was cut short: {_first_line(e)}",
            "run fetch again: nothing incomplete was kept under a final name",
        )
    return FetchError(f"download of {repo} failed: {type(e).__name__}: {_first_line(e)}")


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


@contextlib.contextmanager
def _quiet_hub() -> Iterator[None]:
    """huggingface_hub logs warnings to stderr ("No files matched", "Trying to resume"): the
    report says what matters, so keep them out of the CLI's output."""
    from huggingface_hub.utils import logging as hf_logging

    logger = hf_logging.get_logger("huggingface_hub")
    before = logger.level
    logger.setLevel(hf_logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(before)


def _cache_folder(env: HubEnv, repo: str) -> Path:
    return env.cache_dir / ("models--" + repo.replace("/", "--"))


def resolve_commit(target: Target, env: HubEnv, lock: dict[str, Any] | None) -> tuple[str, str]:
    """(commit, how): a 40-hex revision as is; a branch or tag through the Hub (one call), or
    offline through the cache's refs/ or the lock that recorded it."""
    rev = target.requested
    if HEX40.fullmatch(rev):
        return rev, "pinned"
    if env.offline:
        ref_file = _cache_folder(env, target.repo) / "refs" / rev
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

    with _quiet_hub():
        try:
            info = HfApi(endpoint=env.endpoint).model_info(target.repo, revision=rev)
        except Exception as e:
            raise _hub_error(e, repo=target.repo, revision=rev, env=env) from e
    sha = info.sha
    if not isinstance(sha, str) or not HEX40.fullmatch(sha):
        raise FetchError(
            f"{env.endpoint} returned no commit for {target.repo}@{rev}",
            "is HF_ENDPOINT a Hugging Face Hub (or a mirror of one)?",
        )
    return sha, f"'{rev}' resolved to commit {sha}"


def _download(
    repo: str,
    commit: str,
    patterns: list[str],
    skip: list[str],
    staging: Path,
    env: HubEnv,
    progress: FetchProgress | None,
) -> dict[str, str]:
    """snapshot_download into `staging`; offline, fall back to a complete snapshot in the cache.

    Returns the Hub's hashes of files copied from the cache (each blob is named by its ETag).
    """
    from huggingface_hub import errors as hf
    from huggingface_hub import snapshot_download

    kwargs: dict[str, Any] = {
        "revision": commit,
        "allow_patterns": patterns,
        "ignore_patterns": skip or None,
        "endpoint": env.endpoint,
        "cache_dir": str(env.cache_dir),
        "tqdm_class": _tqdm_class(progress),
    }
    with _quiet_hub():
        try:
            snapshot_download(repo, local_dir=staging, local_files_only=env.offline, **kwargs)
            return {}
        except hf.LocalEntryNotFoundError as e:
            if not env.offline:
                raise _hub_error(e, repo=repo, revision=commit, env=env) from e
            first: BaseException = e
        except Exception as e:
            raise _hub_error(e, repo=repo, revision=commit, env=env) from e
        # Offline and not in staging: a snapshot in the shared cache (HF_HOME) will do.
        try:
            snapshot = Path(snapshot_download(repo, local_files_only=True, **kwargs))
        except Exception:
            raise _hub_error(first, repo=repo, revision=commit, env=env) from first
    etags: dict[str, str] = {}
    for src in sorted(snapshot.rglob("*")):
        rel = src.relative_to(snapshot).as_posix()
        if not src.is_file() or not _matches(rel, patterns) or rel in skip:
            continue
        dest = staging / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(dest.name + ".incomplete")
        shutil.copyfile(src, tmp)  # follows the cache's symlink to its blob
        os.replace(tmp, dest)
        blob = Path(os.path.realpath(src)).name
        if HEX64.fullmatch(blob) or HEX40.fullmatch(blob):
            etags[rel] = blob
    return etags


def _hub_hash(staging: Path, name: str, known: dict[str, str]) -> str | None:
    """The hash the Hub published for `name` (the ETag: LFS sha256 or git blob id), if known:
    from huggingface_hub's download record in `staging`, else `known` (cache blob names)."""
    if name in known:
        return known[name]
    try:
        from huggingface_hub._local_folder import read_download_metadata
    except ImportError:  # a private module: without it there is simply nothing to compare
        return None
    try:
        meta = read_download_metadata(staging, name)
    except Exception:
        return None
    etag = meta.etag.strip('"').lower() if meta is not None else None
    if etag and (HEX64.fullmatch(etag) or HEX40.fullmatch(etag)):
        return etag
    return None


def _staged_files(staging: Path) -> list[str]:
    names = []
    for path in staging.rglob("*"):
        rel = path.relative_to(staging)
        if rel.parts[0] == ".cache" or not path.is_file() or path.name.endswith(".incomplete"):
            continue
        names.append(rel.as_posix())
    return sorted(names)


def _discard_staged(staging: Path, name: str) -> None:
    """Remove a rejected file and huggingface_hub's record of it, so a retry downloads anew."""
    with contextlib.suppress(OSError):
        (staging / name).unlink()
    meta = staging / ".cache" / "huggingface" / "download" / f"{name}.metadata"
    with contextlib.suppress(OSError):
        meta.unlink()


# ---- verification -----------------------------------------------------------------------------


@dataclass
class _Mismatch:
    name: str
    found: str
    expected: str
    against: str  # "pin" | "hub" | "size"


def _check_staged(
    staging: Path,
    names: list[str],
    *,
    etags: dict[str, str],
    pins: dict[str, FileSpec],
    at_pinned_revision: bool,
    allow_unpinned: bool,
    progress: FetchProgress | None,
) -> tuple[list[FetchedFile], list[_Mismatch], list[str]]:
    results: list[FetchedFile] = []
    bad: list[_Mismatch] = []
    notes: list[str] = []
    for name in names:
        hub = _hub_hash(staging, name, etags)
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
                    f"{name} differs from the registry's pin ({_short(pin)}): accepted because "
                    "of --allow-unpinned; the lock records the new hash"
                )
                continue
            bad.append(_Mismatch(name, digest.sha256, pin, "pin"))
            continue
        if hub is not None:
            found = digest.sha256 if HEX64.fullmatch(hub) else digest.git_sha1
            if found != hub:
                bad.append(_Mismatch(name, found or "", hub, "hub"))
                continue
            results.append(FetchedFile(name, digest.sha256, digest.size, "hub"))
            continue
        results.append(FetchedFile(name, digest.sha256, digest.size, "recorded"))
    return results, bad, notes


def _mismatch_error(
    bad: list[_Mismatch], target: Target, commit: str, env: HubEnv, at_pinned: bool
) -> FetchError:
    first = bad[0]
    more = f" (and {len(bad) - 1} more: {', '.join(b.name for b in bad[1:])})" if bad[1:] else ""
    if first.against == "pin":
        message = (
            f"{first.name}: sha256 {first.found} is not the pinned {first.expected}{more}; "
            "the file was not kept"
        )
        if at_pinned:
            hint = (
                f"{env.endpoint} served other bytes for {target.repo}@{_short(commit)} than the "
                "registry pins: a corrupted mirror or a tampered download; check HF_ENDPOINT"
            )
        else:
            hint = (
                f"the repo re-uploaded {first.name} under the same name; fetch the pinned "
                f"revision {target.pinned_revision or '(none)'}, or pass --allow-unpinned to "
                "take these bytes"
            )
        return FetchError(message, hint)
    return FetchError(
        f"{first.name}: downloaded bytes do not match the hash the Hub publishes for it "
        f"({_short(first.found)} vs {_short(first.expected)}){more}; the file was not kept",
        "the download was corrupted on the way: run fetch again",
    )


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
        if not _matches(name, patterns):
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


# ---- placing the files ------------------------------------------------------------------------


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


def _lock_data(
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


# ---- the remote copy --------------------------------------------------------------------------


class RemoteOps(Protocol):
    """What fetch needs from the SSH layer (dflashctl/hosts/ssh.py) for one host."""

    host: str

    def upload(self, local: Path, remote_path: str) -> None: ...

    def run(self, argv: Sequence[str]) -> tuple[int, str, str]: ...

    def run_env(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        secret_env: Mapping[str, str],
        timeout: float,
    ) -> tuple[int, str, str]:
        """`argv` with `env` exported and `secret_env` read from stdin (never a command line)."""
        ...

    def default_python(self) -> str: ...


def remote_ops(host: str) -> RemoteOps:
    """The SSH layer's operations on `host` that fetch needs."""
    from dflashctl.hosts import ssh

    do_upload: Callable[..., Any] = ssh.upload
    do_run: Callable[..., Any] = ssh.run
    host_for: Callable[..., Any] = ssh.host_for

    class _Ops:
        def __init__(self) -> None:
            self.host = host

        def upload(self, local: Path, remote_path: str) -> None:
            do_upload(host, local, remote_path)

        def run(self, argv: Sequence[str]) -> tuple[int, str, str]:
            rc, out, err = do_run(host, list(argv), timeout=900.0)
            return int(rc), str(out), str(err)

        def _host(self) -> Any:
            return host_for(host)

        def run_env(
            self,
            argv: Sequence[str],
            *,
            env: Mapping[str, str],
            secret_env: Mapping[str, str],
            timeout: float,
        ) -> tuple[int, str, str]:
            from dflashctl.hosts.host import _secret_reads, env_assignments, quote_argv

            script = (
                _secret_reads(list(secret_env))
                + env_assignments(env)
                + "exec "
                + quote_argv(argv)
                + "\n"
            )
            stdin = "".join(f"{v}\n" for v in secret_env.values()).encode() or None
            res = self._host().sh(script, timeout=timeout, stdin=stdin, retry=False)
            return int(res.rc), str(res.stdout), str(res.stderr)

        def default_python(self) -> str:
            return str(getattr(self._host(), "python", None) or "python3")

    return _Ops()


def _parse_sums(text: str) -> dict[str, str]:
    """`sha256sum` output -> {path: sha256} (lines of other shapes are ignored)."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        sha, sep, path = line.partition("  ")
        sha = sha.strip().lstrip("\\")
        if sep and HEX64.fullmatch(sha):
            found[path] = sha
    return found


# Run on the host as `sh -c SCRIPT sh ARGS...`: every path is an argument (quoted by the SSH
# layer), never spliced into the script. Each remote command costs a round trip, so the steps
# are batched: one script before the upload, one after.
_PRESENT_SH = 'mkdir -p -- "$1" || exit 4; shift; sha256sum -- "$@" 2>/dev/null; exit 0'
_PLACE_SH = """
staging=$1 nfiles=$2; shift 2
i=0 bad=
for a in "$@"; do
  [ "$i" -ge $((nfiles * 3)) ] && break
  case $((i % 3)) in
    0) want=$a ;;
    1) staged=$a ;;
    2) got=$(sha256sum -- "$staged" 2>/dev/null) got=${got%% *}
       if [ "$got" != "$want" ]; then echo "BAD $got $staged"; rm -f -- "$staged"; bad=1; fi ;;
  esac
  i=$((i + 1))
done
[ -z "$bad" ] || exit 3
i=0
for a in "$@"; do
  if [ "$i" -lt $((nfiles * 3)) ]; then
    case $((i % 3)) in
      1) staged=$a ;;
      2) mkdir -p -- "$(dirname -- "$a")" && mv -f -- "$staged" "$a" || exit 4 ;;
    esac
  fi
  i=$((i + 1))
done
shift $((nfiles * 3))
rmdir -- "$staging" 2>/dev/null
sha256sum -- "$@" 2>/dev/null
exit 0
"""


def push_to_host(ops: RemoteOps, local_dir: Path, remote_dir: str) -> RemoteCopy:
    """Put the verified directory on the host and prove it landed by hashing it there.

    Files the host already has with the locked hash are not sent again. The others go to
    `<remote_dir>/.dflashctl-download/`, are re-hashed on the host and only then renamed into
    place (a file that arrived different is deleted there and nothing is placed); the lock
    goes last; a final `sha256sum` of every locked file on the host is the proof.
    """
    lock = read_lock(local_dir)
    if lock is None:
        raise FetchError(f"{local_dir} has no {LOCK_NAME} to push")
    files: dict[str, str] = dict(lock["files"])
    base = remote_dir.rstrip("/") or "/"
    staging = f"{base}/{STAGING_NAME}"
    finals = {n: f"{base}/{n}" for n in sorted(files)}

    rc, out, err = ops.run(["sh", "-c", _PRESENT_SH, "sh", staging, *finals.values()])
    if rc != 0:
        raise RemoteError(
            f"{ops.host}: cannot create {staging}: {err.strip()[:200]}",
            f"check that {base} is writable on {ops.host}",
        )
    present = _parse_sums(out)
    todo = [n for n in finals if present.get(finals[n]) != files[n]]
    for name in todo:
        ops.upload(local_dir / name, f"{staging}/{name}")
    lock_sha = hash_file(local_dir / LOCK_NAME).sha256
    ops.upload(local_dir / LOCK_NAME, f"{staging}/{LOCK_NAME}")
    moves = [(files[n], f"{staging}/{n}", finals[n]) for n in todo]
    moves.append((lock_sha, f"{staging}/{LOCK_NAME}", f"{base}/{LOCK_NAME}"))
    args = [a for triple in moves for a in triple]
    rc, out, err = ops.run(
        ["sh", "-c", _PLACE_SH, "sh", staging, str(len(moves)), *args, *finals.values()]
    )
    if rc == 3:
        line = next((ln for ln in out.splitlines() if ln.startswith("BAD ")), "BAD ? ?")
        _, got, staged = [*line.split(" ", 2), "?", "?"][:3]
        name = staged.rsplit(f"{STAGING_NAME}/", 1)[-1]
        raise RemoteError(
            f"{ops.host}: {name} arrived with other bytes than were sent "
            f"({_short(got)} vs {_short(files.get(name, lock_sha))}); nothing was put in place",
            "run fetch --host again; if it repeats, check the host's disk",
        )
    if rc != 0:
        raise RemoteError(
            f"{ops.host}: placing the files in {base} failed (exit {rc}): {err.strip()[:200]}",
            f"check that {base} is writable on {ops.host}",
        )
    final_hashes = _parse_sums(out)
    wrong = [n for n in finals if final_hashes.get(finals[n]) != files[n]]
    if wrong:
        raise RemoteError(
            f"{ops.host}: {wrong[0]} in {base} does not hash to the lock after the copy",
            "something else is writing there; check the directory on the host",
        )
    return RemoteCopy(ops.host, base, todo, {n: final_hashes[finals[n]] for n in finals})


# ---- the command ------------------------------------------------------------------------------


def default_directory(repo: str) -> Path:
    return Path.cwd() / repo.split("/", 1)[1]


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
    remote: Callable[[str], RemoteOps] | None = None,
) -> FetchReport:
    """Fetch DRAFTER into `directory` (default ./<repo name>), verified and locked.

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
    directory = (directory or default_directory(target.repo)).expanduser().absolute()
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"--dir {directory} exists and is not a directory")
    ops: RemoteOps | None = None
    remote_target = remote_dir or target.repo.split("/", 1)[1]
    if host is not None:
        ops = (remote or remote_ops)(host)
        if progress is not None:
            progress.step(f"reaching {host}")
        rc, _, err = ops.run(["mkdir", "-p", "--", remote_target])
        if rc != 0:
            raise RemoteError(
                f"{host}: cannot create {remote_target}: {err.strip()[:200]}",
                "pass --remote-dir with a writable directory on the host",
            )
    if ops is not None and remote_fetch:
        return fetch_on_host(
            ops,
            target,
            remote_dir=remote_target,
            patterns=patterns,
            allow_unpinned=allow_unpinned,
            python=python.strip() if python else ops.default_python(),
            verify=verify,
            progress=progress,
        )
    env = HubEnv.from_environ()
    pins = _pins(target.entry)
    notes: list[str] = []

    lock = read_lock(directory) if directory.is_dir() else None
    if progress is not None:
        progress.step(f"resolving {target.repo}@{target.requested}")
    commit, how = resolve_commit(target, env, lock)
    ref = None if HEX40.fullmatch(target.requested) else target.requested
    if ref is not None:
        notes.append(how if how.startswith("offline") else f"{how} (recorded in the lock)")
        if ref == "main":
            notes.append(f"unpinned: main was at {commit} when fetched (--allow-unpinned)")
    pinned_rev = target.pinned_revision
    at_pinned = pinned_rev is not None and commit == pinned_rev
    if target.entry is not None and pinned_rev is not None and not at_pinned:
        notes.append(
            f"the registry pins {target.entry.name} at {pinned_rev}; this is {commit}: "
            "file pins still apply"
        )

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
            return _finish(report, verify, ops, remote_target, progress)
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
    return _finish(report, verify, ops, remote_target, progress)


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
    created = not directory.exists()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        staging = directory / STAGING_NAME / commit
        staging.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _disk_error(e, directory) from None
    if progress is not None:
        progress.step(f"downloading {target.repo}@{_short(commit)}")
    skip = [f.name for f in kept]
    try:
        etags = _download(target.repo, commit, patterns, skip, staging, env, progress)
    except FetchError:
        _drop_empty_staging(directory, created)
        raise
    except OSError as e:
        _drop_empty_staging(directory, created)
        raise _disk_error(e, directory) from None
    names = [n for n in _staged_files(staging) if _matches(n, patterns) and n not in skip]
    if not names and not kept:
        raise FetchError(
            f"no file of {target.repo}@{_short(commit)} matches {', '.join(patterns)}",
            "check --include against the repo's file list",
        )
    missing_pins = [n for n in pins if _matches(n, patterns) and n not in names + skip]
    if missing_pins:
        raise FetchError(
            f"{target.repo}@{_short(commit)} has no {missing_pins[0]}, which the registry pins",
            "the repo's layout changed: fetch the pinned revision",
        )
    if progress is not None:
        progress.step("checking sha256")
    fetched, bad, check_notes = _check_staged(
        staging,
        names,
        etags=etags,
        pins=pins,
        at_pinned_revision=at_pinned,
        allow_unpinned=allow_unpinned,
        progress=progress,
    )
    notes += check_notes
    if bad:
        for b in bad:
            _discard_staged(staging, b.name)
        raise _mismatch_error(bad, target, commit, env, at_pinned)

    files = sorted(kept + fetched, key=lambda f: f.name)
    lock_path = directory / LOCK_NAME
    try:
        if lock_path.exists():
            lock_path.unlink()  # nothing may vouch for the directory while it changes
            fsync_dir(directory)
        backups, removed = _place(directory, staging, fetched, {f.name for f in files}, lock)
        data = _lock_data(target, commit, ref, patterns, files)
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


def _finish(
    report: FetchReport,
    verify: bool,
    ops: RemoteOps | None,
    remote_dir: str,
    progress: FetchProgress | None,
) -> FetchReport:
    """verify-config on what arrived, then the copy on the host."""
    names = {f.name for f in report.files}
    if verify and "config.json" in names:
        from dflashctl.drafter.verify import run_verify

        if progress is not None:
            progress.step("verify-config")
        report.verify = run_verify(report.directory, drafter=report.registry)
    elif verify:
        report.notes.append("no config.json fetched: verify-config skipped")
    if ops is not None:
        if progress is not None:
            progress.step(f"copying to {ops.host} and hashing it there")
        report.remote = push_to_host(ops, report.directory, remote_dir)
    return report


# ---- the download on the host -----------------------------------------------------------------

# What the host's fetch gets from this environment: the Hub to use and how to talk to it (never
# local paths such as HF_HOME). Secrets go through stdin, never a command line.
FORWARDED_ENV = (
    "HF_ENDPOINT",
    "HF_HUB_DISABLE_XET",
    "HF_HUB_ETAG_TIMEOUT",
    "HF_HUB_DOWNLOAD_TIMEOUT",
    "HF_HUB_ENABLE_HF_TRANSFER",
)
SECRET_ENV = ("HF_TOKEN",)
REMOTE_FETCH_TIMEOUT = 6 * 3600.0

_REHASH_SH = 'lock=$1; shift; sha256sum -- "$@" 2>/dev/null; echo "--- lock"; cat -- "$lock"'


def _remote_error_line(err: str) -> tuple[str | None, str | None]:
    message = hint = None
    for line in err.splitlines():
        if line.startswith("Error: ") and message is None:
            message = line[len("Error: ") :].strip()
        elif line.startswith("Hint: ") and hint is None:
            hint = line[len("Hint: ") :].strip()
    return message, hint


def fetch_on_host(
    ops: RemoteOps,
    target: Target,
    *,
    remote_dir: str,
    patterns: list[str],
    allow_unpinned: bool,
    python: str,
    verify: bool = True,
    progress: FetchProgress | None = None,
) -> FetchReport:
    """Run `python -m dflashctl fetch` on the host (it downloads from the Hub itself), then
    re-hash every file there and compare with the host's lock and with this registry's pins.

    The host is asked for the repo at the requested revision, not for a registry name: its
    registry may differ from this one, so the pins checked are the ones here. A file that
    differs from its pin is removed on the host with the lock (nothing vouches for it).
    """
    host = ops.host
    argv = [python, "-m", "dflashctl", "fetch", target.repo, "--revision", target.requested]
    argv += ["--dir", remote_dir, "--json"]
    for pattern in patterns:
        argv += ["--include", pattern]
    if allow_unpinned:
        argv.append("--allow-unpinned")
    env = {k: os.environ[k] for k in FORWARDED_ENV if os.environ.get(k)}
    secrets = {k: os.environ[k] for k in SECRET_ENV if os.environ.get(k)}
    if progress is not None:
        progress.step(f"downloading {target.repo}@{_short(target.requested)} on {host}")
    rc, out, err = ops.run_env(argv, env=env, secret_env=secrets, timeout=REMOTE_FETCH_TIMEOUT)
    if rc == 2:
        message, hint = _remote_error_line(err)
        if message is not None:
            raise FetchError(f"{host}: fetch there failed: {message}", hint)
    if "No module named dflashctl" in err or rc in (126, 127):
        raise RemoteError(
            f"{host}: `{python} -m dflashctl` cannot run there: {err.strip()[-200:] or rc}",
            "install dflashctl on the host, or pass --python with the interpreter that has it",
        )
    try:
        data = json.loads(out) if rc in (0, 1) else None
    except ValueError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("files"), list):
        raise RemoteError(
            f"{host}: fetch there exited with {rc} without a report: "
            f"{(err.strip() or out.strip())[-200:] or 'no output'}",
            "run the same fetch on the host by hand to see what it says",
        )
    base = str(data.get("directory") or remote_dir).rstrip("/") or "/"
    commit = str(data.get("revision") or "")
    remote_files = {str(f["name"]): f for f in data["files"] if isinstance(f, dict)}

    # The proof: every file hashed on the host, against the host's lock and the pins here.
    if progress is not None:
        progress.step(f"hashing the files on {host}")
    finals = {n: f"{base}/{n}" for n in sorted(remote_files)}
    rc, sums, err = ops.run(["sh", "-c", _REHASH_SH, "sh", f"{base}/{LOCK_NAME}", *finals.values()])
    sums_part, _, lock_text = sums.partition("--- lock\n")
    hashed = _parse_sums(sums_part)
    try:
        lock_files = json.loads(lock_text).get("files")
    except (ValueError, AttributeError):
        lock_files = None
    if rc != 0 or not isinstance(lock_files, dict):
        raise RemoteError(
            f"{host}: cannot read {base}/{LOCK_NAME} after the fetch there: "
            f"{err.strip()[:200] or 'not a lock'}",
            "run the fetch on the host again",
        )
    wrong = [n for n in finals if hashed.get(finals[n]) != lock_files.get(n)]
    if wrong or set(lock_files) != set(finals):
        name = wrong[0] if wrong else sorted(set(lock_files) ^ set(finals))[0]
        raise RemoteError(
            f"{host}: {name} in {base} does not hash to the host's lock after the fetch",
            "something else is writing there; check the directory on the host",
        )
    pins = _pins(target.entry)
    at_pinned = target.pinned_revision is not None and commit == target.pinned_revision
    notes = [str(n) for n in data.get("notes") or []]
    files: list[FetchedFile] = []
    bad: list[_Mismatch] = []
    for name in sorted(finals):
        sha = hashed[finals[name]]
        size = int(remote_files[name].get("size") or 0)
        spec = pins.get(name)
        status = str(remote_files[name].get("status") or "recorded")
        if spec is not None and spec.sha256 is not None:
            if sha == spec.sha256:
                status = "pinned"
            elif allow_unpinned and not at_pinned:
                status = "accepted"
                notes.append(
                    f"{name} differs from the registry's pin ({_short(spec.sha256)}): accepted "
                    "because of --allow-unpinned"
                )
            else:
                bad.append(_Mismatch(name, sha, spec.sha256, "pin"))
        files.append(FetchedFile(name, sha, size, status, spec.sha256 if spec else None))
    missing = [n for n in pins if _matches(n, patterns) and n not in finals]
    if bad:
        ops.run(["rm", "-f", "--", f"{base}/{LOCK_NAME}", *(finals[b.name] for b in bad)])
        error = _mismatch_error(bad, target, commit, HubEnv.from_environ(), at_pinned)
        raise FetchError(f"{host}: {error.message}; removed there with the lock", error.hint)
    if missing:
        raise FetchError(
            f"{host}: {target.repo}@{_short(commit)} has no {missing[0]}, which the registry pins",
            "the repo's layout changed: fetch the pinned revision",
        )
    if target.entry is not None and target.pinned_revision and not at_pinned:
        notes.append(
            f"the registry pins {target.entry.name} at {target.pinned_revision}; this is "
            f"{commit}: file pins still apply"
        )
    notes.append(f"fetched on {host} by `{python} -m dflashctl fetch`; nothing was stored here")
    report = FetchReport(
        repo=target.repo,
        revision=commit,
        ref=data.get("ref"),
        registry=target.entry.name if target.entry is not None else None,
        directory=Path(base),
        lock_path=Path(base) / LOCK_NAME,
        action=str(data.get("action") or "downloaded"),
        files=files,
        fetched_at=str(data.get("fetched_at") or ""),
        patterns=patterns,
        downloaded=[str(n) for n in data.get("downloaded") or []],
        removed=[str(n) for n in data.get("removed") or []],
        backups=[str(n) for n in data.get("backups") or []],
        notes=notes,
        remote=RemoteCopy(host, base, [], {n: hashed[finals[n]] for n in finals}),
        fetched_on=host,
    )
    if verify and "config.json" in finals:
        from dflashctl.drafter.verify import run_verify

        if progress is not None:
            progress.step(f"verify-config on {host}")
        report.verify = run_verify(Path(base), drafter=report.registry, host=host)
    elif verify:
        report.notes.append("no config.json fetched: verify-config skipped")
    return report
