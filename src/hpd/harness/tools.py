"""Tools and environments (Pi ``AgentTool`` / ``AgentToolResult``, ``packages/agent/src/types.ts`` 1.6.0).

An :class:`AgentTool` is a Pi ``Tool`` (name, description, JSON-Schema ``parameters``) plus a synchronous
``execute(tool_call_id, validated_args) -> AgentToolResult``. The result is a plain dict
``{"content": [text blocks], "details": ..., "terminate"?: bool, "isError"?: bool}``; raising an
exception gives Pi's thrown-error result (``isError`` true, text ``str(exc)``).

Departures from Pi (and why):

- ``execute`` is synchronous: our loop is a deterministic step driver, not an event loop. Parallel
  batches are simulated (see :mod:`hpd.harness.loop`): allowed calls run one by one in source order,
  and ``tool_execution_end`` is emitted in *simulated* completion order, taken from an optional
  ``"delay"`` (ms) key of the result (an hpd extension; stripped before the result is recorded).
- No ``signal`` / ``onUpdate`` arguments: there is no cancellation of a running Python call, and
  ``tool_execution_update`` events are not produced.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, runtime_checkable

from hpd.harness.jsvalues import js_json


# (name, description, id(parameters)) -> (parameters, declaration); see AgentTool.declaration
_DECLARATIONS: dict[tuple, tuple] = {}


@dataclass
class AgentTool:
    """A Pi ``AgentTool``. ``parameters`` is a JSON Schema of type object."""

    name: str
    description: str
    parameters: dict
    execute: Callable[[str, dict], dict]
    label: str = ""
    execution_mode: str | None = None  # "sequential" | "parallel" | None (Pi ``executionMode``)
    prepare_arguments: Callable[[Any], Any] | None = None  # Pi ``prepareArguments`` shim

    def declaration(self) -> dict:
        """Pi ``toToolDeclaration``: ``{name, description, parameters}`` (parameters JSON round-tripped).

        Memoised per (name, description, parameters object): tool schemas are treated as immutable once a
        tool is built, and the same declaration object is shared by every episode and fork that offers the
        tool (the harness compares declarations at every boundary; sharing makes that an identity check).
        """
        key = (self.name, self.description, id(self.parameters))
        hit = _DECLARATIONS.get(key)
        if hit is not None and hit[0] is self.parameters:
            return hit[1]
        decl = {
            "name": self.name,
            "description": self.description,
            "parameters": js_json(self.parameters),
        }
        if len(_DECLARATIONS) > 200_000:
            _DECLARATIONS.clear()
        _DECLARATIONS[key] = (self.parameters, decl)
        return decl


@runtime_checkable
class Environment(Protocol):
    """What answers tool calls; forked together with the harness."""

    def tools(self) -> list[AgentTool]: ...

    def fork(self) -> "Environment": ...


@dataclass
class StaticEnv:
    """An :class:`Environment` over a fixed list of stateless tools (``fork`` returns a shallow copy)."""

    tool_list: list[AgentTool] = field(default_factory=list)

    def tools(self) -> list[AgentTool]:
        return self.tool_list

    def fork(self) -> "StaticEnv":
        return StaticEnv(list(self.tool_list))


def tool_result(s: str, details: Any = None, *, terminate: bool | None = None, is_error: bool | None = None) -> dict:
    """Convenience: an ``AgentToolResult`` with one text block."""
    res: dict = {"content": [{"type": "text", "text": s}], "details": {} if details is None else details}
    if terminate is not None:
        res["terminate"] = terminate
    if is_error is not None:
        res["isError"] = is_error
    return res
