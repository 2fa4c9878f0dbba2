"""BFCL entries -> prompts through hpd's renderer; model replies -> BFCL result entries through hpd's parser.

**Tools.** BFCL function docs become OpenAI ``tools`` with BFCL's own converter, ``convert_to_tool(functions,
GORILLA_TO_OPENAPI, ModelStyle.OPENAI_COMPLETIONS)`` (BFCL types cast to JSON Schema, ``.`` in names replaced by
``_``), exactly what ``bfcl generate`` sends an OpenAI-compatible FC model. They are rendered with the conversation
by :func:`hpd.policy.chat.render_messages` (hpd's Qwen3 protocol template: tools in ``<tools>``, calls as
``<tool_call>`` JSON, results as ``<tool_response>``), the format the student was trained on. No system prompt is
added, as in BFCL's FC mode; the entries' own system messages (some live entries have one) are kept.

**Replies.** A completion is split by :func:`hpd.policy.chat.parse_completion` (the parser of training, rollouts and
``hpd serve``). What goes into the result file is what BFCL's FC handlers store
(``api_inference/openai_completion.py``):

* every call parsed with object arguments -> ``[{name: "<arguments as JSON>"}, ...]``;
* otherwise (no ``<tool_call>``, or a call whose arguments are not a JSON object) -> the reply as text.

BFCL's FC decoder fails on a text result, so a reply that does not parse scores as a failed decode in the AST
categories, as "no call" in irrelevance, and ends the turn in multi-turn, both in hpd's scoring and in
``bfcl evaluate``; hpd records why (:attr:`Reply.error`). Departures from BFCL's own pipeline, both from hpd's
parser: arguments follow ``JSON.parse`` semantics after Pi's ``repairJson`` (so ``5.0`` is the integer ``5`` and a
trailing comma is forgiven), and a reply with one broken call among good ones is text as a whole (vLLM's hermes
parser does the same).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hpd.bfcl import lib
from hpd.harness.jsvalues import js_stringify
from hpd.policy import chat


def tools_for(functions: list[dict]) -> list[dict]:
    """BFCL function docs -> OpenAI ``tools`` (BFCL's ``convert_to_tool`` for OpenAI-style FC models)."""
    lib.load()
    from bfcl_eval.constants.enums import ModelStyle
    from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI
    from bfcl_eval.model_handler.utils import convert_to_tool

    return convert_to_tool(functions, GORILLA_TO_OPENAPI, ModelStyle.OPENAI_COMPLETIONS)


def render(tokenizer: Any, messages: list[dict], tools: list[dict], *, enable_thinking: bool = False) -> str:
    """OpenAI-shaped ``messages`` + ``tools`` -> the prompt text (hpd's renderer, generation prompt appended)."""
    return chat.render_messages(tokenizer, chat.template_messages(messages), chat.template_tools(tools),
                                enable_thinking=enable_thinking)


@dataclass
class Reply:
    """One parsed completion: ``result`` is the BFCL result value, ``message`` the assistant message for the
    history, ``calls`` the decoded ``[{name: arguments}]`` (empty when it did not parse), ``error`` why not."""

    text: str
    result: Any
    message: dict
    calls: list[dict]
    error: str | None


def _visible(text: str) -> str:
    for stop in chat.STOP_STRINGS:
        i = text.find(stop)
        if i >= 0:
            text = text[:i]
    return text


def parse_reply(text: str, *, id_prefix: str = "call") -> Reply:
    """A model completion -> :class:`Reply` (module doc). Never raises. ``error`` is ``no_call: ...`` (a text or
    empty reply: right in irrelevance, the end of a turn in multi-turn) or ``malformed_call: ...`` (a
    ``<tool_call>`` hpd's parser cannot read: no name, or arguments that are not a JSON object)."""
    text = text if isinstance(text, str) else ""
    parsed = chat.parse_completion(text)
    if not parsed.calls:
        if chat.TOOL_CALL_OPEN in parsed.text:
            why = "malformed_call: a <tool_call> block without a readable JSON name"
        else:
            why = "no_call: text reply" if parsed.text.strip() else "no_call: empty reply"
        return Reply(text, parsed.text, {"role": "assistant", "content": parsed.text}, [], why)
    bad = next((c for c in parsed.calls if c.arguments_error), None)
    if bad is not None:
        first = bad.arguments_error.splitlines()[0] if bad.arguments_error else "invalid arguments"
        body = _visible(text)
        return Reply(text, body, {"role": "assistant", "content": body}, [], f"malformed_call: {bad.name}: {first}")
    result = [{c.name: js_stringify(c.arguments)} for c in parsed.calls]
    return Reply(text, result, chat.to_openai_message(parsed, id_prefix=id_prefix),
                 [{c.name: c.arguments} for c in parsed.calls], None)


def tool_messages(message: dict, results: list[str]) -> list[dict]:
    """The ``tool`` messages answering an assistant message's calls, one per execution result, in order."""
    calls = message.get("tool_calls") or []
    return [{"role": "tool", "content": r, "tool_call_id": c.get("id")} for c, r in zip(calls, results)]
