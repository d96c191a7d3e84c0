"""Every command line a hint prints parses: the `dflashctl …` commands in the strings of the
package (errors' hints, rows' hints, report lines) and in the defects catalogue are collected
and parsed by the real Typer app, without running anything. A flag a hint names that the
command does not have (`--accept-new-host-key` on a command without it) or a command that does
not exist (`dflashctl serve stop`) fails here.
"""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import pytest
import typer
from typer._click import Context
from typer._click.exceptions import UsageError

from dflashctl.cli import app

PKG = Path(__file__).resolve().parent.parent / "dflashctl"
GROUP = typer.main.get_command(app)  # Typer's own click (typer._click)
VERBS = set(GROUP.commands)  # type: ignore[attr-defined]

# `dflashctl VERB …` inside backticks, or running to the end of a clause
BACKTICKED = re.compile(r"`(dflashctl [a-z][^`]*)`")
CLAUSE = re.compile(r"(?:^|: |with |run |use |try |then )(dflashctl [a-z][^;`()\n]*)")


def _text(node: ast.AST) -> str | None:
    """A string literal; an f-string with every {…} as X."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "X" for v in node.values)
    return None


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and _text(body[0].value) is not None:
                ids.add(id(body[0].value))
    return ids


def _strings() -> list[tuple[str, str]]:
    out = []
    for path in sorted(PKG.rglob("*.py")):
        tree = ast.parse(path.read_text())
        skip = _docstrings(tree)
        for node in ast.walk(tree):  # an f-string's pieces are read with it, not alone
            if isinstance(node, ast.JoinedStr):
                skip |= {id(v) for v in node.values}
        # implicit concatenation is one Constant already; BinOp "a" + "b" is rare enough
        for node in ast.walk(tree):
            if id(node) in skip or isinstance(node, ast.FormattedValue):
                continue
            text = _text(node)
            if text and "dflashctl " in text:
                out.append((f"{path.relative_to(PKG.parent)}:{node.lineno}", text))  # type: ignore[attr-defined]
    for path in sorted((PKG / "defects").glob("*.yaml")):
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if "dflashctl " in line:
                out.append((f"{path.relative_to(PKG.parent)}:{i}", line))
    return out


def _hinted_commands() -> list[tuple[str, str]]:
    found = []
    for where, text in _strings():
        for rx in (BACKTICKED, CLAUSE):
            for m in rx.finditer(text):
                line = m.group(1).split(", ")[0].strip()  # ", then …" ends a clause
                if not line.endswith("..."):
                    line = line.rstrip(".")
                verb = line.split()[1]
                if verb in VERBS or (
                    re.fullmatch(r"[a-z][a-z-]+", verb)
                    and verb
                    not in {"engine", "itself", "does", "commands", "import", "lock", "run", "with"}
                    | VERBS
                ):
                    found.append((where, line))
    # the commands the rest of the code can print, by construction
    return sorted(set(found))


HINTS = _hinted_commands()


def parse(line: str) -> None:
    """Parse `line` with the app's click commands; raise UsageError if it does not."""
    line = re.sub(r"<[^>]*>", "X", line).split(" — ")[0]  # a title's dash ends the command
    line = re.sub(r"\{\{[^}]*\}\}", "X", line)  # an alert's {{ $labels.x }}: filled in there
    try:
        argv = shlex.split(line, comments=True)[1:]
    except ValueError:
        argv = line.split("#")[0].split()[1:]
    verb, rest = argv[0], argv[1:]
    cmd = GROUP.get_command(Context(GROUP), verb)  # type: ignore[attr-defined]
    if cmd is None:
        raise UsageError(f"no such command: {verb}")
    if not rest:
        return  # `dflashctl VERB` names the command (its own required arguments come later)
    positional = [a for a in rest if not a.startswith("-")]
    from dflashctl.drafter.registry import find_entry

    if positional and positional[0] in VERBS and find_entry(positional[0]) is None:
        raise UsageError(f"`{verb} {positional[0]}`: {positional[0]} is a command of its own")
    with cmd.make_context(verb, list(rest), parent=Context(GROUP, info_name="dflashctl")):
        pass


def test_hints_were_found():
    verbs = {line.split()[1] for _, line in HINTS}
    # the catalogue and the code name at least these in their hints
    assert {"verify-config", "fetch", "stop", "metrics", "smoke"} <= verbs, verbs


@pytest.mark.parametrize("where, line", HINTS, ids=[f"{w} {c}" for w, c in HINTS])
def test_every_hinted_command_parses(where, line):
    try:
        parse(line)
    except typer.Exit:
        pass
    except UsageError as e:
        pytest.fail(f"{where}: `{line}` does not parse: {e.format_message()}")


@pytest.mark.parametrize(
    "line",
    [
        "dflashctl serve stop",
        "dflashctl verify-config DIR --no-such-flag",
        "dflashctl metrics --follow",
        "dflashctl restart NAME",
    ],
)
def test_the_parser_catches_what_a_hint_can_get_wrong(line):
    with pytest.raises(UsageError):
        parse(line)


def test_every_host_command_has_the_ssh_options_its_hints_name():
    """An unknown host key's hint says `--accept-new-host-key`, a missing alias's says
    `--ssh-config`: every command that takes --host takes both."""
    for name, cmd in GROUP.commands.items():  # type: ignore[attr-defined]
        flags = {o for p in cmd.params for o in getattr(p, "opts", [])}
        if "--host" in flags:
            assert {"--ssh-config", "--accept-new-host-key"} <= flags, name


def _finding_checks() -> list[tuple[str, str]]:
    """Every cause's `check:` line as metrics, smoke and the demo print it: each family and
    profile shape, with a URL known and not, a registry drafter named and not."""
    from dflashctl.metrics import causes
    from dflashctl.metrics.thresholds import Thresholds

    out: list[tuple[str, str]] = []
    for th in (
        Thresholds(),
        Thresholds(url="http://10.0.0.5:8000/metrics", drafter="demo", block_size=16),
    ):
        found = [
            causes.cause_batch_off(th, 32),
            causes.cause_block(th, 20),
            causes.cause_weak(th, 4),
            causes.cause_prefix_cache(th, "τ 1.5 where the cache hits, 3.3 where it misses"),
            *(fn(th) for name, fn in vars(causes).items()
              if name.startswith("cause_") and name not in ("cause_batch_off", "cause_block",
                                                            "cause_weak", "cause_prefix_cache")),
        ]  # fmt: skip
        for family in ("", "dflash", "eagle", "mtp", "medusa", "ngram", "draft"):
            for shape in ("dead", "cliff", "gradual", "unknown"):
                found += causes.causes_for(family, shape, 2, th, 15)
        for c in found:
            for part in c.check.split("; "):
                part = part.split("then ", 1)[-1].strip()
                if part.startswith("dflashctl "):
                    out.append((c.cause[:40], part.split(" (")[0]))
    return sorted(set(out))


FINDING_CHECKS = _finding_checks()


@pytest.mark.parametrize("cause, line", FINDING_CHECKS, ids=[c for _, c in FINDING_CHECKS])
def test_every_findings_check_line_runs(cause, line):
    """A finding's `check:` names a command a user can run as printed, placeholders filled:
    it parses, a bench names its servers, a fetch names a drafter that is not embedded, or
    one that fetch checks where it is (the demo: no Hub)."""
    parse(line)
    words = line.split()
    if words[1] == "bench":
        assert len([w for w in words[2:] if not w.startswith("-")]) >= 1, line
    if words[1] == "fetch":
        from dflashctl.drafter.registry import embedded_dir

        name = words[2]
        assert name == "NAME" or embedded_dir(name) is not None or "/" not in name, line


def test_fetch_of_the_embedded_drafter_checks_it_where_it_is(monkeypatch, capsys):
    """`check: dflashctl fetch demo` (the revision cause on the demo pair) runs without a Hub:
    the shipped files are hashed against the registry's pins."""
    from support.cli import run_json

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens: no Hub
    code, data, err = run_json(monkeypatch, capsys, "fetch", "demo")
    assert code == 0, err
    assert data["action"] == "embedded" and {f["status"] for f in data["files"]} == {"pinned"}
