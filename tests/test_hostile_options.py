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
