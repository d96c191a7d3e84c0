"""`dflashctl serve` / `stop` / `status` on this machine: rendering, readiness, failures, stop.

Engines are the stand-in `support/engine_process.py` (started through `--python`, starts in ~0.1 s)
except one test that serves the real bundled engine on a tiny random pair written by
`support/pairs.py`.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.cli import run_json, run_main
from support.engine_process import fake_model, make_python
from support.startup import free_port, read_until_startup

from dflashctl.server import deployments as state
from dflashctl.server import logscan
from dflashctl.server.engines import EngineSpec, render

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from support.pairs import write_tiny_pair

    return write_tiny_pair(tmp_path_factory.mktemp("pair"))


def fake_serve(tmp_path: Path, mode: str, *extra: str, port: int | None = None) -> list[str]:
    """Arguments for `serve` of the fake engine (plain control: no drafter to verify)."""
    py = make_python(tmp_path / "bin", mode)
    return [
        "serve",
        "--model",
        fake_model(tmp_path),
        "--spec",
        "none",
        "--python",
        str(py),
        "--port",
        str(port or free_port()),
        "--detach",
        *extra,
    ]


# ---- command rendering -----------------------------------------------------------------------


class TestRender:
    def test_vllm(self):
        argv = render(
            EngineSpec(
                "vllm",
                "Qwen/Qwen3-8B",
                "z-lab/Qwen3-8B-DFlash-b16",
                8000,
                "0.0.0.0",
                num_speculative_tokens=15,
                tensor_parallel_size=2,
                extra_args=["--max-model-len", "8192"],
            )
        )
        assert argv == [
            "vllm",
            "serve",
            "Qwen/Qwen3-8B",
            "--host",
            "0.0.0.0",
            "--port",
            "8000",
            "--speculative-config",
            '{"method":"dflash","model":"z-lab/Qwen3-8B-DFlash-b16","num_speculative_tokens":15}',
            "--tensor-parallel-size",
            "2",
            "--no-enable-prefix-caching",
            "--max-model-len",
            "8192",
        ]

    def test_vllm_prefix_caching_off_unless_asked(self):
        base = dict(num_speculative_tokens=15)
        spec = EngineSpec("vllm", "m", "d", 8000, "127.0.0.1", **base)
        assert "--no-enable-prefix-caching" in render(spec)
        none = EngineSpec("vllm", "m", None, 8000, "127.0.0.1", spec="none")
        assert "--no-enable-prefix-caching" in render(none)  # the baseline matches
        kept = EngineSpec(
            "vllm", "m", "d", 8000, "127.0.0.1", extra_args=["--enable-prefix-caching"], **base
        )
        argv = render(kept)
        assert "--no-enable-prefix-caching" not in argv and argv[-1] == "--enable-prefix-caching"

    def test_vllm_beside_python(self):
        spec = EngineSpec("vllm", "m", None, 8000, spec="none", python="/opt/venv/bin/python")
        assert render(spec)[:2] == ["/opt/venv/bin/vllm", "serve"]

    def test_sglang_draft_tokens_is_the_block(self):
        argv = render(EngineSpec("sglang", "Qwen/Qwen3-8B", "/d", 30000, num_speculative_tokens=15))
        assert argv[:3] == ["python3", "-m", "sglang.launch_server"]
        i = argv.index("--speculative-num-draft-tokens")
        assert argv[i + 1] == "16"  # block size, anchor included
        assert argv[argv.index("--speculative-algorithm") + 1] == "DFLASH"
        assert argv[argv.index("--speculative-draft-model-path") + 1] == "/d"
        assert "--enable-metrics" in argv

    def test_local_control(self):
        argv = render(EngineSpec("local", "/t", None, 8001, spec="none", python="py"))
        assert argv == [
            "py",
            "-m",
            "dflashctl.engine.server",
            "--model",
            "/t",
            "--spec",
            "none",
            "--host",
            "127.0.0.1",
            "--port",
            "8001",
        ]

    def test_cli_dry_run_reads_k_from_the_drafter(self, monkeypatch, capsys, pair):
        target, drafter = pair
        code, plan, _ = run_json(
            monkeypatch,
            capsys,
            "serve",
            "--engine",
            "vllm",
            "--model",
            str(target),
            "--drafter",
            str(drafter),
            "--dry-run",
            "--",
            "--enforce-eager",
        )
        assert code == 0
        assert plan["num_speculative_tokens"] == 3  # block_size 4 - 1
        assert "block_size" in plan["num_speculative_tokens_source"]
        sc = json.loads(plan["cmd"][plan["cmd"].index("--speculative-config") + 1])
        assert sc == {"method": "dflash", "model": str(drafter), "num_speculative_tokens": 3}
        assert plan["cmd"][-1] == "--enforce-eager"

    def test_cli_dry_run_human_prints_the_command(self, monkeypatch, capsys, pair):
        target, drafter = pair
        code, out, err = run_main(
            monkeypatch, capsys, "serve", "--model", str(target), "--drafter", str(drafter),
            "--dry-run", "-k", "2",
        )  # fmt: skip
        assert code == 0
        assert "-m dflashctl.engine.server" in out and "--num-speculative-tokens 2" in out
        assert "num_speculative_tokens 2 (--num-speculative-tokens)" in err

    def test_users_speculative_config_is_merged_theirs_win(self, monkeypatch, capsys, pair):
        target, drafter = pair
        code, plan, _ = run_json(
            monkeypatch, capsys, "serve", "--engine", "vllm", "--model", str(target),
            "--drafter", str(drafter), "--dry-run", "--", "--max-model-len", "64",
            "--speculative-config", '{"attention_backend":"flash_attn","num_speculative_tokens":5}',
        )  # fmt: skip
        assert code == 0
        assert plan["cmd"].count("--speculative-config") == 1
        sc = json.loads(plan["cmd"][plan["cmd"].index("--speculative-config") + 1])
        assert sc == {
            "method": "dflash",
            "model": str(drafter),
            "num_speculative_tokens": 5,
            "attention_backend": "flash_attn",
        }
        # the checks use the merged K: 5 is past the drafter's block of 4
        assert plan["num_speculative_tokens"] == 5
        assert plan["num_speculative_tokens_source"] == "--speculative-config"
        assert any("5 > block size 4 - 1" in n for n in plan["notes"])
        assert plan["cmd"][-2:] == ["--max-model-len", "64"]

    def test_dotted_speculative_config_and_the_model_key(self, monkeypatch, capsys, pair):
        target, drafter = pair
        code, plan, _ = run_json(
            monkeypatch, capsys, "serve", "--engine", "vllm", "--model", str(target),
            "--drafter", "/elsewhere", "--dry-run", "--",
            f"--speculative-config.model={drafter}", "--speculative-config.enforce_eager", "true",
        )  # fmt: skip
        assert code == 0
        sc = json.loads(plan["cmd"][plan["cmd"].index("--speculative-config") + 1])
        assert sc["model"] == str(drafter) and sc["enforce_eager"] is True
        assert sc["num_speculative_tokens"] == 3  # read from *their* drafter's block size
        assert any("its keys win over --drafter" in n for n in plan["notes"])

    def test_playbook_speculative_config_mapping(self, monkeypatch, capsys, pair, tmp_path):
        target, drafter = pair
        book = tmp_path / "b.yaml"
        book.write_text(
            "serve:\n  engine: vllm\n"
            f"  model: {target}\n  drafter: {drafter}\n"
            "  speculative_config: {attention_backend: flash_attn, num_speculative_tokens: 2}\n"
        )
        code, plan, _ = run_json(monkeypatch, capsys, "serve", str(book), "--dry-run")
        assert code == 0, plan
        sc = json.loads(plan["cmd"][plan["cmd"].index("--speculative-config") + 1])
        assert sc["attention_backend"] == "flash_attn" and sc["num_speculative_tokens"] == 2
        assert plan["num_speculative_tokens_source"] == "playbook speculative_config"

    def test_vllm_k_is_block_minus_one_and_says_why(self, monkeypatch, capsys, pair):
        target, drafter = pair
        code, _, err = run_main(
            monkeypatch, capsys, "serve", "--engine", "vllm", "--model", str(target),
            "--drafter", str(drafter), "--dry-run",
        )  # fmt: skip
        assert code == 0
        assert "num_speculative_tokens 3 = block size 4 - 1" in " ".join(err.split())

    @pytest.mark.parametrize(
        "extra, needle",
        [
            (["--speculative-config", "{nope"], "is not valid JSON"),
            (["--speculative-config", "[1]"], "must be a JSON object"),
            (["--speculative-config", '{"method":"eagle3"}'], "sets method 'eagle3'"),
            (["--speculative-config", '{"num_speculative_tokens":0}'], "positive integer"),
            (["-k", "4", "--", "-sc", '{"num_speculative_tokens":5}'], "disagree"),
        ],
    )
    def test_bad_speculative_config_exit_2(self, monkeypatch, capsys, pair, extra, needle):
        target, drafter = pair
        args = ["serve", "--engine", "vllm", "--model", str(target), "--drafter", str(drafter)]
        args += ["--dry-run", *(extra if extra[0] == "-k" else ["--", *extra])]
        code, out, err = run_main(monkeypatch, capsys, *args)
        assert code == 2 and out == "", err
        assert needle in err and "Traceback" not in err

    def test_model_is_the_positional_like_vllm_serve(self, monkeypatch, capsys, pair):
        target, drafter = pair
        code, plan, _ = run_json(
            monkeypatch, capsys, "serve", str(target), "--engine", "vllm", "--drafter",
            str(drafter), "--dry-run",
        )  # fmt: skip
        assert code == 0
        assert plan["cmd"][:3] == ["vllm", "serve", str(target)]

    def test_a_vllm_serve_line_as_it_is(self, monkeypatch, capsys, pair):
        """`vllm serve MODEL …` with `dflashctl` and `--engine vllm` in front: no `--` needed."""
        target, drafter = pair
        sc = json.dumps({"method": "dflash", "model": str(drafter), "num_speculative_tokens": 3})
        code, plan, err = run_json(
            monkeypatch, capsys, "serve", str(target), "--engine", "vllm", "--dry-run",
            "--speculative-config", sc, "--max-model-len", "64", "-tp", "2",
            "--host", "0.0.0.0",
        )  # fmt: skip
        assert code == 0, err  # `--host 0.0.0.0` as vllm serve takes it: the listen address
        assert plan["host"] == "local" and plan["cmd"][plan["cmd"].index("--host") + 1] == "0.0.0.0"
        code, plan, err = run_json(
            monkeypatch, capsys, "serve", str(target), "--engine", "vllm", "--dry-run",
            "--speculative-config", sc, "--max-model-len", "64", "-tp", "2", "--bind", "0.0.0.0",
        )  # fmt: skip
        assert code == 0, err
        cmd = plan["cmd"]
        assert cmd.count("--speculative-config") == 1 and cmd[-2:] == ["--max-model-len", "64"]
        assert cmd[cmd.index("--tensor-parallel-size") + 1] == "2"
        code, _, err = run_main(
            monkeypatch, capsys, "serve", str(target), "--engine", "vllm", "--dry-run",
            "--drafer", str(drafter),
        )  # fmt: skip
        assert code == 2 and "did you mean --drafter?" in err

    def test_pasted_vllm_flags_after_dashes_are_rendered_once(self, monkeypatch, capsys, pair):
        target, drafter = pair
        code, plan, _ = run_json(
            monkeypatch, capsys, "serve", str(target), "--engine", "vllm", "--drafter",
            str(drafter), "--dry-run", "--", "--host", "0.0.0.0", "--port=8123", "-tp", "2",
            "--max-model-len", "64",
        )  # fmt: skip
        assert code == 0
        cmd = plan["cmd"]
        assert cmd.count("--host") == 1 and cmd[cmd.index("--host") + 1] == "0.0.0.0"
        assert cmd.count("--port") == 1 and cmd[cmd.index("--port") + 1] == "8123"
        assert cmd[cmd.index("--tensor-parallel-size") + 1] == "2" and "-tp" not in cmd
        assert plan["name"] == "local-8123" and cmd[-2:] == ["--max-model-len", "64"]
        code, _, err = run_main(
            monkeypatch, capsys, "serve", str(target), "--engine", "vllm", "--drafter",
            str(drafter), "--port", "8000", "--dry-run", "--", "--port", "8123",
        )  # fmt: skip
        assert code == 2 and "disagree" in err

    @pytest.mark.parametrize("addr", ["0.0.0.0", "::", "127.0.0.1", "localhost"])
    def test_serve_takes_a_listen_address_as_vllm_serve_does(self, monkeypatch, capsys, addr):
        """`vllm serve MODEL --host 0.0.0.0 ...` runs unchanged: an address that can name no
        machine to reach over SSH is the listen address, said in one line."""
        args = ["serve", "--engine", "vllm", "m", "--drafter", "d", "-k", "15", "--host", addr,
                "--port", "8000", "--dry-run"]  # fmt: skip
        code, out, err = run_main(monkeypatch, capsys, *args)
        assert code == 0, err
        assert f" --host {addr} --port 8000 " in out and not out.startswith("ssh")
        assert err.splitlines()[0].startswith(f"--host {addr}: the listen address")
        code, data, _ = run_json(monkeypatch, capsys, *args)
        assert code == 0 and data["host"] == "local"
        code, _, err = run_main(monkeypatch, capsys, *args, "--bind", "10.1.1.1")
        assert code == 2 and "both give the listen address" in err

    @pytest.mark.parametrize("command", [["verify-config", "/nonexistent"], ["doctor"]])
    @pytest.mark.parametrize("addr", ["0.0.0.0", "::", "127.0.0.1", "localhost"])
    def test_a_listen_address_given_to_host_names_bind(self, monkeypatch, capsys, command, addr):
        t0 = time.monotonic()
        code, out, err = run_main(monkeypatch, capsys, *command, "--host", addr)
        assert code == 2 and out == ""
        first = err.splitlines()[0]
        assert f"--host {addr} is" in first and "over SSH" in first
        assert f"--bind {addr}" in err and "Traceback" not in err
        assert time.monotonic() - t0 < 2  # refused before any connection attempt

    def test_missing_demo_pair_is_a_clear_error(self, monkeypatch, capsys, tmp_path):
        import dflashctl.server.plan as launch

        no_drafter = (str(tmp_path / "target"), str(tmp_path / "no-drafter"))
        monkeypatch.setattr(launch, "demo_pair_dirs", lambda host, setup=True: no_drafter)
        code, out, err = run_main(monkeypatch, capsys, "serve", "--dry-run")
        assert code == 2 and out == ""
        assert "the embedded demo drafter is missing" in err and "Traceback" not in err

    @pytest.mark.parametrize(
        "args, needle",
        [
            (["--engine", "tgi", "--model", "m"], "unknown engine"),
            (["--engine", "vllm"], "needs --model"),
            (["--engine", "vllm", "--model", "m", "--drafter", "/nope"], "num-speculative-tokens"),
            (["--model", "m", "--spec", "maybe", "--drafter", "d"], "--spec must be"),
            (["m", "stray"], "unexpected argument 'stray'"),
            (["m", "--model", "n"], "the model is given twice"),
            (["--model", "m", "--spec", "none", "--name", "bad name"], "deployment name"),
        ],
    )
    def test_bad_input_exit_2(self, monkeypatch, capsys, args, needle):
        code, _, err = run_main(monkeypatch, capsys, "serve", *args, "--dry-run")
        assert code == 2, err
        assert needle in err and "Traceback" not in err


# ---- the log: fatal lines and root causes ----------------------------------------------------


class TestLogscan:
    FLASH = (
        "(APIServer pid=1) INFO 01-01 00:00:00 [api.py:1] vLLM server version 0.34.0",
        "(EngineCore pid=9) ERROR 01-01 00:00:01 [core.py:1] EngineCore failed to start.",
        "Traceback (most recent call last):",
        '  File "x.py", line 1, in <module>',
        "ModuleNotFoundError: No module named 'flash_attn'",
        "(APIServer pid=1) ERROR 01-01 00:00:02 [x.py:9] RuntimeError: Engine core "
        "initialization failed. See root cause above.",
        "(APIServer pid=1) INFO 01-01 00:00:02 [x.py:9] shutting down",
    )

    def test_root_cause_first_not_the_last_line(self):
        lines = logscan.explain(list(self.FLASH))
        assert lines[0] == "ModuleNotFoundError: No module named 'flash_attn'"
        assert "Engine core initialization failed" in lines[-1]
        assert "shutting down" not in " ".join(lines)
        assert "flash-attn" in (logscan.hint_for(lines) or "")

    def test_a_warning_is_not_fatal(self):
        warn = (
            "(APIServer pid=1) WARNING 01-01 00:00:00 [_custom_ops.py:20] Failed to import from "
            "vllm._C with ModuleNotFoundError(\"No module named 'vllm._C'\")"
        )
        assert logscan.fatal(warn) is None
        assert logscan.fatal("ModuleNotFoundError: No module named 'flash_attn'") is not None

    def test_sglang_and_memory(self):
        assert logscan.fatal("[2026-11-20 10:00:40] Scheduler hit an exception: boom")
        assert logscan.fatal("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate")
        assert logscan.fatal("[2026-11-20 10:00:40 TP0] Not enough memory. Please try to increase "
                             "--mem-fraction-static")  # fmt: skip

    def test_engine_error_line_is_the_root_cause(self):
        # the bundled engine: its own ERROR line, then vLLM's summary
        lines = [
            "(APIServer pid=1) INFO 01-01 00:00:00 [server.py:601] dflashctl engine version 0.1",
            "(APIServer pid=1) ERROR 01-01 00:00:01 [server.py:626] checkpoint lacks 3 weights",
            "(APIServer pid=1) ERROR 01-01 00:00:01 [server.py:627] RuntimeError: Engine core "
            "initialization failed. See root cause above.",
        ]
        got = logscan.explain(lines)
        assert "checkpoint lacks 3 weights" in got[0]
        assert "Engine core initialization failed" in got[1]


# ---- launches ----------------------------------------------------------------------------------


@pytest.mark.usefixtures("stop_all")
class TestLaunch:
    def test_fatal_module_fails_fast_with_the_root_cause(self, monkeypatch, capsys, tmp_path):
        t0 = time.monotonic()
        code, out, err = run_main(monkeypatch, capsys, *fake_serve(tmp_path, "flash_attn"))
        assert code == 1, err
        assert time.monotonic() - t0 < 15
        assert "FAILED" in out and "exited before it was ready" in out
        first = out.index("No module named 'flash_attn'")
        assert first < out.index("Engine core initialization failed")
        assert "flash-attn" in out  # the hint
        assert state.all_deployments() == []

    def test_fatal_line_while_alive_is_stopped(self, monkeypatch, capsys, tmp_path):
        code, data, _ = run_json(monkeypatch, capsys, *fake_serve(tmp_path, "hang_fatal"))
        assert code == 1 and data["ok"] is False
        assert "fatal error" in data["reason"]
        pid = data["pid"]
        time.sleep(0.3)
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()

    def test_stale_log_of_an_earlier_run_is_never_read(self, monkeypatch, capsys, tmp_path):
        port = free_port()
        name = f"local-{port}"
        run_dir = state.home() / "run" / name
        run_dir.mkdir(parents=True)
        stale = "(APIServer pid=7) ERROR 01-01 00:00:00 [x.py:1] RuntimeError: Engine core " \
                "initialization failed. See root cause above.\n"  # fmt: skip
        (run_dir / "server.log").write_text(stale)
        code, data, err = run_json(monkeypatch, capsys, *fake_serve(tmp_path, "warn", port=port))
        assert code == 0, err
        assert {"url", "pid", "log", "engine", "host"} <= set(data)
        assert data["url"] == f"http://127.0.0.1:{port}" and data["host"] == "local"
        log = Path(data["log"]).read_text()
        assert "Engine core initialization failed" not in log
        assert "No module named 'vllm._C'" in log  # a warning: not fatal
        assert (run_dir / "server.log.1").read_text() == stale

    def test_status_then_stop(self, monkeypatch, capsys, tmp_path):
        code, data, _ = run_json(monkeypatch, capsys, *fake_serve(tmp_path, "ok"))
        assert code == 0
        code, st, _ = run_json(monkeypatch, capsys, "status")
        assert code == 0
        (row,) = st["deployments"]
        assert row["state"] == "up" and row["health"] == 200 and row["pid"] == data["pid"]
        code, stopped, _ = run_json(monkeypatch, capsys, "stop", row["name"])
        assert code == 0
        assert stopped["stopped"][0]["outcome"] == "terminated"
        assert stopped["stopped"][0]["port_free"] is True
        assert state.all_deployments() == []

    def test_port_in_use_by_someone_else(self, monkeypatch, capsys, tmp_path):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen()
            port = s.getsockname()[1]
            code, _, err = run_main(monkeypatch, capsys, *fake_serve(tmp_path, "ok", port=port))
        assert code == 2
        assert f"port {port} is already in use by pid {os.getpid()}" in err

    def test_port_held_by_an_old_server_of_ours(self, monkeypatch, capsys, tmp_path):
        port = free_port()
        args = fake_serve(tmp_path, "ok", port=port)
        assert run_main(monkeypatch, capsys, *args, "--name", "first")[0] == 0
        code, _, err = run_main(monkeypatch, capsys, *args, "--name", "second")
        assert code == 2
        assert "held by an old server of ours: deployment first" in err
        assert "dflashctl stop first" in err

    def test_same_name_replaces_the_previous_deployment(self, monkeypatch, capsys, tmp_path):
        args = fake_serve(tmp_path, "ok")
        code, first, _ = run_json(monkeypatch, capsys, *args)
        code, second, _ = run_json(monkeypatch, capsys, *args)
        assert code == 0 and second["pid"] != first["pid"]
        assert any("previous deployment" in n and "terminated" in n for n in second["notes"])
        assert not Path(f"/proc/{first['pid']}/cmdline").exists() or (
            "Z" in Path(f"/proc/{first['pid']}/stat").read_text()
        )

    def test_sigkill_after_the_grace(self, monkeypatch, capsys, tmp_path):
        code, _, _ = run_json(monkeypatch, capsys, *fake_serve(tmp_path, "ignore_term"))
        assert code == 0
        code, stopped, _ = run_json(monkeypatch, capsys, "stop", "--timeout", "1")
        assert code == 0 and stopped["stopped"][0]["outcome"] == "killed"

    def test_not_ready_in_time(self, monkeypatch, capsys, tmp_path):
        args = fake_serve(tmp_path, "never_ready", "--ready-timeout", "2")
        code, data, _ = run_json(monkeypatch, capsys, *args)
        assert code == 1
        assert "not ready after 2 s" in data["reason"] and "/health 503" in data["reason"]

    def test_sglang_ready_line(self, monkeypatch, capsys, tmp_path):
        py = make_python(tmp_path / "bin", "sglang")
        args = ["serve", "--engine", "sglang", "--model", "m", "--spec", "none"]
        args += ["--python", str(py), "--port", str(free_port()), "--detach"]
        code, data, err = run_json(monkeypatch, capsys, *args)
        assert code == 0, err
        assert data["engine"] == "sglang"

    def test_verify_config_refuses_a_broken_drafter(self, monkeypatch, capsys, tmp_path, pair):
        target, drafter = pair
        broken = tmp_path / "broken"
        broken.mkdir()
        cfg = json.loads((drafter / "config.json").read_text())
        cfg["dflash_config"]["target_layer_ids"] = [0, 5]  # the target has 2 layers
        (broken / "config.json").write_text(json.dumps(cfg))
        (broken / "model.safetensors").symlink_to(drafter / "model.safetensors")
        py = make_python(tmp_path / "bin", "ok")
        args = ["serve", "--model", str(target), "--drafter", str(broken), "--python", str(py)]
        args += ["--port", str(free_port()), "--detach"]
        code, data, _ = run_json(monkeypatch, capsys, *args)
        assert code == 1 and "fails verify-config" in data["reason"]
        assert any("target_layer_ids" in line for line in data["lines"])
        assert data["pid"] is None  # nothing was started
        code, data, _ = run_json(monkeypatch, capsys, *args, "--force")
        assert code == 0 and any("--force" in n for n in data["notes"])


@pytest.mark.usefixtures("stop_all")
class TestStopOnlyOurs:
    def _state(self, pid: int, starttime: int, port: int) -> None:
        state.save(
            state.Deployment(
                name="victim", engine="local", host=None, url=f"http://127.0.0.1:{port}",
                pid=pid, starttime=starttime, log="/dev/null", run_dir="/tmp", port=port,
                bind="127.0.0.1", model="m", model_id="m", drafter=None, cmd=["x"],
                started_at=state.now_iso(),
            )
        )  # fmt: skip

    def test_a_recycled_pid_is_left_alone(self, monkeypatch, capsys):
        other = subprocess.Popen(["sleep", "60"])
        try:
            self._state(other.pid, starttime=1, port=free_port())  # not its real start time
            code, data, _ = run_json(monkeypatch, capsys, "stop", "victim")
            assert code == 0
            assert data["stopped"][0]["outcome"] == "not ours"
            assert other.poll() is None  # still running
            assert state.load("victim") is None
        finally:
            other.kill()
            other.wait()

    def test_a_dead_pid_is_not_running(self, monkeypatch, capsys):
        gone = subprocess.Popen(["true"])
        gone.wait()
        self._state(gone.pid, starttime=1, port=free_port())
        code, data, _ = run_json(monkeypatch, capsys, "status")
        assert code == 1 and data["deployments"][0]["state"] == "down"
        code, data, _ = run_json(monkeypatch, capsys, "stop", "--all")
        assert code == 0 and data["stopped"][0]["outcome"] == "not running"

    def test_unknown_name(self, monkeypatch, capsys):
        code, _, err = run_main(monkeypatch, capsys, "stop", "nope")
        assert code == 2 and "no deployment named 'nope'" in err


@pytest.mark.usefixtures("stop_all")
def test_foreground_streams_and_ctrl_c_stops(tmp_path):
    """`dflashctl serve` without --detach: the log streams; SIGINT stops the server, exit 0."""
    py = make_python(tmp_path / "bin", "ok")
    port = free_port()
    args = [sys.executable, "-m", "dflashctl", "serve", "--model", fake_model(tmp_path)]
    args += ["--spec", "none", "--python", str(py), "--port", str(port)]
    # A test run started in the background (`./bin/test &`) inherits SIGINT ignored; Python then
    # installs no KeyboardInterrupt handler. Give the child the default, as a terminal would.
    proc = subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        read_until_startup(proc.stderr)
        deps = state.all_deployments()
        assert len(deps) == 1 and deps[0].port == port
        pid = deps[0].pid
        time.sleep(0.5)
        proc.send_signal(2)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert "stopped" in out
        assert state.all_deployments() == []
        assert not Path(f"/proc/{pid}/cmdline").exists() or (
            "Z" in Path(f"/proc/{pid}/stat").read_text()
        )
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.usefixtures("stop_all")
def test_real_bundled_engine(monkeypatch, capsys, pair):
    """The bundled engine on a tiny random pair: ready, answers a chat request, metrics, stop."""
    import httpx

    target, drafter = pair
    port = free_port()
    args = ["serve", "--model", str(target), "--drafter", str(drafter), "--port", str(port)]
    args += ["--detach", "--", "--log-interval", "1"]
    code, data, err = run_json(monkeypatch, capsys, *args)
    assert code == 0, (data, err)
    assert data["url"] == f"http://127.0.0.1:{port}" and data["engine"] == "local"
    r = httpx.post(
        f"{data['url']}/v1/chat/completions",
        json={"model": str(target), "messages": [{"role": "user", "content": "hi"}],
              "max_tokens": 8},
        timeout=60,
    )  # fmt: skip
    assert r.status_code == 200
    deadline = time.monotonic() + 20
    while "SpecDecoding metrics" not in Path(data["log"]).read_text():
        assert time.monotonic() < deadline
        time.sleep(0.3)
    code, report, _ = run_json(monkeypatch, capsys, "metrics", data["log"])
    assert report["windows"] >= 1
    code, stopped, _ = run_json(monkeypatch, capsys, "stop")
    assert code == 0 and stopped["stopped"][0]["port_free"] is True


def test_status_fits_80_columns_by_leaving_columns_out(monkeypatch, capsys, tmp_path):
    """At 80 columns the table keeps whole columns (name, state, url, …) instead of squeezing
    every header to `h…`, and says which ones it left out."""
    from dflashctl.console import out as console

    monkeypatch.setattr(console, "_width", 80)
    for i in range(2):
        state.save(
            state.Deployment(
                name=f"qwen3-8b-dflash-b16-tp2-{i}", engine="vllm", host=None,
                url=f"http://gpu-a100-07.example.internal:{8000 + i}", pid=999999, starttime=0,
                log=f"{tmp_path}/a/very/long/path/to/the/run/directory/server-{i}.log",
                run_dir=str(tmp_path), port=8000 + i, bind="0.0.0.0", model="m", model_id="m",
                drafter=None, cmd=[], started_at=state.now_iso(),
            )
        )  # fmt: skip
    _, out, _ = run_main(monkeypatch, capsys, "status")
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines), out
    header = next(line for line in lines if "name" in line)
    assert "…" not in header and "state" in header, out
    assert "qwen3-8b-dflash-b16-tp2-0" in out  # names whole, not folded
    assert "not shown at 80 columns:" in out and "log" in out.split("not shown")[1]
    assert "url" in header  # the columns kept are the ones needed most
    state.remove("qwen3-8b-dflash-b16-tp2-0")
    state.remove("qwen3-8b-dflash-b16-tp2-1")


def test_an_interpreter_without_the_engine_is_refused_before_the_launch(
    monkeypatch, capsys, tmp_path, pair
):
    """`pip install dflashctl` without the `engine` extra: serve says what is missing and how to
    install it, exit 2, before it starts anything (it used to launch, then report the engine's
    ModuleNotFoundError with a hint about flash-attn builds)."""
    import subprocess

    target, drafter = pair
    venv = tmp_path / "bare-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    args = ["serve", "--model", str(target), "--drafter", str(drafter), "--python",
            str(venv / "bin" / "python"), "--port", str(free_port()), "--detach"]  # fmt: skip
    code, data, err = run_json(monkeypatch, capsys, *args)
    assert code == 2, err
    assert (
        "the bundled engine needs torch, numpy, tokenizers, jinja2, fastapi, uvicorn"
        in (data["error"])
    )
    assert "pip install 'dflashctl[engine]'" in data["hint"]
    code, data, _ = run_json(monkeypatch, capsys, "status")
    assert code == 0 and data["deployments"] == []


def fake_vllm_python(root: Path, version: str) -> Path:
    """A Python whose installed distributions include vllm VERSION (its metadata only): what
    `serve` asks the engine's interpreter before a launch."""
    site = root / "site"
    meta = site / f"vllm-{version}.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
    py = root / "python"
    py.write_text(f'#!/bin/sh\nPYTHONPATH="{site}" exec "{sys.executable}" "$@"\n')
    py.chmod(0o755)
    return py


class TestKnownDefects:
    """The known-bad matrix through `serve`, against fake installs of each vLLM version."""

    def args(self, pair, py: Path, *extra: str) -> list[str]:
        target, drafter = pair
        return ["serve", "--engine", "vllm", "--model", str(target), "--drafter", str(drafter),
                "--python", str(py), "--port", str(free_port()), *extra]  # fmt: skip

    @pytest.mark.parametrize(
        "version, flags, want",
        [
            ("0.28.1", ["--enable-prefix-caching"], "vllm-prefix-caching-poisons-draft-context"),
            ("0.28.1", [], None),  # prefix caching off by default: nothing applies
            ("0.28.0", ["--speculative-config", '{"draft_sample_method":"probabilistic"}'],
             "vllm-probabilistic-draft-sampling-not-lossless"),
            ("0.34.0", ["--speculative-config", '{"draft_sample_method":"greedy"}'], None),
        ],
    )  # fmt: skip
    def test_dry_run_check_names_each_confirmed_defect(
        self, monkeypatch, capsys, tmp_path, pair, version, flags, want
    ):
        py = fake_vllm_python(tmp_path, version)
        extra = ["--", *flags] if flags else []
        code, plan, _ = run_json(
            monkeypatch, capsys, *self.args(pair, py, "--dry-run", "--check", *extra)
        )
        assert code == 0, plan
        assert plan["engine_version"] == version
        confirmed = [d["id"] for d in plan["known_defects"] if d["certainty"] == "confirmed"]
        assert confirmed == ([want] if want else [])

    def test_a_launch_into_a_confirmed_defect_is_refused_with_the_fix(
        self, monkeypatch, capsys, tmp_path, pair
    ):
        py = fake_vllm_python(tmp_path, "0.28.1")
        code, out, err = run_main(
            monkeypatch, capsys, *self.args(pair, py, "--detach", "--", "--enable-prefix-caching")
        )
        text = " ".join((out + err).split())
        assert code == 1 and "Traceback" not in text
        assert "vllm-prefix-caching-poisons-draft-context" in text
        assert "--no-enable-prefix-caching" in text and "--force" in text
        assert state.all_deployments() == []  # nothing started
