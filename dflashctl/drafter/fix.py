"""Write canonical values into a drafter's config.json, atomically, or not at all.

`plan_fix()` is pure: from a config and its registry entry it builds the repaired config and the
list of changes (only confirmed registry values are written; fields that describe the weights,
such as hidden_size or the layer count, are never "fixed"). Without an entry it can only move a
top-level-only `target_layer_ids` into `dflash_config`.

`write_fixed()` keeps the original bytes in a timestamped backup beside the file, writes a temp
file in the same directory, fsyncs it, checks with lstat that the file is still the one that was
read (same inode, size, mtime and bytes; not a symlink), renames over it and fsyncs the
directory. It refuses (ConfigWriteError, nothing left behind) on a symlink, a file without write
bits, or a file that changed on disk in between. It never touches any other file.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dflashctl.drafter.config import SLIDING, rope_theta
from dflashctl.drafter.registry import DrafterEntry
from dflashctl.errors import ConfigWriteError, OutputError, UsageError
from dflashctl.files import backup_path, write_atomic
from dflashctl.report import Row, rows_ok

# Fields that describe the weights: a difference means another checkpoint, not a stale value.
STRUCTURAL = ("architectures", "num_hidden_layers", "hidden_size", "vocab_size")


@dataclass(frozen=True)
class Change:
    field: str
    before: Any
    after: Any

    def to_json(self) -> dict[str, Any]:
        return {"field": self.field, "before": self.before, "after": self.after}


@dataclass
class FixResult:
    path: Path
    written: bool
    changes: list[Change] = field(default_factory=list)
    backup: Path | None = None
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "written": self.written,
            "path": str(self.path),
            "backup": str(self.backup) if self.backup else None,
            "changes": [c.to_json() for c in self.changes],
            "message": self.message,
        }


_MISSING = object()


def _get_path(cfg: dict[str, Any], dotted: str) -> Any:
    node: Any = cfg
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _diff(before: dict[str, Any], after: dict[str, Any], keys: list[str]) -> list[Change]:
    changes = []
    for key in keys:
        old, new = _get_path(before, key), _get_path(after, key)
        if old != new or (old is _MISSING) != (new is _MISSING):
            changes.append(
                Change(
                    key,
                    None if old is _MISSING else old,
                    "(removed)" if new is _MISSING else new,
                )
            )
    return changes


def plan_fix(
    cfg: dict[str, Any], entry: DrafterEntry | None, *, failing: bool = True
) -> tuple[dict[str, Any], list[Change]]:
    """The repaired config and its changes. `failing`: whether any check failed (used when there
    is no registry entry, to tell "nothing to do" from "cannot do it")."""
    new = copy.deepcopy(cfg)
    raw_dfc = new.get("dflash_config")
    if raw_dfc is not None and not isinstance(raw_dfc, dict):
        raise ConfigWriteError(
            f"cannot fix: dflash_config is a {type(raw_dfc).__name__}, not an object",
            "repair it by hand, then run verify-config again",
        )
    touched: list[str] = []

    if entry is None:
        if (
            (raw_dfc is None or "target_layer_ids" not in raw_dfc)
            and new.get("target_layer_ids") is not None
            and not new.get("eagle_aux_hidden_state_layer_ids")
        ):
            dfc = new.setdefault("dflash_config", {})
            dfc["target_layer_ids"] = new.pop("target_layer_ids")
            touched = ["target_layer_ids", "dflash_config.target_layer_ids"]
            return new, _diff(cfg, new, touched)
        if failing:
            raise UsageError(
                "--fix needs canonical values, and no registry entry matches this config",
                "pass --drafter NAME (see playbooks/drafters/); without one --fix can only move "
                "a top-level target_layer_ids into dflash_config",
            )
        return new, []

    wrong = []
    for key in STRUCTURAL:
        expected = getattr(entry, key)
        if isinstance(expected, tuple):
            expected = list(expected)
        found = cfg.get(key)
        if (
            expected is not None
            and found is not None
            and found != expected
            and not entry.is_unconfirmed(key)
        ):
            wrong.append(f"{key} {found!r} (registry: {expected!r})")
    if wrong:
        raise UsageError(
            f"refusing to write {entry.repo}'s values: this config's {wrong[0]} says it is "
            "another checkpoint",
            "check --drafter; fields that describe the weights cannot be fixed in the config",
        )

    def confirmed(key: str) -> Any:
        value = getattr(entry, key)
        if value is None or entry.is_unconfirmed(key):
            return None
        return list(value) if isinstance(value, tuple) else value

    dfc = new.setdefault("dflash_config", {})
    mask = confirmed("mask_token_id")
    if mask is not None:
        dfc["mask_token_id"] = mask
        touched.append("dflash_config.mask_token_id")
        if new.get("mask_token_id") is not None:
            new["mask_token_id"] = mask
            touched.append("mask_token_id")
    ids = confirmed("target_layer_ids")
    if ids is not None:
        dfc["target_layer_ids"] = ids
        touched.append("dflash_config.target_layer_ids")
        if "target_layer_ids" in new:
            new["target_layer_ids"] = ids
            touched.append("target_layer_ids")
    layer_types = confirmed("layer_types")
    if layer_types is not None:
        new["layer_types"] = layer_types
        touched.append("layer_types")
        window = confirmed("sliding_window")
        if SLIDING in layer_types and window is not None:
            # Top level with the flag, so transformers keeps it and sglang finds it too.
            new["sliding_window"] = window
            new["use_sliding_window"] = True
            touched += ["sliding_window", "use_sliding_window"]
            if "swa_window_size" in dfc:
                dfc["swa_window_size"] = window
                touched.append("dflash_config.swa_window_size")
        elif SLIDING not in layer_types and dfc.get("use_swa"):
            dfc["use_swa"] = False
            touched.append("dflash_config.use_swa")
    block = confirmed("block_size")
    if block is not None:
        key = "dflash_config.block_size" if "block_size" in dfc else "block_size"
        if key == "dflash_config.block_size":
            dfc["block_size"] = block
        else:
            new["block_size"] = block
        touched.append(key)
    causal = confirmed("is_causal")
    if causal is not None:
        new["is_causal"] = causal
        touched.append("is_causal")
    theta = confirmed("rope_theta")
    if theta is not None and (rope_theta(cfg) or 1e6) != theta:
        value = int(theta) if float(theta).is_integer() else theta
        params = new.get("rope_parameters")
        if isinstance(params, dict):
            params["rope_theta"] = value
            touched.append("rope_parameters.rope_theta")
        else:
            new["rope_theta"] = value
            touched.append("rope_theta")
    for key, value in entry.dflash_config:
        if not entry.is_unconfirmed(key):
            dfc[key] = value
            touched.append(f"dflash_config.{key}")
    if not dfc and raw_dfc is None:
        del new["dflash_config"]
    return new, _diff(cfg, new, touched)


# ---- the atomic write ------------------------------------------------------------------------


def _refuse(path: Path, why: str, hint: str | None = None) -> ConfigWriteError:
    return ConfigWriteError(f"refusing to fix {path}: {why}; nothing was written", hint)


def check_writable(path: Path, st: os.stat_result) -> None:
    if stat.S_ISLNK(st.st_mode):
        try:
            real = path.resolve()
        except OSError:
            real = None
        if "snapshots" in path.parts:
            hint = (
                "this is a Hugging Face cache entry, whose blobs are shared by content hash: "
                "download the drafter to its own directory (hf download REPO --local-dir DIR) "
                "and fix that copy"
            )
        else:
            hint = "fix the real file, not a link to it" + (
                f": dflashctl verify-config {real} --fix" if real else ""
            )
        raise _refuse(path, "it is a symbolic link" + (f" to {real}" if real else ""), hint)
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(path, "it is not a regular file")
    if not st.st_mode & 0o222:
        raise _refuse(
            path,
            f"it is read-only (mode {stat.S_IMODE(st.st_mode):04o})",
            f"make it writable first (chmod u+w {path}) if you mean to change it",
        )
    if not os.access(path, os.W_OK):
        raise _refuse(path, "this user may not write it")


def read_for_fix(path: Path) -> tuple[bytes, os.stat_result]:
    """The bytes and lstat of `path`, read without following a symlink; refuses what --fix
    must not write (a symlink, a non-regular or read-only file)."""
    from dflashctl.drafter.config import read_json_bytes

    try:
        st = os.lstat(path)
    except FileNotFoundError:
        read_json_bytes(path)  # the usual one-line "not found" error
        raise
    except OSError as e:
        raise ConfigWriteError(f"cannot read {path}: {e.strerror}") from None
    check_writable(path, st)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as e:
        raise _refuse(path, f"cannot open it ({e.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        fst = os.fstat(f.fileno())
        if (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino):
            raise _refuse(path, "it changed while being read")
        data = f.read()
    return data, st


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino, a.st_size, a.st_mtime_ns) == (
        b.st_dev,
        b.st_ino,
        b.st_size,
        b.st_mtime_ns,
    )


def _indent_of(original: bytes) -> int | str:
    for line in original.decode("utf-8", "replace").splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and len(stripped) < len(line):
            lead = line[: len(line) - len(stripped)]
            return "\t" if lead.startswith("\t") else len(lead)
    return 2


def write_fixed(path: Path, original: bytes, st0: os.stat_result, data: dict[str, Any]) -> Path:
    """Replace `path` (read as `original`, lstat `st0`) by `data` atomically; return the backup.

    Raises ConfigWriteError, with nothing written and nothing left behind, when the file is a
    symlink, read-only, or no longer the file that was read.
    """
    check_writable(path, st0)
    text = json.dumps(data, indent=_indent_of(original), ensure_ascii=False) + "\n"
    directory = path.parent
    backup = backup_path(path)

    def still_the_file_read() -> None:
        try:
            st1 = os.lstat(path)
        except FileNotFoundError:
            raise _refuse(path, "it was removed after it was read") from None
        if stat.S_ISLNK(st1.st_mode):
            raise _refuse(path, "it was replaced by a symbolic link after it was read")
        if not _same_file(st0, st1):
            raise _refuse(
                path,
                "it changed on disk after it was read",
                "run verify-config again to check the new content",
            )
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as f:
            if f.read(len(original) + 1) != original:
                raise _refuse(path, "its content changed on disk after it was read")

    try:
        # The backup: the exact original bytes, created exclusively (never over anything).
        fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL, stat.S_IMODE(st0.st_mode))
        with os.fdopen(fd, "wb") as f:
            f.write(original)
            f.flush()
            os.fsync(f.fileno())
        # The new content through the one atomic writer, checked just before the rename.
        write_atomic(
            path,
            text.encode("utf-8"),
            mode=stat.S_IMODE(st0.st_mode),
            owner=(st0.st_uid, st0.st_gid),
            before_replace=still_the_file_read,
        )
    except ConfigWriteError:
        _cleanup(backup)
        raise
    except (OSError, OutputError) as e:
        _cleanup(backup)
        why = (
            e.message
            if isinstance(e, OutputError)
            else f"could not write {path}: {e.strerror or e}"
        )
        raise ConfigWriteError(
            f"{why.removesuffix('; nothing was changed')}; nothing was changed",
            f"check that {directory} is writable",
        ) from None
    except BaseException:  # Ctrl-C, a signal: the backup goes unless the new file is in place
        if _holds(path, original):
            _cleanup(backup)
        raise
    return backup


def _holds(path: Path, original: bytes) -> bool:
    """`path` still holds exactly the bytes that were read (nothing was replaced)."""
    try:
        return path.read_bytes() == original
    except OSError:
        return False


def _cleanup(backup: Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(backup)


def apply_fix(
    path: Path,
    original: bytes,
    st0: os.stat_result,
    cfg: dict[str, Any],
    entry: DrafterEntry | None,
    checks: list[Row],
) -> FixResult:
    """Plan and write the fix; a no-op when the file already holds the canonical values."""
    failing = not rows_ok(checks)
    new, changes = plan_fix(cfg, entry, failing=failing)
    if not changes:
        return FixResult(path, written=False, message="nothing to fix: the file already agrees")
    backup = write_fixed(path, original, st0, new)
    return FixResult(
        path,
        written=True,
        changes=changes,
        backup=backup,
        message=f"wrote {len(changes)} change(s); original kept in {backup.name}",
    )
