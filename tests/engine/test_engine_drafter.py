"""The engine's DFlash drafter against an independent, step-by-step reference of its forward.

The reference below is written from the semantics in shared docs dflash-facts.md §1 and §6, not
from the engine's code: per query and key it decides visibility in plain Python, attends head by
head, and applies RoPE by explicit cos/sin pairs. Target features come from transformers'
`Qwen3ForCausalLM` (forward hooks on the decoder layers: "output of layer L"), so the engine's tap
convention (+1) is checked on the way. Where the z-lab reference package `dflash` is installed in
a separate environment (`DFLASH_REFERENCE_PYTHON=/path/to/python`), it is checked too.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from support.tiny_checkpoints import MASK, VOCAB, write_drafter, write_target

from dflashctl.engine.drafter import DrafterArgs
from dflashctl.engine.generate import Engine
from dflashctl.errors import EngineError

pytest.importorskip("transformers")

TOL = {"rtol": 1e-5, "atol": 3e-5}
PROMPT_LEN = 14
WINDOW = 6

# config variants: overrides of the tiny drafter config -> expected (causal, window) per layer
SLIDING, FULL = "sliding_attention", "full_attention"
VARIANTS: dict[str, tuple[dict[str, Any], list[tuple[bool, int | None]]]] = {
    "legacy-all-full": ({}, [(False, None), (False, None)]),
    "swa-then-full": (
        {
            "layer_types": [SLIDING, FULL],
            "dflash_config": {
                "mask_token_id": MASK,
                "target_layer_ids": [0, 2],
                "swa_window_size": WINDOW,
            },
        },
        [(True, WINDOW), (False, None)],
    ),
    "swa-dflash_config.causal-false": (
        {
            "layer_types": [SLIDING, SLIDING],
            "dflash_config": {
                "mask_token_id": MASK,
                "target_layer_ids": [0, 2],
                "swa_window_size": WINDOW,
                "causal": False,
            },
        },
        [(False, WINDOW), (False, WINDOW)],
    ),
    "top-is_causal-true-full": ({"is_causal": True}, [(True, None), (True, None)]),
    "is_causal-false-beats-dflash_config.causal": (
        {
            "is_causal": False,
            "dflash_config": {"mask_token_id": MASK, "target_layer_ids": [0, 2], "causal": True},
        },
        [(False, None), (False, None)],
    ),
    "top-sliding_window-with-use_sliding_window": (
        {
            "layer_types": [SLIDING, SLIDING],
            "sliding_window": WINDOW,
            "use_sliding_window": True,
        },
        [(True, WINDOW), (True, WINDOW)],
    ),
    "use_swa-no-layer_types": (
        {
            "layer_types": None,
            "dflash_config": {
                "mask_token_id": MASK,
                "target_layer_ids": [0, 2],
                "use_swa": True,
                "swa_window_size": 3,
            },
        },
        [(False, 3), (False, 3)],
    ),
    "new-dialect-rope_parameters-taps-1-2": (
        {
            "rope_theta": None,
            "rope_parameters": {"rope_type": "default", "rope_theta": 777.0},
            "block_size": None,
            "dflash_config": {"mask_token_id": MASK, "target_layer_ids": [1, 2], "block_size": 5},
        },
        [(False, None), (False, None)],
    ),
}


# ------------------------------------------------------------------------------ the reference


def rms(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return w * (x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps))


def rope(x: torch.Tensor, positions: list[int], theta: float) -> torch.Tensor:
    """x [S, D] one head; rotate pairs (j, j + D/2) by angle pos * theta^(-2j/D)."""
    d = x.shape[-1]
    out = torch.empty_like(x)
    for s, pos in enumerate(positions):
        for j in range(d // 2):
            a = pos * theta ** (-2 * j / d)
            c, n = math.cos(a), math.sin(a)
            x1, x2 = x[s, j], x[s, j + d // 2]
            out[s, j] = x1 * c - x2 * n
            out[s, j + d // 2] = x2 * c + x1 * n
    return out


def layer_attention(cfg: dict[str, Any], i: int) -> tuple[bool, int | None]:
    """(causal, window) of drafter layer i, as dflash-facts.md §3 and §6 state it."""
    dfc = cfg.get("dflash_config") or {}
    types = cfg.get("layer_types")
    n = cfg["num_hidden_layers"]
    sliding_window = cfg.get("sliding_window") if cfg.get("use_sliding_window") else None
    if types is None:  # transformers' Qwen3Config fills it in
        types = [SLIDING if sliding_window is not None else FULL] * n
    if cfg.get("is_causal") is not None:
        causal = bool(cfg["is_causal"])
    elif dfc.get("causal") is not None:
        causal = bool(dfc["causal"])
    else:
        causal = types[i] == SLIDING
    # use_swa makes every layer sliding when no layer type says sliding
    sliding = bool(dfc.get("use_swa")) if SLIDING not in types else types[i] == SLIDING
    window = dfc.get("swa_window_size", sliding_window) if sliding else None
    return causal, window


def visible(q: int, k: int, start: int, causal: bool, window: int | None) -> bool:
    """Query at absolute position q sees key at k: all context (k < start) and its block (causal
    or not), both limited by the window, which is two-sided when the block is bidirectional."""
    if k >= start and causal and k > q:
        return False
    if window is not None:
        if q - k >= window:
            return False
        if not causal and k - q >= window:
            return False
    return True


def reference_block_logits(
    cfg: dict[str, Any],
    w: dict[str, torch.Tensor],
    feats: torch.Tensor,
    block: list[int],
    embed: torch.Tensor,
    lm_head: torch.Tensor,
) -> torch.Tensor:
    """feats [C, T*n]: concatenated target features of positions 0..C-1; block at C..C+B-1.
    Returns logits [B-1, V] for slots 1..B-1."""
    nh, nkv, d = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    theta = (cfg.get("rope_parameters") or {}).get("rope_theta") or cfg.get("rope_theta") or 1e6
    start, b = feats.shape[0], len(block)
    ctx = rms(feats @ w["fc.weight"].T, w["hidden_norm.weight"])  # [C, H]
    x = embed[torch.tensor(block)]  # [B, H]
    q_pos = list(range(start, start + b))
    k_pos = list(range(start)) + q_pos
    for i in range(cfg["num_hidden_layers"]):
        p = f"layers.{i}."
        causal, window = layer_attention(cfg, i)
        h = rms(x, w[p + "input_layernorm.weight"])
        kv_in = torch.cat([ctx, h])  # the context skips input_layernorm
        q = (h @ w[p + "self_attn.q_proj.weight"].T).view(b, nh, d)
        k = (kv_in @ w[p + "self_attn.k_proj.weight"].T).view(start + b, nkv, d)
        v = (kv_in @ w[p + "self_attn.v_proj.weight"].T).view(start + b, nkv, d)
        q = rms(q, w[p + "self_attn.q_norm.weight"])
        k = rms(k, w[p + "self_attn.k_norm.weight"])
        heads = []
        for hq in range(nh):
            hk = hq // (nh // nkv)
            qh = rope(q[:, hq], q_pos, theta)
            kh = rope(k[:, hk], k_pos, theta)
            scores = qh @ kh.T / math.sqrt(d)  # [B, C+B]
            for a, qp in enumerate(q_pos):
                for c, kp in enumerate(k_pos):
                    if not visible(qp, kp, start, causal, window):
                        scores[a, c] = float("-inf")
            heads.append(torch.softmax(scores, -1) @ v[:, hk])
        x = x + torch.cat(heads, -1) @ w[p + "self_attn.o_proj.weight"].T
        m = rms(x, w[p + "post_attention_layernorm.weight"])
        gate = m @ w[p + "mlp.gate_proj.weight"].T
        x = (
            x
            + (torch.nn.functional.silu(gate) * (m @ w[p + "mlp.up_proj.weight"].T))
            @ w[p + "mlp.down_proj.weight"].T
        )
    return rms(x, w["norm.weight"])[1:] @ lm_head.T


# ------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("target")
    hf = write_target(out, seed=3)
    return out, hf


def hf_layer_outputs(hf: Any, ids: torch.Tensor) -> list[torch.Tensor]:
    """Output of every decoder layer L (before the final norm), via forward hooks."""
    outs: list[torch.Tensor] = []
    hooks = [
        layer.register_forward_hook(
            lambda _m, _i, o: outs.append(o[0] if isinstance(o, tuple) else o)
        )
        for layer in hf.model.layers
    ]
    try:
        with torch.no_grad():
            hf(ids)
    finally:
        for hook in hooks:
            hook.remove()
    return [o[0] for o in outs]  # each [S, H]


def prompt_ids(n: int = PROMPT_LEN) -> list[int]:
    return torch.randint(0, VOCAB, (n,), generator=torch.Generator().manual_seed(21)).tolist()


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def variant(request: pytest.FixtureRequest, target, tmp_path_factory: pytest.TempPathFactory):
    t_dir, hf = target
    over, expected = VARIANTS[request.param]
    d_dir = tmp_path_factory.mktemp("drafter")
    cfg, state = write_drafter(d_dir, seed=sorted(VARIANTS).index(request.param), **over)
    engine = Engine.load(t_dir, d_dir, max_model_len=128)
    return SimpleNamespace(
        name=request.param, cfg=cfg, state=state, expected=expected, engine=engine, hf=hf,
        dir=d_dir,
    )  # fmt: skip


# ------------------------------------------------------------------------------ tests


def test_layer_table_matches_the_documented_rules(variant) -> None:
    cfg, expected, engine = variant.cfg, variant.expected, variant.engine
    got = [(layer.self_attn.causal, layer.self_attn.window) for layer in engine.drafter.layers]
    assert got == expected
    assert [layer_attention(cfg, i) for i in range(cfg["num_hidden_layers"])] == expected


def test_mask_construction(variant) -> None:
    """The engine's [S, C+S] mask equals the reference's visibility rule, slot by slot."""
    engine = variant.engine
    start, s = 9, 5
    q_pos, k_pos = torch.arange(start, start + s), torch.arange(start + s)
    for layer in engine.drafter.layers:
        attn = layer.self_attn
        mask = attn.mask(q_pos, k_pos, start)
        want = [
            [visible(int(q), int(k), start, attn.causal, attn.window) for k in k_pos] for q in q_pos
        ]
        assert mask.tolist() == want


@torch.no_grad()
def test_block_logits_match_reference(variant) -> None:
    cfg, state, engine, hf = variant.cfg, variant.state, variant.engine, variant.hf
    ids = prompt_ids()
    tap_ids = (cfg.get("dflash_config") or {})["target_layer_ids"]
    outs = hf_layer_outputs(hf, torch.tensor([ids]))
    feats = torch.cat([outs[L] for L in tap_ids], -1)  # [C, T*n]
    embed = hf.model.embed_tokens.weight
    lm_head = hf.lm_head.weight
    k = engine.k
    anchor = 17
    block = [anchor] + [MASK] * k
    ref = reference_block_logits(cfg, state, feats, block, embed, lm_head)

    _, taps = engine.prefill(ids)
    engine.drafter.write_context(taps, torch.arange(len(ids)))
    got = engine.drafter(torch.tensor([block]), len(ids), engine.target.embed_tokens,
                         engine.target.lm_head)[0]  # fmt: skip
    torch.testing.assert_close(got, ref, **TOL)


@torch.no_grad()
def test_context_written_in_pieces_equals_one_shot(variant) -> None:
    """As in decoding: the context cache grows by committed positions, and stale slots past the
    current start (a rejected tail) never leak into the next draft."""
    engine = variant.engine
    ids = prompt_ids(20)
    block = torch.tensor([[5] + [MASK] * engine.k])
    _, taps = engine.prefill(ids)
    engine.drafter.write_context(taps, torch.arange(20))
    whole = engine.drafter(block, 20, engine.target.embed_tokens, engine.target.lm_head)
    # pieces, with garbage written beyond the start first
    engine.drafter.write_context([t[:, 3:9] for t in taps], torch.arange(20, 26))
    engine.drafter.write_context([t[:, :12] for t in taps], torch.arange(12))
    engine.drafter.write_context([t[:, 12:20] for t in taps], torch.arange(12, 20))
    pieces = engine.drafter(block, 20, engine.target.embed_tokens, engine.target.lm_head)
    torch.testing.assert_close(pieces, whole, rtol=0, atol=0)


def test_args_read_like_vllm(variant) -> None:
    cfg, engine = variant.cfg, variant.engine
    a: DrafterArgs = engine.drafter.args
    ids = cfg["dflash_config"]["target_layer_ids"]
    assert a.captured_layers == [L + 1 for L in ids]
    assert a.num_taps == len(ids) and a.mask_token_id == MASK
    assert a.block_size == 5 and engine.k == 4
    theta = (cfg.get("rope_parameters") or {}).get("rope_theta") or cfg["rope_theta"]
    assert a.rope_theta == theta


# ------------------------------------------------------------------------------ bad configs


def bad_drafter(tmp_path: Path, target, **over: Any) -> None:
    d_dir = tmp_path / "bad"
    write_drafter(d_dir, **over)
    Engine.load(target[0], d_dir)


def test_sliding_layers_without_a_window_are_refused(tmp_path: Path, target) -> None:
    # a top-level window without use_sliding_window is dropped by transformers, then by vLLM
    with pytest.raises(EngineError, match="requires a window size"):
        bad_drafter(tmp_path, target, layer_types=[SLIDING, FULL], sliding_window=WINDOW)


def test_missing_mask_token_is_refused(tmp_path: Path, target) -> None:
    with pytest.raises(EngineError, match="mask_token_id"):
        bad_drafter(tmp_path, target, dflash_config={"target_layer_ids": [0, 2]})


def test_taps_count_mismatch_fails_like_vllm(tmp_path: Path, target) -> None:
    """fc sized for 3 taps but an id out of range: vLLM drops it and dies on the first request."""
    d_dir = tmp_path / "d"
    write_drafter(d_dir, dflash_config={"mask_token_id": MASK, "target_layer_ids": [0, 1, 5]})
    engine = Engine.load(target[0], d_dir, max_model_len=64)
    with pytest.raises(EngineError, match="expects 192 concatenated aux hidden features"):
        engine.generate(prompt_ids(), 4)


def test_hidden_size_mismatch_is_refused(tmp_path: Path, target) -> None:
    with pytest.raises(EngineError, match="hidden_size"):
        bad_drafter(tmp_path, target, hidden_size=32, intermediate_size=64, head_dim=8)


# ------------------------------------------------------------------------------ z-lab's package

ZLAB_SCRIPT = textwrap.dedent(
    """
    import json, sys, torch
    from safetensors.torch import load_file
    from dflash import DFlashDraftModel
    d = sys.argv[1]
    model = DFlashDraftModel.from_pretrained(d + "/drafter", dtype=torch.float32).eval()
    io = load_file(d + "/io.safetensors")
    start = io["feats"].shape[1]
    pos = torch.arange(start + io["noise"].shape[1])[None]
    with torch.no_grad():
        hidden = model(position_ids=pos, noise_embedding=io["noise"], target_hidden=io["feats"])
        logits = hidden[:, 1:] @ io["lm_head"].T
    torch.save(logits, d + "/logits.pt")
    """
)


@torch.no_grad()
def test_zlab_reference_package_agrees(variant, tmp_path: Path) -> None:
    """z-lab's PyPI `dflash` DFlashDraftModel, run in its own environment, on the same weights.

    Its config reading differs from vLLM's for some variants (it knows neither
    `dflash_config.causal` nor `use_swa`/`swa_window_size`), so only the variants where the two
    agree by construction are compared."""
    python = os.environ.get("DFLASH_REFERENCE_PYTHON")
    if not python or not Path(python).exists():
        pytest.skip("set DFLASH_REFERENCE_PYTHON to a python with z-lab's `dflash` installed")
    name, cfg, engine, hf = variant.name, variant.cfg, variant.engine, variant.hf
    if name not in (
        "legacy-all-full",
        "is_causal-false-beats-dflash_config.causal",
        "top-is_causal-true-full",
        "top-sliding_window-with-use_sliding_window",
        "new-dialect-rope_parameters-taps-1-2",
    ):
        pytest.skip(f"{name}: z-lab's package reads this config differently from vLLM")
    from safetensors.torch import save_file

    shutil.copytree(variant.dir, tmp_path / "drafter")
    ids = prompt_ids()
    outs = hf_layer_outputs(hf, torch.tensor([ids]))
    feats = torch.cat([outs[L] for L in cfg["dflash_config"]["target_layer_ids"]], -1)[None]
    block = [17] + [MASK] * engine.k
    noise = hf.model.embed_tokens.weight[torch.tensor([block])]
    save_file(
        {"feats": feats.contiguous(), "noise": noise.contiguous(),
         "lm_head": hf.lm_head.weight.contiguous()},
        str(tmp_path / "io.safetensors"),
    )  # fmt: skip
    run = subprocess.run(
        [python, "-c", ZLAB_SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    theirs = torch.load(tmp_path / "logits.pt")[0]

    _, taps = engine.prefill(ids)
    engine.drafter.write_context(taps, torch.arange(len(ids)))
    ours = engine.drafter(torch.tensor([block]), len(ids), engine.target.embed_tokens,
                          engine.target.lm_head)[0]  # fmt: skip
    torch.testing.assert_close(ours, theirs, **TOL)
