"""A drafter config that declares a partial RoPE (issue 28, vllm-project/speculators#613): vLLM's
DFlash layer hands the drafter config's rope_parameters to get_rope (models/qwen3_dflash.py), so
it rotates head_dim × factor of each head; a trainer that copied the target's factor but rotated
the whole head leaves a drafter that collapses. verify-config warns (the weights cannot tell
which rotation they learned), and the collapse alarm lists it beside the mask id, which the log
alone cannot tell it from. The configs, weights header and log are written by the test, in the
shapes of the thread (a speculators DFlash drafter for a Qwen3.6-35B-A3B target)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.cli import run_json
from support.safetensors_files import dflash_tensors, write_safetensors

from dflashctl.drafter.check import verify_local

HEAD, HIDDEN = 256, 2048
ROW = "rope: rope_parameters.partial_rotary_factor"


def drafter(where: Path, rope: dict[str, Any] | None, **top: Any) -> Path:
    """A speculators DFlash drafter (config.json + safetensors header) with `rope` as its
    transformer_layer_config's rope_parameters."""
    where.mkdir(parents=True)
    layer: dict[str, Any] = {
        "model_type": "qwen3",
        "hidden_size": HIDDEN,
        "intermediate_size": 6144,
        "num_hidden_layers": 2,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "head_dim": HEAD,
        "vocab_size": 248320,
        "rms_norm_eps": 1e-6,
        "max_position_embeddings": 262144,
        **top,
    }
    if rope is not None:
        layer["rope_parameters"] = rope
    cfg = {
        "speculators_model_type": "dflash",
        "transformer_layer_config": layer,
        "aux_hidden_state_layer_ids": [2, 11, 20],
        "mask_token_id": 248077,
        "target_hidden_size": HIDDEN,
        "block_size": 16,
        "speculators_config": {"proposal_methods": [{"speculative_tokens": 15}]},
    }
    (where / "config.json").write_text(json.dumps(cfg))
    tensors = dflash_tensors(layers=2, hidden=HIDDEN, intermediate=6144, heads=16, kv_heads=2,
                             head_dim=HEAD, taps=3)  # fmt: skip
    write_safetensors(where / "model.safetensors", tensors)
    return where


def target(where: Path, factor: float) -> Path:
    where.mkdir(parents=True)
    cfg = {
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "num_hidden_layers": 40,
        "hidden_size": HIDDEN,
        "vocab_size": 248320,
        "head_dim": HEAD,
        "rope_parameters": {"rope_theta": 10000000, "partial_rotary_factor": factor},
    }
    (where / "config.json").write_text(json.dumps(cfg))
    return where


def rows(report) -> dict[str, Any]:
    return {c.name: c for c in report.checks}


def test_a_declared_partial_rope_is_a_warning_naming_the_behaviour(tmp_path: Path):
    d = drafter(tmp_path / "d", {"rope_theta": 10000000, "partial_rotary_factor": 0.25})
    row = rows(verify_local(d))[ROW]
    assert (row.status, row.found) == ("warning", 0.25)
    assert "64 of 256 dims" in row.hint and "speculators#613" in row.hint
    assert "set it to 1.0" in row.hint and "the target declares" not in row.hint  # no target


def test_the_same_factor_as_the_target_is_named_as_copied(tmp_path: Path):
    d = drafter(tmp_path / "d", {"rope_theta": 10000000, "partial_rotary_factor": 0.25})
    t = target(tmp_path / "t", 0.25)
    row = rows(verify_local(d, target=t))[ROW]
    assert row.status == "warning" and "the target declares 0.25 too" in row.hint


@pytest.mark.parametrize(
    "rope, top, name, status",
    [
        ({"rope_theta": 1e7, "partial_rotary_factor": 1.0}, {}, None, None),  # the fix
        ({"rope_theta": 1e7}, {}, None, None),  # none declared: the whole head
        (None, {"partial_rotary_factor": 0.5}, "rope: partial_rotary_factor", "warning"),
        ({"partial_rotary_factor": 1.5}, {}, "rope_parameters.partial_rotary_factor", "invalid"),
    ],
)
def test_only_a_declared_fraction_below_one_is_flagged(tmp_path, rope, top, name, status):
    got = {n: r.status for n, r in rows(verify_local(drafter(tmp_path / "d", rope, **top))).items()
           if "partial_rotary_factor" in n}  # fmt: skip
    assert got == ({name: status} if name else {})


def test_the_collapse_alarm_lists_it_beside_the_mask_id(monkeypatch, capsys, tmp_path: Path):
    # our own line in vLLM's SpecDecoding format (v1/spec_decode/metrics.py): the thread's shape,
    # position 1 alive, every later one 0
    rates = ", ".join(["0.220"] + ["0.000"] * 14)
    log = tmp_path / "server.log"
    log.write_text(
        "(APIServer pid=1) INFO 12-06 10:00:01 [loggers.py:230] SpecDecoding metrics: Mean "
        "acceptance length: 1.22, Accepted throughput: 11.00 tokens/s, Drafted throughput: "
        "750.00 tokens/s, Accepted: 220 tokens, Drafted: 15000 tokens, Per-position acceptance "
        f"rate: {rates}, Avg Draft acceptance rate: 1.5%\n"
    )
    code, data, _ = run_json(monkeypatch, capsys, "metrics", str(log))
    assert code == 1
    (collapse,) = [a for a in data["alarms"] if a["kind"] == "collapse"]
    causes = [c["cause"] for c in collapse["likely_causes"]]
    # the log cannot separate the two: the mask id stays first, the RoPE mismatch second
    assert causes[0].startswith("wrong mask_token_id")
    assert causes[1].startswith("RoPE trained one way, served another")
    assert "partial_rotary_factor" in collapse["likely_causes"][1]["check"]
