"""verify-config's serving rules (issue 28): a drafter trained without thinking traces beside a
target whose chat template thinks by default, and a serving context (`--max-model-len`)
beyond the drafter's training context. The templates are rendered by jinja2's sandbox, as
the engines render them; the registry entries are the shipped ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import run_main

from dflashctl.drafter.chat_template import read_chat_template, thinks_by_default

# the shape of Qwen3's template: the generation prompt leaves thinking to the model unless
# enable_thinking is false, when it writes an empty think block itself
THINKS = (
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n"
    "{%- if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n"
    "{%- endif %}{%- endif %}"
)
# thinking only when asked for
ASKS = THINKS.replace("enable_thinking is defined and enable_thinking is false",
                      "not (enable_thinking is defined and enable_thinking)")  # fmt: skip
PLAIN = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}assistant:"


@pytest.mark.parametrize(
    ("template", "thinks"),
    [(THINKS, True), (ASKS, False), (PLAIN, False),
     ("{{ raise_exception('no') }}{{ enable_thinking }}", None)],
)  # fmt: skip
def test_whether_a_template_thinks_by_default(template: str, thinks: bool | None) -> None:
    assert thinks_by_default(template) is thinks


def test_the_template_is_read_where_the_engines_read_it(tmp_path: Path) -> None:
    assert read_chat_template(tmp_path) is None
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": PLAIN}))
    assert read_chat_template(tmp_path) == PLAIN
    named = [{"name": "tool_use", "template": "x"}, {"name": "default", "template": THINKS}]
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": named}))
    assert read_chat_template(tmp_path) == THINKS
    (tmp_path / "chat_template.jinja").write_text(ASKS)  # the file wins, as in transformers
    assert read_chat_template(tmp_path) == ASKS


def _pair(tmp_path: Path, template: str | None, entry: str) -> tuple[Path, Path]:
    from dflashctl.drafter.registry import get_entry

    e = get_entry(entry)
    drafter = tmp_path / "drafter"
    drafter.mkdir()
    cfg = {
        "architectures": list(e.architectures), "model_type": e.model_type,
        "num_hidden_layers": e.num_hidden_layers, "hidden_size": e.hidden_size,
        "intermediate_size": e.intermediate_size, "num_attention_heads": e.num_attention_heads,
        "num_key_value_heads": e.num_key_value_heads, "head_dim": e.head_dim,
        "vocab_size": e.vocab_size, "block_size": e.block_size, "rope_theta": e.rope_theta,
        "num_target_layers": e.target.num_hidden_layers,
        "layer_types": list(e.layer_types or ["full_attention"] * e.num_hidden_layers),
        "dflash_config": {"mask_token_id": e.mask_token_id,
                          "target_layer_ids": list(e.target_layer_ids or [])},
    }  # fmt: skip
    cfg = {k: v for k, v in cfg.items() if v is not None}  # what the entry leaves open
    cfg["dflash_config"] = {k: v for k, v in cfg["dflash_config"].items() if v is not None}
    (drafter / "config.json").write_text(json.dumps(cfg))
    target = tmp_path / "target"
    target.mkdir()
    (target / "config.json").write_text(json.dumps({
        "architectures": ["Qwen3ForCausalLM"], "num_hidden_layers": e.target.num_hidden_layers,
        "hidden_size": e.target.hidden_size, "vocab_size": e.target.vocab_size}))  # fmt: skip
    if template is not None:
        (target / "tokenizer_config.json").write_text(json.dumps({"chat_template": template}))
    return drafter, target


def _rows(monkeypatch, capsys, *args: str) -> dict[str, dict]:
    code, text, err = run_main(monkeypatch, capsys, "verify-config", *args, "--json")
    assert code in (0, 1), err
    return {r["field"]: r for r in json.loads(text)["checks"]}


def test_a_non_thinking_drafter_beside_a_thinking_template_is_a_warning(
    tmp_path, monkeypatch, capsys
) -> None:
    drafter, target = _pair(tmp_path, THINKS, "qwen3-8b-dflash-b16")
    rows = _rows(monkeypatch, capsys, str(drafter), "--drafter", "qwen3-8b-dflash-b16",
                 "--target", str(target))  # fmt: skip
    assert rows["serving: thinking"] == {
        "field": "serving: thinking",
        "status": "warning",
        "level": "warning",
        "found": "the target's chat template thinks by default",
        "expected": "thinking off",
        "hint": "qwen3-8b-dflash-b16 was trained without thinking traces: with thinking on, "
        "acceptance falls to about a quarter (60 % → 25 %, z-lab#133); send "
        'chat_template_kwargs {"enable_thinking": false} with each request (vLLM, SGLang), or '
        "set it as the server's default chat template kwargs",
    }


def test_a_template_that_thinks_only_when_asked_is_ok(tmp_path, monkeypatch, capsys) -> None:
    drafter, target = _pair(tmp_path, ASKS, "qwen3-8b-dflash-b16")
    rows = _rows(monkeypatch, capsys, str(drafter), "--drafter", "qwen3-8b-dflash-b16",
                 "--target", str(target))  # fmt: skip
    assert rows["serving: thinking"] == {
        "field": "serving: thinking",
        "status": "ok",
        "level": "ok",
        "found": "the target's template does not think by default",
        "expected": None,
        "hint": "qwen3-8b-dflash-b16 was trained without thinking traces",
    }


def test_no_row_where_nothing_is_known(tmp_path, monkeypatch, capsys) -> None:
    # a drafter the registry says nothing about thinking for, and a target without a template
    drafter, target = _pair(tmp_path, None, "qwen3-8b-dflash-b16")
    rows = _rows(monkeypatch, capsys, str(drafter), "--drafter", "qwen3-8b-dflash-b16",
                 "--target", str(target))  # fmt: skip
    assert "serving: thinking" not in rows and "serving: context" not in rows


@pytest.mark.parametrize(
    ("max_len", "status"), [(4095, "ok"), (4096, "ok"), (4097, "warning"), (131072, "warning")]
)
def test_a_serving_context_past_the_training_context(
    tmp_path, monkeypatch, capsys, max_len: int, status: str
) -> None:
    drafter, _target = _pair(tmp_path, None, "qwen3.5-27b-dflash")
    rows = _rows(monkeypatch, capsys, str(drafter), "--drafter", "qwen3.5-27b-dflash",
                 "--max-model-len", str(max_len))  # fmt: skip
    row = rows["serving: context"]
    assert (row["status"], row["found"], row["expected"]) == (status, max_len, "≤ 4096")
    if status == "ok":
        assert row["hint"] == "within the 4096-token contexts qwen3.5-27b-dflash was trained on"
    else:
        assert row["hint"] == (
            "qwen3.5-27b-dflash was trained on 4096-token contexts: past them its RoPE positions "
            "are extrapolated and acceptance falls with the prompt's length (73 % at 3.4 K → 13 % "
            "at 16 K in a llama.cpp fork, buun-llama-cpp#32); serve --max-model-len 4096 where "
            "prompts allow, or expect speculation to help only on short prompts"
        )


def test_no_context_row_without_a_serving_context(tmp_path, monkeypatch, capsys) -> None:
    drafter, _target = _pair(tmp_path, None, "qwen3.5-27b-dflash")
    rows = _rows(monkeypatch, capsys, str(drafter), "--drafter", "qwen3.5-27b-dflash")
    assert "serving: context" not in rows


def test_rope_scaling_changes_the_advice(tmp_path, monkeypatch, capsys) -> None:
    drafter, _target = _pair(tmp_path, None, "qwen3.5-27b-dflash")
    cfg = json.loads((drafter / "config.json").read_text())
    cfg["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0,
                           "original_max_position_embeddings": 4096}  # fmt: skip
    (drafter / "config.json").write_text(json.dumps(cfg))
    rows = _rows(monkeypatch, capsys, str(drafter), "--drafter", "qwen3.5-27b-dflash",
                 "--max-model-len", "16384")  # fmt: skip
    assert rows["serving: context"]["status"] == "warning"
    assert rows["serving: context"]["hint"] == (
        "the drafter's rope_scaling (yarn) extends its positions; acceptance past the training "
        "context is not published: watch it by prompt length (dflashctl metrics)"
    )
    # the older spelling of the key, `type`
    cfg["rope_scaling"] = {
        "type": "linear",
        "factor": 4.0,
        "original_max_position_embeddings": 4096,
    }
    (drafter / "config.json").write_text(json.dumps(cfg))
    rows = _rows(monkeypatch, capsys, str(drafter), "--drafter", "qwen3.5-27b-dflash",
                 "--max-model-len", "16384")  # fmt: skip
    assert "rope_scaling (linear) extends" in rows["serving: context"]["hint"]


def test_a_bad_max_model_len_exits_2(tmp_path, monkeypatch, capsys) -> None:
    drafter, _target = _pair(tmp_path, None, "qwen3.5-27b-dflash")
    code, _out, err = run_main(monkeypatch, capsys, "verify-config", str(drafter),
                               "--max-model-len", "0")  # fmt: skip
    assert code == 2 and "Traceback" not in err


def test_the_registry_refuses_a_training_context_of_zero(tmp_path: Path) -> None:
    from dflashctl.drafter.registry import parse_entry
    from dflashctl.errors import DflashError

    src = Path(__file__).resolve().parent.parent / "playbooks/drafters/qwen3.5-27b-dflash.yaml"
    text = src.read_text().replace("training_context: 4096", "training_context: 0")
    with pytest.raises(DflashError, match="training_context"):
        parse_entry(tmp_path / "qwen3.5-27b-dflash.yaml", text)


def test_no_serving_rows_without_a_registry_entry() -> None:
    """A drafter the registry does not know: nothing to compare the serving context with."""
    from dflashctl.drafter.rules.base import Ctx
    from dflashctl.drafter.rules.serving import check_serving

    c = Ctx({}, None, None, None, "vllm", None, None, None, None, max_model_len=8192)  # type: ignore[arg-type]
    c.target_thinks = True
    check_serving(c)
    assert c.checks == []
