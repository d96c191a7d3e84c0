"""The plotting seam: matplotlib, optional (`pip install 'dflashctl[plot]'`) and imported only
when a command draws, and one atomic PNG writer (a temporary file beside the target, then a
rename: never a half-written picture).

Frame: commands' plot modules draw with `pyplot()` and save with `save_png`; nothing prints.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dflashctl.errors import UsageError
from dflashctl.files import write_atomic


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
    """Write `fig` to `path` through the one atomic writer (`files.write_atomic`: a regular
    file only, a temporary file beside it, then a rename)."""
    return write_atomic(Path(path), lambda f: fig.savefig(f, format="png", dpi=110))
