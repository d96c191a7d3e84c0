"""verify-config's report: the checks, the engine's layer table, the lock and registry rows."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dflashctl.drafter.config import (
    Resolved,
    read_json_object,
)
from dflashctl.drafter.registry import LOCK_NAME, DrafterEntry, Identification
from dflashctl.drafter.rules.base import JSON_KEYS, STATUSES
from dflashctl.report import Row, rows_ok


@dataclass
class VerifyReport:
    """Everything verify-config found; `ok` is False when any check failed."""

    path: Path
    engine: str
    checks: list[Row]
    entry: DrafterEntry | None
    identification: Identification | None
    resolved: Resolved
    layers: list[dict[str, Any]]
    num_target_layers: int | None
    num_target_layers_source: str | None
    weights: Path | None = None
    target: Path | None = None
    fix: Any = None  # drafter.fix.FixResult
    checks_before: list[Row] | None = None

    @property
    def ok(self) -> bool:
        return rows_ok(self.checks)

    @property
    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(STATUSES, 0)
        for check in self.checks:
            counts[check.status] += 1
        return counts

    @property
    def num_speculative_tokens(self) -> int | None:
        block = (
            self.entry.block_size if self.entry and self.entry.block_size else None
        ) or self.resolved.block_size
        return block - 1 if block else None

    def to_json(self) -> dict[str, Any]:
        r = self.resolved
        entry = self.entry
        data: dict[str, Any] = {
            "ok": self.ok,
            "checks": [check.to_json(JSON_KEYS) for check in self.checks],
            "path": str(self.path),
            "engine": self.engine,
            "counts": self.counts,
            "registry": None,
            "num_speculative_tokens": self.num_speculative_tokens,
            "block_size": r.block_size,
            "mask_token_id": r.mask_token_id,
            "aux_layers": {
                "fc_source": r.fc_source,
                "target_layer_ids": r.fc_layer_ids,
                "captured": r.captured_layers,
                "captured_source": r.captured_source,
                "effective_target_layer_ids": r.effective_target_layer_ids,
            },
            "num_target_layers": self.num_target_layers,
            "num_target_layers_source": self.num_target_layers_source,
            "layers": self.layers,
            "engine_errors": r.engine_errors,
            "weights": str(self.weights) if self.weights else None,
            "target": str(self.target) if self.target else None,
            "fix": self.fix.to_json() if self.fix is not None else None,
        }
        if entry is not None:
            acc = entry.expected_acceptance
            data["registry"] = {
                "name": entry.name,
                "repo": entry.repo,
                "revision": entry.revision,
                "confidence": entry.confidence,
                "identified_by": self.identification.how if self.identification else None,
                "expected_acceptance": (
                    {"min": acc.min, "max": acc.max, "source": acc.source} if acc else None
                ),
                "published_acceptance": [p.__dict__ for p in entry.published_acceptance],
                "not_published": sorted(entry.not_published),
                "config_format": entry.config_format,
            }
        if self.checks_before is not None:
            data["checks_before"] = [check.to_json(JSON_KEYS) for check in self.checks_before]
        return data


def layer_table(cfg: dict[str, Any], r: Resolved) -> list[dict[str, Any]]:
    """Per layer: what the file says, what transformers loads, what the engine uses."""
    raw = cfg.get("layer_types")
    loaded = r.transformers_layer_types or []
    rows = []
    for layer in r.layers:
        i = layer.index
        rows.append(
            {
                "layer": i,
                "file": raw[i] if isinstance(raw, list) and i < len(raw) else None,
                "loaded": loaded[i] if i < len(loaded) else None,
                "attention": "sliding" if layer.sliding else "full",
                "window": layer.window,
                "causal": layer.causal,
            }
        )
    return rows


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_lock(directory: Path) -> dict[str, Any] | None:
    lock = directory / LOCK_NAME
    if not lock.is_file():
        return None
    return read_json_object(lock, what="lock")


def _revision_from_path(directory: Path) -> str | None:
    parts = directory.resolve().parts
    for i, part in enumerate(parts[:-1]):
        if part == "snapshots" and re.fullmatch(r"[0-9a-f]{40}", parts[i + 1]):
            return parts[i + 1]
    return None


def registry_rows(
    directory: Path,
    config_file: Path,
    entry: DrafterEntry | None,
    ident: Identification | None,
    lock: dict[str, Any] | None,
) -> list[Row]:
    rows: list[Row] = []
    if entry is None:
        if ident is not None and ident.candidates:
            rows.append(
                Row(
                    "registry",
                    "warning",
                    None,
                    list(ident.candidates),
                    f"{ident.how}: checked by rules only; pass --drafter NAME to compare with "
                    "canonical values",
                )
            )
        else:
            rows.append(
                Row(
                    "registry",
                    "ok",
                    None,
                    None,
                    "no registry entry matches: checked by rules only (pass --drafter NAME to "
                    "compare with canonical values)",
                )
            )
        return rows
    how = ident.how if ident is not None else "--drafter"
    rows.append(Row("registry", "ok", entry.repo, None, f"{how}; confidence {entry.confidence}"))
    revision = (lock or {}).get("revision") or _revision_from_path(directory)
    if entry.revision is not None and isinstance(revision, str) and revision != entry.revision:
        rows.append(
            Row(
                "revision",
                "warning",
                revision,
                entry.revision,
                "not the pinned revision: the published files may differ",
            )
        )
    for spec in entry.files:
        if spec.path == config_file.name and spec.sha256:
            digest = _sha256(config_file)
            rows.append(
                Row(
                    f"sha256 {spec.path}",
                    "ok" if digest == spec.sha256 else "warning",
                    digest,
                    spec.sha256,
                    None
                    if digest == spec.sha256
                    else "not the pinned bytes (the values are checked one by one above)",
                )
            )
    return rows


# JSON types of the fields the checks read: anything else means the file is not a usable
# config at all, which is "could not run" (exit 2) rather than a finding.
