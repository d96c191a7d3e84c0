"""The field story's stale config, reproducible on any DFlash drafter (shared SPEC.md).

The field's drafter config had three stale values at once: `target_layer_ids` shifted
([1, 17, 33, 49, 63] for [1, 16, 31, 46, 61]), the mask token id off by six (248064 for 248070),
and different `layer_types`. `REWRITES` names each rewrite; `stale_config` applies a set of them
to a config dict, and `write_stale_copy` makes a scratch copy of a drafter directory (weights
linked, config rewritten) that an engine can serve. Pure data in, data out; no printing.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
from pathlib import Path
from typing import Any

from dflashctl.drafter.config import FULL, SLIDING, dflash_section, read_json_object
from dflashctl.errors import InputError

# name -> what it does (shown in tables and docs)
REWRITES: dict[str, str] = {
    "ids": "target_layer_ids shifted by one (each id + 1, capped at the last target layer)",
    "mask": "mask_token_id off by six (each mask id - 6, as the field story's 248064 for 248070)",
    "layer_types": "layer_types changed (full attention <-> sliding window)",
}
ALL = tuple(REWRITES)


def _n_target_layers(cfg: dict[str, Any]) -> int | None:
    n = cfg.get("num_target_layers")
    return n if isinstance(n, int) and n > 0 else None


def stale_config(cfg: dict[str, Any], rewrites: tuple[str, ...]) -> dict[str, Any]:
    """A deep copy of `cfg` with the named rewrites applied (both config dialects)."""
    unknown = [r for r in rewrites if r not in REWRITES]
    if unknown:
        raise InputError(
            f"unknown stale rewrite {unknown[0]!r}", f"choose from: {', '.join(REWRITES)}"
        )
    out = copy.deepcopy(cfg)
    nested = dflash_section(out)
    if "ids" in rewrites:
        last = (_n_target_layers(out) or 10**9) - 1
        for holder in (nested, out):
            ids = holder.get("target_layer_ids")
            if isinstance(ids, list) and ids:
                holder["target_layer_ids"] = [min(int(i) + 1, last) for i in ids]
    if "mask" in rewrites:
        found = False
        for holder in (nested, out):
            if isinstance(holder.get("mask_token_id"), int):
                holder["mask_token_id"] -= 6
                found = True
        if not found:
            raise InputError("the config has no mask_token_id to make stale")
    if "layer_types" in rewrites:
        types = out.get("layer_types")
        n = out.get("num_hidden_layers")
        if not isinstance(types, list):
            types = [FULL] * (n if isinstance(n, int) else 1)
        out["layer_types"] = [SLIDING if t == FULL else FULL for t in types]
        if not out.get("sliding_window"):
            out["sliding_window"] = 64
    return out


def changed_values(before: dict[str, Any], after: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(dotted name, before, after) of each field whose value differs (top level and
    dflash_config; None where a side lacks it)."""
    out = []
    for key in sorted(set(before) | set(after)):
        if key == "dflash_config":
            b, a = dflash_section(before), dflash_section(after)
            out += [
                (f"dflash_config.{k}", b.get(k), a.get(k))
                for k in sorted(set(b) | set(a))
                if b.get(k) != a.get(k)
            ]
        elif before.get(key) != after.get(key):
            out.append((key, before.get(key), after.get(key)))
    return out


def write_stale_copy(src: Path, dst: Path, rewrites: tuple[str, ...]) -> list[tuple[str, Any, Any]]:
    """Copy drafter directory `src` to `dst` (weights hard-linked where possible, else copied)
    with its config.json rewritten; returns the changed fields (`changed_values`). `dst` must
    not exist."""
    if dst.exists():
        raise InputError(f"{dst} already exists", "pick a new scratch directory")
    cfg = read_json_object(src / "config.json")
    stale = stale_config(cfg, rewrites)
    tmp = dst.with_name(dst.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for f in src.iterdir():
        if f.name == "config.json" or not f.is_file():
            continue
        try:
            os.link(f, tmp / f.name)
        except OSError:
            shutil.copy2(f, tmp / f.name)
    (tmp / "config.json").write_text(json.dumps(stale, indent=2) + "\n")
    tmp.rename(dst)
    return changed_values(cfg, stale)
