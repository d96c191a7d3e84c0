"""serve / stop / status / metrics --host / verify-config --host over a real sshd.

The "remote" host is this machine reached through sshd on 127.0.0.1 (and, with root and
iproute2, two network namespaces with their own sshd and address). Remote run directories live
under a test directory ($DFLASHCTL_REMOTE_HOME), never the real ~/.dflashctl.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import run_json, run_main
from support.engine_process import fake_model, make_python
from support.sshd import SSHD, Sshd, sshd_server
from support.startup import free_port

from dflashctl.server import deployments as state

pytestmark = pytest.mark.ssh


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    yield from sshd_server(tmp_path_factory)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from support.pairs import write_tiny_pair

    return write_tiny_pair(tmp_path_factory.mktemp("pair"))


@pytest.fixture
def remote_env(sshd, monkeypatch, tmp_path) -> Path:
    monkeypatch.setenv("DFLASHCTL_SSH_CONFIG", str(sshd.ssh_config))
    remote_home = tmp_path / "remote-home"
    monkeypatch.setenv("DFLASHCTL_REMOTE_HOME", str(remote_home))
    return remote_home


def fake_remote(tmp_path: Path, mode: str, *extra: str, port: int | None = None) -> list[str]:
    py = make_python(tmp_path / "bin", mode)
    return [
        "serve", "--host", "testhost", "--model", fake_model(tmp_path), "--spec", "none",
        "--python", str(py), "--port", str(port or free_port()), "--detach", *extra,
    ]  # fmt: skip


@pytest.mark.usefixtures("stop_all")
def test_remote_bundled_engine_metrics_status_stop(monkeypatch, capsys, remote_env, pair):
    """The real bundled engine launched over SSH, read remotely, stopped by pid."""
    import httpx

    target, drafter = pair
    port = free_port()
    args = ["serve", "--host", "testhost", "--model", str(target), "--drafter", str(drafter)]
    args += ["--python", sys.executable, "--port", str(port), "--bind", "127.0.0.1"]
    args += ["--detach", "--", "--log-interval", "1"]
    code, data, err = run_json(monkeypatch, capsys, *args)
    assert code == 0, (data, err)
    assert data["host"] == "testhost" and data["engine"] == "local"
    assert data["log"].startswith(str(remote_env / "run" / f"testhost-{port}"))
    dep = state.load(f"testhost-{port}")
    assert dep is not None and dep.host == "testhost" and dep.starttime > 0
    r = httpx.post(
        f"http://127.0.0.1:{port}/v1/chat/completions",
        json={"model": str(target), "messages": [{"role": "user", "content": "hi"}],
              "max_tokens": 8},
        timeout=60,
    )  # fmt: skip
    assert r.status_code == 200
    deadline = time.monotonic() + 20
    while "SpecDecoding metrics" not in Path(data["log"]).read_text():
        assert time.monotonic() < deadline
        time.sleep(0.3)
    code, report, err = run_json(monkeypatch, capsys, "metrics", data["log"], "--host", "testhost")
    # random weights accept almost nothing, but 8 tokens are far from the collapse rule's
    # evidence (200 drafted tokens, 30 drafts): a collapse warning, exit 0
    assert code == 0, err
    assert [(a["kind"], a["severity"]) for a in report["alarms"]] == [("collapse", "warning")]
    assert report["windows"] >= 1 and report["engine"] == "vllm"
    code, st, _ = run_json(monkeypatch, capsys, "status")
    assert code == 0 and st["deployments"][0]["state"] == "up"
    assert st["deployments"][0]["host"] == "testhost"
    code, stopped, _ = run_json(monkeypatch, capsys, "stop", f"testhost-{port}")
    assert code == 0
    assert stopped["stopped"][0]["outcome"] == "terminated"
    assert stopped["stopped"][0]["port_free"] is True


@pytest.mark.usefixtures("stop_all")
def test_remote_launch_failure_shows_the_root_cause(monkeypatch, capsys, remote_env, tmp_path):
    code, out, err = run_main(monkeypatch, capsys, *fake_remote(tmp_path, "flash_attn"))
    assert code == 1, err
    assert "No module named 'flash_attn'" in out
    assert out.index("No module named 'flash_attn'") < out.index("Engine core initialization")
    assert state.all_deployments() == []


@pytest.mark.usefixtures("stop_all")
def test_remote_stale_log_is_rotated_not_read(monkeypatch, capsys, remote_env, tmp_path):
    port = free_port()
    run_dir = remote_env / "run" / f"testhost-{port}"
    run_dir.mkdir(parents=True)
    (run_dir / "server.log").write_text(
        "(APIServer pid=3) ERROR 01-01 00:00:00 [x.py:1] RuntimeError: Engine core "
        "initialization failed. See root cause above.\n"
    )
    code, _, err = run_json(monkeypatch, capsys, *fake_remote(tmp_path, "ok", port=port))
    assert code == 0, err
    assert "Engine core initialization failed" in (run_dir / "server.log.1").read_text()
    assert "Engine core" not in (run_dir / "server.log").read_text()


@pytest.mark.usefixtures("stop_all")
def test_hostile_model_path_and_secrets(monkeypatch, capsys, remote_env, tmp_path):
    pwned = tmp_path / "PWNED"
    model = f'dir with space/it\'s "q";$(touch {pwned})`touch {pwned}`'
    monkeypatch.setenv("HF_TOKEN", "hf_do_not_leak_me")
    args = fake_remote(tmp_path, "ok")
    args[args.index("--model") + 1] = model
    args += ["--engine", "vllm", "--served-model-name", "m"]
    py = make_python(tmp_path / "bin", "ok")
    # vLLM is run from beside --python: give the fake a `vllm` there
    shutil.copy(py, py.parent / "vllm")
    code, data, err = run_json(monkeypatch, capsys, *args)
    assert code == 0, err
    log = Path(data["log"]).read_text()
    argv = json.loads(next(x for x in log.splitlines() if x.startswith("ARGV: "))[6:])
    assert argv[0:2] == ["serve", model]  # one argument, byte for byte
    assert not pwned.exists()
    assert "HF_TOKEN set: yes" in log  # forwarded to the engine ...
    run_dir = Path(data["log"]).parent
    for f in [*run_dir.iterdir(), state.path_of(data["name"])]:
        assert "hf_do_not_leak_me" not in f.read_text()  # ... but never written anywhere
    holder = subprocess.run(["cat", f"/proc/{data['pid']}/cmdline"], capture_output=True)
    assert b"hf_do_not_leak_me" not in holder.stdout


def test_remote_dry_run_reads_k_on_the_host(monkeypatch, capsys, remote_env, pair):
    target, drafter = pair
    args = ["serve", "--host", "testhost", "--engine", "sglang", "--model", str(target)]
    args += ["--drafter", str(drafter), "--dry-run", "--check"]
    code, plan, _ = run_json(monkeypatch, capsys, *args)
    assert code == 0
    assert plan["num_speculative_tokens"] == 3
    assert plan["num_speculative_tokens_source"].startswith(f"testhost:{drafter}")
    assert plan["url"] == "http://127.0.0.1:30000"  # bound to 0.0.0.0 there: its address
    cmd = plan["cmd"]
    assert cmd[cmd.index("--speculative-num-draft-tokens") + 1] == "4"


class TestVerifyConfigHost:
    def test_ok_and_labelled(self, monkeypatch, capsys, remote_env, pair):
        target, drafter = pair
        args = ["verify-config", str(drafter), "--target", str(target), "--host", "testhost"]
        code, report, err = run_json(monkeypatch, capsys, *args)
        assert code == 0, err
        assert report["path"] == f"testhost:{drafter}/config.json"
        assert report["weights"] == f"testhost:{drafter}/model.safetensors"
        weights = [c for c in report["checks"] if c["field"] == "weights: fc.weight"]
        assert weights and weights[0]["status"] == "ok"

    def test_mismatch_then_fix_lands_on_the_host(self, monkeypatch, capsys, remote_env, tmp_path):
        d = tmp_path / "stale"
        d.mkdir()
        data = Path(__file__).parent / "data"
        stale = data / "qwen3.6-27b-dflash-stale"
        for f in stale.iterdir():
            if f.is_file():
                shutil.copy(f, d / f.name)
        args = ["verify-config", str(d), "--drafter", "qwen3.6-27b-dflash", "--host", "testhost"]
        code, report, _ = run_json(monkeypatch, capsys, *args)
        assert code == 1
        assert any(c["status"] == "mismatch" for c in report["checks"])
        before = (d / "config.json").read_bytes()
        code, report, err = run_json(monkeypatch, capsys, *args, "--fix")
        assert report["fix"]["written"] is True, err
        assert report["fix"]["path"] == f"testhost:{d}/config.json"
        backup = Path(report["fix"]["backup"].split(":", 1)[1])
        assert backup.parent == d and backup.read_bytes() == before
        fixed = json.loads((d / "config.json").read_text())
        assert fixed["dflash_config"]["mask_token_id"] == 248070
        assert not [c for c in report["checks"] if c["field"].startswith("dflash_config.mask")
                    and c["status"] != "ok"]  # fmt: skip

    def test_missing_file(self, monkeypatch, capsys, remote_env, tmp_path):
        code, _, err = run_main(
            monkeypatch, capsys, "verify-config", str(tmp_path / "nope"), "--host", "testhost"
        )
        assert code == 2 and "no such file" in err


def test_metrics_follow_remote(monkeypatch, capsys, remote_env, tmp_path):
    from dflashctl.metrics import MetricsOptions
    from dflashctl.metrics.follow import follow_source

    log = tmp_path / "v.log"
    line = (
        "(APIServer pid=1) INFO 11-20 10:05:{s:02d} [metrics.py:120] SpecDecoding metrics: Mean "
        "acceptance length: 2.50, Accepted throughput: 150.00 tokens/s, Drafted throughput: "
        "300.00 tokens/s, Accepted: 1500 tokens, Drafted: 3000 tokens, Per-position acceptance "
        "rate: 0.700, 0.500, 0.300, Avg Draft acceptance rate: 50.0%\n"
    )
    log.write_text(line.format(s=0))
    kinds: list[str] = []
    t_end = time.monotonic() + 20
    opts = MetricsOptions(host="testhost")
    for ev in follow_source(str(log), opts, should_stop=lambda: time.monotonic() > t_end):
        kinds.append(ev.kind)
        if ev.kind == "history":
            with log.open("a") as f:
                f.write(line.format(s=10))
        if ev.kind == "window":
            break
    assert kinds[0] == "history" and "window" in kinds


# ---- two hosts in network namespaces ---------------------------------------------------------


def _netns_ok() -> bool:
    return os.geteuid() == 0 and shutil.which("ip") is not None and Path(SSHD).exists()


@pytest.fixture
def two_hosts(sshd, tmp_path, monkeypatch):
    """h1 (10.231.0.2) and h2 (10.231.0.3), each a namespace with its own sshd on port 22."""
    if not _netns_ok():
        pytest.skip("needs root, iproute2 and sshd for network namespaces")
    tag = f"d{os.getpid() % 10000}"
    br, names = f"br{tag}", [f"{tag}h1", f"{tag}h2"]

    def ip(*a: str, check: bool = True) -> None:
        subprocess.run(["ip", *a], check=check, capture_output=True)

    servers: list[Sshd] = []
    try:
        try:
            ip("link", "add", br, "type", "bridge")
        except subprocess.CalledProcessError:
            pytest.skip("cannot create network devices here")
        ip("addr", "add", "10.231.0.1/24", "dev", br)
        ip("link", "set", br, "up")
        config = ""
        for i, ns in enumerate(names):
            addr = f"10.231.0.{i + 2}"
            ip("netns", "add", ns)
            ip("link", "add", f"v{ns}", "type", "veth", "peer", "name", "eth0", "netns", ns)
            ip("link", "set", f"v{ns}", "master", br, "up")
            ip("-n", ns, "addr", "add", f"{addr}/24", "dev", "eth0")
            ip("-n", ns, "link", "set", "eth0", "up")
            ip("-n", ns, "link", "set", "lo", "up")
            d = tmp_path / ns
            d.mkdir()
            shutil.copy(sshd.client_key, d / "client_key")
            shutil.copy(str(sshd.client_key) + ".pub", d / "client_key.pub")
            servers.append(Sshd.start(d, listen=addr, port=22, wrap=("ip", "netns", "exec", ns)))
            config += (
                f"Host h{i + 1}\n  HostName {addr}\n  User {sshd.user}\n"
                f"  IdentityFile {d}/client_key\n  IdentitiesOnly yes\n"
                f"  UserKnownHostsFile {d}/known_hosts\n"
            )
        cfg = tmp_path / "ssh_config"
        cfg.write_text(config)
        monkeypatch.setenv("DFLASHCTL_SSH_CONFIG", str(cfg))
        monkeypatch.setenv("DFLASHCTL_REMOTE_HOME", str(tmp_path / "remote-home"))
        yield names
    finally:
        for s in servers:
            s.stop()
        for ns in names:
            out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
            for pid in out.stdout.split():
                subprocess.run(["kill", "-9", pid], capture_output=True)
            ip("netns", "del", ns, check=False)
        ip("link", "del", br, check=False)


@pytest.mark.netns
@pytest.mark.usefixtures("stop_all")
def test_playbook_on_two_hosts_in_parallel(monkeypatch, capsys, tmp_path, two_hosts):
    py = make_python(tmp_path / "bin", "ok")
    book = tmp_path / "fleet.yaml"
    book.write_text(
        f"name: fleet\nhosts: [h1, h2]\nserve:\n  engine: local\n  model: {fake_model(tmp_path)}\n"
        f"  spec: none\n  python: {py}\n  port: 8000\n  ready_timeout: 60\n"
    )
    code, results, err = run_json(monkeypatch, capsys, "serve", str(book))
    assert code == 0, err
    assert [r["name"] for r in results] == ["fleet-h1", "fleet-h2"]
    assert [r["url"] for r in results] == ["http://10.231.0.2:8000", "http://10.231.0.3:8000"]
    import httpx

    for r in results:  # reachable from here, at the host's own address
        assert httpx.get(f"{r['url']}/health", timeout=5).status_code == 200
    code, st, _ = run_json(monkeypatch, capsys, "status")
    assert code == 0 and {d["state"] for d in st["deployments"]} == {"up"}
    code, stopped, _ = run_json(monkeypatch, capsys, "stop", str(book))
    assert code == 0 and [s["outcome"] for s in stopped["stopped"]] == ["terminated"] * 2
