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


@dataclass
class RuledOut:
    """A catalogue entry of this engine that does not apply, with the first fact against it."""

    defect: Defect
    by: str  # version | build | runner | condition
    why: str  # e.g. "vllm 0.33.0 has the fix (0.32.1)"

    def to_json(self) -> dict[str, str]:
        return {"id": self.defect.id, "title": self.defect.title, "by": self.by, "why": self.why}


def match_defect(d: Defect, ctx: Context, floor: Version | None) -> DefectMatch | RuledOut | None:
    """The match, or why the entry does not apply; None for another engine's entry."""
    if d.engine != ctx.facts.engine:
        return None
    evidence: list[str] = []
    unchecked: list[str] = []

    def against(o: Outcome, by: str) -> RuledOut | None:
        if o.holds is False:
            return RuledOut(d, by, o.text)
        (evidence if o.holds else unchecked).append(o.text)
        return None

    version, measured = _version_outcome(d, ctx, floor)
    if ruled := against(version, "version"):
        return ruled
    if d.build != "any":
        b = ctx.build
        if b is None:
            build = Outcome(None, "build not known")
        else:
            build = Outcome(
                b == d.build, f"{b} build" if b == d.build else f"build {b}, not {d.build}"
            )
        if ruled := against(build, "build"):
            return ruled
    if d.runner != "any" and (
        ruled := against(
            Outcome(ctx.runner == d.runner, f"runner {ctx.runner}: {ctx.runner_why}"), "runner"
        )
    ):
        return ruled
    for c in d.conditions:
        if ruled := against(PREDICATES[c.name].fn(ctx, c.arg), "condition"):
            return ruled
    certainty = "possible" if unchecked else ("confirmed" if measured else "likely")
    return DefectMatch(d, certainty, evidence, unchecked, _mitigation(d, ctx))


@dataclass
class Assessment:
    """Every catalogue entry of one engine, sorted into those that apply and those ruled out."""

    matches: list[DefectMatch]
    ruled_out: list[RuledOut]


def assess(
    facts: Facts, catalogue: Catalogue | None = None, *, include_possible: bool = False
) -> Assessment:
    """The catalogue entries that apply to `facts`, errors first, and the rest of the engine's
    entries with the fact that rules each out. Conditions that cannot be checked (missing facts)
    keep an entry out of both lists unless `include_possible`."""
    cat = catalogue or load_catalogue()
    ctx = Context(facts)
    info = cat.engines.get(facts.engine)
    floor = info.dflash_since if info else None
    found: list[DefectMatch] = []
    ruled_out: list[RuledOut] = []
    for d in cat.for_engine(facts.engine):
        m = match_defect(d, ctx, floor)
        if isinstance(m, RuledOut):
            ruled_out.append(m)
        elif m is not None and (include_possible or m.certainty != "possible"):
            found.append(m)
    order = {s: i for i, s in enumerate(SEVERITIES)}
    found.sort(key=lambda m: (order[m.defect.severity], CERTAINTIES.index(m.certainty)))
    return Assessment(found, ruled_out)


def match(
    facts: Facts, catalogue: Catalogue | None = None, *, include_possible: bool = False
) -> list[DefectMatch]:
    """The catalogue entries that apply to `facts`, errors first (see `assess`)."""
    return assess(facts, catalogue, include_possible=include_possible).matches


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
