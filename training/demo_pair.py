"""Train the embedded demo pair: a tiny Qwen3 target and a DFlash drafter trained against it.

One command, fixed seeds, resumable stages (each stage skips itself when its output exists):

    python training/demo_pair.py --work .train --out $OUT            # on a GPU (an H200)
    python training/demo_pair.py --work /tmp/t --out /tmp/o --preset tiny    # a CPU smoke run
    python training/demo_pair.py --work .train --out OUT --preset cpu   # no GPU: ~1 h, 2 cores

Stages:
  corpus     Python source of this interpreter's standard library and installed packages
             (files sorted, deduplicated, shuffled with a fixed seed; 1 % of files held out),
             plus chat-formatted "write this function" tasks made from functions with docstrings.
  tokenizer  byte-level BPE (tokenizers library) with <|endoftext|>, <|im_start|>, <|im_end|>,
             then <|mask|> added after the BPE vocabulary (the DFlash mask token).
  target     Qwen3ForCausalLM trained as a language model (AdamW, cosine, bf16 autocast).
  drafter    DFlash recipe (shared docs dflash-facts.md §11): target-generated greedy
             continuations, random anchors, blocks [anchor, mask x (B-1)] that see the context
             before their anchor and their own block, loss weights exp(-(k-1)/gamma). The
             <|mask|> embedding is learned with the drafter (the target never saw the token, so
             its row is untrained and close to every other never-seen row).
  export     Hugging Face format into OUT/target and OUT/drafter (bf16 safetensors, shards <=16 MB);
             the learned mask embedding goes into the target's <|mask|> row, which the target
             never reads, so every engine that embeds the block with the target's table uses it.
  eval       held-out chat prompts (checked absent from the training text): acceptance with the
             bundled engine, an n-gram (prompt-lookup) drafter on the same outputs, repeat share.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import math
import os
import random
import sys
import sysconfig
import textwrap
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dflashctl.dflash_config import build_target_layer_ids
from dflashctl.engine.drafter import Drafter, DrafterArgs
from dflashctl.engine.model import ModelArgs, Qwen3

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MASK = "<|mask|>"
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# Held-out evaluation prompts, written for this project (checked absent from the corpus).
EVAL_PROMPTS = [
    "Write a Python quicksort function.",
    "Write a Python function that checks if a number is prime.",
    "Write a function that returns the nth Fibonacci number.",
    "Write a Python function to reverse a linked list.",
    "Write a function that merges two sorted lists into one sorted list.",
    "Write a Python class for a stack with push, pop and peek.",
    "Write a function that counts the words in a text file.",
    "Write a Python function that computes the factorial of n.",
    "Write a function that flattens a nested list.",
    "Write a Python function to check whether a string is a palindrome.",
    "Write a binary search function in Python.",
    "Write a function that parses a CSV line into fields.",
    "Write a Python function that removes duplicates from a list while keeping order.",
    "Write a function that converts a Roman numeral to an integer.",
    "Write a Python function that returns the greatest common divisor of two numbers.",
    "Write a function that transposes a matrix given as a list of lists.",
    "Write a Python generator that yields the prime numbers below n.",
    "Write a function that validates an email address with a regular expression.",
    "Write a Python function that groups words by their first letter.",
    "Write a function that computes the moving average of a list of numbers.",
    "Write a Python class that represents a 2D point with a distance method.",
    "Write a function that reads a JSON file and returns the keys of the top-level object.",
    "Write a Python function that formats a number of seconds as HH:MM:SS.",
    "Write a function that finds the longest common prefix of a list of strings.",
]


@dataclass
class Sizes:
    vocab_bpe: int = 4000
    vocab_model: int = 4096
    hidden: int = 384
    layers: int = 8
    heads: int = 6
    kv_heads: int = 2
    head_dim: int = 64
    intermediate: int = 1024
    draft_layers: int = 3
    draft_intermediate: int = 1024
    taps: int = 3
    block: int = 8
    corpus_mb: int = 480
    tokenizer_mb: int = 40
    seq_len: int = 512
    target_steps: int = 8000
    target_minutes: float = 0.0  # >0: cap the steps so the stage fits this wall time
    target_batch: int = 128
    target_lr: float = 2e-3
    gen_prompts: int = 32768
    gen_tokens: int = 192
    gen_batch: int = 512
    anchors: int = 48
    draft_steps: int = 4000
    draft_minutes: float = 0.0
    draft_batch: int = 64
    draft_lr: float = 1e-3
    gamma: float = 4.0
    learned_mask: int = 1  # 1: learn the mask token's embedding with the drafter (see export)
    eval_tokens: int = 128

    @classmethod
    def cpu(cls) -> Sizes:
        """The fallback when no GPU is at hand: a smaller pair that trains in about an hour on
        two CPU cores (weaker than the GPU preset; docs/demo-pair.md reports which one shipped)."""
        return cls(
            vocab_bpe=2000, vocab_model=2048, hidden=192, layers=6, heads=3, kv_heads=1,
            intermediate=512, draft_layers=2, draft_intermediate=512, taps=2, corpus_mb=40,
            tokenizer_mb=10, seq_len=256, target_steps=4000, target_minutes=40, target_batch=16,
            gen_prompts=4096, gen_tokens=128, gen_batch=256, anchors=32, draft_steps=6000,
            draft_minutes=20, draft_batch=16,
        )  # fmt: skip

    @classmethod
    def tiny(cls) -> Sizes:
        return cls(
            vocab_bpe=500, vocab_model=512, hidden=128, layers=6, heads=2, kv_heads=1,
            intermediate=256, draft_layers=2, draft_intermediate=256, taps=2, corpus_mb=2,
            tokenizer_mb=1, seq_len=128, target_steps=30, target_batch=8, gen_prompts=64,
            gen_tokens=32, gen_batch=32, anchors=8, draft_steps=20, draft_batch=8, eval_tokens=24,
        )  # fmt: skip


START = time.time()
CKPT_EVERY_S = 300  # resumable checkpoints this often
DEADLINE_MIN = 0.0  # >0: wall-time budget for the whole process (set by --deadline-minutes)


def minutes_for(stage_minutes: float, reserve: float) -> float:
    """A stage's time budget: its own cap, shortened to leave `reserve` min before the deadline."""
    if DEADLINE_MIN <= 0:
        return stage_minutes
    left = DEADLINE_MIN - (time.time() - START) / 60 - reserve
    return max(0.5, min(stage_minutes, left) if stage_minutes > 0 else left)


def log(*parts: object) -> None:
    print(f"[{time.strftime('%H:%M:%S')}]", *parts, flush=True)


# ---------------------------------------------------------------------------------- corpus


def source_files() -> list[Path]:
    roots = {Path(sysconfig.get_paths()["stdlib"]), Path(sysconfig.get_paths()["purelib"])}
    files: list[Path] = []
    for root in sorted(roots):
        files.extend(p for p in root.rglob("*.py") if p.is_file())
    return sorted(set(files))


def function_tasks(src: str) -> list[tuple[str, str]]:
    """(request, code) pairs for functions with a docstring, as chat training data."""
    try:
        tree = ast.parse(src)
    except (SyntaxError, ValueError):
        return []
    lines = src.splitlines()
    tasks = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef) or node.name.startswith("_"):
            continue
        doc = ast.get_docstring(node)
        end = getattr(node, "end_lineno", None)
        if not doc or end is None or end - node.lineno > 40:
            continue
        summary = doc.strip().split("\n\n")[0].replace("\n", " ").strip().rstrip(".")
        if not 10 <= len(summary) <= 200:
            continue
        code = textwrap.dedent("\n".join(lines[node.lineno - 1 : end]))
        args = ", ".join(a.arg for a in node.args.args if a.arg != "self")
        verb = summary[0].lower() + summary[1:]
        tasks.append(
            (f"Write a Python function `{node.name}({args})` that does this: {verb}.", code)
        )
    return tasks


def build_corpus(work: Path, sz: Sizes, seed: int) -> None:
    if (work / "corpus.json").exists():
        return
    files = source_files()
    rng = random.Random(seed)
    seen: set[str] = set()
    docs: list[tuple[str, str]] = []
    for p in files:
        try:
            text = p.read_text("utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if not 512 <= len(text) <= 200_000:
            continue
        h = hashlib.sha256(text.encode()).hexdigest()
        if h in seen:
            continue
        seen.add(h)
        docs.append((str(p), text))
    rng.shuffle(docs)
    budget = sz.corpus_mb * 1_000_000
    kept, total = [], 0
    for path, text in docs:
        if total >= budget:
            break
        kept.append((path, text))
        total += len(text)
    n_val = max(1, len(kept) // 100)
    val, train = kept[:n_val], kept[n_val:]
    tasks = [t for _, text in train for t in function_tasks(text)]
    rng.shuffle(tasks)
    manifest = {
        "python": sys.version,
        "files": len(kept),
        "bytes": total,
        "tasks": len(tasks),
        "sha256": hashlib.sha256("".join(h for h in sorted(seen)).encode()).hexdigest(),
    }
    (work / "train.txt").write_text("\x00".join(t for _, t in train))
    (work / "val.txt").write_text("\x00".join(t for _, t in val))
    (work / "tasks.json").write_text(json.dumps(tasks))
    (work / "corpus.json").write_text(json.dumps(manifest, indent=2))
    log("corpus", manifest)


def chat(user: str, assistant: str | None = None) -> str:
    text = f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"
    return text + f"{assistant}<|im_end|>\n" if assistant is not None else text


# ---------------------------------------------------------------------------------- tokenizer


def train_tokenizer(work: Path, sz: Sizes) -> None:
    if (work / "tokenizer.json").exists():
        return
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    text = (work / "train.txt").read_text()[: sz.tokenizer_mb * 1_000_000]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=sz.vocab_bpe,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator((d for d in text.split("\x00")), trainer=trainer)
    tok.add_special_tokens([MASK])
    tok.save(str(work / "tokenizer.json"))
    log("tokenizer", tok.get_vocab_size(), "mask id", tok.token_to_id(MASK))


def load_tokenizer(work: Path):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(work / "tokenizer.json"))


def encode_stream(work: Path, name: str, docs: list[str]) -> torch.Tensor:
    path = work / f"{name}.tokens.pt"
    if path.exists():
        return torch.load(path)
    tok = load_tokenizer(work)
    eot = tok.token_to_id("<|endoftext|>")
    out: list[int] = []
    for i in range(0, len(docs), 2048):
        for enc in tok.encode_batch(docs[i : i + 2048]):
            out.extend(enc.ids)
            out.append(eot)
    t = torch.tensor(out, dtype=torch.int16 if max(out) < 32767 else torch.int32)
    torch.save(t, path)
    return t


def token_streams(work: Path) -> tuple[torch.Tensor, torch.Tensor]:
    train_docs = (work / "train.txt").read_text().split("\x00")
    tasks = json.loads((work / "tasks.json").read_text())
    chats = [chat(q, f"```python\n{a}\n```") for q, a in tasks]
    mixed = train_docs + chats
    random.Random(1).shuffle(mixed)
    train = encode_stream(work, "train", mixed)
    val = encode_stream(work, "val", (work / "val.txt").read_text().split("\x00"))
    return train, val


# ---------------------------------------------------------------------------------- target


def target_args(sz: Sizes, tok) -> ModelArgs:
    return ModelArgs(
        vocab_size=sz.vocab_model,
        hidden_size=sz.hidden,
        intermediate_size=sz.intermediate,
        num_hidden_layers=sz.layers,
        num_attention_heads=sz.heads,
        num_key_value_heads=sz.kv_heads,
        head_dim=sz.head_dim,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        eos_token_ids=[tok.token_to_id("<|im_end|>")],
    )


def init_weights(module: torch.nn.Module) -> None:
    """GPT-style init (std 0.02), as Hugging Face's `initializer_range`."""
    if isinstance(module, torch.nn.Linear | torch.nn.Embedding):
        torch.nn.init.normal_(module.weight, std=0.02)
        if getattr(module, "bias", None) is not None:
            torch.nn.init.zeros_(module.bias)


def batches(stream: torch.Tensor, batch: int, seq: int, gen: torch.Generator):
    n = stream.numel() - seq - 1
    while True:
        idx = torch.randint(0, n, (batch,), generator=gen)
        rows = torch.stack([stream[i : i + seq + 1].long() for i in idx.tolist()])
        yield rows[:, :-1], rows[:, 1:]


def lr_at(step: int, total: int, peak: float) -> float:
    warm = min(200, max(1, total // 25))
    if step < warm:
        return peak * step / warm
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warm) / (total - warm))))


def fit_steps(per_step: float, planned: int, minutes: float, done: int) -> int:
    """Cap `planned` so the remaining steps fit `minutes` at `per_step` seconds (0 = no cap)."""
    if minutes <= 0:
        return planned
    fitted = min(planned, done + int(minutes * 60 / per_step))
    log(f"{per_step * 1000:.0f} ms/step: {fitted} steps fit {minutes:.1f} min (planned {planned})")
    return fitted


def train_target(work: Path, sz: Sizes, dev: torch.device, seed: int) -> None:
    final = work / "target.pt"
    if final.exists():
        return
    tok = load_tokenizer(work)
    train, val = token_streams(work)
    log("tokens: train", train.numel(), "val", val.numel())
    torch.manual_seed(seed)
    model = Qwen3(target_args(sz, tok)).to(dev)
    model.apply(init_weights)
    opt = torch.optim.AdamW(
        model.parameters(), lr=sz.target_lr, betas=(0.9, 0.95), weight_decay=0.1
    )
    start = 0
    ckpt = work / "target.ckpt"
    if ckpt.exists():
        state = torch.load(ckpt, map_location=dev)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = state["step"]
        log("resumed target at step", start)
    gen = torch.Generator().manual_seed(seed + start)
    fwd = torch.compile(model) if dev.type == "cuda" else model
    data = batches(train, sz.target_batch, sz.seq_len, gen)
    t0 = saved = time.time()
    total = sz.target_steps
    step = start
    while step < total:
        if step == start + 10:
            t_mark = time.time()  # after compilation and warm-up
        if step == start + 50:
            per_step = (time.time() - t_mark) / 40
            budget = minutes_for(sz.target_minutes, 1.5)
            total = fit_steps(per_step, total, budget, step - start)
        for g in opt.param_groups:
            g["lr"] = lr_at(step, total, sz.target_lr)
        x, y = (t.to(dev, non_blocking=True) for t in next(data))
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            logits, _ = fwd(x)
        loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 250 == 0 or step == total - 1:
            log(f"target step {step} loss {loss.item():.3f} {time.time() - t0:.0f}s")
        if step and time.time() - saved > CKPT_EVERY_S:
            saved = time.time()
            torch.save(
                {"model": model.state_dict(), "opt": opt.state_dict(), "step": step + 1}, ckpt
            )
        step += 1
    model.eval()
    vl = evaluate_loss(model, val, sz, dev)
    log(f"target held-out loss {vl:.3f} after {total} steps")
    state = {k: v.to(torch.bfloat16) for k, v in model.state_dict().items()}
    torch.save({"model": state, "val_loss": vl, "steps": total}, final)


@torch.no_grad()
def evaluate_loss(model: Qwen3, val: torch.Tensor, sz: Sizes, dev: torch.device) -> float:
    gen = torch.Generator().manual_seed(0)
    data = batches(val, min(32, sz.target_batch), sz.seq_len, gen)
    losses = []
    for _ in range(8):
        x, y = (t.to(dev) for t in next(data))
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            logits, _ = model(x)
        losses.append(F.cross_entropy(logits.float().flatten(0, 1), y.flatten()).item())
    return sum(losses) / len(losses)


def load_target(work: Path, sz: Sizes, dev: torch.device) -> Qwen3:
    tok = load_tokenizer(work)
    model = Qwen3(target_args(sz, tok)).to(dev)
    model.load_state_dict(torch.load(work / "target.pt", map_location=dev)["model"])
    return model.eval()


# ---------------------------------------------------------------------------------- continuations


@torch.no_grad()
def greedy_batch(model: Qwen3, prompts: torch.Tensor, n_new: int) -> torch.Tensor:
    """prompts [N, P] (same length) -> [N, P + n_new] greedy continuations with a KV cache."""
    n, p = prompts.shape
    model.setup_caches(p + n_new, batch=n)
    pos = torch.arange(p, device=prompts.device)
    logits, _ = model(prompts, pos)
    out = [prompts, logits[:, -1:].argmax(-1)]
    for i in range(n_new - 1):
        logits, _ = model(out[-1], torch.tensor([p + i], device=prompts.device))
        out.append(logits[:, -1:].argmax(-1))
    for layer in model.layers:
        layer.self_attn.kv_cache = None
    return torch.cat(out, dim=1)


def make_prompts(work: Path, sz: Sizes, seed: int) -> None:
    """Prompts for the continuations (half chat requests, half 64-token source snippets), and
    the check that no evaluation prompt occurs in the training text."""
    path = work / "prompts.pt"
    if path.exists():
        return
    tok = load_tokenizer(work)
    tasks = json.loads((work / "tasks.json").read_text())
    train_tokens, _ = token_streams(work)
    rng = random.Random(seed)
    requests = [chat(q) for q, _ in rng.sample(tasks, min(len(tasks), sz.gen_prompts // 2))]
    by_len: dict[int, list[list[int]]] = {}
    for enc in tok.encode_batch(requests):
        by_len.setdefault(len(enc.ids), []).append(enc.ids)
    groups = [torch.tensor(v, dtype=torch.int16) for v in by_len.values()]
    n_raw = sz.gen_prompts - sum(len(g) for g in groups)
    plen = 64
    gen = torch.Generator().manual_seed(seed)
    starts = torch.randint(0, train_tokens.numel() - plen, (n_raw,), generator=gen)
    groups.append(torch.stack([train_tokens[s : s + plen] for s in starts.tolist()]))
    corpus = (work / "train.txt").read_text()
    tasks_text = (work / "tasks.json").read_text()
    leaked = [p for p in EVAL_PROMPTS if p in corpus or p in tasks_text]
    manifest = json.loads((work / "corpus.json").read_text())
    manifest["eval_prompts_in_training_text"] = leaked
    (work / "corpus.json").write_text(json.dumps(manifest, indent=2))
    torch.save({"groups": groups}, path)
    log("prompts", sum(len(g) for g in groups), "eval prompts found in training text:", leaked)


def make_continuations(work: Path, sz: Sizes, dev: torch.device) -> None:
    path = work / "continuations.pt"
    if path.exists():
        return
    model = load_target(work, sz, dev)
    groups = torch.load(work / "prompts.pt")["groups"]
    seqs: list[torch.Tensor] = []
    prompt_lens: list[int] = []
    t0 = time.time()
    with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
        for g in groups:
            for i in range(0, len(g), sz.gen_batch):
                chunk = g[i : i + sz.gen_batch].long().to(dev)
                out = greedy_batch(model, chunk, sz.gen_tokens).cpu()
                seqs.extend(out.to(torch.int16))
                prompt_lens.extend([chunk.shape[1]] * len(chunk))
    log("continuations", len(seqs), f"{time.time() - t0:.0f}s")
    torch.save({"seqs": seqs, "prompt_lens": prompt_lens}, path)


# ---------------------------------------------------------------------------------- drafter


def drafter_config(sz: Sizes, tok) -> dict:
    ids = build_target_layer_ids(sz.layers, sz.taps)
    return {
        "architectures": ["DFlashDraftModel"],
        "model_type": "qwen3",
        "hidden_size": sz.hidden,
        "intermediate_size": sz.draft_intermediate,
        "num_hidden_layers": sz.draft_layers,
        "num_attention_heads": sz.heads,
        "num_key_value_heads": sz.kv_heads,
        "head_dim": sz.head_dim,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "max_position_embeddings": 2048,
        "vocab_size": sz.vocab_model,
        "tie_word_embeddings": False,
        "attention_bias": False,
        "layer_types": ["full_attention"] * sz.draft_layers,
        "sliding_window": 64,
        "use_sliding_window": True,
        "block_size": sz.block,
        "num_target_layers": sz.layers,
        "target_hidden_size": sz.hidden,
        "dflash_config": {
            "mask_token_id": tok.token_to_id(MASK),
            "target_layer_ids": ids,
            "block_size": sz.block,
        },
        "torch_dtype": "bfloat16",
    }


def drafter_forward_train(
    drafter: Drafter,
    target: Qwen3,
    seq: torch.Tensor,
    anchors: torch.Tensor,
    mask_id: int,
    mask_emb: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """seq [N, S]; anchors [N, A] -> logits [N, A, B-1, V] and labels [N, A, B-1].

    Each block [anchor, mask x (B-1)] at positions a..a+B-1 sees context positions < a and its
    own block (bidirectional or causal per layer), never another block. `mask_emb` [H], when
    given, replaces the target's embedding row of the mask token.
    """
    n, s = seq.shape
    a_n = anchors.shape[1]
    b = drafter.args.block_size
    dev = seq.device
    with torch.no_grad():
        taps = sorted(drafter.args.captured_layers)
        _, feats = target(seq, taps=tuple(taps))
    ctx = drafter.project_context(feats)  # [N, S, H]
    offs = torch.arange(b, device=dev)
    q_pos = (anchors[:, :, None] + offs).reshape(n, a_n * b)  # [N, A*B]
    block_ids = torch.full((n, a_n, b), mask_id, device=dev, dtype=torch.long)
    block_ids[:, :, 0] = torch.gather(seq, 1, anchors)
    labels = torch.gather(seq, 1, (anchors[:, :, None] + offs[1:]).reshape(n, -1)).view(
        n, a_n, b - 1
    )
    x = target.embed_tokens(block_ids.view(n, a_n * b))  # [N, A*B, H]
    if mask_emb is not None:
        is_mask = (block_ids.view(n, a_n * b) == mask_id)[..., None]
        x = torch.where(is_mask, mask_emb.to(x.dtype), x)
    ctx_pos = torch.arange(s, device=dev)
    block_of = torch.arange(a_n, device=dev).repeat_interleave(b)  # [A*B]
    slot = offs.repeat(a_n)
    # ctx part [N, A*B, S]: key p visible iff p < anchor of the query's block
    anchor_q = anchors.repeat_interleave(b, dim=1)  # [N, A*B]
    see_ctx = ctx_pos[None, None, :] < anchor_q[:, :, None]
    same_block = block_of[:, None] == block_of[None, :]  # [A*B, A*B]
    cos_c, sin_c = drafter.rope_cos[ctx_pos], drafter.rope_sin[ctx_pos]
    cos_q, sin_q = drafter.rope_cos[q_pos][:, None], drafter.rope_sin[q_pos][:, None]
    for layer in drafter.layers:
        attn = layer.self_attn
        blk = same_block & (slot[None, :] <= slot[:, None]) if attn.causal else same_block
        ctx_vis = see_ctx
        blk_vis = blk[None].expand(n, -1, -1)
        if attn.window is not None:
            ctx_vis = ctx_vis & (q_pos[:, :, None] - ctx_pos[None, None, :] < attn.window)
            blk_vis = blk_vis & (q_pos[:, :, None] - q_pos[:, None, :] < attn.window)
        mask = torch.cat([ctx_vis, blk_vis], dim=-1)[:, None]  # [N, 1, A*B, S + A*B]
        ck, cv = attn.context_kv(ctx, cos_c, sin_c)
        h = layer.input_layernorm(x)
        q = attn.q_norm(attn.q_proj(h).view(n, -1, attn.n_head, attn.head_dim)).transpose(1, 2)
        k = attn.k_norm(attn.k_proj(h).view(n, -1, attn.n_kv, attn.head_dim)).transpose(1, 2)
        v = attn.v_proj(h).view(n, -1, attn.n_kv, attn.head_dim).transpose(1, 2)
        q = rope_q(q, cos_q, sin_q)
        k = rope_q(k, cos_q, sin_q)
        y = F.scaled_dot_product_attention(
            q, torch.cat([ck, k], 2), torch.cat([cv, v], 2), attn_mask=mask,
            enable_gqa=attn.n_head != attn.n_kv,
        )  # fmt: skip
        x = x + attn.o_proj(y.transpose(1, 2).reshape(n, a_n * b, -1))
        x = x + layer.mlp(layer.post_attention_layernorm(x))
    x = drafter.norm(x).view(n, a_n, b, -1)[:, :, 1:]
    return target.lm_head(x), labels


def rope_q(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # x: [N, h, Q, D]; cos/sin: [N, 1, Q, D] (per-row positions)
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return (x * cos + rotated * sin).to(x.dtype)


def train_drafter(work: Path, sz: Sizes, dev: torch.device, seed: int) -> None:
    final = work / "drafter.pt"
    if final.exists():
        return
    tok = load_tokenizer(work)
    target = load_target(work, sz, dev)
    for p in target.parameters():
        p.requires_grad_(False)
    cfg = drafter_config(sz, tok)
    torch.manual_seed(seed)
    drafter = Drafter(DrafterArgs.from_hf_config(cfg, num_target_layers=sz.layers)).to(dev)
    drafter.apply(init_weights)
    # the mask token's own embedding [H]: a fresh random row with the scale of the target's
    # trained rows (the target's <|mask|> row never got a gradient from an input)
    emb = target.embed_tokens.weight
    mask_emb = torch.nn.Parameter(torch.randn(emb.shape[1], device=dev) * emb.std())
    params = [*drafter.parameters(), *([mask_emb] if sz.learned_mask else [])]
    data = torch.load(work / "continuations.pt")
    rows = data["seqs"]
    plens = data["prompt_lens"]
    opt = torch.optim.AdamW(params, lr=sz.draft_lr, betas=(0.9, 0.95), weight_decay=0.01)
    start = 0
    ckpt = work / "drafter.ckpt"
    if ckpt.exists():
        state = torch.load(ckpt, map_location=dev)
        drafter.load_state_dict(state["model"])
        if "mask_embedding" in state:
            mask_emb.data.copy_(state["mask_embedding"])
        opt.load_state_dict(state["opt"])
        start = state["step"]
        log("resumed drafter at step", start)
    gen = torch.Generator().manual_seed(seed + start)
    b = sz.block
    weights = torch.exp(-torch.arange(b - 1, device=dev, dtype=torch.float) / sz.gamma)
    mask_id = cfg["dflash_config"]["mask_token_id"]
    # Pad every row to the same length (rows differ by prompt length) with <|endoftext|>.
    width = max(r.numel() for r in rows)
    eot = tok.token_to_id("<|endoftext|>")
    table = torch.full((len(rows), width), eot, dtype=torch.long)
    lens = torch.tensor([r.numel() for r in rows])
    for i, r in enumerate(rows):
        table[i, : r.numel()] = r.long()
    plens_t = torch.tensor(plens)
    t0 = saved = time.time()
    total = sz.draft_steps
    step = start
    while step < total:
        if step == start + 10:
            t_mark = time.time()  # after compilation and warm-up
        if step == start + 50:
            per_step = (time.time() - t_mark) / 40
            budget = minutes_for(sz.draft_minutes, 1.0)
            total = fit_steps(per_step, total, budget, step - start)
        for g in opt.param_groups:
            g["lr"] = lr_at(step, total, sz.draft_lr)
        pick = torch.randint(0, len(rows), (sz.draft_batch,), generator=gen)
        seq = table[pick].to(dev)
        lo = (plens_t[pick] - 1).clamp(min=1)  # anchors in the generated part
        hi = lens[pick] - b  # last anchor whose block fits
        u = torch.rand(sz.draft_batch, sz.anchors, generator=gen)
        anchors = (lo[:, None] + (u * (hi - lo + 1)[:, None]).long()).to(dev)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            logits, labels = drafter_forward_train(
                drafter, target, seq, anchors, mask_id, mask_emb if sz.learned_mask else None
            )
        ce = F.cross_entropy(
            logits.float().flatten(0, 2), labels.flatten(), reduction="none"
        ).view_as(labels)
        loss = (ce * weights).sum() / (weights.sum() * labels.shape[0] * labels.shape[1])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if step % 250 == 0 or step == total - 1:
            with torch.no_grad():
                acc = (logits.argmax(-1) == labels).float().mean((0, 1))
            per_pos = [round(a, 2) for a in acc.tolist()]
            took = time.time() - t0
            log(f"drafter step {step} loss {loss.item():.3f} acc/pos {per_pos} {took:.0f}s")
        if step and time.time() - saved > CKPT_EVERY_S:
            saved = time.time()
            state = {"model": drafter.state_dict(), "opt": opt.state_dict(), "step": step + 1}
            torch.save(state | {"mask_embedding": mask_emb.detach()}, ckpt)
        step += 1
    log(f"drafter trained for {total} steps")
    out = {"model": drafter.state_dict(), "steps": total}
    if sz.learned_mask:
        out["mask_embedding"] = mask_emb.detach().cpu()
    torch.save(out, final)


# ---------------------------------------------------------------------------------- export


def export(work: Path, out: Path, sz: Sizes) -> None:
    from safetensors.torch import save_file

    tok = load_tokenizer(work)
    t_dir, d_dir = out / "target", out / "drafter"
    t_dir.mkdir(parents=True, exist_ok=True)
    d_dir.mkdir(parents=True, exist_ok=True)
    a = target_args(sz, tok)
    im_end = tok.token_to_id("<|im_end|>")
    eot = tok.token_to_id("<|endoftext|>")
    t_cfg = {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "vocab_size": a.vocab_size,
        "hidden_size": a.hidden_size,
        "intermediate_size": a.intermediate_size,
        "num_hidden_layers": a.num_hidden_layers,
        "num_attention_heads": a.num_attention_heads,
        "num_key_value_heads": a.num_key_value_heads,
        "head_dim": a.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": a.max_position_embeddings,
        "rms_norm_eps": a.rms_norm_eps,
        "rope_theta": a.rope_theta,
        "tie_word_embeddings": True,
        "attention_bias": False,
        "use_sliding_window": False,
        "bos_token_id": None,
        "eos_token_id": im_end,
        "pad_token_id": eot,
        "torch_dtype": "bfloat16",
    }
    state = torch.load(work / "target.pt", map_location="cpu")["model"]
    drafted = torch.load(work / "drafter.pt", map_location="cpu")
    if "mask_embedding" in drafted:
        # the drafter's learned mask embedding lives in the target's <|mask|> row: the target
        # never reads it as an input, and eval checks its greedy text never emits the token
        state["embed_tokens.weight"] = state["embed_tokens.weight"].clone()
        state["embed_tokens.weight"][tok.token_to_id(MASK)] = drafted["mask_embedding"]
    hf = {}
    for k, v in state.items():
        if k.startswith("rope_") or k == "lm_head.weight":
            continue
        hf[f"model.{k}"] = v.to(torch.bfloat16).contiguous()
    write_shards(hf, t_dir, 15_000_000, save_file)
    (t_dir / "config.json").write_text(json.dumps(t_cfg, indent=2) + "\n")
    (t_dir / "generation_config.json").write_text(
        json.dumps({"eos_token_id": im_end, "pad_token_id": eot}, indent=2) + "\n"
    )
    tok.save(str(t_dir / "tokenizer.json"))
    (t_dir / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "eos_token": "<|im_end|>",
                "pad_token": "<|endoftext|>",
                "bos_token": None,
                "unk_token": None,
                "model_max_length": a.max_position_embeddings,
                "clean_up_tokenization_spaces": False,
            },
            indent=2,
        )
        + "\n"
    )
    (t_dir / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    d_cfg = drafter_config(sz, tok)
    d_state = drafted["model"]
    d_hf = {
        k: v.to(torch.bfloat16).contiguous()
        for k, v in d_state.items()
        if not k.startswith("rope_")
    }
    write_shards(d_hf, d_dir, 15_000_000, save_file)
    (d_dir / "config.json").write_text(json.dumps(d_cfg, indent=2) + "\n")
    (out / "eval_prompts.json").write_text(json.dumps(EVAL_PROMPTS, indent=2) + "\n")
    log(
        "exported", sorted(p.name for p in t_dir.iterdir()), sorted(p.name for p in d_dir.iterdir())
    )


def write_shards(tensors: dict, out: Path, max_bytes: int, save_file) -> None:
    shards: list[dict] = [{}]
    size = 0
    for k in sorted(tensors):
        nbytes = tensors[k].numel() * tensors[k].element_size()
        if shards[-1] and size + nbytes > max_bytes:
            shards.append({})
            size = 0
        shards[-1][k] = tensors[k]
        size += nbytes
    if len(shards) == 1:
        save_file(shards[0], str(out / "model.safetensors"), metadata={"format": "pt"})
        return
    weight_map = {}
    for i, shard in enumerate(shards):
        name = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, str(out / name), metadata={"format": "pt"})
        weight_map.update({k: name for k in shard})
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")


# ---------------------------------------------------------------------------------- eval


def ngram_tau(tokens: list[int], prompt_len: int, k: int, n_max: int = 4, n_min: int = 2) -> float:
    """Mean tokens per step of a prompt-lookup drafter replaying a fixed greedy output."""
    pos, steps, committed = prompt_len, 0, 0
    while pos < len(tokens):
        proposal: list[int] = []
        for n in range(n_max, n_min - 1, -1):
            if pos < n:
                continue
            key = tokens[pos - n : pos]
            for j in range(pos - n - 1, -1, -1):
                if tokens[j : j + n] == key:
                    proposal = tokens[j + n : j + n + k]
                    break
            if proposal:
                break
        acc = 0
        while (
            acc < len(proposal) and pos + acc < len(tokens) and proposal[acc] == tokens[pos + acc]
        ):
            acc += 1
        step = min(acc + 1, len(tokens) - pos)
        pos += step
        committed += step
        steps += 1
    return committed / max(steps, 1)


def repeat_share(tokens: list[int], prompt_len: int, n: int = 6) -> float:
    gen = tokens[prompt_len:]
    seen: set[tuple[int, ...]] = set()
    hits = 0
    for i in range(len(tokens)):
        if i >= n:
            seen.add(tuple(tokens[i - n : i]))
        if i >= prompt_len and i + n <= len(tokens) and tuple(tokens[i : i + n]) in seen:
            hits += 1
    return hits / max(len(gen), 1)


def run_prompts(engine, sz: Sizes) -> dict:
    """Greedy generation of every eval prompt: acceptance, n-gram acceptance, repeat share."""
    rows, drafts, accepted, ngram, reps = [], 0, 0, [], []
    for prompt in EVAL_PROMPTS:
        ids = engine.tokenizer.apply_chat_template([{"role": "user", "content": prompt}])
        res = engine.generate(ids, max_new_tokens=sz.eval_tokens)
        toks = ids + res.tokens
        drafts += res.stats.num_drafts
        accepted += res.stats.num_accepted_tokens
        ngram.append(ngram_tau(toks, len(ids), sz.block - 1))
        reps.append(repeat_share(toks, len(ids)))
        rows.append({"prompt": prompt, "tau": res.stats.mean_acceptance_length,
                     "ngram_tau": ngram[-1], "repeat": reps[-1], "tokens": res.tokens,
                     "text": engine.tokenizer.decode(res.tokens)})  # fmt: skip
    return {
        "mean_acceptance_length": 1 + accepted / max(drafts, 1),
        "ngram_mean_acceptance_length": sum(ngram) / len(ngram),
        "repeat_share": sum(reps) / len(reps),
        "rows": rows,
    }


def evaluate(work: Path, out: Path, sz: Sizes) -> None:
    """Held-out acceptance of the pair, and of each stale rewrite of the field story."""
    import tempfile

    from dflashctl.engine.generate import Engine
    from dflashctl.stale import write_stale_copy

    manifest = json.loads((work / "corpus.json").read_text())
    engine = Engine.load(out / "target", out / "drafter", device="cpu", dtype=torch.float32)
    healthy = run_prompts(engine, sz)
    report = {
        "prompts_in_training_text": manifest.get("eval_prompts_in_training_text"),
        "target_val_loss": torch.load(work / "target.pt")["val_loss"],
        **{k: v for k, v in healthy.items() if k != "rows"},
        # the target's tied lm_head row of <|mask|> holds the drafter's mask embedding: it must
        # never win the target's argmax
        "mask_tokens_in_target_text": sum(
            r["tokens"].count(engine.drafter.args.mask_token_id) for r in healthy["rows"]
        ),
        "stale": {},
        "rows": [{k: v for k, v in r.items() if k != "tokens"} for r in healthy["rows"]],
    }
    log("eval", {k: v for k, v in report.items() if k not in ("rows", "stale")})
    variants = [("ids",), ("mask",), ("layer_types",), ("ids", "mask", "layer_types")]
    with tempfile.TemporaryDirectory() as tmp:
        for rewrite in variants:
            d = Path(tmp) / "-".join(rewrite)
            write_stale_copy(out / "drafter", d, rewrite)
            res = run_prompts(Engine.load(out / "target", d, dtype=torch.float32), sz)
            pairs = zip(res["rows"], healthy["rows"], strict=True)
            same = sum(a["tokens"] == b["tokens"] for a, b in pairs)
            report["stale"]["+".join(rewrite)] = {
                "mean_acceptance_length": res["mean_acceptance_length"],
                "same_text_prompts": same,
            }
            log("stale", rewrite, report["stale"]["+".join(rewrite)])
    (out / "eval.json").write_text(json.dumps(report, indent=2) + "\n")


def registry_entry(out: Path, sz: Sizes, dest: Path) -> None:
    """playbooks/drafters/demo.yaml: the pair's canonical values, file hashes, measured range."""
    cfg = json.loads((out / "drafter" / "config.json").read_text())
    t_cfg = json.loads((out / "target" / "config.json").read_text())
    report = json.loads((out / "eval.json").read_text())
    taus = sorted(r["tau"] for r in report["rows"])
    lo, hi = taus[len(taus) // 10], taus[-1 - len(taus) // 10]  # 10th..90th percentile
    mean = report["mean_acceptance_length"]
    files = sorted(p for p in (out / "drafter").iterdir() if p.is_file())
    dc = cfg["dflash_config"]
    lines = [
        "name: demo",
        "repo: dflashctl/demo-drafter  # embedded: dflashctl/assets/demo/drafter",
        "revision: null  # not on a Hub; the file hashes below pin it",
        "kind: dflash",
        "confidence: high",
        'source: "trained by training/demo_pair.py; acceptance: its eval stage (eval.json)"',
        "files:",
        *[f"  - {{path: {f.name}, sha256: {hashlib.sha256(f.read_bytes()).hexdigest()}, "
          f"size: {f.stat().st_size}}}" for f in files],
        f"architectures: {json.dumps(cfg['architectures'])}",
        f"model_type: {cfg['model_type']}",
        *[f"{k}: {cfg[k]}" for k in ("num_hidden_layers", "hidden_size", "intermediate_size",
          "num_attention_heads", "num_key_value_heads", "head_dim", "vocab_size", "block_size",
          "sliding_window")],
        f"mask_token_id: {dc['mask_token_id']}",
        f"target_layer_ids: {json.dumps(dc['target_layer_ids'])}",
        f"layer_types: [{', '.join(cfg['layer_types'])}]",
        f"rope_theta: {cfg['rope_theta']}",
        "expected_acceptance:",
        f"  min: {lo:.2f}",
        f"  max: {hi:.2f}",
        f'  source: "eval.json: 10th to 90th percentile of {len(taus)} held-out prompts, '
        f'greedy, {sz.eval_tokens} tokens, block {sz.block}; mean {mean:.2f}"',
        "target:",
        "  repo: dflashctl/demo-target  # embedded: dflashctl/assets/demo/target",
        f"  num_hidden_layers: {t_cfg['num_hidden_layers']}",
        f"  hidden_size: {t_cfg['hidden_size']}",
        f"  vocab_size: {t_cfg['vocab_size']}",
        'notes: "The embedded demo pair: dflashctl serve/smoke/demo use it by default."',
    ]  # fmt: skip
    dest.write_text("\n".join(lines) + "\n")
    log("registry entry", dest)


# ---------------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--work", type=Path, required=True, help="scratch dir (resumable state)")
    ap.add_argument("--out", type=Path, required=True, help="where target/ and drafter/ go")
    ap.add_argument(
        "--stages",
        default="corpus,tokenizer,target,prompts,continuations,drafter,export,eval,registry",
    )
    ap.add_argument(
        "--preset", choices=["gpu", "cpu", "tiny"], default="gpu",
        help="gpu: the shipped sizes (an H200); cpu: a smaller pair for two CPU cores; "
        "tiny: a smoke run",
    )  # fmt: skip
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--deadline-minutes", type=float, default=0.0, help="whole-run time budget")
    ap.add_argument("--set", action="append", default=[], help="override a size: name=value")
    args = ap.parse_args()
    global DEADLINE_MIN
    DEADLINE_MIN = args.deadline_minutes
    sz = {"gpu": Sizes, "cpu": Sizes.cpu, "tiny": Sizes.tiny}[args.preset]()
    for kv in args.set:
        k, v = kv.split("=", 1)
        setattr(sz, k, type(getattr(sz, k))(v))
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    log("device", dev, "sizes", asdict(sz))
    stages = args.stages.split(",")
    if "corpus" in stages:
        build_corpus(args.work, sz, args.seed)
    if "tokenizer" in stages:
        train_tokenizer(args.work, sz)
    if "target" in stages:
        train_target(args.work, sz, dev, args.seed)
    if "prompts" in stages:
        make_prompts(args.work, sz, args.seed)
    if "continuations" in stages:
        make_continuations(args.work, sz, dev)
    if "drafter" in stages:
        train_drafter(args.work, sz, dev, args.seed)
    if "export" in stages:
        export(args.work, args.out, sz)
    if "eval" in stages:
        evaluate(args.work, args.out, sz)
    if "registry" in stages:
        registry_entry(args.out, sz, args.out / "demo.yaml")


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
    main()
