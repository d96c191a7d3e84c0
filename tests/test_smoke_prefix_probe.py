"""`smoke --prefix-cache-probe`: the same long prompt twice, acceptance compared with the prefix
cold and cached.

The failing case needs vLLM ≤ 0.28 serving DFlash on a GPU with prefix caching on (vllm#47930):
nothing here can run that, so a small HTTP server on 127.0.0.1 stands in for it (tests/support/
engine_http.py, `prefix_cache="poisoned"`: vLLM's counters, acceptance collapsing on a request
whose prompt was cached). The real bundled engine, which has no prefix cache, is probed too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.cli import run_main
from support.engine_http import COLLAPSED, HEALTHY, FakeEngine

from dflashctl.commands.smoke.prefix_probe import MIN_DRAFTS, PrefixProbe, prefix_check
from dflashctl.metrics.causes import PREFIX_DROP
from dflashctl.metrics.spec_probe import SPECULATING, SpecResult
from dflashctl.metrics.window import SpecWindow

ARGS = ["--timeout", "10", "--max-tokens", "120", "--prefix-cache-probe", "--json"]


def probe_row(data: dict) -> dict:
    (row,) = [c for c in data["checks"] if c["name"] == "prefix cache"]
    return row


def test_acceptance_collapsing_on_the_cached_prefix_fails(monkeypatch, capsys, serve):
    eng: FakeEngine = serve(prefix_cache="poisoned")
    code, out, _err = run_main(monkeypatch, capsys, "smoke", eng.url, *ARGS)
    data = json.loads(out)
    row = probe_row(data)
    assert code == 1 and row["status"] == "fail"
    cold, cached = map(
        float, re.match(r"τ fell from ([\d.]+) to ([\d.]+) ", row["message"]).groups()
    )
    # the counters are whole drafts: about 17 of them for the 75-token answer
    assert cold == pytest.approx(HEALTHY.mean_length, abs=0.15)
    assert cached == pytest.approx(COLLAPSED.mean_length, abs=0.05)
    assert "(100% hit)" in row["message"] and "--no-enable-prefix-caching" in row["hint"]
    p = data["prefix_cache_probe"]
    assert (p["cold_mean_acceptance_length"], p["cached_mean_acceptance_length"]) == (
        pytest.approx(cold, abs=0.005),
        pytest.approx(cached, abs=0.005),
    )
    assert p["cached_prefix_hit_rate"] == 1.0 and p["same_text"] is True
    # the two probe requests carried the same long prompt; the smoke prompts came first
    sent = [json.dumps(r["messages"]) for r in eng.requests]
    assert sent[-1] == sent[-2] and len(sent[-1]) > 2000 and sent.count(sent[-1]) == 2


def test_acceptance_that_holds_on_the_cached_prefix_passes(monkeypatch, capsys, serve):
    eng = serve(prefix_cache="healthy")
    code, out, _err = run_main(monkeypatch, capsys, "smoke", eng.url, *ARGS)
    row = probe_row(json.loads(out))
    assert code == 0 and row["status"] == "ok"
    assert (
        "(100% from the prefix cache): the cache leaves the drafter's context intact"
        in (row["message"])
    )


def test_no_prefix_counters_or_a_log_source_is_a_skip_not_a_pass(monkeypatch, capsys, serve,
                                                                  tmp_path: Path):  # fmt: skip
    eng = serve()  # vLLM's spec counters, no prefix-cache counters
    code, out, _err = run_main(monkeypatch, capsys, "smoke", eng.url, *ARGS)
    row = probe_row(json.loads(out))
    assert code == 0 and row["status"] == "skip"
    assert "reports no prefix-cache counters" in row["message"]
    log = tmp_path / "vllm.log"
    logged = serve(log=log, prefix_cache="poisoned")
    code, out, _err = run_main(monkeypatch, capsys, "smoke", logged.url, *ARGS, "--log", str(log),
                               "--log-interval", "0.5")  # fmt: skip
    row = probe_row(json.loads(out))
    assert row["status"] == "skip" and "not from a log" in row["message"]


def _result(tau: float, drafts: int, hit: float | None) -> SpecResult:
    w = SpecWindow(engine="vllm", format="prometheus")
    w.mean_acceptance_length, w.num_drafts, w.prefix_cache_hit_rate = tau, drafts, hit
    return SpecResult("prometheus", "URL", SPECULATING, window=w)


@pytest.mark.parametrize(
    ("cached_tau", "drafts", "hit", "status"),
    [
        (4.0 * PREFIX_DROP, 50, 0.9, "fail"),  # at the edge: fails
        (4.0 * PREFIX_DROP + 0.01, 50, 0.9, "ok"),  # just over
        (1.0, MIN_DRAFTS - 1, 0.9, "skip"),  # too few drafts to compare
        (1.0, MIN_DRAFTS, 0.9, "fail"),
        (1.0, 50, 0.29, "skip"),  # under 30 % of the prompt cached: nothing to compare
        (1.0, 50, 0.30, "fail"),
        (1.0, 50, None, "skip"),  # no prefix-cache counters
    ],
)  # fmt: skip
def test_the_verdict_at_its_edges(cached_tau, drafts, hit, status):
    p = PrefixProbe(cold=_result(4.0, 50, 0.0), cached=_result(cached_tau, drafts, hit))
    assert prefix_check(p).status == status


def test_the_real_bundled_engine_gives_the_same_acceptance_twice(monkeypatch, capsys,
                                                                 tmp_path: Path):  # fmt: skip
    """The bundled engine keeps no prefix cache: both requests draft from a full context, so
    their acceptance is the same; it exports no prefix-cache counters, so the probe says it
    could not tell rather than passing."""
    pytest.importorskip("torch")
    from support.pairs import write_accepting_pair
    from support.served_engine import served

    target, drafter = write_accepting_pair(tmp_path / "pair")
    with served(target, drafter, "prefix-probe") as (url, _log):
        _code, out, err = run_main(monkeypatch, capsys, "smoke", url, "--max-tokens", "24",
                                  "--timeout", "60", "--prefix-cache-probe", "--json",
                                  "--allow-repetition")  # fmt: skip
    data = json.loads(out)
    p, row = data["prefix_cache_probe"], probe_row(data)
    assert row["status"] == "skip" and "no prefix-cache counters" in row["message"], (row, err)
    assert p["cold_mean_acceptance_length"] == p["cached_mean_acceptance_length"]
    assert p["cold_drafts"] == p["cached_drafts"] and p["same_text"] is True
