"""Capture small fixtures from real vLLM (CPU build) serving the embedded demo pair.

Not a test: a script that writes tests/data/vllm032_demo/ from two real runs, so the metrics and
smoke tests read what vLLM really prints and serves (the tests in test_vllm_fixtures.py):

    healthy   vLLM 0.32.0 CPU, bf16, no k_norm fix (what a user runs), the demo pair as shipped
              (SmolLM2-135M-Instruct and its DFlash drafter, K = 15)
    stale     the same with the field story's mask_token_id rewrite (off by six)

For each run: the log lines that matter (start-up, version, speculative config, readiness,
`Engine 000:` and `SpecDecoding metrics:` lines, requests) in NAME.log, and in NAME.smoke.json
what `dflashctl smoke` exchanges with the server: /v1/models, the /metrics families dflashctl
reads before and after, and the raw streamed answer to each smoke prompt. Whole logs are not
kept.

    .venv/bin/python tests/capture_vllm_fixtures.py      # needs bin/setup-vllm; ~4 min on CPU
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from support.pairs import DEMO_DRAFTER, demo_target
from support.vllm_server import VllmServer

from dflashctl.drafter.stale import write_stale_copy

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "data" / "vllm032_demo"
MAX_TOKENS = 96
KEEP = re.compile(
    r"server version|Resolved architecture|speculative_config=|Using auxiliary layers|"
    r"Starting vLLM|Application startup complete|Engine 000:|SpecDecoding metrics|"
    r'"POST /v1/chat/completions'
)
FAMILIES = ("vllm:spec_decode_", "vllm:generation_tokens", "vllm:prompt_tokens")


def excerpt(log: str) -> str:
    return "".join(line for line in log.splitlines(keepends=True) if KEEP.search(line))


def metrics_excerpt(text: str) -> str:
    """The families dflashctl reads: their samples and their `# HELP` / `# TYPE` lines."""
    keep = []
    for line in text.splitlines(keepends=True):
        words = line.split()
        name = words[2] if line.startswith("# ") and len(words) > 2 else line
        if name.startswith(FAMILIES):
            keep.append(line)
    return "".join(keep)


def capture(name: str, drafter: Path, tmp: Path) -> dict:
    """One run, recorded as `dflashctl smoke URL` sees it: /v1/models, /metrics before, one
    streamed chat completion per smoke prompt (raw SSE bytes), /metrics after."""
    from dflashctl.fixtures import load_prompts
    from dflashctl.server.client import chat_body

    log = tmp / f"{name}.log"
    server = VllmServer(
        demo_target(), drafter, log, dtype="bfloat16", knorm_fix=False, num_speculative_tokens=15
    )
    record: dict = {"vllm": "0.32.0 CPU build, bf16, no k_norm fix", "streams": {}}
    try:
        server.wait_ready(timeout=400)
        record["models"] = httpx.get(server.url + "/v1/models", timeout=10).json()
        record["metrics_before"] = metrics_excerpt(httpx.get(server.url + "/metrics").text)
        for p in load_prompts("smoke"):
            body = chat_body(server.name, p.text, MAX_TOKENS)
            r = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=300)
            r.raise_for_status()
            record["streams"][p.text] = r.text
        time.sleep(3)  # one more stats interval: the SpecDecoding line of the last request
        record["metrics_after"] = metrics_excerpt(httpx.get(server.url + "/metrics").text)
    finally:
        server.stop()
    (OUT / f"{name}.log").write_text(excerpt(log.read_text(errors="replace")))
    (OUT / f"{name}.smoke.json").write_text(json.dumps(record, indent=1) + "\n")
    return {"prompts": len(record["streams"]), "log_lines": len(excerpt(log.read_text()))}


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        stale = tmp / "stale-drafter"
        write_stale_copy(DEMO_DRAFTER, stale, ("mask",))
        for name, drafter in (("healthy", DEMO_DRAFTER), ("stale_mask", stale)):
            print(name, capture(name, drafter, tmp), flush=True)
    print("wrote", sorted(p.name for p in OUT.iterdir()))


if __name__ == "__main__":
    main()
