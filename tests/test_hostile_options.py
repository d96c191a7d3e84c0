"""Non-finite and out-of-range CLI options (issue 19, item 8): every one is a one-line usage
error with exit 2, before anything is read, sent or started."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.hostile import assert_clean_error, dflashctl

LOG = str(Path(__file__).resolve().parent / "data" / "metrics" / "vllm_034_healthy.log")
DEAD = "http://127.0.0.1:9"  # nothing listens: an option error must come first

CASES = [
    (("metrics", LOG, "--interval", "nan"), "--interval nan"),
    (("metrics", LOG, "--follow", "--interval", "nan"), "--interval nan"),
    (("metrics", LOG, "--min-acceptance-length", "nan"), "--min-acceptance-length nan"),
    (("metrics", LOG, "--min-acceptance-length", "inf"), "--min-acceptance-length inf"),
    (("metrics", f"{DEAD}/metrics", "--timeout", "nan"), "--timeout nan"),
    (("metrics", f"{DEAD}/metrics", "--timeout", "inf"), "--timeout inf"),
    (("smoke", DEAD, "--timeout", "nan"), "--timeout nan"),
    (("smoke", DEAD, "--timeout", "inf"), "--timeout inf"),
    (("smoke", DEAD, "--timeout", "1e300"), "out of range"),
    (("smoke", DEAD, "--min-acceptance-length", "nan"), "--min-acceptance-length nan"),
    (("smoke", DEAD, "--min-tokens-per-s", "nan"), "--min-tokens-per-s nan"),
    (("bench", DEAD, "--timeout", "inf"), "--timeout inf"),
    (("bench", DEAD, "--timeout", "nan"), "--timeout nan"),
    (("serve", "--model", "m", "--spec", "none", "--ready-timeout", "nan", "--dry-run"),
     "--ready-timeout nan"),
    (("serve", "--model", "m", "--spec", "none", "--ready-timeout", "-1", "--dry-run"),
     "--ready-timeout"),
    (("serve", "--model", "m", "--spec", "none", "--port", "0", "--dry-run"), "--port 0"),
    (("serve", "--model", "m", "--spec", "none", "--port", "70000", "--dry-run"), "--port 70000"),
    (("stop", "--timeout", "nan"), "--timeout nan"),
]  # fmt: skip
# issue 30 #5: a speculative config bounded before it is parsed, as the config reader does
VLLM = ("serve", "--engine", "vllm", "m", "--drafter", "d", "-k", "3", "--dry-run", "--")
DEEP = '{"a":' * 5000 + "1" + "}" * 5000
CASES += [
    ((*VLLM, "--speculative-config", DEEP), "JSON nested too deeply"),
    ((*VLLM, "--speculative-config", "[" * 70000), "too long to be a speculative config"),
    ((*VLLM, "--speculative-config", '{"x": 1' + "0" * 5000 + "}"), "an integer of 5001 digits"),
    ((*VLLM, "--speculative-config", '{"x": NaN}'), "x is NaN"),
    ((*VLLM, "--speculative-config.x", DEEP), "JSON nested too deeply"),
    ((*VLLM, "--speculative-config.x", "1" + "0" * 5000), "an integer of 5001 digits"),
]  # fmt: skip


@pytest.mark.parametrize(
    "args, words", CASES, ids=[" ".join(a[:1] + a[-2:])[:60] for a, _ in CASES]
)
def test_refused(args: tuple[str, ...], words: str):
    res = dflashctl(*args, timeout=30)
    assert_clean_error(res, 2, contains=words)
    assert res.stdout == ""


# the residue a user-trial found (2026-12-07): each refused in one line, exit 2
CASES_LATE = [
    (("doctor", "--hub-timeout", "nan"), "--hub-timeout nan"),
    (("metrics", LOG, "--exit-on-alarm"), "--exit-on-alarm goes with --follow"),
    (("alerts", "--min-drafts-per-s", "inf"), "--min-drafts-per-s inf"),
    (("alerts", "--min-drafts-per-s", "nan"), "--min-drafts-per-s nan"),
    (("doctor", "--hub-timeout", "inf"), "--hub-timeout inf"),
    (("alerts", "--format", "prometheusrule", "--name", ""), "not a Kubernetes object name"),
    (("alerts", "--format", "prometheusrule", "--name", "Rules_1"), "--name 'Rules_1'"),
    (("alerts", "--format", "prometheusrule", "--namespace", "bad ns!"), "Kubernetes namespace"),
]  # fmt: skip


@pytest.mark.parametrize("args, words", CASES_LATE, ids=[" ".join(a)[:60] for a, _ in CASES_LATE])
def test_refused_late(args: tuple[str, ...], words: str):
    res = dflashctl(*args, timeout=30)
    assert_clean_error(res, 2, contains=words)
    assert res.stdout == ""


@pytest.mark.parametrize("content", [None, "[1, 2]", "17", "{not json"])
def test_a_tune_state_that_is_not_one_is_refused_before_anything_starts(tmp_path, content):
    """A directory, a JSON list or number, or broken JSON: one line, exit 2, before the demo
    pair is looked for or any server launched (no --model: the demo pair would be next)."""
    state = tmp_path / "state"
    if content is None:
        state.mkdir()
    else:
        state.write_text(content)
    res = dflashctl("tune", "--state", str(state), "--port", "9", timeout=30)
    assert_clean_error(res, 2, contains=str(state))
    assert "launching" not in res.stderr


def _dir_with_config(path: Path) -> Path:
    path.mkdir()
    (path / "config.json").write_text('{"model_type": "llama"}')
    return path


@pytest.mark.parametrize("missing", ["--model", "--drafter"])
def test_the_bundled_engine_is_not_launched_for_a_directory_that_is_not_there(tmp_path, missing):
    """serve (a real launch, and a dry run with --check) and tune refuse a model or drafter
    directory without a config.json on the host, before any engine starts: the bundled engine
    reads local directories only. A dry run without --check does not look (it plans)."""
    home = tmp_path / "home"
    dirs = {"--model": str(_dir_with_config(tmp_path / "m")), "--drafter": str(tmp_path / "d")}
    if missing == "--model":
        dirs = {
            "--model": str(tmp_path / "nowhere"),
            "--drafter": str(_dir_with_config(tmp_path / "d")),
        }
    pair = [x for kv in dirs.items() for x in kv]
    for args in (
        ("serve", *pair, "--port", "9", "--detach"),
        ("serve", *pair, "--dry-run", "--check"),
        ("tune", *pair, "--port", "9"),
    ):
        res = dflashctl(*args, timeout=60, DFLASHCTL_HOME=str(home))
        err = assert_clean_error(res, 2, contains=f"{missing} {dirs[missing]}: no config.json")
        assert "launching" not in res.stderr, (args, err)
    planned = dflashctl("serve", *pair, "--dry-run", timeout=60, DFLASHCTL_HOME=str(home))
    assert planned.code == 0, planned.stderr
    assert not (home / "deployments").exists() or not any((home / "deployments").iterdir())


@pytest.mark.parametrize("block", [1, -1])
def test_a_drafter_block_too_small_to_draft_is_named_not_blamed_on_an_option(tmp_path, block):
    """K comes from the drafter's block_size when not given: a block under 2 is the config's
    fault (named with verify-config's command), not an option the user never passed."""
    model, drafter = _dir_with_config(tmp_path / "m"), tmp_path / "d"
    drafter.mkdir()
    (drafter / "config.json").write_text(f'{{"model_type": "qwen3", "block_size": {block}}}')
    res = dflashctl("serve", "--model", str(model), "--drafter", str(drafter), "--dry-run")
    err = assert_clean_error(res, 2, contains=f"a block of {block} leaves no token to draft")
    assert str(drafter / "config.json") in err and "--num-speculative-tokens" not in err
