"""The CLI's shared contract: help without heavy imports, exit codes, one-line errors."""

from __future__ import annotations

import subprocess
import sys

from dflashctl.cli import app


def test_help_does_not_import_heavy_modules():
    code = (
        "import sys, runpy\n"
        "sys.argv = ['dflashctl', '--help']\n"
        "try:\n"
        "    from dflashctl.cli import main; main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = [m for m in ('torch', 'transformers', 'huggingface_hub', 'paramiko', 'fastapi')"
        " if m in sys.modules]\n"
        "print('HEAVY=' + ','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "HEAVY=\n" in out.stdout
    assert "verify-config" in out.stdout


def test_every_designed_command_is_registered(runner):
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for name in ("fetch", "verify-config", "serve", "smoke", "metrics"):
        assert name in result.output


def test_version(runner):
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.startswith("dflashctl ")


def test_usage_error_exits_2(runner):
    result = runner.invoke(app, ["verify-config"])
    assert result.exit_code == 2
