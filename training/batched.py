"""Batched generation for the training data: many prompts continued together, fast on a GPU.

One `BatchGenerator` serves every batch of a run with fixed shapes, so that on CUDA its decode
step is captured once as a CUDA graph and replayed (eager elsewhere, same arithmetic):

- a static KV cache of `batch` rows x `max_prompt + max_new` slots. A prompt of length L sits
  right-aligned in slots [max_prompt - L, max_prompt), generated tokens follow from slot
  max_prompt on; RoPE positions count from each row's own first token.
- a static bool mask [batch, 1, 1, slots]: the slots a row's next query sees (its prompt, what it
  generated so far and the slot being written). Slots left of a prompt or right of the current
  token are never seen, so what an earlier batch left there is harmless.
- the graph covers the target's forward only (mask update, embedding, layers, lm_head); picking
  the next token (argmax, or Gumbel-max with top-k) and the bookkeeping run eagerly on the device,
  with one host sync every `SYNC_EVERY` steps to stop a batch whose rows have all ended.

Used by training/demo_pair.py's prompts and answers stages.
"""

from __future__ import annotations

import torch
from torch import Tensor

from dflashctl.engine.model import Transformer

SYNC_EVERY = 16


class BatchGenerator:
    def __init__(
        self,
        model: Transformer,
        batch: int,
        max_prompt: int,
        max_new: int,
        *,
        stop_id: int,
        pad_id: int,
        graphs: bool = True,
    ) -> None:
        self.model, self.b, self.p, self.n = model, batch, max_prompt, max_new
        self.stop_id, self.pad_id = stop_id, pad_id
        dev = self.dev = model.embed_tokens.weight.device
        slots = max_prompt + max_new
        model.setup_caches(slots, batch=batch)
        self.slots = torch.arange(slots, device=dev)
        self.tok = torch.zeros(batch, 1, dtype=torch.long, device=dev)  # the token being fed
        self.pos = torch.zeros(1, dtype=torch.long, device=dev)  # its cache slot
        self.rope = torch.zeros(batch, 1, dtype=torch.long, device=dev)  # its RoPE position
        self.mask = torch.zeros(batch, 1, 1, slots, dtype=torch.bool, device=dev)
        self.logits = torch.zeros(batch, model.args.vocab_size, device=dev)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.use_graphs = graphs and dev.type == "cuda"
        self.how = "eager"

    # ------------------------------------------------------------------------------ the step

    def _forward(self) -> None:
        self.mask.index_fill_(-1, self.pos, True)
        logits, _ = self.model(self.tok, self.pos, mask=self.mask, rope_pos=self.rope)
        self.logits.copy_(logits[:, -1])

    def _decode(self) -> None:
        if not self.use_graphs:
            self._forward()
            return
        if self.graph is None:
            self._capture()
        if self.graph is not None:
            self.graph.replay()
        else:
            self._forward()

    def _capture(self) -> None:
        # warm up on a side stream, then capture. Each pass writes the same K/V into the same
        # slot and the same mask bit as the replay that follows, so the state stays right.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                self._forward()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                self._forward()
        except RuntimeError as e:  # keep going eagerly, and say so in the log
            self.use_graphs, self.how = False, f"eager (graph capture failed: {e})"
        else:
            self.graph, self.how = graph, "cuda graph"

    # ------------------------------------------------------------------------------ a batch

    @torch.no_grad()
    def run(
        self,
        prompts: list[list[int]],
        *,
        temperature: float = 0.0,
        top_k: int = 0,
        gen: torch.Generator | None = None,
    ) -> list[list[int]]:
        """Continue each prompt by up to max_new tokens, a row stopping at `stop_id` (kept).
        Greedy at temperature 0, else sampled (top-k if > 0). At most `batch` prompts, each at
        most max_prompt tokens long."""
        assert 0 < len(prompts) <= self.b and max(map(len, prompts)) <= self.p
        real = len(prompts)
        prompts = prompts + [prompts[0]] * (self.b - real)  # fixed shapes: pad with copies
        width = max(map(len, prompts))
        first = self.p - width  # the prefill writes slots first..p-1
        lens = torch.tensor([len(x) for x in prompts], device=self.dev)
        ids = torch.full((self.b, width), self.pad_id, dtype=torch.long)
        for i, x in enumerate(prompts):
            ids[i, width - len(x) :] = torch.tensor(x)
        ids = ids.to(self.dev)
        start = self.p - lens  # [B]: each row's first slot
        self.mask.copy_(
            ((self.slots >= start[:, None]) & (self.slots < self.p))[:, None, None, :]
        )  # fmt: skip
        # prefill: causal over the row's own tokens; a padding query sees itself only
        cols = self.slots[first : self.p]  # [W]
        keys = cols[None, None, :]
        seen = (keys >= start[:, None, None]) & (keys <= cols[:, None])  # [B, W, W]
        own = cols[None, :, None] == cols[None, None, :]
        pre_mask = torch.zeros(self.b, 1, width, self.p, dtype=torch.bool, device=self.dev)
        pre_mask[:, 0, :, first:] = seen | own
        rope = (cols[None, :] - start[:, None]).clamp(min=0)  # [B, W]
        logits, _ = self.model(ids, cols, mask=pre_mask, rope_pos=rope, last_only=True)
        self.logits.copy_(logits[:, -1])
        out = torch.full((self.b, self.n), self.pad_id, dtype=torch.long, device=self.dev)
        done = torch.zeros(self.b, dtype=torch.bool, device=self.dev)
        self.pos.fill_(self.p)
        self.rope.copy_((self.p - start)[:, None])
        steps = 0
        for t in range(self.n):
            nxt = torch.where(done, self.pad_id, self._pick(temperature, top_k, gen))
            out[:, t] = nxt
            done |= nxt == self.stop_id
            steps = t + 1
            if t == self.n - 1 or ((t + 1) % SYNC_EVERY == 0 and bool(done[:real].all())):
                break
            self.tok.copy_(nxt[:, None])
            self._decode()
            self.pos.add_(1)
            self.rope.add_(1)
        rows = out[:real, :steps].tolist()
        return [r[: r.index(self.stop_id) + 1] if self.stop_id in r else r for r in rows]

    def _pick(self, temperature: float, top_k: int, gen: torch.Generator | None) -> Tensor:
        if temperature <= 0:
            return self.logits.argmax(-1)
        logits = self.logits.float() / temperature
        if top_k:
            kth = logits.topk(top_k, -1).values[:, -1:]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        u = torch.rand(logits.shape, device=logits.device, generator=gen).clamp_(min=1e-20)
        return (logits - torch.log(-torch.log(u))).argmax(-1)  # Gumbel-max: a softmax sample
