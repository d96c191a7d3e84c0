"""Shared fixtures: an isolated environment for every test and a CLI runner."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("DFLASHCTL_HOME", str(home / ".dflashctl"))
    monkeypatch.setenv("HF_HOME", str(home / "hf"))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.delenv("DFLASHCTL_DEBUG", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    from dflashctl.hosts import COMMAND_SSH

    COMMAND_SSH.clear()  # an earlier in-process command's --ssh-config is not this test's
    yield


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def cli_env(**extra: str) -> dict[str, str]:
    """Environment for running bin/dflashctl-like subprocesses from tests."""
    env = dict(os.environ)
    env.update(extra)
    return env
