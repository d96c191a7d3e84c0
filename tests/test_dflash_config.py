"""dflash_config.resolve() and transformers_view() against the real thing.

Two oracles: the installed transformers (its Qwen3Config is what vLLM loads drafter configs
with), and the real vLLM 0.32 CPU build, whose own resolution functions run in its venv on the
same configs (tests/oracles/vllm_resolve.py). A matrix of configs covers every branch of the
field resolution: where the layer ids live, where the mask id lives, layer types, windows,
use_swa, causality overrides and DFlash 2.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from dflashctl.drafter.config import V1_UNSUPPORTED, resolve, transformers_view

REPO = Path(__file__).resolve().parent.parent
VLLM_PY = Path(os.environ.get("DFLASHCTL_VLLM_VENV", REPO / ".venv-vllm")) / "bin" / "python"
S, F = "sliding_attention", "full_attention"
N_TARGET = 12

BASE: dict[str, Any] = {
    "model_type": "qwen3",
    "architectures": ["DFlashDraftModel"],
    "num_hidden_layers": 4,
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "vocab_size": 1000,
    "intermediate_size": 128,
}
IDS = [
    None,
    {"dflash_config.target_layer_ids": [1, 5, 9]},
    {"target_layer_ids": [1, 5, 9]},
    {"eagle_aux_hidden_state_layer_ids": [2, 6]},
    {"dflash_config.target_layer_ids": [1, 5], "eagle_config": {"x": 1}},
    {"dflash_config.layer_ids": [3, 4]},
    {"dflash_config.target_layer_ids": []},
    {"dflash_config.target_layer_ids": [0, 11, 40]},
    {"dflash_config.target_layer_ids": [1, 5], "target_layer_ids": [2, 3, 4]},
]
MASKS = [
    None,
    {"dflash_config.mask_token_id": 7},
    {"mask_token_id": 9},
    {"dflash_config.mask_token_id": None, "mask_token_id": 9},
    {"pard_token": 3},
    {"ptd_token_id": None},
]
LAYERS = [
    None,
    {"layer_types": [S, S, S, F]},
    {"layer_types": [S] * 4},
    {"layer_types": [S] * 4, "sliding_window": 2048},
    {"layer_types": [S] * 4, "sliding_window": 2048, "use_sliding_window": True},
    {"layer_types": [S, S, S, F], "dflash_config.swa_window_size": 512},
    {"dflash_config.use_swa": True, "dflash_config.swa_window_size": 256},
    {"dflash_config.use_swa": True},
    {"sliding_window": 1024, "use_sliding_window": True, "max_window_layers": 2},
    {
        "layer_types": [S, S, S, F],
        "is_causal": False,
        "sliding_window": 64,
        "use_sliding_window": True,
    },
    {"layer_types": [F] * 4, "dflash_config.causal": True},
    {
        "layer_types": [S, S, S, F],
        "dflash_config.swa_window_size": None,
        "sliding_window": 64,
        "use_sliding_window": True,
    },
    {"layer_types": ["attention"] * 4},
    {"layer_types": [F] * 3},
    {"layer_types": ["bogus"] * 4},
    {"use_sliding_window": True},
]
ARCHS = [None, {"architectures": ["DFlash2DraftModel"]}]


def _apply(cfg: dict[str, Any], patch: dict[str, Any] | None) -> dict[str, Any]:
    cfg = copy.deepcopy(cfg)
    for key, value in (patch or {}).items():
        if key.startswith("dflash_config."):
            cfg.setdefault("dflash_config", {})[key.split(".", 1)[1]] = value
        else:
            cfg[key] = value
    return cfg


def cases() -> list[dict[str, Any]]:
    out = [_apply(_apply(BASE, ids), {"dflash_config.mask_token_id": 7}) for ids in IDS]
    out += [_apply(BASE, mask) for mask in MASKS]
    for layers in LAYERS:
        for arch in ARCHS:
            cfg = _apply(_apply(BASE, layers), arch)
            out.append(_apply(cfg, {"dflash_config.mask_token_id": 7}))
    return out


def test_transformers_view_matches_qwen3config():
    transformers = pytest.importorskip("transformers")
    for cfg in cases():
        try:
            loaded = transformers.AutoConfig.for_model(**copy.deepcopy(cfg))
        except Exception as e:  # transformers refuses it: so must we
            assert resolve(cfg).transformers_errors, (cfg, e)
            continue
        assert resolve(cfg).transformers_errors == [], cfg
        view = transformers_view(cfg)
        assert view["layer_types"] == loaded.layer_types, cfg
        assert view["sliding_window"] == loaded.sliding_window, cfg


def test_resolve_basics():
    cfg = _apply(BASE, {"target_layer_ids": [1, 5, 9], "dflash_config.mask_token_id": 7})
    v1, v2 = resolve(cfg, N_TARGET, "v1"), resolve(cfg, N_TARGET, "v2")
    assert v1.fc_layer_ids == v2.fc_layer_ids == [1, 5, 9]
    assert v1.captured_layers == [2, 6, 9] and v1.captured_source.startswith("model default")
    assert v2.captured_layers == [2, 6, 10]
    assert any("only at the top level" in n for n in v1.notes)
    assert v1.fc_input_size == 64 * 3 and not any("concatenated" in e for e in v1.engine_errors)
    assert v1.effective_target_layer_ids == [1, 5, 8]  # wrong layers, same count: silent


@pytest.mark.vllm
def test_resolve_matches_real_vllm():
    if not VLLM_PY.exists():
        pytest.skip(f"no vLLM venv at {VLLM_PY.parent.parent} (bin/setup-vllm)")
    matrix = cases()
    run = subprocess.run(
        [str(VLLM_PY), str(REPO / "tests" / "oracles" / "vllm_resolve.py")],
        input=json.dumps([{"cfg": c, "num_target_layers": N_TARGET} for c in matrix]),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads(run.stdout.strip().splitlines()[-1])
    assert len(results) == len(matrix)
    for cfg, o in zip(matrix, results, strict=True):
        r1, r2 = resolve(cfg, N_TARGET, "v1"), resolve(cfg, N_TARGET, "v2")
        if o["load_error"]:
            assert r1.transformers_errors, (cfg, o["load_error"])
            continue
        assert not r1.transformers_errors, cfg
        assert o["layer_types"] == r1.transformers_layer_types, cfg
        # mask token: the value vLLM takes, or its ValueError
        if o["mask_error"]:
            assert r1.mask_source is None, cfg
        else:
            assert (o["mask"], r1.mask_source is not None) == (r1.mask_token_raw, True), cfg
        # layers that size fc (V2 captures the same), and what the V1 runner captures
        mine = [i + 1 for i in r1.fc_layer_ids] if r1.fc_layer_ids is not None else None
        assert o["eagle3_aux"] == mine, cfg
        v1 = None if r1.captured_source.startswith("model default") else r1.captured_layers
        assert o["v1_aux"] == v1, cfg
        assert o["fc_input_size"] == r1.fc_input_size, cfg
        # V1 refusals
        refusals = [e for e in r1.engine_errors if e.startswith(V1_UNSUPPORTED)]
        if o["v1_unsupported"]:
            assert refusals and ", ".join(o["v1_unsupported"]) in refusals[0], cfg
        else:
            assert not refusals, cfg
        # per-layer (window, causal), or the error vLLM raises
        for r, key in ((r1, "layers_v1"), (r2, "layers_v2")):
            window_error = [e for e in r.engine_errors if "requires a window size" in e]
            expected = o[key]
            if isinstance(expected, str):
                if "mixed sliding/full" in expected:
                    assert key == "layers_v1" and refusals, cfg
                else:
                    assert "window size" in expected and window_error, (cfg, expected)
            else:
                assert not window_error, cfg
                assert [[la.window, la.causal] for la in r.layers] == expected, (key, cfg)
