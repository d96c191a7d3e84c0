"""The Hugging Face Hub as dflashctl uses it (noun; never prints): the environment
huggingface_hub reads (`HubEnv`), downloads into a staging folder through `snapshot_download`, the
hashes the Hub publishes, its errors turned into `FetchError`s with a hint, and its progress bars
turned into a caller's callbacks. huggingface_hub is imported inside the functions, so
`dflashctl --help` never loads it."""

from __future__ import annotations

import contextlib
import fnmatch
import math
import os
import shutil
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from dflashctl.drafter.registry import HEX40, HEX64
from dflashctl.errors import FetchError

DEFAULT_ENDPOINT = "https://huggingface.co"


class FetchProgress(Protocol):
    """What a caller may show while fetch runs (the CLI draws rich bars; tests pass None).

    Called from huggingface_hub's worker threads too: implementations must be thread-safe.
    """

    def step(self, text: str) -> None: ...

    def download(self, done: int, total: int | None) -> None: ...

    def hashing(self, name: str, done: int, total: int) -> None: ...


def tqdm_class(progress: FetchProgress | None) -> type:
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


@dataclass(frozen=True)
class HubEnv:
    endpoint: str
    offline: bool
    cache_dir: Path
    timeout: float = 10.0  # seconds for a metadata request (HF_HUB_ETAG_TIMEOUT, as the client)

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
        try:
            timeout = float(env.get("HF_HUB_ETAG_TIMEOUT") or 10)
        except ValueError:
            timeout = 10.0
        if not math.isfinite(timeout) or timeout <= 0:
            timeout = 10.0
        return cls(endpoint, offline, cache.expanduser(), timeout)


def hub_error(e: BaseException, *, repo: str, revision: str, env: HubEnv) -> FetchError:
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
            f"a file of {repo}@{short_sha(revision)} is missing on the Hub: {first_line(e)}",
            "check --include against the repo's files",
        )
    if isinstance(e, hf.OfflineModeIsEnabled) or (
        isinstance(e, hf.LocalEntryNotFoundError) and env.offline
    ):
        return FetchError(
            f"offline mode (HF_HUB_OFFLINE) and {repo}@{short_sha(revision)} is not on disk",
            "run fetch once with network access (unset HF_HUB_OFFLINE), or copy the files here",
        )
    if isinstance(e, hf.LocalEntryNotFoundError | httpx2.TransportError):
        return FetchError(
            f"cannot reach {env.endpoint} to download {repo}@{short_sha(revision)}",
            "check the network, a proxy, or HF_ENDPOINT; once downloaded, fetch works offline",
        )
    if isinstance(e, hf.HfHubHTTPError):
        status = e.response.status_code if e.response is not None else "?"
        return FetchError(
            f"the Hub answered HTTP {status} for {repo}@{short_sha(revision)}",
            "retry later; a download that stopped halfway resumes where it stopped",
        )
    if isinstance(e, OSError) and "Consistency check failed" in str(e):
        return FetchError(
            f"a download from {env.endpoint} was cut short: {first_line(e)}",
            "run fetch again: nothing incomplete was kept under a final name",
        )
    return FetchError(f"download of {repo} failed: {type(e).__name__}: {first_line(e)}")


def first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


@contextlib.contextmanager
def quiet_hub() -> Iterator[None]:
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


def cache_folder(env: HubEnv, repo: str) -> Path:
    return env.cache_dir / ("models--" + repo.replace("/", "--"))


def download(
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
        "tqdm_class": tqdm_class(progress),
    }
    with quiet_hub():
        try:
            snapshot_download(repo, local_dir=staging, local_files_only=env.offline, **kwargs)
            return {}
        except hf.LocalEntryNotFoundError as e:
            if not env.offline:
                raise hub_error(e, repo=repo, revision=commit, env=env) from e
            first: BaseException = e
        except Exception as e:
            raise hub_error(e, repo=repo, revision=commit, env=env) from e
        # Offline and not in staging: a snapshot in the shared cache (HF_HOME) will do.
        try:
            snapshot = Path(snapshot_download(repo, local_files_only=True, **kwargs))
        except Exception:
            raise hub_error(first, repo=repo, revision=commit, env=env) from first
    etags: dict[str, str] = {}
    for src in sorted(snapshot.rglob("*")):
        rel = src.relative_to(snapshot).as_posix()
        if not src.is_file() or not matches_any(rel, patterns) or rel in skip:
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


def published_hashes(repo: str, commit: str, env: HubEnv) -> dict[str, str]:
    """The hash the Hub publishes for every file at `commit` (its tree listing, one request):
    the LFS sha256, else the git blob id. Offline, nothing."""
    if env.offline:
        return {}
    from huggingface_hub import HfApi

    hashes: dict[str, str] = {}
    with quiet_hub():
        try:
            entries = HfApi(endpoint=env.endpoint).list_repo_tree(
                repo, revision=commit, recursive=True
            )
            for e in entries:
                lfs = getattr(e, "lfs", None)
                value = (getattr(lfs, "sha256", None) if lfs else None) or getattr(
                    e, "blob_id", None
                )
                if isinstance(value, str) and (HEX64.fullmatch(value) or HEX40.fullmatch(value)):
                    hashes[e.path] = value.lower()
        except Exception as e:
            raise hub_error(e, repo=repo, revision=commit, env=env) from e
    return hashes


def download_snapshot(
    repo: str, commit: str, patterns: list[str], env: HubEnv, progress: FetchProgress | None
) -> tuple[Path, dict[str, str]]:
    """snapshot_download into the shared cache (HF_HOME/HF_HUB_CACHE), where vLLM and SGLang
    given the hub id find the same files: (the snapshot folder, each file's blob name, which
    is the hash the Hub published for it)."""
    from huggingface_hub import snapshot_download

    with quiet_hub():
        try:
            folder = snapshot_download(
                repo,
                revision=commit,
                allow_patterns=patterns,
                endpoint=env.endpoint,
                cache_dir=str(env.cache_dir),
                local_files_only=env.offline,
                tqdm_class=tqdm_class(progress),
            )
        except Exception as e:
            raise hub_error(e, repo=repo, revision=commit, env=env) from e
    snapshot = Path(folder)
    etags: dict[str, str] = {}
    for path in snapshot.rglob("*"):
        if path.is_file():
            blob = Path(os.path.realpath(path)).name
            if HEX64.fullmatch(blob) or HEX40.fullmatch(blob):
                etags[path.relative_to(snapshot).as_posix()] = blob
    return snapshot, etags


def short_sha(sha: str | None) -> str:
    return sha[:12] if sha else "—"


def matches_any(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatch(name, p) for p in patterns)
