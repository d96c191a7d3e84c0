"""Put this dflashctl on a serving host: its wheel copied over SSH into a venv there.

`fetch --remote-fetch` and `diagnose --host` run dflashctl on the GPU host; this is how it gets
there. The wheel is `--wheel PATH`, or built from this source tree with `pip wheel --no-deps`.
On the host: a venv is created once (`PYTHON -m venv VENV`), the wheel is written atomically
into `VENV/wheels/`, the wheel is pip-installed into it (with `[EXTRAS]`, e.g. `engine`;
`--no-deps` when the host's index is unreachable and the dependencies are already there), and
the installed version is read back. No printing.
"""

from __future__ import annotations

import posixpath
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dflashctl import __version__
from dflashctl.errors import InputError, RemoteError, UsageError


@dataclass
class InstallReport:
    host: str
    wheel: str
    venv: str
    python: str
    version: str | None
    extras: list[str]
    deps: bool
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.version is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "host": self.host,
            "wheel": self.wheel,
            "venv": self.venv,
            "python": self.python,
            "version": self.version,
            "extras": self.extras,
            "dependencies_installed": self.deps,
            "notes": self.notes,
        }


def source_root() -> Path | None:
    """The source tree this dflashctl runs from (it has the pyproject.toml), if any."""
    root = Path(__file__).resolve().parents[3]
    return root if (root / "pyproject.toml").is_file() and (root / "dflashctl").is_dir() else None


def build_wheel(out_dir: Path) -> Path:
    root = source_root()
    if root is None:
        raise UsageError(
            "this dflashctl was not installed from a source tree: there is nothing to build",
            "pass the wheel it was installed from: --wheel dflashctl-*.whl",
        )
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out_dir), str(root)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    wheels = sorted(out_dir.glob("dflashctl-*.whl"))
    if res.returncode != 0 or not wheels:
        last = (res.stderr.strip().splitlines() or ["no wheel written"])[-1]
        raise InputError(
            f"building the wheel of {root} failed: {last}",
            "build it yourself (pip wheel --no-deps .) and pass --wheel PATH",
        )
    return wheels[-1]


def install(
    host_spec: str,
    *,
    wheel: Path | None = None,
    venv: str = "~/.dflashctl/venv",
    python: str = "python3",
    extras: list[str] | None = None,
    deps: bool = True,
    say: Any = None,
) -> InstallReport:
    from dflashctl.hosts import open_host

    say = say or (lambda _m: None)
    extras = [e.strip() for e in (extras or []) if e.strip()]
    for e in extras:
        if not e.replace("-", "").replace("_", "").isalnum():
            raise UsageError(f"--extras {e!r} is not an extra's name", "e.g. --extras engine")
    if wheel is not None:
        wheel = wheel.expanduser()
        if not wheel.is_file() or wheel.suffix != ".whl":
            raise InputError(f"--wheel {wheel}: not a wheel file (.whl)")
    with open_host(host_spec) as host, tempfile.TemporaryDirectory() as tmp:
        if wheel is None:
            say("building this dflashctl's wheel (pip wheel --no-deps)")
            wheel = build_wheel(Path(tmp))
        vdir = host.abspath(venv)
        vpy = posixpath.join(vdir, "bin", "python")
        q = shlex.quote
        say(f"creating the venv {vdir} (once) with {python}")
        res = host.sh(f"test -x {q(vpy)} || {q(python)} -m venv {q(vdir)}", timeout=300.0)
        if res.rc != 0:
            raise RemoteError(
                f"{host.label}: creating the venv {vdir} failed: {res.tail()}",
                "name an interpreter with venv support there: --python /usr/bin/python3.11",
            )
        wheels = posixpath.join(vdir, "wheels")
        remote_wheel = posixpath.join(wheels, wheel.name)
        say(f"copying {wheel.name} to {host.label}:{remote_wheel}")
        host.makedirs(wheels)
        host.write_file(remote_wheel, wheel.read_bytes())
        with_extras = f"[{','.join(extras)}]" if extras else ""
        flags = "--upgrade --force-reinstall" + ("" if deps else " --no-deps")
        say(f"pip install {flags} {wheel.name}{with_extras}")
        pip = f"{q(vpy)} -m pip install {flags} {q(remote_wheel + with_extras)}"
        res = host.sh(pip, timeout=1800.0)
        if res.rc != 0:
            raise RemoteError(
                f"{host.label}: pip install of {wheel.name} failed: {res.tail()}",
                "no package index there? install the dependencies yourself and pass --no-deps",
            )
        code = "import dflashctl; print(dflashctl.__version__)"
        res = host.sh(f"{q(vpy)} -c {q(code)}", timeout=60.0)
        version = (
            res.stdout.strip().splitlines()[-1] if res.rc == 0 and res.stdout.strip() else None
        )
        report = InstallReport(
            host=host_spec,
            wheel=remote_wheel,
            venv=vdir,
            python=vpy,
            version=version,
            extras=extras,
            deps=deps,
        )
        if version is not None and version != __version__:
            report.notes.append(f"the host has dflashctl {version}; this one is {__version__}")
        if not deps:
            report.notes.append("--no-deps: its dependencies must already be in the venv")
        report.notes.append(
            f"use it: dflashctl fetch NAME --host {host_spec} --remote-fetch --python {vpy}; "
            f"dflashctl diagnose URL --host {host_spec} --python {vpy}"
        )
        return report
