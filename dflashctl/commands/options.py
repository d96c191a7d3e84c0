"""Options shared by several commands, and the exit rule: 0 healthy, 1 a problem was found
(2, could not run, comes from `cli.main` for any `DflashError`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

# ---- completion of values (called only by the shell's completion, never by --help) ----------

ENGINES = ("local", "vllm", "sglang", "llama.cpp")


def complete_engine(incomplete: str) -> list[str]:
    return [e for e in ENGINES if e.startswith(incomplete)]


def complete_drafter(incomplete: str) -> list[str]:
    """Registry names (and repos) of the pinned drafters."""
    from dflashctl.drafter.registry import all_entries

    try:
        entries = all_entries()
    except Exception:  # a broken registry must not break the shell
        return []
    names = sorted({e.name for e in entries} | {e.repo for e in entries if e.repo})
    return [n for n in names if n.startswith(incomplete)]


def complete_deployment(incomplete: str) -> list[str]:
    """Names of the deployments dflashctl serve recorded."""
    from dflashctl.server.deployments import all_deployments

    try:
        return [d.name for d in all_deployments() if d.name.startswith(incomplete)]
    except Exception:
        return []


def _paths(incomplete: str, suffixes: tuple[str, ...] | None = None) -> list[str]:
    """Files (with one of `suffixes`, if given) and directories under the path being typed."""
    from pathlib import Path

    head = incomplete.rpartition("/")[0] if "/" in incomplete else ""
    base = Path(head or ("/" if incomplete.startswith("/") else "."))
    out = []
    if base.is_dir():
        for p in sorted(base.iterdir()):
            text = f"{head}/{p.name}" if "/" in incomplete else p.name
            if not text.startswith(incomplete):
                continue
            if p.is_dir():
                out.append(text + "/")
            elif suffixes is None or p.suffix in suffixes:
                out.append(text)
    return out


def complete_playbook(incomplete: str) -> list[str]:
    """Bundled playbook names, and .yaml files under the directory being typed."""
    from dflashctl.drafter.registry import playbooks_dir

    out = sorted(p.stem for p in playbooks_dir().glob("*.y*ml") if p.stem.startswith(incomplete))
    return out + _paths(incomplete, (".yaml", ".yml"))


def complete_source(incomplete: str) -> list[str]:
    """What metrics reads: a deployment name, or a log file."""
    return complete_deployment(incomplete) + _paths(incomplete)


def complete_server(incomplete: str) -> list[str]:
    """A server: deployment names (a URL is typed by hand)."""
    return complete_deployment(incomplete)


# Shared option aliases.
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output on stdout.")]
HostOpt = Annotated[
    str | None,
    typer.Option(
        "--host",
        help="Remote host, reached over SSH: \\[user@]host[:port] or an ~/.ssh/config alias "
        "(not a listen address: that is serve --bind).",
    ),
]
SSHConfigOpt = Annotated[
    str | None,
    typer.Option(
        "--ssh-config",
        help="ssh_config file for --host (default ~/.ssh/config; env DFLASHCTL_SSH_CONFIG).",
    ),
]
AcceptNewHostKeyOpt = Annotated[
    bool,
    typer.Option(
        "--accept-new-host-key",
        help="With --host: add an unknown host key to known_hosts (never a changed one; the "
        "environment can say so too, below).",
    ),
]
DrafterNameOpt = Annotated[
    str | None,
    typer.Option(
        "--drafter",
        help="Registry name of the drafter (see playbooks/drafters/).",
        autocompletion=complete_drafter,
    ),
]
EngineOpt = Annotated[
    str,
    typer.Option(
        "--engine",
        help="Engine whose reading to check: vllm, sglang or local.",
        autocompletion=complete_engine,
    ),
]

FixturesOpt = Annotated[
    str | None,
    typer.Option("--fixtures", help="Comma-separated: code, prose, translation (default all)."),
]
PromptsOpt = Annotated[
    Path | None,
    typer.Option(
        "--prompts",
        help="Your prompts instead of the fixtures: JSON list, JSON lines or one per line "
        "(as diagnose takes them).",
    ),
]


def exit_for(ok: bool) -> None:
    """Exit 1 when the report found a problem."""
    if not ok:
        raise typer.Exit(1)


def complete_server_or_playbook(incomplete: str) -> list[str]:
    return complete_deployment(incomplete) + complete_playbook(incomplete)
