"""What `dflashctl fetch` fetches: a registry name or `org/repo` at a revision (`Target`), the
registry's sha256 pins, and the error when a file's bytes are not the pinned ones."""

from __future__ import annotations

from dataclasses import dataclass

from dflashctl.drafter.registry import REPO_RE, DrafterEntry, FileSpec
from dflashctl.errors import (
    FetchError,
    RegistryError,
    UsageError,
)
from dflashctl.hub import (
    HubEnv,
    short_sha,
)

DEFAULT_PATTERNS = ("config.json", "*.safetensors", "model.safetensors.index.json")


STAGING_NAME = ".dflashctl-download"


@dataclass(frozen=True)
class Target:
    repo: str
    entry: DrafterEntry | None
    requested: str  # the revision as asked for (a commit, a branch or tag, or "main")
    implied_main: bool  # nothing pinned a revision: main by default
    # trust on first use: a registry entry without a pinned revision. The first fetch takes
    # main's commit and records it (and every file's sha256) in the lock; later fetches into
    # that directory stay on the lock's commit and verify against it.
    tofu: bool = False

    @property
    def pinned_revision(self) -> str | None:
        return self.entry.revision if self.entry is not None else None


def resolve_target(drafter: str, revision: str | None, *, allow_unpinned: bool) -> Target:
    """Registry entry (if any), repo and the revision to ask for; UsageError when unpinned."""
    from dflashctl.drafter import registry

    name = drafter.strip()
    if not name:
        raise UsageError("DRAFTER is empty", "pass a registry name or org/repo")
    entry = registry.find_entry(name)
    if entry is None:
        if not REPO_RE.fullmatch(name):
            try:
                registry.get_entry(name)
            except RegistryError as e:  # unknown: its hint names close matches
                hint = e.hint
                raise UsageError(
                    f"unknown drafter '{name}': not a registry name and not org/repo",
                    (hint + "; " if hint else "") + "or pass org/repo with --revision",
                ) from None
        repo = name
    else:
        repo = entry.repo
    if revision is not None and not revision.strip():
        raise UsageError("--revision is empty", "pass a 40-hex commit id, a tag or a branch")
    requested = revision.strip() if revision else (entry.revision if entry else None)
    implied = requested is None
    requested = requested or "main"
    # One rule for revisions: a commit is taken as it is; a branch or tag, named by --revision
    # (main too) or implied by a registry entry that pins no commit, is resolved to its commit,
    # which the lock records (implied: trust on first use, later fetches stay on it). Only a
    # repo outside the registry with no --revision names nothing to take.
    if implied and entry is not None and not allow_unpinned:
        return Target(repo, entry, requested, implied, tofu=True)
    if implied and entry is None and not allow_unpinned:
        raise UsageError(
            f"refusing to fetch an unpinned revision: {repo} is not in the registry and no "
            "--revision was given",
            "pass --revision <40-hex commit, tag or branch> (a branch is resolved to its commit "
            "and recorded in the lock), or --allow-unpinned to take main's current commit",
        )
    return Target(repo, entry, requested, implied)


def pins_of(entry: DrafterEntry | None) -> dict[str, FileSpec]:
    return {f.path: f for f in entry.files} if entry is not None else {}


@dataclass
class Mismatch:
    name: str
    found: str
    expected: str
    against: str  # "pin" | "hub" | "size"


def mismatch_error(
    bad: list[Mismatch], target: Target, commit: str, env: HubEnv, at_pinned: bool
) -> FetchError:
    first = bad[0]
    more = f" (and {len(bad) - 1} more: {', '.join(b.name for b in bad[1:])})" if bad[1:] else ""
    if first.against == "pin":
        message = (
            f"{first.name}: sha256 {first.found} is not the pinned {first.expected}{more}; "
            "the file was not kept"
        )
        if at_pinned:
            hint = (
                f"{env.endpoint} served other bytes for {target.repo}@{short_sha(commit)} than the "
                "registry pins: a corrupted mirror or a tampered download; check HF_ENDPOINT"
            )
        else:
            hint = (
                f"the repo re-uploaded {first.name} under the same name; fetch the pinned "
                f"revision {target.pinned_revision or '(none)'}, or pass --allow-unpinned to "
                "take these bytes"
            )
        return FetchError(message, hint)
    return FetchError(
        f"{first.name}: downloaded bytes do not match the hash the Hub publishes for it "
        f"({short_sha(first.found)} vs {short_sha(first.expected)}){more}; the file was not kept",
        "the download was corrupted on the way: run fetch again",
    )
