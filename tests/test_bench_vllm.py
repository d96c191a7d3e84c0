"""The vLLM tier of `dflashctl bench`: real vLLM 0.32.0 (CPU build, `.venv-vllm`, started by
tests/support/vllm_server.py) serving a tiny random pair (head_dim 64) with its DFlash drafter,
measured against the bundled engine's `--spec none` server on the same weights.

What only real vLLM shows: the engine is recognised from its `/version`, acceptance comes from
vLLM's own `vllm:spec_decode_*` counters per request, and the concurrency sweep runs against an
engine that batches (no one-at-a-time note). Speeds are printed, not asserted. About 3 GB and a
minute of start-up on 2 cores: skip with -m "not vllm".
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from support.cli import run_main
from support.vllm_server import VLLM_BIN, VllmServer
from test_smoke_engine import EngineServer

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

if not VLLM_BIN.exists():
    pytest.skip(f"no vLLM at {VLLM_BIN} (run bin/setup-vllm)", allow_module_level=True)
pytest.importorskip("torch")


@pytest.fixture(scope="module")
def pair_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    from support import pairs

    root = tmp_path_factory.mktemp("bench-vllm")
    # vLLM's CPU attention refuses the tiny pair's head_dim 16 ("Unsupported CPU attention
    # configuration: head_dim=16") at the first drafted step; 64 is one it has kernels for.
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pairs, "HEAD_DIM", 64)
        target, drafter = pairs.write_tiny_pair(root / "pair")
    vllm = VllmServer(
        target,
        drafter,
        root / "vllm.log",
        num_speculative_tokens=pairs.BLOCK_SIZE - 1,
        name="tiny",
    )
    plain = None
    try:
        vllm.wait_ready()
        plain = EngineServer(
            root / "plain.log", "--model", str(target), "--spec", "none",
            "--served-model-name", "tiny",
        )  # fmt: skip
        yield {"vllm": vllm.url, "plain": plain.url}
    finally:
        vllm.stop()
        if plain is not None:
            plain.stop()


def test_bench_against_real_vllm(pair_servers, monkeypatch, capsys):
    code, out, err = run_main(
        monkeypatch, capsys, "bench", pair_servers["plain"], pair_servers["vllm"], "--json",
        "--fixtures", "code", "--repetitions", "3", "--max-tokens", "16", "--warmup-tokens", "8",
        "--concurrency", "1,2", "--timeout", "300",
    )  # fmt: skip
    print(err)
    assert code == 0, err
    d = json.loads(out)
    plain, vllm = d["targets"]
    assert plain["engine"] == "local" and vllm["engine"] == "vllm"
    cell = vllm["fixtures"]["code"]
    assert cell["speculation"] == "speculating"
    assert cell["mean_acceptance_length"] >= 1.0 and len(cell["per_position"]) == 3
    assert all(s["mean_acceptance_length"] is not None for s in cell["samples"])
    assert cell["decode_tokens_per_s"] > 0 and cell["speedup"] > 0
    assert plain["fixtures"]["code"]["speculation"] == "not_configured"
    for lv in d["concurrency"]:
        assert lv["ok"] and lv["throughput_tokens_per_s"] > 0
        if lv["target"] == pair_servers["vllm"]:
            assert lv["note"] is None  # vLLM batches: no one-at-a-time note
