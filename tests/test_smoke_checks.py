"""The smoke checks on hand-built answers: coherence, finish reason, token counts, content, and the
prompt sets shipped in the package."""

from __future__ import annotations

import pytest
from support.engine_http import QUICKSORT

from dflashctl.commands.smoke import checks as ck
from dflashctl.commands.smoke.render import excerpt
from dflashctl.fixtures import load_prompts
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
