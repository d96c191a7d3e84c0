"""The likely causes (dflashctl/metrics/causes.py) on their exact text and order: every cause
with and without a named drafter, server and log; each method's own causes per profile shape;
DFlash's order per shape; the shape of a profile (`signature_of`) at each edge; the
prefix-cache signature at its edges. Table-driven, real functions, no stand-ins."""

from __future__ import annotations

import pytest

from dflashctl.metrics import causes as C
from dflashctl.metrics.thresholds import Thresholds
from dflashctl.metrics.window import SpecWindow

FULL = Thresholds(
    drafter="qwen3-8b-dflash-b16", url="http://h:8000/metrics", source="srv.log", block_size=16
)
BARE = Thresholds()

# (function, its arguments after the thresholds' name, the cause, the check)
CAUSE_TEXTS: list[tuple[str, str, str, str]] = [
    (
        "cause_mismatch",
        "FULL",
        (
            "target/drafter mismatch: the drafter's config.json on the serving host"
            " disagrees with its target (target_layer_ids, mask_token_id,"
            " layer_types, RoPE); a stale or never-landed config is common."
            " Position 1 near zero with coherent output is the signature"
        ),
        (
            "dflashctl verify-config DRAFTER_DIR --drafter qwen3-8b-dflash-b16"
            " --target TARGET_DIR (add --host HOST for a remote server)"
        ),
    ),
    (
        "cause_mismatch",
        "BARE",
        (
            "target/drafter mismatch: the drafter's config.json on the serving host"
            " disagrees with its target (target_layer_ids, mask_token_id,"
            " layer_types, RoPE); a stale or never-landed config is common."
            " Position 1 near zero with coherent output is the signature"
        ),
        (
            "dflashctl verify-config DRAFTER_DIR --drafter NAME --target TARGET_DIR"
            " (add --host HOST for a remote server)"
        ),
    ),
    (
        "cause_swa",
        "FULL",
        (
            "sliding-window draft layers run as full attention, or with the wrong"
            " causality (VLLM_USE_V2_MODEL_RUNNER=1 gave 0 % in vllm#49559)"
        ),
        (
            "dflashctl verify-config DRAFTER_DIR --drafter qwen3-8b-dflash-b16"
            " --engine vllm (prints the per-layer causal/window table)"
        ),
    ),
    (
        "cause_thinking",
        "FULL",
        (
            "thinking mode on a drafter trained without thinking traces (Qwen3 b16"
            " drafters): acceptance roughly halves; turn thinking off"
            " (enable_thinking=false) or use a reasoning drafter"
        ),
        "dflashctl smoke http://h:8000",
    ),
    (
        "cause_quant",
        "FULL",
        (
            "the target's checkpoint, dtype or quantization differs from the one"
            " the drafter was trained against (fp16 instead of bf16, an FP8 target)"
        ),
        'grep -oE "dtype=[^,]+|quantization=[^,]+" srv.log',
    ),
    (
        "cause_revision",
        "FULL",
        "the drafter's weights are not the pinned revision (republished under the same name)",
        "dflashctl fetch qwen3-8b-dflash-b16",
    ),
    (
        "cause_weak",
        "FULL, 4",
        (
            "a weak or undertrained drafter, or K larger than it can use (positions"
            " ≥ 10 are rarely accepted, z-lab/dflash#35): fewer proposals may be"
            " faster"
        ),
        (
            "dflashctl bench http://h:8000 SECOND_URL (SECOND_URL: the same target"
            " and drafter served with num_speculative_tokens=4; compare decode"
            " tokens/s)"
        ),
    ),
    (
        "cause_weak",
        "BARE",
        (
            "a weak or undertrained drafter, or K larger than it can use (positions"
            " ≥ 10 are rarely accepted, z-lab/dflash#35): fewer proposals may be"
            " faster"
        ),
        (
            "dflashctl bench URL SECOND_URL (SECOND_URL: the same target and"
            " drafter served with a smaller num_speculative_tokens; compare decode"
            " tokens/s)"
        ),
    ),
    (
        "cause_long_context",
        "FULL",
        (
            "long-context cliff: sliding-window draft layers handled as full"
            " attention lose acceptance as the context grows (later positions fall"
            " to 0 beyond ~2k tokens)"
        ),
        (
            "dflashctl verify-config DRAFTER_DIR --drafter qwen3-8b-dflash-b16;"
            " then compare short and long prompts with dflashctl smoke"
            " http://h:8000"
        ),
    ),
    (
        "cause_drift",
        "FULL",
        "acceptance drift over hours until a restart (seen with EAGLE, vllm#41838)",
        "restart the engine and watch: dflashctl metrics srv.log --follow",
    ),
    (
        "cause_workload",
        "FULL",
        (
            "the workload changed or differs from the benchmark (longer prompts,"
            " another domain or language, sampling temperature): acceptance depends"
            " on it"
        ),
        "dflashctl smoke http://h:8000 (fixed prompts at temperature 0)",
    ),
    (
        "cause_mask",
        "FULL",
        (
            "wrong mask_token_id in the drafter's config.json (the field story's"
            " 248064 for 248070): every later position predicts from a wrong mask"
            " embedding and accepts ~0; position 1 keeps a little because the anchor"
            " token is real, or nothing at all (real vLLM 0.32 CPU in bf16 on the demo"
            " pair: every draft rejected)"
        ),
        (
            "dflashctl verify-config DRAFTER_DIR --drafter qwen3-8b-dflash-b16"
            " --target TARGET_DIR (add --host HOST for a remote server)"
        ),
    ),
    (
        "cause_rope",
        "FULL",
        (
            "RoPE trained one way, served another: the drafter's config declares a"
            " partial_rotary_factor (copied from a Qwen3.5/3.6 or Gemma 4 target) that"
            " its trainer ignored, rotating the whole head, while vLLM rotates only"
            " that share (vllm-project/speculators#613, deepseek-ai/DeepSpec#71); the"
            " log cannot tell this from a wrong mask id"
        ),
        (
            "dflashctl verify-config DRAFTER_DIR --drafter qwen3-8b-dflash-b16"
            " --target TARGET_DIR (the `rope: partial_rotary_factor` row)"
        ),
    ),
    (
        "cause_layer_types",
        "FULL",
        (
            "layer_types / sliding window disagree with training: sliding-window"
            " draft layers run as full attention (or the reverse), so positions"
            " past the window's reach fall to ~0"
        ),
        (
            "dflashctl verify-config DRAFTER_DIR --drafter qwen3-8b-dflash-b16"
            " --engine vllm (prints the per-layer causal/window table)"
        ),
    ),
    (
        "cause_block",
        "FULL, 15",
        (
            "num_speculative_tokens = 15 is larger than the block the drafter was"
            " trained with (trained block 16: K ≤ 15): positions past the trained"
            " block are never accepted"
        ),
        "dflashctl doctor --engine vllm --drafter DRAFTER_DIR -k 15",
    ),
    (
        "cause_block",
        "BARE, None",
        (
            "num_speculative_tokens is larger than the block the drafter was"
            " trained with: positions past the trained block are never accepted"
        ),
        "dflashctl doctor --engine vllm --drafter DRAFTER_DIR -k K",
    ),
    (
        "cause_block",
        "BARE, 0",
        (
            "num_speculative_tokens is larger than the block the drafter was"
            " trained with: positions past the trained block are never accepted"
        ),
        "dflashctl doctor --engine vllm --drafter DRAFTER_DIR -k K",
    ),
    (
        "cause_known_defects",
        "FULL",
        (
            "a known engine defect for this drafter's layout (e.g."
            " vllm-cpu-context-k-norm, mixed sliding/full drafters on the V1 model"
            " runner)"
        ),
        "dflashctl doctor --engine vllm --drafter DRAFTER_DIR (lists the known defects that apply)",
    ),
    (
        "cause_wiring",
        "FULL",
        (
            "every draft rejected (mean acceptance length 1.00, every position 0):"
            " not a weak drafter but a wiring fault: the drafter's lm_head or draft"
            " vocabulary (draft_vocab_size with its own lm_head, a d2t map) shared"
            " with or overwritten by the target's, target taps wired to other"
            " layers than trained (an aux-layer shift), or a CUDA-graph mode that"
            " runs the drafter's attention wrongly (piecewise graphs with attention"
            " inside)"
        ),
        (
            "dflashctl verify-config DRAFTER_DIR --drafter qwen3-8b-dflash-b16"
            " --target TARGET_DIR; then dflashctl doctor --engine vllm --drafter"
            " DRAFTER_DIR"
        ),
    ),
    (
        "cause_batch_off",
        "FULL, 8",
        (
            "speculation disabled for large batches (disable_by_batch_size = 8):"
            " the engine verifies no drafts while this many requests run, so each"
            " step commits exactly one token (accept len 1.00). Expected, not a"
            " fault; judge acceptance at smaller batches"
        ),
        (
            "grep -oE 'speculative_config=[^ ]+|speculative_[a-z_]+=[^,]+' srv.log;"
            " then dflashctl smoke http://h:8000 (one request at a time)"
        ),
    ),
    (
        "cause_batch_off",
        "BARE, None",
        (
            "speculation disabled for large batches: the engine verifies no drafts"
            " while this many requests run, so each step commits exactly one token"
            " (accept len 1.00). Expected, not a fault; judge acceptance at smaller"
            " batches"
        ),
        (
            "grep -oE 'speculative_config=[^ ]+|speculative_[a-z_]+=[^,]+' LOG;"
            " then dflashctl smoke URL (one request at a time)"
        ),
    ),
    (
        "cause_prefix_cache",
        "FULL, 'EVIDENCE'",
        (
            "prefix caching: EVIDENCE. A DFlash/DSpark drafter's context is written"
            " only for tokens the target ran, so cached prefixes leave it reading"
            " stale entries (vllm#47930, z-lab/dflash#165)"
        ),
        "relaunch with --no-enable-prefix-caching and read again: dflashctl metrics srv.log",
    ),
]

# a method's own causes, by name; the shared ones (quant, drift, workload) as causes.py writes them
METHOD_TEXTS: dict[str, tuple[str, str]] = {
    "eagle_1": (
        (
            "multi-step drafting broken in this engine build (attention backend or"
            " CUDA graphs for the draft steps): step 1 works, the next steps"
            " propose garbage"
        ),
        "grep -nE 'attention backend|cudagraph|CUDA graph' srv.log | head",
    ),
    "eagle_2": (
        (
            "num_speculative_tokens deeper than the head drafts well: each EAGLE"
            " step feeds on its own guesses, so later steps are rarely accepted"
        ),
        (
            "dflashctl bench http://h:8000 SECOND_URL (SECOND_URL: the same target"
            " and drafter served with num_speculative_tokens=3; compare decode"
            " tokens/s)"
        ),
    ),
    "eagle_3": (
        (
            "the EAGLE head was trained for another target (base model, revision,"
            " chat template) or, for EAGLE-3, its auxiliary hidden-state layers or"
            " draft vocabulary map (d2t) do not match the served target"
        ),
        (
            "grep -oE 'speculative_config=[^ ]+|speculative_[a-z_]+=[^,]+' srv.log;"
            " compare the head's config.json with the target's"
        ),
    ),
    "eagle_4": (
        (
            "num_speculative_tokens deeper than the head drafts well: each EAGLE"
            " step feeds on its own guesses, so later steps are rarely accepted"
        ),
        (
            "dflashctl bench http://h:8000 SECOND_URL (SECOND_URL: the same target"
            " and drafter served with num_speculative_tokens=1; compare decode"
            " tokens/s)"
        ),
    ),
    "mtp_1": (
        (
            "num_speculative_tokens larger than the model's MTP layers"
            " (num_nextn_predict_layers): the extra steps reuse the last layer and"
            " accept little"
        ),
        "grep -o '\"num_nextn_predict_layers\": *[0-9]*' TARGET_DIR/config.json",
    ),
    "mtp_2": (
        (
            "the checkpoint's MTP layer is missing, not loaded or quantized"
            " differently (a quantized checkpoint that dropped or mis-scaled the"
            " MTP weights)"
        ),
        "grep -niE 'mtp|nextn' srv.log | head",
    ),
    "medusa_1": (
        (
            "num_speculative_tokens larger than the number of Medusa heads, or"
            " heads trained for another target or revision"
        ),
        (
            "grep -oE 'speculative_config=[^ ]+|speculative_[a-z_]+=[^,]+' srv.log;"
            " compare with the heads' config.json (medusa_num_heads)"
        ),
    ),
    "ngram_1": (
        (
            "n-gram lookup accepts only when the output repeats the prompt (code"
            " edits, RAG, summaries); on open-ended chat it rarely matches. That is"
            " the workload, not a fault: switch n-gram off for it or use a trained"
            " drafter"
        ),
        "dflashctl smoke http://h:8000 (compare with a prompt that quotes its input)",
    ),
    "ngram_2": (
        (
            "prompt_lookup_min / prompt_lookup_max or num_speculative_tokens too"
            " large for the repetition in this traffic"
        ),
        "grep -oE 'speculative_config=[^ ]+|speculative_[a-z_]+=[^,]+' srv.log",
    ),
    "draft_1": (
        (
            "the draft model's tokenizer or vocabulary differs from the target's,"
            " or it is from another model family"
        ),
        (
            "grep -oE 'speculative_config=[^ ]+|speculative_[a-z_]+=[^,]+' srv.log;"
            " compare tokenizer.json / vocab_size of both"
        ),
    ),
}
METHOD_ORDER: list[tuple[str, str, int | None, list[str]]] = [
    ("eagle", "cliff", 6, ["eagle_1", "eagle_2", "eagle_3"]),
    ("eagle", "cliff", None, ["eagle_1", "eagle_4", "eagle_3"]),
    ("eagle", "gradual", 6, ["eagle_2", "drift", "workload", "eagle_3"]),
    ("eagle", "dead", 6, ["eagle_3", "quant", "drift", "workload"]),
    ("mtp", "cliff", 6, ["mtp_1", "mtp_2", "quant"]),
    ("mtp", "gradual", 6, ["mtp_1", "workload", "mtp_2"]),
    ("mtp", "dead", 6, ["mtp_2", "quant", "mtp_1", "workload"]),
    ("medusa", "cliff", 6, ["medusa_1", "quant", "workload"]),
    ("medusa", "gradual", 6, ["medusa_1", "quant", "workload"]),
    ("medusa", "dead", 6, ["medusa_1", "quant", "workload"]),
    ("ngram", "cliff", 6, ["ngram_1", "ngram_2"]),
    ("ngram", "gradual", 6, ["ngram_1", "ngram_2"]),
    ("ngram", "dead", 6, ["ngram_1", "ngram_2"]),
    ("draft", "cliff", 6, ["draft_1", "quant", "workload"]),
    ("draft", "gradual", 6, ["draft_1", "quant", "workload"]),
    ("draft", "dead", 6, ["draft_1", "quant", "workload"]),
]


@pytest.mark.parametrize("fn, args, cause, check", CAUSE_TEXTS)
def test_each_cause_whole(fn: str, args: str, cause: str, check: str) -> None:
    c = eval(f"C.{fn}({args})")  # the table names the call as written
    assert (c.cause, c.check) == (cause, check)


@pytest.mark.parametrize("family, signature, k, order", METHOD_ORDER)
def test_each_methods_causes_in_order(
    family: str, signature: str, k: int | None, order: list[str]
) -> None:
    texts = {
        **METHOD_TEXTS,
        "quant": (C.cause_quant(FULL).cause, C.cause_quant(FULL).check),
        "drift": (C.cause_drift(FULL).cause, C.cause_drift(FULL).check),
        "workload": (C.cause_workload(FULL).cause, C.cause_workload(FULL).check),
    }
    got = [(c.cause, c.check) for c in C.method_causes(family, signature, FULL, k)]
    assert got == [texts[n] for n in order]
    assert C.causes_for(family, signature, 3, FULL, k) == C.method_causes(
        family, signature, FULL, k
    )


@pytest.mark.parametrize("k, bench", [(1, 1), (2, 1), (3, 1), (7, 3), (None, 1)])
def test_an_eagle_head_is_benched_at_half_its_depth(k: int | None, bench: int) -> None:
    depth = C.method_causes("eagle", "gradual", BARE, k)[0]
    assert depth.check == C.bench_k(BARE, bench)


@pytest.mark.parametrize(
    "method, family",
    [
        (None, ""),
        ("", ""),
        (" None ", ""),
        ("DFlash", "dflash"),
        ("qwen3_dflash", "dflash"),
        ("eagle", "eagle"),
        ("EAGLE3", "eagle"),
        ("my_eagle", ""),
        ("deepseek_mtp", "mtp"),
        ("mtp", "mtp"),
        ("mtp_x", ""),
        ("nextn", "mtp"),
        ("NEXTN", "mtp"),
        ("medusa", "medusa"),
        ("medusa2", ""),
        ("ngram", "ngram"),
        ("[ngram]", "ngram"),
        ("suffix", "ngram"),
        ("draft_model", "draft"),
        ("Standalone", "draft"),
        ("mlp_speculator", ""),
        (3, ""),
    ],
)
def test_method_family(method: object, family: str) -> None:
    assert C.method_family(method) == family


# DFlash's causes per shape, by the function that writes each
def _dflash(th: Thresholds, k: int | None, at: int | None) -> dict[str, C.Cause]:
    return {
        "mismatch": C.cause_mismatch(th),
        "swa": C.cause_swa(th),
        "thinking": C.cause_thinking(th),
        "quant": C.cause_quant(th),
        "weak": C.cause_weak(th),
        "weak_at": C.cause_weak(th, (at or 2) - 1),
        "mask": C.cause_mask(th),
        "rope": C.cause_rope(th),
        "layer_types": C.cause_layer_types(th),
        "block": C.cause_block(th, k),
        "known": C.cause_known_defects(th),
        "wiring": C.cause_wiring(th),
    }


@pytest.mark.parametrize(
    "signature, at, k, block, order",
    [
        ("all_rejected", None, 3, None, ["wiring", "mask", "mismatch", "known"]),
        ("dead", None, 3, None, ["mismatch", "swa", "thinking", "quant"]),
        ("cliff", 2, 15, 16, ["mask", "rope", "layer_types", "block", "known", "weak_at"]),
        ("cliff", 2, 16, 16, ["block", "mask", "rope", "layer_types", "known", "weak_at"]),
        ("cliff", 5, 16, 16, ["block", "mask", "layer_types", "known", "weak_at"]),
        ("cliff", 5, None, 16, ["layer_types", "block", "mask", "known", "weak_at"]),
        ("cliff", 5, 16, None, ["layer_types", "block", "mask", "known", "weak_at"]),
        ("cliff", 3, 8, None, ["layer_types", "block", "mask", "known", "weak_at"]),
        ("cliff", None, 8, None, ["layer_types", "block", "mask", "known", "weak_at"]),
        ("gradual", None, 3, None, ["weak", "thinking", "mismatch", "quant"]),
        ("unknown", None, 3, None, ["thinking", "mismatch", "weak", "quant"]),
    ],
)
def test_dflash_causes_in_order(
    signature: str, at: int | None, k: int | None, block: int | None, order: list[str]
) -> None:
    th = Thresholds(drafter="d", block_size=block)
    named = _dflash(th, k, at)
    assert C.dflash_causes(signature, at, th, k) == [named[n] for n in order]
    assert C.causes_for("", signature, at, th, k) == [named[n] for n in order]
    assert C.causes_for("dflash", signature, at, th, k) == [named[n] for n in order]


def test_a_cliff_names_the_weak_position_before_it() -> None:
    assert C.dflash_causes("cliff", 5, BARE, 8)[-1] == C.cause_weak(BARE, 4)
    assert C.dflash_causes("cliff", None, BARE, 8)[-1] == C.cause_weak(BARE, 1)


@pytest.mark.parametrize(
    "th, url, name",
    [
        (Thresholds(url="http://h:8000/metrics"), "http://h:8000", "NAME"),
        (Thresholds(url="http://h:8000/"), "http://h:8000/", "NAME"),
        (Thresholds(drafter="demo"), "URL", "demo"),
    ],
)
def test_server_url_and_name(th: Thresholds, url: str, name: str) -> None:
    assert C.server_url(th) == url
    assert C.cause_revision(th).check == f"dflashctl fetch {name}"


@pytest.mark.parametrize(
    "pp, drafts, counted, want",
    [
        (None, None, True, ("unknown", None)),
        ([], None, True, ("unknown", None)),
        ([0.005, 0.005], None, True, ("all_rejected", None)),
        ([0.0051, 0.0], None, True, ("dead", None)),
        ([0.099, 0.0], None, True, ("dead", None)),
        ([0.1, 0.0], None, True, ("cliff", 2)),  # position 1 at 10 %: alive
        ([0.1, 0.01], None, True, ("cliff", 2)),  # 0.01 ≤ 10 % of 0.1 and ≤ 2 %
        ([0.1, 0.0101], None, True, ("gradual", None)),  # just over a tenth of 0.1
        ([0.5, 0.02], None, True, ("cliff", 2)),  # at "near zero" (2 %)
        ([0.5, 0.021], None, True, ("gradual", None)),  # just over
        ([0.5, 0.05, 0.0], None, True, ("cliff", 3)),  # the one before at 5 %: a cliff
        ([0.5, 0.049, 0.0], None, True, ("gradual", None)),  # under 5 %: a fall
        ([0.5, 0.3, 0.0, 0.03], None, True, ("gradual", None)),  # not every later one ~0
        ([0.5, 0.3, 0.0, 0.0], 34, True, ("cliff", 3)),  # 0.3 × 34 = 10.2 drafts reached
        ([0.5, 0.3, 0.0, 0.0], 33, True, ("gradual", None)),  # 9.9: too few
        ([0.5, 0.3, 0.0, 0.0], 33, False, ("cliff", 3)),  # not counted: the shape alone
        ([0.5, 0.3, 0.04, 0.0], 34, True, ("cliff", 3)),  # 0.04 × 34 = 1.36 < 1.5: one draft
        ([0.5, 0.3, 0.05, 0.0], 34, True, ("gradual", None)),  # 1.7 drafts: a rate
        ([0.5, 0.3, 0.04, 0.0], None, True, ("gradual", None)),  # uncounted 4 % is not ~0
    ],
)
def test_signature_edges(
    pp: list[float] | None, drafts: int | None, counted: bool, want: tuple[str, int | None]
) -> None:
    assert C.signature_of(pp, BARE, drafts, counted=counted) == want


def win(tau: float | None, hit: float | None, rate: float | None = None, k: int = 4) -> SpecWindow:
    return SpecWindow(
        engine="vllm",
        format="vllm-0.10.2+",
        mean_acceptance_length=tau,
        draft_acceptance_rate=rate,
        per_position=[0.5] * k if k else None,
        prefix_cache_hit_rate=hit,
    )


@pytest.mark.parametrize(
    "windows, want",
    [
        (
            [win(3.0, 0.0), win(3.2, 0.09), win(2.4, 0.3), win(2.0, 0.7)],
            "mean acceptance length 2.20 in the 2 windows whose prefix cache hit rate was ≥ 30% "
            "(median 50%) against 3.10 in the 2 below 10%",
        ),
        # high at 0.8 × low
        ([win(3.0, 0.0), win(3.0, 0.05), win(2.4, 0.3), win(2.4, 0.3)], "length 2.40 in the 2"),
        ([win(3.0, 0.0), win(3.0, 0.05), win(2.41, 0.3), win(2.41, 0.3)], None),  # just over
        ([win(3.0, 0.0), win(3.0, 0.1), win(2.0, 0.3), win(2.0, 0.3)], None),  # 10 %: not low
        ([win(3.0, 0.0), win(3.0, 0.0), win(2.0, 0.29), win(2.0, 0.3)], None),  # 29 %: not high
        ([win(3.0, 0.0), win(2.0, 0.5), win(2.0, 0.5)], None),  # one low window
        ([win(3.0, 0.0), win(3.0, 0.0), win(2.0, 0.5)], None),  # one high window
        ([win(3.0, None), win(3.0, 0.0), win(3.0, 0.0), win(2.0, 0.5), win(2.0, 0.5)],
         "against 3.00 in the 2 below"),  # a window without a hit rate is left out
        ([win(None, 0.0), win(3.0, 0.0), win(2.0, 0.5), win(2.0, 0.5)], None),  # no τ, no rate
        (
            [win(None, 0.0, 0.5), win(None, 0.0, 0.5), win(None, 0.5, 0.25), win(None, 0.5, 0.25)],
            "mean acceptance length 2.00 in the 2 windows whose prefix cache hit rate was ≥ 30% "
            "(median 50%) against 3.00 in the 2 below 10%",
        ),  # τ from the rate: 1 + rate × K
        (
            [win(None, 0.0, 0.5, 0), win(None, 0.0, 0.5, 0), win(None, 0.5, 0.1, 0),
             win(None, 0.5, 0.1, 0)],
            "mean acceptance length 1.10 in the 2 windows whose prefix cache hit rate was ≥ 30% "
            "(median 50%) against 1.50 in the 2 below 10%",
        ),  # no profile: K = 1
    ],
)  # fmt: skip
def test_prefix_cache_signature_edges(windows: list[SpecWindow], want: str | None) -> None:
    got = C.prefix_cache_signature(windows)
    if want is None or want.startswith("mean"):
        assert got == want
    else:
        assert got is not None and want in got


def test_bench_k() -> None:
    assert C.bench_k(FULL, 3) == (
        "dflashctl bench http://h:8000 SECOND_URL (SECOND_URL: the same target and drafter served "
        "with num_speculative_tokens=3; compare decode tokens/s)"
    )
    assert C.bench_k(BARE, 0) == (
        "dflashctl bench URL SECOND_URL (SECOND_URL: the same target and drafter served with a "
        "smaller num_speculative_tokens; compare decode tokens/s)"
    )


BY_COUNT = Thresholds(weak_position_rate=0.04, cliff_drop=0.05)


@pytest.mark.parametrize(
    "pp, drafts, counted, th, want",
    [
        # one draft's worth (x × drafts < 1.5) at exactly 1.5: a rate, not ~0
        ([0.5, 0.03125], 48, True, BARE, ("gradual", None)),
        ([0.5, 0.03125], 47, True, BARE, ("cliff", 2)),
        # "near zero" by the count alone, and then the drop by the count alone, at 1.5
        ([0.5, 0.03125], 48, False, BY_COUNT, ("gradual", None)),
        ([0.5, 0.03125], 47, False, BY_COUNT, ("cliff", 2)),
        # the drop at exactly a tenth of the position before
        ([0.5, 0.05], None, True, Thresholds(weak_position_rate=0.05), ("cliff", 2)),
        # cliff_min_count drafts reached exactly (0.5 × 20 = 10)
        ([0.5, 0.0], 20, True, BARE, ("cliff", 2)),
        ([0.5, 0.0], 19, True, BARE, ("gradual", None)),
        # position 1 itself is never the cliff
        ([0.1, 0.1], 10, False, BARE, ("cliff", 2)),
    ],
)  # fmt: skip
def test_signature_edges_by_count(
    pp: list[float], drafts: int | None, counted: bool, th: Thresholds, want: object
) -> None:
    assert C.signature_of(pp, th, drafts, counted=counted) == want


def test_prefix_cache_signature_at_the_drop_exactly() -> None:
    ws = [win(2.5, 0.0), win(2.5, 0.0), win(2.0, 0.5), win(2.0, 0.5)]  # 2.0 = 0.8 × 2.5
    assert C.prefix_cache_signature(ws) == (
        "mean acceptance length 2.00 in the 2 windows whose prefix cache hit rate was ≥ 30% "
        "(median 50%) against 2.50 in the 2 below 10%"
    )
