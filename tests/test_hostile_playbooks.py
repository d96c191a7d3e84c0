"""Hostile YAML (issue 19, item 2): alias bombs, recursive aliases, deep nesting, devices and
huge files, in serve playbooks and in the drafter registry: one line, exit 2, in seconds, in
bounded memory (`ulimit -v` 1.5 GB)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.hostile import assert_clean_error, dflashctl

MEM = 1536 << 20


def laughs(levels: int = 9) -> str:
    text = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    prev = "a"
    for c in "bcdefghijklmnop"[:levels]:
        text += f"{c}: &{c} [" + ",".join([f"*{prev}"] * 9) + "]\n"
        prev = c
    return text


CASES = {
    "billion_laughs": (laughs(), "aliases are expanded"),
    "recursive_alias": ("x: &a [*a]\n", "recursive"),
    "deep_flow": ("x: " + "[" * 10000 + "]" * 10000 + "\n", "nest"),
    "deep_block": ("".join(" " * i + "k:\n" for i in range(1000)) + " " * 1000 + "v\n", "nest"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_serve_playbook(tmp_path: Path, case: str):
    text, words = CASES[case]
    book = tmp_path / "book.yaml"
    book.write_text(text)
    res = dflashctl("serve", str(book), mem_limit=MEM, timeout=60)
    assert_clean_error(res, 2, contains=words)
    assert res.seconds < 10
    assert [p.name for p in tmp_path.iterdir()] == ["book.yaml"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_registry_entry(tmp_path: Path, case: str):
    text, words = CASES[case]
    drafters = tmp_path / "playbooks" / "drafters"
    drafters.mkdir(parents=True)
    (drafters / "bomb.yaml").write_text(text)
    res = dflashctl(
        "fetch",
        "bomb",
        "--dir",
        str(tmp_path / "out"),
        mem_limit=MEM,
        DFLASHCTL_PLAYBOOKS=str(tmp_path / "playbooks"),
    )
    assert_clean_error(res, 2, contains=words)
    assert not (tmp_path / "out").exists()


def test_playbook_that_is_a_fifo_or_a_device(tmp_path: Path):
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    res = dflashctl("serve", str(fifo), timeout=20)
    assert_clean_error(res, 2, contains="FIFO")
    assert res.seconds < 5
    link = tmp_path / "zero.yaml"
    link.symlink_to("/dev/zero")
    res = dflashctl("serve", str(link), mem_limit=MEM, timeout=20)
    assert_clean_error(res, 2, contains="character device")


def test_a_huge_playbook_is_refused(tmp_path: Path):
    book = tmp_path / "big.yaml"
    book.write_text("# " + "x" * (2 << 20) + "\nserve: {}\n")
    res = dflashctl("serve", str(book))
    assert_clean_error(res, 2, contains="more than")
