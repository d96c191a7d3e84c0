"""The safetensors header reader: real files (sparse where big), shards, and hostile inputs."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest
from support.safetensors_files import header_bytes, qwen36_27b_tensors, write_safetensors

from dflashctl.drafter.header import (
    MAX_HEADER_BYTES,
    TensorInfo,
    find_checkpoint,
    read_file_header,
    read_header,
)
from dflashctl.errors import InputError

SMALL = {"fc.weight": ("BF16", [8, 24]), "norm.weight": ("F32", [8]), "d2t": ("I64", [3])}


def _raw_file(path: Path, header: bytes, data: bytes = b"") -> Path:
    path.write_bytes(struct.pack("<Q", len(header)) + header + data)
    return path


def _error(path: Path) -> str:
    with pytest.raises(InputError) as info:
        read_header(path)
    message = info.value.message
    assert "\n" not in message
    return message


def test_real_qwen36_drafter_header_from_a_sparse_3_4_gb_file(tmp_path: Path):
    path = write_safetensors(tmp_path / "model.safetensors", qwen36_27b_tensors())
    assert path.stat().st_size > 3_400_000_000
    header = read_header(path)
    assert len(header.tensors) == 58
    assert header.tensors["fc.weight"] == TensorInfo("BF16", (5120, 25600))
    assert header.tensors["layers.4.self_attn.k_proj.weight"] == ("BF16", (1024, 5120))
    assert header.tensors["layers.0.mlp.down_proj.weight"].shape == (5120, 17408)
    assert header.tensors["layers.2.self_attn.q_norm.weight"].shape == (128,)
    assert header.metadata == {"format": "pt"}
    assert header.total_bytes == path.stat().st_size
    assert header.dtypes() == {"BF16": 58}


def test_agrees_with_the_safetensors_library(tmp_path: Path):
    np = pytest.importorskip("numpy")
    from safetensors import safe_open

    path = write_safetensors(tmp_path / "small.safetensors", SMALL, fill=True)
    ours = read_header(path).tensors
    with safe_open(str(path), framework="numpy") as f:
        names = f.keys()
        theirs = {k: (f.get_slice(k).get_dtype(), tuple(f.get_slice(k).get_shape())) for k in names}
        assert f.get_tensor("d2t").dtype == np.int64
    assert {k: tuple(v) for k, v in ours.items()} == theirs


def test_shards_through_the_index(tmp_path: Path):
    one = {"fc.weight": ("BF16", [16, 48]), "hidden_norm.weight": ("BF16", [16])}
    two = {"layers.0.input_layernorm.weight": ("BF16", [16]), "norm.weight": ("BF16", [16])}
    write_safetensors(tmp_path / "model-00001-of-00002.safetensors", one)
    write_safetensors(tmp_path / "model-00002-of-00002.safetensors", two)
    weight_map = dict.fromkeys(one, "model-00001-of-00002.safetensors")
    weight_map.update(dict.fromkeys(two, "model-00002-of-00002.safetensors"))
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {"total_size": 1}, "weight_map": weight_map}))

    assert find_checkpoint(tmp_path) == index
    header = read_header(tmp_path)
    assert set(header.tensors) == set(one) | set(two)
    assert header.shard_of["norm.weight"] == "model-00002-of-00002.safetensors"
    assert [p.name for p in header.files] == [
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    ]

    (tmp_path / "model-00002-of-00002.safetensors").unlink()
    assert "shard model-00002-of-00002.safetensors is missing" in _error(index)


def test_index_problems(tmp_path: Path):
    write_safetensors(tmp_path / "a.safetensors", {"x": ("F32", [2])})
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": {"y": "a.safetensors"}}))
    assert "does not contain it" in _error(index)
    index.write_text(json.dumps({"weight_map": {"x": "../a.safetensors"}}))
    assert "not a plain file name" in _error(index)
    index.write_text(json.dumps({"weight_map": []}))
    assert "weight_map" in _error(index)
    index.write_text('{"weight_map": {"x": "a.safe')
    assert "truncated JSON" in _error(index)


def test_directory_without_and_with_ambiguous_checkpoints(tmp_path: Path):
    assert find_checkpoint(tmp_path) is None
    write_safetensors(tmp_path / "a.safetensors", {"x": ("F32", [2])})
    assert find_checkpoint(tmp_path) == tmp_path / "a.safetensors"
    write_safetensors(tmp_path / "b.safetensors", {"x": ("F32", [2])})
    with pytest.raises(InputError, match=r"no model\.safetensors\.index\.json"):
        find_checkpoint(tmp_path)


def test_hostile_header_length_is_refused_without_reading(tmp_path: Path):
    path = tmp_path / "evil.safetensors"
    path.write_bytes(struct.pack("<Q", 2**63) + b"{}")
    assert "more than the 100 MB" in _error(path)
    path.write_bytes(struct.pack("<Q", MAX_HEADER_BYTES + 1) + b"{}")
    assert "more than the 100 MB" in _error(path)


def test_header_length_larger_than_the_file(tmp_path: Path):
    path = tmp_path / "short.safetensors"
    path.write_bytes(struct.pack("<Q", 4096) + b'{"x": 1}')
    assert "truncated header" in _error(path)


def test_truncated_download(tmp_path: Path):
    good = write_safetensors(tmp_path / "model.safetensors", SMALL, fill=True)
    blob = good.read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    cut_header = tmp_path / "cut_header.safetensors"
    cut_header.write_bytes(blob[: 8 + n // 2])
    assert "truncated header" in _error(cut_header)
    cut_data = tmp_path / "cut_data.safetensors"
    cut_data.write_bytes(blob[:-10])
    assert "truncated data" in _error(cut_data)
    tiny = tmp_path / "tiny.safetensors"
    tiny.write_bytes(b"\x01\x02")
    assert "too short" in _error(tiny)


@pytest.mark.parametrize(
    ("header", "data", "needle"),
    [
        (b"this is not json", b"", "not valid JSON"),
        (b"\xff\xfe\xfd\xfc", b"", "not UTF-8"),
        (b"[1, 2, 3]", b"", "not an object"),
        (b'{"x": {"dtype": "Q7", "shape": [1], "data_offsets": [0, 1]}}', b"\0", "unknown dtype"),
        (b'{"x": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}', b"\0" * 4, "shape"),
        (b'{"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}', b"\0" * 4, "needs 8"),
        (b'{"x": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}}', b"\0" * 4, "bad data"),
        (b'{"x": {"dtype": "F32", "shape": [1], "data_offsets": [0]}}', b"\0" * 4, "[begin, end]"),
        (
            b'{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},'
            b' "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}',
            b"\0" * 8,
            "overlaps",
        ),
        (b'{"x": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}', b"\0" * 8, "gap"),
        (
            b'{"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}',
            b"\0" * 9,
            "not covered",
        ),
        (
            b'{"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},'
            b' "x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}',
            b"\0" * 4,
            "duplicate key",
        ),
        (b'{"__metadata__": [1], "x": 1}', b"", "__metadata__"),
    ],
)
def test_malformed_headers(tmp_path: Path, header: bytes, data: bytes, needle: str):
    path = _raw_file(tmp_path / "bad.safetensors", header, data)
    assert needle in _error(path)


def test_the_library_rejects_what_we_reject(tmp_path: Path):
    """Our checks are not stricter than the format: the library refuses these files too."""
    pytest.importorskip("numpy")
    from safetensors import SafetensorError, safe_open

    bad = [
        (b'{"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}', b"\0" * 4),
        (b'{"x": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}', b"\0" * 8),
        (b'{"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}', b"\0" * 9),
    ]
    for i, (header, data) in enumerate(bad):
        path = _raw_file(tmp_path / f"bad{i}.safetensors", header, data)
        with pytest.raises(InputError):
            read_header(path)
        with pytest.raises(SafetensorError):
            safe_open(str(path), framework="numpy")


def test_missing_and_unreadable_files(tmp_path: Path):
    assert "not found" in _error(tmp_path / "nope.safetensors")
    assert "no safetensors checkpoint" in _error(tmp_path)
    head, size = header_bytes({"x": ("F32", [1])})
    path = tmp_path / "locked.safetensors"
    path.write_bytes(head + b"\0" * size)
    tensors, _meta, file_size = read_file_header(path)
    assert tensors == {"x": TensorInfo("F32", (1,))} and file_size == len(head) + size
    if os.geteuid() != 0:
        path.chmod(0)
        assert "cannot read" in _error(path)


def test_an_unreadable_checkpoint_as_nobody() -> None:
    """The same through verify-config as the user nobody: root reads anything and CI is root."""
    import shutil

    from support.unprivileged import run_unprivileged, world_dir

    d = world_dir()
    try:
        (d / "drafter").mkdir()
        (d / "drafter").chmod(0o755)
        (d / "drafter" / "config.json").write_text("{}")
        (d / "drafter" / "config.json").chmod(0o644)
        head, size = header_bytes({"x": ("F32", [1])})
        ckpt = d / "drafter" / "model.safetensors"
        ckpt.write_bytes(head + b"\0" * size)
        ckpt.chmod(0)
        res = run_unprivileged(["verify-config", str(d / "drafter")], cwd=d)
        assert res.returncode == 2, res.stdout + res.stderr
        assert "cannot read" in res.stderr and "Traceback" not in res.stderr
    finally:
        shutil.rmtree(d)
