"""Conformance scenarios: the data format (see ``scenarios/README.md``) and how this loop runs one.

A scenario scripts everything that is not the loop: the assistant reply at every provider boundary,
what each tool answers (result / error result / throw / terminate / completion delay / side effects),
hook rules, queued steering and follow-up messages, abort points. The same scenario runs through
:class:`hpd.harness.Harness` (:func:`run_python`) and through the real Pi loop
(:func:`hpd.harness.bridge.run_pi`); both record the events, the final transcript and the context
handed to the provider at every boundary.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpd.harness.jsvalues import js_json, js_stringify
from hpd.harness.loop import Harness, LoopConfig
from hpd.harness.messages import assistant_message, system_message, user_message
from hpd.harness.tools import AgentTool
from hpd.harness.wire import parse_tool_call_arguments


class ScenarioError(ValueError):
    """A scenario file that is not valid (one-line message)."""


@dataclass
class Scenario:
    name: str
    data: dict
    path: str = ""
    description: str = ""
    tools: list = field(default_factory=list)


SCENARIO_KEYS = {
    "name", "description", "system_prompt", "context", "tool_execution", "steering_mode", "follow_up_mode",
    "tools", "prompts", "steering", "follow_up", "replies", "hooks", "covers",
}
TOOL_KEYS = {"name", "description", "parameters", "execution_mode", "label", "behaviour", "calls"}
BEHAVIOUR_KEYS = {"result", "details", "error", "throw", "terminate", "delay", "steer", "follow_up", "abort", "echo", "is_error"}


def load_scenario(path: str | Path) -> Scenario:
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ScenarioError(f"{p}: cannot read scenario JSON: {e}") from None
    return parse_scenario(data, str(p))


def parse_scenario(data: Any, where: str = "<scenario>") -> Scenario:
    if not isinstance(data, dict):
        raise ScenarioError(f"{where}: a scenario must be a JSON object")
    unknown = set(data) - SCENARIO_KEYS
    if unknown:
        raise ScenarioError(f"{where}: unknown keys {sorted(unknown)}")
    name = data.get("name") or Path(where).stem
    if not isinstance(data.get("replies"), list) or not data["replies"]:
        raise ScenarioError(f"{where}: 'replies' must be a non-empty list (one assistant reply per boundary)")
    if not isinstance(data.get("prompts", ["x"]), list):
        raise ScenarioError(f"{where}: 'prompts' must be a list")
    for t in data.get("tools", []):
        if not isinstance(t, dict) or "name" not in t:
            raise ScenarioError(f"{where}: every tool needs a name")
        bad = set(t) - TOOL_KEYS
        if bad:
            raise ScenarioError(f"{where}: tool {t['name']!r}: unknown keys {sorted(bad)}")
        for b in [t.get("behaviour", {})] + list((t.get("calls") or {}).values()):
            badb = set(b) - BEHAVIOUR_KEYS
            if badb:
                raise ScenarioError(f"{where}: tool {t['name']!r}: unknown behaviour keys {sorted(badb)}")
    if data.get("tool_execution", "parallel") not in ("parallel", "sequential"):
        raise ScenarioError(f"{where}: tool_execution must be 'parallel' or 'sequential'")
    for k in ("steering_mode", "follow_up_mode"):
        if data.get(k, "one-at-a-time") not in ("one-at-a-time", "all"):
            raise ScenarioError(f"{where}: {k} must be 'one-at-a-time' or 'all'")
    if data.get("context", "agent") not in ("agent", "bare"):
        raise ScenarioError(f"{where}: context must be 'agent' or 'bare'")
    return Scenario(name=name, data=data, path=where, description=data.get("description", ""))


def load_scenarios(folder: str | Path) -> list[Scenario]:
    d = Path(folder)
    if not d.is_dir():
        raise ScenarioError(f"scenario folder not found: {d}")
    files = sorted(d.glob("*.json"))
    if not files:
        raise ScenarioError(f"no *.json scenarios in {d}")
    return [load_scenario(f) for f in files]


# ----------------------------------------------------------------------------------------------- messages
def as_user(m: Any) -> dict:
    """A prompt / steering / follow-up entry: a string (user message, timestamp 0) or a message dict."""
    if isinstance(m, str):
        return user_message(m, 0)
    if isinstance(m, dict):
        return m
    raise ScenarioError(f"a queued message must be a string or a message object, not {m!r}")


def reply_message(reply: dict, *, parse_raw: bool) -> dict:
    """The assistant message of a scripted reply.

    Shorthand keys: ``text``, ``thinking``, ``tool_calls`` (``{"id","name","arguments"}`` or
    ``{"id","name","raw": "<argument text>"}``), ``content`` (explicit blocks, instead of the three
    before), ``stop_reason``, ``error_message``. With ``parse_raw`` the raw argument text is parsed here
    (Python's pi-ai ``parseToolCallArguments``); without, the block keeps ``rawArguments`` for the
    bridge to parse with the real pi-ai.
    """
    if reply.get("role") == "assistant":
        msg = copy.deepcopy(reply)
        msg.setdefault("timestamp", 0)
        return msg
    if "content" in reply:
        blocks = copy.deepcopy(reply["content"])
    else:
        blocks = []
        if reply.get("thinking") is not None:
            blocks.append({"type": "thinking", "thinking": reply["thinking"]})
        if reply.get("text") is not None:
            blocks.append({"type": "text", "text": reply["text"]})
        for c in reply.get("tool_calls", []):
            block = {"type": "toolCall", "id": c.get("id"), "name": c.get("name")}
            if "raw" in c:
                if parse_raw:
                    block.update(parse_tool_call_arguments(c["raw"]))
                else:
                    block["arguments"] = {}
                    block["rawArguments"] = c["raw"]
            else:
                block["arguments"] = copy.deepcopy(c.get("arguments", {}))
            blocks.append(block)
    return assistant_message(
        blocks, reply.get("stop_reason"), error_message=reply.get("error_message"), timestamp=0,
        provider="scripted", model="scripted",
    )


# ----------------------------------------------------------------------------------------------- tools & hooks
class Controller:
    """Side effects a tool or reply may have: steer, follow-up, abort (applied to the Python harness)."""

    def __init__(self) -> None:
        self.harness: Harness | None = None

    def apply(self, b: dict) -> None:
        h = self.harness
        assert h is not None
        for m in b.get("steer", []) or []:
            h.steer(as_user(m))
        for m in b.get("follow_up", []) or []:
            h.follow_up(as_user(m))
        if b.get("abort"):
            h.abort()


def behaviour_for(tool: dict, tool_call_id: str) -> dict:
    calls = tool.get("calls") or {}
    return calls.get(tool_call_id, tool.get("behaviour", {}))


def tool_answer(tool: dict, tool_call_id: str, args: Any) -> dict:
    """What a scripted tool answers: ``{"result"|"throw", "delay", side effects}`` (shared by both loops)."""
    b = behaviour_for(tool, tool_call_id)
    ans: dict = {"delay": int(b.get("delay", 0) or 0)}
    for k in ("steer", "follow_up", "abort"):
        if b.get(k):
            ans[k] = b[k]
    if "throw" in b:
        ans["throw"] = str(b["throw"])
        return ans
    if "error" in b:
        res = {"content": [{"type": "text", "text": str(b["error"])}], "details": b.get("details", {}), "isError": True}
    else:
        r = b.get("result")
        if b.get("echo") or r is None:
            text = js_stringify(dict(sorted(args.items())) if isinstance(args, dict) else args)
            res = {"content": [{"type": "text", "text": text if r is None else str(r)}], "details": b.get("details", {})}
        elif isinstance(r, dict):
            res = copy.deepcopy(r)
        else:
            res = {"content": [{"type": "text", "text": str(r)}], "details": b.get("details", {})}
        if b.get("is_error") is not None:
            res["isError"] = bool(b["is_error"])
    if b.get("terminate") is not None:
        res["terminate"] = bool(b["terminate"])
    ans["result"] = res
    return ans


def _args_match(want: dict | None, args: Any) -> bool:
    if not want:
        return True
    return isinstance(args, dict) and all(args.get(k) == v for k, v in want.items())


def before_answer(rules: list, tool_call: dict, args: Any) -> dict:
    """A before-hook rule's answer: ``{"result": {"block", "reason"?, "terminate"?} | None}`` or ``{"throw"}``."""
    for r in rules:
        if r.get("tool", "*") in ("*", tool_call.get("name")) and _args_match(r.get("args"), args):
            if "throw" in r:
                return {"throw": str(r["throw"])}
            res = {"block": bool(r.get("block", True))}
            if "reason" in r:
                res["reason"] = r["reason"]
            if "terminate" in r:
                res["terminate"] = r["terminate"]
            return {"result": res}
    return {"result": None}


def after_answer(rules: list, tool_call: dict, args: Any, result: dict, is_error: bool) -> dict:
    for r in rules:
        if r.get("tool", "*") in ("*", tool_call.get("name")) and _args_match(r.get("args"), args):
            if "only_errors" in r and bool(r["only_errors"]) != bool(is_error):
                continue
            if "throw" in r:
                return {"throw": str(r["throw"])}
            res = {k: copy.deepcopy(r[k]) for k in ("content", "details", "isError", "terminate") if k in r}
            if isinstance(res.get("content"), str):
                res["content"] = [{"type": "text", "text": res["content"]}]
            return {"result": res}
    return {"result": None}


class _Thrown(Exception):
    def __init__(self, message: str, delay: int = 0):
        super().__init__(message)
        self.delay = delay


def _python_tool(spec: dict, ctrl: Controller) -> AgentTool:
    def execute(tool_call_id: str, args: dict) -> dict:
        ans = tool_answer(spec, tool_call_id, args)
        ctrl.apply(ans)
        if "throw" in ans:
            raise _Thrown(ans["throw"], ans["delay"])
        res = dict(ans["result"])
        if ans["delay"]:
            res["delay"] = ans["delay"]
        return res

    return AgentTool(
        name=spec["name"], description=spec.get("description", ""), parameters=spec.get("parameters", {"type": "object"}),
        execute=execute, label=spec.get("label", spec["name"]), execution_mode=spec.get("execution_mode"),
    )


class ScenarioEnv:
    def __init__(self, tools: list[AgentTool]):
        self._tools = tools

    def tools(self) -> list[AgentTool]:
        return self._tools

    def fork(self) -> "ScenarioEnv":
        return self


def initial_messages(s: Scenario) -> list[dict]:
    """The context messages before the prompts: Pi ``Agent``'s leading system message, or none (``bare``)."""
    d = s.data
    if d.get("context", "agent") == "bare":
        return []
    decls = [
        {"name": t["name"], "description": t.get("description", ""), "parameters": js_json(t.get("parameters", {"type": "object"}))}
        for t in d.get("tools", [])
    ]
    if not d.get("system_prompt") and not decls:
        return []
    return [system_message(d.get("system_prompt", ""), tools_added=decls or None, timestamp=0)]


def _raise(exc: Exception):
    raise exc


def run_python(s: Scenario) -> dict:
    """Run a scenario through :class:`Harness`; returns ``{"events","transcript","contexts","messages"}``."""
    d = s.data
    ctrl = Controller()
    tools = [_python_tool(t, ctrl) for t in d.get("tools", [])]
    hooks = d.get("hooks", {})
    before_rules, after_rules = hooks.get("before"), hooks.get("after")

    def before(ctx: dict):
        a = before_answer(before_rules, ctx["toolCall"], ctx["args"])
        return _raise(_Thrown(a["throw"])) if "throw" in a else a["result"]

    def after(ctx: dict):
        a = after_answer(after_rules, ctx["toolCall"], ctx["args"], ctx["result"], ctx["isError"])
        return _raise(_Thrown(a["throw"])) if "throw" in a else a["result"]

    config = LoopConfig(
        tool_execution=d.get("tool_execution", "parallel"),
        before_tool_call=before if before_rules else None,
        after_tool_call=after if after_rules else None,
        steering=[as_user(m) for m in d.get("steering", [])],
        follow_up=[as_user(m) for m in d.get("follow_up", [])],
        steering_mode=d.get("steering_mode", "one-at-a-time"),
        follow_up_mode=d.get("follow_up_mode", "one-at-a-time"),
    )
    prompts = [as_user(p) for p in d.get("prompts", ["Go."])]
    h = Harness.start(prompts, env=ScenarioEnv(tools), config=config, messages=initial_messages(s))
    ctrl.harness = h
    contexts, replies = [], d["replies"]
    while not h.done:
        contexts.append(json.loads(json.dumps(h.provider_context())))
        if len(contexts) > len(replies):
            raise ScenarioError(f"{s.name}: ran out of scripted replies at boundary {len(contexts) - 1}")
        reply = replies[len(contexts) - 1]
        ctrl.apply(reply)
        h.step(reply_message(reply, parse_raw=True))
    return {"events": h.events, "transcript": h.transcript, "contexts": contexts, "messages": h.new_messages,
            "end_reason": h.end_reason}
