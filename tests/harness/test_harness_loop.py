"""Unit tests of the step driver (hpd.harness.Harness) against Pi 1.6 semantics."""

import copy

import pytest

from hpd.harness import (
    AgentTool, Harness, LoopConfig, assistant_message, run, text, tool_call, tool_result, user_message,
)
from hpd.harness.loop import LENGTH_STOP_TEXT

ADD_SCHEMA = {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}


def add_tool(calls=None):
    def execute(tid, args):
        if calls is not None:
            calls.append((tid, args))
        return tool_result(str(args["a"] + args["b"]), {"sum": args["a"] + args["b"]})
    return AgentTool("add", "Add two numbers", ADD_SCHEMA, execute)


def finish_tool():
    return AgentTool("finish", "Final answer", {"type": "object", "properties": {"answer": {"type": "string"}}},
                     lambda tid, a: tool_result("done", terminate=True))


def types(h):
    return [e["type"] for e in h.events]


def test_initial_boundary_and_system_message():
    h = Harness.start([user_message("2+3?")], "You are a test agent.", tools=[add_tool()])
    assert h.boundary_kind == "initial" and h.turn_index == 0 and not h.done
    sys_msg = h.transcript[0]
    assert sys_msg["role"] == "system" and sys_msg["content"] == "You are a test agent."
    assert sys_msg["toolsAdded"][0]["name"] == "add"
    ctx = h.context()
    assert ctx["systemPrompt"] == "You are a test agent." and [t["name"] for t in ctx["tools"]] == ["add"]
    assert [m["role"] for m in ctx["messages"]] == ["user"]
    assert types(h) == ["agent_start", "turn_start", "message_start", "message_end"]


def test_parallel_batch_source_order_and_error_texts():
    calls = []
    h = Harness.start([user_message("go")], "", tools=[add_tool(calls)])
    h.step(assistant_message([text("x"), tool_call("c1", "add", {"a": 2, "b": "3"}), tool_call("c2", "nope", {}),
                              tool_call("c3", "add", {"a": 1})]))
    res = h.last_tool_results
    assert [r["toolCallId"] for r in res] == ["c1", "c2", "c3"]
    assert res[0]["content"][0]["text"] == "5" and res[0]["isError"] is False
    assert res[1]["content"][0]["text"] == "Tool nope not found" and res[1]["isError"] is True
    assert res[2]["content"][0]["text"] == (
        'Validation failed for tool "add":\n  - b: missing\n\nReceived arguments:\n{\n  "a": 1\n}')
    # the tool got the coerced copy; the transcript keeps the raw string
    assert calls == [("c1", {"a": 2, "b": 3})]
    assert h.messages[1]["content"][1]["arguments"] == {"a": 2, "b": "3"}
    assert h.boundary_kind == "after_tool_batch" and h.turn_index == 1


def test_natural_end_and_agent_end_messages():
    h = Harness.start([user_message("hi")], "s", tools=[])
    h.step(assistant_message("hello"))
    assert h.done and h.end_reason == "natural"
    assert h.events[-1]["type"] == "agent_end"
    assert [m["role"] for m in h.events[-1]["messages"]] == ["user", "assistant"]
    with pytest.raises(RuntimeError):
        h.step(assistant_message("again"))


def test_all_terminate_vs_mixed():
    h = Harness.start([user_message("x")], "", tools=[finish_tool(), add_tool()])
    h.step(assistant_message([tool_call("c1", "finish", {"answer": "a"})]))
    assert h.done and h.end_reason == "terminate" and h.transcript[-1]["role"] == "toolResult"
    g = Harness.start([user_message("x")], "", tools=[finish_tool(), add_tool()])
    g.step(assistant_message([tool_call("c1", "finish", {}), tool_call("c2", "add", {"a": 1, "b": 1})]))
    assert not g.done and g.boundary_kind == "after_tool_batch"
    assert "terminate" not in g.transcript[-1]


def test_error_and_aborted_end_the_run_without_results():
    for reason in ("error", "aborted"):
        h = Harness.start([user_message("x")], "", tools=[add_tool()])
        h.step(assistant_message([tool_call("c1", "add", {"a": 1, "b": 2})], reason, error_message="boom"))
        assert h.done and h.end_reason == reason
        assert h.events[-2] == {"type": "turn_end", "message": h.transcript[-1], "toolResults": []}


def test_length_stop_fails_calls_and_continues():
    calls = []
    h = Harness.start([user_message("x")], "", tools=[add_tool(calls)])
    h.step(assistant_message([tool_call("c1", "add", {"a": 1, "b": 2})], "length"))
    assert calls == [] and not h.done
    assert h.last_tool_results[0]["content"][0]["text"] == LENGTH_STOP_TEXT.format(name="add")


def test_steering_and_follow_up_queues():
    cfg = LoopConfig(follow_up=[user_message("follow")])
    h = Harness.start([user_message("x")], "", tools=[add_tool()], config=cfg)
    h.steer(user_message("steer 1"))
    h.steer(user_message("steer 2"))
    h.step(assistant_message([tool_call("c1", "add", {"a": 1, "b": 2})]))
    assert h.boundary_kind == "after_steering"
    assert [m["role"] for m in h.messages][-2:] == ["toolResult", "user"]  # results precede steering
    assert h.messages[-1]["content"] == "steer 1"  # one-at-a-time
    h.step(assistant_message("ok"))
    assert h.boundary_kind == "after_steering" and h.messages[-1]["content"] == "steer 2"
    h.step(assistant_message("ok"))
    assert h.boundary_kind == "after_follow_up" and h.messages[-1]["content"] == "follow"
    h.step(assistant_message("bye"))
    assert h.done and h.end_reason == "natural"


def test_hooks_block_and_override():
    def before(ctx):
        if ctx["args"].get("a") == 13:
            return {"block": True}
        return None

    def after(ctx):
        return {"content": [text("overridden")], "isError": True}

    h = Harness.start([user_message("x")], "", tools=[add_tool()], config=LoopConfig(before_tool_call=before, after_tool_call=after))
    h.step(assistant_message([tool_call("c1", "add", {"a": 13, "b": 1}), tool_call("c2", "add", {"a": 1, "b": 1})]))
    r1, r2 = h.last_tool_results
    assert r1["content"][0]["text"] == "Tool execution was blocked" and r1["isError"]
    assert r2["content"][0]["text"] == "overridden" and r2["isError"] and r2["details"] == {"sum": 2}


def test_thrown_tool_error():
    boom = AgentTool("boom", "", {"type": "object"}, lambda t, a: (_ for _ in ()).throw(RuntimeError("disk on fire")))
    h = Harness.start([user_message("x")], "", tools=[boom])
    h.step(assistant_message([tool_call("c1", "boom", {})]))
    assert h.last_tool_results[0]["content"][0]["text"] == "disk on fire" and h.last_tool_results[0]["isError"]


def test_completion_order_simulated_by_delay():
    slow = AgentTool("slow", "", {"type": "object"}, lambda t, a: {**tool_result("s"), "delay": 50})
    fast = AgentTool("fast", "", {"type": "object"}, lambda t, a: tool_result("f"))
    h = Harness.start([user_message("x")], "", tools=[slow, fast])
    h.step(assistant_message([tool_call("c1", "slow", {}), tool_call("c2", "fast", {})]))
    ends = [e["toolCallId"] for e in h.events if e["type"] == "tool_execution_end"]
    assert ends == ["c2", "c1"]
    assert [r["toolCallId"] for r in h.last_tool_results] == ["c1", "c2"]
    assert h.last_tool_results[0]["durationMs"] == 50 and "delay" not in h.events[-1]


def test_max_turns_is_recorded_policy():
    h = Harness.start([user_message("x")], "", tools=[add_tool()], config=LoopConfig(max_turns=2))
    for _ in range(2):
        h.step(assistant_message([tool_call("c", "add", {"a": 1, "b": 1})]))
    assert h.done and h.end_reason == "max_turns" and h.turns_completed == 2
    rec = h.record()
    assert rec["max_turns"] == 2 and rec["max_turns_is_hpd_policy"] and rec["pi_version"] == "1.6.0"
    # a run that ends naturally on its last allowed turn is "natural"
    g = Harness.start([user_message("x")], "", tools=[add_tool()], config=LoopConfig(max_turns=1))
    g.step(assistant_message("done"))
    assert g.end_reason == "natural"


def test_fork_is_independent_and_env_forked():
    class Env:
        def __init__(self, log):
            self.log = log

        def tools(self):
            return [AgentTool("add", "", ADD_SCHEMA, lambda t, a: (self.log.append(t), tool_result("ok"))[1])]

        def fork(self):
            return Env(list(self.log))

    env = Env([])
    h = Harness.start([user_message("x")], "", env=env)
    h.step(assistant_message([tool_call("c1", "add", {"a": 1, "b": 1})]))
    snapshot = copy.deepcopy((h.transcript, h.events))
    g = h.fork()
    g.step(assistant_message([tool_call("c2", "add", {"a": 1, "b": 1})]))
    g.step(assistant_message("end"))
    assert g.done and not h.done
    assert (h.transcript, h.events) == snapshot
    assert env.log == ["c1"] and g.env.log == ["c1", "c2"]
    # same input from the same fork point -> byte-identical replay
    k1, k2 = h.fork(), h.fork()
    for k in (k1, k2):
        k.step(assistant_message("end"))
    assert k1.events == k2.events and k1.transcript == k2.transcript


def test_run_is_built_on_step_and_survives_policy_errors():
    replies = iter([assistant_message([tool_call("c1", "add", {"a": 1, "b": 2})])])

    def policy(ctx):
        try:
            return next(replies)
        except StopIteration:
            raise RuntimeError("model server down")

    h = run([user_message("x")], "sys", tools=[add_tool()], policy=policy)
    assert h.done and h.end_reason == "error"
    assert h.transcript[-1]["errorMessage"] == "model server down"


def test_import_surface():
    import hpd.harness as hh

    for name in ("Harness", "LoopConfig", "AgentTool", "user_message", "assistant_message", "tool_call", "text", "run"):
        assert hasattr(hh, name)
