"""A stand-in engine for serve/stop/status tests: stdlib only, starts in a fraction of a second.

    python tests/support/engine_process.py MODE [engine arguments ...]

It takes `--port`, `--host`, `--model`/`--model-path` and `--served-model-name` from the engine
arguments it is given (whatever engine command dflashctl rendered), logs its argv as one JSON
line (`ARGV: [...]`) and whether HF_TOKEN is set (never its value), then behaves per MODE:

- ok           vLLM-style start-up lines, uvicorn's `Application startup complete.`, then serve
               /health and /v1/models until SIGTERM
- warn         like ok, after a harmless WARNING that mentions `No module named 'vllm._C'`
- flash_attn   a traceback ending in `ModuleNotFoundError: No module named 'flash_attn'`, then
               vLLM's `Engine core initialization failed`, exit 1
- hang_fatal   logs `Engine core initialization failed` and keeps running (never ready)
- never_ready  runs, but /health answers 503 forever
- ignore_term  like ok, but ignores SIGTERM (only SIGKILL ends it)
- sglang       SGLang-style lines and `The server is fired up and ready to roll!`
- slow_load    like ok, after start-up phases a wait of seconds shows: vLLM's shard-loading
               progress bar, then a CUDA-graph capture line, each followed by a pause

`make_python(dir, mode)` writes an executable `python` wrapper that runs this file in MODE, so a
test passes it as `--python` (the engine command is `PYTHON -m dflashctl.engine.server ...`).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve()


def make_python(directory: Path, mode: str) -> Path:
    """An executable wrapper: `WRAPPER -m dflashctl.engine.server ARGS` runs the fake in MODE;
    `WRAPPER -c CODE` (serve's look-up of the engine's modules before a launch) runs this
    interpreter, which has them."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"python-{mode}"
    path.write_text(
        f'#!/bin/sh\n[ "$1" = "-c" ] && exec {sys.executable} "$@"\n'
        f'exec {sys.executable} {HERE} {mode} "$@"\n'
    )
    path.chmod(0o755)
    return path


def fake_model(directory: Path) -> str:
    """A model directory serve's pre-launch check accepts (it holds a config.json) for the fake
    engine, which reads nothing from it."""
    path = directory / "fake-model"
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text('{"model_type": "llama"}')
    return str(path)


def _arg(argv: list[str], *names: str, default: str | None = None) -> str | None:
    for i, a in enumerate(argv):
        if a in names and i + 1 < len(argv):
            return argv[i + 1]
    return default


def log(msg: str, level: str = "INFO") -> None:
    stamp = time.strftime("%m-%d %H:%M:%S")
    print(f"(APIServer pid={os.getpid()}) {level} {stamp} [fake.py:1] {msg}", flush=True)


def main() -> None:
    mode, argv = sys.argv[1], sys.argv[2:]
    port = int(_arg(argv, "--port", default="8000") or 8000)
    bind = _arg(argv, "--host", default="127.0.0.1") or "127.0.0.1"
    model = _arg(argv, "--served-model-name", "--model", "--model-path", default="fake") or "fake"
    print("ARGV: " + json.dumps(argv), flush=True)
    print(f"HF_TOKEN set: {'yes' if os.environ.get('HF_TOKEN') else 'no'}", flush=True)
    log(f"vLLM server version 0.34.0, serving model {model}")
    if mode == "flash_attn":
        time.sleep(0.3)
        print("(EngineCore pid=9) ERROR 01-01 00:00:00 [core.py:1] EngineCore failed to start.")
        print("Traceback (most recent call last):")
        print('  File "/venv/lib/vllm/attention/backends/flash_attn.py", line 12, in <module>')
        print("    import flash_attn")
        print("ModuleNotFoundError: No module named 'flash_attn'", flush=True)
        time.sleep(0.2)
        log(
            "RuntimeError: Engine core initialization failed. See root cause above. Failed core "
            "proc(s): {'EngineCore_DP0': 1}",
            "ERROR",
        )
        sys.exit(1)
    if mode == "hang_fatal":
        log("RuntimeError: Engine core initialization failed. See root cause above.", "ERROR")
        while True:
            time.sleep(1)
    if mode == "warn":
        log(
            "Failed to import from vllm._C with ModuleNotFoundError(\"No module named 'vllm._C'\")",
            "WARNING",
        )
    if mode == "slow_load":
        print(
            "Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:03<00:03]", flush=True
        )
        time.sleep(1.5)
        log("Capturing CUDA graphs for decode, 67 batch sizes")
        time.sleep(1.5)
    if mode == "ignore_term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)

    ready = mode != "never_ready"

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/health":
                code, body = (200, b"") if ready else (503, b"starting")
            elif self.path == "/v1/models" and ready:
                code = 200
                body = json.dumps({"object": "list", "data": [{"id": model}]}).encode()
            else:
                code, body = 404, b"{}"
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer((bind, port), Handler)
    if mode == "sglang":
        print(
            f"[2026-11-20 10:00:40] INFO:     Uvicorn running on http://{bind}:{port}", flush=True
        )
        print("[2026-11-20 10:00:44] The server is fired up and ready to roll!", flush=True)
    else:
        log(f"Starting vLLM server on http://{bind}:{port}")
        print("INFO:     Application startup complete.", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
