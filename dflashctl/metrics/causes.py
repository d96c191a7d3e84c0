"""Likely causes of an alarm, ranked by what the log shows: the per-position profile's shape
(`signature_of`: dead, cliff, gradual) and the method the log states (DFlash, EAGLE, MTP,
Medusa, n-gram). Each cause names the command that checks it (docs/metrics.md, "Which causes
come first"; ../shared/docs/dflash-facts.md §12). Pure: no I/O, no printing."""

from __future__ import annotations

import statistics

from dflashctl.metrics.thresholds import Thresholds
from dflashctl.metrics.window import Cause, SpecWindow


def _name(th: Thresholds) -> str:
    return th.drafter or "NAME"


def server_url(th: Thresholds) -> str:
    """The server's base URL for a command a cause names, or a placeholder."""
    return th.url.removesuffix("/metrics") if th.url else "URL"


def cause_mismatch(th: Thresholds) -> Cause:
    return Cause(
        "target/drafter mismatch: the drafter's config.json on the serving host disagrees with "
        "its target (target_layer_ids, mask_token_id, layer_types, RoPE); a stale or "
        "never-landed config is common. Position 1 near zero with coherent output is the "
        "signature",
        f"dflashctl verify-config DRAFTER_DIR --drafter {_name(th)} --target TARGET_DIR "
        "(add --host HOST for a remote server)",
    )


def cause_swa(th: Thresholds) -> Cause:
    return Cause(
        "sliding-window draft layers run as full attention, or with the wrong causality "
        "(VLLM_USE_V2_MODEL_RUNNER=1 gave 0 % in vllm#49559)",
        f"dflashctl verify-config DRAFTER_DIR --drafter {_name(th)} --engine vllm "
        "(prints the per-layer causal/window table)",
    )


def cause_thinking(th: Thresholds) -> Cause:
    return Cause(
        "thinking mode on a drafter trained without thinking traces (Qwen3 b16 drafters): "
        "acceptance roughly halves; turn thinking off (enable_thinking=false) or use a "
        "reasoning drafter",
        f"dflashctl smoke {server_url(th)}",
    )


def cause_quant(th: Thresholds) -> Cause:
    return Cause(
        "the target's checkpoint, dtype or quantization differs from the one the drafter was "
        "trained against (fp16 instead of bf16, an FP8 target)",
        f'grep -oE "dtype=[^,]+|quantization=[^,]+" {th.source}',
    )


def cause_revision(th: Thresholds) -> Cause:
    return Cause(
        "the drafter's weights are not the pinned revision (republished under the same name)",
        f"dflashctl fetch {_name(th)}",
    )


def bench_k(th: Thresholds, k: int | None) -> str:
    """A runnable matched benchmark of this server against one that proposes fewer tokens."""
    kk = f"num_speculative_tokens={k}" if k else "a smaller num_speculative_tokens"
    return (
        f"dflashctl bench {server_url(th)} SECOND_URL (SECOND_URL: the same target and drafter "
        f"served with {kk}; compare decode tokens/s)"
    )


def cause_weak(th: Thresholds, useful: int | None = None) -> Cause:
    return Cause(
        "a weak or undertrained drafter, or K larger than it can use (positions ≥ 10 are "
        "rarely accepted, z-lab/dflash#35): fewer proposals may be faster",
        bench_k(th, useful),
    )


def cause_long_context(th: Thresholds) -> Cause:
    return Cause(
        "long-context cliff: sliding-window draft layers handled as full attention lose "
        "acceptance as the context grows (later positions fall to 0 beyond ~2k tokens)",
        f"dflashctl verify-config DRAFTER_DIR --drafter {_name(th)}; then compare short and "
        f"long prompts with dflashctl smoke {server_url(th)}",
    )


def cause_drift(th: Thresholds) -> Cause:
    return Cause(
        "acceptance drift over hours until a restart (seen with EAGLE, vllm#41838)",
        f"restart the engine and watch: dflashctl metrics {th.source} --follow",
    )


def cause_workload(th: Thresholds) -> Cause:
    return Cause(
        "the workload changed or differs from the benchmark (longer prompts, another domain or "
        "language, sampling temperature): acceptance depends on it",
        f"dflashctl smoke {server_url(th)} (fixed prompts at temperature 0)",
    )


def cause_mask(th: Thresholds) -> Cause:
    return Cause(
        "wrong mask_token_id in the drafter's config.json (the field story's 248064 for "
        "248070): every later position predicts from a wrong mask embedding and accepts ~0; "
        "position 1 keeps a little because the anchor token is real, or nothing at all (real "
        "vLLM 0.32 CPU in bf16 on the demo pair: every draft rejected)",
        f"dflashctl verify-config DRAFTER_DIR --drafter {_name(th)} --target TARGET_DIR "
        "(add --host HOST for a remote server)",
    )


def cause_rope(th: Thresholds) -> Cause:
    return Cause(
        "RoPE trained one way, served another: the drafter's config declares a "
        "partial_rotary_factor (copied from a Qwen3.5/3.6 or Gemma 4 target) that its trainer "
        "ignored, rotating the whole head, while vLLM rotates only that share "
        "(vllm-project/speculators#613, deepseek-ai/DeepSpec#71); the log cannot tell this from "
        "a wrong mask id",
        f"dflashctl verify-config DRAFTER_DIR --drafter {_name(th)} --target TARGET_DIR "
        "(the `rope: partial_rotary_factor` row)",
    )


def cause_layer_types(th: Thresholds) -> Cause:
    return Cause(
        "layer_types / sliding window disagree with training: sliding-window draft layers run "
        "as full attention (or the reverse), so positions past the window's reach fall to ~0",
        f"dflashctl verify-config DRAFTER_DIR --drafter {_name(th)} --engine vllm "
        "(prints the per-layer causal/window table)",
    )


def cause_block(th: Thresholds, k: int | None) -> Cause:
    trained = f" (trained block {th.block_size}: K ≤ {th.block_size - 1})" if th.block_size else ""
    kk = f" -k {k}" if k else " -k K"
    return Cause(
        f"num_speculative_tokens{f' = {k}' if k else ''} is larger than the block the drafter "
        f"was trained with{trained}: positions past the trained block are never accepted",
        f"dflashctl doctor --engine vllm --drafter DRAFTER_DIR{kk}",
    )


def cause_known_defects(th: Thresholds) -> Cause:
    return Cause(
        "a known engine defect for this drafter's layout (e.g. vllm-cpu-context-k-norm, "
        "mixed sliding/full drafters on the V1 model runner)",
        "dflashctl doctor --engine vllm --drafter DRAFTER_DIR (lists the known defects that apply)",
    )


def method_family(method: object) -> str:
    """The speculative method a log states → dflash | eagle | mtp | medusa | ngram | draft | ''."""
    m = str(method or "").strip().lower()
    if not m or m == "none":
        return ""
    if "dflash" in m:
        return "dflash"
    if m.startswith("eagle"):
        return "eagle"
    if m.endswith("mtp") or m == "nextn":
        return "mtp"
    if m == "medusa":
        return "medusa"
    if "ngram" in m or m == "suffix":
        return "ngram"
    if m in ("draft_model", "standalone"):
        return "draft"
    return ""


METHOD_NAMES = {
    "eagle": "EAGLE",
    "mtp": "MTP",
    "medusa": "Medusa",
    "ngram": "n-gram",
    "draft": "draft-model",
}


def _grep_cfg(th: Thresholds) -> str:
    return f"grep -oE 'speculative_config=[^ ]+|speculative_[a-z_]+=[^,]+' {th.source}"


def method_causes(family: str, signature: str, th: Thresholds, k: int | None) -> list[Cause]:
    """Causes for a method other than DFlash: its own failure modes, never the DFlash list."""
    src = th.source
    if family == "eagle":
        head = Cause(
            "the EAGLE head was trained for another target (base model, revision, chat "
            "template) or, for EAGLE-3, its auxiliary hidden-state layers or draft vocabulary "
            "map (d2t) do not match the served target",
            f"{_grep_cfg(th)}; compare the head's config.json with the target's",
        )
        depth = Cause(
            "num_speculative_tokens deeper than the head drafts well: each EAGLE step feeds on "
            "its own guesses, so later steps are rarely accepted",
            bench_k(th, max(1, (k or 2) // 2)),
        )
        drift = cause_drift(th)
        if signature == "cliff":
            return [
                Cause(
                    "multi-step drafting broken in this engine build (attention backend or CUDA "
                    "graphs for the draft steps): step 1 works, the next steps propose garbage",
                    f"grep -nE 'attention backend|cudagraph|CUDA graph' {src} | head",
                ),
                depth,
                head,
            ]
        if signature == "gradual":
            return [depth, drift, cause_workload(th), head]
        return [head, cause_quant(th), drift, cause_workload(th)]
    if family == "mtp":
        layers = Cause(
            "num_speculative_tokens larger than the model's MTP layers "
            "(num_nextn_predict_layers): the extra steps reuse the last layer and accept little",
            "grep -o '\"num_nextn_predict_layers\": *[0-9]*' TARGET_DIR/config.json",
        )
        weights = Cause(
            "the checkpoint's MTP layer is missing, not loaded or quantized differently (a "
            "quantized checkpoint that dropped or mis-scaled the MTP weights)",
            f"grep -niE 'mtp|nextn' {src} | head",
        )
        if signature == "cliff":
            return [layers, weights, cause_quant(th)]
        if signature == "gradual":
            return [layers, cause_workload(th), weights]
        return [weights, cause_quant(th), layers, cause_workload(th)]
    if family == "medusa":
        heads = Cause(
            "num_speculative_tokens larger than the number of Medusa heads, or heads trained "
            "for another target or revision",
            f"{_grep_cfg(th)}; compare with the heads' config.json (medusa_num_heads)",
        )
        return [heads, cause_quant(th), cause_workload(th)]
    if family == "ngram":
        return [
            Cause(
                "n-gram lookup accepts only when the output repeats the prompt (code edits, "
                "RAG, summaries); on open-ended chat it rarely matches. That is the workload, "
                "not a fault: switch n-gram off for it or use a trained drafter",
                f"dflashctl smoke {server_url(th)} (compare with a prompt that quotes its input)",
            ),
            Cause(
                "prompt_lookup_min / prompt_lookup_max or num_speculative_tokens too large for "
                "the repetition in this traffic",
                _grep_cfg(th),
            ),
        ]
    # a separate draft model
    return [
        Cause(
            "the draft model's tokenizer or vocabulary differs from the target's, or it is "
            "from another model family",
            f"{_grep_cfg(th)}; compare tokenizer.json / vocab_size of both",
        ),
        cause_quant(th),
        cause_workload(th),
    ]


ALL_REJECTED_RATE = 0.005  # every position at or below: every draft rejected


def signature_of(
    pp: list[float] | None, th: Thresholds, drafts: int | None = None, *, counted: bool = True
) -> tuple[str, int | None]:
    """The shape of a per-position profile: ("all_rejected", None) every position ~0 (≤ 0.5 %);
    ("dead", None) position 1 under 10 %;
    ("cliff", j) positions j.. fall to ~0 right after a position that still accepted
    (≥ 5 %, and the drop is to under a tenth of it) in at least `cliff_min_count` of the
    `drafts` (when known and `counted`): a config signature; ("gradual", None) anything else
    that decays; ("unknown", None) without a profile. With `drafts` known, a position that one
    draft accepted (1 of 30 reads 3.3 %) is ~0 too: one draft is no evidence of a rate."""
    if not pp:
        return "unknown", None
    if all(x <= ALL_REJECTED_RATE for x in pp):
        return "all_rejected", None
    if pp[0] < 0.1:
        return "dead", None

    def zero(x: float) -> bool:
        return x <= th.weak_position_rate or (drafts is not None and x * drafts < 1.5)

    for j in range(1, len(pp)):
        if (
            zero(pp[j])
            and pp[j - 1] >= th.cliff_from
            and (
                pp[j] <= th.cliff_drop * pp[j - 1] or (drafts is not None and pp[j] * drafts < 1.5)
            )
            and all(zero(x) for x in pp[j:])
            and (drafts is None or not counted or pp[j - 1] * drafts >= th.cliff_min_count)
        ):
            return "cliff", j + 1
    return "gradual", None


def cause_wiring(th: Thresholds) -> Cause:
    return Cause(
        "every draft rejected (mean acceptance length 1.00, every position 0): not a weak "
        "drafter but a wiring fault: the drafter's lm_head or draft vocabulary (draft_vocab_size "
        "with its own lm_head, a d2t map) shared with or overwritten by the target's, target "
        "taps wired to other layers than trained (an aux-layer shift), or a CUDA-graph mode that "
        "runs the drafter's attention wrongly (piecewise graphs with attention inside)",
        f"dflashctl verify-config DRAFTER_DIR --drafter {_name(th)} --target TARGET_DIR; then "
        "dflashctl doctor --engine vllm --drafter DRAFTER_DIR",
    )


def dflash_causes(signature: str, at: int | None, th: Thresholds, k: int | None) -> list[Cause]:
    """DFlash (and a method the log does not state): config causes first for a dead position 1
    or a cliff, the drafter's own strength first for a gradual decay; wiring first when every
    position is 0, then a wrong mask id (which can reject position 1 too)."""
    if signature == "all_rejected":
        return [cause_wiring(th), cause_mask(th), cause_mismatch(th), cause_known_defects(th)]
    if signature == "dead":
        return [cause_mismatch(th), cause_swa(th), cause_thinking(th), cause_quant(th)]
    if signature == "cliff":
        block_first = th.block_size is not None and k is not None and k > th.block_size - 1
        if block_first:
            rope = [cause_rope(th)] if at == 2 else []  # its signature: a cliff at 2
            order = [cause_block(th, k), cause_mask(th), *rope, cause_layer_types(th)]
        elif at == 2:
            order = [cause_mask(th), cause_rope(th), cause_layer_types(th), cause_block(th, k)]
        else:
            order = [cause_layer_types(th), cause_block(th, k), cause_mask(th)]
        return [*order, cause_known_defects(th), cause_weak(th, (at or 2) - 1)]
    if signature == "gradual":
        return [cause_weak(th), cause_thinking(th), cause_mismatch(th), cause_quant(th)]
    return [cause_thinking(th), cause_mismatch(th), cause_weak(th), cause_quant(th)]


def causes_for(
    family: str, signature: str, at: int | None, th: Thresholds, k: int | None
) -> list[Cause]:
    if family and family != "dflash":
        return method_causes(family, signature, th, k)
    return dflash_causes(signature, at, th, k)


def cause_batch_off(th: Thresholds, limit: int | None) -> Cause:
    at = f" (disable_by_batch_size = {limit})" if limit else ""
    return Cause(
        f"speculation disabled for large batches{at}: the engine verifies no drafts while this "
        "many requests run, so each step commits exactly one token (accept len 1.00). "
        "Expected, not a fault; judge acceptance at smaller batches",
        f"{_grep_cfg(th)}; then dflashctl smoke {server_url(th)} (one request at a time)",
    )


PREFIX_LOW, PREFIX_HIGH = 0.10, 0.30  # hit-rate groups compared by the prefix-cache signature
PREFIX_DROP = 0.8  # acceptance with the prefix cached at or under this × without: poisoned


def prefix_cache_signature(ws: list[SpecWindow]) -> str | None:
    """Acceptance lower where the prefix cache hits (vllm#47930: the drafter's context is not
    written for cached tokens): windows with a hit rate ≥ 30 % accept ≤ 80 % of what windows
    with < 10 % accept (at least two windows each). The evidence as text, else None."""

    def tau(w: SpecWindow) -> float | None:
        if w.mean_acceptance_length is not None:
            return w.mean_acceptance_length
        rate = w.draft_acceptance_rate
        return 1 + rate * (w.k or 1) if rate is not None else None

    low = [t for w in ws if w.prefix_cache_hit_rate is not None
           and w.prefix_cache_hit_rate < PREFIX_LOW and (t := tau(w)) is not None]  # fmt: skip
    high = [(t, w.prefix_cache_hit_rate) for w in ws if w.prefix_cache_hit_rate is not None
            and w.prefix_cache_hit_rate >= PREFIX_HIGH and (t := tau(w)) is not None]  # fmt: skip
    if len(low) < 2 or len(high) < 2:
        return None
    lo, hi = statistics.median(low), statistics.median(t for t, _ in high)
    if hi > PREFIX_DROP * lo:
        return None
    rate = statistics.median(r for _, r in high)
    return (
        f"mean acceptance length {hi:.2f} in the {len(high)} windows whose prefix cache hit rate "
        f"was ≥ {PREFIX_HIGH:.0%} (median {rate:.0%}) against {lo:.2f} in the {len(low)} below "
        f"{PREFIX_LOW:.0%}"
    )


def cause_prefix_cache(th: Thresholds, evidence: str) -> Cause:
    return Cause(
        f"prefix caching: {evidence}. A DFlash/DSpark drafter's context is written only for "
        "tokens the target ran, so cached prefixes leave it reading stale entries "
        "(vllm#47930, z-lab/dflash#165)",
        f"relaunch with --no-enable-prefix-caching and read again: dflashctl metrics {th.source}",
    )
