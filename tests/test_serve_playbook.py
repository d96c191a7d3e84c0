"""Serve playbooks: the schema loader's file:line:key errors, the bundled examples, rendering."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import run_main

from dflashctl.errors import PlaybookError
from dflashctl.hosts.host import LocalHost
from dflashctl.playbook import deployment_name, find_playbook, load_playbook, parse_playbook
from dflashctl.server.book import options_from_playbook
from dflashctl.server.plan import plan

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
        # values the steps' commands refuse are refused here, before anything runs
        ("metrics: {min_acceptance_length: 0.5}\n", "book.yaml:1: key "
         "'metrics.min_acceptance_length': must be a number of at least 1.0"),
        ("metrics: {min_acceptance_length: .inf}\n", "must be a number of at least 1.0"),
        ("smoke: {timeout: .inf}\n", "key 'smoke.timeout': must be a positive finite number"),
        ("smoke: {timeout: .nan}\n", "key 'smoke.timeout': must be a positive finite number"),
        ("serve: {ready_timeout: 1e300}\n", "key 'serve.ready_timeout': must be a positive finite"),
        ("smoke: {prompts: ['']}\n", "key 'smoke.prompts': must be a list of non-empty strings"),
        ("verify: {registry: nosuch}\n", "book.yaml:1: key 'verify.registry': no drafter "
         "'nosuch' in the registry | known drafters: "),
        ("fetch: {drafter: qwen3-8b-dflash-b1}\n", "key 'fetch.drafter': no drafter "
         "'qwen3-8b-dflash-b1' in the registry | did you mean"),
    ],
)  # fmt: skip
def test_errors_name_file_line_and_key(text, needle):
    assert needle in error_of(text)


def test_registered_names_and_hub_repos_pass():
    book = parse_playbook(
        Path("book.yaml"),
        "fetch: {drafter: some-org/unlisted-drafter}\nverify: {registry: demo}\n"
        "metrics: {min_acceptance_length: 1}\nsmoke: {prompts: [hi], timeout: 30}\n",
    )
    assert book.sections["fetch"]["drafter"] == "some-org/unlisted-drafter"
    assert book.sections["verify"]["registry"] == "demo"


def test_bundled_examples_load(monkeypatch):
    monkeypatch.setenv("DRAFTER_REVISION", "0123456789abcdef0123456789abcdef01234567")
    for name in sorted(p.stem for p in BOOKS.glob("*.yaml")):
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


# ---- ${ENV} references ----------------------------------------------------------------------

ENV_BOOK = """\
name: refs
hosts:
  - ${GPU_HOST}
  - {host: local, name: here, port: "${ALT_PORT:-8002}"}
serve:
  engine: vllm
  model: ${MODELS}/Qwen3-8B
  drafter: ${MODELS}/Qwen3-8B-DFlash-b16
  num_speculative_tokens: 15
  port: ${PORT}
  extra_args: [--served-model-name, "${NAME:-qwen}", --chat-template, "$${HOME}/t.jinja"]
  env: {HF_TOKEN: "${MY_HF}", WANDB: "${W_KEY}", PLAIN: "1"}
"""


def test_env_references_expand_from_the_environment():
    environ = {"GPU_HOST": "gpu7", "MODELS": "/m", "PORT": "8011", "MY_HF": "hf_x", "W_KEY": "w"}
    book = parse_playbook(Path("book.yaml"), ENV_BOOK, environ)
    assert [h.host for h in book.hosts] == ["gpu7", None]
    assert book.serve["model"] == "/m/Qwen3-8B"
    assert book.serve["port"] == 8011  # a numeric key takes the referenced number
    assert book.hosts[1].serve["port"] == 8002  # the default after :-
    assert book.serve["extra_args"] == [
        "--served-model-name", "qwen", "--chat-template", "${HOME}/t.jinja"
    ]  # fmt: skip
    assert book.serve["env"] == {"HF_TOKEN": "hf_x", "WANDB": "w", "PLAIN": "1"}
    assert book.serve_settings(book.hosts[0])["secret_env"] == ["HF_TOKEN", "WANDB"]


@pytest.mark.parametrize(
    "text, needle",
    [
        ("serve:\n  model: ${NOPE}/m\n", "book.yaml:2: key 'serve.model': ${NOPE} is not set "
         "in the environment | export NOPE=... before running, or write ${NOPE:-default}"),
        ("serve:\n  env:\n    A: '1'\n    B: ${NOPE}\n", "book.yaml:4: key 'serve.env.B': ${NOPE}"),
        ("hosts:\n  - gpu1\n  - ${NOPE}\n", "book.yaml:3: key 'hosts.1': ${NOPE} is not set"),
        ("serve:\n  port: ${WORD}\n", "key 'serve.port': must be a port number"),
    ],
)  # fmt: skip
def test_env_reference_errors_name_file_line_and_key(text, needle):
    with pytest.raises(PlaybookError) as info:
        parse_playbook(Path("book.yaml"), text, {"WORD": "eighty"})
    assert needle in info.value.message + " | " + (info.value.hint or "")


def test_referenced_env_values_are_secrets_never_rendered(tmp_path, monkeypatch, capsys):
    book = tmp_path / "refs.yaml"
    book.write_text(ENV_BOOK.replace("  - ${GPU_HOST}\n", ""))
    values = {"MODELS": "/m", "PORT": "8011", "MY_HF": "hf_s3cret", "W_KEY": "wandb_s3cret"}
    for k, v in values.items():
        monkeypatch.setenv(k, v)
    _, (opts,) = options_from_playbook(book, {})
    p = plan(opts, LocalHost())
    assert sorted(p.secret_names) == ["HF_TOKEN", "WANDB"] and p.env.get("PLAIN") == "1"
    assert "s3cret" not in json.dumps(p.to_json())
    code, out, err = run_main(monkeypatch, capsys, "serve", str(book), "--dry-run")
    assert code == 0, err
    assert "WANDB=<from your environment>" in err and "s3cret" not in out + err
    monkeypatch.delenv("W_KEY")
    code, out, err = run_main(monkeypatch, capsys, "serve", str(book), "--dry-run")
    assert code == 2 and "${W_KEY} is not set in the environment" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 2


def test_the_playbook_reference_documents_every_key():
    """docs/playbooks.md has a table row for every key the schema accepts, under its section."""
    from dflashctl.playbook import SECTIONS, TOP_KEYS

    doc = (REPO / "docs" / "playbooks.md").read_text()
    parts = {"Top level": doc.split("## Top level", 1)[1].split("\n## ", 1)[0]}
    for section in SECTIONS:
        parts[section] = doc.split(f"## `{section}`", 1)[1].split("\n## ", 1)[0]
    missing = [
        f"{where}.{key}"
        for where, keys in [("Top level", TOP_KEYS), *SECTIONS.items()]
        for key in keys
        if f"| `{key}` |" not in parts[where]
    ]
    assert not missing, f"undocumented playbook keys: {missing}"
    for book in sorted(BOOKS.glob("*.yaml")):
        assert f"`{book.name}`" in doc, f"{book.name} is not in the examples table"
