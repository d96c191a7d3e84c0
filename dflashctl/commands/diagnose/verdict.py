"""The verdict of `dflashctl diagnose` (pure): the greedy texts compared prompt by prompt, the
figures of both sides, and `judge()` — healthy, the config, the engine, or the drafter — with
the thresholds it uses."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dflashctl.commands.diagnose.facts import (
    NOTE,
    PROBLEM,
    WARNING,
    Finding,
)
from dflashctl.commands.diagnose.measure import (
    NO_DRAFTS,
    NOT_CONFIGURED,
    SPECULATING,
    Side,
    rounded,
)
from dflashctl.errors import DflashError

VERDICTS = ("healthy", "config", "engine", "drafter")


# "Low" acceptance when neither the registry nor --min-acceptance-length gives a floor: drafts
# save less than half a token per step.
DEFAULT_FLOOR = 1.5


# On the same greedy text a correct engine drafts exactly what the reference drafts: measured
# equal in float32, within ~1 % of the accepted tokens per draft (mean length − 1) in bf16. So
# production is "below" the reference when it keeps less than ENGINE_GAP of the reference's
# accepted tokens per draft and the mean lengths differ by at least MIN_GAP. Production far
# *above* the reference (it keeps less than OTHER_FILES_GAP of production's) means it serves
# other files than the ones given.
ENGINE_GAP = 0.90


OTHER_FILES_GAP = 0.75


MIN_GAP = 0.25


MIN_DRAFTS = 8  # fewer drafts on a side than this: the comparison is noisy (a warning)


@dataclass
class PromptComparison:
    prompt_id: str
    same_text: bool | None  # None: a side has no answer
    char: int | None = None  # first differing character
    token: int | None = None  # first differing token (reference tokenization)
    production_excerpt: str = ""
    reference_excerpt: str = ""
    production_length: float | None = None  # mean acceptance length of this request
    reference_length: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "prompt_id": self.prompt_id,
            "same_text": self.same_text,
            "first_divergence": None
            if self.char is None
            else {"char": self.char, "token": self.token},
            "production_excerpt": self.production_excerpt or None,
            "reference_excerpt": self.reference_excerpt or None,
            "production_mean_acceptance_length": rounded(self.production_length, 4),
            "reference_mean_acceptance_length": rounded(self.reference_length, 4),
        }


def first_divergence(a: str, b: str) -> int | None:
    """Index of the first differing character; None when equal."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def diverging_token(text: str, token_ids: list[int], decode: Callable[[list[int]], str]) -> int:
    """The first reference token whose text no longer matches `text` (the other side's)."""
    lo, hi = 0, len(token_ids)  # invariant: decode(ids[:lo]) is a prefix of text
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if text.startswith(decode(token_ids[:mid])):
            lo = mid
        else:
            hi = mid - 1
    return lo


def compare(
    production: Side, reference: Side, decode: Callable[[list[int]], str] | None
) -> list[PromptComparison]:
    out = []
    refs = {a.prompt_id: a for a in reference.answers}
    for p in production.answers:
        r = refs.get(p.prompt_id)
        pc = PromptComparison(p.prompt_id, None)
        if p.window is not None:
            pc.production_length = p.window.mean_acceptance_length
        if r is not None and r.window is not None:
            pc.reference_length = r.window.mean_acceptance_length
        if r is None or not (p.ok and r.ok):
            out.append(pc)
            continue
        i = first_divergence(p.text, r.text)
        pc.same_text = i is None
        if i is not None:
            pc.char = i
            lo = max(0, i - 20)
            pc.production_excerpt = p.text[lo : i + 30]
            pc.reference_excerpt = r.text[lo : i + 30]
            if r.token_ids is not None and decode is not None:
                pc.token = diverging_token(p.text, r.token_ids, decode)
        out.append(pc)
    return out


@dataclass(frozen=True)
class Floor:
    """Below this mean acceptance length, acceptance is "low"."""

    value: float
    source: str


@dataclass(frozen=True)
class Figures:
    """The numbers the verdict rests on: pooled over the compared prompts."""

    production: float | None  # mean acceptance length
    reference: float | None
    production_per_position: tuple[float, ...] = ()
    reference_per_position: tuple[float, ...] = ()
    production_drafts: int | None = None
    reference_drafts: int | None = None
    prompts: int = 0  # prompts answered on both sides
    same_text: int = 0
    basis: str = "all prompts"
    production_state: str = SPECULATING


def far_below(a: float, b: float, share: float = ENGINE_GAP) -> bool:
    """`a` keeps fewer than `share` of `b`'s accepted tokens per draft, by at least MIN_GAP."""
    return (b - a) >= MIN_GAP and (a - 1.0) < share * (b - 1.0)


def _positions(fig: Figures) -> list[str]:
    pp, rp = fig.production_per_position, fig.reference_per_position
    n = max(len(pp), len(rp))
    rows = []
    for i in range(n):
        a = f"{pp[i]:.3f}" if i < len(pp) else "-"
        b = f"{rp[i]:.3f}" if i < len(rp) else "-"
        rows.append(f"position {i + 1}: production {a}, reference {b}")
    return rows


def judge(fig: Figures, floor: Floor, config: list[Finding]) -> tuple[str, list[Finding]]:
    """(verdict, findings it adds) from the figures and the config findings already made."""
    found: list[Finding] = []
    problems = [f for f in config if f.severity == PROBLEM]
    if fig.production_state in (NOT_CONFIGURED, NO_DRAFTS):
        what = (
            "shows no speculative decoding at all"
            if fig.production_state == NOT_CONFIGURED
            else "drafted nothing for these requests"
        )
        found.append(
            Finding(
                "config",
                f"the production server {what}: speculation is not configured or not running",
                [f"state: {fig.production_state}"],
                fix="launch it with the drafter (vLLM --speculative-config, SGLang "
                "--speculative-algorithm DFLASH) and check its log for drafter errors",
            )
        )
        return "config", found
    if problems:
        return "config", found
    p, r = fig.production, fig.reference
    if p is None or r is None:
        side = "production" if p is None else "the reference engine"
        raise DflashError(
            f"no acceptance was measured on {side}, and no config problem explains it",
            "pass the production server's --log, or check that its /metrics is reachable",
        )
    figures = [
        f"mean acceptance length: production {p:.2f}, reference {r:.2f} ({fig.basis}: "
        f"{fig.same_text} of {fig.prompts} prompts with the same greedy text)",
        f"drafts: production {fig.production_drafts}, reference {fig.reference_drafts}",
        *_positions(fig),
    ]
    few = [
        name
        for name, n in (("production", fig.production_drafts), ("reference", fig.reference_drafts))
        if n is not None and n < MIN_DRAFTS
    ]
    if few:
        found.append(
            Finding(
                "measurement",
                f"few drafts on {' and '.join(few)} (< {MIN_DRAFTS}): the figures are noisy",
                [],
                WARNING,
                "send more prompts (--prompts FILE) or more tokens (--max-tokens)",
            )
        )
    if far_below(p, r):
        if fig.same_text == fig.prompts and fig.prompts:
            why = (
                "on the same greedy text: both verify drafts against the same target output, so "
                "production's DFlash computation differs from the reference's"
            )
        elif fig.same_text:
            why = (
                f"on the {fig.same_text} prompts with the same greedy text: production's DFlash "
                "computation differs from the reference's"
            )
        else:
            why = (
                "but the greedy texts differ as well, so production's target side differs too "
                "(dtype, quantization, another checkpoint) and may explain part of the gap"
            )
        found.append(
            Finding(
                "engine",
                f"production accepts fewer draft tokens than the reference engine "
                f"({p:.2f} vs {r:.2f}: {(p - 1) / (r - 1):.0%} of its accepted tokens per draft) "
                f"{why}",
                figures,
            )
        )
        return "engine", found
    if far_below(r, p, OTHER_FILES_GAP):
        found.append(
            Finding(
                "config",
                f"production accepts far more than the reference engine running the given "
                f"directories ({p:.2f} vs {r:.2f}): production does not serve these files "
                "(another copy or revision of the drafter or target)",
                figures,
                fix="diagnose the directories the server really serves (see its launch command)",
            )
        )
        return "config", found
    if max(p, r) < floor.value:
        found.append(
            Finding(
                "drafter",
                f"both engines agree ({p:.2f} vs {r:.2f}) and acceptance is low (below "
                f"{floor.value:.2f}, {floor.source}): the drafter itself is weak here or does not "
                "match its target",
                [
                    *figures,
                    "likely: an undertrained or damaged drafter (weights not the pinned revision)",
                    "likely: a target checkpoint or revision other than the one it was trained on",
                    "likely: prompts outside its training domain, or thinking mode on a "
                    "non-thinking drafter",
                ],
                fix="check the weights' hashes (dflashctl fetch NAME), the target revision, and "
                "compare with prompts from the drafter's own domain",
            )
        )
        return "drafter", found
    found.append(
        Finding(
            "healthy",
            f"production matches the reference engine ({p:.2f} vs {r:.2f}) at or above "
            f"{floor.value:.2f} ({floor.source})",
            figures,
            NOTE,
        )
    )
    return "healthy", found
