"""hosts/facts.py — gathers the host facts `dflashctl doctor` judges; standard library only.

Not imported by dflashctl: `doctor.py` sends this file's text to the engine's Python as
`python -c SOURCE ARGS_JSON`, on this machine or on a remote host, and reads one JSON object
from stdout. So it must run on any Python >= 3.8 with nothing installed, import nothing heavy
(no torch: the torch CUDA build is read from `torch/version.py`), never print a secret (the Hugging
Face token is reported as present or absent, with where it came from) and never change anything.

ARGS_JSON: {"ports": [int], "paths": [str], "hub": {"timeout": float}|null, "k_norm": str|null};
the path "@hub-cache" stands for the Hugging Face hub cache directory of this host; "k_norm" is a
drafter directory whose `layers.N.self_attn.k_norm.weight` tensors are read (only their bytes,
from the safetensors header's offsets) for hosts where dflashctl itself does not run.
"""

import contextlib
import importlib.metadata as md
import importlib.util
import json
import os
import platform
import re
import shutil
import socket
import struct
import sys
import time
import urllib.error
import urllib.request

ENV_KEYS = (
    "HF_ENDPOINT",
    "HF_HOME",
    "HF_HUB_CACHE",
    "HF_HUB_OFFLINE",
    "VLLM_USE_V2_MODEL_RUNNER",
    "DFLASHCTL_VLLM_KNORM_FIX",
    "CUDA_VISIBLE_DEVICES",
)
ENGINE_PATTERNS = (
    ("vllm", re.compile(r"(^|[\s/])vllm\s+serve(\s|$)|\bvllm\.entrypoints\b")),
    ("sglang", re.compile(r"\bsglang\.launch_server\b|(^|[\s/])sglang\s+serve(\s|$)")),
    ("dflashctl", re.compile(r"(^|[\s/])dflashctl\s+serve(\s|$)|\bdflashctl\.engine\b")),
    ("llama.cpp", re.compile(r"(^|[\s/])llama-server(\s|$)")),
)
MAX_WALK_FILES = 20000
KNORM_RE = re.compile(r"(?:^|\.)layers\.(\d+)\.self_attn\.k_norm\.weight$")
MAX_HEADER = 100000000
MAX_KNORM = 65536


def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def distributions():
    out = {}  # type: dict
    for d in md.distributions():
        meta = d.metadata
        name = meta["Name"] if meta is not None and "Name" in meta else None
        if name:
            out.setdefault(norm(name), d.version)
    return out


def claims(package):
    try:
        return sorted({norm(n) for n in md.packages_distributions().get(package, [])})
    except Exception:
        return []


def package_dir(name):
    try:
        spec = importlib.util.find_spec(name)
    except Exception:
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return next(iter(spec.submodule_search_locations))


def torch_facts():
    where = package_dir("torch")
    if where is None:
        return None
    info = {"path": where, "version": None, "cuda": None, "hip": None}
    try:
        with open(os.path.join(where, "version.py"), encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return info
    for key in ("__version__", "cuda", "hip"):
        m = re.search(
            r"^" + key + r"\s*(?::[^=\n]*)?=\s*(?:'([^']*)'|\"([^\"]*)\"|None)", text, re.M
        )
        if m:
            info[key.strip("_")] = m.group(1) or m.group(2)
    return info


def flash_attn_facts():
    where = package_dir("flash_attn")
    if where is None:
        return None
    return {
        "path": where,
        "has_flash_attn_func": os.path.exists(os.path.join(where, "flash_attn_interface.py")),
        "has_cute": os.path.isdir(os.path.join(where, "cute")),
    }


def hf_token():
    for key in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        if os.environ.get(key, "").strip():
            return {"present": True, "source": key}
    path = os.environ.get("HF_TOKEN_PATH")
    if not path:
        home = os.environ.get("HF_HOME") or os.path.join(
            os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface"
        )
        path = os.path.join(home, "token")
    try:
        with open(path, encoding="utf-8") as f:
            if f.read().strip():
                return {"present": True, "source": path}
    except OSError:
        pass
    return {"present": False, "source": None}


def processes():
    me = {os.getpid(), os.getppid()}
    found = []
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None
    for pid in sorted(pids):
        if pid in me:
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                raw = f.read(8192)
        except OSError:
            continue
        cmd = raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()
        for engine, pattern in ENGINE_PATTERNS:
            if pattern.search(cmd):
                argv = [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a][:400]
                found.append({"pid": pid, "engine": engine, "cmdline": cmd[:300], "argv": argv})
                break
    return found


def port_facts(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("0.0.0.0", port))
        return {"port": port, "in_use": False, "error": None}
    except OSError as e:
        in_use = e.errno in (98, 48, 10048)  # EADDRINUSE on Linux, macOS, Windows
        return {"port": port, "in_use": in_use, "error": None if in_use else str(e)}
    finally:
        s.close()


def hub_cache():
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface"
    )
    return os.path.join(home, "hub")


def path_facts(path):
    if path == "@hub-cache":
        path = hub_cache()
    path = os.path.abspath(os.path.expanduser(path))
    info = {"path": path, "exists": os.path.exists(path), "is_dir": os.path.isdir(path)}
    probe = path
    while not os.path.exists(probe) and os.path.dirname(probe) != probe:
        probe = os.path.dirname(probe)
    try:
        usage = shutil.disk_usage(probe)
        info.update(free_bytes=usage.free, total_bytes=usage.total, fs_path=probe)
    except OSError as e:
        info["error"] = str(e)
    if info["is_dir"]:
        size, count, complete = 0, 0, True
        for root, _dirs, files in os.walk(path):
            for name in files:
                count += 1
                if count > MAX_WALK_FILES:
                    complete = False
                    break
                with contextlib.suppress(OSError):
                    size += os.stat(os.path.join(root, name)).st_size
            if not complete:
                break
        info.update(size_bytes=size, size_complete=complete)
    elif info["exists"]:
        info["size_bytes"] = os.path.getsize(path)
    return info


def hub_facts(timeout):
    endpoint = (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")
    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
    info = {"endpoint": endpoint, "offline": offline, "reachable": None, "status": None}
    if offline:
        return info
    start = time.monotonic()
    try:
        req = urllib.request.Request(endpoint + "/api/models?limit=1", method="GET")
        with urllib.request.urlopen(req, timeout=timeout) as r:
            info.update(reachable=True, status=r.status)
    except urllib.error.HTTPError as e:
        info.update(reachable=True, status=e.code)
    except Exception as e:
        reason = getattr(e, "reason", None) or e
        info.update(reachable=False, error=type(reason).__name__ + ": " + str(reason))
    info["seconds"] = round(time.monotonic() - start, 3)
    return info


def _decode(raw, dtype):
    n = len(raw) // 2
    if dtype == "BF16":
        halves = struct.unpack(f"<{n}H", raw[: 2 * n])
        return [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in halves]
    if dtype == "F16":
        return list(struct.unpack(f"<{n}e", raw[: 2 * n]))
    if dtype == "F32":
        return list(struct.unpack(f"<{len(raw) // 4}f", raw))
    raise ValueError("k_norm weights in " + dtype + " are not read here")


def k_norm_facts(directory):
    """{"dtype", "layers": {index: [values]}, "files"} or {"error": why}."""
    try:
        index = os.path.join(directory, "model.safetensors.index.json")
        if os.path.isfile(index):
            with open(index, encoding="utf-8") as f:
                weight_map = json.load(f)["weight_map"]
            files = sorted({v for k, v in weight_map.items() if KNORM_RE.search(k)})
        elif os.path.isfile(os.path.join(directory, "model.safetensors")):
            files = ["model.safetensors"]
        else:
            files = sorted(n for n in os.listdir(directory) if n.endswith(".safetensors"))[:1]
        layers, dtypes = {}, set()
        for name in files:
            path = os.path.join(directory, os.path.basename(name))
            with open(path, "rb") as f:
                (n,) = struct.unpack("<Q", f.read(8))
                if n > MAX_HEADER:
                    raise ValueError(path + ": safetensors header too large")
                header = json.loads(f.read(n))
                for tensor, info in sorted(header.items()):
                    m = KNORM_RE.search(tensor)
                    if not m or not isinstance(info, dict):
                        continue
                    begin, end = info["data_offsets"]
                    if end - begin > 4 * MAX_KNORM or end < begin:
                        raise ValueError(tensor + ": too large for a k_norm weight")
                    f.seek(8 + n + begin)
                    layers[m.group(1)] = _decode(f.read(end - begin), info["dtype"])
                    dtypes.add(info["dtype"])
        return {"dtype": "/".join(sorted(dtypes)) or None, "layers": layers, "files": files}
    except Exception as e:
        return {"error": type(e).__name__ + ": " + str(e)}


def main():
    args = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    facts = {
        "python": {"executable": sys.executable, "version": platform.python_version()},
        "platform": {"system": platform.system(), "machine": platform.machine()},
        "hostname": socket.gethostname(),
        "env": {k: os.environ[k] for k in ENV_KEYS if k in os.environ},
        "hf_token": hf_token(),
        "distributions": distributions(),
        "flash_attn_claims": claims("flash_attn"),
        "flash_attn": flash_attn_facts(),
        "torch": torch_facts(),
        "processes": processes(),
        "ports": [port_facts(int(p)) for p in args.get("ports", [])],
        "paths": [path_facts(p) for p in args.get("paths", [])],
        "hub": hub_facts(float(args["hub"]["timeout"])) if args.get("hub") else None,
        "k_norm": k_norm_facts(args["k_norm"]) if args.get("k_norm") else None,
    }
    sys.stdout.write(json.dumps(facts))


if __name__ == "__main__":
    main()
