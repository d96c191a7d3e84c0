"""Read the tensor table of a safetensors checkpoint from its header only, never the tensor bytes.

A safetensors file is an 8-byte little-endian header length N, N bytes of JSON
(`{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}`), then the
raw data. Reading N + 8 bytes costs the same for a 3 MB drafter and a 3.4 GB one. A sharded
checkpoint is a `model.safetensors.index.json` (`{"weight_map": {name: shard}}`) beside its
shards; each shard's header is read once.

The header is parsed here rather than with `safetensors.safe_open`, which needs a framework
(numpy or torch) to open a file and maps the whole file. The checks mirror the library's own
(header at most 100 MB, offsets contiguous from 0 and covering the data exactly, byte length =
element count x dtype size), so a file that passes here also loads there. Every way a file can
be hostile or broken is a one-line `InputError`. Pure: no printing.
"""

from __future__ import annotations

import json
import math
import os
import stat
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from dflashctl.drafter.config import read_json_object
from dflashctl.errors import InputError
from dflashctl.files import kind_of, open_regular

INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"
# The safetensors library refuses headers above this size (`MAX_HEADER_SIZE`).
MAX_HEADER_BYTES = 100_000_000

# Bits per element for every dtype the safetensors format defines.
DTYPE_BITS = {
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "C64": 64,
    "F64": 64,
    "I64": 64,
    "U64": 64,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
}
FLOAT_DTYPES = frozenset(
    {"F8_E5M2", "F8_E4M3", "F8_E8M0", "F16", "BF16", "F32", "F64", "F4", "F6_E2M3", "F6_E3M2"}
)


class TensorInfo(NamedTuple):
    """One tensor's dtype (safetensors spelling, e.g. "BF16") and shape."""

    dtype: str
    shape: tuple[int, ...]


@dataclass
class Header:
    """The tensor table of one checkpoint (one file or all shards of an index)."""

    tensors: dict[str, TensorInfo]
    files: list[Path]
    # tensor name -> file name it lives in
    shard_of: dict[str, str] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    # total bytes on disk of all files (sizes from stat, nothing read)
    total_bytes: int = 0
    index: Path | None = None

    def dtypes(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for info in self.tensors.values():
            counts[info.dtype] = counts.get(info.dtype, 0) + 1
        return counts


def _fail(path: Path, what: str, hint: str | None = None) -> InputError:
    return InputError(f"{path}: {what}", hint or "the file is damaged or not safetensors")


def read_file_header(path: Path) -> tuple[dict[str, TensorInfo], dict[str, Any], int]:
    """(tensors, `__metadata__`, file size) of one .safetensors file, from its header."""
    try:
        with open_regular(path, "safetensors file") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(8)
            if len(head) < 8:
                raise _fail(path, f"{size} bytes: too short to be a safetensors file")
            (n,) = struct.unpack("<Q", head)
            if n > MAX_HEADER_BYTES:
                raise _fail(
                    path,
                    f"header length field says {n} bytes, more than the 100 MB any safetensors "
                    "reader accepts (hostile or corrupt length)",
                )
            if n > size - 8:
                raise _fail(
                    path,
                    f"truncated header: the length field says {n} bytes but only {size - 8} "
                    "follow it",
                    "the download was cut short; fetch the file again",
                )
            raw = f.read(n)
    except FileNotFoundError:
        raise InputError(f"safetensors file not found: {path}") from None
    except IsADirectoryError:
        raise InputError(f"{path} is a directory, not a safetensors file") from None
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror}") from None
    if len(raw) < n:
        raise _fail(path, f"truncated header: read {len(raw)} of {n} bytes")
    return (*_parse_header(path, raw, size - 8 - n), size)


MAX_INT_DIGITS = 20  # 2^64 has 20 digits: no tensor size or byte offset has more


class _TooLong(ValueError):
    """A JSON integer longer than MAX_INT_DIGITS (its digit count is the message)."""


def _header_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise _TooLong(str(digits))
    return int(text)


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _parse_header(
    path: Path, raw: bytes, data_size: int
) -> tuple[dict[str, TensorInfo], dict[str, Any]]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _fail(path, "header is not UTF-8 JSON") from None
    try:
        obj = json.loads(text, object_pairs_hook=_reject_duplicates, parse_int=_header_int)
    except json.JSONDecodeError as e:
        raise _fail(path, f"header is not valid JSON ({e.msg} at column {e.colno})") from None
    except _TooLong as e:
        raise _fail(path, f"header holds an integer of {e} digits: no size or offset is") from None
    except ValueError as e:  # duplicate keys
        raise _fail(path, f"header has a {e}") from None
    except RecursionError:
        raise _fail(path, "header JSON is nested too deeply") from None
    if not isinstance(obj, dict):
        raise _fail(path, f"header is a JSON {type(obj).__name__}, not an object")

    meta = obj.pop("__metadata__", None)
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise _fail(path, "__metadata__ is not an object")
    for key, value in meta.items():
        if not isinstance(value, str):  # the safetensors library refuses anything else
            raise _fail(
                path,
                f"__metadata__[{key!r}] is {type(value).__name__}, not a string: the safetensors "
                "library (and so every engine) refuses this file",
            )

    tensors: dict[str, TensorInfo] = {}
    spans: list[tuple[int, int, str]] = []
    for name, entry in obj.items():
        if not isinstance(entry, dict):
            raise _fail(path, f"tensor {name!r}: entry is not an object")
        dtype = entry.get("dtype")
        shape = entry.get("shape")
        offsets = entry.get("data_offsets")
        if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
            raise _fail(path, f"tensor {name!r}: unknown dtype {dtype!r}")
        if not isinstance(shape, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
        ):
            raise _fail(path, f"tensor {name!r}: shape {shape!r} is not a list of sizes")
        if (
            not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
        ):
            raise _fail(path, f"tensor {name!r}: data_offsets {offsets!r} is not [begin, end]")
        begin, end = offsets
        if not 0 <= begin <= end:
            raise _fail(path, f"tensor {name!r}: bad data_offsets [{begin}, {end}]")
        bits = math.prod(shape) * DTYPE_BITS[dtype]
        if bits % 8 or bits // 8 != end - begin:
            raise _fail(
                path,
                f"tensor {name!r}: {dtype} {shape} needs {bits / 8:g} bytes but data_offsets "
                f"span {end - begin}",
            )
        tensors[name] = TensorInfo(dtype, tuple(shape))
        spans.append((begin, end, name))

    spans.sort()
    cursor = 0
    for begin, end, name in spans:
        if begin != cursor:
            what = "overlaps the previous tensor" if begin < cursor else "leaves a gap before it"
            raise _fail(path, f"tensor {name!r}: data_offsets [{begin}, {end}] {what}")
        cursor = end
    if cursor != data_size:
        if cursor > data_size:
            raise _fail(
                path,
                f"truncated data: tensors need {cursor} bytes after the header but the file "
                f"has {data_size}",
                "the download was cut short; fetch the file again",
            )
        raise _fail(
            path, f"{data_size - cursor} bytes after the last tensor are not covered by the header"
        )
    return tensors, meta


def _safe_shard_name(index: Path, name: Any) -> str:
    if (
        not isinstance(name, str)
        or not name
        or "/" in name
        or "\\" in name
        or name in (".", "..")
        or "\x00" in name
    ):
        raise InputError(
            f"{index}: shard name {name!r} is not a plain file name beside the index",
            "an index may only name files in its own directory",
        )
    if len(name.encode("utf-8", "surrogatepass")) > 255:  # NAME_MAX on every Linux file system
        raise InputError(
            f"{index}: shard name {name[:40]!r}… is {len(name)} characters, longer than any "
            "file name can be (255 bytes)",
            "the index is damaged; fetch the drafter again",
        )
    return name


def read_index(index: Path) -> Header:
    """All tensors of a sharded checkpoint: the index's weight map, checked shard by shard."""
    data = read_json_object(index, what="safetensors index")
    weight_map = data.get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise InputError(f"{index}: 'weight_map' is missing or not a non-empty object")
    shards: dict[str, list[str]] = {}
    for tensor, shard in weight_map.items():
        shards.setdefault(_safe_shard_name(index, shard), []).append(tensor)

    header = Header(tensors={}, files=[], index=index)
    meta = data.get("metadata")
    if isinstance(meta, dict):
        header.metadata = meta
    for shard, listed in shards.items():
        shard_path = index.parent / shard
        if not shard_path.is_file():
            raise InputError(
                f"{index}: shard {shard} is missing ({len(listed)} tensors point to it)",
                "the download is incomplete; fetch the drafter again",
            )
        tensors, _meta, size = read_file_header(shard_path)
        absent = [t for t in listed if t not in tensors]
        if absent:
            raise InputError(
                f"{index}: weight_map puts {absent[0]!r} in {shard}, which does not contain it"
                + (f" (and {len(absent) - 1} more)" if len(absent) > 1 else "")
            )
        for name, info in tensors.items():
            if name in header.tensors:
                raise InputError(
                    f"{index}: tensor {name!r} is in both {header.shard_of[name]} and {shard}"
                )
            header.tensors[name] = info
            header.shard_of[name] = shard
        header.files.append(shard_path)
        header.total_bytes += size
    return header


def _regular_or_refuse(p: Path) -> None:
    try:
        lst = os.lstat(p)
    except FileNotFoundError:
        return
    except OSError as e:
        raise InputError(f"cannot read {p}: {e.strerror}") from None
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise InputError(
            f"{p} is a broken symbolic link (to {os.readlink(p)}): the weights are missing",
            "a damaged download or Hugging Face cache; fetch the drafter again",
        ) from None
    except OSError as e:
        raise InputError(f"cannot read {p}: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        verb = "links to" if stat.S_ISLNK(lst.st_mode) else "is"
        raise InputError(f"{p} {verb} {kind_of(st.st_mode)}, not a safetensors file")


def find_checkpoint(directory: Path) -> Path | None:
    """The index or single file in a drafter directory; None when there is no safetensors.

    A checkpoint name that is there but is no regular file (a dangling symlink, as a broken
    Hugging Face cache leaves, a FIFO, a directory) is an InputError, never "no checkpoint".
    """
    present = [directory / INDEX_NAME, directory / SINGLE_NAME, *directory.glob("*.safetensors")]
    for p in present:
        _regular_or_refuse(p)
    index = directory / INDEX_NAME
    if index.is_file():
        return index
    single = directory / SINGLE_NAME
    if single.is_file():
        return single
    candidates = sorted(p for p in directory.glob("*.safetensors") if p.is_file())
    if len(candidates) == 1:
        return candidates[0]
    if len(candidates) > 1:
        raise InputError(
            f"{directory}: {len(candidates)} .safetensors files and no {INDEX_NAME}",
            "a sharded checkpoint needs its index file to say which tensors live where",
        )
    return None


def read_header(path: Path) -> Header:
    """The tensor table of `path`: a .safetensors file, an index, or a directory holding one."""
    if path.is_dir():
        found = find_checkpoint(path)
        if found is None:
            raise InputError(f"{path}: no safetensors checkpoint found")
        path = found
    if path.name.endswith(".index.json"):
        return read_index(path)
    tensors, meta, size = read_file_header(path)
    return Header(
        tensors=tensors,
        files=[path],
        shard_of=dict.fromkeys(tensors, path.name),
        metadata=meta,
        total_bytes=size,
    )
