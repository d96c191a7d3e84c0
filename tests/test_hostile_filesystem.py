"""Hostile file-system targets (issue 19, items 1 and 9): every file dflashctl writes goes
through one atomic writer that refuses what is not a regular file; nothing else changes.

Device nodes are made with mknod inside the test's own directory (never /dev itself), so a
regression cannot damage the machine; where mknod is not permitted those cases are skipped.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from support.hostile import assert_clean_error, dflashctl, snapshot

from dflashctl.errors import OutputError
from dflashctl.files import write_atomic, write_json_atomic

DATA = Path(__file__).resolve().parent / "data" / "metrics"
LOG = DATA / "vllm_034_healthy.log"


def char_device(path: Path) -> Path:
    """A copy of /dev/null's device node at `path` (skips when mknod is refused)."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (PermissionError, OSError) as e:
        pytest.skip(f"mknod not permitted here: {e}")
    return path


class TestAtomicWriter:
    def test_writes_a_new_file_and_replaces_an_old_one(self, tmp_path: Path):
        target = tmp_path / "out.json"
        write_json_atomic(target, {"a": 1})
        assert target.read_text() == '{\n  "a": 1\n}\n'
        target.chmod(0o600)
        write_atomic(target, b"new")
        assert target.read_bytes() == b"new"
        assert stat.S_IMODE(target.stat().st_mode) == 0o600  # the old file's mode is kept
        assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]  # no temp left

    @pytest.mark.parametrize("kind", ["dir", "fifo", "device", "link_to_fifo", "link_to_dir"])
    def test_refuses_what_is_not_a_regular_file(self, tmp_path: Path, kind: str):
        work = tmp_path / "w"
        work.mkdir()
        target = work / "target"
        if kind == "dir":
            target.mkdir()
        elif kind == "fifo":
            os.mkfifo(target)
        elif kind == "device":
            char_device(target)
        elif kind == "link_to_fifo":
            os.mkfifo(work / "fifo")
            target.symlink_to(work / "fifo")
        else:
            (work / "d").mkdir()
            target.symlink_to(work / "d")
        before = snapshot(work)
        with pytest.raises(OutputError, match="not a regular file"):
            write_atomic(target, b"x")
        assert snapshot(work) == before

    def test_name_too_long_and_a_file_as_directory_are_one_line_errors(self, tmp_path: Path):
        (tmp_path / "plain").write_text("x")
        with pytest.raises(OutputError, match="too long"):
            write_atomic(tmp_path / ("n" * 300), b"x")
        with pytest.raises(OutputError, match="not a directory"):
            write_atomic(tmp_path / "plain" / "child", b"x")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["plain"]


class TestPlotTargets:
    @pytest.fixture(autouse=True)
    def _mpl(self):
        pytest.importorskip("matplotlib")

    def test_plot_onto_a_device_node_is_refused(self, tmp_path: Path):
        dev = char_device(tmp_path / "null")
        res = dflashctl("metrics", str(LOG), "--plot", str(dev))
        assert_clean_error(res, 2, contains="character device")
        assert stat.S_ISCHR(dev.lstat().st_mode)  # still the device node, not a PNG
        assert [p.name for p in tmp_path.iterdir()] == ["null"]

    def test_plot_through_a_symlink_to_a_fifo_is_refused(self, tmp_path: Path):
        os.mkfifo(tmp_path / "fifo")
        (tmp_path / "chart.png").symlink_to(tmp_path / "fifo")
        before = snapshot(tmp_path)
        res = dflashctl("metrics", str(LOG), "--plot", str(tmp_path / "chart.png"), timeout=30)
        assert_clean_error(res, 2, contains="FIFO")
        assert snapshot(tmp_path) == before

    def test_plot_onto_a_directory_is_one_line(self, tmp_path: Path):
        before = snapshot(tmp_path)
        res = dflashctl("metrics", str(LOG), "--plot", str(tmp_path))
        assert_clean_error(res, 2, contains="directory")
        assert snapshot(tmp_path) == before

    def test_bench_plot_onto_a_directory_is_refused_before_measuring(self, tmp_path: Path):
        d = tmp_path / "x.png"
        d.mkdir()
        res = dflashctl("bench", "http://127.0.0.1:9/v1", "--plot", str(d))
        assert_clean_error(res, 2, contains="directory")


class TestFetchDir:
    def test_empty_dir_is_refused_and_the_cwd_untouched(self, tmp_path: Path):
        before = snapshot(tmp_path)
        res = dflashctl("fetch", "qwen3-8b-dflash-b16", "--dir", "", cwd=tmp_path)
        assert_clean_error(res, 2, contains="--dir is empty")
        assert snapshot(tmp_path) == before

    def test_a_name_over_name_max_is_one_line(self, tmp_path: Path):
        res = dflashctl("fetch", "qwen3-8b-dflash-b16", "--dir", str(tmp_path / ("d" * 300)))
        assert_clean_error(res, 2, contains="too long")

    def test_a_path_through_a_regular_file_is_one_line(self, tmp_path: Path):
        (tmp_path / "f").write_text("x")
        res = dflashctl("fetch", "qwen3-8b-dflash-b16", "--dir", str(tmp_path / "f" / "d"))
        assert_clean_error(res, 2, contains="not a directory")


class TestDeploymentState:
    def test_state_file_that_is_a_directory_is_refused(self, tmp_path: Path, monkeypatch):
        from dflashctl.server import deployments

        monkeypatch.setenv("DFLASHCTL_HOME", str(tmp_path / "home"))
        path = deployments.path_of("demo")
        path.mkdir(parents=True)
        dep = deployments.Deployment(
            name="demo",
            engine="dflash",
            host=None,
            url="http://127.0.0.1:8000",
            pid=1,
            starttime=1,
            log="",
            run_dir="",
            port=8000,
            bind="127.0.0.1",
            model="m",
            model_id="m",
            drafter=None,
            cmd=[],
            started_at=deployments.now_iso(),
        )
        with pytest.raises(OutputError, match="directory"):
            deployments.save(dep)
        assert path.is_dir()


class TestFullDisk:
    """`ulimit -f` stands in for a full disk: the write fails mid-way (EFBIG, as ENOSPC would)."""

    def test_plot_on_a_full_disk_leaves_the_old_file(self, tmp_path: Path):
        pytest.importorskip("matplotlib")
        png = tmp_path / "chart.png"
        png.write_bytes(b"old picture")
        res = dflashctl("metrics", str(LOG), "--plot", str(png), file_limit=4096)
        assert_clean_error(res, 2, contains="nothing was changed")
        assert png.read_bytes() == b"old picture"
        assert [p.name for p in tmp_path.iterdir()] == ["chart.png"]  # no temp file left

    def test_fix_on_a_full_disk_leaves_the_config(self, tmp_path: Path):
        from support.drafter_files import drafter_config

        d = tmp_path / "drafter"
        d.mkdir()
        cfg = drafter_config()
        cfg["dflash_config"]["target_layer_ids"] = [0, 2]
        cfg["target_layer_ids"] = [0, 2]
        del cfg["dflash_config"]["target_layer_ids"]
        (d / "config.json").write_text(json.dumps(cfg) + " " * 6000)
        before = snapshot(d)
        res = dflashctl("verify-config", str(d), "--fix", file_limit=4096)
        assert_clean_error(res, 2, contains="nothing was changed")
        assert snapshot(d) == before, res.stdout + res.stderr


class TestFetchTargets:
    """A name in --dir that fetch must write, held by a directory or a FIFO (the real hub
    server of test_fetch.py): refused before anything moves; nothing in --dir changes."""

    @pytest.mark.parametrize("kind", ["dir", "fifo"])
    def test_a_target_name_that_is_not_a_regular_file(self, kind, tmp_path, monkeypatch, capsys):
        from test_fetch import Hub, fetch

        hub = Hub(tmp_path)
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("DFLASHCTL_PLAYBOOKS", str(hub.playbooks))
        monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
        monkeypatch.chdir(tmp_path)
        try:
            dest = tmp_path / "dest"
            dest.mkdir()
            if kind == "dir":
                (dest / "config.json").mkdir()
            else:
                os.mkfifo(dest / "config.json")
            before = snapshot(dest)
            code, out, err = fetch(monkeypatch, capsys, "tiny-dflash", "--dir", str(dest))
            assert "Traceback" not in err
            assert code == 2 and out == "", err
            assert "config.json" in err and "not a regular file" in err
            assert snapshot(dest) == before
        finally:
            hub.server.stop()


def test_a_copy_to_this_machine_goes_through_the_atomic_writer(tmp_path: Path):
    """`LocalHost.upload` (fetch's push when the host is this machine) refuses a FIFO at the
    destination and a device as the source, and leaves a whole file or none."""
    from dflashctl.errors import InputError
    from dflashctl.hosts.host import LocalHost

    src = tmp_path / "model.safetensors"
    src.write_bytes(os.urandom(3 << 20))
    fifo = tmp_path / "out" / "fifo"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    host = LocalHost()
    with pytest.raises(OutputError):
        host.upload(src, str(fifo))
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    with pytest.raises(InputError):
        host.upload("/dev/zero", str(tmp_path / "out" / "zeros"))
    assert not (tmp_path / "out" / "zeros").exists()
    host.upload(src, str(tmp_path / "out" / "deep" / "copy"))
    assert (tmp_path / "out" / "deep" / "copy").read_bytes() == src.read_bytes()
    assert sorted(p.name for p in (tmp_path / "out" / "deep").iterdir()) == ["copy"]  # no temp
