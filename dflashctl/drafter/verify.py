"""verify-config's one entry point: the drafter checked here, or on a serving host (its files
read over SFTP, checked here, a fix pushed back and read again).
"""

from __future__ import annotations

from pathlib import Path

from dflashctl.drafter.check import verify_local
from dflashctl.drafter.report import VerifyReport


def run_verify(
    path: Path,
    *,
    drafter: str | None = None,
    target: Path | None = None,
    engine: str = "vllm",
    fix: bool = False,
    host: str | None = None,
    max_model_len: int | None = None,
) -> VerifyReport:
    """Check the drafter at `path` (on `host` when given), optionally fix it; `max_model_len`
    is the serving context to judge the drafter's training context against. Raises
    `DflashError`s (exit 2) when it cannot run; failed checks are in the report."""
    if host is None:
        return verify_local(path, drafter=drafter, target=target, engine=engine, fix=fix,
                            max_model_len=max_model_len)  # fmt: skip
    from dflashctl.drafter.check_remote import verify_on_host
    from dflashctl.hosts import open_host

    with open_host(host) as h:
        return verify_on_host(
            h,
            str(path),
            drafter=drafter,
            target=str(target) if target is not None else None,
            engine=engine,
            fix=fix,
            max_model_len=max_model_len,
        )
