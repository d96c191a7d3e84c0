"""What the bundled server accepts from an OpenAI-style request, and what it refuses.

The engine decodes greedily, one sequence at a time, text only. Anything it would serve
differently than asked (sampling, n > 1, logprobs, images, stop strings, penalties, tools) is
refused with a `BadRequest` (HTTP 400 and an OpenAI-style error body), never silently changed.
Pure functions over the request body; no I/O.
"""

from __future__ import annotations

from typing import Any


class BadRequest(Exception):
    """A request the server refuses; `status` is the HTTP status (400 unless said otherwise)."""

    def __init__(self, message: str, param: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.message, self.param, self.status = message, param, status


UNSUPPORTED = {
    "logprobs": "logprobs are not supported by the bundled engine",
    "top_logprobs": "logprobs are not supported by the bundled engine",
    "tools": "tool calls are not supported by the bundled engine",
    "response_format": "structured output is not supported by the bundled engine",
    "best_of": "best_of is not supported by the bundled engine",
    "suffix": "suffix is not supported by the bundled engine",
    "echo": "echo is not supported by the bundled engine",
    "logit_bias": "logit_bias is not supported by the bundled engine",
}


def _number(body: dict[str, Any], key: str) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadRequest(f"{key} must be a number", key)
    return float(value)


def check_sampling(body: dict[str, Any]) -> None:
    """Only greedy decoding is served: temperature 0, or any temperature with top_k 1."""
    temp = _number(body, "temperature")
    top_k = _number(body, "top_k")
    _number(body, "top_p")  # any top_p is greedy when the temperature is 0 or top_k is 1
    if temp and top_k != 1:
        raise BadRequest(
            "the bundled engine decodes greedily only: send temperature 0 (or top_k 1)",
            "temperature",
        )
    n = body.get("n")
    if n is not None and n != 1:
        raise BadRequest("n > 1 is not supported: the engine serves one sequence", "n")
    for key, message in UNSUPPORTED.items():
        value = body.get(key)
        # `logprobs: 0` (completions) still asks for the sampled token's logprob; only a
        # `top_logprobs` of 0 asks for nothing
        empty = value is None or value is False or value in ([], {})
        if empty or (key == "top_logprobs" and value == 0):
            continue
        raise BadRequest(message, key)
    if body.get("stop") not in (None, [], ""):
        raise BadRequest("stop strings are not supported by the bundled engine", "stop")
    for key in ("presence_penalty", "frequency_penalty"):
        if _number(body, key) not in (None, 0.0):
            raise BadRequest(f"{key} is not supported: the engine is greedy", key)
    if _number(body, "repetition_penalty") not in (None, 1.0):
        raise BadRequest("repetition_penalty is not supported", "repetition_penalty")


def include_usage_of(body: dict[str, Any]) -> bool:
    """`stream_options: {"include_usage": true}`, the only stream option there is."""
    opts = body.get("stream_options")
    if opts is None:
        return False
    if not isinstance(opts, dict):
        raise BadRequest("stream_options must be an object", "stream_options")
    usage = opts.get("include_usage", False)
    if not isinstance(usage, bool):
        raise BadRequest("stream_options.include_usage must be true or false", "stream_options")
    return usage


def max_tokens_of(body: dict[str, Any]) -> int | None:
    value = body.get("max_completion_tokens", body.get("max_tokens"))
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise BadRequest("max_tokens must be a positive integer", "max_tokens")
    return value


def messages_of(body: dict[str, Any]) -> list[dict[str, str]]:
    """Chat messages as {role, content} with text content; any other part is refused."""
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise BadRequest("messages must be a non-empty list", "messages")
    out = []
    for m in msgs:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise BadRequest("each message needs a role and content", "messages")
        content = m.get("content")
        if isinstance(content, list):
            texts = []
            for part in content:
                if not isinstance(part, dict) or part.get("type") != "text":
                    kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                    raise BadRequest(
                        f"content of type {kind!r} is not supported (text only)", "messages"
                    )
                texts.append(str(part.get("text", "")))
            content = "".join(texts)
        if not isinstance(content, str):
            raise BadRequest("message content must be a string", "messages")
        out.append({"role": m["role"], "content": content})
    return out


def prompt_of(body: dict[str, Any]) -> str | list[int]:
    """The one prompt of a completions request: a string or a list of token ids."""
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
        prompt = prompt[0]
    if isinstance(prompt, str):
        return prompt
    if (
        isinstance(prompt, list)
        and prompt
        and all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in prompt)
    ):
        return list(prompt)
    raise BadRequest("prompt must be a string or a list of token ids (one prompt)", "prompt")
