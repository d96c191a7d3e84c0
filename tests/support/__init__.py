"""Helpers the tests import (`from support.MODULE import ...`; pytest puts tests/ on sys.path).

- cli: `run_main` / `run_json`, the console-script entry point run in-process: (exit code,
  stdout, stderr), stdout parsed for `--json`. (The `stop_all` fixture is in tests/conftest.py.)
- startup: `free_port`, `read_until_startup` (a server's pipe up to `Application startup
  complete`), `wait_healthy` (poll `/health` of a started server, failing with its log's tail).
- hostile: the hostile-input suites' subprocess runner (`dflashctl(...)`, real exit code and
  stderr, memory and file-size limits), `assert_clean_error`, `snapshot`, and `HostileServer`,
  a misbehaving HTTP server (endless, gzip-bomb, trickling answers).
- pairs: the target + drafter pairs tests serve: the shipped demo pair, and a tiny random pair
  written with the engine's own modules (`write_tiny_pair`, `write_accepting_pair`).
- tiny_checkpoints: the engine tests' tiny checkpoints written by transformers (targets,
  tokenizer, DFlash drafters, an always-accepting pair).
- served_engine: `served`, the real bundled engine launched as `dflashctl serve` launches it.
- engine_process: a stand-in engine process for serve/stop/status (`make_python` gives a
  `--python` wrapper; modes ok, warn, flash_attn, hang_fatal, never_ready, ignore_term, sglang).
- engine_http: `FakeEngine`, an in-thread OpenAI-compatible server (streamed chat, /metrics with
  spec-decode counters, failures on request) for smoke and bench.
- vllm_server: real vLLM (CPU build from bin/setup-vllm) as a test peer: `VllmServer`,
  `acceptance`.
- vllm_metrics: vLLM log lines and /metrics pages as the metrics tests feed them, the fixture
  folder `DATA`, and `MetricsServer`, a real /metrics server.
- hub: `HubServer`, a Hugging Face Hub-compatible server on 127.0.0.1 over repos built with
  `HubRepos`, with faults on request.
- sshd: a real OpenSSH sshd on 127.0.0.1 with client key, known_hosts and ssh_config
  (`sshd_server` for a module's fixture).
- safetensors_files: real safetensors files (sparse, no torch), DFlash tensor layouts.
- drafter_files: small DFlash drafter folders whose `k_norm` weights hold real values.
"""
