"""Renderer/parser unit tests (hpd.policy.chat)."""

from __future__ import annotations

import pytest

from hpd.harness import Harness, LoopConfig
from hpd.harness.messages import assistant_message, text, tool_call, user_message
from hpd.policy import chat
from policy_helpers import ADD, lookup_env, sample_boundaries


def _strip_ids(msg):
    return [{k: v for k, v in b.items() if k != "id"} for b in msg["content"]]


# ----------------------------------------------------------------------------------------- rendering
def test_prompt_has_qwen3_structure(tok):
    b = sample_boundaries()[1]
    p = chat.render_prompt(tok, b["ctx"])
    assert p.startswith("<|im_start|>system\nYou are a careful travel and math agent.\n\n# Tools\n")
    assert '{"type": "function", "function": {"name": "add"' in p
    # the prior call renders with tojson (JS number normalisation: 3.0 -> 3) and both results as tool_response
    assert '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>' in p
    assert p.count("<tool_response>") == 2
    assert "Validation failed for tool" in p
    assert p.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_thinking_on_generation_prompt(tok):
    ctx = sample_boundaries()[0]["ctx"]
    assert chat.render_prompt(tok, ctx, enable_thinking=True).endswith("<|im_start|>assistant\n")


def test_orphan_call_and_error_turn(tok):
    b = sample_boundaries()[3]
    p = chat.render_prompt(tok, b["ctx"])
    assert "partial" not in p  # the error turn is dropped, as Pi does
    assert "No result provided" in p  # the orphan call gets Pi's synthetic result
    assert "Second question:\nand 4+4?" in p  # text parts joined with \n


@pytest.mark.parametrize("placement", ["system", "user"])
def test_document_injection(tok, placement):
    b = sample_boundaries()[5]
    p = chat.render_prompt(tok, b["ctx"], document=b["document"], doc_placement=placement)
    native = chat.render_prompt(tok, b["ctx"])
    block = f"{chat.DOC_HEADER}\n\n{b['document']}"
    assert block in p and block not in native
    if placement == "system":
        assert p.index(block) < p.index("# Tools")
        assert p.startswith("<|im_start|>system\nYou are a careful travel and math agent.\n\n" + block)
    else:
        assert p.endswith(f"<|im_start|>user\n{block}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")
    with pytest.raises(ValueError):
        chat.render_prompt(tok, b["ctx"], document="x", doc_placement="nowhere")


def test_render_action_forms(tok):
    assert chat.render_action(tok, assistant_message([text("Hi.")])) == "Hi.<|im_end|>"
    a = assistant_message([text("Let me add."), tool_call("x", "add", {"a": 1, "b": 2.5})])
    assert chat.render_action(tok, a) == (
        'Let me add.\n<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2.5}}\n</tool_call><|im_end|>')
    two = assistant_message([tool_call("x", "add", {"a": 1}), tool_call("y", "add", {})])
    assert chat.render_action(tok, two) == (
        '<tool_call>\n{"name": "add", "arguments": {"a": 1}}\n</tool_call>\n'
        '<tool_call>\n{"name": "add", "arguments": {}}\n</tool_call><|im_end|>')
    think = sample_boundaries()[6]["action"]
    assert chat.render_action(tok, think, enable_thinking=True).startswith("<think>\nI should add 2 and 3.\n</think>\n\nAdding.\n<tool_call>")
    # thinking off: the thinking block is dropped from the target
    assert chat.render_action(tok, think, enable_thinking=False).startswith("Adding.\n<tool_call>")
    assert chat.render_text_completion(tok, "doc") == "doc<|im_end|>"


def test_encode_example_matches_joint_tokenization_for_samples(tok):
    for b in sample_boundaries():
        th = bool(b.get("thinking"))
        p = chat.render_prompt(tok, b["ctx"], document=b.get("document"), enable_thinking=th)
        c = chat.render_action(tok, b["action"], enable_thinking=th)
        pi, ci = chat.encode_example(tok, p, c)
        assert pi + ci == tok(p + c, add_special_tokens=False)["input_ids"], b["name"]
        assert tok.decode(ci) == c
        assert ci[-1] == tok.convert_tokens_to_ids("<|im_end|>")


# ----------------------------------------------------------------------------------------- parsing
def test_parse_roundtrips_rendered_actions(tok):
    for b in sample_boundaries():
        th = bool(b.get("thinking"))
        a = b["action"]
        got = chat.parse_action(chat.render_action(tok, a, enable_thinking=th))
        want = a if th else {**a, "content": [x for x in a["content"] if x["type"] != "thinking"]}
        assert _strip_ids(got) == _strip_ids({**want, "content": [
            {**x, "arguments": chat.js_json(x["arguments"])} if x["type"] == "toolCall" else x for x in want["content"]]})
        assert got["stopReason"] == ("toolUse" if any(x["type"] == "toolCall" for x in a["content"]) else "stop")


def test_parse_ids_and_stop_reasons():
    m = chat.parse_action('<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{"name": "b"}</tool_call>',
                          id_prefix="t3")
    assert [b["id"] for b in m["content"]] == ["t3_0", "t3_1"]
    assert [b["name"] for b in m["content"]] == ["a", "b"] and m["stopReason"] == "toolUse"
    assert chat.parse_action("just text")["stopReason"] == "stop"
    assert chat.parse_action('<tool_call>{"name": "a", "arg', finish_reason="length")["stopReason"] == "length"
    assert chat.parse_action("")["content"] == []


def test_parse_stops_at_end_of_turn_and_reads_thinking():
    m = chat.parse_action("<think>\nplan\n</think>\n\nanswer<|im_end|>\ngarbage<|im_start|>")
    assert m["content"] == [{"type": "thinking", "thinking": "plan", "thinkingSignature": "reasoning_content"},
                            {"type": "text", "text": "answer"}]
    m = chat.parse_action("<think>\nunfinished thought", finish_reason="length")
    assert m["content"][0]["thinking"] == "unfinished thought" and len(m["content"]) == 1


def test_parse_broken_json_salvages_name_with_arguments_error():
    m = chat.parse_action('<tool_call>\n{"name": "add", "arguments": {"a": 1,}}\n</tool_call>')
    [c] = m["content"]
    assert c["name"] == "add" and c["arguments"] == {}
    assert c["argumentsError"].startswith("Expected double-quoted property name in JSON at position ")
    assert c["argumentsError"].endswith('\n\nReceived arguments:\n{"a": 1,}')
    # an unterminated call (cut by the token limit) whose arguments are complete still parses
    m = chat.parse_action('<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}')
    assert m["content"][0]["arguments"] == {"a": 1, "b": 2} and "argumentsError" not in m["content"][0]
    # Pi's repairJson: a raw newline inside a string is escaped, so this parses
    m = chat.parse_action('<tool_call>{"name": "echo", "arguments": {"s": "a\nb"}}</tool_call>')
    assert m["content"][0]["arguments"] == {"s": "a\nb"}


def test_parse_non_object_and_string_arguments():
    m = chat.parse_action('<tool_call>{"name": "f", "arguments": [1, 2]}</tool_call>')
    assert m["content"][0]["arguments"] == {}
    assert m["content"][0]["argumentsError"] == "Tool arguments must be a JSON object\n\nReceived arguments:\n[1,2]"
    m = chat.parse_action('<tool_call>{"name": "f", "arguments": "{\\"x\\": 1}"}</tool_call>')
    assert m["content"][0]["arguments"] == {"x": 1}


def test_parse_call_without_name_stays_text():
    txt = 'Sure.\n<tool_call>\n{"arguments": {"a": 1}}\n</tool_call>'
    m = chat.parse_action(txt)
    assert m["stopReason"] == "stop"
    assert m["content"] == [{"type": "text", "text": txt}]


def test_harness_reports_arguments_error_like_pi():
    """The parsed message drives the Python harness: unparseable arguments reach the model as Pi's text."""
    h = Harness.start([user_message("go")], "sys", lookup_env(), LoopConfig())
    h.step(chat.parse_action('<tool_call>{"name": "lookup", "arguments": {"key": alpha}}</tool_call>'))
    [res] = h.last_tool_results
    assert res["isError"]
    t = res["content"][0]["text"]
    assert t.startswith('Invalid arguments for tool "lookup": ')
    assert t.endswith('Received arguments:\n{"key": alpha}')


def test_server_message_agrees_with_parse_action():
    from hpd.harness import wire

    for txt in ['hi <tool_call>{"name": "add", "arguments": {"a": 1, "b": "2"}}</tool_call>',
                '<tool_call>{"name": "add", "arguments": {"a": 1,,}}</tool_call>',
                '<think>x</think>ok']:
        p = chat.parse_completion(txt)
        resp = {"choices": [{"index": 0, "message": chat.to_openai_message(p, id_prefix="call"),
                             "finish_reason": chat.finish_reason_for(p, False)}]}
        via_pi = wire.from_chat_completion(resp)
        assert via_pi["content"] == chat.parse_action(txt)["content"]
        assert via_pi["stopReason"] == chat.parse_action(txt)["stopReason"]


def test_openai_tools_accepts_pi_and_openai_shapes():
    assert chat.openai_tools([ADD]) == chat.openai_tools([{"type": "function", "function": ADD}])
    assert chat.template_tools([]) is None
