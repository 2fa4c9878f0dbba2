"""Conformance of the smolagents harness (hpd.harnesses.smolagents) with the real smolagents package.

Each scenario is run twice with the same scripted model replies:

* **the real package, as a user runs it**: ``ToolCallingAgent(tools=@tool functions, model=OpenAIModel)``
  and ``agent.run(task, return_full_result=True)`` in one call; the OpenAI client is a stub that records every
  ``chat.completions.create`` body (what would go on the wire) and answers the scripted reply (or raises);
* **hpd's view**: ``SmolagentsHarness.start(task, StaticEnv(hpd AgentTools))`` stepped boundary by boundary
  with the same replies as Pi assistant messages.

Compared: every request (messages, tools, ``tool_choice``, ``stop``, model), the number of model calls, the
end (``final_answer``/``max_steps``/``error`` against the run's state and output), the agent's memory
(``get_succinct_steps`` without timings: model output, tool calls, error type and text, observations,
final-answer flag). Each scenario also pins smolagents' own texts (``expect``): what the model reads after
prose without a call, an unknown tool, invalid arguments, a tool error, a final answer next to other calls,
and the forced final answer after ``max_steps``. No network, no model: ``make test`` runs them.
"""

from __future__ import annotations

import copy
import json
import re
from types import SimpleNamespace

import pytest

smolagents = pytest.importorskip("smolagents")

from smolagents import OpenAIModel, ToolCallingAgent, tool  # noqa: E402
from smolagents.monitoring import LogLevel  # noqa: E402

from hpd.harness import AgentTool, StaticEnv, assistant_message, text, tool_call, tool_result  # noqa: E402
from hpd.harness.interface import AgentHarness  # noqa: E402
from hpd.harnesses.smolagents import SMOLAGENTS_VERSION, SmolagentsHarness  # noqa: E402


# ------------------------------------------------------------------------------------------ the tools, twice
def _add(a: float, b: float) -> str:
    return str(a + b)


def _divide(a: float, b: float) -> str:
    if b == 0:
        raise ZeroDivisionError("division by zero")
    return str(a / b)


def _lookup(key: str, unit: str | None = None) -> str:
    return f"value-for-{key}" + (f" ({unit})" if unit else "")


@tool
def add(a: float, b: float) -> str:
    """Add two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return _add(a, b)


@tool
def divide(a: float, b: float) -> str:
    """Divide a by b.

    Args:
        a: The dividend.
        b: The divisor.
    """
    return _divide(a, b)


@tool
def lookup(key: str, unit: str | None = None) -> str:
    """Look up the value stored under a key.

    Args:
        key: The key to look up.
        unit: The unit to express the value in.
    """
    return _lookup(key, unit)


REAL_TOOLS = [add, divide, lookup]
PY = {"add": _add, "divide": _divide, "lookup": _lookup}


def hpd_env() -> StaticEnv:
    """The same tools as hpd AgentTools with JSON-Schema parameters (what a benchmark's catalog gives)."""
    out = []
    for t in REAL_TOOLS:
        props = {k: {"type": v["type"], "description": v["description"]} for k, v in t.inputs.items()}
        required = [k for k, v in t.inputs.items() if not v.get("nullable")]
        fn = PY[t.name]
        out.append(AgentTool(t.name, t.description, {"type": "object", "properties": props, "required": required},
                             (lambda fn: lambda cid, args: tool_result(fn(**args)))(fn)))
    return StaticEnv(out)


# ------------------------------------------------------------------------------------------ scenarios
def call(cid, name, args):
    return {"id": cid, "name": name, "args": args}


RETRY = "\nNow let's retry: take care not to repeat previous errors! If you have retried several times, try a completely different approach.\n"

SCENARIOS = [
    {"name": "final_answer_after_a_call", "task": "What is 2 + 3?",
     "replies": [{"calls": [call("c1", "add", {"a": 2, "b": 3})]},
                 {"calls": [call("c2", "final_answer", {"answer": "5"})]}],
     "expect": {"end": "final_answer", "answer": "5", "verdicts": ["calls", "finish"],
                "texts": {1: ["Observation:\n5"]}}},
    {"name": "prose_without_a_call_does_not_end", "task": "What is 2 + 3?",
     "replies": [{"content": "It is 5."},
                 {"content": "Thinking.", "calls": [call("c1", "final_answer", {"answer": "5"})]}],
     "expect": {"end": "final_answer", "answer": "5", "verdicts": ["parse_error", "finish"],
                "texts": {1: ["It is 5.", "Error:\nError while parsing tool call from model output: The model output "
                              "does not contain any JSON blob." + RETRY]}}},
    {"name": "prose_with_a_json_action_is_parsed", "task": "What is 2 + 3?",
     "replies": [{"content": 'Action:\n{"name": "add", "arguments": {"a": 2, "b": 3}}'},
                 {"calls": [call("c2", "final_answer", {"answer": "5"})]}],
     "expect": {"end": "final_answer", "answer": "5", "verdicts": ["calls", "finish"],
                "texts": {1: ["Observation:\n5", "'name': 'add'"]}}},
    {"name": "unknown_tool", "task": "What is 2 + 3?",
     "replies": [{"calls": [call("c1", "plus", {"a": 2, "b": 3})]},
                 {"calls": [call("c2", "final_answer", {"answer": "5"})]}],
     "expect": {"end": "final_answer", "answer": "5", "verdicts": ["unknown_tool", "finish"],
                "texts": {1: ["Error:\nUnknown tool plus, should be one of: add, divide, lookup, "
                              "final_answer." + RETRY]}}},
    {"name": "invalid_arguments", "task": "What is 2 + 3?",
     "replies": [{"calls": [call("c1", "add", {"a": "2", "b": 3})]},
                 {"calls": [call("c2", "add", {"a": 2})]},
                 {"calls": [call("c3", "add", {"a": 2, "b": 3, "c": 4})]},
                 {"calls": [call("c4", "add", "{'a': 2, b: 3")]},
                 {"calls": [call("c5", "final_answer", {"answer": "5"})]}],
     "max_steps": 6,
     "expect": {"end": "final_answer", "answer": "5",
                "verdicts": ["invalid_arguments"] * 4 + ["finish"],
                "texts": {1: ["Error:\nArgument a has type 'string' but should be 'number'" + RETRY],
                          2: ["Error:\nArgument b is required" + RETRY],
                          3: ["Error:\nArgument c is not in the tool's input schema" + RETRY],
                          4: ["Error:\nArgument has type 'str' but should be 'number'" + RETRY]}}},
    {"name": "tool_error", "task": "What is 1 / 0?",
     "replies": [{"calls": [call("c1", "divide", {"a": 1, "b": 0})]},
                 {"calls": [call("c2", "final_answer", {"answer": "undefined"})]}],
     "expect": {"end": "final_answer", "answer": "undefined", "verdicts": ["tool_error", "finish"],
                "texts": {1: ["Error:\nError executing tool 'divide' with arguments {'a': 1, 'b': 0}: "
                              "ZeroDivisionError: division by zero\nPlease try again or use another tool" + RETRY]}}},
    {"name": "parallel_calls", "task": "Add 1+2 and 3+4, and look up alpha.",
     "replies": [{"calls": [call("call_b", "add", {"a": 1, "b": 2}), call("call_a", "add", {"a": 3, "b": 4}),
                            call("call_c", "lookup", {"key": "alpha"})]},
                 {"calls": [call("f", "final_answer", {"answer": "3, 7, value-for-alpha"})]}],
     "expect": {"end": "final_answer", "answer": "3, 7, value-for-alpha", "verdicts": ["calls", "finish"],
                # observations in call-id order (smolagents sorts them), not source order
                "texts": {1: ["Observation:\n7\n3\nvalue-for-alpha"]}}},
    {"name": "parallel_calls_with_one_failure", "task": "Divide 1 by 0 and add 1+2.",
     "replies": [{"calls": [call("c1", "add", {"a": 1, "b": 2}), call("c2", "divide", {"a": 1, "b": 0})]},
                 {"calls": [call("f", "final_answer", {"answer": "3"})]}],
     "expect": {"end": "final_answer", "answer": "3", "verdicts": ["tool_error", "finish"],
                # the whole step fails: the successful call's observation is not in memory, nor the call ids
                "texts": {1: ["Error:\nError executing tool 'divide' with arguments {'a': 1, 'b': 0}: "
                              "ZeroDivisionError: division by zero"]},
                "absent": {1: ["Observation:", "Calling tools:"]}}},
    {"name": "final_answer_next_to_other_calls", "task": "What is 2 + 3?",
     "replies": [{"calls": [call("c1", "add", {"a": 2, "b": 3}), call("c2", "final_answer", {"answer": "5"})]},
                 {"calls": [call("c3", "final_answer", {"answer": "5"})]}],
     "expect": {"end": "final_answer", "answer": "5", "verdicts": ["rejected", "finish"],
                "texts": {1: ["Error:\nIf you want to return an answer, please do not perform any other tool calls "
                              "than the final answer tool call!" + RETRY]}}},
    {"name": "max_steps_forces_a_final_answer", "task": "What is 2 + 3?", "max_steps": 2,
     "replies": [{"calls": [call("c1", "lookup", {"key": "x"})]},
                 {"content": "still thinking"},
                 {"content": "The answer is 5."}],
     "expect": {"end": "max_steps", "answer": "The answer is 5.", "verdicts": ["calls", "parse_error", "finish"],
                "kinds": ["step", "step", "forced_final_answer"], "no_tools": [2],
                "texts": {2: ["An agent tried to answer a user query but it got stuck and failed to do so. You are "
                              "tasked with providing an answer instead. Here is the agent's memory:",
                              "Based on the above, please provide an answer to the following user task:\nWhat is 2 + 3?"]}}},
    {"name": "generation_error_ends_the_run", "task": "What is 2 + 3?",
     "replies": [{"calls": [call("c1", "add", {"a": 2, "b": 3})]}, {"raise": "provider down"}],
     "expect": {"end": "error", "error": "Error while generating output:\nprovider down",
                "verdicts": ["calls", "error"]}},
    {"name": "forced_final_answer_after_a_generation_error", "task": "What is 2 + 3?", "max_steps": 1,
     "replies": [{"calls": [call("c1", "add", {"a": 2, "b": 3})]}, {"raise": "provider down"}],
     # the answer is the content list smolagents builds for the failure, as the run returns it
     "expect": {"end": "max_steps",
                "answer": str([{"type": "text", "text": "Error in generating final LLM output: provider down"}]),
                "verdicts": ["calls", "error"]}},
]


# ------------------------------------------------------------------------------------------ the two runs
def _raw(args):
    return args if isinstance(args, str) else json.dumps(args)


class StubClient:
    """What OpenAIModel calls: ``client.chat.completions.create(**body)``; records bodies, answers the script."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.bodies = []
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    def create(self, **body):
        self.bodies.append(copy.deepcopy(body))
        r = self.replies[len(self.bodies) - 1]
        if "raise" in r:
            raise RuntimeError(r["raise"])
        tcs = [{"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": _raw(c["args"])}}
               for c in r.get("calls", [])] or None
        msg = SimpleNamespace(role="assistant", content=r.get("content"), tool_calls=tcs)
        return SimpleNamespace(choices=[SimpleNamespace(message=msg)],
                               usage=SimpleNamespace(prompt_tokens=0, completion_tokens=0))


def run_real(s):
    client = StubClient(s["replies"])
    model = OpenAIModel(model_id="hpd-policy", client=client, retry=False)
    agent = ToolCallingAgent(tools=REAL_TOOLS, model=model, max_steps=s.get("max_steps", 4),
                             verbosity_level=LogLevel.OFF)
    try:
        res = agent.run(s["task"], return_full_result=True)
        end = {"end": "max_steps" if res.state == "max_steps_error" else "final_answer", "answer": str(res.output)}
    except Exception as e:  # noqa: BLE001 - a generation error ends a smolagents run
        end = {"end": "error", "error": str(e)}
    return client.bodies, end, agent


def action(r):
    if "raise" in r:
        return assistant_message([text("")], "error", error_message=r["raise"])
    blocks = [text(r["content"])] if r.get("content") else []
    for c in r.get("calls", []):
        if isinstance(c["args"], str):
            blocks.append({**tool_call(c["id"], c["name"], {}), "rawArguments": c["args"]})
        else:
            blocks.append(tool_call(c["id"], c["name"], c["args"]))
    return assistant_message(blocks)


def run_hpd(s):
    h = SmolagentsHarness.start(s["task"], hpd_env(), max_steps=s.get("max_steps", 4))
    requests, kinds = [], []
    for r in s["replies"]:
        if h.done:
            break
        requests.append(h.request())
        kinds.append(h.boundary_kind)
        h.step(action(r))
    assert h.done
    end = {"end": h.end_reason}
    end.update({"answer": str(h.final_answer)} if h.end_reason != "error" else {"error": h.error})
    return requests, kinds, end, h


def _ids(x):
    """smolagents gives calls parsed from prose uuid4 ids; the harness gives them call_<n>_<k> (a departure)."""
    return re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|call_\d+_\d+", "<id>", x)


def _memory(agent):
    steps = agent.memory.get_succinct_steps()
    for st in steps:
        for k in ("timing", "token_usage", "model_output_message"):
            st.pop(k, None)
    return json.loads(_ids(json.dumps(steps, default=str)))


def _all_text(req):
    return "\n".join(b["text"] for m in req["messages"] for b in m["content"])


# ------------------------------------------------------------------------------------------ tests
@pytest.mark.parametrize("s", SCENARIOS, ids=[s["name"] for s in SCENARIOS])
def test_scenario_matches_the_real_package(s):
    bodies, real_end, real_agent = run_real(s)
    requests, kinds, end, h = run_hpd(s)
    exp = s["expect"]
    # the requests the model receives, boundary by boundary
    assert len(requests) == len(bodies), "number of model calls"
    for k, (ours, theirs) in enumerate(zip(requests, bodies)):
        assert json.loads(_ids(json.dumps(ours))) == json.loads(_ids(json.dumps(theirs, default=str))), f"request {k}"
    # termination, the answer, the memory (errors and observations included)
    assert end == real_end
    assert end["end"] == exp["end"]
    assert end.get("answer") == exp.get("answer") and end.get("error") == exp.get("error")
    assert _memory(h.agent) == _memory(real_agent)
    # the verdicts and smolagents' own texts
    assert [v.kind for v in h.step_verdicts()] == exp["verdicts"]
    assert kinds == exp.get("kinds", kinds)
    for k in exp.get("no_tools", []):
        assert "tools" not in requests[k] and "tools" not in bodies[k]
    for k, needles in exp.get("texts", {}).items():
        for n in needles:
            assert n in _all_text(requests[k]), f"boundary {k} lacks {n!r}"
    for k, needles in exp.get("absent", {}).items():
        for n in needles:
            assert n not in _all_text(requests[k]).split("New task:", 1)[1].split("\n", 2)[-1]


def test_verdict_reasons_are_the_texts_the_model_reads():
    s = next(x for x in SCENARIOS if x["name"] == "invalid_arguments")
    requests, _k, _e, h = run_hpd(s)
    for k, v in enumerate(h.step_verdicts()[:4], start=1):
        assert not v.valid and f"Error:\n{v.reason}\n" in _all_text(requests[k])


def test_harness_is_an_agent_harness_and_pi_is_too():
    from hpd.harness import Harness, user_message

    h = SmolagentsHarness.start("t", hpd_env())
    assert isinstance(h, AgentHarness)
    assert h.verdict() is None and h.boundary_kind == "step"
    ctx = h.context()
    assert ctx["systemPrompt"].startswith("You are an expert assistant who can solve any task using tool calls.")
    assert [t["name"] for t in ctx["tools"]] == ["add", "divide", "lookup", "final_answer"]
    assert ctx["messages"] == [{"role": "user", "content": "New task:\nt", "timestamp": 0}]
    h.close()
    p = Harness.start([user_message("t")], "sys", hpd_env())
    assert isinstance(p, AgentHarness)
    assert p.request()["tools"][0]["function"]["name"] == "add" and p.request()["messages"][0]["role"] == "system"
    assert p.verdict() is None


def test_fork_is_at_the_same_boundary_and_independent():
    h = SmolagentsHarness.start("What is 2 + 3?", hpd_env())
    h.step(action({"calls": [call("c1", "add", {"a": 2, "b": 3})]}))
    g = h.fork()
    assert g.request() == h.request() and g.boundary_kind == h.boundary_kind
    g.step(action({"calls": [call("f", "final_answer", {"answer": "5"})]}))
    assert g.done and g.end_reason == "final_answer" and not h.done
    h.step(action({"content": "no"}))
    assert not h.done and h.verdict().kind == "parse_error"
    h.close()


def test_tool_names_are_mapped_to_identifiers():
    from hpd.harnesses.smolagents import reference_to_smolagents, tool_name_map

    m = tool_name_map(["Calc: add", "Calc? add", "final_answer", "1st", "class"])
    assert m == {"Calc: add": "Calc__add", "Calc? add": "Calc__add_2", "final_answer": "final_answer_2",
                 "1st": "t_1st", "class": "t_class"}
    env = StaticEnv([AgentTool("Calc: add", "Add.", {"type": "object", "properties": {
        "a": {"type": "number", "description": "x"}}, "required": ["a"]},
        lambda cid, args: tool_result(str(args["a"])))])
    h = SmolagentsHarness.start("t", env)
    assert h.request()["tools"][0]["function"]["name"] == "Calc__add"
    ref = assistant_message([tool_call("c1", "Calc: add", {"a": 1})])
    h.step(reference_to_smolagents(ref, h.tool_names, final=False))
    h.step(reference_to_smolagents(assistant_message("one"), h.tool_names, final=True))
    assert h.end_reason == "final_answer" and h.final_answer == "one"
    assert [(c["name"], c["final_answer"]) for c in h.calls()] == [("Calc: add", False), ("final_answer", True)]


def test_pinned_version_is_installed():
    assert smolagents.__version__ == SMOLAGENTS_VERSION
