"""verify-config: canonical comparisons, rules, weights, target, engines, --fix, and the CLI."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.cli import run_main
from support.safetensors_files import dflash_tensors, qwen36_27b_tensors, write_safetensors

from dflashctl.cli import app
from dflashctl.drafter import registry
from dflashctl.drafter.check import check_drafter
from dflashctl.drafter.fix import read_for_fix, write_fixed
from dflashctl.drafter.header import read_header
from dflashctl.drafter.verify import run_verify
from dflashctl.errors import ConfigWriteError, InputError, UsageError
from dflashctl.report import Row

DATA = Path(__file__).resolve().parent / "data"
REPO = Path(__file__).resolve().parent.parent
QWEN36 = "qwen3.6-27b-dflash"
SLIDING, FULL = "sliding_attention", "full_attention"


def published() -> dict[str, Any]:
    return json.loads((DATA / QWEN36 / "config.json").read_text())


def stale() -> dict[str, Any]:
    return json.loads((DATA / f"{QWEN36}-stale" / "config.json").read_text())


def drafter_dir(tmp_path: Path, name: str = QWEN36, cfg: dict | None = None) -> Path:
    """A drafter directory with a config.json (from tests/data or `cfg`)."""
    folder = tmp_path / name
    folder.mkdir(parents=True, exist_ok=True)
    if cfg is None:
        shutil.copy(DATA / name / "config.json", folder / "config.json")
    else:
        (folder / "config.json").write_text(json.dumps(cfg, indent=2))
    return folder


def by_field(checks: list[Row]) -> dict[str, Row]:
    return {c.name: c for c in checks}


def failed(checks: list[Row]) -> dict[str, Row]:
    return {c.name: c for c in checks if c.failed}


ENTRY = registry.get_entry(QWEN36)


class TestCanonical:
    def test_published_config_passes(self):
        checks = check_drafter(published(), entry=ENTRY)
        assert failed(checks) == {}
        rows = by_field(checks)
        assert rows["dflash_config.mask_token_id"].status == "ok"
        assert rows["num_speculative_tokens"].found == 15
        assert rows["vllm: model runner"].status == "warning"  # mixed layers need V2

    def test_stale_config_names_every_field_story_difference(self):
        bad = failed(check_drafter(stale(), entry=ENTRY))
        assert set(bad) == {
            "dflash_config.mask_token_id",
            "dflash_config.target_layer_ids",
            "layer_types",
            "sliding_window",
        }
        mask = bad["dflash_config.mask_token_id"]
        assert (mask.status, mask.found, mask.expected) == ("mismatch", 248064, 248070)
        assert "off by 6 (the field story: 248064 vs 248070)" in (mask.hint or "")
        ids = bad["dflash_config.target_layer_ids"]
        assert (ids.found, ids.expected) == ([1, 17, 33, 49, 63], [1, 16, 31, 46, 61])
        assert "evenly spaced guess" in (ids.hint or "")
        assert "63 is the target's last layer" in (ids.hint or "")
        assert bad["layer_types"].found == [FULL] * 5
        assert "all full_attention" in (bad["layer_types"].hint or "")
        assert bad["sliding_window"].status == "missing"

    def test_ids_shifted_by_one(self):
        cfg = published()
        cfg["dflash_config"]["target_layer_ids"] = [2, 17, 32, 47, 62]
        ids = by_field(check_drafter(cfg, entry=ENTRY))["dflash_config.target_layer_ids"]
        assert ids.status == "mismatch"
        assert (ids.hint or "").startswith("ids shifted by one layer from the published ones")

    def test_unconfirmed_registry_values_only_warn(self):
        coder = registry.get_entry("qwen3-coder-30b-a3b-dflash")
        cfg = {
            "architectures": ["DFlashDraftModel"],
            "model_type": "qwen3",
            "num_hidden_layers": 8,
            "hidden_size": 2048,
            "vocab_size": 151936,
            "dflash_config": {"mask_token_id": 151670, "target_layer_ids": [1, 12, 23, 34, 45]},
        }
        mask = by_field(check_drafter(cfg, entry=coder))["dflash_config.mask_token_id"]
        assert (mask.status, mask.expected) == ("warning", 151669)
        assert "unconfirmed" in (mask.hint or "")

    def test_wrong_rope_theta_is_a_mismatch(self):
        cfg = published()
        cfg["rope_parameters"]["rope_theta"] = 1000000
        theta = by_field(check_drafter(cfg, entry=ENTRY))["rope_theta"]
        assert (theta.status, theta.found, theta.expected) == ("mismatch", 1000000, 10000000)


class TestRules:
    """What is checked with no registry entry at all."""

    def test_top_level_only_ids_are_ignored_by_vllms_v1_runner(self):
        cfg = published()
        cfg["target_layer_ids"] = cfg.pop("dflash_config").pop("target_layer_ids")
        cfg["dflash_config"] = {"mask_token_id": 248070}
        rows = by_field(check_drafter(cfg))
        where = rows["dflash_config.target_layer_ids (location)"]
        assert (where.status, where.found) == ("missing", "top level only")
        assert "V1 runner ignores" in (where.hint or "")
        v1 = rows["aux layers (vllm V1)"]
        assert v1.status == "invalid" and v1.found.startswith("(2, 32, 61) from model default")
        assert "expects 25600 concatenated aux hidden features but received 15360" in (
            v1.hint or ""
        )
        # sglang reads the top-level copy
        sg = by_field(check_drafter(cfg, engine="sglang"))
        assert sg["dflash_config.target_layer_ids (location)"].status == "warning"

    def test_missing_mask(self):
        cfg = published()
        del cfg["dflash_config"]["mask_token_id"]
        mask = by_field(check_drafter(cfg))["dflash_config.mask_token_id"]
        assert mask.status == "missing" and "For parallel drafting" in (mask.hint or "")
        sglang = by_field(check_drafter(cfg, engine="sglang"))["dflash_config.mask_token_id"]
        assert sglang.status == "warning" and "<|MASK|>" in (sglang.hint or "")

    def test_mask_outside_the_vocabulary(self):
        cfg = published()
        cfg["dflash_config"]["mask_token_id"] = 248320
        mask = by_field(check_drafter(cfg))["dflash_config.mask_token_id"]
        assert mask.status == "invalid" and "not below vocab_size 248320" in (mask.hint or "")

    @pytest.mark.parametrize(
        ("ids", "needle"),
        [
            ([1, 16, 16, 46, 61], "duplicate ids [16]"),
            ([16, 1, 31, 46, 61], "not ascending"),
            ([1, 16, 31, 46, 64], "ids [64] name no layer of a 64-layer target"),
            ([-2, 16, 31, 46, 61], "ids [-2] name no layer"),
        ],
    )
    def test_bad_id_lists(self, ids: list[int], needle: str):
        cfg = published()
        cfg["dflash_config"]["target_layer_ids"] = ids
        row = by_field(check_drafter(cfg))["dflash_config.target_layer_ids"]
        assert row.status == "invalid" and needle in (row.hint or "")

    def test_minus_one_is_the_embeddings_when_the_depth_is_known(self):
        # was "ids [-1] do not exist … the first request dies", while vLLM captures index 0 (the
        # embeddings) for it and the aux row said ok
        cfg = published()
        cfg["dflash_config"]["target_layer_ids"] = [-1, 16, 31, 46, 61]
        rows = by_field(check_drafter(cfg, entry=ENTRY))
        assert rows["dflash_config.target_layer_ids"].status == "mismatch"  # the published ids
        assert (rows["aux layers"].status, rows["aux layers"].found) == (
            "ok",
            "(0, 17, 32, 47, 62)",
        )
        row = by_field(check_drafter(cfg))["dflash_config.target_layer_ids"]
        assert row.status == "ok" and "-1 reads the target's embeddings" in (row.hint or "")
        cfg["dflash_config"]["target_layer_ids"] = [1, 16, 31, 46, 64]  # one past the last
        rows = by_field(check_drafter(cfg))
        assert rows["dflash_config.target_layer_ids"].status == "invalid"
        assert "expects 25600 concatenated aux hidden features but received 20480" in (
            rows["aux layers (vllm V1)"].hint or ""
        )  # the engine's row now follows the range problem

    def test_negative_ids_are_invalid_when_the_depth_is_not_known(self):
        # was "ok: target layer count unknown" while the vLLM rows below it said invalid
        cfg = published()
        del cfg["num_target_layers"]
        cfg["dflash_config"]["target_layer_ids"] = [-2, 16, 31, 46, 61]
        rows = by_field(check_drafter(cfg))
        row = rows["dflash_config.target_layer_ids"]
        assert row.status == "invalid" and "ids [-2] name no target layer" in (row.hint or "")
        assert rows["aux layers (vllm V1)"].status == "invalid"  # the engine's row stays
        for ok in ([1, 16, 31, 46, 61], [-1, 16, 31, 46, 61]):  # -1: layer 0's input
            cfg["dflash_config"]["target_layer_ids"] = ok
            assert by_field(check_drafter(cfg))["dflash_config.target_layer_ids"].status == "ok"

    def test_formula_is_only_a_warning(self):
        cfg = published()
        cfg["dflash_config"]["target_layer_ids"] = [5, 19, 33, 47, 61]
        rows = by_field(check_drafter(cfg))
        assert rows["dflash_config.target_layer_ids"].status == "ok"
        formula = rows["dflash_config.target_layer_ids (formula)"]
        assert (formula.status, formula.expected) == ("warning", [1, 16, 31, 46, 61])

    def test_layer_types_length(self):
        cfg = published()
        cfg["layer_types"] = [SLIDING] * 4
        rows = by_field(check_drafter(cfg))
        assert rows["layer_types"].status == "invalid"
        assert "must be equal to the number of `layer_types` (4)" in (
            rows["layer_types"].hint or ""
        )
        assert rows["transformers (load)"].status == "invalid"

    def test_window_dropped_by_transformers(self):
        cfg = published()
        cfg["use_sliding_window"] = False  # the window is now lost on load
        rows = by_field(check_drafter(cfg))
        window = rows["sliding_window"]
        assert window.status == "invalid"
        assert "DFlash sliding attention requires a window size" in (window.hint or "")
        assert "dropped by transformers" in (window.hint or "")
        rewrite = rows["transformers: sliding_window"]
        assert (rewrite.status, rewrite.found, rewrite.expected) == ("warning", 2048, None)

    def test_window_in_swa_window_size_survives(self):
        cfg = published()
        cfg.update(use_sliding_window=False, sliding_window=None)
        cfg["dflash_config"]["swa_window_size"] = 2048
        rows = by_field(check_drafter(cfg, entry=ENTRY))
        assert rows["sliding_window"].status == "ok"
        assert "dflash_config.swa_window_size" in (rows["sliding_window"].hint or "")
        # ...but sglang reads only the top-level window after the rewrite
        sg = by_field(check_drafter(cfg, entry=ENTRY, engine="sglang"))
        assert sg["sglang: sliding_window"].status == "invalid"

    def test_missing_layer_types_are_filled_by_transformers(self):
        cfg = stale()
        del cfg["layer_types"]
        rows = by_field(check_drafter(cfg))
        filled = rows["transformers: layer_types"]
        assert (filled.found, filled.expected) == (None, [FULL] * 5)

    def test_absurd_layer_count_is_invalid_not_expanded(self):
        cfg = published()
        cfg.update(num_hidden_layers=10**12)
        del cfg["layer_types"]  # transformers would fill 10**12 entries
        rows = by_field(check_drafter(cfg))
        assert rows["num_hidden_layers"].status == "invalid"
        assert "attention (per layer)" not in rows

    def test_string_is_causal_is_flagged(self):
        cfg = published()
        cfg["is_causal"] = "false"
        row = by_field(check_drafter(cfg))["is_causal"]
        assert row.status == "invalid" and "bool('false') = True" in (row.hint or "")

    def test_dflash2_needs_its_fields_and_the_v2_runner(self):
        entry = registry.get_entry("qwen3.8-27b-dflash2")
        cfg = published()
        cfg["architectures"] = ["DFlash2DraftModel"]
        rows = by_field(check_drafter(cfg, entry=entry))
        assert rows["dflash_config (DFlash 2)"].status == "invalid"
        assert "DFlash candidate-head drafts" in (rows["vllm: model runner"].hint or "")
        assert rows["is_causal"].status == "missing"
        assert rows["dflash_config.selector_rank"].expected == 256

    def test_unknown_engine(self):
        with pytest.raises(UsageError):
            check_drafter(published(), engine="tgi")


class TestEngines:
    def test_sglang_rows(self):
        rows = by_field(check_drafter(stale(), entry=ENTRY, engine="sglang"))
        assert rows["sglang: last target layer"].found == 63
        assert "sglang#32204" in (rows["sglang: last target layer"].hint or "")
        k = rows["num_speculative_tokens"]
        assert "--speculative-num-draft-tokens 16" in (k.hint or "")
        assert "vllm: model runner" not in rows

    def test_sglang_refuses_ids_outside_the_target_at_start_up(self):
        # -1 is the embeddings to vLLM, out of range to sglang (dflash_utils' range check)
        cfg = published()
        cfg["dflash_config"]["target_layer_ids"] = [-1, 16, 31, 46, 61]
        vllm_rows = by_field(check_drafter(cfg))
        assert "sglang: target_layer_ids" not in vllm_rows
        assert vllm_rows["dflash_config.target_layer_ids"].status == "ok"
        row = by_field(check_drafter(cfg, engine="sglang"))["sglang: target_layer_ids"]
        assert (row.status, row.found, row.expected) == ("invalid", [-1], "0 … 63")
        assert row.hint == (
            "sglang refuses them at start-up: 'DFLASH target_layer_ids contains an out-of-range "
            "layer id. target_layer_ids[0]=-1, target_num_layers=64.'"
        )
        cfg["dflash_config"]["target_layer_ids"] = [1, 16, 31, 46, 64]  # one past the last
        rows = by_field(check_drafter(cfg, engine="sglang"))
        assert rows["sglang: target_layer_ids"].found == [64]
        assert "target_layer_ids[4]=64, target_num_layers=64" in (
            rows["sglang: target_layer_ids"].hint or ""
        )
        assert (rows["dflash_config.target_layer_ids"].hint or "").endswith(
            "sglang refuses them at start-up (its row below)"
        )  # not vLLM's first-request error
        del cfg["num_target_layers"]  # the depth unknown: only the negative ids are known bad
        cfg["dflash_config"]["target_layer_ids"] = [-1, 16, 31, 46, 61]
        row = by_field(check_drafter(cfg, engine="sglang"))["sglang: target_layer_ids"]
        assert (row.found, row.expected) == ([-1], "ids >= 0")
        cfg["dflash_config"]["target_layer_ids"] = [1, 16, 31, 46, 61]
        assert "sglang: target_layer_ids" not in by_field(check_drafter(cfg, engine="sglang"))

    def test_local_engine_supports_mixed_layers(self):
        rows = by_field(check_drafter(published(), entry=ENTRY, engine="local"))
        assert rows["local: mixed sliding/full"].status == "ok"
        assert "vllm: model runner" not in rows
        assert failed(list(rows.values())) == {}


class TestWeights:
    def test_published_weights_from_a_sparse_file(self, tmp_path: Path):
        path = write_safetensors(tmp_path / "model.safetensors", qwen36_27b_tensors())
        rows = by_field(check_drafter(published(), entry=ENTRY, header=read_header(path)))
        fc = rows["weights: fc.weight"]
        assert (fc.status, fc.found, fc.expected) == ("ok", [5120, 25600], [5120, 25600])
        for name in ("weights: layers", "weights: attention", "weights: mlp", "weights: norms"):
            assert rows[name].status == "ok", rows[name]
        assert rows["weights: embed_tokens/lm_head"].found == "shared with the target"

    def test_fc_sized_for_other_taps(self, tmp_path: Path):
        cfg = published()
        cfg["dflash_config"]["target_layer_ids"] = [1, 16, 31, 46]
        path = write_safetensors(tmp_path / "model.safetensors", qwen36_27b_tensors())
        fc = by_field(check_drafter(cfg, header=read_header(path)))["weights: fc.weight"]
        assert (fc.status, fc.found, fc.expected) == ("mismatch", [5120, 25600], [5120, 20480])
        assert "trained with 5 target layers, the config lists 4" in (fc.hint or "")

    def test_layer_count_heads_and_dtype(self, tmp_path: Path):
        spec = dflash_tensors(
            layers=4,
            hidden=64,
            intermediate=128,
            heads=4,
            kv_heads=2,
            head_dim=16,
            taps=5,
            dtype="F16",
        )
        spec["mask_hidden"] = ("F16", [64])
        path = write_safetensors(tmp_path / "model.safetensors", spec)
        cfg = {
            "architectures": ["DFlashDraftModel"],
            "model_type": "qwen3",
            "num_hidden_layers": 5,
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_attention_heads": 4,
            "num_key_value_heads": 4,
            "head_dim": 16,
            "vocab_size": 1000,
            "dtype": "bfloat16",
            "dflash_config": {"mask_token_id": 999, "target_layer_ids": [1, 3, 5, 7, 9]},
        }
        rows = by_field(check_drafter(cfg, header=read_header(path)))
        assert (rows["weights: layers"].found, rows["weights: layers"].expected) == (4, 5)
        attention = rows["weights: attention"]
        assert attention.status == "mismatch" and "k_proj.weight [32, 64]" in attention.found
        assert rows["weights: dtype"].status == "warning"
        assert rows["weights: mask_hidden"].status == "invalid"


class TestTarget:
    def _target(self, tmp_path: Path, **fields: Any) -> dict[str, Any]:
        text = {"num_hidden_layers": 64, "hidden_size": 5120, "vocab_size": 248320}
        text.update(fields)
        return {"architectures": ["Qwen3_5ForConditionalGeneration"], "text_config": text}

    def test_matching_target(self, tmp_path: Path):
        rows = by_field(check_drafter(published(), entry=ENTRY, target=self._target(tmp_path)))
        assert rows["target: num_hidden_layers"].status == "ok"
        assert rows["target: vocab_size"].status == "ok"
        assert rows["target: hidden_size"].status == "ok"

    def test_smaller_target(self, tmp_path: Path):
        target = self._target(
            tmp_path, num_hidden_layers=48, vocab_size=151936, hidden_size=4096, rope_theta=1e6
        )
        bad = failed(check_drafter(published(), target=target))
        assert "ids [61] name no layer of a 48-layer target (target config;" in (
            bad["dflash_config.target_layer_ids"].hint or ""
        )
        assert bad["target: vocab_size"].status == "invalid"
        assert bad["target: hidden_size"].status == "mismatch"
        rows = by_field(check_drafter(published(), target=target))
        assert rows["target: rope_theta"].status == "warning"


# ---- run_verify, --fix and the CLI -----------------------------------------------------------


class TestRunVerify:
    def test_report_json_shape(self, tmp_path: Path):
        folder = drafter_dir(tmp_path)
        write_safetensors(folder / "model.safetensors", qwen36_27b_tensors())
        data = run_verify(folder).to_json()
        assert data["ok"] is True
        assert data["registry"]["repo"] == "z-lab/Qwen3.6-27B-DFlash"
        assert data["num_speculative_tokens"] == 15
        assert data["aux_layers"]["captured"] == [2, 17, 32, 47, 62]
        assert [row["window"] for row in data["layers"]] == [2048] * 4 + [None]
        for check in data["checks"]:
            assert set(check) == {"field", "status", "found", "expected", "hint", "level"}

    def test_sharded_weights(self, tmp_path: Path):
        folder = drafter_dir(tmp_path)
        spec = qwen36_27b_tensors()
        names = list(spec)
        half = len(names) // 2
        shards = {"model-00001-of-00002.safetensors": names[:half]}
        shards["model-00002-of-00002.safetensors"] = names[half:]
        weight_map = {}
        for shard, keys in shards.items():
            write_safetensors(folder / shard, {k: spec[k] for k in keys})
            weight_map.update(dict.fromkeys(keys, shard))
        (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
        report = run_verify(folder)
        assert report.ok
        assert by_field(report.checks)["weights: fc.weight"].status == "ok"

    @pytest.mark.parametrize(
        ("content", "needle"),
        [
            ('{"architectures": ["DFlashDraftModel"], "hidden_size": 51', "truncated JSON"),
            ('{"architectures": ["DFlashDraftModel"],, }', "malformed JSON"),
            ("[1, 2, 3]", "expected a JSON object"),
            ('{"num_hidden_layers": "5"}', "num_hidden_layers must be an integer, found str"),
            ('{"dflash_config": {"target_layer_ids": "1,16"}}', "target_layer_ids must be a list"),
            ('{"use_sliding_window": 1}', "use_sliding_window must be true or false"),
        ],
    )
    def test_bad_configs_cannot_run(self, tmp_path: Path, content: str, needle: str):
        folder = tmp_path / "d"
        folder.mkdir()
        (folder / "config.json").write_text(content)
        with pytest.raises(InputError) as info:
            run_verify(folder)
        assert needle in info.value.message and "\n" not in info.value.message

    def test_hostile_safetensors_cannot_run(self, tmp_path: Path):
        folder = drafter_dir(tmp_path)
        (folder / "model.safetensors").write_bytes((2**40).to_bytes(8, "little") + b"{}")
        with pytest.raises(InputError, match="100 MB"):
            run_verify(folder)

    def test_unreachable_host_cannot_run(self, tmp_path: Path):
        from dflashctl.errors import RemoteError

        with pytest.raises(RemoteError, match="connection refused"):
            run_verify(drafter_dir(tmp_path), host="127.0.0.1:1")


def _listing(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


class TestFix:
    def test_round_trip_writes_backup_and_rereads(self, tmp_path: Path):
        folder = drafter_dir(tmp_path, f"{QWEN36}-stale")
        original = (folder / "config.json").read_bytes()
        report = run_verify(folder, drafter=QWEN36, fix=True)
        assert report.ok and report.fix.written
        assert {c.field for c in report.fix.changes} == {
            "dflash_config.mask_token_id",
            "dflash_config.target_layer_ids",
            "layer_types",
            "sliding_window",
            "use_sliding_window",
        }
        assert report.checks_before is not None and any(c.failed for c in report.checks_before)
        assert report.fix.backup.read_bytes() == original
        assert report.fix.backup.name.startswith("config.json.bak-")
        on_disk = json.loads((folder / "config.json").read_text())
        assert on_disk["dflash_config"] == {
            "mask_token_id": 248070,
            "target_layer_ids": [1, 16, 31, 46, 61],
        }
        assert on_disk["layer_types"] == [SLIDING] * 4 + [FULL]
        assert (on_disk["sliding_window"], on_disk["use_sliding_window"]) == (2048, True)
        assert list(on_disk) == list(json.loads(original))  # key order kept
        # only the file and its backup: no temp file left behind, nothing else touched
        assert sorted(p.name for p in folder.iterdir()) == sorted(
            ["config.json", report.fix.backup.name]
        )
        # a second run has nothing to do and writes nothing
        again = run_verify(folder, drafter=QWEN36, fix=True)
        assert again.ok and not again.fix.written
        assert len(list(folder.iterdir())) == 2

    def test_read_only_file_is_refused(self, tmp_path: Path):
        folder = drafter_dir(tmp_path, f"{QWEN36}-stale")
        path = folder / "config.json"
        path.chmod(0o444)
        before = _listing(folder)
        with pytest.raises(ConfigWriteError, match="read-only"):
            run_verify(folder, drafter=QWEN36, fix=True)
        assert _listing(folder) == before
        assert stat.S_IMODE(path.stat().st_mode) == 0o444

    def test_symlink_is_refused(self, tmp_path: Path):
        real = drafter_dir(tmp_path, f"{QWEN36}-stale") / "config.json"
        folder = tmp_path / "linked"
        folder.mkdir()
        (folder / "config.json").symlink_to(real)
        before = real.read_bytes()
        with pytest.raises(ConfigWriteError, match="symbolic link") as info:
            run_verify(folder, drafter=QWEN36, fix=True)
        assert str(real) in (info.value.hint or "")
        assert real.read_bytes() == before
        assert (folder / "config.json").is_symlink()
        assert sorted(p.name for p in folder.iterdir()) == ["config.json"]

    def test_hub_cache_entry_is_refused_with_a_copy_hint(self, tmp_path: Path):
        repo = tmp_path / "hub" / "models--z-lab--Qwen3.6-27B-DFlash"
        blob = repo / "blobs" / ("b" * 64)
        blob.parent.mkdir(parents=True)
        blob.write_bytes((DATA / f"{QWEN36}-stale" / "config.json").read_bytes())
        snapshot = repo / "snapshots" / ("c" * 40)
        snapshot.mkdir(parents=True)
        (snapshot / "config.json").symlink_to(blob)
        report = run_verify(snapshot)  # checking is fine, and finds the entry by the cache path
        assert report.entry is not None and report.entry.name == QWEN36
        assert report.identification is not None
        assert report.identification.how == "name 'z-lab/Qwen3.6-27B-DFlash'"
        with pytest.raises(ConfigWriteError) as info:
            run_verify(snapshot, fix=True)
        assert "hf download" in (info.value.hint or "")
        assert blob.read_bytes() == (DATA / f"{QWEN36}-stale" / "config.json").read_bytes()

    def test_file_changed_on_disk_between_read_and_write(self, tmp_path: Path):
        path = drafter_dir(tmp_path, f"{QWEN36}-stale") / "config.json"
        original, st = read_for_fix(path)
        changed = original.replace(b"248064", b"248065")
        path.write_bytes(changed)
        with pytest.raises(ConfigWriteError, match="changed on disk"):
            write_fixed(path, original, st, published())
        assert path.read_bytes() == changed
        assert sorted(p.name for p in path.parent.iterdir()) == ["config.json"]

    def test_ctrl_c_during_the_write_leaves_no_backup(self, tmp_path: Path, monkeypatch):
        """Issue 30 #7: an interrupt after the backup was written but before the new file is in
        place leaves the directory as it was (no stray `config.json.bak-*`); one after the
        rename keeps the backup, which then holds the only copy of the old bytes."""
        import dflashctl.drafter.fix as fix

        path = drafter_dir(tmp_path, f"{QWEN36}-stale") / "config.json"
        original, st = read_for_fix(path)

        def interrupted(*args, **kwargs):
            raise KeyboardInterrupt

        monkeypatch.setattr(fix, "write_atomic", interrupted)
        with pytest.raises(KeyboardInterrupt):
            write_fixed(path, original, st, published())
        assert path.read_bytes() == original
        assert sorted(p.name for p in path.parent.iterdir()) == ["config.json"]

        from dflashctl.files import write_atomic

        def renamed_then_interrupted(*args, **kwargs):
            write_atomic(*args, **kwargs)
            raise KeyboardInterrupt

        monkeypatch.setattr(fix, "write_atomic", renamed_then_interrupted)
        with pytest.raises(KeyboardInterrupt):
            write_fixed(path, original, st, published())
        backups = [p for p in path.parent.iterdir() if p.name.startswith("config.json.bak-")]
        assert len(backups) == 1 and backups[0].read_bytes() == original

    def test_file_replaced_by_a_symlink_after_it_was_read(self, tmp_path: Path):
        path = drafter_dir(tmp_path, f"{QWEN36}-stale") / "config.json"
        original, st = read_for_fix(path)
        elsewhere = tmp_path / "elsewhere.json"
        elsewhere.write_bytes(original)
        path.unlink()
        path.symlink_to(elsewhere)
        with pytest.raises(ConfigWriteError, match="replaced by a symbolic link"):
            write_fixed(path, original, st, published())
        assert elsewhere.read_bytes() == original and path.is_symlink()
        assert sorted(p.name for p in path.parent.iterdir()) == ["config.json"]

    def test_without_registry_only_moves_top_level_ids(self, tmp_path: Path):
        cfg = {
            "architectures": ["DFlashDraftModel"],
            "model_type": "qwen3",
            "num_hidden_layers": 2,
            "hidden_size": 64,
            "vocab_size": 1000,
            "num_target_layers": 8,
            "target_layer_ids": [1, 3],
            "dflash_config": {"mask_token_id": 999},
        }
        folder = drafter_dir(tmp_path, "tiny", cfg)
        report = run_verify(folder, fix=True)
        assert report.ok and report.fix.written
        on_disk = json.loads((folder / "config.json").read_text())
        assert "target_layer_ids" not in on_disk
        assert on_disk["dflash_config"] == {"mask_token_id": 999, "target_layer_ids": [1, 3]}

        # A move is done even when other problems remain; the re-check reports them.
        cfg["dflash_config"] = {"mask_token_id": 1000}  # outside the vocab
        folder = drafter_dir(tmp_path, "tiny2", cfg)
        report = run_verify(folder, fix=True)
        assert report.fix.written and not report.ok
        assert set(failed(report.checks)) == {"dflash_config.mask_token_id"}

        # Nothing it can move, and a problem only a registry value could fix: refused.
        cfg["dflash_config"] = {
            "mask_token_id": 1000,
            "target_layer_ids": cfg.pop("target_layer_ids"),
        }
        folder = drafter_dir(tmp_path, "tiny3", cfg)
        before = _listing(folder)
        with pytest.raises(UsageError, match="--fix needs canonical values"):
            run_verify(folder, fix=True)
        assert _listing(folder) == before

    def test_refuses_another_checkpoints_values(self, tmp_path: Path):
        folder = drafter_dir(tmp_path, f"{QWEN36}-stale")
        before = _listing(folder)
        with pytest.raises(UsageError, match="another checkpoint"):
            run_verify(folder, drafter="qwen3-8b-dflash-b16", fix=True)
        assert _listing(folder) == before


class TestCli:
    def test_exit_codes_0_and_1(self, runner, tmp_path: Path):
        good = drafter_dir(tmp_path, QWEN36)
        bad = drafter_dir(tmp_path, f"{QWEN36}-stale")
        assert runner.invoke(app, ["verify-config", str(good)]).exit_code == 0
        result = runner.invoke(app, ["verify-config", str(bad)])
        assert result.exit_code == 1
        assert "PROBLEMS" in result.output and "off by 6" in result.output

    def test_human_output_leads_with_the_problems(self, runner, tmp_path: Path):
        """The verdict comes before the table, and the failing rows are its first rows, not
        three among 27."""
        bad = drafter_dir(tmp_path, f"{QWEN36}-stale")
        lines = runner.invoke(app, ["verify-config", str(bad)]).output.splitlines()
        table_start = next(i for i, line in enumerate(lines) if line.startswith("┏"))
        assert any(line.startswith("PROBLEMS: 4") for line in lines[:table_start])
        statuses = [
            cells[1].strip()
            for line in lines
            if line.startswith("│") and (cells := line.split("│")[1:])[1].strip()
        ]
        failing = {"mismatch", "missing", "invalid"}
        n = sum(s in failing for s in statuses)
        assert n == 4 and all(s in failing for s in statuses[:n]), statuses
        assert statuses[n] == "warning"

    def test_an_80_column_report_is_one_check_a_row(self, runner, tmp_path: Path, monkeypatch):
        """Below 110 columns five columns split field names and hashes mid-word: each check is
        its status, its name whole and its value (found and expected only when they differ),
        its hint under them; the problems still first."""
        monkeypatch.setenv("COLUMNS", "80")
        bad = drafter_dir(tmp_path, f"{QWEN36}-stale")
        lines = runner.invoke(app, ["verify-config", str(bad)]).output.splitlines()
        lines = lines[3:-1]  # the path, the registry, the verdict: one line each into a pipe
        assert all(len(line.rstrip()) <= 80 for line in lines), lines
        assert not any(line.startswith("┏") for line in lines[:-12])  # the checks: no box
        statuses = {"ok", "warning", "mismatch", "missing", "invalid"}
        rows = [line for line in lines if line.split(" ", 1)[0] in statuses]
        failing = {"mismatch", "missing", "invalid"}
        assert all(r.split()[0] in failing for r in rows[:4]), rows[:6]
        assert rows[4].split()[0] == "warning"
        mask = next(r for r in rows if " dflash_config.mask_token_id " in r)
        assert mask.split()[:3] == ["mismatch", "dflash_config.mask_token_id", "found"]
        assert "expected 248070" in mask
        ok = next(r for r in rows if " hidden_size " in r)
        assert ok.split() == ["ok", "hidden_size", "5120"]  # equal: shown once

    @pytest.mark.parametrize(
        ("extra", "needle"),
        [
            (["--engine", "tgi"], "unknown engine 'tgi'"),
            (["--drafter", "qwen3.6-27b"], "unknown drafter 'qwen3.6-27b'"),
            (["--host", "gpu-box.invalid"], "unknown host name 'gpu-box.invalid'"),
        ],
    )
    def test_exit_code_2(self, monkeypatch, capsys, tmp_path: Path, extra, needle):
        good = drafter_dir(tmp_path, QWEN36)
        code, out, err = run_main(monkeypatch, capsys, "verify-config", str(good), *extra)
        assert (code, out) == (2, "")
        assert err.startswith("Error: ") and needle in err

    def test_missing_file_exits_2(self, monkeypatch, capsys, tmp_path: Path):
        code, out, err = run_main(monkeypatch, capsys, "verify-config", str(tmp_path / "nope"))
        assert (code, out) == (2, "")
        assert "config file not found" in err and "Traceback" not in err

    def test_json_is_pure_json_on_stdout(self, runner, tmp_path: Path):
        bad = drafter_dir(tmp_path, f"{QWEN36}-stale")
        result = runner.invoke(app, ["verify-config", str(bad), "--json"])
        assert result.exit_code == 1
        data = json.loads(result.stdout)
        assert data["ok"] is False
        statuses = {c["field"]: c["status"] for c in data["checks"]}
        assert statuses["dflash_config.mask_token_id"] == "mismatch"
        levels = {"ok": "ok", "warning": "warning", "mismatch": "fail", "missing": "fail"}
        assert all(c["level"] == levels.get(c["status"], "fail") for c in data["checks"])
        assert {c["status"] for c in data["checks"]} <= {
            "ok",
            "mismatch",
            "missing",
            "invalid",
            "warning",
        }

    def test_fix_through_the_cli(self, runner, tmp_path: Path):
        bad = drafter_dir(tmp_path, f"{QWEN36}-stale")
        result = runner.invoke(app, ["verify-config", str(bad), "--fix", "--json"])
        assert result.exit_code == 0
        data = json.loads(result.stdout)
        assert data["fix"]["written"] is True and data["ok"] is True
        assert any(c["status"] == "mismatch" for c in data["checks_before"])

    def test_subprocess_one_line_errors_and_exit_codes(self, tmp_path: Path):
        env = dict(os.environ, NO_COLOR="1", COLUMNS="200")
        env.pop("DFLASHCTL_DEBUG", None)
        bad = drafter_dir(tmp_path, f"{QWEN36}-stale")
        run = subprocess.run(
            [sys.executable, "-m", "dflashctl", "verify-config", str(bad), "--json"],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
        )
        assert run.returncode == 1
        assert json.loads(run.stdout)["ok"] is False
        (bad / "model.safetensors").write_bytes((2**62).to_bytes(8, "little") + b"{}")
        run = subprocess.run(
            [sys.executable, "-m", "dflashctl", "verify-config", str(bad)],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
        )
        assert run.returncode == 2
        assert run.stdout == ""
        lines = run.stderr.strip().splitlines()
        assert lines[0].startswith("Error: ") and "100 MB" in lines[0]
        assert "Traceback" not in run.stderr and len(lines) == 2  # the error and its hint


# ---- the rule helpers of dflashctl/drafter/rules/base.py, word for word (issue 31) ----------


@pytest.mark.parametrize(
    ("ids", "even"),
    [([], False), ([5], False), ([1, 2], False), ([0, 4, 8], True), ([0, 1, 2, 3], True),
     ([0, 1, 1, 2], False), ([3, 2, 1], False), ([0, 4, 10], True), ([0, 4, 11], False),
     ([0, 20, 43], True), ([0, 20, 44], False)],
)  # fmt: skip
def test_evenly_spaced(ids: list[int], even: bool) -> None:
    """Gaps within max(2, 15 % of the mean gap) of each other: 2 and 3 apart on small gaps,
    3.225 allowed on a mean gap of 21.5 (3 in, 4 out)."""
    from dflashctl.drafter.rules.base import evenly_spaced

    assert evenly_spaced(ids) is even


@pytest.mark.parametrize(
    ("found", "expected", "n_target", "text"),
    [([1, 2], [1, 2, 3], None, "2 ids where the published drafter has 3: fc.weight's width is "
      "fixed by the count it was trained with"),
     ([2, 3, 4], [1, 2, 3], None, "ids shifted by one layer from the published ones (each id + 1):"
      " engines already add 1 when capturing, so this taps the layer after the one it was trained"
      " on"),
     ([0, 1, 2], [1, 2, 3], None, "ids shifted by one layer from the published ones (each id − 1):"
      " the drafter reads the layer before the one it was trained on"),
     ([3, 1, 2], [1, 2, 3], None, "the published ids in another order: engines hand the features "
      "to fc in layer order"),
     ([1, 9, 17, 25, 33], [1, 2, 3, 4, 5], 36, "the generic formula (build_target_layer_ids), not "
      "this checkpoint's published ids"),
     ([1, 9, 17, 25, 33], [1, 2, 3, 4, 5], None, "evenly spaced guess (about every 8 layers from 1 "
      "to 33), not the published ids"),
     ([2, 10, 18, 26], [1, 5, 9, 30], 40, "evenly spaced guess (about every 8 layers from 2 to 26),"
      " not the published ids"),
     ([1, 3, 4, 30], [1, 5, 9, 30], None, "2 of 4 ids differ from the published ones"),
     ([1, 3, 4, 31], [1, 5, 9, 30], None, "3 of 4 ids differ from the published ones")],
)  # fmt: skip
def test_ids_pattern(found: list[int], expected: list[int], n_target: int | None, text: str):
    from dflashctl.drafter.rules.base import ids_pattern

    assert ids_pattern(found, expected, n_target) == text


def test_mask_runs_and_plural() -> None:
    from dflashctl.drafter.rules.base import mask_pattern, plural, runs

    tail = ": a wrong mask id collapses acceptance while the output stays coherent"
    assert mask_pattern(248064, 248070) == "off by 6 (the field story: 248064 vs 248070)" + tail
    assert mask_pattern(7, 5) == mask_pattern(5, 7) == "off by 2" + tail
    assert [plural(n, "layer") for n in (0, 1, 2)] == ["0 layers", "1 layer", "2 layers"]
    assert runs([]) == "none"
    assert runs(["full"]) == "1 × full"
    assert runs(["s", "s", "s", "f"]) == "3 × s + 1 × f"
    assert runs(("a", "b", "a")) == "1 × a + 1 × b + 1 × a"


def _ctx(entry: Any) -> Any:
    from dflashctl.drafter.rules.base import Ctx

    return Ctx({}, entry, None, None, "vllm", None, None, None, None)  # type: ignore[arg-type]


def test_canon_compares_with_the_registry() -> None:
    import dataclasses

    e = registry.get_entry("qwen3-8b-dflash-b16")
    c = _ctx(e)
    h = {"hint_bad": "bad", "hint_ok": "good"}
    assert c.canon("h", e.hidden_size, "hidden_size", **h) is True
    assert c.canon("h", e.hidden_size + 1, "hidden_size", **h) is True
    assert c.canon("h", None, "hidden_size", **h) is True
    assert c.canon("h", None, "hidden_size", **h, hint_missing="gone") is True
    n = e.target.num_hidden_layers
    assert c.canon("t", n + 1, "target.num_hidden_layers", hint_bad="b") is True
    assert c.canon("t", 1, "x", expected=(1, 2)) is True
    rows = [(r.name, r.status, r.found, r.expected, r.hint) for r in c.checks]
    assert rows == [
        ("h", "ok", e.hidden_size, e.hidden_size, "good"),
        ("h", "mismatch", e.hidden_size + 1, e.hidden_size, "bad"),
        ("h", "missing", None, e.hidden_size, "bad"),
        ("h", "missing", None, e.hidden_size, "gone"),
        ("t", "mismatch", n + 1, n, "b"),
        ("t", "mismatch", 1, [1, 2], None),
    ]
    # nothing to compare with: no row, False
    assert c.canon("x", 1, "no_such_field") is False
    assert c.canon("x", 1, "target.no_such_field") is False
    assert _ctx(None).canon("x", 1, "hidden_size") is False
    assert len(c.checks) == 6
    # an unconfirmed registry value turns a mismatch into a warning, never an ok
    u = _ctx(dataclasses.replace(e, unconfirmed=("hidden_size",)))
    u.canon("h", e.hidden_size, "hidden_size", hint_ok="good")
    u.canon("h", 1, "hidden_size", hint_bad="bad")
    u.canon("h", 1, "hidden_size")
    why = f"the registry value is unconfirmed ({e.source})"
    assert [(r.status, r.hint) for r in u.checks] == [
        ("ok", "good"),
        ("warning", why + "; bad"),
        ("warning", why),
    ]
