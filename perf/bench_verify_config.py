"""Benchmark the start-up of `dflashctl` and `verify-config` on a 3.4 GB vs a 3 MB drafter.

In one run, each as a fresh subprocess, median of --repeat runs (runs interleaved so drift hits
both sides alike, after one warm-up each):

    python -c pass                                 the interpreter floor
    bare Typer --help                              a two-command Typer app (rich help), the
                                                   floor of any Typer CLI
    dflashctl --help                               goal: < 0.25 s and <= 1.2x the bare app
    dflashctl verify-config BIG --json             z-lab/Qwen3.6-27B-DFlash: config + a 3.46 GB
                                                   sparse model.safetensors (real names, shapes)
    dflashctl verify-config SMALL --json           a 2-layer drafter with a ~3.5 MB safetensors
                                                   goal: BIG / SMALL within 1.5x

The big file is sparse (header written, then extended to full size), so it costs no disk and
verify-config reading anything beyond the header would show up as a gap between the two.

    .venv/bin/python perf/bench_verify_config.py
    .venv/bin/python perf/bench_verify_config.py --repeat 9
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from support.safetensors_files import dflash_tensors, qwen36_27b_tensors, write_safetensors  # noqa: E402

HELP_GOAL_S = 0.25
HELP_OVER_BARE_GOAL = 1.2
RATIO_GOAL = 1.5
BARE_APP = """import typer

app = typer.Typer()


@app.command()
def hello(name: str, loud: bool = False) -> None:
    \"\"\"Say hello.\"\"\"


@app.command()
def bye(name: str) -> None:
    \"\"\"Say goodbye.\"\"\"


app()
"""


def _dflashctl() -> list[str]:
    script = Path(sys.executable).parent / "dflashctl"
    return [str(script)] if script.exists() else [sys.executable, "-m", "dflashctl"]


def _time(cmd: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    run = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    dt = time.perf_counter() - t
    if run.returncode not in (0, 1):
        sys.exit(f"{' '.join(cmd)} exited {run.returncode}: {run.stderr.decode()[-500:]}")
    return dt


def _drafters(root: Path) -> tuple[Path, Path]:
    big = root / "Qwen3.6-27B-DFlash"
    big.mkdir()
    shutil.copy(REPO / "tests" / "data" / "qwen3.6-27b-dflash" / "config.json", big)
    write_safetensors(big / "model.safetensors", qwen36_27b_tensors())

    small = root / "tiny-dflash"
    small.mkdir()
    cfg = {
        "architectures": ["DFlashDraftModel"],
        "model_type": "qwen3",
        "num_hidden_layers": 2,
        "hidden_size": 256,
        "intermediate_size": 768,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "vocab_size": 4096,
        "num_target_layers": 8,
        "block_size": 8,
        "dtype": "bfloat16",
        "layer_types": ["full_attention", "full_attention"],
        "dflash_config": {"mask_token_id": 4095, "target_layer_ids": [1, 3, 5]},
    }
    (small / "config.json").write_text(json.dumps(cfg, indent=2))
    spec = dflash_tensors(
        layers=2, hidden=256, intermediate=768, heads=4, kv_heads=2, head_dim=64, taps=3
    )
    write_safetensors(small / "model.safetensors", spec, fill=True)
    return big, small


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="measured runs per command (>= 5)")
    args = parser.parse_args()
    repeat = max(5, args.repeat)
    env = dict(os.environ, NO_COLOR="1", COLUMNS="200")
    env.pop("DFLASHCTL_DEBUG", None)

    with tempfile.TemporaryDirectory(prefix="bench-verify-") as tmp:
        big, small = _drafters(Path(tmp))
        bare = Path(tmp) / "bare_typer.py"
        bare.write_text(BARE_APP)
        big_st, small_st = big / "model.safetensors", small / "model.safetensors"
        cli = _dflashctl()
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "bare Typer --help": [sys.executable, str(bare), "--help"],
            "dflashctl --help": [*cli, "--help"],
            "verify-config big": [*cli, "verify-config", str(big), "--json"],
            "verify-config small": [*cli, "verify-config", str(small), "--json"],
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        for cmd in commands.values():  # warm-up: page cache, .pyc files
            _time(cmd, env)
        for _ in range(repeat):
            for name, cmd in commands.items():
                times[name].append(_time(cmd, env))
        med = {name: statistics.median(values) for name, values in times.items()}

        print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, median of {repeat} runs")
        print(
            f"big drafter:   {big_st.stat().st_size / 1e9:.2f} GB "
            f"({big_st.stat().st_blocks * 512} bytes on disk, sparse)"
        )
        print(f"small drafter: {small_st.stat().st_size / 1e6:.2f} MB")
        print()
        print(f"{'command':<24}{'median s':>10}{'min s':>9}{'max s':>9}")
        for name, values in times.items():
            print(f"{name:<24}{med[name]:>10.3f}{min(values):>9.3f}{max(values):>9.3f}")
        print()
        ratio = med["verify-config big"] / med["verify-config small"]
        over_bare = med["dflashctl --help"] / med["bare Typer --help"]
        help_ok = med["dflashctl --help"] < HELP_GOAL_S and over_bare <= HELP_OVER_BARE_GOAL
        ratio_ok = ratio <= RATIO_GOAL
        print(
            f"--help: {med['dflashctl --help']:.3f} s "
            f"({med['dflashctl --help'] - med['python -c pass']:.3f} s above `python -c pass`); "
            f"{over_bare:.2f}x the bare Typer app; goal < {HELP_GOAL_S} s and <= "
            f"{HELP_OVER_BARE_GOAL}x: {'met' if help_ok else 'NOT met'}"
        )
        print(
            f"verify-config big / small: {ratio:.2f}x; goal <= {RATIO_GOAL}x: "
            f"{'met' if ratio_ok else 'NOT met'}"
        )
    sys.exit(0 if help_ok and ratio_ok else 1)


if __name__ == "__main__":
    main()
