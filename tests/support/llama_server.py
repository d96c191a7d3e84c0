"""A stand-in for llama.cpp's `llama-server`, named as such: no llama.cpp build fits this machine's
test budget. It is a real executable (a Python script with this interpreter in its shebang) that
the tests run as serve and doctor run the real one:

- `--version` prints the real format on stderr (common/arg.cpp: `version: %d (%s)` then `built
  with %s for %s`, after a backend line as GPU builds print) and exits 0;
- otherwise it reads `--host`, `--port`, `-a/--alias`, `-m`, `-md`, `--spec-type` and
  `--spec-draft-n-max`, listens on HOST:PORT at once and answers `/health` 503 `Loading model`
  while it "loads" (tools/server: the HTTP server starts before the model), then 200; `/v1/models`
  lists the alias (or the model path); then it logs the ready line `main: server is listening on
  http://HOST:PORT` and `main: starting the main loop...` and sits until it is stopped. With
  `--spec-type draft-dflash` it logs the DFlash start-up line in the form field-2026-12.md §1
  quotes (`n_max=… -> clamped to …`).
"""

from __future__ import annotations

import sys
from pathlib import Path

VERSION_OUT = (
    "load_backend: loaded CPU backend from /opt/llama.cpp/libggml-cpu-haswell.so\n"
    "version: {build} (7f3a9c21)\n"
    "built with cc (Debian 14.2.0-19) 14.2.0 for x86_64-linux-gnu\n"
)

SCRIPT = """#!{python}
import http.server, json, pathlib, sys, threading, time

HERE = pathlib.Path(__file__).resolve().parent
args = sys.argv[1:]
if args[:1] == ["--version"]:
    sys.stderr.write((HERE / "version.txt").read_text())
    sys.exit(0)


def value(*flags, default=None):
    for i, a in enumerate(args):
        if a in flags and i + 1 < len(args):
            return args[i + 1]
    return default


host = value("--host", default="127.0.0.1")
port = int(value("--port", default="8080"))
model = value("-m", "--model", default="models/7B/ggml-model-f16.gguf")
alias = value("-a", "--alias", default=model)
state = {{"loading": True}}


class Handler(http.server.BaseHTTPRequestHandler):
    def reply(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/health":
            if state["loading"]:
                err = {{"code": 503, "message": "Loading model", "type": "unavailable_error"}}
                self.reply(503, {{"error": err}})
            else:
                self.reply(200, {{"status": "ok"}})
        elif self.path in ("/v1/models", "/models"):
            models = [{{"id": alias, "object": "model", "owned_by": "llamacpp"}}]
            self.reply(200, {{"object": "list", "data": models}})
        else:
            self.reply(404, {{"error": {{"code": 404, "message": "File Not Found"}}}})

    def log_message(self, *a):
        pass


server = http.server.ThreadingHTTPServer((host, port), Handler)
threading.Thread(target=server.serve_forever, daemon=True).start()
print("build: {build} (7f3a9c21) with cc for x86_64-linux-gnu", flush=True)
print(f"srv    load_model: loading model '{{model}}'", flush=True)
if value("--spec-type") == "draft-dflash":
    n_max = int(value("--spec-draft-n-max", default="16"))
    said = f"n_max={{n_max}} -> clamped to 15" if n_max > 15 else f"n_max={{n_max}}"
    print("common_speculative_impl_draft_dflash: adding speculative implementation "
          f"'draft-dflash' - {{said}} (trained DFlash block_size=16) - block_size=16, "
          "mask_token_id=151669, n_extract=5", flush=True)
time.sleep({load_s})
state["loading"] = False
print(f"main: server is listening on http://{{host}}:{{port}}", flush=True)
print("main: starting the main loop...", flush=True)
print("srv  update_slots: all slots are idle", flush=True)
while True:
    time.sleep(3600)
"""


def fake_llama_server(
    where: Path, build: int, version_text: str | None = None, *, load_s: float = 0.5
) -> Path:
    """An executable named llama-server in `where` that reports `build` (see the module)."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "version.txt").write_text(version_text or VERSION_OUT.format(build=build))
    exe = where / "llama-server"
    exe.write_text(SCRIPT.format(python=sys.executable, build=build, load_s=load_s))
    exe.chmod(0o755)
    return exe
