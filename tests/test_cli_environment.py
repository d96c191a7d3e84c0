"""Every environment variable dflashctl reads is shown in the --help of the commands it
affects (issue 18: users look there, not in the source)."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from typer.testing import CliRunner

from dflashctl.cli import app
from dflashctl.commands.environment import VARIABLES

PKG = Path(__file__).resolve().parent.parent / "dflashctl"
# read only by test harnesses or by a vLLM plugin process, not by a dflashctl command
NOT_A_USER_KNOB = {"DFLASHCTL_VLLM_KNORM_FIX"}


@cache
def help_text(*args: str) -> str:
    res = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert res.exit_code == 0, res.output
    return " ".join(res.output.split())  # rich wraps and pads: compare words


def test_each_command_shows_the_variables_it_reads() -> None:
    assert "HF_TOKEN" in help_text("fetch") and "HF_HUB_OFFLINE=1" in help_text("fetch")
    assert "DFLASHCTL_SSH_CONFIG" in help_text("verify-config")
    assert "DFLASHCTL_HOME" in help_text("stop") and "HF_TOKEN" not in help_text("stop")
    for name, _what, commands in VARIABLES:
        for command in commands:
            assert name in help_text(command), (name, command)


def test_every_dflashctl_variable_in_the_code_is_documented() -> None:
    read = set()
    for path in PKG.rglob("*.py"):
        read |= set(re.findall(r"\bDFLASHCTL_[A-Z_]+[A-Z]\b", path.read_text("utf-8")))
    documented = {n for name, _w, _c in VARIABLES for n in re.findall(r"DFLASHCTL_[A-Z_]+", name)}
    assert read - NOT_A_USER_KNOB - documented == set()
