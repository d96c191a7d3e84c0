"""`tune --write-playbook` for vLLM on real vLLM (CPU build, bin/setup-vllm; issue 32): the
recommended batch-size table in the written playbook is accepted by `vllm serve` as `serve`
launches it (vLLM validates `num_speculative_tokens_per_batch_size` at start-up and refuses a
malformed one), and the server answers with speculation on."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
import yaml
from support.cli import run_main
from support.pairs import DEMO_DRAFTER, demo_target
from support.startup import free_port
from support.vllm_server import VLLM_BIN, VLLM_VENV

from dflashctl.commands.tune.playbook import write_playbook
from dflashctl.commands.tune.run import KResult, TuneOptions, TuneReport

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.usefixtures("stop_all"),
    pytest.mark.skipif(not VLLM_BIN.exists(), reason=f"no vLLM at {VLLM_BIN} (bin/setup-vllm)"),
]


def test_the_written_batch_size_table_starts_real_vllm(tmp_path: Path, monkeypatch, capsys):
    port = free_port()
    opts = TuneOptions(
        engine="vllm", model=str(demo_target()), drafter=str(DEMO_DRAFTER),
        python=str(VLLM_VENV / "bin" / "python"), port=port,
        extra_args=["--dtype", "float32", "--max-model-len", "1024", "--enforce-eager"],
    )  # fmt: skip
    measured = [  # speculation wins alone, loses under load: a table with 0 in it
        KResult(0, {"code": 10.0}, {}, {}, {1: 10.0, 4: 40.0, 16: 150.0}),
        KResult(3, {"code": 14.0}, {}, {}, {1: 16.0, 4: 45.0, 16: 120.0}),
        KResult(7, {"code": 15.0}, {}, {}, {1: 18.0, 4: 42.0, 16: 100.0}),
    ]
    book = tmp_path / "tuned.yaml"
    write_playbook(TuneReport(opts, [0, 3, 7], measured), book)
    data = yaml.safe_load(book.read_text())
    data["serve"]["env"] = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_LOG_STATS_INTERVAL": "1"}
    data["serve"]["ready_timeout"] = 500
    book.write_text(yaml.safe_dump(data))
    code, out, err = run_main(monkeypatch, capsys, "serve", str(book), "--detach", "--json")
    assert code == 0, err + out
    launched = json.loads(out)
    try:
        argv = launched["cmd"]
        spec = json.loads(argv[argv.index("--speculative-config") + 1])
        assert spec["num_speculative_tokens"] == 7
        assert spec["num_speculative_tokens_per_batch_size"] == [[1, 1, 7], [2, 4, 3],
                                                                 [5, 65536, 0]]  # fmt: skip
        body = {
            "model": launched.get("model") or str(demo_target()),
            "max_tokens": 24,
            "temperature": 0,
            "messages": [{"role": "user", "content": "Write a haiku."}],
        }
        models = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=30).json()
        body["model"] = models["data"][0]["id"]
        r = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=300)
        assert r.status_code == 200, r.text
        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text
        drafts = [ln for ln in metrics.splitlines()
                  if ln.startswith("vllm:spec_decode_num_drafts_total")]  # fmt: skip
        assert drafts and float(drafts[0].rsplit(" ", 1)[1]) > 0  # batch 1: K = 7, drafting
    finally:
        code, _out, err = run_main(monkeypatch, capsys, "stop", launched["name"])
        assert code == 0, err
