"""dflashctl doctor: real Python environments (this one, and the vLLM CPU venv when installed),
real dist-info directories, a real listening socket, a real process, a real local HTTP server as
the Hub. The one stand-in is `nvidia-smi`, which cannot exist on this GPU-less machine: a named
fake script on PATH prints the real output format of an A100 (SM80), an RTX 3090 (SM86) and a
B200 (SM100)."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from importlib.metadata import version as dist_version
from pathlib import Path

import pytest
from support.cli import run_main
from support.drafter_files import drafter_config, write_drafter

from dflashctl.cli import app
from dflashctl.commands.doctor.facts import parse_apps_csv, parse_gpu_csv
from dflashctl.commands.doctor.render import render_doctor
from dflashctl.commands.doctor.report import DoctorOptions, DoctorReport, GpuFacts
from dflashctl.commands.doctor.rows import Rows, rows_disk, rows_flash_attn
from dflashctl.commands.doctor.run import run_doctor
from dflashctl.report import Row

REPO = Path(__file__).resolve().parent.parent
VLLM_PY = REPO / ".venv-vllm" / "bin" / "python"
needs_vllm = pytest.mark.skipif(not VLLM_PY.exists(), reason="no .venv-vllm (bin/setup-vllm)")

# ---- the fake nvidia-smi (named stand-in: no NVIDIA driver can exist here) --------------------

HEADER = """Tue Dec  2 12:00:00 2026
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI {driver}              Driver Version: {driver}      CUDA Version: {cuda}     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
"""
GPUS = {
    "a100": ("0, NVIDIA A100-SXM4-80GB, 8.0, 550.54.15, 81920, 1, 81037\n", "550.54.15", "12.4"),
    "rtx3090": (
        "0, NVIDIA GeForce RTX 3090, 8.6, 550.54.15, 24576, 256, 24004\n",
        "550.54.15",
        "12.4",
    ),
    "b200": ("0, NVIDIA B200, 10.0, 570.86.15, 183359, 0, 182616\n", "570.86.15", "12.8"),
    "2xa100-busy": (
        "0, NVIDIA A100-SXM4-80GB, 8.0, 550.54.15, 81920, 40960, 40436\n"
        "1, NVIDIA A100-SXM4-80GB, 8.0, 550.54.15, 81920, 1, 81037\n",
        "550.54.15",
        "12.4",
    ),
}


def fake_nvidia_smi(tmp: Path, kind: str, monkeypatch: pytest.MonkeyPatch, apps: str = "") -> Path:
    rows, driver, cuda = GPUS[kind]
    d = tmp / "fake-bin"
    d.mkdir(exist_ok=True)
    (d / "gpu.csv").write_text(rows)
    (d / "apps.csv").write_text(apps)
    (d / "head.txt").write_text(HEADER.format(driver=driver, cuda=cuda))
    script = d / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        f'D="{d}"\n'
        'case "$*" in\n'
        '  *--query-gpu=*) cat "$D/gpu.csv" ;;\n'
        '  *--query-compute-apps=*) cat "$D/apps.csv" ;;\n'
        '  *) cat "$D/head.txt" ;;\n'
        "esac\n"
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{d}{os.pathsep}{os.environ['PATH']}")
    return d


# ---- real dist-info directories in a temp site dir on PYTHONPATH ------------------------------


def add_dist(site: Path, name: str, version: str, files: dict[str, str] | None = None) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    record = []
    for rel, text in (files or {}).items():
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        record.append(f"{rel},,")
    record.append(f"{info.name}/METADATA,,")
    (info / "RECORD").write_text("\n".join(record) + "\n")


FA2 = {"flash_attn/__init__.py": "", "flash_attn/flash_attn_interface.py": ""}
FA4 = {"flash_attn/cute/__init__.py": "", "flash_attn/__init__.py": ""}


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "site"
    d.mkdir()
    monkeypatch.setenv("PYTHONPATH", str(d))
    return d


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    # Hub tests opt back in; everything else stays off the network.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for var in ("VLLM_USE_V2_MODEL_RUNNER", "DFLASHCTL_VLLM_KNORM_FIX", "DFLASHCTL_VLLM_PYTHON"):
        monkeypatch.delenv(var, raising=False)


def doctor(**kw) -> DoctorReport:
    kw.setdefault("hub_timeout", 2.0)
    return run_doctor(DoctorOptions(**kw))


def row(report: DoctorReport, check_id: str) -> Row:
    found = [c for c in report.checks if c.id == check_id]
    assert found, f"no {check_id} row in {[c.id for c in report.checks]}"
    return found[0]


# ---- the real environment ---------------------------------------------------------------------


def test_this_machine_for_real_no_gpu_and_its_own_python():
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has nvidia-smi")
    r = doctor(engine="local")
    assert row(r, "python").found.startswith(sys.executable)
    gpu = row(r, "gpu")
    assert gpu.status == "ok" and "nvidia-smi: not found" in gpu.found
    torch = row(r, "torch")
    assert torch.found.startswith(dist_version("torch"))
    if "+cpu" in dist_version("torch"):
        assert torch.status == "ok" and "CPU build" in torch.found
    assert row(r, "hub").found.startswith("HF_HUB_OFFLINE set")
    assert r.engine == "local" and r.defects == []


def test_no_gpu_is_an_error_for_a_gpu_engine():
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has nvidia-smi")
    r = doctor(engine="sglang")
    assert row(r, "gpu").status == "error"
    assert row(r, "engine").status == "error"  # no SGLang in this environment
    assert "not installed" in row(r, "engine").found
    assert not r.ok


# ---- GPUs through the fake nvidia-smi ---------------------------------------------------------


def test_parse_real_format_nvidia_smi_output():
    gpus = parse_gpu_csv(GPUS["2xa100-busy"][0] + GPUS["rtx3090"][0] + GPUS["b200"][0])
    assert [g.sm for g in gpus] == [80, 80, 86, 100]
    assert gpus[0].name == "NVIDIA A100-SXM4-80GB" and gpus[0].memory_free_mib == 40436
    assert parse_gpu_csv("0, Some GPU, [N/A], [N/A], [N/A], [N/A], [N/A]\n")[0].sm is None
    assert parse_apps_csv("4242, python3, 40950\n") == [
        {"pid": 4242, "name": "python3", "used_mib": 40950}
    ]


@pytest.mark.parametrize(
    ("kind", "sm", "cuda"), [("a100", 80, "12.4"), ("rtx3090", 86, "12.4"), ("b200", 100, "12.8")]
)
def test_gpus_driver_and_a_cpu_torch(tmp_path, monkeypatch, kind: str, sm: int, cuda: str):
    fake_nvidia_smi(tmp_path, kind, monkeypatch)
    r = doctor(engine="local")
    assert f"SM{sm}" in row(r, "gpu.0").found
    assert row(r, "driver").found.endswith(f"CUDA {cuda} (the newest the driver supports)")
    if "+cpu" in dist_version("torch"):
        assert row(r, "torch").status == "warning"
        assert "cannot use the GPUs" in row(r, "torch").found


def test_busy_gpu_memory_names_the_holder(tmp_path, monkeypatch):
    fake_nvidia_smi(tmp_path, "2xa100-busy", monkeypatch, apps="4242, python3, 40950\n")
    r = doctor(engine="local")
    busy, free = row(r, "gpu_memory.0"), row(r, "gpu_memory.1")
    assert busy.status == "warning" and "pid 4242 python3 (40950 MiB)" in busy.found
    assert free.status == "ok"


@pytest.mark.parametrize(
    ("driver_cuda", "status", "text"),
    [
        ("12.8", "ok", "driver supports CUDA 12.8"),
        ("12.4", "warning", "minor-version"),
        ("11.8", "error", "at most"),
    ],
)
def test_torch_cuda_build_against_the_driver(
    site, tmp_path, monkeypatch, driver_cuda, status, text
):
    # A torch whose version.py says CUDA 12.8 (doctor reads the file, never imports torch).
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text("")
    (site / "torch" / "version.py").write_text(
        "from typing import Optional\n__version__ = '2.13.0+cu128'\ncuda: Optional[str] = '12.8'\n"
    )
    rows_, drv, _ = GPUS["a100"]
    GPUS["custom"] = (rows_, drv, driver_cuda)
    try:
        fake_nvidia_smi(tmp_path, "custom", monkeypatch)
        r = doctor(engine="local")
    finally:
        GPUS.pop("custom")
    t = row(r, "torch")
    assert t.status == status and text in t.found
    assert t.found.startswith("2.13.0+cu128 (CUDA 12.8 build)")


# ---- flash-attn --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "dists", "status", "text"),
    [
        ("rtx3090", [("flash-attn", "2.8.3", FA2)], "ok", "flash-attn 2.8.3 fits SM86"),
        ("rtx3090", [("flash-attn-4", "4.0.0b18", FA4)], "error", "flash-attn-4 4.0.0b18 on SM86"),
        ("a100", [("flash-attn", "3.0.0", FA2)], "error", "on SM80"),
        ("b200", [("flash-attn-4", "4.0.0b18", FA4)], "ok", "fits SM100"),
    ],
)
def test_flash_attn_fit_to_the_gpu(site, tmp_path, monkeypatch, kind, dists, status, text):
    for name, ver, files in dists:
        add_dist(site, name, ver, files)
    fake_nvidia_smi(tmp_path, kind, monkeypatch)
    fa = row(doctor(engine="local"), "flash-attn")
    assert fa.status == status and text in fa.found
    if status == "error":
        assert "flash-attn<3" in (fa.hint or "")


def test_two_distributions_claiming_flash_attn(site, tmp_path, monkeypatch):
    add_dist(site, "flash-attn", "2.8.3", FA2)
    add_dist(site, "flash-attn-4", "4.0.0b18", {"flash_attn/cute/__init__.py": ""})
    fake_nvidia_smi(tmp_path, "b200", monkeypatch)
    fa = row(doctor(engine="local"), "flash-attn")
    assert fa.status == "error"
    assert "flash-attn and flash-attn-4 both install the flash_attn package" in fa.found


def test_flash_attn_without_gpu_and_layout_judgement():
    rows = Rows()
    facts = {"distributions": {"flash-attn": "2.8.3"}, "flash_attn_claims": ["flash-attn"]}
    rows_flash_attn(rows, facts, GpuFacts(False, "nvidia-smi: not found"))
    assert rows.checks[0].status == "ok" and "no GPU to check it against" in rows.checks[0].found


# ---- engines and known defects -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("engine", "name", "ver", "status"),
    [
        ("vllm", "vllm", "0.19.1", "error"),
        ("vllm", "vllm", "0.20.0", "ok"),
        ("sglang", "sglang", "0.5.10", "error"),
        ("sglang", "sglang", "0.5.11", "ok"),
    ],
)
def test_engine_versions_that_support_dflash(site, engine, name, ver, status):
    add_dist(site, name, ver)
    r = doctor(engine=engine)
    e = row(r, "engine")
    assert e.status == status, e.found
    if status == "error":
        assert "no DFlash before" in e.found


def test_v2_runner_setting_known_to_zero_acceptance(site, monkeypatch):
    add_dist(site, "vllm", "0.32.0")  # a GPU build's metadata
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "1")
    r = doctor(engine="vllm")
    assert row(r, "runner").found.startswith("V2: VLLM_USE_V2_MODEL_RUNNER=1")
    d = row(r, "defect:vllm-v2-runner-zero-acceptance")
    assert d.status == "warning" and "vllm-project/vllm#49559" in " ".join(
        r.defects[0].defect.sources
    )


def test_sglang_last_layer_with_model_and_drafter(site, tmp_path):
    add_dist(site, "sglang", "0.5.11")
    cfg = drafter_config(layers=5)
    cfg["dflash_config"]["target_layer_ids"] = [1, 9, 17, 25, 35]
    d = write_drafter(tmp_path / "drafter", None, layers=5, cfg=cfg)
    model = tmp_path / "target"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"num_hidden_layers": 36, "hidden_size": 128}))
    r = doctor(engine="sglang", drafter=str(d), model=str(model))
    assert row(r, "defect:sglang-last-layer-capture").status == "error"
    assert "36 layers" in row(r, "drafter").found
    assert "--speculative-num-draft-tokens = 8" in row(r, "spec_tokens").found


@pytest.mark.parametrize(
    ("k", "status", "text"),
    [(7, "ok", "= block_size 8 − 1"), (3, "ok", "works"), (15, "warning", "never")],
)
def test_num_speculative_tokens_against_block_size(tmp_path, k, status, text):
    d = write_drafter(tmp_path / "d", [1.0, 1.0])
    spec = row(doctor(engine="local", drafter=str(d), num_speculative_tokens=k), "spec_tokens")
    assert spec.status == status and text in spec.found


def test_drafter_without_block_size(tmp_path):
    cfg = drafter_config()
    del cfg["block_size"]
    d = write_drafter(tmp_path / "d", [1.0, 1.0], cfg=cfg)
    assert row(doctor(engine="local", drafter=str(d)), "spec_tokens").status == "warning"


# The launch is named: without it doctor judges the flags of a vLLM running on this host (one
# another test started, with prefix caching on, would add its defect to these reports).
LAUNCH = ["--no-enable-prefix-caching"]


@needs_vllm
@pytest.mark.vllm
def test_vllm_cpu_venv_names_the_k_norm_defect(tmp_path, monkeypatch):
    d = write_drafter(tmp_path / "d", [0.96875, 1.5])
    monkeypatch.setenv("DFLASHCTL_VLLM_PYTHON", str(VLLM_PY))
    r = doctor(drafter=str(d), launch_args=LAUNCH)
    assert r.engine == "vllm" and "DFLASHCTL_VLLM_PYTHON" in r.engine_why
    assert "0.32.0+cpu (CPU build)" in row(r, "engine").found
    assert row(r, "gpu").status == "ok"  # the CPU build needs no GPU
    k = row(r, "defect:vllm-cpu-context-k-norm")
    assert k.status == "warning" and k.found.startswith("confirmed:")
    assert "differ between layers" in k.found
    assert [m.defect.id for m in r.defects] == ["vllm-cpu-context-k-norm"]
    assert not k.failed  # a warning: shown, never fails
    assert r.ok == (not any(c.status == "error" for c in r.checks))


@needs_vllm
@pytest.mark.vllm
def test_vllm_cpu_venv_equal_k_norm_is_not_the_defect(tmp_path):
    d = write_drafter(tmp_path / "d", [1.5, 1.5])
    r = doctor(engine="vllm", python=str(VLLM_PY), drafter=str(d), launch_args=LAUNCH)
    assert r.defects == []
    defects = row(r, "defects")
    assert defects.found.startswith("0 known defect(s) apply to vllm 0.32.0+cpu")
    # what rules each other entry out is said, not only counted
    ruled = {x["id"]: x["by"] for x in defects.details["ruled_out"]}
    assert ruled["vllm-v2-runner-zero-acceptance"] == "runner"  # the CPU build runs V1
    assert (
        "vllm-v2-runner-zero-acceptance (runner v1: the CPU build always runs V1" in defects.found
    )


@needs_vllm
@pytest.mark.vllm
def test_vllm_cpu_venv_plugin_switch_mitigates(tmp_path, monkeypatch):
    d = write_drafter(tmp_path / "d", [0.96875, 1.5])
    monkeypatch.setenv("DFLASHCTL_VLLM_KNORM_FIX", "1")
    r = doctor(engine="vllm", python=str(VLLM_PY), drafter=str(d), launch_args=LAUNCH)
    k = row(r, "defect:vllm-cpu-context-k-norm")
    assert k.status == "ok" and "mitigated (dflashctl-vllm-plugin installed" in k.found


@needs_vllm
@pytest.mark.vllm
def test_vllm_cpu_venv_mixed_drafter_needs_v2(tmp_path, monkeypatch):
    cfg = drafter_config(
        layer_types=["sliding_attention", "full_attention"],
        sliding_window=64,
        use_sliding_window=True,
    )
    d = write_drafter(tmp_path / "d", [1.0, 1.0], cfg=cfg)
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "1")
    r = doctor(engine="vllm", python=str(VLLM_PY), drafter=str(d), launch_args=LAUNCH)
    assert "is ignored there" in row(r, "runner").found
    assert row(r, "defect:vllm-v1-mixed-sliding-full").status == "error"
    assert row(r, "drafter").status == "ok"  # the V1 refusal is reported once, as the defect


# ---- processes, port, disk, Hub, token ---------------------------------------------------------


@pytest.fixture
def fake_engine_process() -> Iterator[subprocess.Popen]:
    p = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)", "vllm", "serve", "/models/x"]
    )
    try:
        yield p
    finally:
        p.terminate()
        p.wait(10)


def test_leftover_engine_process_is_listed_and_left_alone(fake_engine_process):
    r = doctor(engine="local")
    procs = row(r, "processes")
    assert procs.status == "warning"
    assert f"pid {fake_engine_process.pid} (vllm)" in procs.found
    assert "never kills" in (procs.hint or "")
    assert fake_engine_process.poll() is None  # still running


def test_port_in_use_by_a_real_listening_socket():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    port = s.getsockname()[1]
    try:
        r = doctor(engine="local", port=port)
        assert row(r, "port").status == "error" and "in use" in row(r, "port").found
    finally:
        s.close()
    assert row(doctor(engine="local", port=port), "port").status == "ok"


def test_disk_rows():
    rows = Rows()
    facts = {
        "paths": [
            {
                "path": "/m",
                "exists": True,
                "is_dir": True,
                "size_bytes": 3_500_000,
                "free_bytes": 5 << 30,
            },
            {
                "path": "/d",
                "exists": True,
                "is_dir": True,
                "size_bytes": 660_000,
                "free_bytes": 50 << 30,
            },
        ]
    }
    rows_disk(rows, facts, ["model", "drafter"])
    assert [c.status for c in rows.checks] == ["warning", "ok"]
    assert rows.checks[0].found == "/m: 3.5 MB on disk; 5.0 GiB free on its filesystem"


class _Hub(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"[]")

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def hub() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_hub_reachable_unreachable_and_token_never_printed(hub, monkeypatch, runner):
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_ENDPOINT", hub)
    monkeypatch.setenv("HF_TOKEN", "hf_SECRETSECRETSECRET")
    result = runner.invoke(app, ["doctor", "--engine", "local", "--json"])
    data = json.loads(result.stdout)
    hub_row = next(c for c in data["checks"] if c["id"] == "hub")
    assert hub_row["status"] == "ok" and "answered HTTP 200" in hub_row["found"]
    token = next(c for c in data["checks"] if c["id"] == "hf_token")
    assert token["found"] == "present (from HF_TOKEN)"
    assert "SECRET" not in result.stdout
    human = runner.invoke(app, ["doctor", "--engine", "local"])
    assert "SECRET" not in human.output and "present (from HF_TOKEN)" in human.output

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{closed}")
    unreachable = row(doctor(engine="local", hub_timeout=1.0), "hub")
    assert unreachable.status == "warning" and "unreachable" in unreachable.found


def test_hub_server_error_is_a_warning(hub, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_ENDPOINT", hub)
    _Hub.status = 503
    try:
        h = row(doctor(engine="local"), "hub")
    finally:
        _Hub.status = 200
    assert h.status == "warning" and "HTTP 503" in h.found


# ---- the command: JSON, exit codes, bad input --------------------------------------------------


def test_cli_json_and_exit_code(runner, tmp_path):
    d = write_drafter(tmp_path / "d", [1.0, 1.0])
    result = runner.invoke(app, ["doctor", "--engine", "local", "--drafter", str(d), "--json"])
    data = json.loads(result.stdout)
    assert set(data) >= {"ok", "host", "engine", "checks", "defects", "counts", "facts"}
    assert data["host"] == "local" and data["engine"] == "local"
    assert all(c["status"] in ("ok", "warning", "error", "skip") for c in data["checks"])
    for c in data["checks"]:
        assert set(c) == {"id", "name", "status", "found", "fix", "details", "hint", "level"}
        assert c["hint"] == c["fix"]
        assert c["level"] == {"error": "fail"}.get(c["status"], c["status"])
    assert data["ok"] == (not any(c["status"] == "error" for c in data["checks"]))
    assert result.exit_code == (0 if data["ok"] else 1)


def report_of(*statuses: str) -> DoctorReport:
    rows = [Row(f"row {i}", s, "found", hint="do this", id=f"r{i}") for i, s in enumerate(statuses)]
    return DoctorReport("local", "local", "--engine", "python3", rows, [], {})


def test_warnings_never_fail_only_errors_do(capsys):
    warned = report_of("ok", "warning", "skip")
    assert warned.ok and warned.counts == {"ok": 1, "warning": 1, "error": 0, "skip": 1}
    assert [c["level"] for c in warned.to_json()["checks"]] == ["ok", "warning", "skip"]
    render_doctor(warned)
    out = capsys.readouterr().out
    assert "OK" in out and "1 warning(s)" in out and "PROBLEMS" not in out
    failed = report_of("ok", "warning", "error")
    assert not failed.ok and failed.to_json()["checks"][2]["level"] == "fail"
    render_doctor(failed)
    assert "PROBLEMS: 1 error(s), 1 warning(s)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--engine", "trt"], "--engine 'trt': use one of vllm, sglang, llama.cpp, local"),
        (["--port", "70000"], "not a TCP port"),
        (["--python", "/no/such/python"], "not an executable"),
        (["--drafter", "/no/such/dir"], "not found on local"),
        (["-k", "0"], "at least 1"),
        (["--hub-timeout", "0"], "must be positive"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(monkeypatch, capsys, args, message):
    code, out, err = run_main(monkeypatch, capsys, "doctor", *args)
    assert code == 2 and out == ""
    assert err.startswith("Error: ") and message in err and "Traceback" not in err


def test_cli_truncated_drafter_config_through_the_real_entry_point(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "config.json").write_text('{"num_hidden_layers": 2,')
    p = subprocess.run(
        [sys.executable, "-m", "dflashctl", "doctor", "--drafter", str(d)],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=60,
    )
    assert p.returncode == 2
    assert p.stderr.startswith("Error: ") and "truncated JSON" in p.stderr
    assert "Traceback" not in p.stderr


def test_host_goes_through_the_ssh_layer(monkeypatch, capsys):
    # An unresolvable host: the SSH layer's one-line error (or, without it, "not built"), exit 2.
    code, out, err = run_main(monkeypatch, capsys, "doctor", "--host", "nosuchhost.invalid")
    assert code == 2 and out == ""
    assert err.startswith("Error: ") and "Traceback" not in err
    assert "nosuchhost.invalid" in err or "not built" in err


# ---- the engine's launch flags (issue 28) -------------------------------------------------------

PREFIX = "vllm-prefix-caching-poisons-draft-context"
DFLASH_SPEC = ["--speculative-config", '{"method": "dflash", "model": "/models/d"}']


def certainty(report: DoctorReport, defect_id: str) -> str | None:
    return next((m.certainty for m in report.defects if m.defect.id == defect_id), None)


def test_flags_after_the_double_dash_settle_a_flag_defect(site):
    add_dist(site, "vllm", "0.28.1")  # the version the prefix-caching defect was seen on
    unknown = doctor(engine="vllm")
    # without flags the launch is read from this host's one running vLLM, if there is one (a
    # developer's server, or the vLLM tier of a concurrent run): then from it, else unknown
    running = [p for p in unknown.facts.get("processes") or []
               if p.get("engine") == "vllm" and p.get("argv")]  # fmt: skip
    if len(running) == 1:
        assert f"(from the running vllm (pid {running[0]['pid']}))" in row(unknown, "launch").found
    else:
        assert row(unknown, "launch").status == "skip"
        assert certainty(unknown, PREFIX) in (None, "possible")
    on = doctor(engine="vllm", launch_args=DFLASH_SPEC)  # vLLM's default: prefix caching on
    launch = row(on, "launch")
    assert launch.status == "ok" and "prefix caching True" in launch.found
    assert "method dflash" in launch.found and "(from the flags after --)" in launch.found
    assert certainty(on, PREFIX) == "confirmed"
    off = doctor(engine="vllm", launch_args=[*DFLASH_SPEC, "--no-enable-prefix-caching"])
    assert certainty(off, PREFIX) is None
    assert "prefix caching False" in row(off, "launch").found


def test_the_running_engines_own_flags_are_read(site):
    add_dist(site, "vllm", "0.28.1")
    port = 18477
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "vllm", "serve",
                          "/models/x", "--port", str(port), *DFLASH_SPEC])  # fmt: skip
    try:
        r = doctor(engine="vllm", port=port)
        launch = row(r, "launch")
        assert f"(from the running vllm (pid {p.pid}))" in launch.found, launch.found
        assert certainty(r, PREFIX) == "confirmed"
    finally:
        p.terminate()
        p.wait(10)


def test_launch_flags_on_the_command_line(site, monkeypatch, capsys):
    add_dist(site, "vllm", "0.28.1")
    code, out, err = run_main(monkeypatch, capsys, "doctor", "--engine", "vllm", "--json", "--",
                              *DFLASH_SPEC, "--enable-prefix-caching")  # fmt: skip
    data = json.loads(out)
    launch = next(c for c in data["checks"] if c.get("id") == "launch")
    assert "prefix caching True" in launch["found"], (code, err)
