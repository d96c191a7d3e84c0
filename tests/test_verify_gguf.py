"""verify-config on llama.cpp DFlash drafters (GGUF files written here by the `gguf` library):
metadata read as the native view, target layers shifted from llama.cpp's capture indexing, and
the GGUF-only faults (missing mask token, missing target layers, a DFlash2 file converted before
its RoPE sections existed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support.cli import run_json, run_main

gguf = pytest.importorskip("gguf")


def write_gguf(path: Path, *, taps=(2, 7, 12, 17), mask=151669, dflash2=False, sections=False,
               arch="dflash", layers=2, blocks_in_file=None) -> Path:  # fmt: skip
    w = gguf.GGUFWriter(str(path), arch)
    for key, value in (("block_count", layers), ("embedding_length", 64),
                       ("attention.head_count", 4), ("attention.head_count_kv", 2),
                       ("attention.key_length", 16), ("feed_forward_length", 128),
                       ("vocab_size", 151936), ("block_size", 16)):  # fmt: skip
        w.add_uint32(f"dflash.{key}", value)
    w.add_float32("dflash.rope.freq_base", 1e6)
    if taps is not None:
        w.add_array("dflash.target_layers", list(taps))
    if mask is not None:
        w.add_uint32("tokenizer.ggml.mask_token_id", mask)
    if dflash2:
        for key, value in (("conv_kernel_size", 2), ("conv_group_size", 16),
                           ("selector_rank", 256), ("selector_top_k", 8)):  # fmt: skip
            w.add_uint32(f"dflash.{key}", value)
    if sections:
        w.add_array("dflash.rope.dimension_sections", [11, 11, 10, 0])
    for i in range(layers if blocks_in_file is None else blocks_in_file):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(64, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def problems(data) -> dict[str, str]:
    return {c["field"]: c["status"] for c in data["checks"] if c["status"] not in ("ok", "info")}


def test_a_healthy_gguf_reads_with_the_capture_shift(monkeypatch, capsys, tmp_path):
    code, data, _ = run_json(
        monkeypatch, capsys, "verify-config", str(write_gguf(tmp_path / "d.gguf"))
    )
    assert code == 0 and problems(data) == {}
    rows = {c["field"]: c for c in data["checks"]}
    assert rows["format"]["found"] == "GGUF (llama.cpp)"
    assert rows["dflash_config.target_layer_ids"]["found"] == [1, 6, 11, 16]
    assert data["num_speculative_tokens"] == 15


@pytest.mark.parametrize(
    "kw, field, status",
    [
        ({"mask": None}, "tokenizer.ggml.mask_token_id", "missing"),
        ({"taps": None}, "dflash.target_layers", "missing"),
        ({"dflash2": True}, "dflash.rope.dimension_sections", "missing"),
        ({"arch": "llama"}, "general.architecture", "invalid"),
        ({"blocks_in_file": 3}, "dflash.block_count", "mismatch"),
    ],
)
def test_gguf_faults(monkeypatch, capsys, tmp_path, kw, field, status):
    code, data, _ = run_json(
        monkeypatch, capsys, "verify-config", str(write_gguf(tmp_path / "d.gguf", **kw))
    )
    assert code == 1 and problems(data).get(field) == status, problems(data)


def test_a_reconverted_dflash2_passes_its_gguf_rule(monkeypatch, capsys, tmp_path):
    path = write_gguf(tmp_path / "d.gguf", dflash2=True, sections=True)
    _code, data, _ = run_json(monkeypatch, capsys, "verify-config", str(path))
    assert "dflash.rope.dimension_sections" not in problems(data)


def test_fix_and_garbage_exit_2(monkeypatch, capsys, tmp_path):
    path = write_gguf(tmp_path / "d.gguf")
    before = path.read_bytes()
    code, _out, err = run_main(monkeypatch, capsys, "verify-config", str(path), "--fix")
    assert code == 2 and "GGUF drafter" in err and path.read_bytes() == before
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\xff" * 40)
    code, _out, err = run_main(monkeypatch, capsys, "verify-config", str(bad))
    assert code == 2 and "Traceback" not in err and "not a readable GGUF" in err
