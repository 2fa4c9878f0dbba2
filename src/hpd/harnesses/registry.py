"""The harness registry: a harness name -> :class:`HarnessSpec` (how to start one on a task's environment, and
the few rules of its loop the stages need to know). ``pi`` (the default: :class:`hpd.harness.Harness`) and
``smolagents`` (:class:`hpd.harnesses.smolagents.SmolagentsHarness`).

The stages (replay, documents, teacher verification, evaluation) hold a harness only through
:class:`~hpd.harness.interface.AgentHarness` plus what this module answers for a harness:

- :meth:`HarnessSpec.start`: the harness parked at its first boundary for a user query over an environment
  (``max_turns``: Pi's provider-call budget; smolagents' ``max_steps``, after which smolagents asks once more
  for a forced final answer, so a smolagents run makes at most ``max_turns + 1`` model calls);
- :meth:`HarnessSpec.finish_action`: the action that ends the run by the harness's rule (Pi: a message without
  tool calls; smolagents: one ``final_answer`` call with ``{"answer": text}``; at smolagents'
  ``forced_final_answer`` boundary: plain text, its content is the answer);
- :meth:`HarnessSpec.is_finish` / :meth:`HarnessSpec.answer_of`: whether an action is that finish, and its
  answer text;
- :meth:`HarnessSpec.tool_calls`: an action's tool calls with hpd's tool names (smolagents' model sees
  identifier names, :func:`hpd.harnesses.smolagents.tool_name_map`), the finish call left out;
- ``end_rule`` / ``final_turn``: the termination rule in words (what the control document states).

:func:`turn_index` is the 0-based index of the current model call for any harness.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from hpd.harness.messages import assistant_message, text, tool_calls_of

DEFAULT_HARNESS = "pi"


def _text_of(action: dict) -> str:
    c = action.get("content")
    if isinstance(c, str):
        return c
    return "".join(b.get("text", "") for b in c or [] if isinstance(b, dict) and b.get("type") == "text")


@dataclass(frozen=True)
class HarnessSpec:
    name: str
    end_rule: str
    final_turn: str
    _start: Callable[..., Any]

    def start(self, query: str, env: Any, *, system_prompt: str | None = None, max_turns: int | None = None,
              tool_execution: str = "parallel") -> Any:
        """The harness parked at its first boundary (see the module docstring)."""
        return self._start(query, env, system_prompt=system_prompt, max_turns=max_turns,
                           tool_execution=tool_execution)

    # ------------------------------------------------------------------ the finish action
    def finish_action(self, answer: str, h: Any = None) -> dict:
        if self.name == "smolagents" and (h is None or getattr(h, "boundary_kind", None) != "forced_final_answer"):
            return assistant_message([{"type": "toolCall", "id": "call_final", "name": "final_answer",
                                       "arguments": {"answer": answer}}], "toolUse")
        return assistant_message([text(answer)])

    def is_finish(self, action: dict, boundary_kind: str | None = None) -> bool:
        """``action`` ends the run by the harness's rule (smolagents: exactly one call, ``final_answer``)."""
        calls = tool_calls_of(action)
        if self.name == "smolagents" and boundary_kind != "forced_final_answer":
            return len(calls) == 1 and calls[0].get("name") == "final_answer"
        return not calls

    def answer_of(self, action: dict, boundary_kind: str | None = None) -> str:
        """The answer text of a finish action (``""`` when it is none)."""
        if not self.is_finish(action, boundary_kind):
            return ""
        if self.name == "smolagents" and boundary_kind != "forced_final_answer":
            args = tool_calls_of(action)[0].get("arguments")
            a = args.get("answer") if isinstance(args, dict) else None
            return "" if a is None else str(a)
        return _text_of(action)

    def tool_calls(self, action: dict, tool_names: dict[str, str] | None = None) -> list[dict]:
        """The action's tool calls except smolagents' ``final_answer``, names mapped back to hpd's through
        ``tool_names`` (hpd name -> harness name; unknown names kept)."""
        calls = tool_calls_of(action)
        if self.name != "smolagents":
            return calls
        back = {v: k for k, v in (tool_names or {}).items()}
        return [{**c, "name": back.get(c.get("name"), c.get("name"))} for c in calls if c.get("name") != "final_answer"]

    def tool_names(self, env: Any) -> dict[str, str]:
        """hpd tool name -> the name the model sees, for ``env``'s tools."""
        names = [t.name for t in env.tools()]
        if self.name == "smolagents":
            from hpd.harnesses.smolagents import tool_name_map

            return tool_name_map(names)
        return {n: n for n in names}


def _start_pi(query, env, *, system_prompt=None, max_turns=None, tool_execution="parallel"):
    from hpd.harness import Harness, LoopConfig, user_message

    cfg = LoopConfig(tool_execution=tool_execution, max_turns=max_turns)
    return Harness.start(prompts=[user_message(query)], system_prompt=system_prompt or "", env=env, config=cfg)


def _start_smolagents(query, env, *, system_prompt=None, max_turns=None, tool_execution="parallel"):
    """smolagents keeps its own system prompt (``prompts/toolcalling_agent.yaml``, its tool rendering included)
    and runs calls on one worker thread in source order; ``system_prompt`` and ``tool_execution`` are Pi's."""
    from hpd.harnesses.smolagents import SmolagentsHarness

    return SmolagentsHarness.start(query, env, max_steps=max_turns or 20)


HARNESS_SPECS: dict[str, HarnessSpec] = {
    "pi": HarnessSpec("pi", "a reply with no toolCall blocks ends the run",
                      "one assistant message: the answer as non-empty text, no toolCall blocks", _start_pi),
    "smolagents": HarnessSpec("smolagents", "a step whose only tool call is final_answer ends the run",
                              "one assistant message: one final_answer call whose answer argument is the "
                              "non-empty answer, no other calls", _start_smolagents),
}


def get_harness(name: str | None) -> HarnessSpec:
    """The spec of harness ``name`` (``None``: the default, ``pi``); ``ValueError`` naming the choices."""
    spec = HARNESS_SPECS.get(name or DEFAULT_HARNESS)
    if spec is None:
        raise ValueError(f"unknown harness {name!r}; choose from {', '.join(HARNESS_SPECS)}")
    return spec


def start_harness(name: str | None, query: str, env: Any, **kw: Any) -> Any:
    """``get_harness(name).start(query, env, **kw)``."""
    return get_harness(name).start(query, env, **kw)


def harness_folder(name: str, harness: str | None) -> str:
    """The name of a run folder whose content depends on the harness (a replay, an evaluation) when cells of
    several harnesses may share its parent: ``name`` for Pi (the folders of runs made before the registry),
    ``<name>-<harness>`` for another."""
    h = get_harness(harness).name
    return name if h == DEFAULT_HARNESS else f"{name}-{h}"


def harness_name(h: Any) -> str:
    """The registry name of a live harness."""
    from hpd.harnesses.smolagents import SmolagentsHarness

    return "smolagents" if isinstance(h, SmolagentsHarness) else "pi"


def turn_index(h: Any) -> int:
    """0-based index of the model call ``h`` is parked at (Pi's ``turn_index``; smolagents' model calls so far)."""
    t = getattr(h, "turn_index", None)
    if isinstance(t, int):
        return t
    return len(getattr(h, "boundaries", []) or []) - 1


__all__ = ["DEFAULT_HARNESS", "HARNESS_SPECS", "HarnessSpec", "get_harness", "start_harness", "harness_folder",
           "harness_name", "turn_index"]
