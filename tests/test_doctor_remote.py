"""`dflashctl doctor --host H`: the same checks over SSH, through the `Host` the SSH layer opens
(`dflashctl.hosts.ssh.SSHHost`), against a real OpenSSH sshd on 127.0.0.1 (it shares this
machine's files, so the vLLM CPU venv and the drafter written by the test are "on the host")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.drafter_files import write_drafter
from support.sshd import Sshd, sshd_server

from dflashctl.commands.doctor.report import DoctorOptions
from dflashctl.commands.doctor.run import run_doctor

pytestmark = pytest.mark.ssh


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    yield from sshd_server(tmp_path_factory)


VLLM_PY = Path(__file__).resolve().parent.parent / ".venv-vllm" / "bin" / "python"


@pytest.fixture(autouse=True)
def _ssh_config(sshd, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DFLASHCTL_SSH_CONFIG", str(sshd.ssh_config))


def test_remote_doctor_runs_the_checks_there(tmp_path: Path):
    d = write_drafter(tmp_path / "d", [1.0, 1.0])
    r = run_doctor(DoctorOptions(host="testhost", engine="local", drafter=str(d), hub_timeout=1))
    assert r.host == "testhost"
    ids = {c.id for c in r.checks}
    assert {"python", "gpu", "torch", "flash-attn", "drafter", "port", "hub"} <= ids
    assert next(c for c in r.checks if c.id == "drafter").status == "ok"


@pytest.mark.vllm
@pytest.mark.skipif(not VLLM_PY.exists(), reason="no .venv-vllm (bin/setup-vllm)")
def test_remote_vllm_cpu_host_names_the_k_norm_defect(tmp_path: Path):
    differ = write_drafter(tmp_path / "differ", [0.96875, 1.5])
    equal = write_drafter(tmp_path / "equal", [1.5, 1.5])
    opts = {"host": "testhost", "engine": "vllm", "python": str(VLLM_PY), "hub_timeout": 1}
    r = run_doctor(DoctorOptions(drafter=str(differ), **opts))
    assert [m.defect.id for m in r.defects] == ["vllm-cpu-context-k-norm"]
    assert r.defects[0].certainty == "confirmed"
    assert any("differ between layers" in e for e in r.defects[0].evidence)
    r = run_doctor(DoctorOptions(drafter=str(equal), **opts))
    assert r.defects == []


def test_remote_missing_drafter_is_an_input_error(tmp_path: Path):
    from dflashctl.errors import InputError

    with pytest.raises(InputError, match="not found on testhost"):
        run_doctor(DoctorOptions(host="testhost", engine="local", drafter=str(tmp_path / "no")))
