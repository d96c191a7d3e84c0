"""Real vLLM (CPU build, 0.32.0, installed by bin/setup-vllm into .venv-vllm) as a test peer.

`VllmServer` starts `vllm serve` on 127.0.0.1 with a DFlash drafter, waits for `/health`, and
stops it by pid. `DFLASHCTL_VLLM_KNORM_FIX=1` makes dflashctl's vLLM plugin (vllm_plugin/) apply
the per-layer context `k_norm` fix in every vLLM process (shared docs: vllm-cpu.md §6b).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from .startup import free_port, wait_healthy

REPO = Path(__file__).resolve().parents[2]
VLLM_VENV = Path(os.environ.get("DFLASHCTL_VLLM_VENV", REPO / ".venv-vllm"))
VLLM_BIN = VLLM_VENV / "bin" / "vllm"


class VllmServer:
    def __init__(
        self,
        target: Path,
        drafter: Path | None,
        log: Path,
        *,
        dtype: str = "float32",
        knorm_fix: bool = True,
        num_speculative_tokens: int = 7,
        name: str = "demo",
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.name = name
        self.log = log
        cmd = [
            str(VLLM_BIN), "serve", str(target), "--host", "127.0.0.1", "--port", str(self.port),
            "--served-model-name", name, "--dtype", dtype, "--max-model-len", "1024",
            "--enforce-eager", "--seed", "0",
        ]  # fmt: skip
        if drafter is not None:
            spec = {
                "method": "dflash",
                "model": str(drafter),
                "num_speculative_tokens": num_speculative_tokens,
            }
            cmd += ["--speculative-config", json.dumps(spec)]
        env = dict(os.environ)
        env.update(
            VLLM_CPU_KVCACHE_SPACE="1",
            VLLM_LOGGING_COLOR="0",
            NO_COLOR="1",
            VLLM_LOG_STATS_INTERVAL="1",
            DFLASHCTL_VLLM_KNORM_FIX="1" if knorm_fix else "0",
        )
        self.cmd = cmd
        self._fh = log.open("wb")
        self.proc = subprocess.Popen(
            cmd, stdout=self._fh, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )

    def wait_ready(self, timeout: float = 240.0) -> None:
        wait_healthy(self.proc, self.url, self.log, timeout=timeout)

    def chat(self, prompt: str, max_tokens: int) -> dict:
        body = {
            "model": self.name,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens,
            "temperature": 0,
        }
        r = httpx.post(self.url + "/v1/chat/completions", json=body, timeout=300)
        r.raise_for_status()
        return r.json()

    def spec_counters(self) -> dict[str, float]:
        """Sum of vllm:spec_decode_* counters on /metrics (per-position keys as 'pos:N')."""
        text = httpx.get(self.url + "/metrics", timeout=10).text
        out: dict[str, float] = {}
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                if not s.name.startswith("vllm:spec_decode_") or not s.name.endswith("_total"):
                    continue
                key = s.name.removeprefix("vllm:spec_decode_").removesuffix("_total")
                if "position" in s.labels:
                    key = f"pos:{s.labels['position']}"
                out[key] = out.get(key, 0.0) + s.value
        return out

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self._fh.close()


def acceptance(before: dict[str, float], after: dict[str, float]) -> dict:
    """Mean acceptance length and per-position rates for the window between two scrapes."""
    drafts = after.get("num_drafts", 0) - before.get("num_drafts", 0)
    accepted = after.get("num_accepted_tokens", 0) - before.get("num_accepted_tokens", 0)
    positions = sorted(int(k[4:]) for k in after if k.startswith("pos:"))
    per_pos = [
        (after[f"pos:{p}"] - before.get(f"pos:{p}", 0)) / drafts if drafts else 0.0
        for p in positions
    ]
    return {
        "drafts": drafts,
        "accepted": accepted,
        "mean_acceptance_length": 1 + accepted / drafts if drafts else 0.0,
        "per_position": per_pos,
    }
