"""llama.cpp in the known-defects matrix (issue 28): builds as versions (`b9235`), its launch
flags (`-sm`, `--spec-type`, `--spec-draft-p-min`), and doctor reading the build from a real
`llama-server --version` run, here and over SSH. The one stand-in is llama-server itself (no
llama.cpp build fits this machine's test budget): the named fake in tests/support/llama_server.py,
which prints the real `--version` format and otherwise serves /health and /v1/models as a
running server would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.version import Version
from support.cli import run_main
from support.llama_server import VERSION_OUT, fake_llama_server
from support.sshd import Sshd, sshd_server

from dflashctl.commands.doctor.facts import parse_llama_version
from dflashctl.commands.doctor.report import DoctorOptions, DoctorReport
from dflashctl.commands.doctor.run import run_doctor
from dflashctl.defects.catalogue import load_catalogue, parse_catalogue
from dflashctl.defects.launch import from_argv
from dflashctl.defects.match import match
from dflashctl.defects.predicates import Facts, parse_version
from dflashctl.errors import InputError

P_MIN = "llamacpp-draft-p-min-default-zero"
TENSOR = "llamacpp-split-mode-tensor-dflash-assert"
DFLASH = ["--spec-type", "draft-dflash"]


def found(build: str | None, argv: list[str] | None, **kw: bool) -> dict[str, str]:
    launch = from_argv("llama.cpp", argv) if argv is not None else None
    return {m.defect.id: m.certainty for m in match(Facts("llama.cpp", build, launch=launch), **kw)}


# ---- the catalogue: builds as versions ---------------------------------------------------------


def test_builds_are_versions_shown_as_the_engine_names_them():
    assert parse_version("b9235", engine="llama.cpp") == Version("9235")
    assert parse_version("9235", engine="llama.cpp") == Version("9235")
    with pytest.raises(InputError, match=r"not a llama\.cpp build"):
        parse_version("v1.2", engine="llama.cpp")
    d = load_catalogue().get(P_MIN)
    assert d.versions.to_json()["introduced"] == "b9235"
    assert "introduced b9235" in d.versions.describe()
    assert load_catalogue().engines["llama.cpp"].dflash_since is None  # not in the sources


def test_a_bad_build_in_the_catalogue_is_one_line(tmp_path: Path):
    text = load_catalogue().path.read_text(encoding="utf-8")
    bad = text.replace('introduced: "b9235"', 'introduced: "9235a"')
    assert bad != text
    with pytest.raises(InputError) as e:
        parse_catalogue(bad, tmp_path / "defects.yaml")
    assert "not a llama.cpp build (b<number>)" in e.value.message and "\n" not in e.value.message


# ---- the matrix on launch flags ----------------------------------------------------------------


@pytest.mark.parametrize(
    "build, argv, certainty",
    [
        ("b9235", DFLASH, "likely"),  # the build that made 0.0 the default, flag absent
        ("b9900", [*DFLASH, "--spec-draft-p-min", "0"], "likely"),
        ("b9234", DFLASH, None),  # before the change
        ("b9900", [*DFLASH, "--spec-draft-p-min", "0.75"], None),  # the fix
        ("b9900", [*DFLASH, "--draft-p-min", "0.75"], None),  # the older spelling
        ("b9900", ["--spec-type", "draft-simple"], None),  # not DFlash drafting
        ("b9900", None, "possible"),  # flags not known
    ],
)
def test_draft_p_min_default(build, argv, certainty):
    assert found(build, argv, include_possible=True).get(P_MIN) == certainty


@pytest.mark.parametrize(
    "argv, hit",
    [
        ([*DFLASH, "-sm", "tensor"], True),
        ([*DFLASH, "--split-mode", "tensor"], True),
        ([*DFLASH, "-sm", "layer"], False),
        (DFLASH, False),  # llama-server's default split mode is layer
        (["-sm", "tensor"], False),  # no DFlash drafting
    ],
)
def test_split_mode_tensor_with_draft_dflash(argv, hit):
    got = found("b9900", argv)
    assert (got.get(TENSOR) == "likely") is hit
    if hit:
        m = next(m for m in match(Facts("llama.cpp", "b9900", launch=from_argv("llama.cpp", argv))))
        assert m.defect.severity == "error"  # errors first
        assert "-sm layer" in m.defect.fix


@pytest.mark.parametrize(
    "argv, defect, flag_evidence",
    [
        ([*DFLASH, "-sm", "tensor"], TENSOR, "split mode (-sm): tensor (the launch command)"),
        ([*DFLASH, "--spec-draft-p-min", "0"], P_MIN, "--spec-draft-p-min 0 (the launch command)"),
        (DFLASH, P_MIN,
         "--spec-draft-p-min not given: the build's default 0.0 (the launch command)"),
    ],
)  # fmt: skip
def test_the_evidence_names_the_flag_as_it_was_read(argv, defect, flag_evidence):
    """What `doctor` prints under a match: the build's range, the method, the flag's value."""
    m = next(
        m
        for m in match(Facts("llama.cpp", "b9900", launch=from_argv("llama.cpp", argv)))
        if m.defect.id == defect
    )
    assert m.evidence[1:] == ["speculative method dflash", flag_evidence]


def test_launch_flags_read_from_a_llama_server_command_line():
    s = from_argv(
        "llama.cpp",
        ["llama-server", "-m", "t.gguf", "-md", "d.gguf", "--spec-type", "draft-dflash",
         "-sm", "tensor", "--spec-draft-p-min", "0.5", "--port", "8080"],
    )  # fmt: skip
    assert (s.method, s.split_mode, s.spec_draft_p_min) == ("dflash", "tensor", 0.5)
    # llama-server's own default (a prompt's KV prefix is reused unless --no-cache-prompt),
    # and vLLM's prefix-caching defect is vLLM's only
    assert s.enable_prefix_caching is True
    ids = {m.defect.id for m in match(Facts("llama.cpp", "b9900", launch=s))}
    assert "vllm-prefix-caching-poisons-draft-context" not in ids
    off = from_argv("llama.cpp", ["llama-server", "--no-cache-prompt", "-c", "8192", "-b", "x"])
    assert (off.enable_prefix_caching, off.max_model_len, off.max_num_batched_tokens) == (
        False, 8192, None,
    )  # fmt: skip


# ---- doctor: a fake llama-server install -------------------------------------------------------


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("DFLASHCTL_LLAMA_SERVER", raising=False)


def doctor(**kw) -> DoctorReport:
    kw.setdefault("hub_timeout", 1.0)
    return run_doctor(DoctorOptions(**kw))


def check(report: DoctorReport, check_id: str):
    return next(c for c in report.checks if c.id == check_id)


def test_parse_the_real_version_output():
    assert parse_llama_version(VERSION_OUT.format(build=9240)) == ("b9240", "7f3a9c21")
    assert parse_llama_version("error: unknown argument: --version\n") is None


def test_doctor_reads_the_build_and_names_both_defects(tmp_path: Path):
    exe = fake_llama_server(tmp_path / "bin", 9240)
    r = doctor(engine="llama.cpp", llama_server=str(exe),
               launch_args=[*DFLASH, "-sm", "tensor"])  # fmt: skip
    eng = check(r, "engine")
    assert eng.status == "ok" and "build b9240 (commit 7f3a9c21)" in eng.found
    assert {m.defect.id: m.certainty for m in r.defects} == {TENSOR: "likely", P_MIN: "likely"}
    assert check(r, f"defect:{TENSOR}").status == "error"
    assert check(r, f"defect:{P_MIN}").status == "warning"
    launch = check(r, "launch")
    assert "split mode tensor" in launch.found and "spec-draft-p-min the build's default" in (
        launch.found
    )
    assert not r.ok
    assert r.facts["llama_server"]["build"] == "b9240"
    assert not any(c.id in ("torch", "flash-attn") for c in r.checks)  # C++: no torch needed
    # the fixed launch: nothing left
    ok = doctor(engine="llama.cpp", llama_server=str(exe),
                launch_args=[*DFLASH, "-sm", "layer", "--spec-draft-p-min", "0.75"])  # fmt: skip
    assert ok.defects == [] and "0 known defect(s) apply to llama.cpp b9240" in (
        check(ok, "defects").found
    )


def test_an_older_build_is_not_the_p_min_defect(tmp_path: Path):
    exe = fake_llama_server(tmp_path / "bin", 9100)
    r = doctor(engine="llama.cpp", llama_server=str(exe), launch_args=DFLASH)
    assert r.defects == [] and "b9100" in check(r, "engine").found


@pytest.fixture
def running_llama_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """llama-server on PATH, running with DFlash and -sm tensor on port 18493."""
    exe = fake_llama_server(tmp_path / "bin", 9240)
    monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{os.environ['PATH']}")
    p = subprocess.Popen([str(exe), "-m", "/models/t.gguf", "-md", "/models/d.gguf", *DFLASH,
                          "-sm", "tensor", "--port", "18493"], start_new_session=True)  # fmt: skip
    try:
        yield p.pid
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(10)


def test_auto_detects_llama_server_on_path_and_reads_the_running_servers_flags(
    running_llama_server: int,
):
    r = doctor(port=18493)  # no --engine: no vLLM/SGLang in this Python, llama-server on PATH
    assert r.engine == "llama.cpp" and "on PATH" in r.engine_why
    assert f"the running llama.cpp (pid {running_llama_server})" in check(r, "launch").found
    assert [m.defect.id for m in r.defects] == [TENSOR, P_MIN]
    procs = check(r, "processes")
    assert procs.status == "warning" and "(llama.cpp)" in procs.found


def test_no_llama_server_and_an_unreadable_one(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    r = doctor(engine="llama.cpp")
    assert check(r, "engine").status == "error" and "no llama-server on the PATH" in (
        check(r, "engine").found
    )
    odd = fake_llama_server(tmp_path / "odd", 0, "usage: llama-server [options]\n")
    r = doctor(engine="llama.cpp", llama_server=str(odd), launch_args=DFLASH)
    assert check(r, "engine").status == "warning" and "gave no build" in check(r, "engine").found
    assert {m.defect.id for m in match(Facts("llama.cpp", None, launch=from_argv(
        "llama.cpp", DFLASH)), include_possible=True)} == {P_MIN}  # fmt: skip


def test_cli_json_exit_codes(tmp_path: Path, monkeypatch, capsys):
    exe = fake_llama_server(tmp_path / "bin", 9240)
    code, out, _err = run_main(monkeypatch, capsys, "doctor", "--engine", "llama.cpp",
                               "--llama-server", str(exe), "--json", "--", *DFLASH,
                               "-sm", "tensor")  # fmt: skip
    data = json.loads(out)
    assert code == 1 and data["engine"] == "llama.cpp"
    assert [d["id"] for d in data["defects"]] == [TENSOR, P_MIN]
    assert data["defects"][1]["fix"] == "Launch llama-server with --spec-draft-p-min 0.75."
    code, out, err = run_main(monkeypatch, capsys, "doctor", "--engine", "llama.cpp",
                              "--llama-server", str(tmp_path / "nope"))  # fmt: skip
    assert code == 2 and "not an executable" in err and len(err.strip().splitlines()) <= 2


# ---- the same over SSH --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    yield from sshd_server(tmp_path_factory)


@pytest.mark.ssh
def test_remote_doctor_reads_the_build_there(sshd: Sshd, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("DFLASHCTL_SSH_CONFIG", str(sshd.ssh_config))
    exe = fake_llama_server(tmp_path / "bin", 9240)
    r = doctor(host="testhost", engine="llama.cpp", llama_server=str(exe),
               launch_args=DFLASH)  # fmt: skip
    assert r.host == "testhost"
    assert "build b9240" in check(r, "engine").found
    assert [m.defect.id for m in r.defects] == [P_MIN]
