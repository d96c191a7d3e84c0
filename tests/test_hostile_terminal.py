"""Terminal injection (issue 30 #8): a value that came from outside — a directory name, a config
key or `architectures`, a playbook's host name, the model id a server reports — is printed with
every character a terminal would obey (ESC and the other controls, bidirectional overrides) shown
as a visible escape. One rule at the console boundary (`dflashctl/console.py: printable`); these
tests feed each kind of value through the real command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import run_main
from support.engine_http import FakeEngine

ESC = "\x1b]0;pwned\x07\x1b[2J"  # retitle the terminal, clear the screen
RLO = "\u202e"  # right-to-left override: `txt.exe` shown as `exe.txt`


def clean(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text and RLO not in text, repr(text[:400])


def test_a_drafter_directory_and_config_values(tmp_path: Path, monkeypatch, capsys) -> None:
    d = tmp_path / f"drafter{ESC}{RLO}"
    d.mkdir()
    cfg = {
        "architectures": [f"DFlash{ESC}DraftModel"],
        "model_type": "qwen3",
        "num_hidden_layers": 2,
        f"evil{ESC}key": 1,
        "dflash_config": {"mask_token_id": 3, "target_layer_ids": [1, 2]},
    }
    (d / "config.json").write_text(json.dumps(cfg))
    code, out, err = run_main(monkeypatch, capsys, "verify-config", str(d))
    assert code in (1, 2)  # a broken drafter; the verdict is not what this test is about
    clean(out + err)
    assert "\\x1b" in out + err  # shown, not obeyed


def test_playbook_host_names(tmp_path: Path, monkeypatch, capsys) -> None:
    book = tmp_path / "book.yaml"
    book.write_text(
        'name: evil\nhosts:\n  - {host: "gpu1", name: "a' + "\\x1b[2J" + 'b"}\n'
        "serve: {engine: vllm, model: m, drafter: /d, num_speculative_tokens: 7}\n"
    )
    code, out, err = run_main(monkeypatch, capsys, "run", str(book), "--dry-run")
    assert code == 2  # not a deployment name: refused, and the refusal names it safely
    clean(out + err)
    assert "\\x1b" in err


def test_the_model_id_a_server_reports(monkeypatch, capsys) -> None:
    server = FakeEngine(models=(f"model{ESC}{RLO}",))
    try:
        code, out, err = run_main(
            monkeypatch, capsys, "smoke", server.url, "--max-tokens", "16", "--expect-no-spec"
        )
    finally:
        server.close()
    assert code == 1  # the fake's text is one short answer; this test reads the model id
    clean(out + err)
    assert "model\\x1b" in out + err


@pytest.mark.parametrize("text", [f"plain {ESC} {RLO} end", "é 中文 ok", "tab\tnewline\n"])
def test_printable_shows_what_a_terminal_would_obey(text: str) -> None:
    from dflashctl.console import printable

    shown = printable(text)
    clean(shown)
    if "\x1b" not in text:
        assert shown == text  # what is harmless is left as it is
