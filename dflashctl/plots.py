"""The plotting seam: matplotlib, optional (`pip install 'dflashctl[plot]'`) and imported only
when a command draws, and one atomic PNG writer (a temporary file beside the target, then a
rename: never a half-written picture).

Frame: commands' plot modules draw with `pyplot()` and save with `save_png`; nothing prints.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from dflashctl.errors import InputError, UsageError


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend, or a UsageError naming the extra to install."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError(
            "--plot needs matplotlib, which is not installed",
            "install the extra: pip install 'dflashctl[plot]'",
        ) from None
    return plt


def save_png(fig: Any, path: Path) -> Path:
    """Write `fig` to `path` atomically (a temporary file beside it, then a rename)."""
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=".plot-", suffix=".png", dir=path.parent or ".")
    except OSError as e:
        raise InputError(f"cannot write {path}: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            fig.savefig(f, format="png", dpi=110)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
