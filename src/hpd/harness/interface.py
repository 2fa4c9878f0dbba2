"""What hpd needs from an agent harness: :class:`AgentHarness`, a structural Protocol, and its :class:`Verdict`.

hpd's stages work on *boundaries*: the moments a harness asks the model for its next action. A harness, as
hpd drives it, is an object parked at a boundary (or ended) with:

========================  =============================================================================
``context()``             the boundary in hpd's neutral shape, ``{"systemPrompt", "tools", "messages"}``
                          (Pi messages; ``tools`` as ``{name, description, parameters}``): what
                          :mod:`hpd.policy.chat` renders into a prompt
``request()``             the boundary as the model's API receives it, an OpenAI chat-completions body with
                          at least ``"messages"`` and ``"tools"`` (the harness's own rendering: Pi's
                          ``openai-completions`` provider for Pi, the ``Model`` request for smolagents)
``step(action)``          apply the model's action (a Pi assistant message: text, thinking and
                          ``toolCall`` blocks, ``stopReason``) and run the harness's rules up to the next
                          boundary or the end; returns the harness
``events``                everything the harness did so far, in its own event vocabulary (Pi's
                          ``agent_start`` ... ``agent_end``; smolagents' tool calls, outputs and steps)
``verdict()``             the harness's judgement of the last action applied (:class:`Verdict`), ``None``
                          before the first one
``fork()``                an independent copy at this boundary (its environment forked too)
``done``/``end_reason``   termination: whether the run has ended, and why (harness-specific words:
                          Pi ``natural|terminate|error|aborted|max_turns``; smolagents
                          ``final_answer|max_steps|error``)
``boundary_kind``         what kind of boundary this is (Pi ``initial|after_tool_batch|...``;
                          smolagents ``step|forced_final_answer``), ``None`` once done
========================  =============================================================================

Pi's :class:`hpd.harness.loop.Harness` satisfies it (``request`` and ``verdict`` are thin read-only
methods over :func:`pi_request` and :func:`pi_verdict`; nothing the loop does changed). The second harness
is :class:`hpd.harnesses.smolagents.SmolagentsHarness` (smolagents' ``ToolCallingAgent``).
``docs/new-harness.md`` is the guide to adding another one.

The action is the same for every harness (a Pi assistant message) so one policy, parser and teacher serve
them all; each harness maps it onto what its own loop takes (the smolagents adapter turns it into a
``ChatMessage`` with ``tool_calls``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

#: Verdict kinds. Valid: ``calls`` (every call accepted), ``finish`` (the action ends the run by the
#: harness's rule), ``tool_error`` (accepted, but a tool failed while running). Invalid: ``unknown_tool``,
#: ``invalid_arguments``, ``parse_error`` (the harness found no action in the reply), ``length``,
#: ``error``/``aborted`` (the reply was a failed generation), ``rejected`` (another harness rule).
VERDICT_KINDS = ("calls", "finish", "tool_error", "unknown_tool", "invalid_arguments", "parse_error", "length",
                 "error", "aborted", "rejected")


@dataclass(frozen=True)
class Verdict:
    """The harness's judgement of one applied action: ``valid`` (the action obeys the harness's protocol),
    ``kind`` (:data:`VERDICT_KINDS`) and ``reason``: the text the harness shows the model about it (its error
    text), ``None`` when there is none."""

    valid: bool
    kind: str
    reason: str | None = None

    def to_record(self) -> dict:
        return {"valid": self.valid, "kind": self.kind, "reason": self.reason}


@runtime_checkable
class AgentHarness(Protocol):
    """A harness parked at a boundary or ended (see the module docstring)."""

    done: bool
    end_reason: str | None
    boundary_kind: str | None
    events: list

    def context(self) -> dict: ...

    def request(self) -> dict: ...

    def step(self, action: dict) -> Any: ...

    def fork(self) -> Any: ...

    def verdict(self) -> Verdict | None: ...


# --------------------------------------------------------------------------------------------- Pi
def pi_request(h: Any) -> dict:
    """Pi's request at ``h``'s boundary: ``{"messages", "tools"}`` as its ``openai-completions`` provider
    sends them (:mod:`hpd.harness.wire`)."""
    from hpd.harness.wire import to_openai_messages, to_openai_tools

    ctx = h.context()
    return {"messages": to_openai_messages(ctx), "tools": to_openai_tools(ctx["tools"])}


def pi_verdict(h: Any) -> Verdict | None:
    """Pi's verdict on the last assistant message of ``h`` (read-only: nothing is re-run or stored).

    Pi checks, per call in source order: the tool exists, then its arguments parse and validate
    (:func:`hpd.harness.validation.validate_tool_arguments`); the first failure decides, with the text Pi
    gave the model. A reply without calls is ``finish`` (Pi ends the run on it); ``error``/``aborted`` replies
    and ``length`` stops with calls are invalid. Accepted calls whose tool then failed are ``tool_error``
    (valid: the environment failed, not the action). ``before_tool_call`` blocks are not re-judged (they are
    the caller's hooks, not Pi's rules).
    """
    from hpd.harness.messages import tool_calls_of
    from hpd.harness.validation import validate_tool_arguments

    msg = next((m for m in reversed(h.transcript) if m.get("role") == "assistant"), None)
    if msg is None:
        return None
    stop = msg.get("stopReason")
    if stop in ("error", "aborted"):
        return Verdict(False, stop, msg.get("errorMessage"))
    calls = tool_calls_of(msg)
    if not calls:
        return Verdict(True, "finish")
    if stop == "length":
        return Verdict(False, "length", _result_text(h, calls[0]))   # Pi's length-stop text
    for call in calls:
        tool = next((t for t in h.tools if t.name == call.get("name")), None)
        if tool is None:
            return Verdict(False, "unknown_tool", _result_text(h, call))
        try:
            validate_tool_arguments(tool, call)
        except Exception:  # noqa: BLE001 - Pi's validation error, whose text the result holds
            return Verdict(False, "invalid_arguments", _result_text(h, call))
    for r in h.last_tool_results:
        if r.get("isError"):
            return Verdict(True, "tool_error", _text(r))
    return Verdict(True, "calls")


def _text(message: dict) -> str:
    return "\n".join(b.get("text", "") for b in message.get("content") or []
                     if isinstance(b, dict) and b.get("type") == "text")


def _result_text(h: Any, call: dict) -> str | None:
    r = next((r for r in h.last_tool_results if r.get("toolCallId") == call.get("id")), None)
    return _text(r) if r is not None else None
