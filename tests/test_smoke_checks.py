"""The smoke checks on hand-built answers: coherence, finish reason, token counts, content, and the
prompt sets shipped in the package."""

from __future__ import annotations

import pytest
from support.engine_http import QUICKSORT

from dflashctl.commands.smoke import checks as ck
from dflashctl.commands.smoke.render import excerpt
from dflashctl.fixtures import load_prompts
from dflashctl.report import Row
from dflashctl.server.client import Completion, describe_body, normalize_url


def answer(text: str = QUICKSORT, **kw) -> Completion:
    c = Completion("p", "prompt", status_code=200, content=text, done=True)
    c.finish_reason = kw.pop("finish", "stop")
    c.completion_tokens = kw.pop("tokens", max(1, len(text) // 4))
    c.text_events = kw.pop("events", c.completion_tokens)
    for k, v in kw.items():
        setattr(c, k, v)
    return c


class TestCoherence:
    def test_a_real_answer_passes(self):
        assert ck.coherence_check(answer()).status == "ok"
        prose = "The harbour wakes slowly. " + "Boats knock against the pier; " * 2 + "then bread."
        assert ck.coherence_check(answer(prose)).status == "ok"

    @pytest.mark.parametrize(
        "tail",
        ["the the the the the the the the the the the ", "I'm sorry. " * 12, "!" * 80, "\n}" * 40],
    )
    def test_loops_to_the_end(self, tail):
        c = ck.coherence_check(answer("def quicksort(items):\n    return " + tail))
        assert c.status == "fail" and "repeated to the end" in c.found

    def test_repetition_in_the_middle_is_fine(self):
        text = "Step. " * 8 + QUICKSORT
        assert ck.repeated_tail(text) is None

    def test_replacement_and_control_characters(self):
        c = ck.coherence_check(answer("abc \ufffd def \x07 ghi \x85 and some more ordinary text"))
        assert c.status == "fail"
        assert "1 U+FFFD" in c.found and "2 control character(s)" in c.found

    def test_trailing_replacement_at_the_cap_is_tolerated(self):
        c = ck.coherence_check(answer(QUICKSORT + "\ufffd", finish="length"))
        assert c.status == "ok" and "cut by the token cap" in c.found

    def test_tiny_alphabet(self):
        c = ck.coherence_check(answer("ab ba abab baba aabb bbaa abba baab ab ba ab"))
        assert c.status == "fail" and "tiny alphabet: 2 distinct characters" in c.found

    def test_reasoning_text_is_judged_when_content_is_empty(self):
        c = answer("", reasoning="so so so so so so so so so so so so so so so ")
        c.reasoning_field = "reasoning"
        assert ck.coherence_check(c).status == "fail"


class TestRows:
    def test_finish_reasons(self):
        assert ck.finish_check(answer(), 256).status == "ok"
        capped = ck.finish_check(answer(finish="length", tokens=256), 256)
        assert capped.status == "ok" and "--max-tokens cap (256)" in capped.found
        short = ck.finish_check(answer(finish="length", tokens=100), 256)
        assert short.status == "warning" and "context limit" in short.found
        assert ck.finish_check(answer(finish="abort"), 256).status == "fail"
        assert ck.finish_check(answer(finish=None), 256).status == "fail"

    def test_token_counts(self):
        assert ck.tokens_check(answer(), 256).status == "ok"
        assert ck.tokens_check(answer(tokens=300), 256).status == "fail"
        assert ck.tokens_check(answer(tokens=None), 256).status == "warning"
        assert ck.tokens_check(answer("", tokens=5), 256).status == "fail"
        many = ck.tokens_check(answer("abc", tokens=200, events=2), 256)
        assert many.status == "warning" and "decode to nothing" in many.found
        few = ck.tokens_check(answer(QUICKSORT * 3, tokens=10, events=10), 256)
        assert few.status == "fail" and "too few tokens" in few.found

    def test_content_fields(self):
        assert ck.content_check(answer()).status == "ok"
        r = answer("", reasoning="thinking about pivots", reasoning_field="reasoning")
        row = ck.content_check(r)
        assert row.status == "ok" and "`reasoning`" in row.found
        r.finish_reason = "length"
        assert ck.content_check(r).status == "warning"
        assert ck.content_check(answer("")).status == "fail"

    def test_decode_speed_excludes_the_first_token(self):
        c = answer(tokens=101, decode_s=2.0)
        assert c.decode_tokens_per_s == pytest.approx(50.0)
        assert ck.decode_speed([c, answer(tokens=51, decode_s=1.0)]) == pytest.approx(50.0)
        assert ck.decode_speed([answer(tokens=1, decode_s=0.0)]) is None


def test_error_bodies():
    msg, hint = describe_body(
        502, "text/html", b"<html><head><title>502 Bad Gateway</title></head></html>"
    )
    assert msg == "HTTP 502 with an HTML page (502 Bad Gateway), not the engine's JSON"
    msg, hint = describe_body(404, "application/json", b'{"error":{"message":"The model `x`"}}')
    assert msg == "HTTP 404: The model `x`" and hint is not None and "--model" in hint


def test_urls():
    assert normalize_url("127.0.0.1:8000") == "http://127.0.0.1:8000"
    assert normalize_url("http://h:8000/v1/") == "http://h:8000"
    assert normalize_url("https://h/metrics") == "https://h"


def test_excerpt_shows_control_characters():
    assert excerpt("a\nb\x1bc") == "a⏎b\\x1bc"


def test_prompt_sets():
    assert [p.id for p in load_prompts("smoke")] == ["quicksort", "is_prime"]
    fx = load_prompts("fixtures")
    assert [p.category for p in fx] == ["code", "english", "translation"]
    assert any("\u4e00" <= ch <= "\u9fff" for ch in fx[2].text)  # Chinese source text


def test_repetition_loop_fails_unless_allowed_and_garbage_always_fails() -> None:
    loop = "def quicksort(xs):\n    return " + "sg_" * 60
    assert ck.coherence_check(answer(loop)).status == ck.FAIL
    allowed = ck.coherence_check(answer(loop), allow_repetition=True)
    assert allowed.status == ck.WARNING and "repeated to the end" in allowed.found
    garbage = loop + "\ufffd\ufffd\x1e"
    assert ck.coherence_check(answer(garbage), allow_repetition=True).status == ck.FAIL


# ---- every row, word for word, at each edge (issue 31) ------------------------------------------


def ans(text: str = "x" * 40, **kw) -> Completion:
    """An answer of 40 characters, 10 tokens in 5 text events, finished by `stop`."""
    c = Completion(kw.pop("prompt_id", "p"), "prompt", status_code=200, content=text, done=True)
    c.finish_reason = kw.pop("finish", "stop")
    c.completion_tokens = kw.pop("tokens", 10)
    c.text_events = kw.pop("pieces", 5)
    for k, v in kw.items():
        setattr(c, k, v)
    return c


def row(name: str, status: str, found: str, hint: str | None = None, prompt: str | None = "p"):
    return Row(name, status, found, hint=hint, prompt=prompt)


EMPTY_HINT = (
    "the model stopped at once (an end-of-sequence token first: a wrong chat template?) or "
    "produced only special tokens"
)
CUT_HINT = "the prompt plus max_tokens exceed the server's context; lower --max-tokens"
CUT = "not the --max-tokens cap (16): the context limit (max_model_len) cut it"
ANSWER_ROWS = [
    (ck.http_check, ans(error="HTTP 500: boom", hint="h"),
     row("http", "fail", "HTTP 500: boom", "h")),
    (ck.http_check, ans(events=7), row("http", "ok", "200, a complete SSE stream (7 events)")),
    (ck.http_check, ans(events=7, notes=["a", "b"]),
     row("http", "warning", "200, a complete SSE stream (7 events); a; b")),
    (ck.content_check, ans("abc"), row("content", "ok", "3 characters in `content`")),
    (ck.content_check, ans("abc", reasoning="think", reasoning_field="reasoning"),
     row("content", "ok", "3 characters in `content` (and 5 in `reasoning`)")),
    (ck.content_check, ans("", reasoning="think", reasoning_field="reasoning_content",
                           finish="length"),
     row("content", "warning", "`content` is empty: the model was still reasoning (5 characters "
         "in `reasoning_content`) when max_tokens cut it; judged the reasoning text",
         "raise --max-tokens to see the answer itself")),
    (ck.content_check, ans("", reasoning="think", reasoning_field="reasoning"),
     row("content", "ok", "`content` is empty; the answer is in `reasoning` (5 characters): a "
         "reasoning model, checked that field")),
    (ck.content_check, ans("", tokens=3), row("content", "fail", "empty answer: no text in "
     "`content`, `reasoning` or `reasoning_content` (3 tokens reported)", EMPTY_HINT)),
    (ck.content_check, ans("", tokens=None), row("content", "fail", "empty answer: no text in "
     "`content`, `reasoning` or `reasoning_content`", EMPTY_HINT)),
    (ck.coherence_check, ans(""), row("coherence", "skip", "no text to judge")),
]  # fmt: skip
FINISH_ROWS = [  # max_tokens 16
    ("stop", 10, row("finish_reason", "ok", "stop")),
    ("length", 16, row("finish_reason", "ok", "length: the answer hit the --max-tokens cap (16); "
                       "that is expected for a long answer")),
    ("length", 15, row("finish_reason", "warning", f"length after 15 tokens, {CUT}", CUT_HINT)),
    ("length", None, row("finish_reason", "warning",
                         f"length after an unknown number of tokens, {CUT}", CUT_HINT)),
    (None, 3, row("finish_reason", "fail", "no finish_reason in the stream")),
    ("abort", 3, row("finish_reason", "fail", "'abort' (expected stop, or length at the cap)",
                     "abort/error: the engine gave up on the request; read its log")),
]  # fmt: skip
TOKEN_ROWS = [  # (text length, tokens, text events) with max_tokens 16
    (40, None, 4, row("completion_tokens", "warning", "the stream carried no usage "
     "(stream_options.include_usage ignored); 4 text events",
     "decode speed cannot be measured without the token count")),
    (40, 17, 5, row("completion_tokens", "fail", "17 tokens reported, more than max_tokens 16")),
    (40, 16, 5, row("completion_tokens", "ok", "16 tokens for 40 characters (2.5 a token)")),
    (40, 0, 0, row("completion_tokens", "fail", "0 tokens reported for 40 characters")),
    (0, 0, 0, row("completion_tokens", "warning", "0 tokens reported for 0 characters")),
    (0, 3, 0, row("completion_tokens", "fail", "3 tokens reported but no text arrived",
                  "the tokens decode to nothing: special tokens only, or a tokenizer mismatch")),
    (40, 4, 5, row("completion_tokens", "fail", "4 tokens reported but the text came in 5 pieces "
                   "(each piece needs at least one token)",
                   "usage is miscounted by the server (or a proxy rewrote the stream)")),
    (40, 5, 5, row("completion_tokens", "ok", "5 tokens for 40 characters (8.0 a token)")),
    (400, 10, 1, row("completion_tokens", "ok", "10 tokens for 400 characters (40.0 a token)")),
    (401, 10, 1, row("completion_tokens", "fail", "10 tokens for 401 characters (40.1 characters "
                     "a token): too few tokens for the text", "usage is miscounted by the server")),
    (2, 10, 1, row("completion_tokens", "ok", "10 tokens for 2 characters (0.2 a token)")),
    (1, 10, 1, row("completion_tokens", "warning", "10 tokens for only 1 characters: most tokens "
                   "decode to nothing", "special or partial tokens in the output: a tokenizer or "
                   "vocabulary mismatch?")),
]  # fmt: skip


@pytest.mark.parametrize(("check", "c", "want"), ANSWER_ROWS)
def test_answer_rows(check, c: Completion, want: Row) -> None:
    assert check(c) == want


@pytest.mark.parametrize(("finish", "tokens", "want"), FINISH_ROWS)
def test_finish_rows(finish: str | None, tokens: int | None, want: Row) -> None:
    assert ck.finish_check(ans(finish=finish, tokens=tokens), 16) == want


@pytest.mark.parametrize(("chars", "tokens", "pieces", "want"), TOKEN_ROWS)
def test_token_rows(chars: int, tokens: int | None, pieces: int, want: Row) -> None:
    assert ck.tokens_check(ans("x" * chars, tokens=tokens, pieces=pieces), 16) == want


GARBAGE = (
    "garbage at temperature 0 means the target itself is broken: wrong weights, dtype or "
    "tokenizer, or a broken kernel (speculation is lossless and cannot cause it)"
)
CJK = "".join(chr(0x4E00 + i) for i in range(201))  # 201 distinct letters: no period inside
U16 = "0123456789abcdef"


@pytest.mark.parametrize(
    ("text", "tail"),
    [("The answer is: " + "abcd" * 8, ("abcd", 32)),  # 32 characters: the least that counts
     ("The answer is: " + "abcd" * 7, None),
     (CJK[:160] + "0123456789" * 4, ("0123456789", 40)),  # 40 of 200: 20 %, counts
     (CJK[:161] + "0123456789" * 4, None),  # 40 of 201: under 20 %
     ("Q" + U16 * 4, (U16, 64)),  # four times: counts
     ("Q" + U16 * 3, None),  # three times: not a loop
     (CJK[:100] + U16 * 3, None),  # nor with room for a fourth
     ("The answer: " + "z" * 40, ("z", 40)),  # one character over and over
     ("abcd" * 10 + "X", None),  # the last character breaks the loop
     ("Q" + CJK[:45] * 5, (CJK[:45], 225)),
     ("Q" + CJK[:200] * 4, (CJK[:200], 800)),  # the longest unit looked for: 200
     ("Q" + CJK * 4, None),
     ("Q" * 10 + "ab" * 5000, ("ab", 6000))],  # only the last 6000 characters are examined
)  # fmt: skip
def test_repeated_tail_edges(text: str, tail: tuple[str, int] | None) -> None:
    assert ck.repeated_tail(text) == tail


PROSE = "The harbour wakes slowly; boats knock on the pier and gulls argue over bread."
COHERENCE_ROWS = [
    (ans("The answer is: " + "abcd" * 8), False, row("coherence", "fail", "degenerate: 'abcd' "
     "repeated to the end (32 of 47 characters, 8x)", GARBAGE)),
    (ans("def f():\n  return " + "sg_" * 60), True, row("coherence", "warning", "degenerate: "
     "'sg_' repeated to the end (180 of 198 characters, 60x) (allowed: --allow-repetition)",
     "expected of a tiny test model; a production model that loops at temperature 0 has a "
     "broken target")),
    (ans(PROSE + " \x1f \x7f \x9f \x80 \x7e \xa0 \t\n\r"), False,
     row("coherence", "fail", "4 control character(s), e.g. '\\x1f'", GARBAGE)),
    (ans(PROSE + "\ufffd", finish="length"), False, row("coherence", "ok", "no repetition loop, "
     "replacement or control characters (one trailing U+FFFD: a character cut by the token "
     "cap)")),
    (ans(PROSE + "\ufffd"), False, row("coherence", "fail",
     "1 U+FFFD replacement character(s) (invalid UTF-8 in the output)", GARBAGE)),
    (ans(PROSE + "\ufffd\ufffd", finish="length"), False, row("coherence", "fail",
     "2 U+FFFD replacement character(s) (invalid UTF-8 in the output)", GARBAGE)),
    (ans("The answer is here \x07 and \ufffd\ufffd ok"), False, row("coherence", "fail",
     "2 U+FFFD replacement character(s) (invalid UTF-8 in the output); 1 control "
     "character(s), e.g. '\\x07'", GARBAGE)),
    (ans("cbdaaacabaaddabadaabadababcdbacbabcaaabd"), False, row("coherence", "fail",
     "a tiny alphabet: 4 distinct characters ('abcd')", GARBAGE)),
    (ans("edcdedccbbbaecedcdceaaedbcbddaaeeccceded"), False, row("coherence", "ok",
     "no repetition loop, replacement or control characters")),  # five distinct: fine
    (ans("abcd" * 7 + "abc"), False, row("coherence", "ok",
     "no repetition loop, replacement or control characters")),  # 31 characters: too short
    (ans("abcd" * 8), False, row("coherence", "fail", "degenerate: 'abcd' repeated to the end "
     "(32 of 32 characters, 8x); a tiny alphabet: 4 distinct characters ('abcd')", GARBAGE)),
    (ans("", reasoning=PROSE), False, row("coherence", "ok",
     "no repetition loop, replacement or control characters")),
    (ans("Q" + CJK[:45] * 5), True, row("coherence", "warning", f"degenerate: {CJK[:40]!r} "
     "repeated to the end (225 of 226 characters, 5x) (allowed: --allow-repetition)",
     "expected of a tiny test model; a production model that loops at temperature 0 has a "
     "broken target")),  # a unit over 40 characters is shown by its first 40
]  # fmt: skip


@pytest.mark.parametrize(("c", "allow", "want"), COHERENCE_ROWS)
def test_coherence_rows(c: Completion, allow: bool, want: Row) -> None:
    assert ck.coherence_check(c, allow) == want


def test_answer_checks_stop_at_a_failed_exchange() -> None:
    assert ck.answer_checks(ans(error="boom"), 16) == [row("http", "fail", "boom")]
    loop = ans("def f():\n  return " + "sg_" * 60, finish="length", tokens=16, pieces=16)
    rows = ck.answer_checks(loop, 16)
    assert rows == [
        ck.http_check(loop), ck.content_check(loop), ck.finish_check(loop, 16),
        ck.tokens_check(loop, 16), ck.coherence_check(loop),
    ]  # fmt: skip
    assert [(r.name, r.status) for r in rows] == [
        ("http", "ok"), ("content", "ok"), ("finish_reason", "ok"), ("completion_tokens", "ok"),
        ("coherence", "fail"),
    ]  # fmt: skip
    assert ck.answer_checks(loop, 16, allow_repetition=True)[-1].status == "warning"


def timed(pid: str = "p", tokens: int | None = None, secs: float | None = None, **kw) -> Completion:
    """An answer whose decode (after its first token) took `tokens` tokens in `secs` seconds."""
    return ans(kw.pop("text", "same"), tokens=None if tokens is None else tokens + 1,
               prompt_id=pid, decode_s=secs, **kw)  # fmt: skip


def test_decode_speed_and_ttft() -> None:
    cs = [timed(tokens=10, secs=2.0), timed(tokens=30, secs=2.0), timed(tokens=5),
          timed(secs=3.0), timed(tokens=50, secs=1.0, error="x")]  # fmt: skip
    assert ck.decode_speed(cs) == 10.0  # 40 tokens in 4 s: the others have no time or no count
    assert ck.decode_speed([timed(tokens=0, secs=2.0)]) is None
    assert ck.decode_speed([timed(tokens=4, secs=0.0)]) is None
    assert ck.decode_speed([]) is None
    assert ck.decode_speed([timed(tokens=1, secs=0.5)]) == 2.0
    assert ck.decode_speed([timed(tokens=5, secs=-1.0)]) is None  # a clock that went back
    ttfts = [ans(ttft_s=0.1), ans(ttft_s=0.3), ans(ttft_s=0.2), ans(), ans(ttft_s=9.0, error="x")]
    assert ck.median_ttft(ttfts) == 0.2
    assert ck.median_ttft([]) is None


SLOW_HINT = "compare with a plain server: --baseline URL; a low acceptance makes speculation "
SPEED_ROWS = [
    (None, 5.0, Row("decode_speed", "fail", "no decode speed: too few tokens or no token counts",
                    hint="raise --max-tokens")),
    (None, None, Row("decode_speed", "skip", "no decode speed: too few tokens or no token counts")),
    (12.34, None, Row("decode_speed", "ok", "12.3 tokens/s decode (after the first token); no "
                      "floor given (--min-tokens-per-s)")),
    (4.99, 5.0, Row("decode_speed", "fail", "5.0 tokens/s decode, below --min-tokens-per-s 5",
                    hint=SLOW_HINT + "slower than none")),
    (5.0, 5.0, Row("decode_speed", "ok", "5.0 tokens/s decode (floor 5)")),
    (12.34, 5.5, Row("decode_speed", "ok", "12.3 tokens/s decode (floor 5.5)")),
]  # fmt: skip


@pytest.mark.parametrize(("tps", "floor", "want"), SPEED_ROWS)
def test_speed_rows(tps: float | None, floor: float | None, want: Row) -> None:
    assert ck.speed_check(tps, floor) == want


DIFF_HINT = (
    "greedy speculative decoding must reproduce plain greedy output; a late difference can be "
    "bf16 numerics, an early one is a verification bug or a different model/template on the "
    "baseline"
)


def test_baseline_rows() -> None:
    base = [timed("a", 10, 1.0, text="hello"), timed("b", 10, 1.0, text="world!")]
    ours = [timed("a", 20, 1.0, text="hello"), timed("b", 20, 1.0, text="worxd!!")]
    refused = [timed("a", error="refused", hint="start it")]
    assert ck.baseline_checks(ours, refused, 20.0, "http://b") == [
        Row("baseline", "fail", "the baseline http://b failed on a: refused", hint="start it")
    ]
    assert ck.baseline_checks(ours, base, 20.0, "http://b") == [
        Row("speedup", "ok", "2.00x: 20.0 vs 10.0 tokens/s decode on the baseline"),
        Row("lossless", "fail", "greedy output differs from the baseline: b differs at character "
            "3 ('xd!!' vs 'ld!')", hint=DIFF_HINT),
    ]  # fmt: skip
    assert ck.baseline_checks(base, base, 10.0, "http://b") == [
        Row("speedup", "ok", "1.00x: 10.0 vs 10.0 tokens/s decode on the baseline"),
        Row("lossless", "ok", "greedy output identical to the baseline (2 prompts)"),
    ]
    assert ck.baseline_checks(base, base, 9.0, "http://b")[0] == Row(
        "speedup", "fail", "0.90x: 9.0 vs 10.0 tokens/s decode on the baseline: speculation is "
        "slower than no speculation", hint="low acceptance, too large a K, or a slow drafter "
        "kernel: read the speculation rows; dflashctl bench compares properly (warm-up, repeats)"
    )  # fmt: skip
    no_speed = Row("speedup", "skip", "no decode speed on one side: too few tokens")
    assert ck.baseline_checks(base, base, None, "http://b")[0] == no_speed
    assert ck.baseline_checks(base, [timed("a", text="hello")], 9.0, "u")[0] == no_speed
    assert ck.baseline_checks([timed("a", error="x")], base, 20.0, "http://b")[1] == Row(
        "lossless", "skip", "no answer to compare"
    )
    # prompts the baseline has and we lack are passed over; every difference is listed
    long_a, long_b = "same start " + "x" * 30, "same start " + "y" * 30
    ours = [timed("a", text=long_a), timed("b", text="one")]
    base = [timed("z", text="?"), timed("a", text=long_b), timed("b", text="two")]
    assert ck.baseline_checks(ours, base, None, "u")[1].found == (
        "greedy output differs from the baseline: a differs at character 11 "
        f"({'x' * 20!r} vs {'y' * 20!r}); b differs at character 0 ('one' vs 'two')"
    )
    short = ck.baseline_checks([timed("a", text="hel")], [timed("a", 10, 1.0, text="hello")],
                               10.0, "u")  # fmt: skip
    assert short[1] == Row("lossless", "fail", "greedy output differs from the baseline: a "
                           "differs at character 3 ('' vs 'lo')", hint=DIFF_HINT)  # fmt: skip
