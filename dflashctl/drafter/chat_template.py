"""Whether a target's chat template makes the model think unless told not to.

Qwen3-style templates take `enable_thinking`: left undefined, the generation prompt is a bare
assistant turn and the model opens its own `<think>` block; with `enable_thinking=False` the
template writes an empty `<think></think>` so the model answers directly. Rendering the
template both ways (jinja2's sandbox, one user message, the generation prompt) tells the two
apart without matching any one template's wording. Pure apart from reading the files."""

from __future__ import annotations

import json
from pathlib import Path

THINK_OPEN = "<think>"


def read_chat_template(target_dir: Path) -> str | None:
    """The template beside a target: chat_template.jinja, else tokenizer_config.json's."""
    jinja = target_dir / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text("utf-8", errors="replace")
    cfg = target_dir / "tokenizer_config.json"
    if not cfg.is_file():
        return None
    try:
        data = json.loads(cfg.read_text("utf-8", errors="replace"))
    except ValueError:
        return None
    tpl = data.get("chat_template") if isinstance(data, dict) else None
    if isinstance(tpl, list):  # named templates: the default one
        tpl = next((t.get("template") for t in tpl if isinstance(t, dict)
                    and t.get("name") == "default"), None)  # fmt: skip
    return tpl if isinstance(tpl, str) else None


def thinks_by_default(template: str) -> bool | None:
    """True when the template asks the model to think unless `enable_thinking=False`; False
    when it does not; None when it cannot be rendered here (no jinja2, or a template that
    needs more than a plain conversation)."""
    if "enable_thinking" not in template:
        return False  # no switch: nothing to turn off
    try:
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        return None
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    messages = [{"role": "user", "content": "Hello"}]
    try:
        tpl = env.from_string(template)
        default = tpl.render(messages=messages, add_generation_prompt=True, bos_token="",
                             eos_token="")  # fmt: skip
        off = tpl.render(messages=messages, add_generation_prompt=True, bos_token="",
                         eos_token="", enable_thinking=False)  # fmt: skip
    except Exception:  # a template's own raise_exception, a missing filter: not decidable
        return None
    if default == off:
        return False
    # off closes a think block the default leaves to the model: the default thinks
    return THINK_OPEN in off[len(_common_prefix(default, off)) :]


def _common_prefix(a: str, b: str) -> str:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return a[:n]
