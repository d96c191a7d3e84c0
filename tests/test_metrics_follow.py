"""--follow: a file written by a thread, rotated and truncated under the reader; stdin; the CLI.

Every wait is on an event the other side sets (no sleeps to "let things happen", no timed
assertions); the timeout marks only stop a broken build from hanging.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from support.vllm_metrics import engine_line, spec_line, startup_lines, write_log

from dflashctl.cli import app
from dflashctl.metrics import MetricsOptions
from dflashctl.metrics.follow import ROTATED, TRUNCATED, follow_log, tail_file
from dflashctl.metrics.thresholds import Thresholds

HEALTHY = [0.7, 0.5, 0.3]
COLLAPSED = [0.02, 0.0, 0.0]

pytestmark = pytest.mark.timeout(60)


def append(path: Path, text: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def window_text(sec: int, pp: list[float], pid: int = 1) -> str:
    return engine_line(sec, pid=pid) + "\n" + spec_line(sec, per_position=pp, pid=pid) + "\n"


class Steps:
    """The writer runs step n once the reader acknowledged step n-1."""

    def __init__(self) -> None:
        self.acks = [threading.Event() for _ in range(10)]

    def ack(self, n: int) -> None:
        self.acks[n].set()

    def wait(self, n: int) -> None:
        assert self.acks[n].wait(30), f"reader never reached step {n}"


def test_tail_file_sees_rotation_and_truncation(tmp_path: Path):
    path = tmp_path / "server.log"
    path.write_bytes(b"one\n")
    stop = threading.Event()
    steps = Steps()
    got: list[bytes | str] = []

    def writer() -> None:
        steps.wait(0)
        append(path, "two\n")
        steps.wait(1)
        path.rename(tmp_path / "server.log.1")
        path.write_bytes(b"three\n")
        steps.wait(2)
        with open(path, "r+b") as f:  # copytruncate
            f.truncate(0)
        steps.wait(3)
        append(path, "four\n")

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    for item in tail_file(path, poll=0.01, should_stop=stop.is_set):
        if item is None:
            continue
        got.append(item)
        if item == b"one\n":
            steps.ack(0)
        elif item == b"two\n":
            steps.ack(1)
        elif item == b"three\n":
            steps.ack(2)
        elif item == TRUNCATED:
            steps.ack(3)
        elif item == b"four\n":
            stop.set()
    t.join(10)
    assert got == [b"one\n", b"two\n", ROTATED, b"three\n", TRUNCATED, b"four\n"]


def test_follow_log_windows_rotation_truncation_alarm(tmp_path: Path):
    path = write_log(
        tmp_path / "server.log",
        [
            *startup_lines(0),
            *window_text(60, HEALTHY).splitlines(),
            *window_text(70, HEALTHY).splitlines(),
        ],
    )
    stop = threading.Event()
    steps = Steps()

    def writer() -> None:
        steps.wait(0)  # history read
        append(path, window_text(80, HEALTHY))
        steps.wait(1)
        append(path, "(APIServer pid=1) INFO 11-20 10:01:30 [metrics.py:120] SpecDecoding me")
        path.rename(tmp_path / "server.log.1")  # the partial line above is never finished
        path.write_text(
            "".join(["\n".join(startup_lines(200, pid=9)), "\n", window_text(300, HEALTHY, pid=9)])
        )
        steps.wait(2)
        with open(path, "r+b") as f:
            f.truncate(0)
        steps.wait(3)
        append(path, window_text(310, COLLAPSED, pid=9))

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    opts = MetricsOptions()
    th = Thresholds(follow=True)
    events = []
    chunks = tail_file(path, poll=0.01, should_stop=stop.is_set)
    for ev in follow_log(chunks, source=str(path), opts=opts, th=th):
        events.append(ev)
        if ev.kind == "history":
            assert ev.report is not None and ev.report.state.total_windows == 2
            steps.ack(0)
        elif ev.kind == "window" and ev.window.timestamp_raw == "11-20 10:01:20":
            steps.ack(1)
        elif ev.kind == "window" and ev.window.timestamp_raw == "11-20 10:05:00":
            steps.ack(2)
        elif ev.kind == "truncated":
            steps.ack(3)
        elif ev.kind == "alarm" and ev.finding.severity == "alarm":
            stop.set()
            break
    stop.set()
    t.join(10)
    kinds = [e.kind for e in events]
    assert kinds[0] == "history"
    assert "rotated" in kinds and "truncated" in kinds
    assert kinds.index("rotated") < kinds.index("truncated")
    windows = [e.window for e in events if e.kind == "window"]
    assert [w.timestamp_raw for w in windows] == [
        "11-20 10:01:20",
        "11-20 10:05:00",
        "11-20 10:05:10",
    ]
    assert windows[-1].mean_acceptance_length == pytest.approx(1.02)
    assert events[-1].finding.kind == "collapse"
    # the half-written line of the rotated file produced nothing
    assert all(e.window.stream for e in events if e.kind == "window")


def test_cli_follow_exit_on_alarm(runner, tmp_path: Path):
    path = write_log(
        tmp_path / "server.log", [*startup_lines(0), *window_text(60, HEALTHY).splitlines()]
    )
    done = threading.Event()

    def writer() -> None:
        # Whether the reader sees this as history or live, --exit-on-alarm must end it with 1.
        append(path, window_text(70, COLLAPSED) + window_text(80, COLLAPSED))
        done.set()

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    result = runner.invoke(app, ["metrics", str(path), "--follow", "--exit-on-alarm", "--json"])
    t.join(10)
    assert result.exit_code == 1, result.output
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert events[0]["event"] == "history"
    kinds = [a["kind"] for a in events[0]["report"]["alarms"]]
    kinds += [e["alarm"]["kind"] for e in events if e["event"] == "alarm"]
    assert "collapse" in kinds


@pytest.mark.parametrize("pp, code", [(HEALTHY, 0), (COLLAPSED, 1)])
def test_cli_follow_stdin_ends_with_the_verdict(runner, pp, code):
    data = "".join(window_text(60 + 10 * i, pp) for i in range(3))
    result = runner.invoke(app, ["metrics", "-", "--follow"], input=data.encode())
    assert result.exit_code == code, result.output
    assert result.stdout.count("τ ") >= 3  # one line per window
    assert "end of input: 3 window(s)" in result.stdout
