"""The CLI's shared contract: help without heavy imports, exit codes, one-line errors."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

import pytest
from support.cli import run_main

from dflashctl.cli import app

COMMANDS = ["verify-config", "fetch", "serve", "stop", "status", "smoke", "metrics", "bench",
            "run", "demo", "doctor", "diagnose", "install"]  # fmt: skip


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


@pytest.mark.parametrize(
    "args, needle",
    [
        (["verify-config", "/nonexistent", "--json"], "config file not found"),
        (["smoke", "--json", "--bogus"], "No such option: --bogus"),
        (["metrics", "--json"], "Missing argument"),
        (["serve", "--engine", "vllm", "--model", "m", "--json"], "needs --drafter"),
        (["diagnose", "nope-name", "--json"], "is not a URL"),
    ],
)
def test_json_on_error_is_json_on_stdout(monkeypatch, capsys, args, needle):
    """`--json` that fails still gives `| jq` an object: ok false, the error, the hint; exit 2."""
    from support.cli import run_main

    code, out, err = run_main(monkeypatch, capsys, *args)
    assert code == 2
    data = json.loads(out)
    assert data["ok"] is False and set(data) == {"ok", "error", "hint"}
    assert needle in data["error"] + (data["hint"] or "")
    assert err.startswith("Error:") and "Traceback" not in err


@pytest.mark.parametrize(
    "args",
    [
        ("smoke", "{url}", "--max-tokens", "32"),
        ("smoke", "{url}", "--max-tokens", "32", "--json"),
        ("bench", "{url}", "--repetitions", "1", "--json"),
        ("metrics", "{url}/metrics"),
        ("metrics", "{url}/metrics", "--json"),
    ],
    ids=["smoke", "smoke-json", "bench-json", "metrics", "metrics-json"],
)
def test_a_password_in_a_server_url_is_never_printed(args, tmp_path):
    """Users paste this output into tickets: `http://user:secret@host` shows as
    `http://user:***@host` on stdout and stderr, in tables and in JSON (a real OpenAI-style
    server on 127.0.0.1 that answers, so the reports are full)."""
    from support.engine_http import FakeEngine

    engine = FakeEngine()
    try:
        url = engine.url.replace("http://", "http://user:s3cret@")
        argv = [a.format(url=url) for a in args]
        env = {"COLUMNS": "60", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
        r = subprocess.run(
            [sys.executable, "-m", "dflashctl", *argv],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
    finally:
        engine.close()
    shown = r.stdout + r.stderr
    assert "Traceback" not in shown and r.returncode in (0, 1), shown[-2000:]
    assert "s3cret" not in shown
    assert "user:***@" in shown


def _description_paragraphs(text: str) -> list[list[str]]:
    """The paragraphs between `Usage:` and the first panel of a rendered --help."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if "Usage:" in line) + 1
    end = next(i for i, line in enumerate(lines) if line.lstrip().startswith("╭"))
    paragraphs: list[list[str]] = [[]]
    for line in lines[start:end]:
        if line.strip():
            paragraphs[-1].append(line.strip())
        elif paragraphs[-1]:
            paragraphs.append([])
    return [p for p in paragraphs if p]


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_help_at_80_columns_wraps_once_and_shows_no_bool(command, monkeypatch, capsys) -> None:
    """A hard-wrapped docstring re-wrapped by rich breaks a sentence twice (a short line inside
    a paragraph); a flag takes no value, so `<bool>` says nothing."""
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_main(monkeypatch, capsys, *([command] if command else []), "--help")
    assert code == 0
    assert "<bool>" not in out
    # a word wider than the options' help column is cut with an ellipsis: none is
    assert "…" not in out, [line for line in out.splitlines() if "…" in line]
    for para in _description_paragraphs(out):
        if para[0].startswith(("dflashctl ", "Examples", "Exit")) or len(para) == 1:
            continue
        # early: the next line's first word would have fitted (80 columns, rich's margins)
        short = [a for a, b in itertools.pairwise(para) if len(a) + 1 + len(b.split()[0]) <= 76]
        assert not short, f"{command} --help: a paragraph broken early: {short}"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("http://u:p@h/x", "http://u:***@h/x"),
        ("a@b then https://alice:s3cr3t@host:8000/v1", "a@b then https://alice:***@host:8000/v1"),
        ("no url, an @ only", "no url, an @ only"),
        ("http://host/x and mail@example", "http://host/x and mail@example"),
        ("x" * 100_000, "x" * 100_000),
    ],
)  # fmt: skip
def test_redact_hides_every_password_and_nothing_else(text, shown):
    from dflashctl.http_body import redact

    assert redact(text) == shown
