"""BFCL function docs -> hpd's rendered prompt; hpd's parser -> BFCL result values that BFCL's FC decoder reads
back to the same calls; replies that do not parse say why."""

import json


def test_prompt_uses_hpds_renderer_and_bfcls_tools(bfcl, tok):
    from hpd.bfcl import data, prompt

    case = data.load_cases("multiple")[0]
    tools = prompt.tools_for(case.entry["function"])
    assert all("." not in t["function"]["name"] for t in tools)
    assert tools[0]["function"]["parameters"]["type"] == "object"             # BFCL's dict -> JSON Schema object
    text = prompt.render(tok, case.entry["question"][0], tools)
    assert "<tools>" in text and case.entry["question"][0][-1]["content"] in text
    assert text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")  # thinking off, generation prompt


def test_reply_round_trips_through_bfcls_decoder(bfcl):
    from hpd.bfcl import prompt, score

    text = ('<tool_call>\n{"name": "math_hypot", "arguments": {"x": 3, "y": 4.0, "z": [1, 2], "u": "é"}}\n'
            '</tool_call>\n<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call><|im_end|>')
    r = prompt.parse_reply(text)
    assert r.error is None
    assert r.result == [{"math_hypot": '{"x":3,"y":4,"z":[1,2],"u":"é"}'}, {"f": "{}"}]   # JSON.parse: 4.0 is 4
    assert score.decode_ast(r.result) == r.calls == [{"math_hypot": {"x": 3, "y": 4, "z": [1, 2], "u": "é"}}, {"f": {}}]
    assert score.decode_execute(r.result) == ["math_hypot(x=3,y=4,z=[1, 2],u='é')", "f()"]
    assert r.message["tool_calls"][0]["function"]["name"] == "math_hypot"


def test_replies_that_do_not_parse_say_why(bfcl):
    from hpd.bfcl import prompt, score

    cases = {
        "I cannot help with that.": "no_call: text reply",
        "": "no_call: empty reply",
        '<tool_call>\n{"name": "f", "arguments": [1, 2]}\n</tool_call>': "malformed_call: f: Tool arguments must be",
        "<tool_call>\nnot json at all\n</tool_call>": "malformed_call: a <tool_call> block",
        '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>\n<tool_call>\n{"name": "g", "arguments": 7}'
        '\n</tool_call>': "malformed_call: g:",
    }
    for text, why in cases.items():
        r = prompt.parse_reply(text)
        assert r.error.startswith(why), (text, r.error)
        assert isinstance(r.result, str) and r.calls == []
        try:
            score.decode_ast(r.result)
            decoded = True
        except Exception:
            decoded = False
        assert not decoded                                # BFCL's FC decoder fails on a text result as well
    assert json.dumps(prompt.parse_reply(None).result) == '""'
