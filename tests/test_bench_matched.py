"""bench's A/B guard: servers compared must differ only in speculation (vllm#50722).

Two deployments recorded as `dflashctl serve` records them, with the vLLM commands they were
launched with; the guard reads those commands and refuses before any request is sent."""

from __future__ import annotations

import json
import os

import pytest
from support.cli import run_main

from dflashctl.commands.bench.matched import check_matched
from dflashctl.commands.bench.targets import resolve_targets
from dflashctl.server import deployments as state

SC = json.dumps(
    {"method": "dflash", "model": "z-lab/Qwen3-8B-DFlash-b16", "num_speculative_tokens": 15}
)


def save(name: str, port: int, engine: str, model: str, model_id: str, cmd: list[str],
         spec: bool) -> None:  # fmt: skip
    """A deployment as `dflashctl serve` records it."""
    state.save(
        state.Deployment(
            name=name, engine=engine, host=None, url=f"http://127.0.0.1:{port}", pid=os.getpid(),
            starttime=0, log="/dev/null", run_dir="/tmp", port=port, bind="127.0.0.1",
            model=model, model_id=model_id, drafter=None, cmd=cmd, started_at=state.now_iso(),
            spec="dflash" if spec else "none",
        )
    )  # fmt: skip


def record(name: str, port: int, *flags: str, spec: bool = True) -> None:
    cmd = ["vllm", "serve", "Qwen/Qwen3-8B", "--port", str(port)]
    cmd += ["--speculative-config", SC] if spec else []
    save(name, port, "vllm", "Qwen/Qwen3-8B", "Qwen/Qwen3-8B", cmd + list(flags), spec)


def test_matched_servers_pass_and_a_url_is_noted():
    record("plain", 9101, "--no-enable-prefix-caching", spec=False)
    record("dflash", 9102, "--no-enable-prefix-caching")
    assert check_matched(resolve_targets(["plain", "dflash"]), False) == []
    notes = check_matched(resolve_targets(["plain", "http://127.0.0.1:9103"]), False)
    assert notes and "not compared" in notes[0]


@pytest.mark.parametrize(
    "flags, named",
    [
        (["--no-enable-prefix-caching"], "prefix caching: True on plain, False on dflash"),
        (["--max-num-batched-tokens", "32768"], "max-num-batched-tokens: None on plain, 32768"),
        (["--disable-custom-all-reduce"], "custom all-reduce"),
        (["--max-model-len", "8192"], "max-model-len"),
        (["--enforce-eager"], "eager mode"),
    ],
)
def test_each_unmatched_setting_is_refused_by_name(monkeypatch, capsys, flags, named):
    record("plain", 9101, spec=False)
    record("dflash", 9102, *flags)
    code, out, err = run_main(monkeypatch, capsys, "bench", "plain", "dflash")
    text = " ".join(err.split())
    assert code == 2 and out == "" and "Traceback" not in text
    assert named in text and "--allow-unmatched" in text


def test_allow_unmatched_keeps_the_difference_in_the_notes():
    record("plain", 9101, spec=False)
    record("dflash", 9102, "--no-enable-prefix-caching")
    notes = check_matched(resolve_targets(["plain", "dflash"]), True)
    assert notes == [
        "unmatched A/B (--allow-unmatched): prefix caching: True on plain, False on dflash"
    ]


def record_llama(name: str, port: int, *flags: str, spec: bool = True) -> None:
    """A llama-server deployment as `serve --engine llama.cpp` records it."""
    model = "/m/Qwen3-8B-Q4_K_M.gguf"
    cmd = ["llama-server", "-m", model, "--port", str(port)]
    cmd += ["-md", "/m/Qwen3-8B-DFlash-b16.gguf", "--spec-type", "draft-dflash"] if spec else []
    save(name, port, "llama.cpp", model, "Qwen3-8B-Q4_K_M", cmd + list(flags), spec)


@pytest.mark.parametrize(
    "flags, named",
    [
        (["--no-cache-prompt"], "prefix caching: True on plain, False on dflash"),
        (["-c", "8192"], "max-model-len: None on plain, 8192 on dflash"),
        (["--batch-size=4096"], "max-num-batched-tokens: None on plain, 4096 on dflash"),
        (["-sm", "row"], "split mode (-sm): layer on plain, row on dflash"),
    ],
)
def test_llama_cpp_deployments_are_guarded_too(monkeypatch, capsys, flags, named):
    record_llama("plain", 9101, spec=False)
    record_llama("dflash", 9102, *flags)
    code, out, err = run_main(monkeypatch, capsys, "bench", "plain", "dflash")
    text = " ".join(err.split())
    assert code == 2 and out == "" and "Traceback" not in text
    assert named in text and "--allow-unmatched" in text


def test_llama_cpp_deployments_launched_alike_pass():
    record_llama("plain", 9101, "-c", "8192", "--cache-prompt", spec=False)
    record_llama("dflash", 9102, "--ctx-size", "8192")  # prompt caching is llama-server's default
    assert check_matched(resolve_targets(["plain", "dflash"]), False) == []
