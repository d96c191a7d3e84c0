"""Hostile drafter configs and safetensors files (issue 19, items 2, 8, 9, 10): one clear line
and exit 2 for what cannot be read, a failing row (never "ok") for what is wrong, in seconds,
and the drafter directory unchanged."""

from __future__ import annotations

import json
import os
from pathlib import Path

from support.drafter_files import drafter_config
from support.hostile import assert_clean_error, dflashctl

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

    def test_a_name_over_name_max(self, tmp_path: Path):
        res = dflashctl("verify-config", str(tmp_path / ("c" * 300)))
        assert_clean_error(res, 2, contains="too long")

    def test_a_path_through_a_regular_file(self, tmp_path: Path):
        (tmp_path / "file").write_text("{}")
        res = dflashctl("verify-config", str(tmp_path / "file" / "drafter"))
        assert_clean_error(res, 2)


class TestWrongOk:
    def test_rope_theta_nan_is_not_absent(self, tmp_path: Path):
        raw = json.dumps(drafter_config(rope_theta=float("nan")))
        assert "NaN" in raw
        d = drafter(tmp_path, raw=raw)
        res = dflashctl("verify-config", str(d))
        assert_clean_error(res, 2, contains="rope_theta is NaN")

    def test_infinity_and_overflowing_floats(self, tmp_path: Path):
        d = drafter(tmp_path, raw=json.dumps(drafter_config()).replace("1000000.0", "1e999"))
        res = dflashctl("verify-config", str(d))
        assert_clean_error(res, 2, contains="rope_theta is 1e999")


class TestImpossibleCounts:
    def test_num_target_layers_0_is_invalid(self, tmp_path: Path):
        """Issue 30 #10: the target's depth, when the drafter states it, is never 0."""
        for where in ("top", "dflash_config"):
            cfg = drafter_config()
            if where == "top":
                cfg["num_target_layers"] = 0
            else:
                cfg.setdefault("dflash_config", {})["num_target_layers"] = 0
            d = tmp_path / where
            d.mkdir()
            (d / "config.json").write_text(json.dumps(cfg))
            res = dflashctl("verify-config", str(d), "--json")
            assert res.code == 1, res.stdout + res.stderr
            bad = [c for c in json.loads(res.stdout)["checks"] if c["status"] == "invalid"]
            name = "num_target_layers" if where == "top" else "dflash_config.num_target_layers"
            assert [c["field"] for c in bad] == [name]


class TestHugeValues:
    def test_a_5000_digit_integer(self, tmp_path: Path):
        raw = json.dumps(drafter_config()).replace(
            '"vocab_size": 1024', '"vocab_size": ' + "9" * 5000
        )
        d = drafter(tmp_path, raw=raw)
        for args in ((), ("--json",)):
            res = dflashctl("verify-config", str(d), *args)
            assert_clean_error(res, 2, contains="vocab_size is an integer of 5000 digits")
            if args:  # --json: the error as JSON on stdout too, so `| jq` gets JSON
                err = json.loads(res.stdout)
                assert err["ok"] is False and "5000 digits" in err["error"]
            else:
                assert res.stdout == ""

    def test_a_4000_digit_integer_is_not_ok(self, tmp_path: Path):
        raw = json.dumps(drafter_config()).replace(
            '"vocab_size": 1024', '"vocab_size": ' + "9" * 4000
        )
        res = dflashctl("verify-config", str(drafter(tmp_path, raw=raw)), "--json")
        assert_clean_error(res, 2, contains="4000 digits")

    def test_100k_target_layer_ids_take_linear_time(self, tmp_path: Path):
        cfg = drafter_config()
        cfg["dflash_config"]["target_layer_ids"] = list(range(100_000))
        d = drafter(tmp_path, cfg)
        res = dflashctl("verify-config", str(d), timeout=60)
        assert "Traceback" not in res.stderr
        assert res.code == 1, res.stdout + res.stderr  # wrong for a 4-layer target: a failing row
        assert res.seconds < 10, res.seconds  # was 109 s
        assert len(res.stdout) < 50_000  # the human view shows the list shortened
        res = dflashctl("verify-config", str(d), "--json", timeout=60)
        assert res.code == 1 and res.seconds < 10
        ids = {c["field"]: c for c in json.loads(res.stdout)["checks"]}
        assert any(
            isinstance(c["found"], list) and len(c["found"]) == 100_000 for c in ids.values()
        )
