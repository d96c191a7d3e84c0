"""Registry entries for the DFlash family as published late 2026 (issue 28): DFlash2, DSpark and
speculators-format drafters, from field-2026-12.md. Where the sources give no shape value the
entry says `not_published:` and holds null, so no rule checks a config against a made-up number;
verify-config on a config matching such an entry names the entry and checks only what is known.
The drafters are real files: config.json and a safetensors header written by the test."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.cli import run_json
from support.safetensors_files import dflash_tensors, write_safetensors

from dflashctl.drafter.check import verify_local
from dflashctl.drafter.registry import all_entries, get_entry, parse_entry
from dflashctl.errors import RegistryError

FAMILY = {
    "qwen3.8-27b-dflash2": ("dflash2", "native"),
    "glm-5.3-flash-dflash2": ("dflash2", None),
    "deepseek-v4-pro-dspark": ("dspark", None),
    "dspark-qwen3-8b-block7": ("dspark", None),
    "glm-5.2-speculator.dspark-preview": ("dspark", "speculators"),
    "kimi-k3-dspark": ("dspark", None),
    "qwen3-8b-speculator.dflash": ("dflash", "speculators"),
    "gemma-4-31b-it-speculator.dflash": ("dflash", "speculators"),
}


# ---- the entries -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(FAMILY))
def test_each_family_entry_loads_and_holds_no_unpublished_value(name: str):
    e = get_entry(name)
    kind, fmt = FAMILY[name]
    assert (e.kind, e.config_format) == (kind, fmt)
    # thinking and training_context are per entry: a value, or said to be not published
    for key in ("thinking", "training_context"):
        assert getattr(e, key) is not None or key in e.not_published
    for key in e.not_published:
        holder = e.target if key.startswith("target.") else e
        assert getattr(holder, key.removeprefix("target.")) is None, key
    assert e.expected_acceptance is None  # no floor for any traffic is published for these


def test_published_acceptance_is_shown_not_used_as_a_floor():
    k3 = get_entry("kimi-k3-dspark")
    assert [p.tau for p in k3.published_acceptance] == [3.23, 2.98]
    assert "AA-LCR" in k3.published_acceptance[0].benchmark
    spec = get_entry("RedHatAI/Qwen3-8B-speculator.dflash")  # found by repo too
    assert spec.draft_vocab_size == 32000 and spec.published_acceptance[0].tau == 3.74
    d2 = get_entry("qwen3.8-27b-dflash2")
    assert [p.tau for p in d2.published_acceptance] == [5.46, 5.366]
    assert d2.target_layer_ids == (5, 19, 33, 47, 61)  # what was published stays


MINIMAL = """name: x
repo: org/x
revision: null
kind: dspark
confidence: low
source: "test"
architectures: null
num_hidden_layers: null
hidden_size: null
target: {repo: null}
"""


def test_a_required_value_may_be_null_only_when_listed_not_published(tmp_path: Path):
    with pytest.raises(RegistryError, match=r"architectures.*found null"):
        parse_entry(tmp_path / "x.yaml", MINIMAL)
    ok = MINIMAL + "not_published: [architectures, num_hidden_layers, hidden_size]\n"
    e = parse_entry(tmp_path / "x.yaml", ok)
    assert e.architectures is None and e.num_hidden_layers is None and e.kind == "dspark"


@pytest.mark.parametrize(
    "extra, says",
    [
        ("not_published: [architectures, num_hidden_layers, hidden_size, mask_token_id]\n"
         "mask_token_id: 151669\n", "listed as not published but has the value 151669"),
        ("not_published: [architectures, num_hidden_layers, hidden_size, colour]\n",
         "'colour' is not a field of an entry"),
        ("not_published: [architectures, num_hidden_layers, hidden_size]\n"
         "config_format: onnx\n", "'onnx' is not one of native, speculators, gguf"),
        ("not_published: [architectures, num_hidden_layers, hidden_size]\n"
         "published_acceptance: [{tau: 0.5, benchmark: b, source: s}]\n", "at least 1"),
    ],
)  # fmt: skip
def test_bad_family_keys_are_one_line_errors(tmp_path: Path, extra: str, says: str):
    with pytest.raises(RegistryError) as e:
        parse_entry(tmp_path / "x.yaml", MINIMAL + extra)
    assert says in e.value.message and "\n" not in e.value.message


def test_every_entry_in_the_registry_still_loads():
    names = {e.name for e in all_entries()}
    assert set(FAMILY) <= names


# ---- verify-config against such an entry -------------------------------------------------------

HIDDEN, LAYERS, TAPS, VOCAB, DRAFT_VOCAB = 64, 2, 3, 151936, 32000


def speculators_drafter(where: Path, *, draft_vocab: int = DRAFT_VOCAB) -> Path:
    """A speculators-format DFlash drafter with its own draft vocabulary: config.json and the
    safetensors header (lm_head [N, H], d2t [N]) of a small real checkpoint."""
    where.mkdir(parents=True)
    layer: dict[str, Any] = {
        "model_type": "qwen3",
        "hidden_size": HIDDEN,
        "intermediate_size": 128,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "vocab_size": VOCAB,
        "rms_norm_eps": 1e-6,
        "max_position_embeddings": 40960,
        "rope_theta": 1000000,
    }
    cfg = {
        "speculators_model_type": "dflash",
        "transformer_layer_config": layer,
        "aux_hidden_state_layer_ids": [2, 18, 34],  # vLLM's +1 tap shift: target layers 1, 17, 33
        "mask_token_id": 151669,
        "draft_vocab_size": draft_vocab,
        "target_hidden_size": HIDDEN,
        "block_size": 16,
        "speculators_config": {
            "proposal_methods": [{"speculative_tokens": 15}],
            "verifier": {"name_or_path": "Qwen/Qwen3-8B"},
        },
    }
    (where / "config.json").write_text(json.dumps(cfg))
    tensors = dflash_tensors(layers=LAYERS, hidden=HIDDEN, intermediate=128, heads=4,
                             kv_heads=2, head_dim=16, taps=TAPS)  # fmt: skip
    tensors["lm_head.weight"] = ("BF16", [draft_vocab, HIDDEN])
    tensors["d2t"] = ("I64", [draft_vocab])
    write_safetensors(where / "model.safetensors", tensors)
    return where


def rows(report) -> dict[str, Any]:
    return {c.name: c for c in report.checks}


def test_verify_config_names_the_entry_and_checks_only_what_is_published(tmp_path: Path):
    # a directory named like the repo identifies the entry (the structure cannot: no shapes)
    named = speculators_drafter(tmp_path / "Qwen3-8B-speculator.dflash")
    anonymous = speculators_drafter(tmp_path / "my-drafter")
    with_entry, without = verify_local(named), verify_local(anonymous)
    assert with_entry.entry is not None and with_entry.entry.name == "qwen3-8b-speculator.dflash"
    assert "name 'Qwen3-8B-speculator.dflash'" in with_entry.identification.how
    assert without.entry is None
    mine, plain = rows(with_entry), rows(without)
    # what the entry adds: the published draft vocabulary, checked, and the list of what is not
    assert set(mine) - set(plain) == {"draft_vocab_size", "registry: not published"}
    assert mine["draft_vocab_size"].status == "ok" and mine["draft_vocab_size"].expected == 32000
    unpublished = mine["registry: not published"]
    assert unpublished.status == "ok" and "mask_token_id" in unpublished.found
    # every other row reads the same with and without the entry: no made-up number was compared
    for name, row in plain.items():
        assert (mine[name].status, mine[name].expected) == (row.status, row.expected), name
    assert not [c for c in with_entry.checks if c.status in ("mismatch", "missing", "invalid")]


def test_a_config_against_the_published_value_is_a_mismatch_naming_it(tmp_path: Path):
    d = speculators_drafter(tmp_path / "Qwen3-8B-speculator.dflash", draft_vocab=16000)
    r = rows(verify_local(d))
    assert (r["draft_vocab_size"].status, r["draft_vocab_size"].found) == ("mismatch", 16000)
    assert r["draft_vocab_size"].expected == 32000


def test_the_cli_json_carries_the_entry_and_what_it_does_not_publish(
    monkeypatch, capsys, tmp_path: Path
):
    d = speculators_drafter(tmp_path / "drafter")
    args = ["verify-config", str(d), "--drafter", "qwen3-8b-speculator.dflash", "--json"]
    code, data, err = run_json(monkeypatch, capsys, *args)
    assert code == 0, err
    reg = data["registry"]
    assert reg["name"] == "qwen3-8b-speculator.dflash" and reg["config_format"] == "speculators"
    assert reg["expected_acceptance"] is None
    assert reg["published_acceptance"][0]["tau"] == 3.74
    assert "num_hidden_layers" in reg["not_published"]
