"""The trained pair tests serve: what dflashctl ships.

`demo_pair()`: the SmolLM2-135M-Instruct target (set up once by `dflashctl.demo_target` into the
cache; `./bin/test` does it before the tests) and the drafter trained against it on an H200
(`dflashctl/assets/demo/drafter`). Tests that only need some speculating pair write a tiny one
(tests/smoke_pair.py, tests/engine/tiny_pair.py).
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEMO_DRAFTER = REPO / "dflashctl" / "assets" / "demo" / "drafter"
DEMO_PROMPTS = REPO / "dflashctl" / "assets" / "demo" / "eval_prompts.json"


def demo_target() -> Path:
    from dflashctl.demo_target import ensure

    return ensure()


def demo_pair() -> tuple[Path, Path]:
    return demo_target(), DEMO_DRAFTER
