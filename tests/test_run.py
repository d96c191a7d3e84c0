"""`dflashctl run PLAYBOOK` and `dflashctl demo`: the real CLI, the real bundled engine on
127.0.0.1, real playbook files."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import run_json, run_main
from support.pairs import write_tiny_pair

ASSETS = Path(__file__).resolve().parent.parent / "dflashctl" / "assets" / "demo"


def _playbook(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "book.yaml"
    path.write_text(body)
    return path


@pytest.fixture
def tiny_book(tmp_path: Path) -> Path:
    target, drafter = write_tiny_pair(tmp_path / "pair")
    from support.startup import free_port

    return _playbook(
        tmp_path,
        f"""name: tiny
hosts: [local]
serve:
  engine: local
  model: {target}
  drafter: {drafter}
  port: {free_port()}
  extra_args: [--log-interval, "1"]
smoke:
  max_tokens: 24
""",
    )


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent, this test process, to reap it is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_run_random_pair_stops_at_smoke_and_tears_down(
    tiny_book: Path,
    monkeypatch,
    capsys,
    stop_all,
) -> None:
    code, data, _ = run_json(monkeypatch, capsys, "run", str(tiny_book), "--teardown")
    assert code == 1
    host = data["hosts"][0]
    steps = {s["step"]: s["status"] for s in host["steps"]}
    assert steps["fetch"] == "skip"
    assert steps["verify-config"] == "ok"
    assert steps["serve"] == "ok"
    assert steps["smoke"] == "fail"  # a random drafter accepts nothing; its text is noise
    assert "metrics" not in steps  # stops at the first failing step
    assert host["ready_s"] > 0
    assert host["torn_down"] and not _alive(host["pid"])


def test_run_dry_run_prints_the_command(tiny_book: Path, monkeypatch, capsys) -> None:
    code, out, _ = run_main(monkeypatch, capsys, "run", str(tiny_book), "--dry-run")
    assert code == 0
    assert "dflashctl.engine.server" in out and "--drafter" in out


def test_run_dry_run_lists_every_step_and_names_unreachable_hosts(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    empty = tmp_path / "ssh_config"
    empty.write_text("")
    monkeypatch.setenv("DFLASHCTL_SSH_CONFIG", str(empty))
    monkeypatch.setenv("REV", "0123456789abcdef0123456789abcdef01234567")
    book = _playbook(
        tmp_path,
        """name: two
hosts: [local, nosuchalias]
serve: {engine: vllm, model: m, drafter: /d, num_speculative_tokens: 7, port: 8011}
fetch: {drafter: demo, revision: "${REV}", dir: /d}
verify: {registry: demo}
metrics: {min_acceptance_length: 3}
""",
    )
    code, out, _ = run_main(monkeypatch, capsys, "run", str(book), "--dry-run")
    assert code == 0  # a dry run connects to nothing: the unknown alias is not looked up
    assert "not checked on nosuchalias (a dry run does not connect; --check does)" in out
    assert "the launch writes the home directory" not in out  # no ~ in these paths
    lines = [line.strip() for line in out.splitlines()]
    rev = "0123456789abcdef0123456789abcdef01234567"
    assert f"dflashctl fetch demo --revision {rev} --dir /d" in lines
    assert "dflashctl verify-config /d --drafter demo --engine vllm" in lines
    assert any(line.startswith("vllm serve m ") for line in lines)
    assert "dflashctl smoke two-local --max-tokens 128" in lines
    assert any(
        line.startswith("dflashctl metrics ") and line.endswith("--min-acceptance-length 3")
        for line in lines
    )
    code, out, _ = run_main(monkeypatch, capsys, "run", str(book), "--dry-run", "--check")
    assert code == 2  # --check connects: one host could not even be planned
    assert "two-nosuchalias: nosuchalias: unknown host name 'nosuchalias'" in out


def test_dry_run_opens_no_connection(tmp_path: Path, monkeypatch, capsys) -> None:
    """The bundled TP-2 playbook, its alias pointing at a port that records connections: a dry
    run renders every step and connects to nothing; --check does connect."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.settimeout(0.3)
    port = listener.getsockname()[1]
    cfg = tmp_path / "ssh_config"
    cfg.write_text(f"Host gpu-a100\n  HostName 127.0.0.1\n  Port {port}\n  ConnectTimeout 1\n")
    monkeypatch.setenv("DFLASHCTL_SSH_CONFIG", str(cfg))
    try:
        code, out, err = run_main(
            monkeypatch, capsys, "run", "playbooks/vllm-2xa100-tp2.yaml", "--dry-run"
        )
        assert code == 0, out + err
        assert "/vllm/bin/vllm serve Qwen/Qwen3-8B" in out and "not checked on gpu-a100" in out
        # '~' inside the quoted --speculative-config: no shell expands it, the launch does
        assert '"model":"~/models/Qwen3-8B-DFlash-b16"' in out
        assert (
            "what ~ is there (the launch writes the home directory for it, inside the JSON" in out
        )
        assert "(vllm, http://127.0.0.1:8000)" in out  # the alias' HostName, read offline
        with pytest.raises(TimeoutError):
            listener.accept()  # nobody knocked
        code, out, err = run_main(
            monkeypatch, capsys, "serve", "vllm-2xa100-tp2", "--dry-run", "--check"
        )
        assert code == 2
        listener.accept()[0].close()  # --check did connect
    finally:
        listener.close()


def test_run_unknown_section_key_is_exit_2_with_file_and_line(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    book = _playbook(tmp_path, "name: x\nhosts: [local]\nsmoke:\n  max_tokenz: 3\n")
    code, _, err = run_main(monkeypatch, capsys, "run", str(book))
    assert code == 2
    assert f"{book}:4" in err and "max_tokenz" in err
    assert "Traceback" not in err


def test_run_missing_playbook_is_exit_2(monkeypatch, capsys) -> None:
    code, _, err = run_main(monkeypatch, capsys, "run", "no-such-playbook")
    assert code == 2 and "not a playbook" in err


@pytest.mark.slow
@pytest.mark.skipif(not (ASSETS / "drafter" / "config.json").exists(), reason="demo pair not built")
def test_demo_field_story(monkeypatch, capsys, stop_all) -> None:
    code, data, _ = run_json(monkeypatch, capsys, "demo")
    story = {s["step"]: s for s in data["field_story"]}
    assert data["run"]["ok"], data["run"]
    healthy = data["run"]["hosts"][0]["mean_acceptance_length"]
    stale = story["serve the stale drafter"]["figures"]["mean_acceptance_length"]
    fixed = story["serve the fixed drafter"]["figures"]["mean_acceptance_length"]
    assert stale < 0.8 * healthy  # judged against the healthy run on the same prompts
    assert story["serve the stale drafter"]["ok"]  # an acceptance alarm was raised
    assert story["verify-config"]["ok"]
    for name in ("mask_token_id", "target_layer_ids", "layer_types"):
        assert name in story["verify-config"]["summary"]
    assert story["verify-config --fix"]["ok"]
    assert fixed == pytest.approx(healthy, rel=0.15)
    assert code == 0
    # the stale copy's changes with the demo pair's own values, not the field story's
    changes = story["stale config"]["details"]
    assert "dflash_config.mask_token_id: 6 -> 0" in changes, changes
    assert "dflash_config.target_layer_ids: [1, 8, 14, 20, 27] -> [2, 9, 15, 21, 28]" in changes
    # the two likeliest causes, without check commands naming the stale server (stopped now)
    details = story["serve the stale drafter"]["details"]
    causes = [d for d in details if d.startswith("likely cause: ")]
    assert len(causes) == 2 and "mask_token_id" in causes[0], details
    assert not any("check:" in d or "127.0.0.1" in d for d in details), details
    assert details[-1].endswith("less likely (dflashctl metrics lists them)"), details


def test_a_spec_none_host_with_its_own_speculation_is_a_baseline_not_a_plain_server() -> None:
    """SGLang MTP next to a DFlash host (playbooks/field-story.yaml): no drafter to fetch, and
    its speculation is not an error for smoke (it is not a plain `--expect-no-spec` server)."""
    from dflashctl.commands.run.run import HostPlan, _fetch
    from dflashctl.server.engines import own_speculation
    from dflashctl.server.plan import ServeOptions

    mtp = ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3"]
    assert own_speculation(mtp) and own_speculation(["--speculative-config={}"])
    assert not own_speculation(["--max-model-len", "8192"])
    opts = ServeOptions(engine="sglang", model="m", spec="none", extra_args=mtp)
    step = _fetch(HostPlan(serve=opts, fetch={"drafter": "demo"}), opts)
    assert step.status == "skip" and "no DFlash drafter" in step.summary


class TestLimitAndSSHOptions:
    """`run PLAYBOOK --limit` (Ansible's habit) and the SSH options every other command has."""

    @pytest.fixture
    def fleet(self, tmp_path: Path) -> Path:
        return _playbook(
            tmp_path,
            """name: fleet
hosts:
  - gpu-a
  - gpu-b
  - {host: ops@10.0.0.23:2222, name: gpu-c}
serve: {engine: vllm, model: m, drafter: /d, num_speculative_tokens: 7}
""",
        )

    @pytest.mark.parametrize(
        "limit, chosen",
        [
            ("gpu-b", ["fleet-gpu-b"]),
            ("gpu-a,gpu-c", ["fleet-gpu-a", "gpu-c"]),
            ("gpu-*", ["fleet-gpu-a", "fleet-gpu-b", "gpu-c"]),
            ("gpu-*,!gpu-c", ["fleet-gpu-a", "fleet-gpu-b"]),
            ("!gpu-a", ["fleet-gpu-b", "gpu-c"]),
            ("ops@10.0.0.23:2222", ["gpu-c"]),
            ("fleet-gpu-a", ["fleet-gpu-a"]),
        ],
    )
    def test_limit_selects_hosts(self, fleet, monkeypatch, capsys, limit, chosen) -> None:
        code, data, err = run_json(
            monkeypatch, capsys, "run", str(fleet), "--dry-run", "--limit", limit
        )
        assert code == 0, err
        assert [c["name"] for c in data["commands"]] == chosen

    @pytest.mark.parametrize("limit", ["nope", "!gpu-*", " , "])
    def test_a_limit_that_selects_nothing_is_exit_2(
        self, fleet, monkeypatch, capsys, limit
    ) -> None:
        code, out, err = run_main(monkeypatch, capsys, "run", str(fleet), "--dry-run", "-l", limit)
        assert code == 2 and out == "" and "Traceback" not in err
        assert "--limit" in err.splitlines()[0]

    def test_ssh_config_is_the_one_given(self, fleet, tmp_path, monkeypatch, capsys) -> None:
        """--check connects: with an ssh_config that sends gpu-a to a closed port, the failure
        names that port (the file was read); a missing file is one line, exit 2."""
        from support.startup import free_port

        port = free_port()
        cfg = tmp_path / "cfg"
        cfg.write_text(f"Host gpu-a\n  HostName 127.0.0.1\n  Port {port}\n  ConnectTimeout 2\n")
        args = ["run", str(fleet), "--dry-run", "--check", "--limit", "gpu-a"]
        code, out, err = run_main(monkeypatch, capsys, *args, "--ssh-config", str(cfg))
        assert code == 2 and f"127.0.0.1:{port}" in out + err
        code, out, err = run_main(monkeypatch, capsys, *args, "--ssh-config", str(tmp_path / "no"))
        assert code == 2 and "ssh config file not found" in err
