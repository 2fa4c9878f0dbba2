"""Pi's Harness as an AgentHarness: request() is Pi's wire request, verdict() Pi's judgement with Pi's texts."""

from hpd.harness import AgentTool, Harness, LoopConfig, StaticEnv, assistant_message, text, tool_call, tool_result, user_message
from hpd.harness.interface import AgentHarness, Verdict
from hpd.harness.wire import to_openai_messages, to_openai_tools


def _env():
    def boom(cid, args):
        raise RuntimeError("backend down")
    schema = {"type": "object", "properties": {"a": {"type": "number"}}, "required": ["a"]}
    return StaticEnv([AgentTool("add", "Add.", schema, lambda cid, args: tool_result(str(args["a"]))),
                      AgentTool("boom", "Fails.", schema, boom)])


def _after(msg):
    h = Harness.start([user_message("q")], "sys", _env(), LoopConfig(max_turns=5))
    h.step(msg)
    return h


def test_pi_harness_satisfies_the_protocol():
    h = Harness.start([user_message("q")], "sys", _env())
    assert isinstance(h, AgentHarness) and h.verdict() is None
    assert h.request() == {"messages": to_openai_messages(h.context()), "tools": to_openai_tools(h.context()["tools"])}


def test_pi_verdicts_carry_pis_texts():
    assert _after(assistant_message([tool_call("c", "add", {"a": 1})])).verdict() == Verdict(True, "calls")
    assert _after(assistant_message("done")).verdict() == Verdict(True, "finish")
    v = _after(assistant_message([tool_call("c", "nope", {})])).verdict()
    assert v == Verdict(False, "unknown_tool", "Tool nope not found")
    v = _after(assistant_message([tool_call("c", "add", {"a": "x"})])).verdict()
    assert not v.valid and v.kind == "invalid_arguments" and v.reason.startswith('Validation failed for tool "add":')
    v = _after(assistant_message([tool_call("c", "boom", {"a": 1})])).verdict()
    assert v == Verdict(True, "tool_error", "backend down")
    v = _after(assistant_message([tool_call("c", "add", {"a": 1})], "length")).verdict()
    assert not v.valid and v.kind == "length" and v.reason.startswith('Tool call "add" was not executed')
    v = _after(assistant_message([text("")], "error", error_message="provider down")).verdict()
    assert v == Verdict(False, "error", "provider down")
