"""Lifecycle faults (issue 19, items 5 and 6): a foreground `serve` stops the engine it started
on SIGTERM and SIGHUP (real signals, the fake engine, pids this test started); a corrupt
deployment record is skipped and named while the others still work; a wrong start time never
makes `stop` report a kill while the process lives."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fake_engine import make_python
from hostile import REPO, dflashctl
from serve_util import stop_all  # noqa: F401  (fixture)
from sshd_fixture import free_port

from dflashctl.server import deployments as state


def alive(pid: int) -> bool:
    try:
        return "Z" not in Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False


def start_foreground(tmp_path: Path, port: int) -> subprocess.Popen[str]:
    py = make_python(tmp_path / "bin", "ok")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    args = [sys.executable, "-m", "dflashctl", "serve", "--model", "m", "--spec", "none"]
    args += ["--python", str(py), "--port", str(port)]
    return subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


@pytest.mark.usefixtures("stop_all")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_foreground_serve_stops_its_engine_on(tmp_path: Path, sig: signal.Signals):
    port = free_port()
    proc = start_foreground(tmp_path, port)
    engine_pid = None
    try:
        deadline = time.monotonic() + 30
        seen = ""
        while "Application startup complete" not in seen and time.monotonic() < deadline:
            line = proc.stderr.readline() if proc.stderr else ""
            if not line:
                break
            seen += line
        assert "Application startup complete" in seen, seen
        deps = state.all_deployments()
        assert len(deps) == 1 and deps[0].port == port
        engine_pid = deps[0].pid
        assert alive(engine_pid)
        time.sleep(0.5)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
        assert "Traceback" not in err
        assert proc.returncode == 0, err
        assert f"stopped on {sig.name}" in out + err
        deadline = time.monotonic() + 5
        while alive(engine_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(engine_pid)
        assert state.all_deployments() == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if engine_pid is not None and alive(engine_pid):
            os.killpg(engine_pid, signal.SIGKILL)
