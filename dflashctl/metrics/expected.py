"""Which drafter a log describes, and the acceptance range the registry measured for it.

Without a range a 35 % regression passes as healthy, so the verdict looks for one wherever it
can be found, in this order: `--drafter NAME`; a deployment dflashctl started whose log this is
(its record names the drafter); the drafter the log's own speculative config line names (vLLM
`model='…'`, SGLang `speculative_draft_model_path=…`), by registry name, repo, hub-cache folder
or directory name; that directory's `dflashctl.lock.json` (or its config.json, identified by
structure) when the log is a local file and the directory exists here. No network, no printing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dflashctl.errors import DflashError
from dflashctl.metrics.window import Expected, MetricsState


@dataclass(frozen=True)
class Found:
    expected: Expected
    block_size: int | None


def _entry_found(entry: Any, found_by: str) -> Found:
    exp = getattr(entry, "expected_acceptance", None)
    lo = float(exp.min) if exp is not None else None
    hi = float(exp.max) if exp is not None else None
    block = getattr(entry, "block_size", None)
    return Found(Expected(entry.name, lo, hi, found_by), block if isinstance(block, int) else None)


def _hints(model: str) -> list[str]:
    """Names a model string may be known by: itself, a hub-cache `models--org--name` folder,
    the last path component."""
    m = model.strip().rstrip("/")
    out = [m]
    for part in m.split("/"):
        if part.startswith("models--"):
            out.append(part[len("models--") :].replace("--", "/", 1))
    out.append(m.rsplit("/", 1)[-1])
    return [h for h in dict.fromkeys(out) if h]


def drafter_named_in_log(state: MetricsState) -> str | None:
    cfg = state.spec_config or {}
    for key in ("model", "speculative_draft_model_path", "draft_model"):
        v = cfg.get(key)
        if isinstance(v, str) and v and v not in ("None", "[ngram]"):
            return v
    return None


def by_name(name: str, found_by: str) -> Found | None:
    from dflashctl.drafter.registry import find_entry

    for hint in _hints(name):
        entry = find_entry(hint)
        if entry is not None:
            return _entry_found(entry, found_by)
    return None


def by_directory(directory: Path) -> Found | None:
    """A drafter directory on this machine: its lock file, else its config.json's structure."""
    from dflashctl.drafter.lock import read_lock
    from dflashctl.drafter.registry import LOCK_NAME, identify_explained

    if not directory.is_dir():
        return None
    try:
        lock = read_lock(directory)
    except DflashError:
        lock = None
    cfg: dict[str, Any] = {}
    cfg_path = directory / "config.json"
    if cfg_path.is_file():
        from dflashctl.drafter.config import read_json_object

        try:
            cfg = read_json_object(cfg_path, what="config")
        except DflashError:
            cfg = {}
    if lock is None and not cfg:
        return None
    ident = identify_explained(cfg, lock, path=directory)
    if ident.entry is None:
        return None
    how = f"{directory / LOCK_NAME}" if lock is not None else f"{cfg_path} ({ident.how})"
    return _entry_found(ident.entry, how)


def by_deployment(source: str, host: str | None) -> Found | None:
    """A server dflashctl started whose log file is `source` knows its drafter."""
    from dflashctl.server.deployments import all_deployments

    try:
        deps = all_deployments()
    except DflashError:
        return None
    want = source if host else str(Path(source).resolve())
    for dep in deps:
        if not dep.drafter or (dep.host or None) != (host or None):
            continue
        log = dep.log if host else str(Path(dep.log).resolve())
        if log != want:
            continue
        found = by_name(dep.drafter, f"deployment {dep.name}")
        if found is None and not host:
            found = by_directory(Path(dep.drafter))
            if found is not None:
                found = Found(
                    Expected(
                        found.expected.drafter,
                        found.expected.min,
                        found.expected.max,
                        f"deployment {dep.name} ({dep.drafter})",
                    ),
                    found.block_size,
                )
        if found is not None:
            return found
    return None


def by_server(url: str, drafter: str | None = None, host: str | None = None) -> Found | None:
    """A server dflashctl started knows its drafter: `drafter` when the caller has the record
    (a deployment name was given), else the record whose URL is `url`."""
    from dflashctl.server.client import normalize_url
    from dflashctl.server.deployments import all_deployments

    if drafter is None:
        try:
            deps = all_deployments()
        except DflashError:
            return None
        for dep in deps:
            if dep.drafter and normalize_url(dep.url) == normalize_url(url):
                drafter, host = dep.drafter, dep.host
                break
    if not drafter:
        return None
    found = by_name(drafter, f"the deployment's drafter ({drafter})")
    if found is None and not host:
        found = by_directory(Path(drafter))
    return found


def find_expected(state: MetricsState, *, source: str, host: str | None) -> Found | None:
    """The expected range for the drafter this log describes, or None when nothing names it.
    `source` is the log's path as given ("stdin" and URLs never match a file)."""
    local = not host and source not in ("-", "stdin") and "://" not in source
    if local or host:
        found = by_deployment(source, host)
        if found is not None:
            return found
    named = drafter_named_in_log(state)
    if named:
        found = by_name(named, f"the log's speculative config ({named})")
        if found is not None:
            return found
        if local and named.startswith("/"):
            return by_directory(Path(named))
    return None
