"""The trained pairs tests serve.

- `demo_pair()`: what dflashctl ships: the SmolLM2-135M-Instruct target (set up once by
  `dflashctl.demo_target` into the cache; `./bin/test` does it before the tests) and the drafter
  trained against it on an H200 (`dflashctl/assets/demo/drafter`).
- `TOY_TARGET`, `TOY_DRAFTER`: the retired CPU-trained toy pair (tests/data/toy_pair: a 6-layer
  Qwen3 of width 192 that loops, and its 2-layer block-8 drafter; held-out τ 6.55, the mask id
  off by six 1.43, `eval.json` beside it). Kept as a named fixture for the tests that need a
  fast *trained* pair with a strong stale-config drop: real vLLM, whose CPU build serves it in
  seconds, and the fixtures recorded from it.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEMO_DRAFTER = REPO / "dflashctl" / "assets" / "demo" / "drafter"
DEMO_PROMPTS = REPO / "dflashctl" / "assets" / "demo" / "eval_prompts.json"
TOY = REPO / "tests" / "data" / "toy_pair"
TOY_TARGET, TOY_DRAFTER = TOY / "target", TOY / "drafter"
TOY_PROMPTS = TOY / "eval_prompts.json"


def demo_target() -> Path:
    from dflashctl.demo_target import ensure

    return ensure()


def demo_pair() -> tuple[Path, Path]:
    return demo_target(), DEMO_DRAFTER


def toy_registry(root: Path) -> Path:
    """A playbooks directory like the shipped one plus the toy pair's entry (`toy`), for
    `DFLASHCTL_PLAYBOOKS` in tests that judge the toy pair against its registry range."""
    import shutil

    shutil.copytree(REPO / "playbooks", root, dirs_exist_ok=True)
    shutil.copyfile(TOY / "toy.yaml", root / "drafters" / "toy.yaml")
    return root
