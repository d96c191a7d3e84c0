"""`dflashctl diagnose` on real data, no vLLM: production is the REAL bundled engine server
(`python -m dflashctl.engine.server`, launched by `serve.launch` on 127.0.0.1, real HTTP, real
/metrics, a real log); the reference is the bundled engine in this process on the same
directories. Verdicts come from what they measure:

- an always-accepting pair (tests/support/pairs.py with both final norms zeroed: target and drafter
  both predict token 0, so every draft is accepted) → healthy, exit 0;
- the random tiny pair (accepts nothing, on both engines) → drafter, exit 1;
- a stale copy of its drafter config (`stale.write_stale_copy(…, ("mask",))`) served → config:
  named by the mask token against the target's tokenizer, and, diagnosing the good directory
  against the server that runs the stale copy, by the server's own start-up lines;
- a `--spec none` server → config (production drafts nothing);
- bad input → one line, exit 2.

No mocks. The machine is shared with a training run: torch runs single-threaded here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import run_main
from support.pairs import write_accepting_pair
from support.served_engine import MAX_TOKENS, served

pytest.importorskip("torch")
pytest.importorskip("fastapi")


@pytest.fixture(autouse=True, scope="module")
def _one_thread() -> Iterator[None]:
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from support.pairs import write_tiny_pair

    return write_tiny_pair(tmp_path_factory.mktemp("pair"))


@pytest.fixture(scope="module")
def accepting(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write_accepting_pair(tmp_path_factory.mktemp("accepting"))


def diagnose(mp, capsys, url: str, target: Path, drafter: Path, *extra: str) -> tuple[int, dict]:
    args = ["diagnose", url, "--model", str(target), "--drafter", str(drafter)]
    code, out, err = run_main(mp, capsys, *args, "--max-tokens", MAX_TOKENS, "--json", *extra)
    assert code in (0, 1), err
    return code, json.loads(out)


def problems(data: dict, kind: str) -> list[dict]:
    return [f for f in data["findings"] if f["kind"] == kind and f["severity"] == "problem"]


def test_healthy_pair_same_text_same_acceptance(monkeypatch, capsys, accepting):
    target, drafter = accepting
    with served(target, drafter, "dg-healthy") as (url, log):
        code, data = diagnose(monkeypatch, capsys, url, target, drafter, "--log", log)
        # the human rendering of the same server, once
        hcode, out, err = run_main(
            monkeypatch, capsys, "diagnose", url, "--model", str(target),
            "--drafter", str(drafter), "--max-tokens", "8",
        )  # fmt: skip
    assert code == 0 and data["ok"] and data["verdict"] == "healthy", data["findings"]
    p, r = data["production"], data["reference"]
    assert (
        p["engine"] == "local" and p["source"] == "prometheus" and p["num_speculative_tokens"] == 3
    )
    assert r["num_speculative_tokens"] == 3 and r["dtype"] == "float32"
    assert p["mean_acceptance_length"] == r["mean_acceptance_length"] == 4.0
    assert p["per_position"] == r["per_position"] == [1.0, 1.0, 1.0]
    assert data["comparison"]["same_text_prompts"] == data["comparison"]["prompts"] == 2
    for pp, rr in zip(p["requests"], r["requests"], strict=True):
        assert pp["text"] == rr["text"] and pp["completion_tokens"] == rr["completion_tokens"]
        assert pp["prompt_tokens"] == rr["prompt_tokens"]
    assert p["log"]["engine"] == "local" and p["log"]["aux_layers"] == [1, 2]
    assert p["log"]["mask_token_id"] == 259 and p["log"]["port"] == int(url.rsplit(":", 1)[1])
    assert not [f for f in data["findings"] if f["severity"] != "note"], data["findings"]
    assert hcode == 0, err
    assert "Verdict: HEALTHY" in out and "mean acceptance length" in out and "position 3" in out


def test_random_drafter_on_both_engines_is_the_drafter(monkeypatch, capsys, pair, tmp_path):
    target, drafter = pair
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("def add(a, b):\nWrite a haiku about rivers.\nSort a list in Python.\n")
    with served(target, drafter, "dg-random") as (url, log):
        # relative paths are relative to the working directory, --log included
        monkeypatch.chdir(target.parent)
        rel = os.path.relpath(log, target.parent)
        code, data = diagnose(
            monkeypatch, capsys, url, Path("target"), Path("drafter"), "--prompts",
            str(prompts), "--log", rel,
        )  # fmt: skip
    assert code == 1 and data["verdict"] == "drafter", data["findings"]
    (d,) = problems(data, "drafter")
    assert "both engines agree" in d["message"] and "default floor" in d["message"]
    p, r = data["production"], data["reference"]
    assert [x["prompt_id"] for x in p["requests"]] == ["prompt1", "prompt2", "prompt3"]
    assert p["mean_acceptance_length"] == r["mean_acceptance_length"] == 1.0
    assert p["num_drafts"] == r["num_drafts"] > 0  # the same drafts, request by request
    assert data["comparison"]["same_text_prompts"] == 3
    assert data["production"]["log"]["path"] == log


def test_stale_mask_is_a_config_problem(monkeypatch, capsys, pair, tmp_path):
    from dflashctl.drafter.stale import write_stale_copy

    target, drafter = pair
    stale = tmp_path / "stale"
    [(field, before, after)] = write_stale_copy(drafter, stale, ("mask",))
    assert field == "dflash_config.mask_token_id" and after == before - 6
    with served(target, stale, "dg-stale") as (url, log):
        # 1. the stale copy itself: its mask id is an ordinary token of the target's tokenizer
        code, data = diagnose(monkeypatch, capsys, url, target, stale, "--log", log)
        assert code == 1 and data["verdict"] == "config", data["findings"]
        msgs = [f["message"] for f in problems(data, "config")]
        assert any("mask_token_id 253" in m and "<|mask|> = 259" in m for m in msgs), msgs
        assert data["production"]["log"]["mask_token_id"] == 253
        # 2. the good directory, against the server still running the stale copy: the server's
        # start-up lines show another config than the file (the fix that never landed)
        code, data = diagnose(monkeypatch, capsys, url, target, drafter, "--log", log)
    assert code == 1 and data["verdict"] == "config", data["findings"]
    msgs = [f["message"] for f in problems(data, "config")]
    assert any("uses mask token 253" in m and "says 259" in m for m in msgs), msgs
    assert any(f"serves the drafter at {stale}" in m for m in msgs), msgs


def test_a_server_without_speculation_is_a_config_problem(monkeypatch, capsys, pair):
    target, drafter = pair
    with served(target, None, "dg-plain") as (url, _log):
        code, data = diagnose(monkeypatch, capsys, url, target, drafter)
    assert code == 1 and data["verdict"] == "config"
    assert data["production"]["state"] == "not_configured"
    (c,) = problems(data, "config")
    assert "no speculative decoding at all" in c["message"]
    # the reference still ran and the greedy text is the same: speculation is lossless
    assert data["comparison"]["same_text_prompts"] == 2


@pytest.mark.slow
def test_demo_pair_is_healthy_against_its_registry_floor(monkeypatch, capsys):
    """The shipped demo pair (SmolLM2-135M-Instruct + its drafter): real accepted drafts, per
    position identical on both engines, the floor from the registry entry verify-config
    identifies."""
    from support.pairs import demo_pair

    from dflashctl.drafter.registry import get_entry

    target, drafter = demo_pair()
    with served(target, drafter, "dg-demo") as (url, log):
        code, data = diagnose(monkeypatch, capsys, url, target, drafter, "--log", log)
    assert code == 0 and data["verdict"] == "healthy", data["findings"]
    p, r = data["production"], data["reference"]
    assert p["num_speculative_tokens"] == r["num_speculative_tokens"] == 15
    assert p["per_position"] == r["per_position"]
    floor = get_entry("demo").expected_acceptance
    assert floor is not None and p["mean_acceptance_length"] >= floor.min
    assert data["floor"]["source"] == "the registry's expected minimum for demo"


@pytest.mark.slow
def test_the_embedded_demo_as_serve_runs_it_is_healthy(monkeypatch, capsys):
    """`serve` with no --model runs the embedded pair with its cheaper CPU step (a draft
    vocabulary, only confident proposals verified); `diagnose NAME` reads that step from the
    deployment's command, `diagnose URL` from the engine's /version, and the reference steps the
    same way (a reference verifying every proposal read the difference as an engine fault)."""
    from support.pairs import demo_pair

    from dflashctl.commands.demo.run import free_port
    from dflashctl.hosts import open_host
    from dflashctl.server import deployments as state
    from dflashctl.server.control import stop_deployment
    from dflashctl.server.launch import launch
    from dflashctl.server.plan import ServeOptions, plan

    opts = ServeOptions(
        engine="local", port=free_port(), bind="127.0.0.1", name="dg-embedded", force=True,
        extra_args=["--log-interval", "0.5", "--device", "cpu"], env={"OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    with open_host(None) as host:
        p = plan(opts, host)
        assert "--draft-confidence" in p.argv and "--draft-vocab" in p.argv
        res = launch(p, host)
    assert res.ok, (res.reason, res.lines)
    target, drafter = demo_pair()
    by_url = ["--model", str(target), "--drafter", str(drafter)]
    runs = []
    try:
        for how in (["dg-embedded"], [str(res.url), *by_url]):
            runs.append(
                run_main(
                    monkeypatch, capsys, "diagnose", *how, "--max-tokens", MAX_TOKENS, "--json"
                )
            )
    finally:
        dep = state.load("dg-embedded")
        if dep is not None:
            stop_deployment(dep)
    for (code, out, err), source in zip(
        runs, ("the deployment's command", "the production server's /version"), strict=True
    ):
        assert code == 0, err
        data = json.loads(out)
        assert data["verdict"] == "healthy", data["findings"]
        prod, ref = data["production"], data["reference"]
        assert prod["per_position"] == ref["per_position"]
        note = next(n for n in ref["notes"] if n.startswith("the reference steps as production"))
        assert "draft_vocab.safetensors --draft-confidence 0.5 (from " + source in note, note


def test_the_bundled_step_read_from_a_command():
    from dflashctl.commands.diagnose.measure import BundledStep

    cmd = ["python", "-m", "dflashctl.engine.server", "--model", "m", "--drafter", "d"]
    assert not BundledStep.from_command(cmd) and BundledStep.from_command(cmd).args == []
    step = BundledStep.from_command([*cmd, "--draft-vocab", "/v.st", "--draft-confidence=0.5"])
    assert step == BundledStep("/v.st", 0.5)
    assert step.args == ["--draft-vocab", "/v.st", "--draft-confidence", "0.5"]
    # the last flag wins, as argparse has it; `none` is no vocabulary; junk is no threshold
    later = [*cmd, "--draft-vocab", "/v.st", "--draft-vocab", "none", "--draft-confidence", "x"]
    assert BundledStep.from_command(later) == BundledStep(None, 0.0)
    assert BundledStep.from_command([*cmd, "--draft-confidence", "0.3"]).args == [
        "--draft-confidence",
        "0.3",
    ]
    assert BundledStep.from_command([*cmd, "--draft-vocab"]) == BundledStep(None, 0.0)
    # the bundled engine's /version: its step; an older engine's (or another's) says nothing
    version = {"version": "dflashctl-0.1.0"}
    assert BundledStep.from_server(version) is None
    step = {"draft_vocab": "/v.st", "draft_confidence": 0.5}
    assert BundledStep.from_server({**version, "dflashctl_step": step}) == BundledStep("/v.st", 0.5)
    junk = {"draft_vocab": 3, "draft_confidence": True}
    assert BundledStep.from_server({**version, "dflashctl_step": junk}) == BundledStep(None, 0.0)


def test_bad_input_is_one_line_and_exit_2(monkeypatch, capsys, pair, tmp_path):
    from dflashctl.commands.demo.run import free_port

    target, drafter = pair
    url = f"http://127.0.0.1:{free_port()}"
    cases = [
        (["--model", str(tmp_path / "nope"), "--drafter", str(drafter)], "is not a directory"),
        (["--model", str(target), "--drafter", str(drafter)], "cannot reach"),
        (["--model", str(target), "--drafter", str(drafter), "--max-tokens", "0"], "at least 1"),
        (
            ["--model", str(target), "--drafter", str(drafter), "--prompts", str(tmp_path)],
            "is a directory",
        ),
        (
            ["--model", str(target), "--drafter", str(drafter), "--log", str(tmp_path / "x.log")],
            "x.log",
        ),
    ]
    for args, message in cases:
        code, out, err = run_main(monkeypatch, capsys, "diagnose", url, *args)
        assert code == 2, (args, out, err)
        assert message in err and "Traceback" not in err and out == ""
        assert err.strip().splitlines()[0].startswith("Error:")


def test_a_deployment_name_gives_model_drafter_and_log(monkeypatch, capsys, pair, tmp_path):
    """`diagnose NAME`: the record `dflashctl serve` wrote names what it served (checked before
    any request: here its target directory is gone, so the error names it)."""
    from dflashctl.commands.demo.run import free_port
    from dflashctl.server import deployments as state

    _, drafter = pair
    port = free_port()
    state.save(
        state.Deployment(
            name="dg-record", engine="local", host=None, url=f"http://127.0.0.1:{port}", pid=1,
            starttime=0, log=str(tmp_path / "server.log"), run_dir=str(tmp_path), port=port,
            bind="127.0.0.1", model=str(tmp_path / "gone-target"), model_id="m",
            drafter=str(drafter), cmd=[], started_at=state.now_iso(),
        )
    )  # fmt: skip
    code, out, err = run_main(monkeypatch, capsys, "diagnose", "dg-record")
    assert code == 2 and out == "" and "Traceback" not in err
    assert f"--model {tmp_path / 'gone-target'} is not a directory" in err
    code, _, err = run_main(monkeypatch, capsys, "diagnose", "dg-nope")
    assert code == 2 and "'dg-nope' is not a URL, nor a deployment" in err
    code, _, err = run_main(monkeypatch, capsys, "diagnose", f"127.0.0.1:{port}")
    assert code == 2 and "diagnose needs --model" in err
