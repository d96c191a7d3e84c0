"""Completion of values, through the app's own parameters (what the shell's completion calls):
drafter names, deployment names, playbooks, engines."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer._click import Context

from dflashctl.cli import app

GROUP = typer.main.get_command(app)


def complete(command: str, param: str, incomplete: str) -> list[str]:
    cmd = GROUP.commands[command]  # type: ignore[attr-defined]
    ctx = Context(cmd, info_name=command, parent=Context(GROUP, info_name="dflashctl"))
    p = next(x for x in cmd.params if x.name == param)
    return [c.value for c in p.shell_complete(ctx, incomplete)]


@pytest.fixture
def deployments():
    from dflashctl.server import deployments as state

    for name in ("gpu1-8000", "gpu2-8000", "plain-8001"):
        state.save(
            state.Deployment(
                name=name, engine="vllm", host=None, url="http://127.0.0.1:9", pid=1,
                starttime=0, log="", run_dir="", port=9, bind="127.0.0.1", model="m",
                model_id="m", drafter=None, cmd=[], started_at=state.now_iso(),
            )
        )  # fmt: skip
    yield
    for name in ("gpu1-8000", "gpu2-8000", "plain-8001"):
        state.remove(name)


def test_drafter_names():
    assert "qwen3-8b-dflash-b16" in complete("fetch", "drafter", "qwen3-8")
    assert all(n.startswith("qwen3") for n in complete("verify-config", "drafter", "qwen3"))
    assert "demo" in complete("verify-config", "drafter", "")


def test_deployment_names(deployments):
    assert complete("stop", "names", "gpu") == ["gpu1-8000", "gpu2-8000"]
    assert complete("status", "names", "pl") == ["plain-8001"]
    assert complete("smoke", "target", "gpu1") == ["gpu1-8000"]
    assert complete("smoke", "baseline", "pl") == ["plain-8001"]
    assert complete("metrics", "source", "gpu2") == ["gpu2-8000"]
    assert "plain-8001" in complete("bench", "targets", "pl")


def test_playbooks_and_files(monkeypatch, tmp_path: Path):
    assert "vllm-2xa100-tp2" in complete("run", "playbook", "vllm")
    (tmp_path / "fleet.yaml").write_text("")
    (tmp_path / "notes.txt").write_text("")
    monkeypatch.chdir(tmp_path)
    assert "fleet.yaml" in complete("run", "playbook", "f")
    assert complete("run", "playbook", "notes") == []
    (tmp_path / "vllm.log").write_text("")
    assert complete("metrics", "source", "vllm.l") == ["vllm.log"]


def test_engines():
    assert complete("serve", "engine", "") == ["local", "vllm", "sglang", "llama.cpp"]
    assert complete("doctor", "engine", "s") == ["sglang"]
    assert complete("verify-config", "engine", "v") == ["vllm"]
