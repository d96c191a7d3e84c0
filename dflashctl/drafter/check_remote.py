"""`verify-config --host`: check the drafter files *on the host that serves them*.

Over SFTP it reads only what the checks read: config.json, the lock file, the safetensors index
and, of every safetensors file, the 8-byte length and the JSON header (two ranged reads; a
multi-GB file costs the same as a small one). These land in a private temporary mirror whose
safetensors files are the real header plus a sparse hole of the remote file's size, so the same
`verify_local` runs unchanged; the report then names `HOST:PATH`. With `--fix`, the repaired
config is written on the host atomically (temp file + rename) after the original bytes were
saved there as a backup, then read back from the host and checked again: the proof the fix
landed where the engine reads it. No printing.
"""

from __future__ import annotations

import os
import posixpath
import struct
import tempfile
from pathlib import Path
from typing import Any

from dflashctl.drafter.check import verify_local
from dflashctl.errors import ConfigWriteError, InputError
from dflashctl.hosts.host import Host

CONFIG = "config.json"
INDEX = "model.safetensors.index.json"
LOCK = "dflashctl.lock.json"
MAX_SMALL = 16 << 20
MAX_HEADER = 100_000_000


def _plain(name: Any) -> bool:
    return (
        isinstance(name, str)
        and bool(name)
        and "/" not in name
        and "\\" not in name
        and name not in (".", "..")
        and "\x00" not in name
    )


def remote_config_path(host: Host, path: str) -> str:
    """The remote config.json for a drafter directory or a config file path."""
    apath = host.abspath(path)
    if host.is_dir(apath):
        return posixpath.join(apath, CONFIG)
    return apath


def _local(root: Path, remote: str) -> Path:
    return root / remote.lstrip("/")


def _copy_small(host: Host, remote: str, root: Path) -> Path | None:
    st = host.stat(remote)
    if st is None:
        return None
    local = _local(root, remote)
    local.parent.mkdir(parents=True, exist_ok=True)
    local.write_bytes(host.read_file(remote, MAX_SMALL))
    return local


def _mirror_safetensors(host: Host, remote: str, root: Path) -> None:
    st = host.stat(remote)
    if st is None:
        return
    head = host.read_range(remote, 0, 8)
    data = head
    if len(head) == 8:
        (n,) = struct.unpack("<Q", head)
        if n <= min(MAX_HEADER, st.size - 8):
            data += host.read_range(remote, 8, n)
    local = _local(root, remote)
    local.parent.mkdir(parents=True, exist_ok=True)
    with local.open("wb") as f:
        f.write(data)
        f.truncate(st.size)  # sparse: the size is real, the tensor bytes are not read


def mirror_drafter(host: Host, path: str, root: Path) -> tuple[Path, str]:
    """Mirror what verify-config reads of a remote drafter; (local config path, remote one)."""
    remote_cfg = remote_config_path(host, path)
    if host.stat(remote_cfg) is None:
        raise InputError(
            f"{host.label}:{remote_cfg}: no such file",
            "pass the drafter directory or its config.json as it is on that host",
        )
    local_cfg = _copy_small(host, remote_cfg, root)
    assert local_cfg is not None
    directory = posixpath.dirname(remote_cfg)
    _copy_small(host, posixpath.join(directory, LOCK), root)
    index = _copy_small(host, posixpath.join(directory, INDEX), root)
    names: list[str] = []
    if index is not None:
        import json

        try:
            weight_map = json.loads(index.read_text()).get("weight_map")
        except (ValueError, AttributeError):
            weight_map = None
        if isinstance(weight_map, dict):
            names = sorted({v for v in weight_map.values() if _plain(v)})
    else:
        names = [n for n in host.listdir(directory) if n.endswith(".safetensors")]
    for name in names:
        _mirror_safetensors(host, posixpath.join(directory, name), root)
    return local_cfg, remote_cfg


def mirror_target(host: Host, path: str, root: Path) -> Path:
    remote_cfg = remote_config_path(host, path)
    local = _copy_small(host, remote_cfg, root)
    if local is None:
        raise InputError(f"{host.label}:{remote_cfg}: no such file (--target)")
    return local


def verify_on_host(
    host: Host,
    path: str,
    *,
    drafter: str | None = None,
    target: str | None = None,
    engine: str = "vllm",
    fix: bool = False,
    max_model_len: int | None = None,
) -> Any:
    """run_verify on the files as they are on `host` (any Host; SSH in practice). Only the
    target's config.json is read there (not its chat template: no thinking check)."""
    with tempfile.TemporaryDirectory(prefix="dflashctl-verify-") as tmp:
        root = Path(tmp)
        local_cfg, remote_cfg = mirror_drafter(host, path, root / "a")
        original = local_cfg.read_bytes()
        local_target = mirror_target(host, target, root / "a") if target else None
        report = verify_local(
            local_cfg, drafter=drafter, target=local_target, engine=engine, fix=fix,
            max_model_len=max_model_len,
        )  # fmt: skip
        if fix and report.fix is not None and report.fix.written:
            _push_fix(host, local_cfg, remote_cfg, original, report)
            # the proof: read the file back from the host and check it again
            again_cfg, _ = mirror_drafter(host, remote_cfg, root / "b")
            again_target = mirror_target(host, target, root / "b") if target else None
            fresh = verify_local(again_cfg, drafter=drafter, target=again_target, engine=engine,
                                 max_model_len=max_model_len)  # fmt: skip
            report.checks = fresh.checks
            report.layers = fresh.layers
            report.resolved = fresh.resolved
        _relabel(report, host, root)
        return report


def _push_fix(host: Host, local_cfg: Path, remote_cfg: str, original: bytes, report: Any) -> None:
    fix = report.fix
    now = host.read_file(remote_cfg, MAX_SMALL)
    if now != original:
        raise ConfigWriteError(
            f"{host.label}:{remote_cfg} changed on the host after it was read; nothing written",
            "run verify-config again to check the new content",
        )
    st = host.stat(remote_cfg)
    st_mode = st.mode if st is not None else 0o644
    backup_name = fix.backup.name if fix.backup else f"{CONFIG}.bak"
    remote_backup = posixpath.join(posixpath.dirname(remote_cfg), backup_name)
    if host.stat(remote_backup) is not None:
        raise ConfigWriteError(f"{host.label}:{remote_backup} already exists; nothing written")
    try:
        host.write_file(remote_backup, original, st_mode)
        host.write_file(remote_cfg, local_cfg.read_bytes(), st_mode)
    except InputError as e:
        raise ConfigWriteError(
            f"could not write the fix on {host.label}: {e.message}; check the directory is "
            "writable there"
        ) from None
    fix.path = Path(remote_cfg)
    fix.backup = Path(remote_backup)
    fix.message = (
        f"wrote {len(fix.changes)} change(s) on {host.label}; original kept there in {backup_name}"
    )


def _relabel(report: Any, host: Host, root: Path) -> None:
    """Local mirror paths -> HOST:remote paths in everything the report shows."""

    def back(p: Path | None) -> Path | None:
        if p is None:
            return None
        s = str(p)
        for sub in ("a", "b"):
            base = str(root / sub)
            if s.startswith(base + os.sep):
                return Path(f"{host.label}:{s[len(base) :]}")
        return p

    report.path = back(report.path)
    report.weights = back(report.weights)
    report.target = back(report.target)
    fix = report.fix
    if fix is None:
        return
    if fix.written:  # _push_fix left the host's own paths
        fix.path = Path(f"{host.label}:{fix.path}")
        fix.backup = Path(f"{host.label}:{fix.backup}") if fix.backup else None
    else:
        fix.path = back(fix.path)
