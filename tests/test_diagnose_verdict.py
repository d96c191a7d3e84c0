"""`diagnose`'s pure parts on recorded inputs: the verdict on measured figures, the start-up facts
of a real vLLM 0.32 CPU log, the effective config against the file, the mask token against a
real tokenizer, the catalogue's k_norm entry turned into findings, prompts files, divergence.

Figures are those measured on real engines (shared docs vllm-cpu.md §6b: the reference 4.65,
unpatched vLLM CPU 2.55 per position .64 .42 .25 .13 .06 .03 .02, patched 4.61).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.drafter_files import write_drafter

from dflashctl.commands.diagnose.facts import (
    NOTE,
    PROBLEM,
    WARNING,
    Finding,
    LogFacts,
    defect_findings,
    drafter_path_finding,
    effective_config_findings,
    log_trust_findings,
    read_log_facts,
    tokenizer_mask_finding,
)
from dflashctl.commands.diagnose.run import load_prompt_file
from dflashctl.commands.diagnose.verdict import (
    Figures,
    Floor,
    diverging_token,
    first_divergence,
    judge,
)
from dflashctl.defects.match import match
from dflashctl.defects.predicates import Facts
from dflashctl.drafter.config import resolve
from dflashctl.errors import DflashError, InputError
from dflashctl.metrics.spec_probe import NO_DRAFTS, NOT_CONFIGURED

DATA = Path(__file__).parent / "data" / "metrics"
FLOOR = Floor(1.5, "dflashctl's default floor")
VLLM_CPU = (0.64, 0.42, 0.25, 0.13, 0.06, 0.03, 0.02)  # per position, unpatched vLLM CPU
REFERENCE = (0.90, 0.80, 0.67, 0.53, 0.38, 0.24, 0.13)  # sums to 3.65: mean length 4.65


def fig(p: float | None, r: float | None, **kw) -> Figures:
    base = dict(production_drafts=200, reference_drafts=200, prompts=24, same_text=24)
    base.update(kw)
    return Figures(production=p, reference=r, **base)


# ---- the verdict ------------------------------------------------------------------------------


def test_engine_when_production_keeps_far_fewer_on_the_same_text():
    f = fig(2.55, 4.65, production_per_position=VLLM_CPU, reference_per_position=REFERENCE)
    verdict, found = judge(f, FLOOR, [])
    assert verdict == "engine"
    (engine,) = [x for x in found if x.kind == "engine"]
    assert engine.severity == PROBLEM
    assert "2.55 vs 4.65: 42% of its accepted tokens per draft" in engine.message
    assert "same greedy text" in engine.message
    assert "position 1: production 0.640, reference 0.900" in engine.evidence
    assert "position 7: production 0.020, reference 0.130" in engine.evidence


def test_healthy_when_the_fixed_engine_matches_the_reference():
    verdict, found = judge(fig(4.61, 4.65), FLOOR, [])
    assert verdict == "healthy"
    assert all(f.severity != PROBLEM for f in found)


def test_drafter_when_both_agree_and_acceptance_is_low():
    verdict, found = judge(fig(1.07, 1.05), FLOOR, [])
    assert verdict == "drafter"
    (d,) = [x for x in found if x.kind == "drafter"]
    assert "below 1.50" in d.message and "default floor" in d.message
    # the registry's expected minimum is the floor when there is one
    verdict, _ = judge(fig(2.9, 3.0), Floor(3.2, "the registry's expected minimum for demo"), [])
    assert verdict == "drafter"
    assert judge(fig(2.9, 3.0), FLOOR, [])[0] == "healthy"


def test_config_wins_over_every_measurement():
    stale = Finding("config", "verify-config: dflash_config.mask_token_id is mismatch")
    # a config problem explains the gap as well: config, not engine
    assert judge(fig(1.10, 4.65), FLOOR, [stale])[0] == "config"
    assert judge(fig(1.0, 1.0), FLOOR, [stale])[0] == "config"
    # warnings and notes do not decide the verdict
    warn = Finding("log", "stale log", severity=WARNING)
    assert judge(fig(4.6, 4.65), FLOOR, [warn])[0] == "healthy"
    # no acceptance measured, but the config explains it
    assert judge(fig(None, 4.65), FLOOR, [stale])[0] == "config"


def test_production_not_speculating_is_a_config_verdict():
    for state in (NOT_CONFIGURED, NO_DRAFTS):
        verdict, found = judge(fig(None, 4.65, production_state=state), FLOOR, [])
        assert verdict == "config"
        assert "speculation is not configured or not running" in found[0].message


def test_production_far_above_the_reference_means_other_files():
    verdict, found = judge(fig(4.65, 1.10), FLOOR, [])
    assert verdict == "config"
    assert "does not serve these files" in found[0].message


def test_engine_verdict_hedged_when_the_text_differs_too():
    verdict, found = judge(fig(2.0, 4.0, same_text=0), FLOOR, [])
    assert verdict == "engine"
    assert "target side differs too" in found[0].message
    verdict, found = judge(fig(2.0, 4.0, same_text=10), FLOOR, [])
    assert "on the 10 prompts with the same greedy text" in found[0].message


def test_small_gaps_are_not_an_engine_problem_and_few_drafts_warn():
    assert judge(fig(4.61, 4.65), FLOOR, [])[0] == "healthy"  # bf16 vs fp32: 0.04
    assert judge(fig(4.45, 4.65), FLOOR, [])[0] == "healthy"  # 95 % of the accepted tokens
    # the demo pair with the k_norm defect emulated in the bundled engine: a drafter whose
    # layer-1 k_norm is 1.5x (6 %: shown, not an engine verdict) or 4x (21 %: engine)
    assert judge(fig(5.76, 6.05), FLOOR, [])[0] == "healthy"
    assert judge(fig(4.98, 6.05), FLOOR, [])[0] == "engine"
    # production above the reference by less than a quarter: not "other files"
    assert judge(fig(4.65, 4.2), FLOOR, [])[0] == "healthy"
    assert judge(fig(1.2, 1.4), FLOOR, [])[0] == "drafter"  # under MIN_GAP
    _, found = judge(fig(4.6, 4.65, production_drafts=3), FLOOR, [])
    assert any(f.kind == "measurement" and f.severity == WARNING for f in found)


def test_no_measurement_and_no_explanation_cannot_run():
    with pytest.raises(DflashError, match="no acceptance was measured on production"):
        judge(fig(None, 4.65), FLOOR, [])


# ---- a real vLLM 0.32 CPU log ----------------------------------------------------------------


def facts_of(text: str, path: str = "vllm.log") -> LogFacts:
    data = text.encode()
    return read_log_facts([data[:50], data[50:]], path)  # a line split across chunks


def test_real_vllm_cpu_log_facts():
    raw = (DATA / "vllm_032_cpu_real.log").read_bytes()
    f = read_log_facts([raw], "vllm_032_cpu_real.log")
    assert f.aux_layers == [1, 3]
    assert f.port == 8011
    assert f.build == "cpu"
    assert "DFlashDraftModel" in f.architectures


LAUNCH = (
    "(APIServer pid=1) INFO 12-02 12:53:00 [api_utils.py:327] vLLM server version 0.32.0, "
    "serving model /m/target\n"
    "(APIServer pid=1) INFO 12-02 12:53:00 [api_utils.py:286] non-default args: {'model': "
    "'/m/target', 'port': 8011, 'speculative_config': {'method': 'dflash', 'model': "
    "'/m/drafter', 'num_speculative_tokens': 7}}\n"
    "(Worker pid=3) INFO 12-02 12:53:39 [gpu_model_runner.py:5244] Using auxiliary layers "
    "from speculative config: (2, 4, 6)\n"
    "(APIServer pid=1) INFO 12-02 12:54:39 [entry.py:140] Starting vLLM server on "
    "http://127.0.0.1:8011\n"
)


def test_vllm_032_logo_line_starts_a_launch():
    logo = (
        "(APIServer pid=16710) INFO 12-03 08:55:59 [api_utils.py:347]  \u2584\u2584 \u2584\u2588 "
        "\u2588     \u2588     \u2588 \u2580\u2584\u2580 \u2588  version 0.32.0\r\n"
    )
    f = facts_of("Starting vLLM server on http://0.0.0.0:9\n" + logo + "CPU KV cache size: 9\n")
    assert (f.launches, f.engine, f.version, f.build, f.port) == (1, "vllm", "0.32.0", "cpu", None)


def test_latest_launch_wins_and_its_facts_are_complete():
    old = LAUNCH.replace("(2, 4, 6)", "(9, 9)").replace("8011", "9000")
    f = facts_of(old + "CPU KV cache usage: 0.0%\n" + LAUNCH + KNORM)
    assert f.launches == 2
    assert (f.engine, f.version, f.port) == ("vllm", "0.32.0", 8011)
    assert f.aux_layers == [2, 4, 6]
    assert f.drafter_path == "/m/drafter" and f.num_speculative_tokens == 7
    assert f.knorm_fix and f.spec_configured is True
    assert f.build is None  # the CPU KV cache line belonged to the earlier launch


KNORM = (
    "(Worker pid=3) INFO 12-02 12:53:30 [dflashctl_vllm_plugin.py:33] dflashctl: applied the "
    "DFlash context k_norm fix (per-layer RMSNorm of context keys)\n"
)


def test_the_bundled_engines_lines():
    text = (
        "(APIServer pid=9) INFO 12-02 10:00:00 [server.py:415] dflashctl engine version 0.1.0, "
        "serving model /p/target\n"
        "(APIServer pid=9) INFO 12-02 10:00:00 [server.py:416] non-default args: {'model': "
        "'/p/target', 'drafter': '/p/stale', 'port': '4000'}\n"
        "(APIServer pid=9) INFO 12-02 10:00:01 [server.py:387] Using auxiliary layers from "
        "speculative config: (1, 2)\n"
        "(APIServer pid=9) INFO 12-02 10:00:02 [server.py:398] DFlash: block size 4, "
        "num_speculative_tokens 3, mask token 253\n"
        "INFO:     Uvicorn running on http://127.0.0.1:4000 (Press CTRL+C to quit)\n"
    )
    f = facts_of(text)
    assert (f.engine, f.version, f.port, f.mask_token_id) == ("local", "0.1.0", 4000, 253)
    assert f.drafter_path == "/p/stale" and f.aux_layers == [1, 2]


def test_a_log_of_another_server_or_a_stale_one_is_not_used():
    f = facts_of(LAUNCH)
    ok, found = log_trust_findings(f, 8011, True)
    assert ok and not found
    ok, found = log_trust_findings(f, 8000, True)
    assert not ok and "another server's log" in found[0].message
    ok, found = log_trust_findings(f, 8011, False)
    assert not ok and "did not grow" in found[0].message and found[0].severity == WARNING
    ok, found = log_trust_findings(facts_of("hello\n"), 8011, True)
    assert ok and "no engine start-up line" in found[0].message


def cfg(ids: list[int] | None = None, top: list[int] | None = None, mask: int = 4000) -> dict:
    c = {"architectures": ["DFlashDraftModel"], "num_hidden_layers": 3, "hidden_size": 384}
    c["dflash_config"] = {"mask_token_id": mask}
    if ids is not None:
        c["dflash_config"]["target_layer_ids"] = ids
    if top is not None:
        c["target_layer_ids"] = top
    return c


def test_effective_config_against_the_file():
    f = facts_of(LAUNCH)  # the server captures (2, 4, 6): ids [1, 3, 5]
    assert effective_config_findings(f, resolve(cfg([1, 3, 5]), 8), "/m/drafter", "c.json") == []
    (bad,) = effective_config_findings(f, resolve(cfg([2, 4, 6]), 8), "/m/d", "c.json")
    assert bad.severity == PROBLEM and "(2, 4, 6)" in bad.message and "(3, 5, 7)" in bad.message
    # the file keeps its ids at the top level only: V1 logs no line; the server did log one
    (odd,) = effective_config_findings(f, resolve(cfg(top=[1, 3, 5]), 8), "/m/d", "c.json")
    assert "has none there" in odd.message
    # the file has dflash_config ids but the server logged no aux line
    no_line = facts_of(LAUNCH.replace("Using auxiliary", "Using other"))
    (miss,) = effective_config_findings(no_line, resolve(cfg([1, 3, 5]), 8), "/m/d", "c.json")
    assert "logged no `Using auxiliary layers" in miss.message
    off = facts_of(LAUNCH.replace("'speculative_config': {", "'x': {") + "speculative_config=None,")
    assert (
        "without speculative decoding"
        in effective_config_findings(off, resolve(cfg([1, 3, 5]), 8), "/m/d", "c.json")[0].message
    )


def test_the_served_drafter_directory_against_the_given_one():
    f = facts_of(LAUNCH)
    assert drafter_path_finding(f, "/m/drafter", None, cfg([1])) is None
    same = drafter_path_finding(f, "/other", cfg([1]), cfg([1]))
    assert same is not None and same.severity == NOTE
    diff = drafter_path_finding(f, "/other", cfg([1], mask=3994), cfg([1]))
    assert diff is not None and diff.severity == PROBLEM and "dflash_config" in diff.message


def test_mask_token_against_the_tiny_tokenizer(tmp_path: Path):
    from support.pairs import write_tiny_pair

    target, _ = write_tiny_pair(tmp_path)
    tok = json.loads((target / "tokenizer.json").read_text())
    assert tokenizer_mask_finding(tok, resolve(cfg(mask=259)), "c.json") is None
    bad = tokenizer_mask_finding(tok, resolve(cfg(mask=253)), "c.json")
    assert (
        bad is not None and "ordinary text token" in bad.message and "<|mask|> = 259" in bad.message
    )
    special = tokenizer_mask_finding(tok, resolve(cfg(mask=258)), "c.json")
    assert special is not None and "<|im_end|>" in special.message
    assert tokenizer_mask_finding(tok, resolve(cfg(mask=151669)), "c.json") is None  # outside


# ---- the defect catalogue ------------------------------------------------------------------


def test_k_norm_defect_named_on_an_engine_verdict_and_mitigated_by_the_plugin(tmp_path: Path):
    d = write_drafter(tmp_path / "d", k_norm=[0.96875, 1.5], dtype="BF16")
    ms = match(Facts(engine="vllm", version="0.32.0", build="cpu", drafter_dir=d,
                     num_target_layers=4), include_possible=True)  # fmt: skip
    (f,) = [x for x in defect_findings(ms, "engine", None) if x.defect == "vllm-cpu-context-k-norm"]
    assert f.severity == PROBLEM and "confirmed" in f.message and "per layer" in (f.fix or "")
    assert any("differ between layers" in e for e in f.evidence)
    assert f.to_json()["level"] == "fail"  # a problem is the fail level (dflashctl/report.py)
    fixed = facts_of(KNORM)
    (n,) = [
        x for x in defect_findings(ms, "healthy", fixed) if x.defect == "vllm-cpu-context-k-norm"
    ]
    assert n.severity == NOTE and "mitigated" in n.message and n.level == "ok"
    (u,) = [
        x for x in defect_findings(ms, "healthy", None) if x.defect == "vllm-cpu-context-k-norm"
    ]
    assert u.severity == NOTE and "matches the reference here" in u.message
    # no log: vLLM's /version says 0.32.0 on every build, so the entry is only possible
    from dflashctl.commands.diagnose.run import match_defects

    ms = match_defects(Facts(engine="vllm", version="0.32.0", drafter_dir=d, num_target_layers=4))
    (p,) = [x for x in ms if x.defect.id == "vllm-cpu-context-k-norm"]
    assert p.certainty == "possible" and any("pass --log" in u for u in p.unchecked)
    (w,) = [x for x in defect_findings(ms, "engine", None) if x.defect == "vllm-cpu-context-k-norm"]
    assert w.severity == WARNING and "possibly" in w.message and w.level == "warning"


# ---- prompts and divergence -------------------------------------------------------------


def test_prompt_files(tmp_path: Path):
    p = tmp_path / "p.json"
    p.write_text(json.dumps(["a", {"id": "two", "prompt": "b"}]))
    assert [(x.id, x.text) for x in load_prompt_file(p)] == [("prompt1", "a"), ("two", "b")]
    p = tmp_path / "p.jsonl"
    p.write_text('"a"\n\n{"prompt": "b"}\n')
    assert [x.text for x in load_prompt_file(p)] == ["a", "b"]
    p = tmp_path / "p.txt"
    p.write_text("first prompt\n\nsecond prompt\n")
    assert [x.text for x in load_prompt_file(p)] == ["first prompt", "second prompt"]
    bad = {
        "b.json": b"[1, 2",
        "c.json": b'{"x": 1}',
        "d.json": b"[3]",
        "e.txt": b"\n\n",
        "f.txt": b"\x00\x01",
        "g.txt": b"\xff\xfe",
    }
    for name, raw in bad.items():
        (tmp_path / name).write_bytes(raw)
        with pytest.raises(InputError):
            load_prompt_file(tmp_path / name)
    with pytest.raises(InputError, match="cannot read"):
        load_prompt_file(tmp_path / "missing.txt")


def test_first_divergence_in_characters_and_tokens():
    assert first_divergence("abc", "abc") is None
    assert first_divergence("abcd", "abXd") == 2
    assert first_divergence("ab", "abc") == 2
    pieces = {1: "ab", 2: "cd", 3: "ef", 4: "XY"}

    def decode(ids: list[int]) -> str:
        return "".join(pieces[i] for i in ids)

    assert diverging_token("abcdXY", [1, 2, 3], decode) == 2
    assert diverging_token("abcdef", [1, 2, 3], decode) == 3


def test_late_text_drift_is_a_note_and_early_divergence_a_warning():
    """Verify kernels are not bit-identical to decode ones: greedy text that drifts apart late
    is expected (acceptance is compared); a difference in the first characters is not."""
    from dflashctl.commands.diagnose.measure import Side
    from dflashctl.commands.diagnose.run import _text_findings
    from dflashctl.commands.diagnose.verdict import PromptComparison

    prod, ref = Side("production", "p"), Side("reference", "r")
    late = [PromptComparison("code", False, char=212), PromptComparison("prose", True)]
    (f,) = _text_findings(prod, ref, late)
    assert f.severity == "note" and "expected" in f.message and "character 212" in f.message
    early = [PromptComparison("code", False, char=3), PromptComparison("prose", False, char=300)]
    (g,) = _text_findings(prod, ref, early)
    assert g.severity == "warning" and "early" in g.message and len(g.evidence) == 1
