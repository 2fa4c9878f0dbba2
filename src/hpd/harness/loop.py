"""The Pi agent loop (``@earendil-works/pi-agent-core`` 1.6.0 ``agent-loop.ts``) as a step-wise driver.

Pi's ``runLoop`` is one async function; here it is cut at its provider boundaries. A *boundary* is
the moment Pi calls ``streamFn(model, context)``: :meth:`Harness.context` /
:meth:`Harness.provider_context` show exactly that context, and :meth:`Harness.step` takes the
assistant message the provider would have returned, then runs the rest of the turn with Pi's
semantics (tool batch, ``turn_end``, steering poll, follow-up poll) until the next boundary or the
end of the run. :func:`run` is the loop ``while not h.done: h.step(policy(h.context()))``.

What is mirrored (see ``docs/pi-harness.md`` and the source of agent-loop.js 1.6.0):

- ``agent_start``/``turn_start``/``message_*``/``tool_execution_*``/``turn_end``/``agent_end`` events
  with Pi's names, fields and order;
- v1.6 transcript ``system`` messages: the leading one holds the prompt and ``toolsAdded`` (what
  Pi's ``Agent`` builds with ``createInitialSystemMessage``); ``declareToolChanges`` inserts a
  ``{role:"system", content:"", toolsAdded}`` message whenever the executable tools differ from the
  ones the transcript declares;
- continuation decided by content (>=1 toolCall block), not by stopReason; ``error``/``aborted``
  end the run (``turn_end`` with no results, then ``agent_end``); ``length`` fails every call with
  the token-limit text (v1.6);
- preflight order: aborted -> unknown tool -> ``prepare_arguments`` -> validation (pi-schema
  coercion and texts, :mod:`hpd.harness.validation`) -> ``before_tool_call``; then execute ->
  ``after_tool_call`` (fields replaced whole; a throwing hook becomes an error result);
- parallel batches: preflight in source order, ``tool_execution_end`` in completion order,
  toolResult messages appended in source order; sequential when configured or when any called tool
  says ``execution_mode="sequential"``;
- the all-terminate rule; steering polled before the first call and after every turn, follow-ups
  only when the run would stop; queue modes ``one-at-a-time`` / ``all`` (Pi's ``Agent`` queues);
- ``thinkingLevel`` stamped on every assistant message (``config.reasoning ?? "off"``).

Deliberate departures (documented, not bugs):

- Tools are synchronous; completion order in a parallel batch is *simulated*: a result may carry an
  hpd-only ``"delay"`` (ms); calls complete in ``(delay, source index)`` order. ``durationMs`` is
  that delay (Pi measures wall time; conformance normalises it).
- Timestamps come from ``LoopConfig.clock`` (default: a deterministic counter), not ``Date.now()``.
- ``max_turns`` is OUR policy, not Pi's (Pi has no turn cap). It acts like Pi 1.6's
  ``finishTurn -> {action:"end"}``: after the ``turn_end`` of turn ``max_turns``, if the loop would
  make another provider call, ``agent_end`` is emitted and ``end_reason`` is ``"max_turns"``.
- No ``message_update`` events: :meth:`Harness.step` receives a complete message (as a provider
  stream that only emits ``done``/``error`` would give).
- ``prepareNextTurn``/``prepareRequest``/``transformContext``/``finishTurn``/``convertToLlm`` hooks are
  not exposed (identity behaviour).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from hpd import PI_PACKAGE, PI_VERSION
from hpd.harness.jsvalues import js_number_str, js_stringify, js_value
from hpd.harness.messages import system_message, tool_calls_of
from hpd.harness.tools import AgentTool, Environment, StaticEnv
from hpd.harness.validation import validate_tool_arguments

LENGTH_STOP_TEXT = (
    'Tool call "{name}" was not executed: the response hit the output token limit, so its arguments '
    "may be truncated. Re-issue the tool call with complete arguments."
)
ABORTED_TEXT = "Operation aborted"
BLOCKED_TEXT = "Tool execution was blocked"


class CounterClock:
    """Deterministic clock: returns ``start``, ``start+step``, ... (ms). Forks copy the counter."""

    def __init__(self, start: int = 1_000, step: int = 1):
        self.now = start
        self.step = step

    def __call__(self) -> int:
        t = self.now
        self.now += self.step
        return t

    def fork(self) -> "CounterClock":
        c = CounterClock(self.now, self.step)
        return c


class MessageQueue:
    """Pi's ``PendingMessageQueue``: ``one-at-a-time`` drains the oldest message, ``all`` drains all."""

    __slots__ = ("mode", "messages")

    def __init__(self, mode: str = "one-at-a-time", messages: Iterable[dict] = ()):
        if mode not in ("one-at-a-time", "all"):
            raise ValueError(f"queue mode must be 'one-at-a-time' or 'all', not {mode!r}")
        self.mode = mode
        self.messages = list(messages)

    def enqueue(self, message: dict) -> None:
        self.messages.append(message)

    def has_items(self) -> bool:
        return bool(self.messages)

    def peek(self) -> list[dict]:
        if self.mode == "all":
            return list(self.messages)
        return self.messages[:1]

    def drain(self) -> list[dict]:
        out = self.peek()
        self.messages = self.messages[len(out):]
        return out

    def clear(self) -> None:
        self.messages = []

    def fork(self) -> "MessageQueue":
        return MessageQueue(self.mode, self.messages)


@dataclass
class LoopConfig:
    """Loop configuration. Everything but ``max_turns`` is a Pi ``AgentLoopConfig``/``Agent`` option.

    - ``tool_execution``: ``"parallel"`` (Pi's default) or ``"sequential"``.
    - ``max_turns``: OUR policy (Pi has none): the most provider calls in one run; ``None`` = no cap.
    - ``before_tool_call(ctx) -> None | {"block": bool, "reason"?: str, "terminate"?: bool}`` with
      ``ctx = {"assistantMessage", "toolCall", "args", "context"}``.
    - ``after_tool_call(ctx) -> None | {"content"?, "details"?, "isError"?, "terminate"?, "usage"?}``
      with ``ctx`` also holding ``"result"`` and ``"isError"``.
    - ``steering`` / ``follow_up``: messages already queued when the run starts; modes as in Pi.
    - ``clock``: ``() -> int`` ms timestamps (default: a fresh :class:`CounterClock` per run).
    - ``reasoning``: the thinking level Pi stamps on assistant messages (``thinkingLevel``).
    """

    tool_execution: str = "parallel"
    max_turns: int | None = None
    before_tool_call: Callable[[dict], dict | None] | None = None
    after_tool_call: Callable[[dict], dict | None] | None = None
    steering: list = field(default_factory=list)
    follow_up: list = field(default_factory=list)
    steering_mode: str = "one-at-a-time"
    follow_up_mode: str = "one-at-a-time"
    clock: Callable[[], int] | None = None
    reasoning: str | None = None

    def to_record(self) -> dict:
        """What a run manifest records about the loop (JSON-safe)."""
        return {
            "pi_package": PI_PACKAGE,
            "pi_version": PI_VERSION,
            "tool_execution": self.tool_execution,
            "max_turns": self.max_turns,
            "max_turns_is_hpd_policy": True,
            "steering_mode": self.steering_mode,
            "follow_up_mode": self.follow_up_mode,
            "before_tool_call": self.before_tool_call is not None,
            "after_tool_call": self.after_tool_call is not None,
            "reasoning": self.reasoning,
        }


def _error_result(message: str) -> dict:
    """Pi ``createErrorToolResult``."""
    return {"content": [{"type": "text", "text": message}], "details": {}}


def _exc_text(exc: BaseException) -> str:
    """``error.message`` of a thrown error."""
    msg = getattr(exc, "pi_message", None)
    if isinstance(msg, str):
        return msg
    return str(exc)


def _tool_name(call: dict) -> Any:
    return call.get("name")


def current_tools(messages: Iterable[dict]) -> list[dict]:
    """pi-ai ``getCurrentTools``: tool declarations after replaying every system message's deltas."""
    tools: dict[str, dict] = {}
    for m in messages:
        if not isinstance(m, dict) or m.get("role") != "system":
            continue
        for t in m.get("toolsRemoved") or []:
            tools.pop(t.get("name"), None)
        for t in m.get("toolsAdded") or []:
            tools[t.get("name")] = t
    return list(tools.values())


def current_system_prompt(messages: Iterable[dict]) -> str:
    """pi-ai ``getCurrentSystemPrompt`` (content of every system message joined with a blank line)."""
    parts = []
    for m in messages:
        if not isinstance(m, dict) or m.get("role") != "system":
            continue
        c = m.get("content")
        if isinstance(c, list):
            c = "".join(b.get("text", "") for b in c if isinstance(b, dict) and b.get("type") == "text")
        if isinstance(c, str) and c:
            parts.append(c)
    return "\n\n".join(parts)


def _canon(x: Any) -> str:
    return js_stringify(x)


def _same(a: Any, b: Any) -> bool:
    """Pi compares declarations by their JSON text; the same (memoised) object is trivially equal."""
    return a is b or _canon(a) == _canon(b)


def declare_tool_changes(transcript: list[dict], pending: list[dict], tools: list[AgentTool], clock) -> list[dict]:
    """pi-agent-core ``declareToolChanges`` (for pending lists without their own system message).

    If the executable tools differ from those the transcript declares, a system message
    ``{role:"system", content:"", toolsAdded?, toolsRemoved?}`` is inserted before the first
    non-system pending message.
    """
    if any(m.get("role") == "system" for m in pending):
        # Pi rewrites a caller-provided pending system message's tool fields; hpd never queues one.
        return list(pending)
    previous = current_tools(list(transcript) + list(pending))
    current = [t.declaration() for t in tools]
    prev_by = {t.get("name"): t for t in previous}
    cur_by = {t["name"]: t for t in current}
    added = [t for t in current if t["name"] not in prev_by or not _same(prev_by[t["name"]], t)]
    removed = [
        {"name": t.get("name")}
        for t in previous
        if t.get("name") not in cur_by or not _same(cur_by[t.get("name")], t)
    ]
    if not added and not removed:
        return list(pending)
    update: dict = {"role": "system", "content": ""}
    update["timestamp"] = clock()
    # withToolChanges: rest of the message first, then toolsAdded/toolsRemoved
    update = {"role": "system", "content": "", "timestamp": update["timestamp"]}
    if added:
        update["toolsAdded"] = added
    if removed:
        update["toolsRemoved"] = removed
    idx = next((i for i, m in enumerate(pending) if m.get("role") != "system"), len(pending))
    return list(pending[:idx]) + [update] + list(pending[idx:])


class Harness:
    """Step-wise Pi agent loop. Build with :meth:`start`; see the module docstring for semantics.

    Public state: ``transcript`` (Pi's ``context.messages``, incl. v1.6 system messages),
    ``messages`` (the same without system messages), ``new_messages`` (Pi's run result),
    ``events``, ``done``, ``end_reason`` (``natural|terminate|error|aborted|max_turns``),
    ``boundary_kind``, ``turn_index`` (0-based index of the current turn = provider call),
    ``last_tool_results``, ``config``, ``env``.
    """

    def __init__(self) -> None:  # use Harness.start
        self.transcript: list[dict] = []
        self.new_messages: list[dict] = []
        self.events: list[dict] = []
        self.env: Environment | None = None
        self.config: LoopConfig = LoopConfig()
        self.clock: Callable[[], int] = CounterClock()
        self.steering_queue = MessageQueue()
        self.follow_up_queue = MessageQueue()
        self.tools: list[AgentTool] = []
        self.done = False
        self.end_reason: str | None = None
        self.boundary_kind: str | None = None
        self.turn_index = -1
        self.turns_completed = 0
        self.last_tool_results: list[dict] = []
        self.aborted = False

    # ------------------------------------------------------------------ construction
    @classmethod
    def start(
        cls,
        prompts: list[dict] | dict,
        system_prompt: str = "",
        env: Environment | None = None,
        config: LoopConfig | None = None,
        *,
        tools: list[AgentTool] | None = None,
        messages: list[dict] | None = None,
    ) -> "Harness":
        """Pi ``runAgentLoop(prompts, context, config)`` up to the first provider boundary.

        The context is ``messages`` (prior transcript) if given, else the leading system message that
        Pi's ``Agent`` builds (``createInitialSystemMessage(system_prompt, tool declarations)``,
        timestamp 0), or nothing when both are empty. Tools come from ``env.tools()`` (or ``tools``).
        """
        h = cls()
        h.config = config = config or LoopConfig()
        if config.tool_execution not in ("parallel", "sequential"):
            raise ValueError(f"tool_execution must be 'parallel' or 'sequential', not {config.tool_execution!r}")
        if config.max_turns is not None and config.max_turns < 1:
            raise ValueError("max_turns must be >= 1 or None")
        h.clock = config.clock if config.clock is not None else CounterClock()
        if env is None:
            env = StaticEnv(list(tools or []))
        h.env = env
        h.tools = list(env.tools()) if tools is None else list(tools)
        h.steering_queue = MessageQueue(config.steering_mode, config.steering)
        h.follow_up_queue = MessageQueue(config.follow_up_mode, config.follow_up)
        if isinstance(prompts, dict):
            prompts = [prompts]
        if messages is not None:
            h.transcript = list(messages)
        else:
            decls = [t.declaration() for t in h.tools]
            if system_prompt or decls:
                h.transcript = [
                    system_message(system_prompt or "", tools_added=decls if decls else None, timestamp=0)
                ]
        initial = declare_tool_changes(h.transcript, list(prompts), h.tools, h.clock)
        h.new_messages = list(initial)
        h.transcript.extend(initial)
        h._emit({"type": "agent_start"})
        h._emit({"type": "turn_start"})
        for m in initial:
            h._emit({"type": "message_start", "message": m})
            h._emit({"type": "message_end", "message": m})
        pending = h.steering_queue.drain()
        h._enter_boundary(pending, first=True, kind="initial")
        return h

    # ------------------------------------------------------------------ views
    @property
    def messages(self) -> list[dict]:
        """The conversation without v1.6 system messages (user / assistant / toolResult)."""
        return [m for m in self.transcript if m.get("role") != "system"]

    def context(self) -> dict:
        """The boundary's context as ``{"systemPrompt", "tools", "messages"}`` (Pi 0.x ``Context`` shape).

        ``systemPrompt`` and ``tools`` are replayed from the transcript's system messages (pi-ai
        ``getCurrentSystemPrompt`` / ``getCurrentTools``), ``messages`` is the rest of the transcript.
        The exact v1.6 provider payload is :meth:`provider_context`.
        """
        return {
            "systemPrompt": current_system_prompt(self.transcript),
            "tools": current_tools(self.transcript),
            "messages": self.messages,
        }

    def provider_context(self) -> dict:
        """Exactly what Pi 1.6 hands ``streamFn``: ``normalizeContext({messages})`` = ``{"messages": transcript}``."""
        return {"messages": list(self.transcript)}

    def request(self) -> dict:
        """The boundary as the model's API receives it (``{"messages", "tools"}``; :func:`hpd.harness.interface.pi_request`)."""
        from hpd.harness.interface import pi_request

        return pi_request(self)

    def verdict(self):
        """Pi's judgement of the last assistant message (:func:`hpd.harness.interface.pi_verdict`; read-only)."""
        from hpd.harness.interface import pi_verdict

        return pi_verdict(self)

    def record(self) -> dict:
        """JSON-safe summary for manifests (pinned Pi version, loop config incl. max_turns, outcome)."""
        return {
            **self.config.to_record(),
            "end_reason": self.end_reason,
            "turns": self.turns_completed,
            "done": self.done,
        }

    # ------------------------------------------------------------------ queues / abort
    def steer(self, message: dict) -> None:
        """Pi ``agent.steer``: queue a message injected after the current turn's tool batch."""
        self.steering_queue.enqueue(message)

    def follow_up(self, message: dict) -> None:
        """Pi ``agent.followUp``: queue a message that starts a new turn when the run would stop."""
        self.follow_up_queue.enqueue(message)

    def abort(self) -> None:
        """Pi ``agent.abort()``: later preflights give ``Operation aborted``. The next assistant
        message should then be an ``aborted`` one (what a provider returns on an aborted signal)."""
        self.aborted = True

    # ------------------------------------------------------------------ fork
    def fork(self) -> "Harness":
        """An independent copy of the whole state at this point, incl. ``env.fork()``.

        Cheap: messages/events are immutable once recorded, so lists are copied shallowly.
        """
        g = Harness.__new__(Harness)
        g.__dict__.update(self.__dict__)
        g.transcript = list(self.transcript)
        g.new_messages = list(self.new_messages)
        g.events = list(self.events)
        g.last_tool_results = list(self.last_tool_results)
        g.steering_queue = self.steering_queue.fork()
        g.follow_up_queue = self.follow_up_queue.fork()
        fork_clock = getattr(self.clock, "fork", None)
        g.clock = fork_clock() if callable(fork_clock) else self.clock
        if self.env is not None:
            g.env = self.env.fork()
            if g.env is self.env:
                g.tools = self.tools
            else:
                g.tools = list(g.env.tools())
        return g

    # ------------------------------------------------------------------ stepping
    def step(self, assistant_msg: dict) -> "Harness":
        """Take the provider's reply at this boundary and run the loop to the next boundary or the end."""
        if self.done:
            raise RuntimeError("the run has ended; nothing to step")
        msg = self._normalise_assistant(assistant_msg)
        self._emit({"type": "message_start", "message": dict(msg)})
        self._emit({"type": "message_end", "message": msg})
        self.transcript.append(msg)
        self.new_messages.append(msg)

        if msg.get("stopReason") in ("error", "aborted"):
            self.last_tool_results = []
            self.turns_completed += 1
            self._emit({"type": "turn_end", "message": msg, "toolResults": []})
            self._finish(msg["stopReason"])
            return self

        calls = tool_calls_of(msg)
        results: list[dict] = []
        has_more = False
        terminated = False
        if calls:
            if msg.get("stopReason") == "length":
                results, terminate = self._fail_truncated(calls), False
            else:
                results, terminate = self._execute_tool_calls(msg, calls)
            has_more = not terminate
            terminated = terminate
            self.transcript.extend(results)
            self.new_messages.extend(results)
        self.last_tool_results = results
        self.turns_completed += 1
        self._emit({"type": "turn_end", "message": msg, "toolResults": list(results)})

        mt = self.config.max_turns
        if mt is not None and self.turns_completed >= mt:
            if has_more or self.steering_queue.has_items() or self.follow_up_queue.has_items():
                self._finish("max_turns")
                return self

        pending = self.steering_queue.drain()
        if has_more or pending:
            self._enter_boundary(pending, first=False, kind="after_steering" if pending else "after_tool_batch")
            return self
        follow = self.follow_up_queue.drain()
        if follow:
            self._enter_boundary(follow, first=False, kind="after_follow_up")
            return self
        self._finish("terminate" if terminated else "natural")
        return self

    # ------------------------------------------------------------------ internals
    def _emit(self, event: dict) -> None:
        self.events.append(event)

    def _finish(self, reason: str) -> None:
        self._emit({"type": "agent_end", "messages": list(self.new_messages)})
        self.done = True
        self.end_reason = reason
        self.boundary_kind = None

    def _enter_boundary(self, pending: list[dict], *, first: bool, kind: str) -> None:
        if not first:
            self._emit({"type": "turn_start"})
        for m in declare_tool_changes(self.transcript, pending, self.tools, self.clock):
            self._emit({"type": "message_start", "message": m})
            self._emit({"type": "message_end", "message": m})
            self.transcript.append(m)
            self.new_messages.append(m)
        self.turn_index += 1
        self.boundary_kind = kind

    def _normalise_assistant(self, m: Any) -> dict:
        """Object.assign(final, {thinkingLevel}); tolerate malformed input (never raise on model output)."""
        if not isinstance(m, dict):
            m = {"role": "assistant", "content": [], "stopReason": "error", "errorMessage": f"invalid assistant message: {type(m).__name__}"}
        msg = dict(m)
        if not isinstance(msg.get("content"), list):
            c = msg.get("content")
            msg["content"] = [{"type": "text", "text": c}] if isinstance(c, str) else []
        msg["content"] = [_js_call(b) for b in msg["content"] if isinstance(b, dict)]
        if "timestamp" not in msg:
            msg["timestamp"] = self.clock()
        msg["thinkingLevel"] = self.config.reasoning if self.config.reasoning is not None else "off"
        return msg

    def _fail_truncated(self, calls: list[dict]) -> list[dict]:
        out = []
        for call in calls:
            self._emit({"type": "tool_execution_start", "toolCallId": call.get("id"), "toolName": _tool_name(call), "args": call.get("arguments")})
            fin = {"toolCall": call, "result": _error_result(LENGTH_STOP_TEXT.format(name=_tool_name(call))), "isError": True}
            self._emit_end(fin)
            rm = self._result_message(fin)
            self._emit({"type": "message_start", "message": rm})
            self._emit({"type": "message_end", "message": rm})
            out.append(rm)
        return out

    def _find_tool(self, name: Any) -> AgentTool | None:
        for t in self.tools:
            if t.name == name:
                return t
        return None

    def _execute_tool_calls(self, msg: dict, calls: list[dict]) -> tuple[list[dict], bool]:
        seq = self.config.tool_execution == "sequential" or any(
            (t := self._find_tool(_tool_name(c))) is not None and t.execution_mode == "sequential" for c in calls
        )
        return self._run_sequential(msg, calls) if seq else self._run_parallel(msg, calls)

    def _run_sequential(self, msg: dict, calls: list[dict]) -> tuple[list[dict], bool]:
        finals, out = [], []
        for call in calls:
            self._emit({"type": "tool_execution_start", "toolCallId": call.get("id"), "toolName": _tool_name(call), "args": call.get("arguments")})
            prep = self._prepare(msg, call)
            if prep["kind"] == "immediate":
                fin = {"toolCall": call, "result": prep["result"], "isError": prep["isError"]}
            else:
                fin = self._finalize(msg, prep, self._execute(prep))
            self._emit_end(fin)
            rm = self._result_message(fin)
            self._emit({"type": "message_start", "message": rm})
            self._emit({"type": "message_end", "message": rm})
            finals.append(fin)
            out.append(rm)
        return out, _all_terminate(finals)

    def _run_parallel(self, msg: dict, calls: list[dict]) -> tuple[list[dict], bool]:
        finals: list[dict | None] = []
        prepared: list[tuple[int, dict]] = []
        for call in calls:
            self._emit({"type": "tool_execution_start", "toolCallId": call.get("id"), "toolName": _tool_name(call), "args": call.get("arguments")})
            prep = self._prepare(msg, call)
            if prep["kind"] == "immediate":
                fin = {"toolCall": call, "result": prep["result"], "isError": prep["isError"]}
                self._emit_end(fin)
                finals.append(fin)
            else:
                prepared.append((len(finals), prep))
                finals.append(None)
        # Promise.all starts every deferred call in source order before any of them settles, so the abort
        # check of all of them happens first (an abort raised by a running tool reaches only later batches).
        to_run = []
        for idx, prep in prepared:
            if self.aborted:
                fin = {"toolCall": prep["toolCall"], "result": _error_result(ABORTED_TEXT), "isError": True}
                self._emit_end(fin)
                finals[idx] = fin
            else:
                to_run.append((idx, prep))
        running = [(idx, prep, self._execute(prep)) for idx, prep in to_run]
        # completion order: (simulated delay, source order)
        running.sort(key=lambda r: (r[2]["durationMs"], r[0]))
        for idx, prep, executed in running:
            fin = self._finalize(msg, prep, executed)
            self._emit_end(fin)
            finals[idx] = fin
        out = []
        for fin in finals:
            rm = self._result_message(fin)
            self._emit({"type": "message_start", "message": rm})
            self._emit({"type": "message_end", "message": rm})
            out.append(rm)
        return out, _all_terminate(finals)

    def _prepare(self, msg: dict, call: dict) -> dict:
        if self.aborted:
            return {"kind": "immediate", "result": _error_result(ABORTED_TEXT), "isError": True}
        tool = self._find_tool(_tool_name(call))
        if tool is None:
            return {"kind": "immediate", "result": _error_result(f"Tool {_js_str(_tool_name(call))} not found"), "isError": True}
        try:
            prepared_call = call
            if tool.prepare_arguments is not None:
                new_args = tool.prepare_arguments(call.get("arguments"))
                if new_args is not call.get("arguments"):
                    prepared_call = {**call, "arguments": new_args}
            args = validate_tool_arguments(tool, prepared_call)
            hook = self.config.before_tool_call
            if hook is not None:
                before = hook({"assistantMessage": msg, "toolCall": call, "args": args, "context": self.provider_context()})
                if self.aborted:
                    return {"kind": "immediate", "result": _error_result(ABORTED_TEXT), "isError": True}
                if before and before.get("block"):
                    res = _error_result(before.get("reason") or BLOCKED_TEXT)
                    if before.get("terminate") is True:
                        res["terminate"] = True
                    return {"kind": "immediate", "result": res, "isError": True}
            return {"kind": "prepared", "toolCall": call, "tool": tool, "args": args}
        except Exception as exc:  # noqa: BLE001 - Pi turns any preflight throw into an error result
            return {"kind": "immediate", "result": _error_result(_exc_text(exc)), "isError": True}

    def _execute(self, prep: dict) -> dict:
        try:
            result = prep["tool"].execute(prep["toolCall"].get("id"), prep["args"])
            if not isinstance(result, dict):
                raise TypeError(f"tool {prep['tool'].name!r} returned {type(result).__name__}, not a result dict")
            delay = result.get("delay", 0)
            if "delay" in result:
                result = {k: v for k, v in result.items() if k != "delay"}
            return {"result": result, "isError": result.get("isError") is True, "durationMs": _ms(delay)}
        except Exception as exc:  # noqa: BLE001 - a thrown tool error is an isError result in Pi
            delay = getattr(exc, "delay", 0)
            return {"result": _error_result(_exc_text(exc)), "isError": True, "durationMs": _ms(delay)}

    def _finalize(self, msg: dict, prep: dict, executed: dict) -> dict:
        result, is_error = executed["result"], executed["isError"]
        hook = self.config.after_tool_call
        if hook is not None:
            try:
                after = hook({
                    "assistantMessage": msg, "toolCall": prep["toolCall"], "args": prep["args"],
                    "result": result, "isError": is_error, "context": self.provider_context(),
                })
                if after:
                    structured = after.get("structuredContent")
                    if structured is None:
                        structured = None if after.get("content") is not None else result.get("structuredContent")
                    new = dict(result)
                    for key in ("content", "details", "usage", "terminate"):
                        v = after.get(key) if after.get(key) is not None else result.get(key)
                        if v is None:
                            if key in new and new[key] is None:
                                continue
                            new.pop(key, None)
                        else:
                            new[key] = v
                    if structured is None:
                        new.pop("structuredContent", None)
                    else:
                        new["structuredContent"] = structured
                    result = new
                    if after.get("isError") is not None:
                        is_error = bool(after["isError"])
            except Exception as exc:  # noqa: BLE001 - Pi: a throwing afterToolCall becomes an error result
                result, is_error = _error_result(_exc_text(exc)), True
        return {"toolCall": prep["toolCall"], "result": js_value(result), "isError": is_error,
                "durationMs": executed["durationMs"]}

    def _emit_end(self, fin: dict) -> None:
        ev = {"type": "tool_execution_end", "toolCallId": fin["toolCall"].get("id"), "toolName": _tool_name(fin["toolCall"]),
              "result": fin["result"], "isError": fin["isError"]}
        if fin.get("durationMs") is not None:
            ev["durationMs"] = fin["durationMs"]
        self._emit(ev)

    def _result_message(self, fin: dict) -> dict:
        res = fin["result"]
        content = res.get("content")
        m: dict = {
            "role": "toolResult",
            "toolCallId": fin["toolCall"].get("id"),
            "toolName": _tool_name(fin["toolCall"]),
            "content": content if content is not None else [],
        }
        if "details" in res:
            m["details"] = res["details"]
        if res.get("usage") is not None:
            m["usage"] = res["usage"]
        m["isError"] = bool(fin["isError"])
        if fin.get("durationMs") is not None:
            m["durationMs"] = fin["durationMs"]
        m["timestamp"] = self.clock()
        return m


def _js_call(block: dict) -> dict:
    """A toolCall block with its arguments as JavaScript holds them (``1000.0`` -> ``1000``; :func:`js_value`)."""
    if block.get("type") != "toolCall" or "arguments" not in block:
        return block
    return {**block, "arguments": js_value(block["arguments"])}


def _all_terminate(finals: list[dict]) -> bool:
    """Pi ``shouldTerminateToolBatch``: non-empty and every result has ``terminate === true``."""
    return bool(finals) and all(f["result"].get("terminate") is True for f in finals)


def _ms(delay: Any) -> int:
    try:
        return max(0, int(round(float(delay))))
    except (TypeError, ValueError):
        return 0


def _js_str(x: Any) -> str:
    """JS template-literal string conversion of a (JSON) value."""
    if isinstance(x, str):
        return x
    if x is None:
        return "undefined"
    if x is True:
        return "true"
    if x is False:
        return "false"
    if isinstance(x, (int, float)):
        return js_number_str(x)
    if isinstance(x, list):
        return ",".join("" if v is None else _js_str(v) for v in x)
    if isinstance(x, dict):
        return "[object Object]"
    return str(x)


def run(
    prompts: list[dict] | dict,
    system_prompt: str = "",
    env: Environment | None = None,
    config: LoopConfig | None = None,
    policy: Callable[[dict], dict] | None = None,
    *,
    tools: list[AgentTool] | None = None,
    on_boundary: Callable[[Harness], None] | None = None,
) -> Harness:
    """Run a whole episode on the step driver: ``policy(h.context())`` answers every boundary.

    A policy that raises is handled like Pi's ``Agent`` (``handleRunFailure``): the boundary gets an
    assistant message ``{content:[{type:"text",text:""}], stopReason:"error", errorMessage:str(exc)}``.
    """
    if policy is None:
        raise ValueError("run() needs a policy: ctx -> assistant message")
    h = Harness.start(prompts, system_prompt, env, config, tools=tools)
    while not h.done:
        if on_boundary is not None:
            on_boundary(h)
        try:
            reply = policy(h.context())
        except Exception as exc:  # noqa: BLE001
            from hpd.harness.messages import assistant_message

            reply = assistant_message([{"type": "text", "text": ""}], "error", error_message=_exc_text(exc))
        h.step(reply)
    return h
