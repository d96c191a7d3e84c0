"""Do two `dflashctl tune --json` runs agree within the first run's spread?

For every K and prompt kind: is the second run's mean over its rounds inside the first run's
rerun interval (dflashctl/commands/tune/rerun.py: where a second run lands 95 % of the time if
rounds are independent draws), for the decode speed and for the speed over speculation off
(round by round, so the machine's drift between runs cancels); and do the two runs recommend
the same K, per kind and overall? Prints a table and the counts; exit 1 if the recommendation
differs.

    ./bin/dflashctl tune --rounds 3 --repetitions 1 --max-tokens 96 --json > a.json
    ./bin/dflashctl tune --rounds 3 --repetitions 1 --max-tokens 96 --json > b.json
    .venv/bin/python perf/tune_reproduce.py a.json b.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path


def figures(run: dict) -> dict[tuple[str, str, str], tuple[float | None, list[float] | None]]:
    """(measure, K, kind) -> (mean over the rounds, rerun interval)."""
    out = {}
    for r in run["results"]:
        k = str(r["k"])
        for kind, vals in (r.get("decode_by_round") or {}).items():
            mean = statistics.fmean(vals) if vals else None
            out[("decode tok/s", k, kind)] = (mean, run["decode_rerun_interval"][k].get(kind))
    for k, kinds in run["speedup_vs_off"].items():
        for kind, s in kinds.items():
            out[("× off", k, kind)] = (s.get("round_mean"), s.get("rerun_interval"))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("first", type=Path)
    ap.add_argument("second", type=Path)
    a = json.loads(ap.parse_args().first.read_text())
    b = json.loads(ap.parse_args().second.read_text())
    fa, fb = figures(a), figures(b)
    inside: dict[str, list[bool]] = {}
    print(f"{'measure':<13}{'K':>4}  {'kind':<12}{'first (interval)':>28}{'second':>10}  in")
    for key in sorted(fa, key=lambda t: (t[0], int(t[1]), t[2])):
        (m1, iv), (m2, _) = fa[key], fb.get(key, (None, None))
        if m1 is None or m2 is None or iv is None:
            continue
        ok = iv[0] <= m2 <= iv[1]
        inside.setdefault(key[0], []).append(ok)
        first = f"{m1:.3f} ({iv[0]:.3f}–{iv[1]:.3f})"
        mark = "yes" if ok else "NO"
        print(f"{key[0]:<13}{key[1]:>4}  {key[2]:<12}{first:>28}{m2:>10.3f}  {mark}")
    for measure, oks in inside.items():
        print(f"{measure}: {sum(oks)} of {len(oks)} of the second run's figures inside the first's")
    same = a["best"] == b["best"] and a["best_per_fixture"] == b["best_per_fixture"]
    print(f"recommendation: first {a['best']} {a['best_per_fixture']}")
    print(f"                second {b['best']} {b['best_per_fixture']}")
    print("the same recommendation" if same else "the recommendation differs")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
