"""The drafter's k_norm weights, read from its safetensors without loading the model (only those
bytes), or from what hosts/facts.py read on a host: the facts the k_norm defects turn on."""

from __future__ import annotations

import importlib.util
import json
import re
import struct
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dflashctl.errors import InputError

KNORM_RE = re.compile(r"(?:^|\.)layers\.(\d+)\.self_attn\.k_norm\.weight$")


# No head_dim comes near this; a larger "k_norm" is not read (hostile or not a norm weight).
MAX_KNORM_ELEMENTS = 65536


NUMPY_DTYPES = {"F16", "F32", "F64"}


@dataclass(frozen=True)
class KNormFacts:
    """Each drafter layer's `self_attn.k_norm.weight`, read from the safetensors."""

    layers: dict[int, tuple[float, ...]]
    dtype: str | None = None
    files: tuple[str, ...] = ()

    @property
    def differs(self) -> bool:
        values = list(self.layers.values())
        return any(v != values[0] for v in values[1:])

    def means(self) -> dict[int, float]:
        return {i: (sum(v) / len(v) if v else 0.0) for i, v in sorted(self.layers.items())}

    def max_abs_diff(self) -> float:
        """Largest |w_i - w_0| over layers and elements (layers of another size count as inf)."""
        layers = [v for _, v in sorted(self.layers.items())]
        if not layers:
            return 0.0
        first, worst = layers[0], 0.0
        for v in layers[1:]:
            if len(v) != len(first):
                return float("inf")
            worst = max([worst, *(abs(a - b) for a, b in zip(v, first, strict=True))])
        return worst

    def describe(self) -> str:
        if not self.layers:
            return "no layers.N.self_attn.k_norm.weight tensors in the checkpoint"
        means = self.means()
        shown = ", ".join(f"{i}: {m:.3f}" for i, m in list(means.items())[:8])
        more = f", … ({len(means)} layers)" if len(means) > 8 else ""
        verdict = (
            f"differ between layers (max |w_i − w_0| {self.max_abs_diff():.3g})"
            if self.differs
            else "equal in every layer"
        )
        return f"k_norm.weight ({self.dtype}) {verdict}; mean per layer {shown}{more}"

    def to_json(self) -> dict[str, Any]:
        return {
            "layers": len(self.layers),
            "dtype": self.dtype,
            "differs": self.differs,
            "mean_per_layer": {str(i): m for i, m in self.means().items()},
            "max_abs_diff": self.max_abs_diff(),
        }


def _bf16_raw(path: Path, names: list[str]) -> dict[str, tuple[float, ...]]:
    """BF16 tensors decoded from their bytes (header offsets): the fallback without torch."""
    out: dict[str, tuple[float, ...]] = {}
    with path.open("rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        for name in names:
            begin, end = header[name]["data_offsets"]
            f.seek(8 + n + begin)
            raw = f.read(end - begin)
            halves = struct.unpack(f"<{len(raw) // 2}H", raw)
            out[name] = tuple(struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in halves)
    return out


def _read_vectors(
    path: Path, names: list[str], dtypes: dict[str, str], framework: str | None = None
) -> dict[str, tuple[float, ...]]:
    """Only `names` from one safetensors file, as float tuples. F16/F32/F64 through the
    safetensors library (numpy). BF16, which numpy lacks, through the library with torch when
    torch is already loaded (or `framework="pt"`); otherwise decoded from the tensors' bytes at
    the header's offsets (exact: a bf16 is the top half of an f32), so that doctor does not pay
    a multi-second torch import for a few hundred numbers."""
    from safetensors import safe_open

    if all(dtypes[n] in NUMPY_DTYPES for n in names):
        with safe_open(str(path), framework="numpy") as f:
            return {n: tuple(float(x) for x in f.get_tensor(n).ravel().tolist()) for n in names}
    if framework is None:
        bf16_only = all(dtypes[n] in NUMPY_DTYPES | {"BF16"} for n in names)
        framework = "raw" if bf16_only and "torch" not in sys.modules else "pt"
    if framework == "pt" and importlib.util.find_spec("torch") is not None:
        with safe_open(str(path), framework="pt") as f:
            return {n: tuple(f.get_tensor(n).float().flatten().tolist()) for n in names}
    odd = sorted({dtypes[n] for n in names} - NUMPY_DTYPES - {"BF16"})
    if odd:
        raise InputError(f"{path}: k_norm weights in {', '.join(odd)} need torch to read")
    out: dict[str, tuple[float, ...]] = {}
    plain = [n for n in names if dtypes[n] in NUMPY_DTYPES]
    if plain:
        out.update(_read_vectors(path, plain, dtypes))
    out.update(_bf16_raw(path, [n for n in names if dtypes[n] == "BF16"]))
    return out


def read_k_norm(drafter: Path, *, framework: str | None = None) -> KNormFacts:
    """Each layer's `k_norm.weight` of the drafter checkpoint at `drafter` (a directory, a
    .safetensors file or an index); only those tensors are read. Broken files: `InputError`.
    `framework` "pt" or "raw" forces how BF16 is read (default: see `_read_vectors`)."""
    from dflashctl.drafter.header import read_header

    header = read_header(drafter)
    wanted: dict[str, int] = {}
    for name in header.tensors:
        m = KNORM_RE.search(name)
        if m:
            wanted[name] = int(m.group(1))
    if not wanted:
        return KNormFacts({}, None, tuple(str(f) for f in header.files))
    dtypes = {n: header.tensors[n].dtype for n in wanted}
    for n in wanted:
        size = 1
        for d in header.tensors[n].shape:
            size *= d
        if size > MAX_KNORM_ELEMENTS:
            raise InputError(f"{n} has {size} elements: too large for a k_norm weight")
    base = header.files[0].parent
    by_file: dict[Path, list[str]] = {}
    for n in wanted:
        shard = header.shard_of.get(n)
        by_file.setdefault(base / shard if shard else header.files[0], []).append(n)
    values: dict[str, tuple[float, ...]] = {}
    for path, names in by_file.items():
        try:
            values.update(_read_vectors(path, sorted(names), dtypes, framework))
        except InputError:
            raise
        except Exception as e:  # the library's own errors for a file the header reader passed
            raise InputError(f"{path}: cannot read k_norm weights: {e}") from None
    kinds = sorted(set(dtypes.values()))
    return KNormFacts(
        layers={wanted[n]: v for n, v in sorted(values.items(), key=lambda kv: wanted[kv[0]])},
        dtype="/".join(kinds),
        files=tuple(str(p) for p in by_file),
    )


def k_norm_from_facts(raw: Any) -> KNormFacts | None:
    """The k_norm weights hosts/facts.py read on a host (its `k_norm` entry), when it could."""
    if not isinstance(raw, dict) or "error" in raw or not isinstance(raw.get("layers"), dict):
        return None
    try:
        layers = {int(k): tuple(float(x) for x in v) for k, v in raw["layers"].items()}
    except (TypeError, ValueError):
        return None
    return KNormFacts(layers, raw.get("dtype"), tuple(raw.get("files") or ()))
