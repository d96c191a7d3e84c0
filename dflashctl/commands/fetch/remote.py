"""`fetch --host`: the verified directory pushed over SFTP and re-hashed on the host
(`push_to_host`), or, with `--remote-fetch`, the host's own `python -m dflashctl fetch` (HF_ENDPOINT
in its environment, HF_TOKEN on stdin) and its files re-hashed there (`fetch_on_host`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from dflashctl.commands.fetch.report import FetchedFile, FetchReport, RemoteCopy
from dflashctl.commands.fetch.target import STAGING_NAME, Mismatch, Target, mismatch_error, pins_of
from dflashctl.drafter.lock import read_lock
from dflashctl.drafter.registry import HEX64, LOCK_NAME
from dflashctl.errors import (
    FetchError,
    RemoteError,
)
from dflashctl.files import hash_file
from dflashctl.hosts.host import Host
from dflashctl.hub import FetchProgress, HubEnv, matches_any, short_sha

# Commands of the copy and the re-hash: a slow disk hashing a large drafter still fits.
COMMAND_TIMEOUT = 900.0


def _parse_sums(text: str) -> dict[str, str]:
    """`sha256sum` output -> {path: sha256} (lines of other shapes are ignored)."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        sha, sep, path = line.partition("  ")
        sha = sha.strip().lstrip("\\")
        if sep and HEX64.fullmatch(sha):
            found[path] = sha
    return found


# Run on the host as `sh -c SCRIPT sh ARGS...`: every path is an argument (quoted by
# `Host.run`), never spliced into the script. Each remote command costs a round trip, so the steps
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


def push_to_host(host: Host, local_dir: Path, remote_dir: str) -> RemoteCopy:
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

    label = host.label
    res = host.run(
        ["sh", "-c", _PRESENT_SH, "sh", staging, *finals.values()], timeout=COMMAND_TIMEOUT
    )
    if res.rc != 0:
        raise RemoteError(
            f"{label}: cannot create {staging}: {res.stderr.strip()[:200]}",
            f"check that {base} is writable on {label}",
        )
    present = _parse_sums(res.stdout)
    todo = [n for n in finals if present.get(finals[n]) != files[n]]
    for name in todo:
        host.upload(local_dir / name, f"{staging}/{name}")
    lock_sha = hash_file(local_dir / LOCK_NAME).sha256
    host.upload(local_dir / LOCK_NAME, f"{staging}/{LOCK_NAME}")
    moves = [(files[n], f"{staging}/{n}", finals[n]) for n in todo]
    moves.append((lock_sha, f"{staging}/{LOCK_NAME}", f"{base}/{LOCK_NAME}"))
    args = [a for triple in moves for a in triple]
    res = host.run(
        ["sh", "-c", _PLACE_SH, "sh", staging, str(len(moves)), *args, *finals.values()],
        timeout=COMMAND_TIMEOUT,
    )
    rc, out, err = res.rc, res.stdout, res.stderr
    if rc == 3:
        line = next((ln for ln in out.splitlines() if ln.startswith("BAD ")), "BAD ? ?")
        _, got, staged = [*line.split(" ", 2), "?", "?"][:3]
        name = staged.rsplit(f"{STAGING_NAME}/", 1)[-1]
        raise RemoteError(
            f"{label}: {name} arrived with other bytes than were sent "
            f"({short_sha(got)} vs {short_sha(files.get(name, lock_sha))}); "
            "nothing was put in place",
            "run fetch --host again; if it repeats, check the host's disk",
        )
    if rc != 0:
        raise RemoteError(
            f"{label}: placing the files in {base} failed (exit {rc}): {err.strip()[:200]}",
            f"check that {base} is writable on {label}",
        )
    final_hashes = _parse_sums(out)
    wrong = [n for n in finals if final_hashes.get(finals[n]) != files[n]]
    if wrong:
        raise RemoteError(
            f"{label}: {wrong[0]} in {base} does not hash to the lock after the copy",
            "something else is writing there; check the directory on the host",
        )
    return RemoteCopy(label, base, todo, {n: final_hashes[finals[n]] for n in finals})


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
    host: Host,
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
    label = host.label
    argv = [python, "-m", "dflashctl", "fetch", target.repo, "--revision", target.requested]
    argv += ["--dir", remote_dir, "--json"]
    for pattern in patterns:
        argv += ["--include", pattern]
    if allow_unpinned:
        argv.append("--allow-unpinned")
    env = {k: os.environ[k] for k in FORWARDED_ENV if os.environ.get(k)}
    secrets = {k: os.environ[k] for k in SECRET_ENV if os.environ.get(k)}
    if progress is not None:
        progress.step(f"downloading {target.repo}@{short_sha(target.requested)} on {label}")
    res = host.run(argv, env=env, secret_env=secrets, timeout=REMOTE_FETCH_TIMEOUT, retry=False)
    rc, out, err = res.rc, res.stdout, res.stderr
    if rc == 2:
        message, hint = _remote_error_line(err)
        if message is not None:
            raise FetchError(f"{label}: fetch there failed: {message}", hint)
    if "No module named dflashctl" in err or rc is None or rc == 126:  # None: not found
        raise RemoteError(
            f"{label}: `{python} -m dflashctl` cannot run there: "
            f"{err.strip()[-200:] or (127 if rc is None else rc)}",
            "install dflashctl on the host, or pass --python with the interpreter that has it",
        )
    try:
        data = json.loads(out) if rc in (0, 1) else None
    except ValueError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("files"), list):
        raise RemoteError(
            f"{label}: fetch there exited with {rc} without a report: "
            f"{(err.strip() or out.strip())[-200:] or 'no output'}",
            "run the same fetch on the host by hand to see what it says",
        )
    base = str(data.get("directory") or remote_dir).rstrip("/") or "/"
    commit = str(data.get("revision") or "")
    remote_files = {str(f["name"]): f for f in data["files"] if isinstance(f, dict)}

    # The proof: every file hashed on the host, against the host's lock and the pins here.
    if progress is not None:
        progress.step(f"hashing the files on {label}")
    finals = {n: f"{base}/{n}" for n in sorted(remote_files)}
    res = host.run(
        ["sh", "-c", _REHASH_SH, "sh", f"{base}/{LOCK_NAME}", *finals.values()],
        timeout=COMMAND_TIMEOUT,
    )
    rc, sums, err = res.rc, res.stdout, res.stderr
    sums_part, _, lock_text = sums.partition("--- lock\n")
    hashed = _parse_sums(sums_part)
    try:
        lock_files = json.loads(lock_text).get("files")
    except (ValueError, AttributeError):
        lock_files = None
    if rc != 0 or not isinstance(lock_files, dict):
        raise RemoteError(
            f"{label}: cannot read {base}/{LOCK_NAME} after the fetch there: "
            f"{err.strip()[:200] or 'not a lock'}",
            "run the fetch on the host again",
        )
    wrong = [n for n in finals if hashed.get(finals[n]) != lock_files.get(n)]
    if wrong or set(lock_files) != set(finals):
        name = wrong[0] if wrong else sorted(set(lock_files) ^ set(finals))[0]
        raise RemoteError(
            f"{label}: {name} in {base} does not hash to the host's lock after the fetch",
            "something else is writing there; check the directory on the host",
        )
    pins = pins_of(target.entry)
    at_pinned = target.pinned_revision is not None and commit == target.pinned_revision
    notes = [str(n) for n in data.get("notes") or []]
    files: list[FetchedFile] = []
    bad: list[Mismatch] = []
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
                    f"{name} differs from the registry's pin ({short_sha(spec.sha256)}): accepted "
                    "because of --allow-unpinned"
                )
            else:
                bad.append(Mismatch(name, sha, spec.sha256, "pin"))
        files.append(FetchedFile(name, sha, size, status, spec.sha256 if spec else None))
    missing = [n for n in pins if matches_any(n, patterns) and n not in finals]
    if bad:
        host.run(
            ["rm", "-f", "--", f"{base}/{LOCK_NAME}", *(finals[b.name] for b in bad)],
            timeout=COMMAND_TIMEOUT,
        )
        error = mismatch_error(bad, target, commit, HubEnv.from_environ(), at_pinned)
        raise FetchError(f"{label}: {error.message}; removed there with the lock", error.hint)
    if missing:
        raise FetchError(
            f"{label}: {target.repo}@{short_sha(commit)} has no {missing[0]}, "
            "which the registry pins",
            "the repo's layout changed: fetch the pinned revision",
        )
    if target.entry is not None and target.pinned_revision and not at_pinned:
        notes.append(
            f"the registry pins {target.entry.name} at {target.pinned_revision}; this is "
            f"{commit}: file pins still apply"
        )
    notes.append(f"fetched on {label} by `{python} -m dflashctl fetch`; nothing was stored here")
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
        remote=RemoteCopy(label, base, [], {n: hashed[finals[n]] for n in finals}),
        fetched_on=label,
    )
    if verify and "config.json" in finals:
        from dflashctl.drafter.verify import run_verify

        if progress is not None:
            progress.step(f"verify-config on {label}")
        report.verify = run_verify(Path(base), drafter=report.registry, host=label)
    elif verify:
        report.notes.append("no config.json fetched: verify-config skipped")
    return report
