"""Bounds on YAML before it is composed: nesting depth, alias expansion (billion laughs), and
aliases that refer to a node containing them (`x: &a [*a]`). Checked on PyYAML's event stream,
which is read without recursion, so a hostile file is refused in one line and never exhausts
the stack or memory of the recursive composer and of code that walks the result.

Frame: used by the registry, playbooks and the defect catalogue; never prints.
"""

from __future__ import annotations

from typing import Any

import yaml

MAX_YAML_BYTES = 1 << 20  # a playbook or registry entry is a few KB
MAX_DEPTH = 64  # mappings and lists nested inside each other
MAX_NODES = 100_000  # nodes once every alias is expanded


class YamlLimit(yaml.YAMLError):
    """A bound was crossed; `problem_mark` and `problem` read like PyYAML's own errors."""

    def __init__(self, problem: str, mark: Any) -> None:
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = mark


def check_bounds(text: str, *, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES) -> None:
    """Raise YamlLimit when `text` nests deeper than `max_depth`, expands (aliases included) to
    more than `max_nodes` nodes, or has an alias inside the node it refers to."""
    loader_cls = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    stack: list[list[Any]] = []  # open collections: [anchor, expanded size so far]
    sizes: dict[str, int] = {}  # anchor -> expanded size of its node
    open_anchors: set[str] = set()
    total = 0

    def add(n: int, mark: Any) -> None:
        nonlocal total
        if stack:
            stack[-1][1] += n
            size = stack[-1][1]
        else:
            total += n
            size = total
        if size > max_nodes:
            raise YamlLimit(
                f"more than {max_nodes} nodes once aliases are expanded (an alias bomb?)", mark
            )

    for ev in yaml.parse(text, Loader=loader_cls):
        if isinstance(ev, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            if len(stack) >= max_depth:
                raise YamlLimit(f"nested more than {max_depth} levels deep", ev.start_mark)
            stack.append([ev.anchor, 1])
            if ev.anchor:
                open_anchors.add(ev.anchor)
        elif isinstance(ev, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            anchor, n = stack.pop()
            if anchor:
                sizes[anchor] = n
                open_anchors.discard(anchor)
            add(n, ev.start_mark)
        elif isinstance(ev, yaml.ScalarEvent):
            if ev.anchor:
                sizes[ev.anchor] = 1
            add(1, ev.start_mark)
        elif isinstance(ev, yaml.AliasEvent):
            if ev.anchor in open_anchors:
                raise YamlLimit(
                    f"the alias *{ev.anchor} is inside the node &{ev.anchor} it refers to "
                    "(a recursive structure)",
                    ev.start_mark,
                )
            add(sizes.get(ev.anchor or "", 1), ev.start_mark)


def load_with_lines(text: str) -> tuple[Any, dict[tuple[str, ...], int]] | None:
    """The document in `text` (bounds checked first) and the line of every key path (each
    mapping key, each list item by its index); None for an empty document. Raises
    yaml.YAMLError (YamlLimit included): `yaml_problem` makes it one line."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        check_bounds(text)
        node = loader.get_single_node()
        if node is None:
            return None
        lines: dict[tuple[str, ...], int] = {}
        _index(node, (), lines)
        return loader.construct_document(node), lines
    finally:
        loader.dispose()


def _index(node: Any, prefix: tuple[str, ...], lines: dict[tuple[str, ...], int]) -> None:
    lines.setdefault(prefix, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = (*prefix, str(key_node.value))
            lines.setdefault(key, key_node.start_mark.line + 1)
            _index(value_node, key, lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _index(item, (*prefix, str(i)), lines)


def yaml_problem(e: yaml.YAMLError) -> str:
    """ ":LINE: not valid YAML: PROBLEM", to follow a file name."""
    mark = getattr(e, "problem_mark", None)
    where = f":{mark.line + 1}" if mark is not None else ""
    problem = getattr(e, "problem", None) or str(e).splitlines()[0]
    return f"{where}: not valid YAML: {problem}"
