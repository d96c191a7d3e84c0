"""Hostile safetensors files (issue 19, items 2, 8, 9): what no safetensors reader takes is an
error (exit 2, one line), never "ok" and never "no weights"; nothing in the drafter changes."""

from __future__ import annotations

import json
import os
from pathlib import Path

from support.hostile import assert_clean_error, dflashctl, snapshot
from test_hostile_config import drafter


class TestSafetensors:
    def test_safetensors_that_is_a_fifo(self, tmp_path: Path):
        d = drafter(tmp_path)
        os.mkfifo(d / "model.safetensors")
        before = snapshot(d)
        res = dflashctl("verify-config", str(d), timeout=20)
        assert "Traceback" not in res.stderr
        assert res.code == 2, res.stdout + res.stderr
        assert "FIFO" in res.stderr
        assert res.seconds < 5
        assert snapshot(d) == before

    def test_dangling_safetensors_symlink_is_not_ok(self, tmp_path: Path):
        d = drafter(tmp_path)
        (d / "model.safetensors").symlink_to("../blobs/0123abcd")
        before = snapshot(d)
        res = dflashctl("verify-config", str(d))
        assert_clean_error(res, 2, contains="broken symbolic link")
        assert snapshot(d) == before

    def test_safetensors_metadata_values_must_be_strings(self, tmp_path: Path):
        from support.safetensors_files import header_bytes

        d = drafter(tmp_path)
        head, size = header_bytes({"fc.weight": ("F32", [2, 2])}, {"format": 1})  # type: ignore[dict-item]
        (d / "model.safetensors").write_bytes(head + bytes(size))
        res = dflashctl("verify-config", str(d))
        assert_clean_error(res, 2, contains="not a string")

    def test_a_shard_name_over_name_max(self, tmp_path: Path):
        d = drafter(tmp_path)
        index = {"metadata": {}, "weight_map": {"fc.weight": "s" * 300 + ".safetensors"}}
        (d / "model.safetensors.index.json").write_text(json.dumps(index))
        before = snapshot(d)
        res = dflashctl("verify-config", str(d))
        assert_clean_error(res, 2, contains="longer than any file name")
        assert snapshot(d) == before

    def test_a_5000_digit_offset_is_one_readable_line(self, tmp_path: Path):
        """Issue 30 #10: an integer of 5000 digits in a header is named by its length, not
        printed (nor Python's 4300-digit conversion error)."""
        import struct

        d = drafter(tmp_path)
        head = '{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4' + "0" * 5000 + "]}}"
        raw = struct.pack("<Q", len(head)) + head.encode() + bytes(4)
        (d / "model.safetensors").write_bytes(raw)
        res = dflashctl("verify-config", str(d))
        assert_clean_error(res, 2, contains="an integer of 5001 digits")
        assert len(res.stderr.splitlines()[0]) < 300

    def test_a_shard_name_with_a_newline_stays_one_line(self, tmp_path: Path):
        d = drafter(tmp_path)
        index = {"metadata": {}, "weight_map": {"fc.weight": "model-0\nInjected: yes.safetensors"}}
        (d / "model.safetensors.index.json").write_text(json.dumps(index))
        res = dflashctl("verify-config", str(d))
        assert_clean_error(res, 2, contains="model-0\\nInjected")
        assert [line for line in res.stderr.splitlines() if "Injected" in line] == [
            res.stderr.splitlines()[0]
        ]
