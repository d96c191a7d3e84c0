"""Serve playbooks: the schema loader's file:line:key errors, the bundled examples, rendering."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dflashctl.errors import PlaybookError
from dflashctl.hosts import LocalHost
from dflashctl.playbook import find_playbook, load_playbook, parse_playbook
from dflashctl.serve.book import deployment_name, options_from_playbook
from dflashctl.serve.launch import plan

REPO = Path(__file__).resolve().parent.parent
BOOKS = REPO / "playbooks"


def error_of(text: str) -> str:
    with pytest.raises(PlaybookError) as info:
        parse_playbook(Path("book.yaml"), text)
    return info.value.message + " | " + (info.value.hint or "")


@pytest.mark.parametrize(
    "text, needle",
    [
        ("name: x\nserve:\n  engine: vllm\n  prot: 8000\n", "book.yaml:4: key 'serve.prot': "
         "unknown key | did you mean 'port'?"),
        ("serve:\n  port: eighty\n", "book.yaml:2: key 'serve.port': must be a port number"),
        ("serve:\n  engine: tgi\n", "key 'serve.engine': must be one of local, vllm, sglang"),
        ("hosts:\n  - gpu1\n  - {host: gpu2, tensor_parallel_size: 0}\n",
         "book.yaml:3: key 'hosts.1.tensor_parallel_size': must be a positive integer"),
        ("hosts:\n  - {port: 8001}\n", "book.yaml:2: key 'hosts.0': missing required key 'host'"),
        ("hosts: [gpu1, gpu1]\n", "key 'hosts.1': host 'gpu1' is listed twice"),
        ("serve:\n  env: {1BAD: x}\n", "key 'serve.env': must be a mapping of VARIABLE: value"),
        ("serve:\n  extra_args: --flag\n", "key 'serve.extra_args': must be a list of strings"),
        ("servve: {}\n", "book.yaml:1: key 'servve': unknown key | did you mean 'serve'?"),
        ("serve: [1, 2\n", "book.yaml:2: not valid YAML"),
        ("", "empty playbook"),
        ("- a\n- b\n", "a playbook is a mapping"),
    ],
)  # fmt: skip
def test_errors_name_file_line_and_key(text, needle):
    assert needle in error_of(text)


def test_bundled_examples_load():
    for name in ("demo", "vllm-2xa100-tp2", "sglang"):
        path = find_playbook(name)
        assert path == BOOKS / f"{name}.yaml"
        book = load_playbook(path)
        assert book.name == name and book.serve["engine"] in ("local", "vllm", "sglang")


def test_per_host_overrides_and_names(tmp_path):
    p = tmp_path / "fleet.yaml"
    p.write_text(
        "name: fleet\nhosts:\n  - gpu1\n  - {host: alice@10.0.0.7:2222, port: 8001, "
        "env: {B: '2'}}\n  - {host: local, name: here}\n"
        "serve:\n  engine: vllm\n  model: m\n  port: 8000\n  env: {A: '1'}\n"
    )
    book, targets = options_from_playbook(p, {"ready_timeout": 30.0})
    assert [t.name for t in targets] == ["fleet-gpu1", "fleet-10.0.0.7-2222", "here"]
    assert [t.port for t in targets] == [8000, 8001, 8000]
    assert targets[1].env == {"A": "1", "B": "2"}
    assert targets[2].host is None and targets[0].ready_timeout == 30.0
    assert deployment_name(book, book.hosts[0]) == "fleet-gpu1"


def test_vllm_example_renders_tp2_and_the_speculative_config(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    _, (opts,) = options_from_playbook(BOOKS / "vllm-2xa100-tp2.yaml", {})
    p = plan(opts, LocalHost())  # rendering only: the paths are the playbook's
    argv = p.argv
    assert argv[0].endswith("/venvs/vllm/bin/vllm") and argv[1:3] == ["serve", "Qwen/Qwen3-8B"]
    assert argv[argv.index("--tensor-parallel-size") + 1] == "2"
    sc = json.loads(argv[argv.index("--speculative-config") + 1])
    assert sc["method"] == "dflash" and sc["num_speculative_tokens"] == 15  # registry: block 16
    assert argv[argv.index("--attention-backend") + 1] == "flash_attn"
    assert p.secret_names == ["HF_TOKEN"] and "hf_secret" not in json.dumps(p.to_json())
    assert p.env["CUDA_VISIBLE_DEVICES"] == "0,1"


def test_sglang_example_renders_the_block_size():
    _, (opts,) = options_from_playbook(BOOKS / "sglang.yaml", {})
    argv = plan(opts, LocalHost()).argv
    assert argv[1:3] == ["-m", "sglang.launch_server"]
    assert argv[argv.index("--speculative-num-draft-tokens") + 1] == "16"
    assert argv[argv.index("--port") + 1] == "30000"
