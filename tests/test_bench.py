"""`dflashctl bench` against the REAL bundled engine: two servers on 127.0.0.1 on a tiny random
pair (tests/support/pairs.py), started the way users start them, with `dflashctl serve --detach`:
`spec` (the DFlash drafter, by deployment name) and `plain` (`--spec none`, from a playbook).

Speed is printed, never asserted: the figures come from a loaded 2-core machine. What is
asserted: the JSON shape, the interleaving order (as recorded when each request was sent),
medians, speedup against the first target, acceptance from the /metrics windows, the greedy
outputs matching, the concurrency sweep and the PNG.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import run_json, run_main
from support.startup import free_port

pytest.importorskip("torch")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("tokenizers")

REPO = Path(__file__).resolve().parent.parent
FAST = ["--timeout", "60"]


def _dflashctl(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dflashctl", *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """{"home": DFLASHCTL_HOME, "spec": url, "plain": url, "playbook": path} for the module."""
    from support.pairs import write_tiny_pair

    root = tmp_path_factory.mktemp("bench")
    target, drafter = write_tiny_pair(root / "pair")
    home = root / "home"
    env = {**os.environ, "DFLASHCTL_HOME": str(home), "NO_COLOR": "1", "OMP_NUM_THREADS": "1"}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    book = root / "plain.yaml"
    book.write_text(
        "name: plain\nhosts: [local]\nserve:\n  engine: local\n"
        f"  model: {target}\n  spec: none\n  port: {free_port()}\n  served_model_name: tiny\n"
    )
    try:
        spec = _dflashctl(
            env, "serve", "--model", str(target), "--drafter", str(drafter), "--name", "spec",
            "--port", str(free_port()), "--served-model-name", "tiny", "--detach", "--json",
        )  # fmt: skip
        assert spec.returncode == 0, spec.stderr
        plain = _dflashctl(env, "serve", str(book), "--detach", "--json")
        assert plain.returncode == 0, plain.stderr
        yield {
            "home": str(home),
            "spec": json.loads(spec.stdout)["url"],
            "plain": json.loads(plain.stdout)["url"],
            "playbook": str(book),
        }
    finally:
        _dflashctl(env, "stop", "--all", "--timeout", "5")


@pytest.fixture
def at_home(servers, monkeypatch) -> dict[str, str]:
    """The module's DFLASHCTL_HOME, so deployment names resolve."""
    monkeypatch.setenv("DFLASHCTL_HOME", servers["home"])
    return servers


def bench_json(monkeypatch, capsys, *args: str) -> tuple[int, dict, str]:
    code, data, err = run_json(monkeypatch, capsys, "bench", *args, *FAST)
    assert "Traceback" not in err
    return code, data, err


class TestMatched:
    def test_plain_vs_spec(self, at_home, monkeypatch, capsys):
        # the plain server named by its playbook, the speculative one by its deployment name
        code, d, err = bench_json(
            monkeypatch, capsys, at_home["playbook"], "spec",
            "--fixtures", "code,prose", "--max-tokens", "12", "--warmup-tokens", "8",
        )  # fmt: skip
        assert code == 0, (d and d["failures"], err)
        assert d["ok"] is True and d["failures"] == []
        assert d["baseline"] == "plain"
        s = d["settings"]
        assert (s["repetitions"], s["warmup_tokens"], s["max_tokens"]) == (3, 8, 12)
        assert (s["temperature"], s["batch"], s["statistic"]) == (0, 1, "median")
        plain, spec = d["targets"]
        assert (plain["label"], plain["kind"], plain["url"]) == (
            "plain",
            "playbook",
            at_home["plain"],
        )
        assert (spec["label"], spec["kind"], spec["url"]) == ("spec", "deployment", at_home["spec"])
        assert plain["engine"] == spec["engine"] == "local"
        assert plain["model"] == spec["model"] == "tiny"

        # the order the requests were sent in: warm-ups A B, then A B A B … per fixture and round
        order = [(e["phase"], e["target"], e["fixture"], e["repetition"]) for e in d["order"]]
        expected = [("warmup", t, "quicksort", None) for t in ("plain", "spec")]
        expected += [
            ("measure", t, f, rep)
            for rep in (1, 2, 3) for f in ("code", "prose") for t in ("plain", "spec")
        ]  # fmt: skip
        assert order == expected
        assert [e["seq"] for e in d["order"]] == list(range(1, len(expected) + 1))

        for t in (plain, spec):
            assert t["warmup"]["ok"] and t["warmup"]["completion_tokens"] == 8
            assert set(t["fixtures"]) == {"code", "prose"}
            for f, cell in t["fixtures"].items():
                for key in ("decode_tokens_per_s", "mean_acceptance_length", "speedup",
                            "ttft_s", "itl_s"):  # fmt: skip
                    assert key in cell
                samples = cell["samples"]
                assert [x["repetition"] for x in samples] == [1, 2, 3]
                # each sample is the request recorded at its place in the order
                for x in samples:
                    e = d["order"][x["seq"] - 1]
                    assert (e["target"], e["fixture"]) == (t["label"], f)
                assert all(x["ok"] and x["completion_tokens"] == 12 for x in samples)
                assert all(x["finish_reason"] == "length" for x in samples)
                rates = [x["decode_tokens_per_s"] for x in samples]
                assert cell["decode_tokens_per_s"] == pytest.approx(
                    statistics.median(rates), abs=0.02
                )
                assert cell["ttft_s"] > 0 and cell["itl_s"] > 0
                assert cell["measured"] == 3 and cell["errors"] == []

        for f in ("code", "prose"):
            p, q = plain["fixtures"][f], spec["fixtures"][f]
            assert p["speedup"] == 1.0  # the first target is the baseline
            assert q["speedup"] == pytest.approx(
                q["decode_tokens_per_s"] / p["decode_tokens_per_s"], rel=0.01
            )
            # --spec none: no spec counters → no acceptance, said so
            assert p["mean_acceptance_length"] is None and p["speculation"] == "not_configured"
            # the random drafter drafts and accepts (almost) nothing: τ from the counters
            assert q["speculation"] == "speculating"
            assert 1.0 <= q["mean_acceptance_length"] < 1.5
            assert q["num_drafts"] > 0 and len(q["per_position"]) == 3
            assert all(x["mean_acceptance_length"] is not None for x in q["samples"])
            # speculative greedy = plain greedy, token for token
            assert q["matches_first_target"] is True
        assert spec["mean_speedup"] == pytest.approx(
            statistics.geometric_mean([spec["fixtures"][f]["speedup"] for f in ("code", "prose")]),
            rel=0.01,
        )
        assert any("no speculative decoding" in n for n in plain["notes"])
        assert d["concurrency"] == []

    def test_table(self, at_home, monkeypatch, capsys):
        code, out, err = run_main(
            monkeypatch, capsys, "bench", "spec", at_home["plain"], "--fixtures", "translation",
            "--repetitions", "1", "--max-tokens", "8", "--warmup-tokens", "0", *FAST,
        )  # fmt: skip
        assert code == 0, err
        assert "Decode tokens/s (median of 1, min–max below)" in out and "speedup vs spec" in out
        assert "translation" in out and "tok/s" in out and "base" in out
        assert "τ 1." in out and "no spec" in out and "×" in out
        assert "TTFT / ITL" in out
        assert f"measured interleaved: spec {at_home['plain']}" in out
        assert "1/1 translation spec:" in err  # progress on stderr


class TestConcurrency:
    def test_sweep_json_and_plot(self, servers, monkeypatch, capsys, tmp_path):
        pytest.importorskip("matplotlib")
        png = tmp_path / "bench.png"
        code, d, err = bench_json(
            monkeypatch, capsys, servers["spec"], servers["plain"], "--fixtures", "code",
            "--repetitions", "1", "--max-tokens", "8", "--warmup-tokens", "0",
            "--concurrency", "1,2", "--plot", str(png),
        )  # fmt: skip
        assert code == 0, (d and d["failures"], err)
        assert d["settings"]["concurrency"] == [1, 2]
        levels = [(lv["concurrency"], lv["target"]) for lv in d["concurrency"]]
        assert levels == [(1, servers["spec"]), (1, servers["plain"]),
                          (2, servers["spec"]), (2, servers["plain"])]  # fmt: skip
        for lv in d["concurrency"]:
            n = lv["concurrency"]
            assert lv["requests"] == n and lv["ok"] and lv["completion_tokens"] == 8 * n
            assert lv["throughput_tokens_per_s"] > 0 and lv["requests_per_s"] > 0
            assert 0 < lv["latency_p50_s"] <= lv["latency_p99_s"]
            assert 0 < lv["ttft_p50_s"] <= lv["ttft_p99_s"]
            # the bundled engine is batch one: said so, and still measured
            assert ("one request at a time" in (lv["note"] or "")) == (n > 1)
        spec_levels = [lv for lv in d["concurrency"] if lv["target"] == servers["spec"]]
        assert all(lv["mean_acceptance_length"] >= 1.0 for lv in spec_levels)
        load = [e for e in d["order"] if e["phase"] == "load"]
        assert len(load) == 2 * (1 + 2)
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert not list(tmp_path.glob(".plot-*"))


class TestBadInput:
    @pytest.mark.parametrize(
        ("args", "needle"),
        [
            (["no-such-server"], "unknown target 'no-such-server'"),
            (["spec", "--concurrency", "1,two"], "--concurrency '1,two'"),
            (["spec", "--concurrency", "0"], "outside 1..1024"),
            (["spec", "--fixtures", "poetry"], "unknown fixture 'poetry'"),
        ],
    )
    def test_exit_2_one_line(self, at_home, monkeypatch, capsys, args, needle):
        code, out, err = run_main(monkeypatch, capsys, "bench", *args)
        assert code == 2 and out == ""
        assert "Traceback" not in err
        lines = err.strip().splitlines()
        assert lines[0].startswith("Error: ") and needle in lines[0]
