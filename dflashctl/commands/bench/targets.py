"""What `bench` measures: each TARGET is a URL, a deployment `dflashctl serve` recorded, or a
playbook (a file or a bundled name) whose hosts' deployments are running.

URLs and deployment names go through `dflashctl.server.targets.resolve_target`, so `bench` and
`smoke` read a target the same way; a playbook expands to one target per host, found by the
deployment name `dflashctl serve PLAYBOOK` gives it. Every name is resolved before any request
is sent: an unknown one is a `UsageError` (exit 2). No printing.
"""

from __future__ import annotations

from dataclasses import dataclass

from dflashctl.errors import UsageError
from dflashctl.server.targets import looks_like_url, resolve_target

MAX_CONCURRENCY = 1024


@dataclass
class BenchTarget:
    """One server to measure. `label` names it in the table and the JSON (unique per run)."""

    label: str
    url: str
    kind: str  # "url" | "deployment" | "playbook"
    model: str | None = None
    engine: str | None = None  # local | vllm | sglang when known
    playbook: str | None = None

    def to_json(self) -> dict[str, str | None]:
        return {
            "label": self.label,
            "url": self.url,
            "kind": self.kind,
            "model": self.model,
            "engine": self.engine,
            "playbook": self.playbook,
        }


def _from_playbook(arg: str) -> list[BenchTarget] | None:
    """The running deployments of a playbook's hosts; None when `arg` is not a playbook."""
    from dflashctl.playbook import find_playbook, load_playbook

    path = find_playbook(arg)
    if path is None:
        return None
    book = load_playbook(path)  # a missing or malformed file: PlaybookError (exit 2)
    from dflashctl.playbook import deployment_name
    from dflashctl.server import deployments as state

    out = []
    for entry in book.hosts:
        name = deployment_name(book, entry)
        dep = state.load(name)
        if dep is None:
            raise UsageError(
                f"playbook {book.name}: its deployment {name!r} is not running",
                f"start it first: dflashctl serve {path} --detach",
            )
        t = resolve_target(name)
        out.append(
            BenchTarget(name, t.url, "playbook", t.model, t.engine or None, playbook=str(path))
        )
    return out


def resolve_one(arg: str) -> list[BenchTarget]:
    text = arg.strip()
    if not text:
        raise UsageError("an empty TARGET", "pass a URL, a deployment name or a playbook")
    if looks_like_url(text):
        return [BenchTarget(text, resolve_target(text).url, "url")]
    from dflashctl.server import deployments as state

    if state.NAME_RE.fullmatch(text) and state.load(text) is not None:
        t = resolve_target(text)
        return [BenchTarget(text, t.url, "deployment", t.model, t.engine or None)]
    found = _from_playbook(text)
    if found is not None:
        return found
    names = [d.name for d in state.all_deployments()]
    raise UsageError(
        f"unknown target {text!r}: not a URL, a deployment dflashctl started, nor a playbook",
        ("running deployments: " + ", ".join(names))
        if names
        else "pass http://HOST:PORT, or start a server with dflashctl serve --detach",
    )


def resolve_targets(args: list[str]) -> list[BenchTarget]:
    """TARGET… → targets in the order given; a label seen twice gets `#2`, `#3`."""
    if not args:
        raise UsageError("no TARGET to measure", "e.g. dflashctl bench http://127.0.0.1:8000")
    out: list[BenchTarget] = []
    for arg in args:
        out += resolve_one(arg)
    seen: dict[str, int] = {}
    for t in out:
        n = seen[t.label] = seen.get(t.label, 0) + 1
        if n > 1:
            t.label = f"{t.label}#{n}"
    return out


def parse_concurrency(text: str) -> list[int]:
    """`1,2,4,8` → [1, 2, 4, 8] (order kept, repeats dropped); anything else is a UsageError."""
    levels: list[int] = []
    for part in text.split(","):
        p = part.strip()
        try:
            n = int(p)
        except ValueError:
            raise UsageError(
                f"--concurrency {text!r}: {p!r} is not a whole number",
                "give comma-separated levels, e.g. --concurrency 1,2,4,8",
            ) from None
        if not 1 <= n <= MAX_CONCURRENCY:
            raise UsageError(
                f"--concurrency {text!r}: {n} is outside 1..{MAX_CONCURRENCY}",
                "e.g. --concurrency 1,2,4,8",
            )
        if n not in levels:
            levels.append(n)
    return levels
