"""smolagents' ``ToolCallingAgent`` as an hpd harness (:class:`SmolagentsHarness`, an
:class:`~hpd.harness.interface.AgentHarness`).

The REAL package runs the loop (``smolagents`` pinned in requirements.txt, :data:`SMOLAGENTS_VERSION`): its
``MultiStepAgent._run_stream`` / ``ToolCallingAgent._step_stream`` / ``process_tool_calls`` /
``execute_tool_call`` / ``provide_final_answer``, its prompt templates (``prompts/toolcalling_agent.yaml``),
its memory rendering (``memory.py``) and its request building (``Model._prepare_completion_kwargs``). hpd only
supplies the two things a smolagents user supplies: a ``Model`` and ``Tool`` objects.

**How the loop is driven step by step.** smolagents' loop calls ``model.generate(...)`` synchronously from
deep inside a generator (``agent.run(task, stream=True)``), and it cannot be resumed from outside between the
request and the reply: a generator can only pause at its own ``yield`` points, and those come *after* each
model call. So the agent runs on a worker thread, and its model (:class:`ActionModel`, a smolagents ``Model``
subclass) blocks in ``generate`` on a queue: it builds the request exactly as smolagents' ``OpenAIModel``
does (``_prepare_completion_kwargs`` with ``model``, ``custom_role_conversions``,
``convert_images_to_image_urls=True``), hands it to the driving thread (a *boundary*: :meth:`request`,
:meth:`context`), and waits for the action. :meth:`SmolagentsHarness.step` puts the action on the queue and
waits until the agent is back at its next model call or has finished. Exactly one thread runs at a time,
so the run is deterministic; everything the stream yields in between (``ToolCall``, ``ToolOutput``,
``ActionOutput``, ``ActionStep``, ``FinalAnswerStep``) becomes :attr:`events`.

**Boundaries.** Every model call is one: ``step`` (an action step; tools offered, ``tool_choice``
``"required"``, stop sequences ``Observation:``/``Calling tools:``) and ``forced_final_answer`` (when
``max_steps`` action steps passed without a ``final_answer`` call, smolagents asks once more, with its
``final_answer`` pre/post messages and no tools; the reply's content is the run's answer).

**Actions** are Pi assistant messages (the one action form of hpd, :mod:`hpd.harness.interface`), turned
into what an OpenAI-compatible API returns to ``OpenAIModel``: ``content`` = the non-blank text blocks
joined (``None`` when there are none; thinking is dropped), ``tool_calls`` with the block's ``id`` and name
and the arguments as JSON text (a block with Pi's ``argumentsError`` sends its raw text, or
``rawArguments`` when given, so smolagents sees the same unparseable string). A reply with ``stopReason``
``error``/``aborted`` makes ``generate`` raise, as a failing API call does: smolagents ends the run
(``AgentGenerationError``; end reason ``error``), or, at the forced final answer, answers
``Error in generating final LLM output: ...`` (its own rule).

**Termination** (smolagents' rules, not Pi's): a step whose only call is ``final_answer`` ends the run
(``end_reason == "final_answer"``); prose without a call is a parsing error the model sees and the loop
goes on; after ``max_steps`` steps the forced final answer ends it (``"max_steps"``); a generation error
ends it (``"error"``). :meth:`verdict` maps the step's error (``AgentParsingError``,
``AgentToolCallError``, ``AgentToolExecutionError``, ``AgentExecutionError``) onto a
:class:`~hpd.harness.interface.Verdict` whose ``reason`` is smolagents' text.

**Tools** are the environment's (:class:`hpd.harness.tools.Environment`, e.g. the task's ``ReplayEnv``) as
smolagents ``Tool`` objects (:class:`EnvTool`): ``inputs`` from the JSON-Schema ``parameters`` (an optional
property is ``nullable``; other schema keys pass through to the rendered tool), ``output_type`` ``string``;
``forward`` calls the hpd tool and returns its text; a thrown error (the replay environment's errors) or an
``isError`` result raises, and smolagents writes ``Error executing tool '<name>' with arguments {...}:
<Type>: <text>``. smolagents requires tool names to be Python identifiers, so each name is mapped
(:func:`tool_name_map`: characters outside ``[A-Za-z0-9_]`` become ``_``); the model sees and calls the
mapped names, :attr:`tool_names` holds the map, and :meth:`calls` maps them back.

Departures (all chosen to keep runs deterministic, none changes a text the model sees except the second):

- ``max_tool_threads=1`` by default: parallel calls run on smolagents' ``ThreadPoolExecutor`` with one
  worker, so in source order (smolagents' default is several workers, completion order by timing);
  observations are ordered by call id either way (smolagents sorts them).
- ids of calls smolagents parses out of prose (``Model.parse_tool_calls`` gives them ``uuid4()`` ids) are
  renamed ``call_<model call>_<k>``.
- Planning steps (``planning_interval``), streaming outputs, managed agents, images and
  ``final_answer_checks`` are not offered.
- ``fork()`` re-drives a fresh agent through the same actions from a fork of the environment as it was at
  the start (a running thread cannot be copied); with a deterministic environment the fork is at the same
  boundary with the same request (a test checks this).
"""

from __future__ import annotations

import copy
import functools
import queue
import re
import threading
import weakref
from typing import Any

from hpd.harness.interface import Verdict
from hpd.harness.jsvalues import js_stringify
from hpd.harness.messages import assistant_message, text

SMOLAGENTS_VERSION = "1.26.0"
END_REASONS = ("final_answer", "max_steps", "error")
BOUNDARY_KINDS = ("step", "forced_final_answer")
ARGS_MARK = "\n\nReceived arguments:\n"   # how Pi's argumentsError carries the raw text (hpd.harness.wire)


class GenerationFailed(Exception):
    """Raised by :class:`ActionModel` for an ``error``/``aborted`` action (a failed API call)."""


class _Closed(BaseException):
    """Unwinds an abandoned agent thread (not an ``Exception``: smolagents must not catch it)."""


class ToolFailed(Exception):
    """An hpd tool result with ``isError`` true, raised so that smolagents reports it as a tool error."""


# --------------------------------------------------------------------------------------------- tools
def tool_name_map(names: list[str]) -> dict[str, str]:
    """hpd tool name -> a smolagents name (a Python identifier, unique, never ``final_answer``)."""
    import keyword

    out: dict[str, str] = {}
    taken = {"final_answer"}
    for n in names:
        s = re.sub(r"[^A-Za-z0-9_]", "_", n) or "tool"
        if s[0].isdigit() or keyword.iskeyword(s):
            s = "t_" + s
        base, k = s, 2
        while s in taken:
            s, k = f"{base}_{k}", k + 1
        taken.add(s)
        out[n] = s
    return out


AUTHORIZED = ("string", "boolean", "integer", "number", "image", "audio", "array", "object", "any", "null")


def smolagents_inputs(parameters: dict) -> dict:
    """A JSON-Schema object -> smolagents ``Tool.inputs`` (see the module docstring)."""
    props = (parameters or {}).get("properties") or {}
    required = set((parameters or {}).get("required") or [])
    inputs: dict = {}
    for name, prop in props.items():
        prop = dict(prop) if isinstance(prop, dict) else {}
        t = prop.get("type")
        if isinstance(t, list):
            t = [x for x in t if x in AUTHORIZED] or "any"
        elif t not in AUTHORIZED:
            t = "any"
        desc = prop.get("description")
        entry: dict = {"type": t}
        if name not in required:     # key order as smolagents' own @tool inputs: type, nullable, description
            entry["nullable"] = True
        entry["description"] = desc if isinstance(desc, str) else ""
        entry.update((k, v) for k, v in prop.items() if k not in ("type", "description", "nullable"))
        inputs[name] = entry
    return inputs


@functools.cache   # one class per process: a class made per harness start cost ~10 ms each
def _tool_class():
    from smolagents import Tool

    class EnvTool(Tool):
        """One hpd :class:`~hpd.harness.tools.AgentTool` as a smolagents ``Tool``."""

        skip_forward_signature_validation = True
        output_type = "string"

        def __init__(self, agent_tool: Any, name: str):
            self.name = name
            self.description = agent_tool.description if isinstance(agent_tool.description, str) else ""
            self.inputs = smolagents_inputs(agent_tool.parameters)
            self.agent_tool = agent_tool
            super().__init__()

        def forward(self, *args: Any, **kwargs: Any) -> str:
            if args:   # a Python tool binds positional arguments to its parameters in order
                kwargs = {**dict(zip(self.inputs, args)), **kwargs}
            result = self.agent_tool.execute(None, kwargs)
            body = "\n".join(b.get("text", "") for b in (result or {}).get("content") or []
                             if isinstance(b, dict) and b.get("type") == "text")
            if isinstance(result, dict) and result.get("isError") is True:
                raise ToolFailed(body)
            return body

    return EnvTool


def __getattr__(name: str):
    if name == "EnvTool":
        return _tool_class()
    if name == "ActionModel":
        return _model_class()
    raise AttributeError(name)


@functools.cache
def _prompt_templates() -> dict:
    """smolagents' own ``toolcalling_agent.yaml``, as ``ToolCallingAgent`` loads it when given no templates, parsed
    once per process instead of at every agent (a third of a reference replay's time went to parsing it)."""
    import importlib.resources

    import yaml

    path = importlib.resources.files("smolagents.prompts").joinpath("toolcalling_agent.yaml")
    return yaml.safe_load(path.read_text())


# --------------------------------------------------------------------------------------------- model
@functools.cache
def _model_class():
    from smolagents.models import ChatMessage, ChatMessageToolCall, ChatMessageToolCallFunction, MessageRole, Model

    class ActionModel(Model):
        """A smolagents ``Model`` whose reply is the action the hpd side gives (see the module docstring)."""

        def __init__(self, bridge: "_Bridge", model_id: str = "hpd-policy"):
            super().__init__(model_id=model_id)
            self.bridge = bridge
            self.custom_role_conversions: dict = {}    # as ApiModel's default
            self.calls = 0

        def generate(self, messages, stop_sequences=None, response_format=None, tools_to_call_from=None, **kwargs):
            request = self._prepare_completion_kwargs(
                messages=messages, stop_sequences=stop_sequences, response_format=response_format,
                tools_to_call_from=tools_to_call_from, model=self.model_id,
                custom_role_conversions=self.custom_role_conversions, convert_images_to_image_urls=True, **kwargs)
            kind = "step" if tools_to_call_from else "forced_final_answer"
            action = self.bridge.ask(_plain(request), kind)
            self.calls += 1
            if action.get("stopReason") in ("error", "aborted"):
                raise GenerationFailed(action.get("errorMessage") or action.get("stopReason"))
            return ChatMessage(role=MessageRole.ASSISTANT, content=_content(action),
                               tool_calls=[ChatMessageToolCall(
                                   id=c.get("id"), type="function",
                                   function=ChatMessageToolCallFunction(name=c.get("name"), arguments=_raw_args(c)))
                                   for c in _calls(action)] or None)

        def parse_tool_calls(self, message):
            fresh = not message.tool_calls
            message = super().parse_tool_calls(message)
            if fresh:    # deterministic ids instead of uuid4() (a departure; module docstring)
                for k, tc in enumerate(message.tool_calls):
                    tc.id = f"call_{self.calls - 1}_{k}"
            return message

    return ActionModel


def _content(action: dict) -> str | None:
    c = action.get("content")
    if isinstance(c, str):
        return c if c.strip() else None
    parts = [b.get("text", "") for b in c or [] if isinstance(b, dict) and b.get("type") == "text"]
    parts = [p for p in parts if p.strip()]
    return "".join(parts) if parts else None


def _calls(action: dict) -> list[dict]:
    c = action.get("content")
    return [b for b in c if isinstance(b, dict) and b.get("type") == "toolCall"] if isinstance(c, list) else []


def _raw_args(call: dict) -> str:
    if isinstance(call.get("rawArguments"), str):
        return call["rawArguments"]
    err = call.get("argumentsError")
    if isinstance(err, str) and ARGS_MARK in err:
        return err.split(ARGS_MARK, 1)[1]
    return js_stringify(call.get("arguments") if call.get("arguments") is not None else {})


# --------------------------------------------------------------------------------------------- bridge
class _Bridge:
    """The two queues between the driving thread and the agent's thread."""

    def __init__(self) -> None:
        self.actions: queue.Queue = queue.Queue()    # driver -> agent
        self.replies: queue.Queue = queue.Queue()    # agent -> driver

    def ask(self, request: dict, kind: str) -> dict:
        self.replies.put(("boundary", request, kind))
        action = self.actions.get()
        if action is _CLOSE:
            raise _Closed()
        return action


_CLOSE = object()


def _close(bridge: _Bridge, thread: threading.Thread) -> None:
    if thread.is_alive():
        bridge.actions.put(_CLOSE)


def _plain(x: Any) -> Any:
    """The request as JSON values (smolagents' ``MessageRole`` roles as their strings, what goes on the wire)."""
    from enum import Enum

    if isinstance(x, Enum):
        return x.value
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_plain(v) for v in x]
    return x


def _jsonable(x: Any) -> Any:
    if x is None or isinstance(x, (bool, int, float)):
        return x
    if isinstance(x, str):
        return str(x)       # AgentText -> str
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    return str(x)


def _error_record(err: Any) -> dict | None:
    return None if err is None else {"type": type(err).__name__, "message": str(err)}


# --------------------------------------------------------------------------------------------- harness
class SmolagentsHarness:
    """smolagents' ``ToolCallingAgent`` parked at a model call (see the module docstring).

    Public state: ``done``, ``end_reason`` (:data:`END_REASONS`), ``boundary_kind`` (:data:`BOUNDARY_KINDS`),
    ``events``, ``env``, ``agent`` (the live ``ToolCallingAgent``), ``tool_names`` (hpd name -> smolagents
    name), ``boundaries`` (every model call so far: ``{"kind", "request", "action"}``), ``final_answer``.
    """

    def __init__(self) -> None:   # use SmolagentsHarness.start
        self.done = False
        self.end_reason: str | None = None
        self.boundary_kind: str | None = None
        self.events: list[dict] = []
        self.boundaries: list[dict] = []
        self.final_answer: Any = None
        self.error: str | None = None
        self._request: dict | None = None

    # ------------------------------------------------------------------ construction
    @classmethod
    def start(cls, task: str, env: Any, *, max_steps: int = 20, instructions: str | None = None,
              max_tool_threads: int | None = 1, model_id: str = "hpd-policy") -> "SmolagentsHarness":
        """A ``ToolCallingAgent`` over ``env.tools()`` running ``task``, parked at its first model call."""
        from smolagents import ToolCallingAgent
        from smolagents.monitoring import LogLevel

        if max_steps < 1:
            raise ValueError("max_steps must be >= 1")
        h = cls()
        h._spec = {"task": task, "max_steps": max_steps, "instructions": instructions,
                   "max_tool_threads": max_tool_threads, "model_id": model_id}
        fork = getattr(env, "fork", None)
        h._pristine = fork() if callable(fork) else env
        h.env = env
        hpd_tools = list(env.tools())
        h.tool_names = tool_name_map([t.name for t in hpd_tools])
        h._hpd_names = {v: k for k, v in h.tool_names.items()}
        EnvTool = _tool_class()
        tools = [EnvTool(t, h.tool_names[t.name]) for t in hpd_tools]
        h._bridge = _Bridge()
        h.model = _model_class()(h._bridge, model_id=model_id)
        h.agent = ToolCallingAgent(tools=tools, model=h.model, max_steps=max_steps, instructions=instructions,
                                   max_tool_threads=max_tool_threads, verbosity_level=LogLevel.OFF,
                                   prompt_templates=copy.deepcopy(_prompt_templates()))
        h._actions: list[dict] = []
        h._thread = threading.Thread(target=_run_agent, args=(h.agent, task, max_steps, h._bridge, h.events),
                                     name="smolagents-harness", daemon=True)
        h._finalizer = weakref.finalize(h, _close, h._bridge, h._thread)
        h._thread.start()
        h._wait()
        return h

    # ------------------------------------------------------------------ views
    def request(self) -> dict:
        """The request smolagents' model receives at this boundary (``_prepare_completion_kwargs``: ``messages``
        with smolagents' role conversions, ``tools``, ``tool_choice``, ``stop``, ``model``)."""
        if self.done or self._request is None:
            raise RuntimeError("the run has ended; there is no request")
        return self._request

    def context(self) -> dict:
        """:meth:`request` in hpd's neutral shape ``{"systemPrompt", "tools", "messages"}`` (Pi messages: a user
        message per ``user`` message, an assistant text message per ``assistant`` message; ``stop`` and
        ``tool_choice`` are not part of it)."""
        return neutral_context(self.request())

    def transcript(self) -> list[dict]:
        """The episode as the model saw it, in hpd's message shape: the last model call's messages (as
        :meth:`context`, the system message left out) and the action that answered it (a run that ended on
        ``final_answer`` ends with that call; one that hit ``max_steps`` with the forced final answer)."""
        last = next((b for b in reversed(self.boundaries) if b["action"] is not None), None)
        if last is None:
            return [] if self.done else self.context()["messages"]
        return neutral_context(last["request"])["messages"] + [last["action"]]

    @property
    def turn_index(self) -> int:
        """0-based index of the model call the harness is parked at (= model calls answered so far)."""
        return len(self._actions)

    def verdict(self) -> Verdict | None:
        """smolagents' judgement of the last action applied (``None`` before the first; :meth:`step_verdicts`)."""
        vs = self.step_verdicts()
        return vs[-1] if vs else None

    def calls(self) -> list[dict]:
        """Every tool call the model made, in order, ``{"turn", "id", "name", "arguments", "final_answer"}``,
        with hpd's tool names (a name that maps to no tool is kept as the model wrote it)."""
        out = []
        for turn, b in enumerate(self.boundaries[: len(self._actions)]):
            if b["kind"] != "step":
                continue
            for c in _calls(b["action"]):
                name = c.get("name")
                out.append({"turn": turn, "id": c.get("id"), "name": self._hpd_names.get(name, name),
                            "arguments": c.get("arguments"), "final_answer": name == "final_answer"})
        return out

    def step_verdicts(self) -> list[Verdict]:
        """The verdict of every action applied so far, in order."""
        from smolagents.memory import ActionStep

        steps = [s for s in self.agent.memory.steps if isinstance(s, ActionStep)]
        out = []
        si = 0
        for b in self.boundaries[: len(self._actions)]:
            if b["action"].get("stopReason") in ("error", "aborted"):
                out.append(Verdict(False, b["action"]["stopReason"], self.error if b["kind"] == "step" else None))
                if b["kind"] == "step":
                    si += 1
                continue
            if b["kind"] == "forced_final_answer":
                out.append(Verdict(True, "finish"))
                continue
            out.append(step_verdict(steps[si]) if si < len(steps) else Verdict(False, "error", self.error))
            si += 1
        return out

    def record(self) -> dict:
        return {"harness": "smolagents", "smolagents_version": SMOLAGENTS_VERSION, **self._spec,
                "end_reason": self.end_reason, "model_calls": len(self._actions), "done": self.done}

    # ------------------------------------------------------------------ stepping
    def step(self, action: dict) -> "SmolagentsHarness":
        """Answer the current model call with ``action`` and run smolagents to its next model call or the end."""
        if self.done:
            raise RuntimeError("the run has ended; nothing to step")
        if not isinstance(action, dict):
            raise TypeError(f"an action is a Pi assistant message dict, not {type(action).__name__}")
        self.boundaries[-1]["action"] = action
        self._actions.append(action)
        self._bridge.actions.put(action)
        self._wait()
        return self

    def fork(self) -> "SmolagentsHarness":
        """An independent harness at this boundary: a new agent re-driven through the same actions from a fork
        of the environment as it was at the start (see the module docstring)."""
        fork = getattr(self._pristine, "fork", None)
        env = fork() if callable(fork) else self._pristine
        g = SmolagentsHarness.start(self._spec["task"], env, **{k: v for k, v in self._spec.items() if k != "task"})
        for a in self._actions:
            g.step(a)
        return g

    def close(self) -> None:
        """Stop the agent's thread if the run is abandoned before it ends (also done when garbage-collected)."""
        self._finalizer()

    # ------------------------------------------------------------------ internals
    def _wait(self) -> None:
        msg = self._bridge.replies.get()
        if msg[0] == "boundary":
            _, self._request, self.boundary_kind = msg
            self.boundaries.append({"kind": self.boundary_kind, "request": self._request, "action": None})
            self.events.append({"type": "model_call", "index": len(self.boundaries) - 1, "kind": self.boundary_kind})
            return
        self.done, self._request, self.boundary_kind = True, None, None
        if msg[0] == "end":
            _, self.end_reason, self.final_answer = msg
        else:   # "error": the agent raised (a generation error ends a smolagents run)
            _, self.end_reason, self.error = msg
        self.events.append({"type": "agent_end", "end_reason": self.end_reason})
        self._thread.join()

    def _last_action_step(self):
        from smolagents.memory import ActionStep

        return next((s for s in reversed(self.agent.memory.steps) if isinstance(s, ActionStep)), None)


def step_verdict(step: Any) -> Verdict:
    """The verdict of one smolagents ``ActionStep`` (module docstring)."""
    from smolagents.utils import (AgentExecutionError, AgentParsingError, AgentToolCallError,
                                  AgentToolExecutionError)

    err = getattr(step, "error", None)
    if err is None:
        return Verdict(True, "finish" if step.is_final_answer else "calls")
    msg = str(err)
    if isinstance(err, AgentParsingError):
        return Verdict(False, "parse_error", msg)
    if isinstance(err, AgentToolCallError):
        return Verdict(False, "invalid_arguments", msg)
    if isinstance(err, AgentToolExecutionError):
        if msg.startswith("Unknown tool "):
            return Verdict(False, "unknown_tool", msg)
        if msg.startswith("Error executing tool "):
            return Verdict(True, "tool_error", msg)
        return Verdict(False, "rejected", msg)
    if isinstance(err, AgentExecutionError):
        return Verdict(False, "rejected", msg)
    return Verdict(False, "rejected", msg)


def neutral_context(req: dict) -> dict:
    """A smolagents request (:meth:`SmolagentsHarness.request`) in hpd's neutral shape ``{"systemPrompt", "tools",
    "messages"}``: a user message per ``user`` message, an assistant text message per ``assistant`` message."""
    msgs = list(req["messages"])
    system = ""
    if msgs and msgs[0]["role"] == "system":
        system = _flat(msgs.pop(0)["content"])
    out = []
    for m in msgs:
        body = _flat(m["content"])
        if m["role"] == "assistant":
            out.append(assistant_message([text(body)], "stop", timestamp=0))
        else:
            out.append({"role": m["role"], "content": body, "timestamp": 0})
    tools = [{"name": t["function"]["name"], "description": t["function"]["description"],
              "parameters": t["function"]["parameters"]} for t in req.get("tools") or []]
    return {"systemPrompt": system, "tools": tools, "messages": out}


def _flat(content: Any) -> str:
    if isinstance(content, str) or content is None:
        return content or ""
    return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")


def _run_agent(agent: Any, task: str, max_steps: int, bridge: _Bridge, events: list) -> None:
    """The agent's thread: ``agent.run(task, stream=True)`` to the end; the stream's items become events."""
    from smolagents.agents import ActionOutput, ToolOutput
    from smolagents.memory import ActionStep, FinalAnswerStep, ToolCall
    from smolagents.utils import AgentGenerationError, AgentMaxStepsError

    seen: set[int] = set()
    answer: Any = None

    def step_event(s: Any) -> dict:
        return {"type": "step_end", "step": s.step_number, "error": _error_record(s.error),
                "observations": s.observations, "is_final_answer": bool(s.is_final_answer),
                "tool_calls": [tc.dict() for tc in s.tool_calls or []]}

    try:
        for item in agent.run(task, stream=True, max_steps=max_steps):
            if isinstance(item, ToolCall):
                events.append({"type": "tool_call", "id": item.id, "name": item.name,
                               "arguments": _jsonable(item.arguments)})
            elif isinstance(item, ToolOutput):
                events.append({"type": "tool_output", "id": item.id, "name": item.tool_call.name,
                               "observation": item.observation, "is_final_answer": item.is_final_answer})
            elif isinstance(item, ActionOutput):
                events.append({"type": "action_output", "is_final_answer": item.is_final_answer,
                               "output": _jsonable(item.output)})
            elif isinstance(item, ActionStep):
                if id(item) not in seen:
                    seen.add(id(item))
                    events.append(step_event(item))
            elif isinstance(item, FinalAnswerStep):
                last = agent.memory.steps[-1] if agent.memory.steps else None
                if isinstance(last, ActionStep) and isinstance(last.error, AgentMaxStepsError) and id(last) not in seen:
                    seen.add(id(last))
                    events.append(step_event(last))
                answer = _jsonable(item.output)
                events.append({"type": "final_answer", "output": answer})
        steps = [s for s in agent.memory.steps if isinstance(s, ActionStep)]
        forced = bool(steps) and isinstance(steps[-1].error, AgentMaxStepsError)
        bridge.replies.put(("end", "max_steps" if forced else "final_answer", answer))
    except _Closed:
        return
    except AgentGenerationError as e:
        bridge.replies.put(("error", "error", str(e)))
    except BaseException as e:  # noqa: BLE001 - anything else smolagents raises ends the run too
        bridge.replies.put(("error", "error", f"{type(e).__name__}: {e}"))


def reference_to_smolagents(action: dict, tool_names: dict[str, str], *, final: bool) -> dict:
    """A Pi-style reference action -> the action a smolagents model gives: calls renamed with ``tool_names``
    (unknown names kept), and a final prose answer (``final``: a message without calls) -> one
    ``final_answer`` call with ``{"answer": <text>}``."""
    calls = _calls(action)
    if final and not calls:
        body = "".join(b.get("text", "") for b in action.get("content") or [] if isinstance(b, dict)
                       and b.get("type") == "text") if isinstance(action.get("content"), list) else str(action.get("content") or "")
        return assistant_message([{"type": "toolCall", "id": "call_final", "name": "final_answer",
                                   "arguments": {"answer": body}}], "toolUse")
    content = [({**b, "name": tool_names.get(b.get("name"), b.get("name"))} if b.get("type") == "toolCall" else b)
               for b in action.get("content") or [] if isinstance(b, dict)]
    return {**action, "content": content}


__all__ = ["SMOLAGENTS_VERSION", "END_REASONS", "BOUNDARY_KINDS", "SmolagentsHarness", "GenerationFailed",
           "ToolFailed", "tool_name_map", "smolagents_inputs", "reference_to_smolagents", "step_verdict"]
