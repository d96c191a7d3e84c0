"""Hostile drafter configs and safetensors files (issue 19, items 2, 8, 9, 10): one clear line
and exit 2 for what cannot be read, a failing row (never "ok") for what is wrong, in seconds,
and the drafter directory unchanged."""

from __future__ import annotations

import json
import os
from pathlib import Path

from drafter_files import drafter_config
from hostile import assert_clean_error, dflashctl, snapshot

MEM = 1536 << 20


def drafter(tmp_path: Path, cfg: dict | None = None, raw: str | None = None) -> Path:
    d = tmp_path / "drafter"
    d.mkdir()
    (d / "config.json").write_text(raw if raw is not None else json.dumps(cfg or drafter_config()))
    return d


class TestUnreadable:
    def test_config_linked_to_dev_zero(self, tmp_path: Path):
        d = tmp_path / "drafter"
        d.mkdir()
        (d / "config.json").symlink_to("/dev/zero")
        res = dflashctl("verify-config", str(d), mem_limit=MEM, timeout=20)
        assert_clean_error(res, 2, contains="character device")
        assert res.seconds < 5

    def test_config_that_is_a_fifo(self, tmp_path: Path):
        d = tmp_path / "drafter"
        d.mkdir()
        os.mkfifo(d / "config.json")
        res = dflashctl("verify-config", str(d), timeout=20)
        assert_clean_error(res, 2, contains="FIFO")
        assert res.seconds < 5

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

    def test_a_name_over_name_max(self, tmp_path: Path):
        res = dflashctl("verify-config", str(tmp_path / ("c" * 300)))
        assert_clean_error(res, 2, contains="too long")

    def test_a_path_through_a_regular_file(self, tmp_path: Path):
        (tmp_path / "file").write_text("{}")
        res = dflashctl("verify-config", str(tmp_path / "file" / "drafter"))
        assert_clean_error(res, 2)


class TestWrongOk:
    def test_dangling_safetensors_symlink_is_not_ok(self, tmp_path: Path):
        d = drafter(tmp_path)
        (d / "model.safetensors").symlink_to("../blobs/0123abcd")
        before = snapshot(d)
        res = dflashctl("verify-config", str(d))
        assert_clean_error(res, 2, contains="broken symbolic link")
        assert snapshot(d) == before
