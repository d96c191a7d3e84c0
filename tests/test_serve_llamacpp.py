"""`serve --engine llama.cpp` (issue 28): llama-server's command with a DFlash drafter, a real
launch that waits for /health 200, /v1/models and the ready line, and the known-bad llama.cpp
combinations refused unless --force. llama-server is the named stand-in in
tests/support/llama_server.py (a real executable; no llama.cpp build fits this machine)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import run_json, run_main
from support.llama_server import fake_llama_server
from support.sshd import Sshd, sshd_server
from support.startup import free_port

P_MIN = "llamacpp-draft-p-min-default-zero"
TENSOR = "llamacpp-split-mode-tensor-dflash-assert"


def gguf_pair(tmp_path: Path) -> tuple[Path, Path]:
    """Where the target and drafter GGUFs would be (the stand-in does not read them)."""
    models = tmp_path / "models"
    models.mkdir(exist_ok=True)
    target, drafter = models / "Qwen3-8B-Q4_K_M.gguf", models / "Qwen3-8B-DFlash-b16.gguf"
    for f in (target, drafter):
        f.write_bytes(b"GGUF")
    return target, drafter


def serve_args(target: Path, drafter: Path, *more: str) -> list[str]:
    return ["serve", "--engine", "llama.cpp", "--model", str(target), "--drafter", str(drafter),
            *more]  # fmt: skip


# ---- the command -------------------------------------------------------------------------------


def test_dry_run_prints_llama_servers_command(monkeypatch, capsys, tmp_path):
    target, drafter = gguf_pair(tmp_path)
    monkeypatch.setenv("DFLASHCTL_LLAMA_SERVER", "/opt/llama.cpp/bin/llama-server")
    args = serve_args(target, drafter, "-k", "15", "--dry-run", "--", "--spec-draft-p-min", "0.75")
    code, data, err = run_json(monkeypatch, capsys, *args)
    assert code == 0, err
    plan = data
    assert plan["cmd"] == [
        "/opt/llama.cpp/bin/llama-server", "-m", str(target), "--host", "127.0.0.1",
        "--port", "8080", "--alias", "Qwen3-8B-Q4_K_M", "-md", str(drafter),
        "--spec-type", "draft-dflash", "--spec-draft-n-max", "15",
        "--spec-draft-p-min", "0.75",
    ]  # fmt: skip
    assert plan["url"] == "http://127.0.0.1:8080" and plan["model_id"] == "Qwen3-8B-Q4_K_M"
    # the build was not read (no such binary here): the p-min flag given, -sm not tensor
    assert not any("known defect" in n for n in plan["notes"])


def test_dry_run_names_the_defects_the_flags_walk_into(monkeypatch, capsys, tmp_path):
    target, drafter = gguf_pair(tmp_path)
    args = serve_args(target, drafter, "--dry-run", "--", "-sm", "tensor")
    code, data, err = run_json(monkeypatch, capsys, *args)
    assert code == 0, err
    plan = data
    assert "--spec-draft-n-max" not in plan["cmd"]  # K unknown: llama-server clamps n_max itself
    notes = " ".join(plan["notes"])
    assert f"known defect {TENSOR}" in notes and "-sm layer" in notes
    assert f"known defect {P_MIN}" in notes and "--spec-draft-p-min 0.75" in notes


def test_the_engines_own_host_port_alias_are_adopted(monkeypatch, capsys, tmp_path):
    target, drafter = gguf_pair(tmp_path)
    args = serve_args(target, drafter, "--dry-run", "--", "--port", "9099", "--alias", "qwen")
    code, data, _ = run_json(monkeypatch, capsys, *args)
    plan = data
    assert code == 0 and plan["cmd"].count("--port") == 1 and plan["cmd"].count("--alias") == 1
    assert plan["url"].endswith(":9099") and plan["model_id"] == "qwen"


@pytest.mark.parametrize(
    "more, says",
    [
        (["--spec", "none", "--tp", "2"], "no tensor-parallel size"),
        (["--spec", "none", "--port", "70000"], "--port 70000"),
        ([], "needs --drafter"),
    ],
)
def test_bad_input_is_one_line_exit_2(monkeypatch, capsys, tmp_path, more, says):
    target, _ = gguf_pair(tmp_path)
    args = ["serve", "--engine", "llama.cpp", "--model", str(target), *more, "--dry-run"]
    code, _, err = run_json(monkeypatch, capsys, *args)
    assert code == 2 and "Traceback" not in err and says in err.splitlines()[0]


# ---- a real launch -----------------------------------------------------------------------------


@pytest.mark.usefixtures("stop_all")
def test_launch_waits_until_really_ready_then_stops(monkeypatch, capsys, tmp_path):
    target, drafter = gguf_pair(tmp_path)
    exe = fake_llama_server(tmp_path / "bin", 9100, load_s=1.5)  # before the p-min change
    monkeypatch.setenv("DFLASHCTL_LLAMA_SERVER", str(exe))
    port = free_port()
    args = serve_args(target, drafter, "--port", str(port), "--detach")
    code, data, err = run_json(monkeypatch, capsys, *args)
    assert code == 0, err
    assert (
        data["ok"] and data["engine"] == "llama.cpp" and data["url"] == f"http://127.0.0.1:{port}"
    )
    log = Path(data["log"]).read_text()
    assert "server is listening on" in log and "draft-dflash" in log
    assert any("not verified before launch" in n for n in data["notes"])
    code, status, _ = run_json(monkeypatch, capsys, "status")
    assert code == 0 and status["deployments"][0]["state"] == "up"
    code, stopped, _ = run_json(monkeypatch, capsys, "stop", "--timeout", "2")
    assert code == 0 and stopped["ok"]


def test_a_missing_llama_server_is_exit_2_before_anything_starts(monkeypatch, capsys, tmp_path):
    target, drafter = gguf_pair(tmp_path)
    monkeypatch.setenv("DFLASHCTL_LLAMA_SERVER", str(tmp_path / "nowhere" / "llama-server"))
    args = serve_args(target, drafter, "--port", str(free_port()), "--detach")
    code, _, err = run_json(monkeypatch, capsys, *args)
    assert code == 2 and "no llama-server" in err and "DFLASHCTL_LLAMA_SERVER" in err


# ---- refusing the known-bad combinations -------------------------------------------------------


@pytest.mark.usefixtures("stop_all")
def test_p_min_default_on_an_affected_build_is_refused_unless_given_or_forced(
    monkeypatch, capsys, tmp_path
):
    target, drafter = gguf_pair(tmp_path)
    exe = fake_llama_server(tmp_path / "bin", 9240)
    monkeypatch.setenv("DFLASHCTL_LLAMA_SERVER", str(exe))
    port = str(free_port())
    code, data, _ = run_json(monkeypatch, capsys, *serve_args(target, drafter, "--port", port,
                                                               "--detach"))  # fmt: skip
    assert code == 1 and data["pid"] is None  # nothing started
    assert "llama.cpp b9240" in data["reason"] and P_MIN in data["reason"]
    assert data["lines"] == ["Launch llama-server with --spec-draft-p-min 0.75."]
    assert "--force" in data["hint"]
    # what the refusal says to change: launched
    fixed = serve_args(target, drafter, "--port", port, "--detach", "--", "--spec-draft-p-min",
                       "0.75")  # fmt: skip
    code, data, err = run_json(monkeypatch, capsys, *fixed)
    assert code == 0, err
    assert not any("known defect" in n for n in data["notes"])


@pytest.mark.usefixtures("stop_all")
def test_split_mode_tensor_is_refused_and_force_launches_it(monkeypatch, capsys, tmp_path):
    target, drafter = gguf_pair(tmp_path)
    exe = fake_llama_server(tmp_path / "bin", 9100)
    monkeypatch.setenv("DFLASHCTL_LLAMA_SERVER", str(exe))
    args = serve_args(target, drafter, "--port", str(free_port()), "--detach", "--", "-sm",
                      "tensor")  # fmt: skip
    code, data, _ = run_json(monkeypatch, capsys, *args)
    assert code == 1 and TENSOR in data["reason"] and P_MIN not in data["reason"]  # b9100
    assert "-sm layer" in data["lines"][0]
    code, data, err = run_json(monkeypatch, capsys, *args[:-3], "--force", "--", "-sm", "tensor")
    assert code == 0, err
    assert any("1 known defect(s) refused: launched (--force)" in n for n in data["notes"])
    assert any(TENSOR in n for n in data["notes"])


# ---- over SSH ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    yield from sshd_server(tmp_path_factory)


@pytest.mark.ssh
@pytest.mark.usefixtures("stop_all")
def test_launch_over_ssh_and_the_refusal_there(monkeypatch, capsys, tmp_path, sshd: Sshd):
    monkeypatch.setenv("DFLASHCTL_SSH_CONFIG", str(sshd.ssh_config))
    monkeypatch.setenv("DFLASHCTL_REMOTE_HOME", str(tmp_path / "remote-home"))
    target, drafter = gguf_pair(tmp_path)
    exe = fake_llama_server(tmp_path / "remote-bin", 9240)
    monkeypatch.setenv("DFLASHCTL_LLAMA_SERVER", str(exe))  # its path there (the same machine)
    host = ["--host", "testhost", "--bind", "127.0.0.1"]
    port = str(free_port())
    code, data, _ = run_json(monkeypatch, capsys, *serve_args(target, drafter, *host, "--port",
                                                               port, "--detach"))  # fmt: skip
    assert code == 1 and P_MIN in data["reason"] and "on testhost" in data["reason"]
    args = serve_args(target, drafter, *host, "--port", port, "--detach", "--",
                      "--spec-draft-p-min", "0.75")  # fmt: skip
    code, data, err = run_json(monkeypatch, capsys, *args)
    assert code == 0, err
    assert data["host"] == "testhost" and data["ok"]
    assert data["log"].startswith(str(tmp_path / "remote-home"))


# ---- in a playbook -----------------------------------------------------------------------------


def test_a_playbook_serves_llama_cpp_and_run_leaves_verify_config_to_the_gguf(
    monkeypatch, capsys, tmp_path
):
    target, drafter = gguf_pair(tmp_path)
    book = tmp_path / "llama.yaml"
    book.write_text(
        "name: llama\n"
        "serve:\n"
        "  engine: llama.cpp\n"
        f"  model: {target}\n"
        f"  drafter: {drafter}\n"
        "  executable: /opt/llama.cpp/bin/llama-server\n"
        "  extra_args: [--spec-draft-p-min, '0.75', -ngl, '99']\n"
    )
    code, data, err = run_json(monkeypatch, capsys, "serve", str(book), "--dry-run")
    assert code == 0, err
    plan = data  # one host: the plan itself
    assert plan["cmd"][:3] == ["/opt/llama.cpp/bin/llama-server", "-m", str(target)]
    assert plan["cmd"][-4:] == ["--spec-draft-p-min", "0.75", "-ngl", "99"]
    code, out, err = run_main(monkeypatch, capsys, "run", str(book), "--dry-run")
    assert code == 0, err
    assert "verify-config" not in out and "/opt/llama.cpp/bin/llama-server -m" in out
