"""A target the engine does not implement natively, run through transformers as a reference.

For architectures outside `model.ARCHS` (the hybrid linear-attention Qwen3.5 / Qwen3.6 targets of
the field story, MoE targets, ...), `ReferenceTarget` wraps transformers'
`AutoModelForCausalLM` behind the interface the engine's loop uses (`forward(ids, input_pos,
taps) -> (logits, taps)`, `embed_tokens`, `lm_head`, `args`, `setup_caches`). Correctness over
speed: it keeps the committed token history and recomputes the whole sequence on every call, so
rolling back after a rejected draft is only truncating that history. The taps are transformers'
`hidden_states` (capture index i = `hidden_states[i]`, the residual entering layer i), and index
n (the number of layers) is the input of the final norm, read by a forward hook: transformers'
last `hidden_states` entry is already normalised.

Slow (quadratic in the sequence length) and meant for `diagnose` and tests, not for serving.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from dflashctl.errors import EngineError


@dataclass
class ReferenceArgs:
    """The few `ModelArgs` fields the engine's loop and the drafter read."""

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    max_position_embeddings: int
    model_type: str
    architecture: str
    eos_token_ids: list[int] = field(default_factory=list)


def _text_config(cfg: dict[str, Any]) -> dict[str, Any]:
    text = cfg.get("text_config")
    return text if isinstance(text, dict) else cfg


class ReferenceTarget(nn.Module):
    """transformers' model for `model_dir`, read as the engine reads a native target."""

    def __init__(self, model: Any, args: ReferenceArgs) -> None:
        super().__init__()
        self.hf = model
        self.args = args
        self.embed_tokens = model.get_input_embeddings()
        self.lm_head = model.get_output_embeddings()
        self.history = torch.zeros(0, dtype=torch.long)
        self.max_seq = 0
        self._pre_norm: Tensor | None = None
        norm = _final_norm(model)
        if norm is not None:
            norm.register_forward_pre_hook(self._keep_pre_norm)

    @classmethod
    def load(cls, model_dir: Path, cfg: dict[str, Any], *, dtype: torch.dtype, device: str):
        try:
            from transformers import AutoModelForCausalLM
        except ImportError as e:
            raise EngineError(
                f"{model_dir}: this architecture needs transformers (the engine's reference "
                "path for targets it does not implement)",
                "pip install transformers",
            ) from e
        try:
            model: Any = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype)
        except Exception as e:  # transformers raises many kinds
            raise EngineError(f"transformers could not load {model_dir}: {e}") from e
        model = model.to(device).eval()
        text = _text_config(cfg)
        eos = text.get("eos_token_id", cfg.get("eos_token_id"))
        hidden = text.get("hidden_size") or model.get_input_embeddings().embedding_dim
        args = ReferenceArgs(
            vocab_size=model.get_input_embeddings().num_embeddings,
            hidden_size=int(hidden),
            num_hidden_layers=int(text["num_hidden_layers"]),
            max_position_embeddings=int(text.get("max_position_embeddings", 4096)),
            model_type=str(text.get("model_type") or cfg.get("model_type")),
            architecture=type(model).__name__,
            eos_token_ids=[eos] if isinstance(eos, int) else list(eos or []),
        )
        return cls(model, args)

    def _keep_pre_norm(self, _module: nn.Module, inputs: tuple[Tensor, ...]) -> None:
        self._pre_norm = inputs[0]

    def setup_caches(self, max_seq: int, batch: int = 1, dtype: torch.dtype | None = None) -> None:
        if batch != 1:
            raise EngineError("the transformers reference path runs one sequence at a time")
        self.max_seq = max_seq
        self.history = torch.zeros(0, dtype=torch.long, device=self.embed_tokens.weight.device)

    @torch.no_grad()
    def forward(
        self, ids: Tensor, input_pos: Tensor | None = None, taps: tuple[int, ...] = ()
    ) -> tuple[Tensor, list[Tensor]]:
        """ids: [1, S] at positions input_pos [S] (contiguous). Everything from input_pos[0] on
        is replaced; the whole sequence up to the last position is recomputed."""
        if ids.shape[0] != 1:
            raise EngineError("the transformers reference path runs one sequence at a time")
        start = int(input_pos[0]) if input_pos is not None else 0
        if start > self.history.numel():
            raise EngineError(f"position {start} is past the {self.history.numel()} known tokens")
        seq = torch.cat([self.history[:start], ids[0].to(self.history.device)])
        self.history = seq
        n = self.args.num_hidden_layers
        out = self.hf(input_ids=seq[None], output_hidden_states=bool(taps), use_cache=False)
        s = ids.shape[1]
        captured = []
        for i in taps:
            if i < n:
                captured.append(out.hidden_states[i][:, -s:])
            elif i == n and self._pre_norm is not None:
                captured.append(self._pre_norm[:, -s:])
            else:
                raise EngineError(f"{self.args.architecture}: no hidden state to tap at {i}")
        return out.logits[:, -s:], captured


def _final_norm(model: Any) -> nn.Module | None:
    base = getattr(model, "model", None) or getattr(
        model, getattr(model, "base_model_prefix", ""), None
    )
    for name in ("norm", "final_layernorm", "ln_f"):
        module = getattr(base, name, None)
        if isinstance(module, nn.Module):
            return module
    return None
