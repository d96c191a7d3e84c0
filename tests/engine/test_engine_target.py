"""The engine's targets against transformers' `Qwen3ForCausalLM`, `LlamaForCausalLM` and
`Qwen2ForCausalLM` on the same checkpoint.

Each case writes a random checkpoint with transformers' own `save_pretrained`, loads it with the
engine's loader (weights.py) and compares fp32 logits and tapped hidden states. The tap convention
is vLLM's: capture index i is the residual entering decoder layer i = HF `hidden_states[i]`
(the output of layer i-1); index n (the number of layers) is the final *pre-norm* state, while
HF's last `hidden_states` entry is after the final norm.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from support.tiny_checkpoints import VOCAB, build_hf_target, target_config, write_target

from dflashctl.engine.generate import Engine
from dflashctl.engine.model import ModelArgs
from dflashctl.errors import EngineError

pytest.importorskip("transformers")

TOL = {"rtol": 1e-5, "atol": 2e-5}

CASES = {
    # id: (write_target kwargs, expect sharded)
    "untied-gqa-rope_parameters-sharded": (
        {"tie_word_embeddings": False, "max_shard_size": "40KB"},
        True,
    ),
    "tied-gqa-rope_theta-single": (
        {
            "tie_word_embeddings": True,
            "rope_form": "theta",
            "rope_parameters": {"rope_type": "default", "rope_theta": 500.0},
        },
        False,
    ),
    "tied-mha-sharded-theta": (
        {
            "tie_word_embeddings": True,
            "num_key_value_heads": 4,
            "rope_form": "theta",
            "max_shard_size": "60KB",
            "rope_parameters": {"rope_type": "default", "rope_theta": 1e6},
        },
        True,
    ),
    "untied-mqa-4layers": (
        {"num_key_value_heads": 1, "num_hidden_layers": 4, "head_dim": 32},
        False,
    ),
    # Llama: no q/k norm; biases on all projections (and the MLP) when the config asks
    "llama-tied-gqa": ({"arch": "llama", "tie_word_embeddings": True}, False),
    "llama-bias-sharded": (
        {"arch": "llama", "attention_bias": True, "mlp_bias": True, "max_shard_size": "60KB"},
        True,
    ),
    "llama3-rope-scaling": (
        {
            "arch": "llama",
            "rope_parameters": {
                "rope_type": "llama3",
                "rope_theta": 5e5,
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 64,
            },
        },
        False,
    ),
    "llama-linear-rope": (
        {
            "arch": "llama",
            "rope_parameters": {"rope_type": "linear", "rope_theta": 1e4, "factor": 4.0},
        },
        False,
    ),
    # Qwen2: q/k/v biases always, none on o
    "qwen2-tied": ({"arch": "qwen2", "tie_word_embeddings": True}, False),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def pair(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    kwargs, sharded = CASES[request.param]
    out = tmp_path_factory.mktemp(request.param)
    hf = write_target(out, seed=sorted(CASES).index(request.param), **kwargs)
    assert (out / "model.safetensors.index.json").exists() == sharded
    if sharded:
        assert len(list(out.glob("model-*.safetensors"))) > 2
    engine = Engine.load(out, None, max_model_len=256)
    return out, hf, engine


def prompt(n: int, seed: int = 7) -> torch.Tensor:
    return torch.randint(0, VOCAB, (1, n), generator=torch.Generator().manual_seed(seed))


def test_config_is_read_as_written(pair) -> None:
    out, hf, engine = pair
    cfg = json.loads((out / "config.json").read_text())
    a = engine.target.args
    theta = cfg["rope_parameters"]["rope_theta"] if "rope_parameters" in cfg else cfg["rope_theta"]
    assert a.rope_theta == theta == hf.config.rope_parameters["rope_theta"]
    assert a.tie_word_embeddings == hf.config.tie_word_embeddings
    assert a.num_key_value_heads == hf.config.num_key_value_heads
    if a.tie_word_embeddings:
        assert engine.target.lm_head.weight is engine.target.embed_tokens.weight


@torch.no_grad()
def test_full_forward_logits_and_taps_match_transformers(pair) -> None:
    _, hf, engine = pair
    ids = prompt(150)  # long enough that the RoPE theta matters
    ref = hf(ids, output_hidden_states=True)
    n = hf.config.num_hidden_layers
    logits, taps = engine.target(ids, taps=tuple(range(n + 1)))
    torch.testing.assert_close(logits, ref.logits, **TOL)
    for i in range(n):  # capture index i == HF hidden_states[i]
        torch.testing.assert_close(taps[i], ref.hidden_states[i], **TOL)
    # index n: the final state before the norm (HF's last entry is after it)
    torch.testing.assert_close(hf.model.norm(taps[n]), ref.hidden_states[n], **TOL)


@torch.no_grad()
def test_drafter_taps_are_hf_hidden_states_of_l_plus_one(pair) -> None:
    """target_layer_ids L (output of layer L) = HF hidden_states[L + 1], for every valid L but the
    last (whose L + 1 is the pre-norm final state, checked above)."""
    _, hf, engine = pair
    n = hf.config.num_hidden_layers
    ids = prompt(33, seed=3)
    ref = hf(ids, output_hidden_states=True).hidden_states
    target_layer_ids = list(range(n - 1))
    _, taps = engine.target(ids, taps=tuple(L + 1 for L in target_layer_ids))
    for L, tap in zip(target_layer_ids, taps, strict=True):
        torch.testing.assert_close(tap, ref[L + 1], **TOL)


@torch.no_grad()
def test_cached_prefill_then_decode_matches_transformers(pair) -> None:
    """Through the static KV cache: prefill a prompt, then feed tokens one and several at a time;
    every step's logits equal HF's full forward at those positions."""
    _, hf, engine = pair
    ids = prompt(40, seed=11)
    ref = hf(ids).logits
    t = engine.target
    t.setup_caches(64)
    logits, _ = t(ids[:, :20], torch.arange(20))
    torch.testing.assert_close(logits, ref[:, :20], **TOL)
    for p in range(20, 25):
        logits, _ = t(ids[:, p : p + 1], torch.arange(p, p + 1))
        torch.testing.assert_close(logits, ref[:, p : p + 1], **TOL)
    logits, _ = t(ids[:, 25:40], torch.arange(25, 40))
    torch.testing.assert_close(logits, ref[:, 25:40], **TOL)
    # roll back: overwrite positions 30.. with other tokens, then the true ones again
    other = prompt(10, seed=12)
    t(other, torch.arange(30, 40))
    logits, _ = t(ids[:, 30:40], torch.arange(30, 40))
    torch.testing.assert_close(logits, ref[:, 30:40], **TOL)


@torch.no_grad()
def test_greedy_generate_matches_transformers_generate(pair) -> None:
    _, hf, engine = pair
    ids = prompt(12, seed=5)
    ref = hf.generate(ids, max_new_tokens=20, do_sample=False, eos_token_id=None, pad_token_id=0)[
        0, 12:
    ].tolist()
    engine.eos_ids = set()
    assert engine.generate(ids[0].tolist(), 20).tokens == ref


def test_text_config_and_rope_defaults() -> None:
    nested = {
        "text_config": {
            "model_type": "qwen3",
            "vocab_size": 10,
            "hidden_size": 8,
            "intermediate_size": 16,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "rope_parameters": {"rope_theta": 1e7},
            "eos_token_id": [3, 4],
        },
        "tie_word_embeddings": True,
    }
    a = ModelArgs.from_hf_config(nested)
    assert (a.rope_theta, a.num_key_value_heads, a.head_dim) == (1e7, 2, 4)
    assert a.tie_word_embeddings and a.eos_token_ids == [3, 4]


@pytest.mark.parametrize(
    "names",
    [{"model_type": "qwen3_moe"}, {"architectures": ["MixtralForCausalLM"]}, {}],
    ids=["moe-model-type", "unknown-class", "unnamed"],
)
def test_an_architecture_the_engine_does_not_implement_is_refused(names: dict) -> None:
    cfg = {"vocab_size": 10, "hidden_size": 8, "intermediate_size": 16,
           "num_hidden_layers": 1, "num_attention_heads": 2, **names}  # fmt: skip
    with pytest.raises(EngineError, match="does not implement"):
        ModelArgs.from_hf_config(cfg)


def test_an_architecture_named_only_by_its_class_is_read() -> None:
    cfg = {"vocab_size": 10, "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
           "num_attention_heads": 2, "architectures": ["LlamaForCausalLM"]}  # fmt: skip
    a = ModelArgs.from_hf_config(cfg)
    assert (a.model_type, a.qk_norm) == ("llama", False)


def test_missing_and_misshapen_weights_are_named(tmp_path: Path) -> None:
    out = tmp_path / "t"
    write_target(out)
    cfg = json.loads((out / "config.json").read_text())
    cfg["intermediate_size"] = 96
    (out / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(EngineError, match=r"mlp\.\w+_proj\.weight.*shape"):
        Engine.load(out, None)
    cfg["intermediate_size"] = 128
    cfg["num_hidden_layers"] = 4
    (out / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(EngineError, match="lacks"):
        Engine.load(out, None)


@torch.no_grad()
def test_greedy_text_equals_transformers_on_the_demo_target() -> None:
    """SmolLM2-135M-Instruct as converted by dflashctl.demo_target (float32): our Llama path
    and transformers' `LlamaForCausalLM` write the same greedy tokens for a few chat prompts."""
    from support.pairs import demo_target
    from transformers import AutoModelForCausalLM

    target = demo_target()
    engine = Engine.load(target, None, max_model_len=512)
    hf = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32).eval()
    assert type(hf).__name__ == "LlamaForCausalLM" and engine.target.args.model_type == "llama"
    for prompt in (
        "Write a Python function that reverses a list.",
        "Explain what a hash table is.",
        "Translate into English: Il pleut depuis ce matin.",
    ):
        ids = engine.tokenizer.apply_chat_template([{"role": "user", "content": prompt}])
        ours = engine.generate(ids, 40).tokens
        ref = hf.generate(torch.tensor([ids]), max_new_tokens=40, do_sample=False)[0, len(ids) :]
        assert ours == ref.tolist()[: len(ours)], prompt


@torch.no_grad()
def test_fused_projections_compute_the_same_function(tmp_path: Path) -> None:
    """q/k/v and gate/up fused into one product each (what Engine.load serves) against the
    unfused modules the checkpoint names (what training uses)."""
    from dflashctl.engine.model import Transformer, fuse_projections
    from dflashctl.engine.weights import load_config, load_into, read_state

    write_target(tmp_path, arch="qwen2", tie_word_embeddings=True)  # biases on q/k/v
    args = ModelArgs.from_hf_config(load_config(tmp_path))
    plain, fused = Transformer(args), Transformer(args)
    for m in (plain, fused):
        load_into(m, read_state(tmp_path), rename={"model.": ""}, dtype=torch.float32, device="cpu")
    fuse_projections(fused)
    assert not hasattr(fused.layers[0].self_attn, "q_proj") and fused.layers[0].mlp.w13 is not None
    ids = prompt(30)
    torch.testing.assert_close(fused(ids)[0], plain(ids)[0], rtol=1e-6, atol=1e-6)


def test_a_pair_that_does_not_fit_is_refused_before_loading(tmp_path: Path, monkeypatch) -> None:
    """The estimate comes from the safetensors headers and the KV cache's shape."""
    import dflashctl.engine.generate as gen
    from dflashctl.engine.weights import checkpoint_bytes

    write_target(tmp_path)
    weights = checkpoint_bytes(tmp_path, torch.float32)
    cfg = json.loads((tmp_path / "config.json").read_text())
    n_params = sum(p.numel() for p in build_hf_target(target_config(), 0).parameters()) - (
        0 if not cfg.get("tie_word_embeddings") else cfg["vocab_size"] * cfg["hidden_size"]
    )
    assert weights == 4 * n_params
    monkeypatch.setattr(gen, "available_bytes", lambda device: weights // 2)
    with pytest.raises(EngineError, match=r"needs about .* GiB on cpu .* are free"):
        Engine.load(tmp_path, None)
    monkeypatch.setattr(gen, "available_bytes", lambda device: 10 * weights)
    Engine.load(tmp_path, None, max_model_len=64)
