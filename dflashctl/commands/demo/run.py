"""`dflashctl demo`: the pipeline on the embedded demo pair, then the field story told right.

1. `run` on the built-in demo playbook (bundled engine, demo pair, 127.0.0.1).
2. Unless quick: the field story (shared SPEC.md) on the demo pair — a scratch copy of the
   drafter gets the field's three stale values (stale.py), is served, and the smoke test shows
   the collapse alarm with its likely causes; verify-config names the stale fields; `--fix`
   repairs them; served again, acceptance is healthy. Every figure is measured.
Returns data; the CLI renders `StoryEvent`s as they come and the final `DemoReport`.
"""

from __future__ import annotations

import socket
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dflashctl.commands.run.run import OnStep, RunReport, run_playbook
from dflashctl.errors import DflashError, InputError

DEMO_REGISTRY = "demo"


def demo_assets() -> Path:
    return Path(__file__).resolve().parents[2] / "assets" / "demo"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class StoryStep:
    name: str
    ok: bool  # the step showed what the story needs
    summary: str
    seconds: float = 0.0
    details: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.name,
            "ok": self.ok,
            "summary": self.summary,
            "seconds": round(self.seconds, 2),
            "details": self.details,
            "figures": self.figures,
        }


OnStory = Callable[[StoryStep], None]


@dataclass
class DemoReport:
    run: RunReport
    story: list[StoryStep] = field(default_factory=list)
    quick: bool = False
    next_commands: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.run.ok and all(s.ok for s in self.story)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "run": self.run.to_json(),
            "field_story": None if self.quick else [s.to_json() for s in self.story],
            "next": self.next_commands,
        }


NEXT_COMMANDS = [
    "dflashctl verify-config /path/to/drafter --drafter NAME     # before every launch",
    "dflashctl fetch NAME --dir /models/drafter --host gpu1      # a pinned, verified copy there",
    "dflashctl serve vllm-2xa100-tp2 --dry-run                   # a bundled playbook's command",
    "dflashctl smoke http://HOST:8000 --log /path/vllm.log       # a real request, a real verdict",
    "dflashctl metrics /path/vllm.log --follow --exit-on-alarm   # watch acceptance live",
]


def _playbook() -> Path:
    from dflashctl.playbook import find_playbook

    path = find_playbook(DEMO_REGISTRY)
    if path is None:
        raise InputError("the built-in demo playbook is missing", "reinstall dflashctl")
    return path


def run_demo(
    *,
    quick: bool = False,
    keep: bool = False,
    on_step: OnStep | None = None,
    on_story: OnStory | None = None,
    on_setup: Callable[[str], None] | None = None,
) -> DemoReport:
    """`on_setup` hears the demo target's one-time set-up (download, conversion)."""
    from dflashctl.demo_target import ensure

    assets = demo_assets()
    if not (assets / "drafter" / "config.json").is_file():
        raise InputError(
            f"the embedded demo drafter is missing ({assets / 'drafter'})",
            "it is trained by training/demo_pair.py and ships with dflashctl",
        )
    target = ensure(progress=on_setup)
    overrides = {"port": free_port(), "name": "demo"}
    run = run_playbook(_playbook(), teardown=not keep, overrides=overrides, on_step=on_step)
    report = DemoReport(run=run, quick=quick, next_commands=NEXT_COMMANDS)
    if quick or not run.ok:
        return report
    baseline = run.hosts[0].mean_acceptance_length if run.hosts else None
    with tempfile.TemporaryDirectory(prefix="dflashctl-demo-") as tmp:
        _field_story(Path(tmp), target, assets / "drafter", report, on_story, baseline)
    return report


def _timed(report: DemoReport, on_story: OnStory | None, fn: Callable[[], StoryStep]) -> bool:
    t0 = time.monotonic()
    step = fn()
    step.seconds = time.monotonic() - t0
    report.story.append(step)
    if on_story:
        on_story(step)
    return step.ok


# The stale run is judged against the healthy run on the same prompts: an alarm below this
# fraction of the healthy mean acceptance length (a user compares with a known-good run the same
# way: dflashctl smoke URL --min-acceptance-length X).
BASELINE_FRACTION = 0.8


def _field_story(
    tmp: Path,
    target: Path,
    healthy: Path,
    report: DemoReport,
    on_story: OnStory | None,
    baseline: float | None,
) -> None:
    from dflashctl.drafter.stale import ALL, REWRITES, write_stale_copy

    drafter = tmp / "drafter"

    def stale_copy() -> StoryStep:
        changed = write_stale_copy(healthy, drafter, ALL)
        return StoryStep(
            "stale config",
            True,
            f"a scratch copy of the demo drafter with the field's stale values ({drafter})",
            details=[REWRITES[r] for r in ALL]
            + [f"{name}: {old} -> {new}" for name, old, new in changed],
        )

    if not _timed(report, on_story, stale_copy):
        return
    floor = round(BASELINE_FRACTION * baseline, 2) if baseline else None
    stale: dict[str, Any] = {}

    def serve_stale() -> StoryStep:
        stale.update(_serve_and_smoke(target, drafter, "demo-stale", floor))
        tau = stale.get("mean_acceptance_length")
        alarms = stale.get("alarms", [])
        details = [f"alarm {a['kind']}: {a['message']}" for a in alarms]
        for a in alarms[:1]:  # without the check commands: they name the server, stopped now
            causes = [c["cause"] for c in a["causes"]]
            details += [f"likely cause: {c}" for c in causes[:2]]
            if len(causes) > 2:
                details.append(f"and {len(causes) - 2} less likely (dflashctl metrics lists them)")
        if stale.get("error"):
            details.append(stale["error"])
        if tau is None:
            return StoryStep(
                "serve the stale drafter", False, "no acceptance measured", details=details
            )
        kinds = ", ".join(dict.fromkeys(a["kind"] for a in alarms)) or "no alarm"
        was = f", down from {baseline:.2f} on the same prompts" if baseline else ""
        return StoryStep(
            "serve the stale drafter",
            bool(alarms),
            f"answers {stale.get('excerpt', '')!r}, but mean acceptance length {tau:.2f}{was}: "
            f"{kinds}",
            details=details,
            figures={"mean_acceptance_length": tau, "decode_tokens_per_s": stale.get("tps"),
                     "alarm_below": floor},
        )  # fmt: skip

    _timed(report, on_story, serve_stale)

    def verify() -> StoryStep:
        from dflashctl.drafter.verify import run_verify

        rep = run_verify(drafter, drafter=DEMO_REGISTRY, engine="local")
        failed = [c for c in rep.checks if c.failed]
        return StoryStep(
            "verify-config",
            bool(failed),
            f"{len(failed)} stale field(s) named: "
            + ", ".join(dict.fromkeys(c.name for c in failed)),
            details=[f"{c.name}: found {c.found}, expected {c.expected}" for c in failed],
        )

    if not _timed(report, on_story, verify):
        return

    def fix() -> StoryStep:
        from dflashctl.drafter.verify import run_verify

        rep = run_verify(drafter, drafter=DEMO_REGISTRY, engine="local", fix=True)
        changes = rep.fix.to_json().get("changes", []) if rep.fix is not None else []
        return StoryStep(
            "verify-config --fix",
            rep.ok,
            f"{len(changes)} field(s) rewritten atomically, with a backup; now "
            + ("passes" if rep.ok else "still fails"),
            details=[f"{c.get('field')}: {c.get('before')} -> {c.get('after')}" for c in changes],
        )

    if not _timed(report, on_story, fix):
        return
    fixed: dict[str, Any] = {}

    def serve_fixed() -> StoryStep:
        fixed.update(_serve_and_smoke(target, drafter, "demo-fixed", floor))
        tau = fixed.get("mean_acceptance_length")
        before = stale.get("mean_acceptance_length")
        healthy = fixed.get("ok", False)
        summary = (
            f"mean acceptance length {tau:.2f} (stale: {before:.2f})"
            if tau is not None and before is not None
            else fixed.get("error", "no acceptance measured")
        )
        return StoryStep(
            "serve the fixed drafter",
            healthy,
            summary,
            details=[f"alarm {a['kind']}: {a['message']}" for a in fixed.get("alarms", [])],
            figures={"mean_acceptance_length": tau, "decode_tokens_per_s": fixed.get("tps")},
        )

    _timed(report, on_story, serve_fixed)


def _serve_and_smoke(
    target: Path, drafter: Path, name: str, min_acceptance_length: float | None
) -> dict[str, Any]:
    """Launch the bundled engine on (demo target, drafter) without the pre-launch check — the
    field team did not have one — smoke it, stop it. Returns the figures."""
    from dflashctl.commands.smoke.run import SmokeOptions, run_smoke
    from dflashctl.hosts import open_host
    from dflashctl.server import deployments as state
    from dflashctl.server.control import stop_deployment
    from dflashctl.server.launch import launch
    from dflashctl.server.plan import ServeOptions, plan

    # a named drafter gets the full step, as the demo playbook's healthy run does (every
    # proposal verified over the whole vocabulary), so the acceptance lengths compare
    opts = ServeOptions(
        engine="local",
        model=str(target),
        drafter=str(drafter),
        port=free_port(),
        bind="127.0.0.1",
        name=name,
        verify=False,
        force=True,
        extra_args=["--log-interval", "2"],
    )
    out: dict[str, Any] = {}
    with open_host(None) as host:
        res = launch(plan(opts, host), host)
        if not res.ok:
            return {"error": f"the server did not start: {res.reason}"}
        try:
            smoke = SmokeOptions(
                target=name,
                max_tokens=128,
                drafter=DEMO_REGISTRY,
                min_acceptance_length=min_acceptance_length,
            )
            rep = run_smoke(smoke)
            w = rep.spec.window if rep.spec else None
            out = {
                "ok": rep.ok,
                "mean_acceptance_length": w.mean_acceptance_length if w else None,
                "tps": rep.decode_tokens_per_s,
                "excerpt": (rep.completions[0].content if rep.completions else "")[:60],
                "alarms": [
                    {
                        "kind": f.kind,
                        "message": f.message,
                        "causes": [c.to_json() for c in f.likely_causes],
                    }
                    for f in rep.findings
                    if f.severity == "alarm"
                ],
            }
        except DflashError as e:
            out = {"error": e.message}
        finally:
            dep = state.load(name)
            if dep is not None:
                stop_deployment(dep)
    return out
