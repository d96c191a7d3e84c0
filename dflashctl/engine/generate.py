"""Greedy batch-one generation, plain or DFlash-speculative, with vLLM-compatible statistics.

One speculative step (dflash-facts.md §9):
  1. the drafter sees the context cache (positions < start) and the block
     [anchor, mask x K] at positions start..start+K, and proposes d1..dK (argmax per slot);
  2. the target verifies [anchor, d1..dK] in one forward; posterior p_i = argmax at slot i;
  3. accepted a = length of the prefix with d_{i+1} == p_i; commit d1..da plus the bonus p_a;
  4. the drafter's context gains the target taps of positions start..start+a; both caches roll
     back by position (stale slots past the new length are overwritten before anything sees them).
Statistics follow vLLM's `SpecDecodingStats`: drafts, draft tokens, accepted tokens, accepted
per position; mean acceptance length = 1 + accepted / drafts.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from dflashctl.engine.drafter import Drafter, DrafterArgs
from dflashctl.engine.model import (
    ModelArgs,
    Transformer,
    UnsupportedTarget,
    fuse_projections,
    rope_cache,
)
from dflashctl.engine.reference import ReferenceTarget
from dflashctl.engine.tokenizer import ChatTokenizer
from dflashctl.engine.weights import (
    checkpoint_bytes,
    draft_vocabulary,
    draft_vocabulary_file,
    generation_eos,
    iter_state,
    load_config,
    load_into,
)
from dflashctl.errors import EngineError

# torch.compile modes the device step takes: Inductor's own CUDA graphs (reduce-overhead,
# max-autotune) would nest inside the engine's capture (engine/fast.py)
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs")


@dataclass
class SpecStats:
    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    accepted_per_pos: list[int] = field(default_factory=list)

    def observe(self, num_draft_tokens: int, num_accepted: int) -> None:
        if len(self.accepted_per_pos) < num_draft_tokens:
            self.accepted_per_pos += [0] * (num_draft_tokens - len(self.accepted_per_pos))
        self.num_drafts += 1
        self.num_draft_tokens += num_draft_tokens
        self.num_accepted_tokens += num_accepted
        for i in range(num_accepted):
            self.accepted_per_pos[i] += 1

    @property
    def mean_acceptance_length(self) -> float:
        return 1 + self.num_accepted_tokens / self.num_drafts if self.num_drafts else 0.0

    def copy(self) -> SpecStats:
        return SpecStats(
            self.num_drafts,
            self.num_draft_tokens,
            self.num_accepted_tokens,
            list(self.accepted_per_pos),
        )

    def since(self, before: SpecStats) -> SpecStats:
        """The drafts observed after `before` (a copy taken earlier from these same stats)."""
        per_pos = list(self.accepted_per_pos)
        for i, n in enumerate(before.accepted_per_pos):
            per_pos[i] -= n
        return SpecStats(
            self.num_drafts - before.num_drafts,
            self.num_draft_tokens - before.num_draft_tokens,
            self.num_accepted_tokens - before.num_accepted_tokens,
            per_pos,
        )


@dataclass
class Generation:
    tokens: list[int]
    finish_reason: str  # "stop" | "length"
    stats: SpecStats


def _materialize_rope(
    model: Transformer | Drafter,
    head_dim: int,
    max_pos: int,
    theta: float,
    scaling: dict[str, Any] | None = None,
) -> None:
    cos, sin = rope_cache(head_dim, max_pos, theta, scaling)
    dev = next(model.parameters()).device
    model.rope_cos, model.rope_sin = cos.to(dev), sin.to(dev)


def check_memory(
    target_dir: Path,
    drafter_dir: Path | None,
    args: ModelArgs,
    dtype: torch.dtype,
    device: str,
    max_model_len: int,
) -> int:
    """Refuse, before loading anything, a pair that does not fit the device: the weights as
    `dtype` (from the safetensors headers) plus the target's KV cache. Returns the estimate."""
    need = checkpoint_bytes(target_dir, dtype)
    if drafter_dir is not None:
        need += checkpoint_bytes(drafter_dir, dtype)
    seq = min(max_model_len, args.max_position_embeddings) + 32
    item = torch.empty(0, dtype=dtype).element_size()
    need += 2 * args.num_hidden_layers * args.num_key_value_heads * args.head_dim * seq * item
    free = available_bytes(device)
    if free is not None and need > free:
        raise EngineError(
            f"the model needs about {need / 2**30:.1f} GiB on {device} (weights as "
            f"{str(dtype).removeprefix('torch.')} and a {seq}-token KV cache), "
            f"{free / 2**30:.1f} GiB are free",
            "use --dtype bfloat16 or a smaller --max-model-len; a model larger than one GPU is "
            "served with tensor parallelism by vLLM or SGLang (dflashctl serve --engine vllm)",
        )
    return need


def available_bytes(device: str) -> int | None:
    """Free memory on `device` (a CUDA device's free memory; MemAvailable for the CPU)."""
    if device.startswith("cuda"):
        free, _ = torch.cuda.mem_get_info(torch.device(device))
        return int(free)
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


# One step of `Engine.stream`: the last committed token -> (the tokens it commits, the drafts
# accepted, the drafts proposed: 0 without a drafter).
Step = Callable[[int], tuple[list[int], int, int]]


class Engine:
    """A loaded target (+ optional drafter) with static caches for one sequence at a time."""

    def __init__(
        self,
        target: Transformer | ReferenceTarget,
        drafter: Drafter | None,
        tokenizer: ChatTokenizer,
        eos_ids: list[int],
        max_model_len: int,
        num_speculative_tokens: int,
    ) -> None:
        self.target, self.drafter, self.tokenizer = target, drafter, tokenizer
        self.eos_ids = set(eos_ids)
        self.max_model_len = max_model_len
        self.k = num_speculative_tokens if drafter is not None else 0
        self.draft_confidence = 0.0  # > 0: verify only the confident prefix of a draft (kept)
        # a reduced draft vocabulary (speculators' draft_vocab_size + d2t): the target ids the
        # drafter may propose [N] and the lm_head rows over them [N, H]; None: the whole one
        self.draft_ids: Tensor | None = None
        self.draft_head: nn.Module | None = None
        self.taps = tuple(drafter.args.captured_layers) if drafter is not None else ()
        slack = self.k + 1
        target.setup_caches(max_model_len + slack)
        if drafter is not None:
            drafter.setup_caches(max_model_len + slack)
        self.device = next(target.parameters()).device
        # the step on the device (engine/fast.py: no host sync inside a step, CUDA graphs) on a
        # GPU; the plain loop below on the CPU. DFLASHCTL_ENGINE_STATIC=1/0 forces either.
        forced = os.environ.get("DFLASHCTL_ENGINE_STATIC")
        self.static = forced == "1" if forced in ("0", "1") else self.device.type == "cuda"
        # a torch.compile mode for that step (engine/fast.py), e.g. "default"; off unless asked
        self.compile_mode = os.environ.get("DFLASHCTL_ENGINE_COMPILE") or None
        if self.compile_mode not in (None, *COMPILE_MODES):
            raise EngineError(
                f"DFLASHCTL_ENGINE_COMPILE={self.compile_mode!r} is not a compile mode this "
                f"engine runs (it runs {', '.join(COMPILE_MODES)}; the CUDA graphs are its own)",
                "unset it, or set DFLASHCTL_ENGINE_COMPILE=default",
            )
        self._steps: Any = None
        # which implementation runs the target: said by the server at start and by diagnose
        self.target_path = (
            f"transformers reference ({target.args.architecture}: recomputed each step)"
            if isinstance(target, ReferenceTarget)
            else f"native {target.args.model_type}"
        )

    @classmethod
    def load(
        cls,
        target_dir: Path,
        drafter_dir: Path | None = None,
        *,
        device: str = "cpu",
        dtype: torch.dtype = torch.float32,
        max_model_len: int = 2048,
        num_speculative_tokens: int | None = None,
        draft_vocab: Path | None = None,
    ) -> Engine:
        """`draft_vocab`: a reduced draft vocabulary kept beside the drafter
        (weights.draft_vocabulary_file), over one its own config declares."""
        t_cfg = load_config(target_dir)
        target: Transformer | ReferenceTarget
        try:
            args: ModelArgs | None = ModelArgs.from_hf_config(t_cfg)
        except UnsupportedTarget:
            args = None
        if args is not None:
            check_memory(target_dir, drafter_dir, args, dtype, device, max_model_len)
            with torch.device("meta"):
                target = Transformer(args)
            state = iter_state(target_dir, device)
            load_into(target, state, rename={"model.": ""}, dtype=dtype, device=device)
            fuse_projections(target)
        else:
            target = ReferenceTarget.load(target_dir, t_cfg, dtype=dtype, device=device)
        n_layers, hidden = target.args.num_hidden_layers, target.args.hidden_size
        drafter = None
        k = 0
        vocab = None
        if drafter_dir is not None:
            d_cfg = load_config(drafter_dir)
            block = num_speculative_tokens + 1 if num_speculative_tokens else None
            d_args = DrafterArgs.from_hf_config(d_cfg, n_layers, block_size=block)
            if d_args.hidden_size != hidden:
                raise EngineError(
                    f"drafter hidden_size {d_args.hidden_size} != target {hidden}: "
                    "the drafter shares the target's embedding and lm_head"
                )
            with torch.device("meta"):
                drafter = Drafter(d_args)
            load_into(
                drafter,
                iter_state(drafter_dir, device),
                ignore=("embed_tokens.", "lm_head.", "d2t", "t2d"),
                dtype=dtype,
                device=device,
            )
            fuse_projections(drafter)  # its MLPs (its attention reads k/v_proj for the context)
            k = d_args.block_size - 1
            head = target.lm_head.weight
            vocab = (
                draft_vocabulary_file(draft_vocab, head, device, dtype)
                if draft_vocab is not None
                else draft_vocabulary(drafter_dir, d_cfg, head, device, dtype)
            )
        eos = generation_eos(target_dir) or target.args.eos_token_ids
        # the context vLLM allows; the RoPE tables of both models also cover the K verify
        # positions past it (their tokens are never committed), whatever the drafter's
        # max_position_embeddings says
        max_len = min(max_model_len, target.args.max_position_embeddings)
        if isinstance(target, Transformer) and args is not None:
            _materialize_rope(
                target, args.head_dim, max_len + k + 1, args.rope_theta, args.rope_scaling
            )
        if drafter is not None:
            _materialize_rope(
                drafter, drafter.args.head_dim, max_len + k + 1, drafter.args.rope_theta
            )
        engine = cls(target.eval(), drafter, ChatTokenizer(target_dir), eos, max_len, k)
        if drafter is not None and vocab is not None:
            engine.use_draft_vocabulary(*vocab)
        return engine

    def use_draft_vocabulary(self, ids: Tensor, head_weight: Tensor) -> None:
        """Propose only among `ids` [N] (target ids), scored by `head_weight` [N, H]: the
        drafter's lm_head costs N / V of the whole vocabulary's. The plain loop only."""
        head = nn.Linear(head_weight.shape[1], head_weight.shape[0], bias=False)
        head.weight = nn.Parameter(head_weight, requires_grad=False)
        self.draft_ids, self.draft_head = ids.to(self.device), head.to(self.device)
        self.static = False  # engine/fast.py scores the whole vocabulary

    # -- steps ------------------------------------------------------------------------------

    def _positions(self, start: int, n: int) -> Tensor:
        return torch.arange(start, start + n, device=self.device)

    def prefill(self, ids: list[int]) -> tuple[int, list[Tensor]]:
        x = torch.tensor([ids], device=self.device)
        logits, taps = self.target(x, self._positions(0, len(ids)), taps=self.taps)
        return int(logits[0, -1].argmax()), taps

    def decode_one(self, token: int, pos: int) -> int:
        x = torch.tensor([[token]], device=self.device)
        logits, _ = self.target(x, self._positions(pos, 1))
        return int(logits[0, -1].argmax())

    def draft_logits(self, anchor: int, start: int) -> Tensor:
        """The drafter's logits [K, V] for positions start+1..start+K: one pass over the block
        [anchor, mask x K] at start..start+K."""
        assert self.drafter is not None
        block = torch.full((1, self.k + 1), self.drafter.args.mask_token_id, device=self.device)
        block[0, 0] = anchor
        head = self.draft_head if self.draft_head is not None else self.target.lm_head
        return self.drafter(block, start, self.target.embed_tokens, head)[0]  # [K, V or N]

    def pick(self, d_logits: Tensor) -> Tensor:
        """Target token ids of the argmax of each row of draft logits [n, V or N] -> [n]."""
        best = d_logits.argmax(-1)
        return self.draft_ids[best] if self.draft_ids is not None else best

    def propose(self, anchor: int, start: int) -> Tensor:
        """The drafter's K proposals [K] (argmax per slot, as target ids)."""
        return self.pick(self.draft_logits(anchor, start))  # [K]

    def kept(self, d_logits: Tensor) -> int:
        """How many of the K proposals to verify: all, or with `draft_confidence` set, those
        before the first whose probability under the drafter is below it (at least one). A
        step that verifies n + 1 tokens costs less than one of K + 1 where it is compute-bound
        (the CPU: docs/performance.md), and a low-confidence slot is rarely accepted;
        the committed text is the target's greedy text either way."""
        if self.draft_confidence <= 0.0:
            return self.k
        confidence = torch.softmax(d_logits.float(), -1).amax(-1)  # [K]
        low = (confidence < self.draft_confidence).nonzero()
        return max(1, int(low[0])) if len(low) else self.k

    def speculate(self, anchor: int, start: int) -> tuple[list[int], int, list[Tensor], int]:
        """One draft + verify. Returns (committed tokens, accepted, verify taps [1, n+1, T], n
        the number of proposals verified)."""
        d_logits = self.draft_logits(anchor, start)  # [K, V]
        n = self.kept(d_logits)
        drafts = self.pick(d_logits[:n]).to(self.device)  # [n]
        verify = torch.cat([torch.tensor([anchor], device=self.device), drafts])[None]  # [1, n+1]
        logits, taps = self.target(verify, self._positions(start, n + 1), taps=self.taps)
        posterior = logits[0].argmax(-1)  # [n+1]: the target's token after each verify slot
        matches = (drafts == posterior[:-1]).int()
        accepted = int(matches.cumprod(0).sum())
        committed = [*drafts[:accepted].tolist(), int(posterior[accepted])]  # + bonus token
        return committed, accepted, taps, n

    # -- generation -------------------------------------------------------------------------

    @torch.inference_mode()
    def stream(
        self, ids: list[int], max_new_tokens: int, stats: SpecStats | None = None
    ) -> Iterator[list[int]]:
        """Yield newly committed tokens step by step (stops at an eos token or the limit)."""
        if not ids:
            raise EngineError("empty prompt")
        if len(ids) + max_new_tokens > self.max_model_len:
            raise EngineError(
                f"prompt ({len(ids)} tokens) + max_tokens ({max_new_tokens}) exceeds the "
                f"context of {self.max_model_len} tokens"
            )
        stats = stats if stats is not None else SpecStats()
        if self.static and not isinstance(self.target, ReferenceTarget):
            first, step = self._static_steps(ids)
        else:
            first, step = self._eager_steps(ids)
        pending = [first]
        produced = 0
        while True:
            out, done = self.cut(pending, max_new_tokens - produced)
            produced += len(out)
            yield out
            if done:
                return
            pending, accepted, drafted = step(pending[-1])
            if drafted:
                stats.observe(drafted, accepted)

    def _static_steps(self, ids: list[int]) -> tuple[int, Step]:
        """The device-resident step (engine/fast.py: no host sync inside it, CUDA graphs)."""
        from dflashctl.engine.fast import StaticSteps

        if self._steps is None:
            self._steps = StaticSteps(self)
        steps = self._steps
        first = steps.prefill(ids)
        k = self.k if self.drafter is not None else 0

        def step(_anchor: int) -> tuple[list[int], int, int]:
            committed, accepted = steps.step()  # the anchor lives on the device
            return committed, accepted, k

        return first, step

    def _eager_steps(self, ids: list[int]) -> tuple[int, Step]:
        """The plain loop: one host-driven decode or draft-verify-accept per step."""
        token, taps = self.prefill(ids)
        pos = len(ids)
        if self.drafter is not None:
            self.drafter.write_context(taps, self._positions(0, len(ids)))

        def step(anchor: int) -> tuple[list[int], int, int]:
            nonlocal pos
            if self.drafter is None:
                pos += 1
                return [self.decode_one(anchor, pos - 1)], 0, 0
            committed, accepted, taps, n = self.speculate(anchor, pos)
            self.drafter.write_context(
                [t[:, : accepted + 1] for t in taps], self._positions(pos, accepted + 1)
            )
            pos += accepted + 1
            return committed, accepted, n

        return token, step

    def cut(self, pending: list[int], room: int) -> tuple[list[int], bool]:
        """What of the newly committed `pending` is emitted (up to an eos token, at most
        `room` tokens), and whether generation ends with it."""
        out = pending[:room]
        for i, t in enumerate(out):
            if t in self.eos_ids:
                return out[: i + 1], True
        return out, len(out) >= room

    def generate(self, ids: list[int], max_new_tokens: int) -> Generation:
        stats = SpecStats()
        tokens: list[int] = []
        for chunk in self.stream(ids, max_new_tokens, stats):
            tokens.extend(chunk)
        reason = "stop" if tokens and tokens[-1] in self.eos_ids else "length"
        return Generation(tokens, reason, stats)
