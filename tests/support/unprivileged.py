"""Permission checks where CI runs them: as root, which reads any file. `run_unprivileged`
runs a command as the user nobody (setpriv drops the uid, gid and groups; the kernel drops
root's capabilities with them), so a file made unreadable is unreadable to it; `world_dir`
is a directory nobody can enter, for the files such a command reads."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

NOBODY = 65534


def world_dir() -> Path:
    d = Path(tempfile.mkdtemp(prefix="dflashctl-perm-", dir="/tmp"))
    d.chmod(0o755)
    return d


def run_unprivileged(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """`python -m dflashctl ARGS` as nobody (as this user when it is not root), from `cwd`
    (a world_dir: its home and dflashctl's state go there)."""
    argv = [sys.executable, "-m", "dflashctl", *args]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        assert setpriv, "setpriv (util-linux) is needed to test permissions as root"
        argv = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--", *argv]
    env = dict(os.environ, HOME=str(cwd), DFLASHCTL_HOME=str(cwd / ".dflashctl"), NO_COLOR="1")
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
