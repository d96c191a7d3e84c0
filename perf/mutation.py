"""Mutation testing of the modules whose rules are the product (issue 31), with mutmut 3.

mutmut plants one small bug at a time (a flipped comparison, a moved constant, a dropped
argument, a changed string) in the functions of each module below and runs, for each of those
mutants, the tests that reached the mutated function. A mutant the tests fail on is killed;
one they pass on survived: either a test is missing or the mutant is equivalent (it cannot
change what the code does). Score = (killed + timed out) / mutants.

The run happens in a scratch copy of this tree (tracked and untracked, not ignored, files), so
a worktree is never touched: mutmut writes its mutated copy to mutants/ inside the scratch copy
and the tests import from there. mutmut picks a mutant's tests by the functions each test
reached in-process, so a test that only runs `dflashctl` as a subprocess kills nothing here.

    bin/mutation                                  the module set below (~5 min on 2 cores)
    bin/mutation dflashctl/hosts/spec.py          one module (any listed path)
    bin/mutation --jobs 1 --json out.json         one worker; the result as JSON too

bin/mutation bootstraps .venv with mutmut (the `mutation` extra); any Python that has the
test extra and mutmut can run this file directly. See docs/testing.md, "Mutation testing".
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# The set (issue 31): module -> the fast test files that cover it (in-process tests; mutmut
# runs, per mutant, those of them that reached the mutated function).
MODULES: dict[str, tuple[str, ...]] = {
    "dflashctl/hosts/spec.py": ("tests/test_ssh.py",),
    "dflashctl/drafter/rules/base.py": (
        "tests/test_verify_config.py",
        "tests/test_verify_serving.py",
    ),
    "dflashctl/drafter/rules/serving.py": ("tests/test_verify_serving.py",),
    "dflashctl/defects/match.py": ("tests/test_defects.py", "tests/test_defects_llamacpp.py"),
    "dflashctl/defects/predicates.py": ("tests/test_defects.py", "tests/test_defects_llamacpp.py"),
    "dflashctl/metrics/startup.py": ("tests/test_metrics_formats.py",),
    "dflashctl/commands/smoke/checks.py": ("tests/test_smoke_checks.py",),
    "dflashctl/metrics/alarms.py": (
        "tests/test_metrics_alarms.py",
        "tests/test_metrics_alarm_findings.py",
        "tests/test_metrics_patterns.py",
        "tests/test_metrics_depth.py",  # the verified-depth guard
    ),
    "dflashctl/metrics/log_parse.py": (
        "tests/test_metrics_parse.py",
        "tests/test_metrics_parse_fields.py",
        "tests/test_metrics_patterns.py",
        "tests/test_metrics_formats.py",
        "tests/test_metrics_scanner.py",
        "tests/test_metrics_corpus.py",
    ),
    "dflashctl/metrics/prom.py": (
        "tests/test_metrics_prom.py",
        "tests/test_metrics_prom_readings.py",
        "tests/test_metrics_formats.py",
    ),
    # not tests/test_hints_parse.py: it reads the hints from the source, mutants included
    "dflashctl/metrics/causes.py": (
        "tests/test_metrics_patterns.py",
        "tests/test_metrics_alarm_findings.py",
        "tests/test_metrics_causes.py",
    ),
    "dflashctl/drafter/rules/config.py": (
        "tests/test_verify_config.py",
        "tests/test_verify_rules_table.py",
        "tests/test_verify_speculators.py",
        "tests/test_verify_gguf.py",
        "tests/test_verify_rules_edges.py",
    ),
    "dflashctl/drafter/rules/target.py": (
        "tests/test_verify_config.py",
        "tests/test_verify_rules_table.py",
        "tests/test_verify_rules_edges.py",
    ),
    "dflashctl/drafter/rules/weights.py": (
        "tests/test_verify_config.py",
        "tests/test_verify_rules_table.py",
        "tests/test_verify_rules_edges.py",
    ),
}
# Rule modules outside the set (none now: the alarm, parser and verify-config rule modules
# joined it at >= 85 % each, docs/testing.md); run one by naming it.
LATER: dict[str, tuple[str, ...]] = {}
TESTS = {**MODULES, **LATER}

DETECTED = ("killed", "timeout", "caught by type check")


def scratch_copy(dest: Path) -> None:
    """Copy the files git would commit (tracked and untracked, not ignored) into dest."""
    names = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for raw in names:
        if not raw:
            continue
        src = REPO / os.fsdecode(raw)
        if not src.is_file():  # deleted but not yet committed
            continue
        (dest / src.relative_to(REPO)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / src.relative_to(REPO))


def mutmut_config(modules: list[str], work: Path) -> str:
    tests = sorted({t for m in modules for t in TESTS[m]})
    # the tests read docs/, playbooks/, bin/ … relative to the tree: mutants/ gets all of it
    others = sorted(p.name for p in work.iterdir() if p.name not in ("dflashctl", "tests"))
    q = json.dumps
    return (
        "\n[tool.mutmut]\n"
        'source_paths = ["dflashctl"]\n'
        f"only_mutate = {q(modules)}\n"
        f"also_copy = {q(others)}\n"
        f"pytest_add_cli_args_test_selection = {q(tests)}\n"
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-q"]\n'
    )


def def_lines(source: str) -> dict[str, tuple[int, int]]:
    """`func` or `Class.method` -> (line of its `def`, its last line)."""
    out: dict[str, tuple[int, int]] = {}

    def walk(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out[prefix + node.name] = (node.lineno, node.end_lineno or node.lineno)
            elif isinstance(node, ast.ClassDef):
                walk(node.body, prefix + node.name + ".")

    walk(ast.parse(source).body, "")
    return out


def locate(diff: str, start: int) -> tuple[int, str]:
    """(file line, one-line description) of a mutant from mutmut's diff of its function.

    The diff is of the function alone (from its `def`, decorators excluded), so the first
    removed line's index in the old side, added to the `def` line, is its line in the file."""
    old_index = 0
    removed: list[str] = []
    added: list[str] = []
    first: int | None = None
    for line in diff.splitlines():
        if line.startswith(("---", "+++")):
            continue
        if line.startswith("@@"):
            old_index = int(line.split()[1].split(",")[0].lstrip("-")) - 1
            continue
        if line.startswith("-"):
            first = old_index if first is None else first
            removed.append(line[1:].strip())
            old_index += 1
        elif line.startswith("+"):
            added.append(line[1:].strip())
        else:
            old_index += 1
    line_no = start + (first or 0)
    return line_no, f"{' / '.join(removed)}  →  {' / '.join(added) or '(removed)'}"


def collect(work: Path, modules: list[str]) -> dict[str, list[dict[str, object]]]:
    """Per module, each mutant: name, status, and for the undetected ones line and change."""
    os.chdir(work)  # mutmut's helpers read mutants/ relative to the working directory
    from mutmut.mutation.diff_apply import get_diff_for_mutant
    from mutmut.stats import status_by_exit_code

    out: dict[str, list[dict[str, object]]] = {}
    for module in modules:
        meta = json.loads((work / "mutants" / (module + ".meta")).read_text())
        defs = def_lines((work / module).read_text())
        rows: list[dict[str, object]] = []
        for name, code in sorted(
            meta["exit_code_by_key"].items(), key=lambda kv: mutant_key(kv[0])
        ):
            row: dict[str, object] = {"mutant": name, "status": status_by_exit_code[code]}
            if row["status"] not in DETECTED:
                func = name.rsplit(".", 1)[1].split("__mutmut_")[0]
                if func.startswith("xǁ"):  # a method: xǁClassǁname
                    func = func[1:].replace("ǁ", ".").strip(".")
                else:
                    func = func.removeprefix("x_")
                start = defs.get(func, (1, 1))[0]
                line, change = locate(get_diff_for_mutant(name, path=module), start)
                row.update(line=line, change=change)
            rows.append(row)
        out[module] = rows
    return out


def mutant_key(name: str) -> tuple[str, int]:
    head, _, n = name.rpartition("__mutmut_")
    return head, int(n) if n.isdigit() else 0


def report(results: dict[str, list[dict[str, object]]]) -> tuple[int, int]:
    print(
        f"\n{'module':<42} {'mutants':>7} {'killed':>7} {'survived':>8} {'other':>6} {'score':>7}"
    )
    total = detected_all = 0
    for module, rows in results.items():
        counts = Counter(str(r["status"]) for r in rows)
        detected = sum(counts[s] for s in DETECTED)
        other = len(rows) - detected - counts["survived"]
        score = 100.0 * detected / len(rows) if rows else 100.0
        print(
            f"{module:<42} {len(rows):>7} {detected:>7} {counts['survived']:>8} {other:>6}"
            f" {score:>6.1f}%"
        )
        total += len(rows)
        detected_all += detected
    score = 100.0 * detected_all / total if total else 100.0
    print(f"{'total':<42} {total:>7} {detected_all:>7} {'':>8} {'':>6} {score:>6.1f}%")
    print("\nnot detected (file:line  status  original  →  mutant):")
    for module, rows in results.items():
        for r in rows:
            if r["status"] not in DETECTED:
                print(f"  {module}:{r['line']}  {r['status']}  {r['change']}")
    return detected_all, total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("modules", nargs="*", help="module paths from the built-in set (default: all)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="mutmut workers")
    ap.add_argument("--json", type=Path, help="also write the per-mutant result here")
    ap.add_argument("--keep", action="store_true", help="keep the scratch copy (path printed)")
    args = ap.parse_args()
    args.json = args.json.resolve() if args.json else None
    modules = args.modules or list(MODULES)
    unknown = [m for m in modules if m not in TESTS]
    if unknown:
        ap.error(f"unknown: {', '.join(unknown)} (choose from: {', '.join(TESTS)})")
    try:
        import mutmut
    except ImportError:
        ap.error("mutmut is not installed here: run bin/mutation, which installs it into .venv")
    print(f"mutmut {mutmut.__version__}; {len(modules)} modules; {args.jobs} workers", flush=True)

    work = Path(tempfile.mkdtemp(prefix="dflashctl-mutation-"))
    try:
        scratch_copy(work)
        with (work / "pyproject.toml").open("a") as f:
            f.write(mutmut_config(modules, work))
        t0 = time.monotonic()
        log = work / "mutmut.log"  # mutmut draws a progress spinner; kept for a failure
        with log.open("w") as out:
            run = subprocess.run(
                [sys.executable, "-m", "mutmut", "run", "--max-children", str(args.jobs)],
                cwd=work,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        if run.returncode != 0:
            tail = log.read_text(errors="replace").replace("\r", "\n").splitlines()[-40:]
            print("\n".join(tail), file=sys.stderr)
            print(
                f"mutmut run failed (exit {run.returncode}); scratch copy: {work}", file=sys.stderr
            )
            args.keep = True
            return 2
        print(f"mutmut run: {time.monotonic() - t0:.0f} s", flush=True)
        results = collect(work, modules)
        detected, total = report(results)
        if args.json:
            payload = {"mutmut": mutmut.__version__, "detected": detected, "total": total}
            args.json.write_text(json.dumps({**payload, "modules": results}, indent=1))
        return 0
    finally:
        os.chdir(REPO)
        if args.keep:
            print(f"scratch copy kept: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
