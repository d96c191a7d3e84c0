"""Every command that draws a spinner, a progress bar or a live view, run at a real
pseudo-terminal (tests/support/terminal.py) as a user's shell runs it: it must return, and say
what it did. Pipes hide what a terminal shows: a live display replaces sys.stderr with a proxy
that writes through the console, and a console that looked sys.stderr up on each write wrote
back into itself for ever (issue 27: `serve --detach` and `fetch` hung).

The real parts: the bundled engine on 127.0.0.1 serving a tiny random pair, the real
huggingface_hub client against the Hub-compatible server of tests/support/hub.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.pairs import write_tiny_pair
from support.startup import free_port
from support.terminal import REPO, run_in_terminal, terminal_env
from test_fetch import Hub

pytestmark = pytest.mark.usefixtures("stop_all")


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write_tiny_pair(tmp_path_factory.mktemp("pair"))


def env() -> dict[str, str]:
    """This test's environment (its own DFLASHCTL_HOME) as a terminal user's."""
    return terminal_env()


def no_traceback(text: str) -> None:
    assert "Traceback" not in text, text


def piped(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dflashctl", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=dict(os.environ),
    )


def serve_piped(target: Path, drafter: Path, name: str) -> str:
    """The pair served through a pipe (what the terminal test is not about): its URL."""
    port = free_port()
    served = piped("serve", "--model", str(target), "--drafter", str(drafter), "--port", str(port),
                   "--detach", "--name", name)  # fmt: skip
    assert served.returncode == 0, served.stderr
    return f"http://127.0.0.1:{port}"


def test_serve_detach_returns_and_stop_finds_it(pair: tuple[Path, Path]) -> None:
    target, drafter = pair
    port = free_port()
    args = ["serve", "--model", str(target), "--drafter", str(drafter), "--port", str(port)]
    run = run_in_terminal([*args, "--detach", "--name", "tty"], timeout=90, env=env())
    assert not run.timed_out, run.raw[-2000:]
    assert run.code == 0, run.text
    no_traceback(run.text)
    assert "ready" in run.text and f"127.0.0.1:{port}" in run.text
    assert "\x1b[?25l" in run.raw  # a spinner was drawn (this is a terminal)
    assert run.raw.rindex("\x1b[?25h") > run.raw.rindex("\x1b[?25l")  # and the cursor is back
    status = run_in_terminal(["status"], timeout=30, env=env())
    assert status.code == 0 and "tty" in status.text
    stop = run_in_terminal(["stop", "tty"], timeout=30, env=env())
    assert stop.code == 0 and "terminated tty" in stop.text


def test_fetch_draws_its_progress_and_returns(tmp_path: Path) -> None:
    hub = Hub(tmp_path)
    try:
        dest = tmp_path / "drafter"
        e = env() | {
            "HF_ENDPOINT": hub.url,
            "DFLASHCTL_PLAYBOOKS": str(hub.playbooks),
            "HF_HUB_DISABLE_XET": "1",
        }
        run = run_in_terminal(["fetch", "tiny-dflash", "--dir", str(dest)], timeout=90, env=e)
    finally:
        hub.server.stop()
    assert not run.timed_out, run.raw[-2000:]
    assert run.code == 0, run.text
    no_traceback(run.text)
    assert (dest / "model.safetensors").read_bytes() == hub.weights
    assert "verify-config: OK" in run.text


def test_bench_at_a_terminal(pair: tuple[Path, Path]) -> None:
    url = serve_piped(*pair, "bench-tty")
    args = ["bench", url, "--fixtures", "code", "--repetitions", "1", "--warmup-tokens", "0"]
    run = run_in_terminal([*args, "--max-tokens", "8"], timeout=120, env=env())
    assert not run.timed_out, run.raw[-2000:]
    no_traceback(run.text)
    assert run.code == 0, run.text
    assert "tok/s" in run.text or "tokens/s" in run.text


def test_run_playbook_at_a_terminal(pair: tuple[Path, Path], tmp_path: Path) -> None:
    target, drafter = pair
    book = tmp_path / "book.yaml"
    book.write_text(
        f"name: tty\nhosts: [local]\nserve:\n  engine: local\n  model: {target}\n"
        f"  drafter: {drafter}\n  port: {free_port()}\nsmoke:\n  max_tokens: 16\n"
    )
    run = run_in_terminal(["run", str(book), "--teardown"], timeout=150, env=env())
    assert not run.timed_out, run.raw[-2000:]
    no_traceback(run.text)
    # a random pair's text fails the smoke's answer checks: exit 1 with the steps said
    assert run.code == 1, run.text
    assert "serve" in run.text and "smoke" in run.text


def test_diagnose_at_a_terminal(pair: tuple[Path, Path]) -> None:
    target, drafter = pair
    url = serve_piped(target, drafter, "diagnose-tty")
    args = ["diagnose", url, "--model", str(target), "--drafter",
            str(drafter), "--max-tokens", "8"]  # fmt: skip
    run = run_in_terminal(args, timeout=150, columns=80, env=env())
    assert not run.timed_out, run.raw[-2000:]
    no_traceback(run.text)
    # a random drafter agrees with the reference and accepts nothing: the drafter's fault
    assert run.code == 1, run.text
    assert "Verdict: DRAFTER" in run.text
    # the acceptance table fits 80 columns: its headers whole, its bars narrower
    table = run.text[run.text.index("Acceptance (") : run.text.index("position 1")]
    assert "production" in table and "reference" in table and "…" not in table, table
    rows = [line for line in run.text.splitlines() if line.lstrip().startswith("position ")]
    assert rows and all(len(line.rstrip()) <= 80 for line in rows), rows


def test_metrics_follow_stops_at_the_first_alarm(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    line = (
        "INFO 05-01 10:{m:02d}:00 [metrics.py:100] SpecDecoding metrics: Mean acceptance length:"
        " 1.05, Accepted throughput: 1.00 tokens/s, Drafted throughput: 150.00 tokens/s,"
        " Accepted: 10 tokens, Drafted: 1500 tokens, Per-position acceptance rate: 0.050, 0.000,"
        " 0.000, Avg Draft acceptance rate: 0.7%\n"
    )
    log.write_text("".join(line.format(m=m) for m in range(10)))
    run = run_in_terminal(
        ["metrics", str(log), "--follow", "--exit-on-alarm"], timeout=60, env=env()
    )
    assert not run.timed_out, run.raw[-2000:]
    no_traceback(run.text)
    assert run.code == 1, run.text
    assert "collapse" in run.text.lower()


def test_demo_at_a_terminal() -> None:
    run = run_in_terminal(["demo"], timeout=400, env=env())
    assert not run.timed_out, run.raw[-2000:]
    no_traceback(run.text)
    assert run.code == 0, run.text[-3000:]


def test_a_closed_stdout_is_not_a_traceback(tmp_path: Path) -> None:
    """`dflashctl metrics LOG >&-`: Python starts with sys.stdout None; the report goes nowhere."""
    log = tmp_path / "vllm.log"
    log.write_text("")
    for extra in ([], ["--json"]):
        cmd = f"{sys.executable} -m dflashctl metrics {log} {' '.join(extra)} >&-"
        done = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=60,
                              cwd=REPO)  # fmt: skip
        assert "Traceback" not in done.stderr, done.stderr
        assert done.returncode in (0, 2), done.stderr


@pytest.mark.parametrize("columns", [60, 80, 120])
def test_metrics_keeps_its_figures_whole_at_any_width(columns: int, monkeypatch, capsys) -> None:
    """A pipe and a small terminal are 80 columns: τ read `3.…` there. The figures keep their
    width; the least needed columns go instead."""
    from support.cli import run_main

    monkeypatch.setenv("COLUMNS", str(columns))
    log = REPO / "tests" / "data" / "metrics" / "vllm_034_healthy.log"
    code, out, _ = run_main(monkeypatch, capsys, "metrics", str(log))
    assert code == 0
    table = out[out.index("Recent windows") : out.index("speculative config")]
    assert "…" not in table
    taus = [line.split("│")[1 if columns < 80 else 2].strip() for line in table.splitlines()
            if line.startswith("11-20 ")]  # fmt: skip
    assert taus[:3] == ["2.50", "2.49", "2.50"], table
    assert all(len(line) <= columns for line in table.splitlines())


def test_doctor_breaks_no_word_at_80_columns(monkeypatch, capsys) -> None:
    from support.cli import run_main

    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_main(monkeypatch, capsys, "doctor", "--engine", "local")
    assert code in (0, 1)  # the verdict depends on the machine; the layout does not
    checks = [line.split("│")[1].strip() for line in out.splitlines() if line.startswith("│")]
    words = {w for c in checks for w in c.split()}
    assert "flash-attn" in words and "flash-att" not in words, checks


def test_a_long_serve_wait_shows_the_engines_phase(tmp_path: Path) -> None:
    """Issue 27 #10: a wait of minutes names what the engine is doing (its log's last phase
    line: loading shards, capturing CUDA graphs), not only `waiting for the engine to load`."""
    from support.engine_process import fake_model, make_python

    py = make_python(tmp_path / "bin", "slow_load")
    args = ["serve", "--model", fake_model(tmp_path), "--spec", "none", "--python", str(py),
            "--port", str(free_port()), "--detach", "--name", "slow"]  # fmt: skip
    run = run_in_terminal(args, timeout=60, env=env())
    assert run.code == 0, run.text
    assert "Loading safetensors checkpoint shards: 50%" in run.text
    assert "Capturing CUDA graphs for decode" in run.text


def test_prose_wraps_at_word_boundaries_at_a_terminal_and_stays_one_line_in_a_pipe() -> None:
    """`metrics` on the demo pair's stale-mask log (vLLM 0.32, real): at an 80-column terminal
    each finding and likely cause wraps between words, its continuation lines under its text;
    into a pipe each stays one line, for grep. (The terminal broke them mid-word before.)"""
    log = REPO / "tests" / "data" / "vllm032_demo" / "stale_mask.log"
    run = run_in_terminal(["metrics", str(log)], timeout=120, columns=80, env=env())
    assert run.code == 1, run.text[-2000:]
    lines = run.text.splitlines()
    start = next(i for i, line in enumerate(lines) if "ALARM" in line)
    finding = [lines[start]]
    for line in lines[start + 1 :]:
        if not line.startswith("        "):  # the continuation lines, under the text
            break
        finding.append(line)
    assert len(finding) > 1 and all(len(line.rstrip()) <= 80 for line in finding), finding
    causes = [line for line in lines if line.startswith("      1. ")]
    assert causes and len(causes[0].rstrip()) <= 80
    message = " ".join(line.strip() for line in finding)
    pipe = piped("metrics", str(log))
    assert pipe.returncode == 1
    alarm = next(line for line in pipe.stdout.splitlines() if "ALARM" in line)
    assert " ".join(alarm.split()) == " ".join(message.split())  # the same words, none cut
