"""Typed errors. Domain code raises these; only cli.main() turns them into output and exit codes.

A failed *check* is data (a result with ok=False), not an exception: exceptions mean the command
could not run (exit 2).
"""

from __future__ import annotations

import math


class DflashError(Exception):
    """Something a user can act on. `exit_code` 2 = could not run."""

    exit_code = 2

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class UsageError(DflashError):
    """Bad arguments or a combination of flags that cannot work."""


class InputError(DflashError):
    """An input file (config, log, safetensors, playbook) is missing, unreadable or malformed."""


class RegistryError(DflashError):
    """The drafter registry or a playbook is malformed, or a name is unknown."""


class FetchError(DflashError):
    """A Hub download failed (gated, missing repo or revision, network, hash mismatch)."""


class RemoteError(DflashError):
    """An SSH connection or remote command failed."""


class ServerError(DflashError):
    """An HTTP server could not be reached or answered with something unusable."""


class EngineError(DflashError):
    """The bundled engine could not load a checkpoint or serve a request."""


class OutputError(DflashError):
    """A file dflashctl was asked to write cannot go there (not a regular file, a directory, a
    name too long, a full disk): nothing was changed."""


class ConfigWriteError(DflashError):
    """A config repair was refused or failed; the file on disk is unchanged."""


class HostKeyError(RemoteError):
    """An SSH host key is unknown (not in known_hosts) or has changed: the connection is refused."""


class PlaybookError(InputError):
    """A serve playbook is malformed: the message names file:line and the key."""


class PortInUseError(DflashError):
    """The port a server should listen on is already taken (by whom, when we can tell)."""


# No option of dflashctl is meaningful beyond this magnitude (a timeout of 31 years).
MAX_OPTION = 1e9


def require_finite(**values: float | None) -> None:
    """UsageError naming the first option (its keyword as `--flag-name`) that is NaN, infinite
    or beyond MAX_OPTION; None (not given) passes. Range checks stay with each option."""
    for key, v in values.items():
        if v is None:
            continue
        flag = "--" + key.replace("_", "-")
        if not math.isfinite(v):
            raise UsageError(f"{flag} {v}: not a finite number", f"give a number, e.g. {flag} 10")
        if abs(v) > MAX_OPTION:
            raise UsageError(f"{flag} {v:g}: out of range (at most {MAX_OPTION:g})")
