"""Pi message model (``@earendil-works/pi-ai`` 1.6.0 ``types.ts``) as plain JSON dicts.

Messages use Pi's camelCase field names exactly as Pi serialises them, so a transcript produced here
compares byte-for-byte (after timestamp/id normalisation) with one produced by the real Pi loop:

- user:       ``{"role":"user","content": str | [TextContent|ImageContent], "timestamp": int}``
- assistant:  ``{"role":"assistant","content":[text|thinking|toolCall], "api", "provider", "model",
  "usage", "stopReason", "timestamp", ["errorMessage"]}``
- toolResult: ``{"role":"toolResult","toolCallId","toolName","content","details","isError","timestamp"}``
  (Pi 1.6 adds ``durationMs``; see :mod:`hpd.harness.loop` for how we fill it deterministically)
- system (Pi 1.6 only): ``{"role":"system","content": str, "toolsAdded": [Tool], "timestamp"}``

Messages are treated as immutable once appended to a transcript: the loop never mutates a message in
place, which is what makes :meth:`hpd.harness.Harness.fork` a cheap shallow copy.
"""

from __future__ import annotations

from typing import Any, Iterable

#: Defaults stamped on assistant messages built here (a scripted or local policy, not a real provider).
DEFAULT_API = "openai-completions"
DEFAULT_PROVIDER = "hpd"
DEFAULT_MODEL = "policy"

STOP_REASONS = ("stop", "length", "toolUse", "error", "aborted")


def zero_usage() -> dict:
    """Pi's ``Usage`` with every counter at zero (what a scripted reply carries)."""
    return {
        "input": 0,
        "output": 0,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": 0,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
    }


def text(s: str) -> dict:
    """A ``TextContent`` block."""
    return {"type": "text", "text": s}


def thinking(s: str, signature: str | None = None) -> dict:
    """A ``ThinkingContent`` block; ``signature`` is the wire field it arrived in (e.g. ``reasoning_content``)."""
    block: dict = {"type": "thinking", "thinking": s}
    if signature is not None:
        block["thinkingSignature"] = signature
    return block


def tool_call(id: str, name: str, arguments: dict | None = None, *, arguments_error: str | None = None) -> dict:
    """A ``ToolCall`` block. ``arguments_error`` (Pi 1.6 ``argumentsError``) marks arguments that did not parse.

    In Pi 1.6 a call whose argument text is not a JSON object carries ``arguments: {}`` and
    ``argumentsError: <raw text>``; validation then reports the ``JSON.parse`` error (see
    :mod:`hpd.harness.validation`).
    """
    block: dict = {"type": "toolCall", "id": id, "name": name, "arguments": {} if arguments is None else arguments}
    if arguments_error is not None:
        block["argumentsError"] = arguments_error
    return block


def user_message(content: str | list, timestamp: int = 0) -> dict:
    """A Pi ``UserMessage``; ``content`` is a string or a list of text/image blocks."""
    return {"role": "user", "content": content, "timestamp": int(timestamp)}


def system_message(content: str | list = "", *, tools_added: list | None = None, timestamp: int = 0) -> dict:
    """A Pi 1.6 ``SystemMessage`` (the leading one is the prompt; ``toolsAdded`` declares tools)."""
    msg: dict = {"role": "system", "content": content}
    if tools_added is not None:
        msg["toolsAdded"] = tools_added
    msg["timestamp"] = int(timestamp)
    return msg


def assistant_message(
    content: Iterable[dict] | str,
    stop_reason: str | None = None,
    *,
    error_message: str | None = None,
    usage: dict | None = None,
    api: str = DEFAULT_API,
    provider: str = DEFAULT_PROVIDER,
    model: str = DEFAULT_MODEL,
    timestamp: int = 0,
) -> dict:
    """A Pi ``AssistantMessage``.

    ``content`` is a list of blocks (a bare string becomes one text block). ``stop_reason`` defaults
    to ``"toolUse"`` when the content has a toolCall block, else ``"stop"`` (what a provider reports);
    Pi itself decides continuation by content, not by stopReason.
    """
    blocks = [text(content)] if isinstance(content, str) else list(content)
    if stop_reason is None:
        stop_reason = "toolUse" if any(b.get("type") == "toolCall" for b in blocks) else "stop"
    msg: dict = {
        "role": "assistant",
        "content": blocks,
        "api": api,
        "provider": provider,
        "model": model,
        "usage": usage if usage is not None else zero_usage(),
        "stopReason": stop_reason,
        "timestamp": int(timestamp),
    }
    if error_message is not None:
        msg["errorMessage"] = error_message
    return msg


def tool_result_message(
    tool_call_id: str,
    tool_name: str,
    content: list,
    details: Any,
    is_error: bool,
    timestamp: int = 0,
) -> dict:
    """A Pi ``ToolResultMessage`` (``createToolResultMessage``)."""
    return {
        "role": "toolResult",
        "toolCallId": tool_call_id,
        "toolName": tool_name,
        "content": content,
        "details": details,
        "isError": bool(is_error),
        "timestamp": int(timestamp),
    }


def tool_calls_of(msg: dict | None) -> list[dict]:
    """The toolCall blocks of an assistant message, in source order (``[]`` for anything else)."""
    if not isinstance(msg, dict) or msg.get("role") != "assistant":
        return []
    content = msg.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == "toolCall"]


def text_of(msg: dict | None) -> str:
    """The text of a message: text blocks joined with ``""`` (a string content is returned as is)."""
    if not isinstance(msg, dict):
        return ""
    content = msg.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
