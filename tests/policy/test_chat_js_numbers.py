"""JavaScript numbers in what the model reads and writes (hpd.policy.chat): a call written ``1e3`` is the
argument ``1000``; a prompt rendered from a Python-side context equals the prompt rendered from the JSON
text Pi sends for it (``hpd serve``'s path), whatever Python floats the context holds."""

from __future__ import annotations

import json

from hpd.harness import wire
from hpd.harness.jsvalues import js_stringify
from hpd.harness.messages import assistant_message, tool_call, user_message
from hpd.policy import chat

NUMS = {"n": 1000.0, "z": -0.0, "big": 1e16, "huge": 2 ** 64, "tiny": 1e-7, "k": {"b": 1, "2": 2.0, "1": 3}}
TOOLS = [{"name": "t", "description": "numbers", "parameters": {
    "type": "object", "properties": {"n": {"type": "integer", "minimum": 1.0, "maximum": 1e21, "default": 2.0}}}}]


def test_parsed_call_holds_js_numbers():
    out = '<tool_call>\n{"name": "t", "arguments": {"n": 1e3, "z": -0, "x": 12345678901234567890, "k": {"b": 1, "2": 2}}}\n</tool_call>'
    m = chat.parse_action(out)
    args = m["content"][0]["arguments"]
    assert args == {"n": 1000, "z": 0, "x": 12345678901234567000, "k": {"2": 2, "b": 1}}
    assert type(args["n"]) is int and list(args["k"]) == ["2", "b"]
    # what our server sends back to Pi for that call: JSON.stringify of the parsed arguments
    sent = chat.to_openai_message(chat.parse_completion(out))["tool_calls"][0]["function"]["arguments"]
    assert sent == '{"n":1000,"z":0,"x":12345678901234567000,"k":{"2":2,"b":1}}'


def test_wire_arguments_are_json_stringify():
    ctx = {"messages": [user_message("q", 0), assistant_message([tool_call("c1", "t", NUMS)], timestamp=0)]}
    oai = wire.to_openai_messages(ctx)
    assert oai[-2]["tool_calls"][0]["function"]["arguments"] == (
        '{"n":1000,"z":0,"big":10000000000000000,"huge":18446744073709552000,"tiny":1e-7,"k":{"1":3,"2":2,"b":1}}')


def test_prompt_from_python_floats_equals_prompt_from_pis_request(tok):
    ctx = {"systemPrompt": "s", "tools": TOOLS,
           "messages": [user_message("q", 0), assistant_message([tool_call("c1", "t", NUMS)], timestamp=0),
                        {"role": "toolResult", "toolCallId": "c1", "toolName": "t", "isError": False, "timestamp": 0,
                         "content": [{"type": "text", "text": "ok"}]}]}
    ours = chat.render_prompt(tok, ctx)
    request = json.loads(js_stringify(wire.to_openai_request(ctx, model="m")))   # what hpd serve receives from Pi
    assert chat.render_chat_request(tok, request) == ours
    assert '"n": 1000,' in ours and "1000.0" not in ours and '"minimum": 1,' in ours and "2.0" not in ours
    assert '"huge": 18446744073709552000' in ours
