"""The one vocabulary of results: a checked thing is a `Row`, and every status word a command
prints belongs to one of four levels (`ok`, `warning`, `fail`, `skip`). The exit rule is the same
in every command: exit 1 when a fail-level row is found; a warning is shown and never fails.

Each command keeps the JSON keys it documents (SPEC.md: verify-config's
`checks[].field/status/found/expected/hint`; doctor's `id/name/status/found/fix/details`;
smoke's `name/status/message/prompt/hint`) by naming, per key, the `Row` attribute it shows
(`Row.to_json(keys)`); every row adds `level`.

Frame: imports nothing from dflashctl; never prints.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

OK, WARNING, FAIL, SKIP = "ok", "warning", "fail", "skip"
LEVELS = (OK, WARNING, FAIL, SKIP)

# every status word a command prints -> its level
LEVEL_OF = {
    "ok": OK,
    "warning": WARNING,
    "skip": SKIP,
    "fail": FAIL,  # smoke
    "error": FAIL,  # doctor
    "mismatch": FAIL,  # verify-config: a value other than the canonical one
    "missing": FAIL,  # verify-config: a required value absent
    "invalid": FAIL,  # verify-config: a value no engine can read
}
STATUSES = tuple(LEVEL_OF)


@dataclass(frozen=True)
class Row:
    """One checked thing: a config field (verify-config), a fact of the serving host (doctor),
    an answer's property (smoke).

    `found` is what was seen (a value, or a sentence saying it), `expected` what should be there
    (when there is one value to compare with), `hint` what to do next (a command where there is
    one). `id` is a stable machine name where the command has one, `prompt` the request a smoke
    row belongs to, `details` any structured extra."""

    name: str
    status: str
    found: Any = None
    expected: Any = None
    hint: str | None = None
    id: str | None = None
    prompt: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        assert self.status in LEVEL_OF, self.status

    @property
    def level(self) -> str:
        return LEVEL_OF[self.status]

    @property
    def failed(self) -> bool:
        return self.level == FAIL

    @property
    def label(self) -> str:
        return f"{self.prompt} · {self.name}" if self.prompt else self.name

    def to_json(self, keys: Mapping[str, str]) -> dict[str, Any]:
        """The row under a command's documented keys (`keys`: JSON key -> attribute), plus
        `level`."""
        data = {key: getattr(self, attr) for key, attr in keys.items()}
        data["level"] = self.level
        return data


def rows_ok(rows: Iterable[Row]) -> bool:
    """The exit rule for rows: no row failed (warnings and skips pass)."""
    return not any(r.failed for r in rows)
