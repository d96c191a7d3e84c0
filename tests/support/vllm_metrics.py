"""vLLM's metrics as the `dflashctl metrics` tests feed them: fixture paths, log-line builders
(`SpecDecoding metrics`, `Engine 000`, start-up), /metrics pages and a real /metrics server."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "metrics"


def ts(sec: int, day: int = 20) -> str:
    return f"11-{day:02d} {10 + sec // 3600:02d}:{sec // 60 % 60:02d}:{sec % 60:02d}"


def spec_line(
    sec: int,
    *,
    mean: float | None = None,
    per_position: list[float] | None = None,
    drafts: int = 1000,
    accepted: int | None = None,
    rate: float | None = None,
    pid: int = 1,
) -> str:
    """A vLLM 0.34 `SpecDecoding metrics` line, consistent unless values are forced."""
    pp = per_position if per_position is not None else [0.7, 0.5, 0.3]
    k = len(pp)
    acc = accepted if accepted is not None else round(sum(pp) * drafts)
    dra = drafts * k
    m = mean if mean is not None else 1 + acc / drafts
    r = rate if rate is not None else acc / dra * 100
    pps = ", ".join(f"{p:.3f}" for p in pp)
    return (
        f"(APIServer pid={pid}) INFO {ts(sec)} [metrics.py:120] SpecDecoding metrics: Mean "
        f"acceptance length: {m:.2f}, Accepted throughput: {acc / 10:.2f} tokens/s, Drafted "
        f"throughput: {dra / 10:.2f} tokens/s, Accepted: {acc} tokens, Drafted: {dra} tokens, "
        f"Per-position acceptance rate: {pps}, Avg Draft acceptance rate: {r:.1f}%"
    )


def engine_line(
    sec: int,
    *,
    running: int = 2,
    gen: float = 250.0,
    pid: int = 1,
    idx: int = 0,
    hit: float = 0.0,
) -> str:
    return (
        f"(APIServer pid={pid}) INFO {ts(sec)} [loggers.py:335] Engine {idx:03d}: Avg prompt "
        f"throughput: 10.0 tokens/s, Avg generation throughput: {gen:.1f} tokens/s, Running: "
        f"{running} reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, Prefix cache hit rate: "
        f"{hit:.1f}%"
    )


def startup_lines(sec: int, *, pid: int = 1) -> list[str]:
    return [
        f"(APIServer pid={pid}) INFO {ts(sec)} [startup.py:38] vLLM server version 0.34.0, "
        "serving model Qwen/Qwen3-8B",
        f"(EngineCore pid={pid + 1}) INFO {ts(sec + 5)} [core.py:153] Initializing a V1 LLM "
        "engine (v0.34.0) with config: model='Qwen/Qwen3-8B', speculative_config="
        "SpeculativeConfig(method='dflash', model='z-lab/Qwen3-8B-DFlash-b16', "
        "num_spec_tokens=3), seed=0",
        f"(APIServer pid={pid}) INFO {ts(sec + 9)} [entry.py:139] Starting vLLM server on "
        "http://0.0.0.0:8000",
        "INFO:     Application startup complete.",
    ]


def write_log(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# ---- a real /metrics server on 127.0.0.1 ----------------------------------------------------


class MetricsServer:
    """`ThreadingHTTPServer` in a thread. `body(n)` gives the page for the n-th GET (from 0);
    `status`/`ctype` shape the answer; `hang` makes every request wait until `close()`."""

    def __init__(
        self,
        body: Callable[[int], str],
        *,
        status: int = 200,
        ctype: str = "text/plain; version=0.0.4; charset=utf-8",
        hang: bool = False,
    ) -> None:
        self.body, self.status, self.ctype, self.hang = body, status, ctype, hang
        self.hits = 0
        self.paths: list[str] = []
        self.release = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                n = outer.hits
                outer.hits += 1
                outer.paths.append(self.path)
                if outer.hang:
                    outer.release.wait(30)
                    return
                data = outer.body(n).encode()
                self.send_response(outer.status)
                self.send_header("Content-Type", outer.ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/metrics"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


def vllm_page(
    n: int,
    *,
    drafts: int = 100,
    accepted: int = 250,
    per_pos: tuple[int, ...] = (90, 80, 80),
    k: int = 3,
    engines: int = 1,
) -> str:
    """vLLM /metrics text after `n` intervals, each adding the given counts (per engine)."""
    lines = [
        "# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.",
        "# TYPE vllm:spec_decode_num_drafts_total counter",
    ]
    for e in range(engines):
        # label order differs between samples on purpose
        lines.append(
            f'vllm:spec_decode_num_drafts_total{{model_name="m",engine="{e}"}} {drafts * n}.0'
        )
        lines.append(f'vllm:spec_decode_num_drafts_created{{engine="{e}",model_name="m"}} 1.7e9')
    lines += ["# TYPE vllm:spec_decode_num_draft_tokens_total counter"]
    for e in range(engines):
        lines.append(
            f'vllm:spec_decode_num_draft_tokens_total{{engine="{e}",model_name="m"}} '
            f"{drafts * k * n}.0"
        )
    lines += ["# TYPE vllm:spec_decode_num_accepted_tokens_total counter"]
    for e in range(engines):
        lines.append(
            f'vllm:spec_decode_num_accepted_tokens_total{{engine="{e}",model_name="m"}} '
            f"{accepted * n}.0"
        )
    lines += ["# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter"]
    for e in range(engines):
        for i, a in enumerate(per_pos):
            lines.append(
                "vllm:spec_decode_num_accepted_tokens_per_pos_total"
                f'{{position="{i}",engine="{e}",model_name="m"}} {a * n}.0'
            )
    lines += [
        "# TYPE vllm:generation_tokens_total counter",
        f'vllm:generation_tokens_total{{engine="0",model_name="m"}} {400 * n}.0',
        "# TYPE vllm:num_requests_running gauge",
        'vllm:num_requests_running{engine="0",model_name="m"} 3.0',
    ]
    return "\n".join(lines) + "\n"
