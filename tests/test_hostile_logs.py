"""Hostile engine logs (issue 19, items 2 and 8): impossible numbers are an alarm, never "ok";
what is not a regular file is one line and exit 2, at once."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.hostile import assert_clean_error, dflashctl

DATA = Path(__file__).resolve().parent / "data" / "metrics"
MEM = 1536 << 20


def edited(tmp_path: Path, name: str, old: str, new: str) -> Path:
    text = (DATA / name).read_text()
    assert old in text
    out = tmp_path / name
    out.write_text(text.replace(old, new, 1))
    return out


@pytest.mark.parametrize(
    "name, old, new, words",
    [
        (
            "vllm_034_healthy.log",
            "Mean acceptance length: 2.50",
            "Mean acceptance length: 1e308",
            "mean acceptance length 1e+308",
        ),
        (
            "vllm_034_healthy.log",
            "Mean acceptance length: 2.50",
            "Mean acceptance length: nan",
            None,
        ),
        (
            "vllm_0_8_3.log",
            "Draft acceptance rate: 48.2%",
            "Draft acceptance rate: 250.0%",
            "250 %",
        ),
    ],
)
def test_impossible_numbers_are_not_ok(tmp_path: Path, name, old, new, words):
    log = edited(tmp_path, name, old, new)
    res = dflashctl("metrics", str(log), "--json")
    assert "Traceback" not in res.stderr
    report = json.loads(res.stdout)
    kinds = [f["kind"] for f in report["alarms"] if f["severity"] == "alarm"]
    if words is None:
        # a NaN mean is not taken: the window's τ comes from its counts (Accepted / drafts),
        # so the verdict and the figure are the untouched log's (healthy, 2.52)
        assert res.code == 0 and kinds == [], report["alarms"]
        assert report["mean_acceptance_length"] == 2.52
        return
    assert res.code == 1, res.stdout
    assert "implausible_metrics" in kinds
    assert any(words in f["message"] for f in report["alarms"])


def test_a_log_linked_to_dev_zero(tmp_path: Path):
    log = tmp_path / "engine.log"
    log.symlink_to("/dev/zero")
    res = dflashctl("metrics", str(log), mem_limit=MEM, timeout=20)
    assert_clean_error(res, 2, contains="character device")
    assert "Hint: name a regular log file, or send the log to stdin" in res.stderr
    assert res.seconds < 5


def test_a_log_that_is_a_fifo(tmp_path: Path):
    log = tmp_path / "engine.log"
    os.mkfifo(log)
    res = dflashctl("metrics", str(log), timeout=20)
    assert_clean_error(res, 2, contains="FIFO")
    assert "Hint: to read a pipe, send it to stdin" in res.stderr
    assert res.seconds < 5


def test_a_log_that_is_a_directory(tmp_path: Path):
    res = dflashctl("metrics", str(tmp_path))
    assert_clean_error(res, 2, contains="directory")
    assert "Hint: name a log file in it, or pass a server's URL" in res.stderr


@pytest.mark.parametrize("follow", [(), ("--follow",)])
def test_closed_stdin(follow: tuple[str, ...]):
    import subprocess
    import sys

    from support.hostile import TREE

    env = dict(os.environ, PYTHONPATH=str(TREE))
    proc = subprocess.run(
        [sys.executable, "-m", "dflashctl", "metrics", *follow, "-"],
        env=env, capture_output=True, text=True, timeout=30, cwd=TREE,
        preexec_fn=lambda: os.close(0),
    )  # fmt: skip
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 2 and "stdin is closed" in proc.stderr


@pytest.mark.parametrize("json_out", [False, True])
def test_nan_and_inf_figures_are_no_figures(tmp_path: Path, json_out: bool):
    """Issue 30 #1: `nan` (vLLM's rate over a window without drafts) and `inf` are not
    measurements: the window keeps its other figures, the sparkline and the JSON stay valid."""
    text = (DATA / "vllm_034_healthy.log").read_text()
    text = text.replace("0.745, 0.463, 0.285", "nan, inf, 0.285", 1)
    text = text.replace("Mean acceptance length: 2.49", "Mean acceptance length: inf", 1)
    log = tmp_path / "naninf.log"
    log.write_text(text)
    res = dflashctl("metrics", str(log), *(["--json"] if json_out else []))
    assert "Traceback" not in res.stderr, res.stderr
    assert res.code == 0, res.stdout + res.stderr
    if json_out:

        def refuse(name: str) -> None:
            raise ValueError(f"{name} is not JSON")

        report = json.loads(res.stdout, parse_constant=refuse)
        second = report["series"][1]
        assert second["mean_acceptance_length"] is None and second["per_position"] is None
        assert second["accepted_tokens"] == 1493  # the finite figures of that line are kept
    else:
        assert "Per-position acceptance" in res.stdout


def test_a_full_stdout_is_one_line_on_stderr(tmp_path: Path):
    """Issue 30 #3: `metrics LOG --json > /dev/full`: the write fails, the JSON error would be
    written to the same full stdout; one line on stderr, exit 2."""
    import subprocess
    import sys

    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "dflashctl", "metrics", str(DATA / "vllm_034_healthy.log"),
             "--json"],
            stdout=full, stderr=subprocess.PIPE, text=True, timeout=60,
        )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 2
    assert done.stderr.strip() == "Error: No space left on device"
