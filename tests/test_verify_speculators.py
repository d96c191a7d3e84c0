"""verify-config on vLLM's speculators format (DFlash, DFlash2, DSpark): read as vLLM's loader reads
it (vllm/transformers_utils/configs/speculators/algos.py), judged by the same rules as a z-lab
native config. The drafters are real checkpoints (safetensors written by the test)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.cli import run_main
from support.tiny_checkpoints import write_drafter, write_target

from dflashctl.drafter.check import verify_local
from dflashctl.drafter.formats import SPECULATORS_AUX_SHIFT


@pytest.fixture(scope="module")
def native(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("spec")
    write_target(root / "target")
    write_drafter(root / "drafter")
    return root / "target", root / "drafter"


def to_speculators(native_cfg: dict[str, Any], kind: str = "dflash", **over: Any) -> dict[str, Any]:
    """The same drafter in the speculators format, as vLLM's loader expects it."""
    layer = {k: v for k, v in native_cfg.items() if k not in ("architectures", "dflash_config")}
    dfc = native_cfg["dflash_config"]
    cfg = {
        "speculators_model_type": kind,
        "transformer_layer_config": layer,
        "aux_hidden_state_layer_ids": [i + SPECULATORS_AUX_SHIFT for i in dfc["target_layer_ids"]],
        "mask_token_id": dfc["mask_token_id"],
        "target_hidden_size": native_cfg.get("target_hidden_size"),
        "block_size": native_cfg.get("block_size"),
        "speculators_config": {
            "proposal_methods": [{"speculative_tokens": native_cfg["block_size"] - 1}],
            "verifier": {"name_or_path": "target"},
        },
    }
    cfg.update(over)
    return cfg


def speculators_dir(tmp_path: Path, native_dir: Path, cfg: dict[str, Any]) -> Path:
    d = tmp_path / "spec-drafter"
    d.mkdir()
    (d / "model.safetensors").symlink_to(native_dir / "model.safetensors")
    (d / "config.json").write_text(json.dumps(cfg))
    return d


def bad(report) -> dict[str, str]:
    return {c.name: c.status for c in report.checks if c.status not in ("ok", "info")}


def test_a_speculators_config_reads_as_its_native_twin(tmp_path, native):
    target, drafter = native
    cfg = json.loads((drafter / "config.json").read_text())
    twin = verify_local(drafter, target=target)
    spec = verify_local(speculators_dir(tmp_path, drafter, to_speculators(cfg)), target=target)
    assert (
        spec.resolved.fc_layer_ids
        == twin.resolved.fc_layer_ids
        == cfg["dflash_config"]["target_layer_ids"]
    )
    assert spec.resolved.effective_target_layer_ids == twin.resolved.effective_target_layer_ids
    assert bad(spec) == bad(twin)
    rows = {c.name: c for c in spec.checks}
    assert rows["format"].found == "speculators dflash"
    assert "minus 1" in rows["aux_hidden_state_layer_ids"].hint


def test_more_aux_ids_than_the_fc_was_trained_for_is_an_error(tmp_path, native):
    target, drafter = native
    cfg = json.loads((drafter / "config.json").read_text())
    spec = to_speculators(cfg)
    spec["aux_hidden_state_layer_ids"] = spec["aux_hidden_state_layer_ids"] + [3]
    report = verify_local(speculators_dir(tmp_path, drafter, spec), target=target)
    assert any(c.status in ("error", "mismatch", "invalid") for c in report.checks), bad(report)


@pytest.mark.parametrize(
    "kind, over, name, status",
    [
        ("dflash", {"speculators_config": {"proposal_methods": [{"speculative_tokens": 8}]}},
         "speculative_tokens", "mismatch"),  # K = block size: the speculators off-by-one
        ("dflash", {"mask_token_id": None}, "mask_token_id", "missing"),
        ("dflash", {"aux_hidden_state_layer_ids": None}, "aux_hidden_state_layer_ids", "missing"),
        ("dflash2", {"sample_from_anchor": True}, "sample_from_anchor", "mismatch"),
        ("eagle9", {}, "speculators_model_type", "invalid"),
    ],
)  # fmt: skip
def test_speculators_rules(tmp_path, native, kind, over, name, status):
    target, drafter = native
    cfg = to_speculators(json.loads((drafter / "config.json").read_text()), kind, **over)
    report = verify_local(speculators_dir(tmp_path, drafter, cfg), target=target)
    assert bad(report).get(name) == status, bad(report)


def test_fix_refuses_a_speculators_config_and_writes_nothing(tmp_path, monkeypatch, capsys, native):
    _target, drafter = native
    cfg = to_speculators(json.loads((drafter / "config.json").read_text()), mask_token_id=None)
    d = speculators_dir(tmp_path, drafter, cfg)
    before = (d / "config.json").read_bytes()
    code, _out, err = run_main(monkeypatch, capsys, "verify-config", str(d), "--fix")
    assert code == 2 and "speculators format" in err and "Traceback" not in err
    assert (d / "config.json").read_bytes() == before
    assert [p.name for p in d.iterdir()] == ["model.safetensors", "config.json"] or sorted(
        p.name for p in d.iterdir()
    ) == ["config.json", "model.safetensors"]


# ---- draft vocabulary / lm_head ownership (issue 28) -------------------------------------------

H, V, N = 64, 300, 120  # the tiny pair's hidden size and vocabulary; a reduced draft vocabulary


def vocab_dir(tmp_path: Path, native_dir: Path, cfg: dict[str, Any], extra: dict) -> Path:
    """The drafter's own tensors plus `extra` ({name: (dtype, shape)}), in a real safetensors
    file written here (header and a sparse data section), beside `cfg`."""
    from support.safetensors_files import write_safetensors

    from dflashctl.drafter.header import read_file_header

    tensors, _meta, _size = read_file_header(native_dir / "model.safetensors")
    spec = {name: (info.dtype, list(info.shape)) for name, info in tensors.items()}
    spec.update(extra)
    d = tmp_path / "vocab-drafter"
    d.mkdir()
    write_safetensors(d / "model.safetensors", spec)
    (d / "config.json").write_text(json.dumps(cfg))
    return d


OWN_LM, D2T, T2D = ("BF16", [N, H]), ("I64", [N]), ("BOOL", [V])


@pytest.mark.parametrize(
    "draft_vocab, extra, rows",
    [
        # a speculators checkpoint with its own lm_head and d2t (RedHatAI's Qwen3-8B layout)
        (N, {"lm_head.weight": OWN_LM, "d2t": D2T, "t2d": T2D},
         {"weights: draft vocabulary": "ok"}),
        (N, {"lm_head.weight": OWN_LM, "d2t": D2T}, {"weights: draft vocabulary": "ok"}),
        # no lm_head of its own: vLLM shares the target's, every proposal a wrong token
        (N, {"d2t": D2T}, {"weights: lm_head.weight": "missing"}),
        (N, {"lm_head.weight": ("BF16", [V, H]), "d2t": D2T},
         {"weights: lm_head.weight": "mismatch"}),
        (N, {"lm_head.weight": OWN_LM}, {"weights: d2t": "missing"}),
        (N, {"lm_head.weight": OWN_LM, "d2t": ("I64", [N + 1])}, {"weights: d2t": "mismatch"}),
        (N, {"lm_head.weight": OWN_LM, "d2t": D2T, "t2d": ("BOOL", [N])},
         {"weights: t2d": "mismatch"}),
        # the weights carry a reduced vocabulary the config does not declare
        (None, {"lm_head.weight": OWN_LM, "d2t": D2T}, {"weights: d2t": "mismatch"}),
        (None, {"lm_head.weight": OWN_LM}, {"weights: lm_head.weight": "mismatch"}),
        # the full vocabulary: its own lm_head [V, H], or the target's shared
        (V, {"lm_head.weight": ("BF16", [V, H])}, {}),
        (None, {}, {}),
    ],
)  # fmt: skip
def test_draft_vocabulary_and_lm_head_ownership(tmp_path, native, draft_vocab, extra, rows):
    target, drafter = native
    cfg = to_speculators(json.loads((drafter / "config.json").read_text()))
    if draft_vocab is not None:
        cfg["draft_vocab_size"] = draft_vocab
    report = verify_local(vocab_dir(tmp_path, drafter, cfg, extra), target=target)
    got = {c.name: c.status for c in report.checks if c.name in {
        "weights: draft vocabulary", "weights: lm_head.weight", "weights: d2t", "weights: t2d",
        "draft_vocab_size"}}  # fmt: skip
    assert got == rows, [c for c in report.checks if c.name in got]
    for c in report.checks:
        if c.name in rows and rows[c.name] != "ok":
            assert (
                "mean acceptance length 1.00" in c.hint
                or "one d2t entry" in c.hint
                or ("t2d marks" in c.hint)
            ), c.hint
    assert report.ok is (all(s == "ok" for s in rows.values()))


def test_without_weights_a_draft_vocabulary_is_unchecked_not_passed(tmp_path, native):
    _target, drafter = native
    cfg = to_speculators(json.loads((drafter / "config.json").read_text()), draft_vocab_size=N)
    d = tmp_path / "no-weights"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    report = verify_local(d)
    row = next(c for c in report.checks if c.name == "draft_vocab_size")
    assert row.status == "warning" and "neither is checked" in row.hint


def test_the_cli_names_the_shared_lm_head(tmp_path, monkeypatch, capsys, native):
    target, drafter = native
    cfg = to_speculators(json.loads((drafter / "config.json").read_text()), draft_vocab_size=N)
    d = vocab_dir(tmp_path, drafter, cfg, {"d2t": D2T})
    code, out, _err = run_main(monkeypatch, capsys, "verify-config", str(d), "--target",
                               str(target), "--json")  # fmt: skip
    data = json.loads(out)
    row = next(c for c in data["checks"] if c["field"] == "weights: lm_head.weight")
    assert code == 1 and row["status"] == "missing" and row["expected"] == [N, H]
    assert "every position at 0.000" in row["hint"]
    # no "shared with the target: ok" row beside it: the two would contradict each other
    assert not any(c["field"] == "weights: embed_tokens/lm_head" for c in data["checks"])
