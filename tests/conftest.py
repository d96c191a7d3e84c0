"""Shared fixtures: an isolated environment for every test, a CLI runner, and `stop_all`.

Helpers the tests import live in tests/support/ (see its __init__.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
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


@pytest.fixture
def stop_all() -> Iterator[None]:
    """Stop every deployment a test left behind (by recorded pid, like `dflashctl stop --all`)."""
    yield
    from dflashctl.server.control import stop

    stop([], all_=True, grace=2.0)


def cli_env(**extra: str) -> dict[str, str]:
    """Environment for running bin/dflashctl-like subprocesses from tests."""
    env = dict(os.environ)
    env.update(extra)
    return env
