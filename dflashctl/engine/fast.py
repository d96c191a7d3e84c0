"""Greedy decoding with the whole step on the device: the GPU path of `generate.Engine`.

`StaticSteps` runs the same algorithm as `Engine.stream` (draft, verify, accept, bonus, roll the
caches back by position), but a step never waits for the host: the anchor token and the block's
start position live in device tensors, the accepted length and the bonus token are computed
there, and the host reads one small tensor per step — the target's K+1 greedy tokens and the
accepted count — to learn what was committed. Shapes are static: attention spans a power-of-two
bucket of cache slots (masked by position, not sliced to the length), the drafter writes its
block into its cache instead of concatenating, the context K/V of all K+1 verified positions is
written (the rejected ones are past the next start, masked, and overwritten), one mask per
distinct drafter layer kind. On CUDA each bucket's step is captured once as a CUDA graph and
replayed. With `engine.compile_mode` set (a torch.compile mode, e.g. "default"; the server's
`DFLASHCTL_ENGINE_COMPILE`), the step is compiled by Inductor first (RMSNorm, RoPE, residuals
and the cache writes fused; attention as two batched products, model.attend) and the
compiled step is what the graph captures.

    engine = Engine.load(target, drafter, device="cuda", dtype=torch.bfloat16)
    for chunk in engine.stream(ids, 256): ...        # uses StaticSteps on CUDA

The only host synchronisation of a step is that read (`out.tolist()`). `Engine.stream` owns the
loop; this module owns the step (it imports the engine for its type only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from dflashctl.engine.generate import Engine

MIN_BUCKET = 64
GREEDY_CHUNKS = 64  # a vocabulary row is reduced in this many parallel chunks, then across them


def greedy(logits: torch.Tensor) -> torch.Tensor:
    """argmax over the last dim ([..., V] -> [...]), the first index of the maximum as argmax.

    A row's reduction over a 151,936-token vocabulary runs on one thread block (~33 us on an
    H100 for 1-16 rows, 4.5 MB); split into chunks it runs on GREEDY_CHUNKS blocks a row and
    then reduces 64 values. Where V does not split evenly it is plain argmax."""
    v = logits.shape[-1]
    if v % GREEDY_CHUNKS:
        return logits.argmax(-1)
    chunks = logits.unflatten(-1, (GREEDY_CHUNKS, v // GREEDY_CHUNKS))  # [..., C, V/C]
    best, at = chunks.max(-1)  # [..., C]: each chunk's maximum and its first index there
    c = best.argmax(-1, keepdim=True)  # [..., 1]: the first chunk holding the maximum
    return (c * (v // GREEDY_CHUNKS) + at.gather(-1, c)).squeeze(-1)


class StaticSteps:
    """Device-resident step state for one sequence of `engine` (prefill, then `step`)."""

    def __init__(self, engine: Engine, *, graphs: bool | None = None) -> None:
        self.e = engine
        dev = engine.device
        self.graphs = dev.type == "cuda" if graphs is None else graphs
        self.k = engine.k
        self.cache_len = engine.max_model_len + engine.k + 1
        self.anchor = torch.zeros(1, dtype=torch.long, device=dev)  # the last committed token
        self.start = torch.zeros((), dtype=torch.long, device=dev)  # its position
        self.offs = torch.arange(self.k + 1, device=dev)
        self.k_pos = torch.arange(self.cache_len, device=dev)
        self.out = torch.zeros(self.k + 2, dtype=torch.long, device=dev)  # tokens..., accepted
        self.block = torch.zeros(1, self.k + 1, dtype=torch.long, device=dev)
        self.verify = torch.zeros(1, self.k + 1, dtype=torch.long, device=dev)
        if engine.drafter is not None:
            self.block.fill_(engine.drafter.args.mask_token_id)
        self.host_start = 0
        self._graphs: dict[int, Any] = {}
        self._run = self._work  # the step as run: compiled when the engine asks for it
        if engine.compile_mode:
            self._run = torch.compile(self._work, mode=engine.compile_mode, dynamic=False)

    # -- the device work of one step --------------------------------------------------------

    def _speculate(self, length: int) -> None:
        """Draft from (anchor, start), verify, accept: all on the device, into `out`."""
        e, k = self.e, self.k
        assert e.drafter is not None
        self.block[:, :1].copy_(self.anchor.view(1, 1))
        d_logits = e.drafter.forward_static(
            self.block, self.start, length, e.target.embed_tokens, e.target.lm_head
        )
        drafts = greedy(d_logits[0])  # [K]
        self.verify[0, :1].copy_(self.anchor)
        self.verify[0, 1:].copy_(drafts)
        pos = self.start + self.offs  # [K+1]
        mask = self.k_pos[None, :length] <= pos[:, None]  # [K+1, L]
        logits, taps = e.target(self.verify, pos, taps=e.taps, mask=mask)
        posterior = greedy(logits[0])  # [K+1]: the target's token after each slot
        accepted = (drafts == posterior[:-1]).int().cumprod(0).sum()  # 0-d
        e.drafter.write_context(taps, pos)  # all K+1; those past the accepted are masked later
        self.anchor.copy_(posterior.gather(0, accepted.view(1)))  # the bonus token
        self.start.add_(accepted + 1)
        self.out[: k + 1].copy_(posterior)
        self.out[k + 1 :].copy_(accepted.view(1))

    def _decode(self, length: int) -> None:
        """One plain greedy token from (anchor, start), into out[0]."""
        pos = self.start.view(1)
        mask = self.k_pos[None, :length] <= pos[:, None]  # [1, L]
        logits, _ = self.e.target(self.anchor.view(1, 1), pos, mask=mask)
        nxt = greedy(logits[0, -1]).view(1)
        self.anchor.copy_(nxt)
        self.start.add_(1)
        self.out[:1].copy_(nxt)

    def _work(self, length: int) -> None:
        if self.e.drafter is None:
            self._decode(length)
        else:
            self._speculate(length)

    # -- host side ---------------------------------------------------------------------------

    def bucket(self, need: int) -> int:
        """The smallest power-of-two span of cache slots (at least MIN_BUCKET) holding `need`."""
        n = MIN_BUCKET
        while n < need:
            n *= 2
        return min(n, self.cache_len)

    def prefill(self, ids: list[int]) -> int:
        """Run the prompt (eagerly: its length varies), write its context; the first token."""
        token, taps = self.e.prefill(ids)
        n = len(ids)
        if self.e.drafter is not None:
            self.e.drafter.write_context(taps, torch.arange(n, device=self.e.device))
        self.anchor.fill_(token)
        self.start.fill_(n)
        self.host_start = n
        return token

    def step(self) -> tuple[list[int], int]:
        """One step: (committed tokens, accepted drafts). The host's one read of the device."""
        need = self.host_start + (self.k + 1 if self.e.drafter is not None else 1)
        length = self.bucket(need)
        if self.graphs:
            self._replay(length)
        else:
            self._run(length)
        values = self.out.tolist()
        if self.e.drafter is None:
            self.host_start += 1
            return values[:1], 0
        accepted = values[-1]
        self.host_start += accepted + 1
        return values[: accepted + 1], accepted

    def _replay(self, length: int) -> None:
        graph = self._graphs.get(length)
        if graph is None:
            graph = self._capture(length)
        graph.replay()

    def _capture(self, length: int) -> Any:
        """Warm up on a side stream, then capture this bucket's step. The warm-up runs the step
        for real: the state buffers are put back afterwards (the cache slots it wrote are past
        the committed context, masked and overwritten later)."""
        saved = (self.anchor.clone(), self.start.clone())
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                self._run(length)  # compiles here, if compiled
                self.anchor.copy_(saved[0])
                self.start.copy_(saved[1])
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        # its own memory pool: the host reads only the static buffers, never a graph's
        # intermediates, but separate pools keep any replay order safe
        with torch.cuda.graph(graph):
            self._run(length)
        self._graphs[length] = graph
        return graph
