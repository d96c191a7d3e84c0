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
from support.engine_process import fake_model, make_python
from support.hostile import TREE, dflashctl
from support.startup import free_port, read_until_startup

from dflashctl.server import deployments as state


def alive(pid: int) -> bool:
    try:
        return "Z" not in Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False


def start_foreground(tmp_path: Path, port: int) -> subprocess.Popen[str]:
    py = make_python(tmp_path / "bin", "ok")
    env = dict(os.environ, PYTHONPATH=str(TREE))
    args = [sys.executable, "-m", "dflashctl", "serve", "--model", fake_model(tmp_path)]
    args += ["--spec", "none", "--python", str(py), "--port", str(port)]
    return subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=TREE
    )


@pytest.mark.usefixtures("stop_all")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_foreground_serve_stops_its_engine_on(tmp_path: Path, sig: signal.Signals):
    port = free_port()
    proc = start_foreground(tmp_path, port)
    engine_pid = None
    try:
        read_until_startup(proc.stderr)
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


def start_detached(tmp_path: Path, name: str) -> state.Deployment:
    py = make_python(tmp_path / "bin", "ok")
    res = dflashctl(
        "serve", "--model", fake_model(tmp_path), "--spec", "none", "--python", str(py), "--port",
        str(free_port()), "--name", name, "--detach", "--json", timeout=60,
    )  # fmt: skip
    assert res.code == 0, res.stdout + res.stderr
    dep = state.load(name)
    assert dep is not None and alive(dep.pid)
    return dep


@pytest.mark.usefixtures("stop_all")
@pytest.mark.parametrize(
    "content, words",
    [(b"", "empty"), (b"[1, 2]", "a JSON list"), (b"\x00garbage{", "not JSON"),
     (b'{"name": "x"}', "missing")],
)  # fmt: skip
def test_a_corrupt_record_is_skipped_and_named(tmp_path: Path, content: bytes, words: str):
    dep = start_detached(tmp_path, "good")
    bad = state.deployments_dir() / "broken.json"
    bad.write_bytes(content)
    res = dflashctl("status", "--json")
    assert "Traceback" not in res.stderr
    rows = {r["name"]: r for r in json.loads(res.stdout)["deployments"]}
    assert rows["good"]["state"] == "up"
    assert rows["broken"]["state"] == "corrupt" and words in rows["broken"]["message"]
    assert res.code == 1  # something needs a look
    res = dflashctl("stop", "good", "--json")
    assert "Traceback" not in res.stderr
    assert res.code == 0, res.stdout + res.stderr
    stopped = {r["name"]: r for r in json.loads(res.stdout)["stopped"]}
    assert stopped["good"]["outcome"] == "terminated"
    assert not alive(dep.pid)
    assert bad.read_bytes() == content  # never touched
    res = dflashctl("stop", "broken")
    assert "Traceback" not in res.stderr
    assert "skipped" in res.stdout and f"rm {bad}" in res.stdout
    assert bad.read_bytes() == content


@pytest.mark.usefixtures("stop_all")
@pytest.mark.parametrize("starttime", [0, 12345])
def test_a_wrong_start_time_never_reports_a_kill(tmp_path: Path, starttime: int):
    dep = start_detached(tmp_path, "svc")
    real = dep.starttime
    path = state.path_of("svc")
    data = json.loads(path.read_text())
    data["starttime"] = starttime
    path.write_text(json.dumps(data))
    try:
        res = dflashctl("stop", "svc", "--json", "--timeout", "1")
        assert "Traceback" not in res.stderr
        (r,) = json.loads(res.stdout)["stopped"]
        assert alive(dep.pid)  # left alone: not provably ours
        assert r["outcome"] in ("unverified", "not ours"), r
        assert r["outcome"] not in ("killed", "terminated")
        if starttime == 0:
            assert res.code == 1 and path.exists()  # still running: the record stays
    finally:
        data["starttime"] = real
        path.write_text(json.dumps(data))


@pytest.mark.usefixtures("stop_all")
def test_two_launches_of_one_name_at_once_leave_no_engine_unseen(tmp_path: Path):
    """Issue 30 #6: `serve --detach --name same` twice at once (other ports). The name is held
    from the first check to ready: the second is refused (exit 2, one line) before it starts
    anything, so every engine running is the one `status` shows and `stop` ends."""
    py = make_python(tmp_path / "bin", "slow_load")  # 3 s of start-up phases
    env = dict(os.environ, PYTHONPATH=str(TREE))

    def start(port: int) -> subprocess.Popen[str]:
        args = [
            sys.executable,
            "-m",
            "dflashctl",
            "serve",
            "--model",
            fake_model(tmp_path),
            "--spec",
            "none",
            "--python",
            str(py),
            "--port",
            str(port),
            "--detach",
            "--name",
            "same",
            "--json",
        ]
        return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env, cwd=TREE)  # fmt: skip

    first = start(free_port())
    deadline = time.monotonic() + 20
    while not (state.deployments_dir() / "same.starting").exists():  # the first holds it
        assert time.monotonic() < deadline and first.poll() is None
        time.sleep(0.05)
    second = start(free_port())
    _, err2 = second.communicate(timeout=60)
    out1, err1 = first.communicate(timeout=60)
    assert first.returncode == 0, err1
    assert second.returncode == 2 and "Traceback" not in err2
    assert "deployment same is being started by another dflashctl" in err2
    pid = json.loads(out1)["pid"]
    deps, _ = state.scan()
    assert [(d.name, d.pid) for d in deps] == [("same", pid)]
    assert not (state.deployments_dir() / "same.starting").exists()
    res = dflashctl("stop", "same")
    assert res.code == 0 and not alive(pid)


def test_a_stale_reservation_is_taken_over(tmp_path: Path):
    """A dflashctl killed mid-launch leaves `NAME.starting` with a pid that is gone: the next
    launch takes the name over."""
    d = state.deployments_dir()
    d.mkdir(parents=True, exist_ok=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (d / "again.starting").write_text(f"{dead.pid}\n")
    with state.reserved("again"):
        assert (d / "again.starting").read_text().strip() == str(os.getpid())
    assert not (d / "again.starting").exists()
