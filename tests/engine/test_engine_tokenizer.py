"""The engine's tokenizer and chat template against transformers' on the same files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.tiny_checkpoints import CHAT_TEMPLATE, IM_END, write_tokenizer

from dflashctl.engine.tokenizer import ChatTokenizer
from dflashctl.errors import EngineError

transformers = pytest.importorskip("transformers")

TEXTS = ["def is_prime(n):\n    return n > 1", "Walking in the rain…", "我们明天见面。", " a  b\t"]
CHATS = [
    [{"role": "user", "content": "Write a function is_prime."}],
    [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Translate: 我们明天见面。"},
        {"role": "assistant", "content": "See you tomorrow."},
        {"role": "user", "content": "Again?"},
    ],
]
# a template in the style of Qwen3's: raise_exception, loop variables, namespace, strip filters
QWEN_LIKE = (
    "{%- if messages[0].role != 'system' and messages[0].role != 'user' %}"
    "{{- raise_exception('the first message must be system or user') }}{%- endif %}"
    "{%- set ns = namespace(n=0) %}"
    "{%- for m in messages %}{%- set ns.n = ns.n + 1 %}"
    "{{- '<|im_start|>' + m.role + '\\n' + m.content | trim + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


@pytest.fixture(scope="module", params=["jinja-file", "tokenizer_config"])
def model_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp(request.param)
    write_tokenizer(out)
    if request.param == "tokenizer_config":
        (out / "chat_template.jinja").unlink()
        cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "chat_template": QWEN_LIKE}
        (out / "tokenizer_config.json").write_text(json.dumps(cfg))
    return out


def hf_tokenizer(model_dir: Path):
    template = (model_dir / "chat_template.jinja").read_text() if (
        model_dir / "chat_template.jinja"
    ).exists() else QWEN_LIKE  # fmt: skip
    tok = transformers.PreTrainedTokenizerFast(tokenizer_file=str(model_dir / "tokenizer.json"))
    tok.chat_template = template
    return tok


def test_encode_decode_match_transformers(model_dir: Path) -> None:
    ours, theirs = ChatTokenizer(model_dir), hf_tokenizer(model_dir)
    for text in TEXTS:
        ids = ours.encode(text)
        assert ids == theirs.encode(text, add_special_tokens=False)
        assert ours.decode(ids) == theirs.decode(ids, skip_special_tokens=True) == text
    assert ours.decode([*ours.encode("ok"), IM_END]) == "ok"  # special tokens are skipped


def test_chat_template_matches_transformers(model_dir: Path) -> None:
    ours, theirs = ChatTokenizer(model_dir), hf_tokenizer(model_dir)
    assert ours.template in (CHAT_TEMPLATE, QWEN_LIKE)
    for msgs in CHATS:
        for gen in (True, False):
            want = theirs.apply_chat_template(
                msgs, add_generation_prompt=gen, tokenize=True, return_dict=False
            )
            assert ours.apply_chat_template(msgs, add_generation_prompt=gen) == list(want)


def test_template_errors_are_engine_errors(model_dir: Path) -> None:
    ours = ChatTokenizer(model_dir)
    if ours.template != QWEN_LIKE:
        pytest.skip("the plain template has no raise_exception")
    with pytest.raises(EngineError, match="first message must be system or user"):
        ours.apply_chat_template([{"role": "assistant", "content": "hi"}])


def test_no_template_and_no_tokenizer(tmp_path: Path) -> None:
    write_tokenizer(tmp_path)
    (tmp_path / "chat_template.jinja").unlink()
    with pytest.raises(EngineError, match="no chat template"):
        ChatTokenizer(tmp_path).apply_chat_template(CHATS[0])
    with pytest.raises(EngineError, match=r"no tokenizer\.json"):
        ChatTokenizer(tmp_path / "missing")
