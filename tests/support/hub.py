"""A Hugging Face Hub-compatible HTTP server on 127.0.0.1 for tests, serving repos from disk.

Just the endpoints the real huggingface_hub client (2.4) calls for `snapshot_download`,
`hf_hub_download` and `model_info`/`repo_info`:

- `GET /api/models/{org}/{name}[/revision/{rev}]`: repo info with the resolved commit `sha`;
- `GET /api/models/{org}/{name}/tree/{rev}[/{path}]?recursive=..`: the file listing, each file
  with its git blob id and, for LFS files (`*.safetensors`, `*.bin`), `lfs.oid` = sha256;
- `HEAD`/`GET /{org}/{name}/resolve/{rev}/{path}`: the bytes, with `X-Repo-Commit`, a quoted
  `ETag` (git blob sha1, or the sha256 for LFS files, which also get `X-Linked-Etag` and
  `X-Linked-Size`), the real `Content-Length` on HEAD too, and `Range` for resumed downloads.

Errors carry the Hub's `X-Error-Code`: a missing repo is 401 `RepoNotFound` without a token
(404 with one), an unknown branch or commit 404 `RevisionNotFound`, a missing file 404
`EntryNotFound`, a gated repo 401 (no token) / 403 (wrong token) `GatedRepo`.

The repos live in a directory the test builds with `HubRepos`:
`ROOT/{org}/{name}/commits/{sha}/<files>`, `ROOT/{org}/{name}/refs.json` (`{"main": sha}`), and
`ROOT/{org}/{name}/gated.json` (`{"token": "..."}`) for a gated repo. Test-only knobs on
`HubServer.faults` make it misbehave on purpose: serve other bytes than the listing says
(`tamper`), drop a connection mid-file once (`cut_once`), or answer 500 (`error500`).
Every request is logged in `HubServer.requests`, so a test can prove none was made.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

HEX40 = re.compile(r"[0-9a-f]{40}")
LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")


def git_blob_sha1(data: bytes) -> str:
    """The id git gives a blob: sha1 of `blob <len>\\0` + bytes (what the Hub calls `oid`)."""
    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def is_lfs(path: str) -> bool:
    return path.endswith(LFS_SUFFIXES)


class HubRepos:
    """Builds the on-disk layout the server reads: commits of files, refs, gating."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._counter = 0

    def repo_dir(self, repo_id: str) -> Path:
        return self.root / repo_id

    def commit(
        self,
        repo_id: str,
        files: dict[str, bytes],
        *,
        parent: str | None = None,
        branch: str | None = "main",
    ) -> str:
        """A new commit: `parent`'s files updated with `files`; moves `branch` onto it."""
        self._counter += 1
        seed = json.dumps(
            [repo_id, self._counter, sorted((k, sha256(v)) for k, v in files.items())]
        )
        sha = hashlib.sha1(seed.encode()).hexdigest()
        folder = self.repo_dir(repo_id) / "commits" / sha
        if parent is not None:
            shutil.copytree(self.repo_dir(repo_id) / "commits" / parent, folder)
        for name, data in files.items():
            target = folder / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        folder.mkdir(parents=True, exist_ok=True)
        if branch is not None:
            self.set_ref(repo_id, branch, sha)
        return sha

    def set_ref(self, repo_id: str, name: str, sha: str) -> None:
        refs_file = self.repo_dir(repo_id) / "refs.json"
        refs = json.loads(refs_file.read_text()) if refs_file.exists() else {}
        refs[name] = sha
        refs_file.write_text(json.dumps(refs))

    def gate(self, repo_id: str, token: str) -> None:
        """Make the repo gated: downloads need `Authorization: Bearer <token>`."""
        (self.repo_dir(repo_id) / "gated.json").write_text(json.dumps({"token": token}))


@dataclass
class Faults:
    """Misbehaviour on purpose, keyed by file path in the repo."""

    tamper: set[str] = field(default_factory=set)  # flip bytes, keep size and ETag
    cut_once: set[str] = field(default_factory=set)  # close the socket halfway, once
    error500: set[str] = field(default_factory=set)  # 500 on GET of the bytes


class _HubError(Exception):
    def __init__(self, status: int, code: str | None, message: str) -> None:
        self.status, self.code, self.message = status, code, message


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        # Without it every small response waits ~40 ms (Nagle + delayed ACK).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # ---- plumbing ---------------------------------------------------------------------------

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        if "Content-Length" not in (headers or {}):
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)

    def _json(self, data: Any) -> None:
        body = json.dumps(data).encode()
        self._send(200, body, {"Content-Type": "application/json"})

    def _error(self, e: _HubError) -> None:
        headers = {"X-Error-Message": e.message, "Content-Type": "application/json"}
        if e.code:
            headers["X-Error-Code"] = e.code
        self._send(e.status, json.dumps({"error": e.message}).encode(), headers)

    def _token(self) -> str | None:
        auth = self.headers.get("Authorization") or ""
        return auth[len("Bearer ") :] if auth.startswith("Bearer ") else None

    # ---- repo lookups -----------------------------------------------------------------------

    def _repo(self, repo_id: str) -> Path:
        folder = self.server.root / repo_id
        if not (folder / "commits").is_dir():
            if self._token() is None:
                raise _HubError(401, "RepoNotFound", "Repository not found")
            raise _HubError(404, "RepoNotFound", "Repository not found")
        return folder

    def _commit(self, folder: Path, revision: str) -> str:
        refs_file = folder / "refs.json"
        refs = json.loads(refs_file.read_text()) if refs_file.exists() else {}
        if revision in refs:
            return str(refs[revision])
        if HEX40.fullmatch(revision) and (folder / "commits" / revision).is_dir():
            return revision
        raise _HubError(404, "RevisionNotFound", f"Invalid rev id: {revision}")

    def _check_gate(self, folder: Path) -> None:
        gated = folder / "gated.json"
        if not gated.exists():
            return
        token = self._token()
        if token is None:
            raise _HubError(401, "GatedRepo", "Access to this model is restricted.")
        if token != json.loads(gated.read_text())["token"]:
            raise _HubError(403, "GatedRepo", "Access to this model is restricted.")

    @staticmethod
    def _files(commit_dir: Path) -> list[Path]:
        return sorted(p for p in commit_dir.rglob("*") if p.is_file())

    # ---- endpoints --------------------------------------------------------------------------

    def do_HEAD(self) -> None:
        self._dispatch()

    def do_GET(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        url = urlsplit(self.path)
        path = url.path
        self.server.requests.append((self.command, path))
        try:
            if path.startswith("/api/models/"):
                self._api(path[len("/api/models/") :], parse_qs(url.query))
            elif "/resolve/" in path:
                self._resolve(path.lstrip("/"))
            else:
                raise _HubError(404, None, f"no route for {path}")
        except _HubError as e:
            self._error(e)

    def _api(self, rest: str, query: dict[str, list[str]]) -> None:
        parts = rest.split("/")
        if len(parts) < 2:
            raise _HubError(404, None, "bad repo id")
        repo_id = "/".join(parts[:2])
        folder = self._repo(repo_id)
        tail = parts[2:]
        if not tail or tail[0] == "revision":
            revision = unquote(tail[1]) if len(tail) > 1 else "main"
            sha = self._commit(folder, revision)
            commit_dir = folder / "commits" / sha
            self._json(
                {
                    "id": repo_id,
                    "modelId": repo_id,
                    "sha": sha,
                    "private": False,
                    "gated": "manual" if (folder / "gated.json").exists() else False,
                    "disabled": False,
                    "tags": [],
                    "siblings": [
                        {"rfilename": p.relative_to(commit_dir).as_posix()}
                        for p in self._files(commit_dir)
                    ],
                }
            )
            return
        if tail[0] == "tree" and len(tail) >= 2:
            sha = self._commit(folder, unquote(tail[1]))
            commit_dir = folder / "commits" / sha
            prefix = unquote("/".join(tail[2:]))
            entries = []
            for p in self._files(commit_dir):
                name = p.relative_to(commit_dir).as_posix()
                if prefix and not name.startswith(prefix.rstrip("/") + "/"):
                    continue
                data = p.read_bytes()
                entry: dict[str, Any] = {
                    "type": "file",
                    "oid": git_blob_sha1(data),
                    "size": len(data),
                    "path": name,
                }
                if is_lfs(name):
                    entry["lfs"] = {"oid": sha256(data), "size": len(data), "pointerSize": 134}
                entries.append(entry)
            self._json(entries)
            return
        raise _HubError(404, None, f"no route for /api/models/{rest}")

    def _resolve(self, rest: str) -> None:
        repo_part, _, after = rest.partition("/resolve/")
        revision, _, filename = after.partition("/")
        revision, filename = unquote(revision), unquote(filename)
        folder = self._repo(repo_part)
        sha = self._commit(folder, revision)
        self._check_gate(folder)
        file = folder / "commits" / sha / filename
        if not filename or not file.is_file():
            raise _HubError(404, "EntryNotFound", f"{filename} does not exist at {sha}")
        data = file.read_bytes()
        etag = sha256(data) if is_lfs(filename) else git_blob_sha1(data)
        headers = {
            "X-Repo-Commit": sha,
            "ETag": f'"{etag}"',
            "Accept-Ranges": "bytes",
            "Content-Type": "application/octet-stream",
        }
        if is_lfs(filename):
            headers["X-Linked-Etag"] = f'"{etag}"'
            headers["X-Linked-Size"] = str(len(data))
        faults = self.server.faults
        if self.command == "GET" and filename in faults.error500:
            raise _HubError(500, None, "Internal Server Error")
        if self.command == "GET" and filename in faults.tamper:
            data = bytes([data[0] ^ 0xFF]) + data[1:] if data else data
        start = 0
        status = 200
        match = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range") or "")
        if match and self.command == "GET":
            start = int(match.group(1))
            status = 206
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        body = data[start:]
        headers["Content-Length"] = str(len(body))
        if self.command == "GET" and filename in faults.cut_once and start == 0:
            faults.cut_once.discard(filename)
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self._send(status, body, headers)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    root: Path
    faults: Faults
    requests: list[tuple[str, str]]


class HubServer:
    """The server in a background thread on 127.0.0.1 (port 0: the OS picks one)."""

    def __init__(self, root: Path, port: int = 0) -> None:
        self.root = root
        self._server = _Server(("127.0.0.1", port), _Handler)
        self._server.root = root
        self._server.faults = Faults()
        self._server.requests = []
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def faults(self) -> Faults:
        return self._server.faults

    @property
    def requests(self) -> list[tuple[str, str]]:
        return self._server.requests

    def start(self) -> HubServer:
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket: later connections are refused."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
