"""The layout's rule, checked from the source (docs/architecture.md): imports run one way —
cli → commands → nouns → frame — with no import circle; no module outside the engine grows past
about 800 lines; cli.py only registers commands. Imports under `TYPE_CHECKING` are left out:
they never run."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "dflashctl"
FRAME = {"errors", "console", "report", "files", "http_body", "yaml_bounds", "plots"}
TOP = {"cli", "cli_docs", "__main__"}  # the app, and the docs generated from its --help


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in PKG.rglob("*.py")}


def imports_of(name: str, path: Path) -> set[str]:
    """The dflashctl modules `name` imports when it runs (at any depth, but not TYPE_CHECKING)."""
    tree = ast.parse(path.read_text("utf-8"))
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                pkg = pkg[: len(pkg) - node.level + 1]
                base = ".".join([*pkg, base] if base else pkg)
            for a in node.names:
                full = f"{base}.{a.name}"
                found.add(full if full in MODULES else base)
    return {m for m in found if m in MODULES and m != name}


GRAPH = {name: imports_of(name, path) for name, path in MODULES.items()}


def unit(name: str) -> str:
    """What the layering is about: a command (dflashctl.commands.VERB) or a top-level module or
    package (dflashctl.server, dflashctl.files, …)."""
    parts = name.split(".")
    return ".".join(parts[:3]) if len(parts) > 2 and parts[1] == "commands" else ".".join(parts[:2])


def layer(u: str) -> int:
    short = u.split(".", 1)[1] if "." in u else u
    if short in TOP:
        return 3
    if short.startswith("commands"):
        return 2
    if short in FRAME:
        return 0
    return 1  # a noun


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in list(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle_between_modules():
    assert circles(GRAPH) == []


def test_no_import_circle_between_commands_and_packages():
    units: dict[str, set[str]] = {}
    for a, deps in GRAPH.items():
        units.setdefault(unit(a), set()).update(unit(b) for b in deps if unit(b) != unit(a))
    assert circles(units) == []


def test_imports_run_down_the_layers():
    """Frame ← nouns ← commands ← cli: a noun never imports a command, the frame imports only
    the frame."""
    upward = sorted(
        f"{a} imports {b}"
        for a, deps in GRAPH.items()
        for b in deps
        if layer(unit(b)) > layer(unit(a))
    )
    assert upward == []


def test_modules_stay_small_and_cli_stays_thin():
    big = {
        name: n
        for name, path in MODULES.items()
        if ".engine" not in name and (n := len(path.read_text("utf-8").splitlines())) > 800
    }
    assert big == {}
    assert len((PKG / "cli.py").read_text("utf-8").splitlines()) <= 300
