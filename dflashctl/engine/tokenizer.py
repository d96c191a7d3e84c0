"""Tokenizer and chat template of a Hugging Face model directory (no transformers needed).

Reads `tokenizer.json`, the chat template from `chat_template.jinja` or `tokenizer_config.json`,
and stop tokens from `generation_config.json` / the config's `eos_token_id`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dflashctl.errors import EngineError


class ChatTokenizer:
    def __init__(self, model_dir: Path) -> None:
        from tokenizers import Tokenizer

        path = model_dir / "tokenizer.json"
        if not path.exists():
            raise EngineError(f"no tokenizer.json in {model_dir}")
        self.tok = Tokenizer.from_file(str(path))
        self.template = self._chat_template(model_dir)
        self._compiled: Any = None  # the template, compiled on first use
        self.vocab_size = self.tok.get_vocab_size()
        # no token is longer than this many bytes of text (an upper bound: vocabulary keys in
        # UTF-8), so a text of N bytes has at least N / max_token_bytes tokens
        self.max_token_bytes = max(
            (len(k.encode()) for k in self.tok.get_vocab(with_added_tokens=True)), default=1
        )

    def min_tokens(self, text: str) -> int:
        """A lower bound on the tokens of `text`, without tokenising it."""
        return -(-len(text.encode()) // max(self.max_token_bytes, 1))

    @staticmethod
    def _chat_template(model_dir: Path) -> str | None:
        jinja = model_dir / "chat_template.jinja"
        if jinja.exists():
            return jinja.read_text()
        cfg = model_dir / "tokenizer_config.json"
        if cfg.exists():
            template = json.loads(cfg.read_text()).get("chat_template")
            if isinstance(template, str):
                return template
        return None

    def token_id(self, token: str) -> int | None:
        return self.tok.token_to_id(token)

    def encode(self, text: str) -> list[int]:
        return list(self.tok.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: list[int]) -> str:
        return str(self.tok.decode(ids, skip_special_tokens=True))

    def apply_chat_template(
        self, messages: list[dict[str, Any]], add_generation_prompt: bool = True
    ) -> list[int]:
        """Render the chat template (`render_chat_template`), then encode without adding special
        tokens."""
        return self.encode(self.render_chat_template(messages, add_generation_prompt))

    def render_chat_template(
        self, messages: list[dict[str, Any]], add_generation_prompt: bool = True
    ) -> str:
        """The template's text, rendered as transformers does (sandboxed jinja, trim and lstrip
        blocks, `raise_exception`)."""
        if self.template is None:
            raise EngineError("this model has no chat template: use /v1/completions")
        from jinja2 import TemplateError
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(message: str) -> None:
            raise EngineError(f"the chat template refused the messages: {message}")

        if self._compiled is None:
            env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
            env.globals["raise_exception"] = raise_exception
            self._compiled = env.from_string(self.template)
        try:
            return self._compiled.render(
                messages=messages, add_generation_prompt=add_generation_prompt
            )
        except TemplateError as e:
            raise EngineError(f"the chat template failed: {e}") from e
