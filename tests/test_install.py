"""`dflashctl install --host H` against a real OpenSSH sshd on 127.0.0.1 (support/sshd.py): the
wheel is copied over SFTP, a venv is made there, pip installs the wheel, and the version is read
back from the host's interpreter. The wheel is made here from the package's own files (a wheel
is a zip with its dist-info), so no build backend or network is needed; `--no-deps` keeps pip
off the index.
"""

from __future__ import annotations

import base64
import hashlib
import json
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import run_main
from support.sshd import Sshd, sshd_server

import dflashctl

pytestmark = pytest.mark.ssh
PKG = Path(dflashctl.__file__).resolve().parent


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    yield from sshd_server(tmp_path_factory)


def make_wheel(out: Path) -> Path:
    """dflashctl's Python files as a py3-none-any wheel (what `pip wheel .` would hold, less the
    data files)."""
    name = f"dflashctl-{dflashctl.__version__}"
    wheel = out / f"{name}-py3-none-any.whl"
    files = {
        f"dflashctl/{p.relative_to(PKG).as_posix()}": p.read_bytes()
        for p in sorted(PKG.rglob("*.py"))
    }
    info = f"{name}.dist-info"
    files[f"{info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: dflashctl\nVersion: {dflashctl.__version__}\n"
    ).encode()
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
    files[f"{info}/WHEEL"] += b"Tag: py3-none-any\n"
    files[f"{info}/entry_points.txt"] = b"[console_scripts]\ndflashctl = dflashctl.cli:main\n"
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    with zipfile.ZipFile(wheel, "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
    return wheel


def test_install_over_ssh_into_a_venv(sshd, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DFLASHCTL_SSH_CONFIG", str(sshd.ssh_config))
    wheel = make_wheel(tmp_path)
    venv = tmp_path / "remote venv"  # a space: every remote argument is quoted
    args = ["install", "--host", "testhost", "--wheel", str(wheel), "--venv", str(venv)]
    code, out, err = run_main(monkeypatch, capsys, *args, "--no-deps", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["ok"] and report["version"] == dflashctl.__version__
    assert report["python"] == f"{venv}/bin/python"
    assert (venv / "wheels" / wheel.name).read_bytes() == wheel.read_bytes()
    assert (venv / "bin" / "dflashctl").exists()  # the console script, from the entry point
    assert any("--remote-fetch --python" in n for n in report["notes"])
    # again: the venv is kept, the wheel reinstalled
    code, out, err = run_main(monkeypatch, capsys, *args, "--no-deps")
    assert code == 0, err
    assert f"installed dflashctl {dflashctl.__version__} on testhost" in out


def test_bad_input(sshd, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DFLASHCTL_SSH_CONFIG", str(sshd.ssh_config))
    code, out, err = run_main(
        monkeypatch, capsys, "install", "--host", "testhost", "--wheel", str(tmp_path / "x.whl")
    )
    assert code == 2 and out == "" and "not a wheel file" in err
    code, _, err = run_main(monkeypatch, capsys, "install", "--host", "0.0.0.0")
    assert code == 2 and "--bind" in err
