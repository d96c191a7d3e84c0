"""Rules that need the target's config, and what each engine needs of a drafter."""

from __future__ import annotations

from typing import Any

from dflashctl.drafter.config import (
    dflash_section,
    is_int,
    rope_theta,
    transformers_view,
)
from dflashctl.drafter.rules.base import V2_HINT, Ctx, runs


def check_target(c: Ctx, text: dict[str, Any], nested: bool) -> None:
    cfg, r, entry = c.cfg, c.r, c.entry
    where = "target text_config" if nested else "target config"
    n = text.get("num_hidden_layers")
    if not is_int(n) or n <= 0:
        c.add(
            "target: num_hidden_layers",
            "invalid" if n is not None else "missing",
            n,
            "a positive integer",
            where,
        )
    else:
        drafter_n = c.cfg.get("num_target_layers", dflash_section(cfg).get("num_target_layers"))
        if entry is not None and entry.target.num_hidden_layers is not None:
            c.canon(
                "target: num_hidden_layers",
                n,
                "target.num_hidden_layers",
                hint_bad=f"the drafter was trained for a {entry.target.num_hidden_layers}-layer "
                "target; this is another model",
            )
        elif is_int(drafter_n) and drafter_n != n:
            c.add(
                "target: num_hidden_layers",
                "mismatch",
                n,
                drafter_n,
                "the drafter's num_target_layers names another target",
            )
        else:
            c.add("target: num_hidden_layers", "ok", n, None, where)
    vocab = text.get("vocab_size")
    mask = r.mask_token_id
    if is_int(vocab):
        if mask is not None and mask >= vocab:
            c.add(
                "target: vocab_size",
                "invalid",
                vocab,
                f"> mask_token_id {mask}",
                "the mask token has no row in the target's embedding table",
            )
        elif r.vocab_size is not None and r.vocab_size != vocab:
            c.add(
                "target: vocab_size",
                "mismatch",
                vocab,
                r.vocab_size,
                "the drafter shares the target's embed_tokens and lm_head: vocab sizes must agree",
            )
        elif not c.canon("target: vocab_size", vocab, "target.vocab_size"):
            c.add(
                "target: vocab_size",
                "ok",
                vocab,
                None,
                f"mask_token_id {mask} is inside it" if mask is not None else None,
            )
    hidden = text.get("hidden_size")
    if is_int(hidden):
        t_hidden = r.target_hidden_size
        if t_hidden is not None and t_hidden != hidden:
            c.add(
                "target: hidden_size",
                "mismatch",
                hidden,
                t_hidden,
                "fc expects target_hidden_size × n features; the target's hidden states are "
                f"{hidden} wide",
            )
        elif r.hidden_size is not None and r.hidden_size != hidden:
            c.add(
                "target: hidden_size",
                "mismatch",
                hidden,
                r.hidden_size,
                "the drafter embeds with the target's embed_tokens, so its hidden_size must match",
            )
        elif not c.canon("target: hidden_size", hidden, "target.hidden_size"):
            c.add("target: hidden_size", "ok", hidden, None)
    t_theta = rope_theta(text)
    d_theta = rope_theta(cfg)
    if t_theta is not None and d_theta is not None and t_theta != d_theta:
        c.add(
            "target: rope_theta",
            "warning",
            t_theta,
            d_theta,
            "the drafter and target use different RoPE theta: fine only if the drafter was "
            "trained that way",
        )


# ---- engine-specific -------------------------------------------------------------------------


def check_engine(c: Ctx) -> None:
    r = c.r
    v1_errors = [e for e in c.r.engine_errors if e.startswith("Model Runner V1")]
    if c.engine == "vllm":
        if v1_errors:
            c.add(
                "vllm: model runner",
                "warning",
                "V2 only",
                None,
                f"{V2_HINT}; the V1 runner exits with '{v1_errors[0].split(' (')[0]}'",
            )
        else:
            c.add("vllm: model runner", "ok", "V1 and V2", None)
    elif c.engine == "local":
        if r.architecture == "DFlash2DraftModel":
            c.add(
                "local: architecture",
                "warning",
                r.architecture,
                "DFlashDraftModel",
                "the bundled engine implements DFlash (DFlashDraftModel)",
            )
        if r.mixed_sliding_full:
            c.add(
                "local: mixed sliding/full",
                "ok",
                runs([layer.layer_type for layer in r.layers]),
                None,
                "the bundled engine reads the config like vLLM and supports mixed layers",
            )
    elif c.engine == "sglang":
        ids = dflash_section(c.cfg).get("target_layer_ids", c.cfg.get("target_layer_ids"))
        ids = ids if isinstance(ids, list) and all(is_int(i) for i in ids) else []
        n = c.n_target
        # sglang range-checks the ids at start-up (0 <= id < the target's depth): -1, which
        # vLLM reads as the embeddings, is refused there
        out = [(k, i) for k, i in enumerate(ids) if i < 0 or (n is not None and i >= n)]
        if out:
            k, i = out[0]
            depth = n if n is not None else "L"
            c.add(
                "sglang: target_layer_ids",
                "invalid",
                [i for _, i in out],
                f"0 … {n - 1}" if n is not None else "ids >= 0",
                "sglang refuses them at start-up: 'DFLASH target_layer_ids contains an "
                f"out-of-range layer id. target_layer_ids[{k}]={i}, target_num_layers={depth}.'",
            )
        if n is not None and n - 1 in ids:
            c.add(
                "sglang: last target layer",
                "warning",
                n - 1,
                None,
                "sglang captures id + 1, and the last layer has no next one: on Qwen3.5 the "
                "server dies at start-up with IndexError (sglang#32204, closed unfixed; #32206 "
                "not merged); on other models that capture is silently missing",
            )
        if (
            any(layer.sliding for layer in r.layers)
            and transformers_view(c.cfg).get("sliding_window") is None
        ):
            c.add(
                "sglang: sliding_window",
                "invalid",
                None,
                "sliding_window with use_sliding_window: true",
                "sglang reads the window from the loaded config's sliding_window, not "
                "dflash_config.swa_window_size: 'DFLASH sliding_attention layers require "
                "config.sliding_window.'",
            )
