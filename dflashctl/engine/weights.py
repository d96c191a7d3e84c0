"""Load Hugging Face checkpoints (config.json + safetensors, one file or shards) into the engine.

Names map almost one to one: the target drops HF's leading `model.`; the drafter's checkpoint
names are already ours. Models are built on the meta device and filled with `assign=True`, so no
weights are allocated twice. Every key and shape is checked (nanoGPT's `from_pretrained` habit).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

from dflashctl.drafter.config import read_json_object
from dflashctl.errors import EngineError


def safetensors_files(model_dir: Path) -> list[Path]:
    index = model_dir / "model.safetensors.index.json"
    if index.exists():
        weight_map = read_json_object(index, "safetensors index").get("weight_map")
        if not isinstance(weight_map, dict):
            raise EngineError(f"{index}: no weight_map")
        files = sorted({model_dir / str(f) for f in weight_map.values()})
    else:
        files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise EngineError(f"no safetensors weights in {model_dir}")
    missing = [f for f in files if not f.exists()]
    if missing:
        raise EngineError(f"missing weight shard {missing[0]}")
    return files


def read_state(model_dir: Path) -> dict[str, torch.Tensor]:
    """Every tensor of the checkpoint, in host memory (small models, tests, training)."""
    return dict(iter_state(model_dir))


def iter_state(model_dir: Path, device: str = "cpu") -> Iterator[tuple[str, torch.Tensor]]:
    """The checkpoint's tensors one at a time, read straight onto `device` (a bf16 checkpoint
    goes to the GPU without a host copy of the whole model)."""
    from safetensors import safe_open

    for f in safetensors_files(model_dir):
        try:
            with safe_open(str(f), framework="pt", device=str(device)) as st:
                for name in st.keys():  # noqa: SIM118 (safe_open is not a mapping)
                    yield name, st.get_tensor(name)
        except EngineError:
            raise
        except Exception as e:  # safetensors raises its own error types
            raise EngineError(f"cannot read {f}: {e}") from e


def checkpoint_bytes(model_dir: Path, dtype: torch.dtype) -> int:
    """Bytes the weights take once loaded as `dtype`, from the safetensors headers alone."""
    from safetensors import safe_open

    total = 0
    item = torch.empty(0, dtype=dtype).element_size()
    for f in safetensors_files(model_dir):
        try:
            with safe_open(str(f), framework="pt") as st:
                for name in st.keys():  # noqa: SIM118
                    numel = 1
                    for d in st.get_slice(name).get_shape():
                        numel *= d
                    total += numel * item
        except Exception as e:
            raise EngineError(f"cannot read {f}: {e}") from e
    return total


def load_config(model_dir: Path) -> dict[str, Any]:
    return read_json_object(model_dir / "config.json", "model config")


def load_into(
    model: nn.Module,
    state: dict[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]],
    *,
    rename: dict[str, str] | None = None,
    ignore: tuple[str, ...] = (),
    dtype: torch.dtype,
    device: torch.device | str,
) -> None:
    """Fill a meta-device `model` from `state`: keys renamed by prefix, shapes asserted."""
    wanted = {k: v for k, v in model.state_dict().items()}
    loaded: dict[str, torch.Tensor] = {}
    for name, tensor in state.items() if isinstance(state, dict) else state:
        key = name
        for old, new in (rename or {}).items():
            if key.startswith(old):
                key = new + key[len(old) :]
        if any(key.startswith(p) for p in ignore):
            continue
        if key not in wanted:
            raise EngineError(f"unexpected weight {name!r} in checkpoint")
        if tuple(tensor.shape) != tuple(wanted[key].shape):
            raise EngineError(
                f"weight {name!r} has shape {list(tensor.shape)}, the config implies "
                f"{list(wanted[key].shape)}",
                "the config.json does not match the weights: check with dflashctl verify-config",
            )
        loaded[key] = tensor.to(device=device, dtype=dtype)
    tied = getattr(model, "args", None) is not None and getattr(
        model.args, "tie_word_embeddings", False
    )
    if tied:
        wanted.pop("lm_head.weight", None)
    missing = sorted(k for k in wanted if k not in loaded)
    if missing:
        raise EngineError(f"checkpoint lacks {len(missing)} weights, e.g. {missing[0]!r}")
    model.load_state_dict(loaded, strict=False, assign=True)
    if tied:
        model.lm_head.weight = model.embed_tokens.weight  # type: ignore[union-attr]


def generation_eos(model_dir: Path) -> list[int]:
    path = model_dir / "generation_config.json"
    if not path.exists():
        return []
    eos = json.loads(path.read_text()).get("eos_token_id")
    return [eos] if isinstance(eos, int) else [e for e in eos or [] if isinstance(e, int)]


def draft_vocabulary(
    drafter_dir: Path,
    d_cfg: dict[str, Any],
    target_head: torch.Tensor,
    device: str,
    dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """A reduced draft vocabulary, as the speculators format carries it: `draft_vocab_size` N
    below the target's V and a `d2t` map [N] (draft id i is target id i + d2t[i]). Returns the
    target ids [N] and the lm_head rows scoring them [N, H]: the drafter's own `lm_head.weight`
    when it ships one, else the target's rows for those ids. None: the whole vocabulary."""
    n, v = d_cfg.get("draft_vocab_size"), target_head.shape[0]
    if not isinstance(n, int) or isinstance(n, bool) or n <= 0 or n >= v:
        return None
    found = _vocab_tensors(safetensors_files(drafter_dir))
    d2t = found.get("d2t")
    if d2t is None or tuple(d2t.shape) != (n,):
        raise EngineError(
            f"draft_vocab_size {n} needs a d2t map of {n} entries in the drafter's weights; "
            f"found {'none' if d2t is None else list(d2t.shape)}"
        )
    return _vocabulary(d2t, found.get("lm_head.weight"), target_head, device, dtype)


def draft_vocabulary_file(
    path: Path, target_head: torch.Tensor, device: str, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """A reduced draft vocabulary kept beside a drafter whose files stay those of the whole
    vocabulary (so other engines serve them unchanged): a safetensors file with a `d2t` map
    [N], and optionally its own `lm_head.weight` [N, H]. The same returns as
    `draft_vocabulary`."""
    if not path.is_file():
        raise EngineError(f"draft vocabulary {path}: no such file")
    found = _vocab_tensors([path])
    d2t = found.get("d2t")
    if d2t is None or d2t.dim() != 1 or not 0 < len(d2t) < target_head.shape[0]:
        raise EngineError(
            f"draft vocabulary {path}: needs a d2t map [N] with N below the target's "
            f"{target_head.shape[0]}; found {'none' if d2t is None else list(d2t.shape)}"
        )
    return _vocabulary(d2t, found.get("lm_head.weight"), target_head, device, dtype)


def _vocab_tensors(files: list[Path]) -> dict[str, torch.Tensor]:
    from safetensors import safe_open

    found: dict[str, torch.Tensor] = {}
    for f in files:
        with safe_open(str(f), framework="pt", device="cpu") as st:
            for name in ("d2t", "lm_head.weight"):
                if name in st.keys():  # noqa: SIM118 (safe_open is not a mapping)
                    found[name] = st.get_tensor(name)
    return found


def _vocabulary(
    d2t: torch.Tensor,
    own: torch.Tensor | None,
    target_head: torch.Tensor,
    device: str,
    dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor]:
    n, v = len(d2t), target_head.shape[0]
    ids = torch.arange(n) + d2t.long()  # [N] target ids
    if int(ids.min()) < 0 or int(ids.max()) >= v or len(torch.unique(ids)) != n:
        raise EngineError(f"d2t maps the {n} draft ids outside the target's {v} or twice onto one")
    if own is not None and tuple(own.shape) != (n, target_head.shape[1]):
        raise EngineError(
            f"the drafter's lm_head.weight is {list(own.shape)}, not [{n}, {target_head.shape[1]}]"
        )
    head = own if own is not None else target_head.detach()[ids.to(target_head.device)]
    return ids.to(device), head.to(device=device, dtype=dtype).contiguous()
