"""Matching the catalogue to what is known of a server, a drafter and a log (`Facts`): each defect's
versions, build, runner and predicates give `confirmed`, `likely` or `possible`; `likely_causes`
turns matches into an alarm's causes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from packaging.version import Version

from dflashctl.defects.catalogue import (
    ALARM_EFFECTS,
    CERTAINTIES,
    SEVERITIES,
    Catalogue,
    Defect,
    load_catalogue,
)
from dflashctl.defects.predicates import PREDICATES, Context, Facts, Outcome, normalize_dist, public


@dataclass
class DefectMatch:
    """One catalogue entry that applies, with the evidence for each condition that held and
    what could not be checked."""

    defect: Defect
    certainty: str  # confirmed | likely | possible
    evidence: list[str]
    unchecked: list[str] = field(default_factory=list)
    mitigated: str | None = None

    def to_json(self) -> dict[str, Any]:
        d = self.defect
        return {
            "id": d.id,
            "title": d.title,
            "severity": d.severity,
            "effect": d.effect,
            "certainty": self.certainty,
            "evidence": self.evidence,
            "unchecked": self.unchecked,
            "mitigated": self.mitigated,
            "symptom": d.symptom,
            "confirm": d.confirm,
            "fix": d.fix,
            "sources": list(d.sources),
        }


def _version_outcome(d: Defect, ctx: Context, floor: Version | None) -> tuple[Outcome, bool]:
    """(in range?, measured affected?) for the engine version."""
    engine = ctx.facts.engine
    if ctx.version is None:
        return Outcome(None, f"{engine} version not known"), False
    vr = d.versions
    v, shown = public(ctx.version), vr.show(ctx.version)
    lo = vr.introduced or floor
    if lo is not None and v < lo:
        why = "introduced" if vr.introduced else "DFlash support starts"
        return Outcome(False, f"{engine} {shown} is before {vr.show(lo)} ({why})"), False
    if vr.fixed is not None and v >= vr.fixed:
        return Outcome(False, f"{engine} {shown} has the fix ({vr.show(vr.fixed)})"), False
    if vr.fixed is None:
        for good in vr.confirmed_unaffected:
            if v >= good:
                return Outcome(
                    False, f"{engine} {shown} is at or after {vr.show(good)}, not affected"
                ), False
    if v in vr.confirmed_affected:
        return Outcome(True, f"{engine} {shown}: a release measured affected"), True
    return Outcome(
        True, f"{engine} {shown} is inside the affected range ({vr.describe(floor)})"
    ), False


def _mitigation(d: Defect, ctx: Context) -> str | None:
    m = d.mitigation
    if m is None:
        return None
    if m.distribution and (ctx.dists is None or normalize_dist(m.distribution) not in ctx.dists):
        return None
    if any(ctx.facts.env.get(k) != v for k, v in m.env):
        return None
    parts = [f"{m.distribution} installed"] if m.distribution else []
    parts += [f"{k}={v}" for k, v in m.env]
    return ", ".join(parts)


def match_defect(d: Defect, ctx: Context, floor: Version | None) -> DefectMatch | None:
    if d.engine != ctx.facts.engine:
        return None
    evidence: list[str] = []
    unchecked: list[str] = []

    def take(o: Outcome) -> bool:
        if o.holds is False:
            return False
        (evidence if o.holds else unchecked).append(o.text)
        return True

    version, measured = _version_outcome(d, ctx, floor)
    if not take(version):
        return None
    if d.build != "any":
        b = ctx.build
        build = Outcome(
            None if b is None else b == d.build,
            f"{d.build} build" if b == d.build else f"build {b or 'not known'}",
        )
        if not take(build):
            return None
    if d.runner != "any" and not take(
        Outcome(ctx.runner == d.runner, f"runner {ctx.runner}: {ctx.runner_why}")
    ):
        return None
    for c in d.conditions:
        if not take(PREDICATES[c.name].fn(ctx, c.arg)):
            return None
    certainty = "possible" if unchecked else ("confirmed" if measured else "likely")
    return DefectMatch(d, certainty, evidence, unchecked, _mitigation(d, ctx))


def match(
    facts: Facts, catalogue: Catalogue | None = None, *, include_possible: bool = False
) -> list[DefectMatch]:
    """The catalogue entries that apply to `facts`, errors first. Conditions that cannot be
    checked (missing facts) keep an entry out unless `include_possible`."""
    cat = catalogue or load_catalogue()
    ctx = Context(facts)
    info = cat.engines.get(facts.engine)
    floor = info.dflash_since if info else None
    found = [m for d in cat.for_engine(facts.engine) if (m := match_defect(d, ctx, floor))]
    if not include_possible:
        found = [m for m in found if m.certainty != "possible"]
    order = {s: i for i, s in enumerate(SEVERITIES)}
    found.sort(key=lambda m: (order[m.defect.severity], CERTAINTIES.index(m.certainty)))
    return found


def likely_causes(
    facts: Facts, alarm_kind: str, catalogue: Catalogue | None = None
) -> list[tuple[str, str]]:
    """(cause, how to confirm) pairs for a `dflashctl metrics` alarm: the catalogue entries whose
    effect can explain `alarm_kind` and that apply to `facts` (possible ones included, since a
    log rarely tells the drafter). Ready for `metrics.window.Cause(cause, check)`."""
    effects = ALARM_EFFECTS.get(alarm_kind, ())
    out = []
    for m in match(facts, catalogue, include_possible=True):
        d = m.defect
        if d.effect not in effects or m.mitigated:
            continue
        hedge = (
            "" if m.certainty != "possible" else " (not checked: " + "; ".join(m.unchecked) + ")"
        )
        out.append((f"known engine defect {d.id}: {d.title}{hedge}. Fix: {d.fix}", d.confirm))
    return out
