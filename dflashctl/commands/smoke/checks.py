"""The smoke test's checks on one answer: content, finish reason, token count, coherence; and the
speed checks across answers. Pure functions returning `Row`s (dflashctl/report.py); no I/O, no
printing.

Coherence looks for what a broken deployment produces at temperature 0: a token or phrase
repeated to the end, U+FFFD replacement characters (invalid UTF-8: a vocabulary or tokenizer
mismatch), control bytes, and a tiny alphabet. It cannot judge whether an answer is *right*.
"""

from __future__ import annotations

import statistics

from dflashctl.report import FAIL, OK, SKIP, WARNING, Row
from dflashctl.server.client import Completion

MAX_PERIOD = 200  # longest repeated unit looked for, in characters
TAIL = 6000  # only the end of a long answer is examined for repetition
MIN_REPEATS = 4
MIN_REPEAT_CHARS = 32
MIN_REPEAT_FRACTION = 0.2
TINY_ALPHABET = 4  # at most this many distinct non-space characters ...
TINY_MIN_CHARS = 32  # ... in an answer at least this long
MAX_CHARS_PER_TOKEN = 40.0  # no tokenizer has tokens this long on average
MIN_CHARS_PER_TOKEN = 0.2  # below: most tokens decode to nothing
_ALLOWED_CONTROL = {"\t", "\n", "\r"}


# smoke's documented JSON keys -> the Row attribute each shows
JSON_KEYS = {
    "name": "name",
    "status": "status",
    "message": "found",
    "prompt": "prompt",
    "hint": "hint",
}


# ---- one answer ---------------------------------------------------------------------------------


def http_check(c: Completion) -> Row:
    if c.error:
        return Row("http", FAIL, c.error, prompt=c.prompt_id, hint=c.hint)
    extra = f"; {'; '.join(c.notes)}" if c.notes else ""
    return Row(
        "http",
        WARNING if c.notes else OK,
        f"200, a complete SSE stream ({c.events} events){extra}",
        prompt=c.prompt_id,
    )


def content_check(c: Completion) -> Row:
    if c.content:
        also = ""
        if c.reasoning:
            also = f" (and {len(c.reasoning)} in `{c.reasoning_field}`)"
        return Row(
            "content", OK, f"{len(c.content)} characters in `content`{also}", prompt=c.prompt_id
        )
    if c.reasoning:
        where = f"`{c.reasoning_field}`"
        if c.finish_reason == "length":
            return Row(
                "content",
                WARNING,
                f"`content` is empty: the model was still reasoning ({len(c.reasoning)} "
                f"characters in {where}) when max_tokens cut it; judged the reasoning text",
                prompt=c.prompt_id,
                hint="raise --max-tokens to see the answer itself",
            )
        return Row(
            "content",
            OK,
            f"`content` is empty; the answer is in {where} ({len(c.reasoning)} characters): a "
            "reasoning model, checked that field",
            prompt=c.prompt_id,
        )
    return Row(
        "content",
        FAIL,
        "empty answer: no text in `content`, `reasoning` or `reasoning_content`"
        + (f" ({c.completion_tokens} tokens reported)" if c.completion_tokens else ""),
        prompt=c.prompt_id,
        hint="the model stopped at once (an end-of-sequence token first: a wrong chat template?) "
        "or produced only special tokens",
    )


def finish_check(c: Completion, max_tokens: int) -> Row:
    r = c.finish_reason
    if r == "stop":
        return Row("finish_reason", OK, "stop", prompt=c.prompt_id)
    if r == "length":
        if c.completion_tokens == max_tokens:
            return Row(
                "finish_reason",
                OK,
                f"length: the answer hit the --max-tokens cap ({max_tokens}); that is expected "
                "for a long answer",
                prompt=c.prompt_id,
            )
        got = c.completion_tokens if c.completion_tokens is not None else "an unknown number of"
        return Row(
            "finish_reason",
            WARNING,
            f"length after {got} tokens, not the --max-tokens cap ({max_tokens}): the context "
            "limit (max_model_len) cut it",
            prompt=c.prompt_id,
            hint="the prompt plus max_tokens exceed the server's context; lower --max-tokens",
        )
    if r is None:
        return Row("finish_reason", FAIL, "no finish_reason in the stream", prompt=c.prompt_id)
    return Row(
        "finish_reason",
        FAIL,
        f"{r!r} (expected stop, or length at the cap)",
        prompt=c.prompt_id,
        hint="abort/error: the engine gave up on the request; read its log",
    )


def tokens_check(c: Completion, max_tokens: int) -> Row:
    n, text = c.completion_tokens, c.content + c.reasoning
    if n is None:
        return Row(
            "completion_tokens",
            WARNING,
            f"the stream carried no usage (stream_options.include_usage ignored); "
            f"{c.text_events} text events",
            prompt=c.prompt_id,
            hint="decode speed cannot be measured without the token count",
        )
    if n > max_tokens:
        return Row(
            "completion_tokens",
            FAIL,
            f"{n} tokens reported, more than max_tokens {max_tokens}",
            prompt=c.prompt_id,
        )
    if n == 0:
        status = FAIL if text else WARNING
        return Row(
            "completion_tokens",
            status,
            f"0 tokens reported for {len(text)} characters",
            prompt=c.prompt_id,
        )
    if not text:
        return Row(
            "completion_tokens",
            FAIL,
            f"{n} tokens reported but no text arrived",
            prompt=c.prompt_id,
            hint="the tokens decode to nothing: special tokens only, or a tokenizer mismatch",
        )
    if c.text_events > n:
        return Row(
            "completion_tokens",
            FAIL,
            f"{n} tokens reported but the text came in {c.text_events} pieces (each piece needs "
            "at least one token)",
            prompt=c.prompt_id,
            hint="usage is miscounted by the server (or a proxy rewrote the stream)",
        )
    ratio = len(text) / n
    if ratio > MAX_CHARS_PER_TOKEN:
        return Row(
            "completion_tokens",
            FAIL,
            f"{n} tokens for {len(text)} characters ({ratio:.1f} characters a token): too few "
            "tokens for the text",
            prompt=c.prompt_id,
            hint="usage is miscounted by the server",
        )
    if ratio < MIN_CHARS_PER_TOKEN:
        return Row(
            "completion_tokens",
            WARNING,
            f"{n} tokens for only {len(text)} characters: most tokens decode to nothing",
            prompt=c.prompt_id,
            hint="special or partial tokens in the output: a tokenizer or vocabulary mismatch?",
        )
    return Row(
        "completion_tokens",
        OK,
        f"{n} tokens for {len(text)} characters ({ratio:.1f} a token)",
        prompt=c.prompt_id,
    )


def repeated_tail(text: str) -> tuple[str, int] | None:
    """(unit, characters covered) when the text ends in one unit repeated over and over."""
    s = text[-TAIL:]
    n = len(s)
    best: tuple[int, int] | None = None
    for p in range(1, min(MAX_PERIOD, n // MIN_REPEATS) + 1):
        i = n - p - 1
        while i >= 0 and s[i] == s[i + p]:
            i -= 1
        covered = n - 1 - i
        if covered >= MIN_REPEATS * p and (best is None or covered > best[1] + p):
            best = (p, covered)
    if best is None:
        return None
    p, covered = best
    if covered < MIN_REPEAT_CHARS or covered < MIN_REPEAT_FRACTION * len(text):
        return None
    return s[n - p :], covered


def coherence_check(c: Completion, allow_repetition: bool = False) -> Row:
    """Garbage fails. A repetition loop alone is a warning with `allow_repetition` (tiny test
    models, like the demo pair, loop under greedy decoding; a production model must not)."""
    text = c.text
    if not text:
        return Row("coherence", SKIP, "no text to judge", prompt=c.prompt_id)
    problems: list[str] = []
    everything = c.content + c.reasoning
    bad = everything.count("\ufffd")
    trailing_only = bad == 1 and everything.endswith("\ufffd") and c.finish_reason == "length"
    if bad and not trailing_only:
        problems.append(f"{bad} U+FFFD replacement character(s) (invalid UTF-8 in the output)")
    ctrl = [
        ch
        for ch in everything
        if (ord(ch) < 32 and ch not in _ALLOWED_CONTROL) or 0x7F <= ord(ch) <= 0x9F
    ]
    if ctrl:
        problems.append(f"{len(ctrl)} control character(s), e.g. {ctrl[0]!r}")
    rep = repeated_tail(text)
    loop = None
    if rep is not None:
        unit, covered = rep
        loop = (
            f"degenerate: {unit[:40]!r} repeated to the end ({covered} of {len(text)} characters, "
            f"{covered // len(unit)}x)"
        )
        if not allow_repetition:
            problems.append(loop)
    letters = {ch for ch in text if not ch.isspace()}
    if len(text.strip()) >= TINY_MIN_CHARS and len(letters) <= TINY_ALPHABET:
        shown = "".join(sorted(letters))
        problems.append(f"a tiny alphabet: {len(letters)} distinct characters ({shown!r})")
    if problems:
        return Row(
            "coherence",
            FAIL,
            "; ".join(problems),
            prompt=c.prompt_id,
            hint="garbage at temperature 0 means the target itself is broken: wrong weights, dtype "
            "or tokenizer, or a broken kernel (speculation is lossless and cannot cause it)",
        )
    if loop is not None:
        return Row(
            "coherence",
            WARNING,
            loop + " (allowed: --allow-repetition)",
            prompt=c.prompt_id,
            hint="expected of a tiny test model; a production model that loops at temperature 0 "
            "has a broken target",
        )
    note = ""
    if trailing_only:
        note = " (one trailing U+FFFD: a character cut by the token cap)"
    return Row(
        "coherence",
        OK,
        f"no repetition loop, replacement or control characters{note}",
        prompt=c.prompt_id,
    )


def answer_checks(c: Completion, max_tokens: int, allow_repetition: bool = False) -> list[Row]:
    """Every per-answer row; only the http row when the exchange itself failed."""
    if c.error:
        return [http_check(c)]
    return [
        http_check(c),
        content_check(c),
        finish_check(c, max_tokens),
        tokens_check(c, max_tokens),
        coherence_check(c, allow_repetition),
    ]


# ---- across answers -----------------------------------------------------------------------------


def decode_speed(cs: list[Completion]) -> float | None:
    """Decode tokens/s over all answers: tokens after the first of each / time after the first."""
    tokens = sum(c.decode_tokens or 0 for c in cs if c.ok and c.decode_s)
    secs = sum(c.decode_s or 0.0 for c in cs if c.ok and c.decode_tokens)
    return tokens / secs if secs > 0 and tokens > 0 else None


def median_ttft(cs: list[Completion]) -> float | None:
    vals = [c.ttft_s for c in cs if c.ok and c.ttft_s is not None]
    return statistics.median(vals) if vals else None


def speed_check(tps: float | None, floor: float | None) -> Row:
    if tps is None:
        status = FAIL if floor is not None else SKIP
        return Row(
            "decode_speed",
            status,
            "no decode speed: too few tokens or no token counts",
            hint="raise --max-tokens" if floor is not None else None,
        )
    if floor is None:
        return Row(
            "decode_speed",
            OK,
            f"{tps:.1f} tokens/s decode (after the first token); no floor given "
            "(--min-tokens-per-s)",
        )
    if tps < floor:
        return Row(
            "decode_speed",
            FAIL,
            f"{tps:.1f} tokens/s decode, below --min-tokens-per-s {floor:g}",
            hint="compare with a plain server: --baseline URL; a low acceptance makes "
            "speculation slower than none",
        )
    return Row("decode_speed", OK, f"{tps:.1f} tokens/s decode (floor {floor:g})")


def baseline_checks(
    ours: list[Completion], base: list[Completion], ours_tps: float | None, base_url: str
) -> list[Row]:
    """Speedup over a server without speculation, and the lossless check (identical greedy
    output for identical prompts)."""
    failed = [b for b in base if not b.ok]
    if failed:
        b = failed[0]
        return [
            Row(
                "baseline",
                FAIL,
                f"the baseline {base_url} failed on {b.prompt_id}: {b.error}",
                hint=b.hint,
            )
        ]
    rows = []
    base_tps = decode_speed(base)
    if ours_tps is None or base_tps is None:
        rows.append(Row("speedup", SKIP, "no decode speed on one side: too few tokens"))
    else:
        x = ours_tps / base_tps
        msg = f"{x:.2f}x: {ours_tps:.1f} vs {base_tps:.1f} tokens/s decode on the baseline"
        if x < 1.0:
            rows.append(
                Row(
                    "speedup",
                    FAIL,
                    msg + ": speculation is slower than no speculation",
                    hint="low acceptance, too large a K, or a slow drafter kernel: read the "
                    "speculation rows; dflashctl bench compares properly (warm-up, repeats)",
                )
            )
        else:
            rows.append(Row("speedup", OK, msg))
    pairs = {c.prompt_id: c for c in ours if c.ok}
    diffs = []
    for b in base:
        c = pairs.get(b.prompt_id)
        if c is None:
            continue
        a_text, b_text = c.reasoning + c.content, b.reasoning + b.content
        if a_text != b_text:
            at = next(
                (i for i, (x, y) in enumerate(zip(a_text, b_text, strict=False)) if x != y),
                min(len(a_text), len(b_text)),
            )
            diffs.append(
                f"{b.prompt_id} differs at character {at} "
                f"({a_text[at : at + 20]!r} vs {b_text[at : at + 20]!r})"
            )
    if not pairs:
        rows.append(Row("lossless", SKIP, "no answer to compare"))
    elif diffs:
        rows.append(
            Row(
                "lossless",
                FAIL,
                "greedy output differs from the baseline: " + "; ".join(diffs),
                hint="greedy speculative decoding must reproduce plain greedy output; a late "
                "difference can be bf16 numerics, an early one is a verification bug or a "
                "different model/template on the baseline",
            )
        )
    else:
        rows.append(
            Row("lossless", OK, f"greedy output identical to the baseline ({len(pairs)} prompts)")
        )
    return rows
