"""Checks on ``hpd serve`` request bodies: every problem is a :class:`BadRequest` (HTTP 400) whose one
line names the field (``messages[2].tool_calls[0].function.name``), never a 500.

Fields. A body may hold only fields of the OpenAI API (plus the vLLM extensions hpd serves: ``top_k``,
``chat_template_kwargs``, ``enable_thinking``, ``priority``); an unknown field is a 400 naming it. A known
field hpd cannot honour (``stop``, penalties, ``logit_bias``, ``response_format``, ``tool_choice`` other
than ``auto``, ...) is accepted only at its neutral value (the value that changes nothing), else a 400
saying it is not supported: a request is never silently answered as if it had asked something else.
Bookkeeping fields (``store``, ``metadata``, ``user``, ``service_tier``, ``prompt_cache_key``, ...) are
accepted and ignored: they do not change the completion.

``reasoning_effort`` (what Pi sends in its default ``openai`` thinking format) turns thinking on unless it
is ``none``/``minimal``; ``chat_template_kwargs.enable_thinking`` and top-level ``enable_thinking`` win
over it (:func:`hpd.policy.chat.render_chat_request`).

Tools: each entry ``{"type": "function", "function": {"name", "description"?, "parameters"?}}``; names
are non-empty strings without control characters (not OpenAI's ``^[a-zA-Z0-9_-]{1,64}$``: TRAJECT-Bench
names hold spaces and colons, and Pi sends them as they are) and are unique; ``parameters`` is a JSON Schema object whose
``type``, ``properties``, ``required``, ``items``, ``enum`` and ``anyOf``/``oneOf``/``allOf`` have the
right shapes, recursively.
"""

from __future__ import annotations

import re
from typing import Any, Callable


class BadRequest(ValueError):
    """A request we reject with HTTP 400 (OpenAI error shape)."""


def _none(v: Any) -> bool:
    return v is None


def _any(_v: Any) -> bool:
    return True


def _zero(v: Any) -> bool:
    return v is None or v == 0


def _empty(v: Any) -> bool:
    return v is None or v == "" or v == [] or v == {}


SUPPORTED = {"model", "n", "max_tokens", "temperature", "top_p", "top_k", "seed", "stream", "stream_options",
             "logprobs", "store", "metadata", "user", "service_tier", "prompt_cache_key",
             "prompt_cache_retention", "safety_identifier", "priority"}
# field -> whether a value is neutral (accepted); anything else is "not supported"
NEUTRAL: dict[str, Callable[[Any], bool]] = {
    "stop": _empty, "frequency_penalty": _zero, "presence_penalty": _zero, "logit_bias": _empty,
    "min_p": _zero, "repetition_penalty": lambda v: v is None or v == 1,
}
CHAT_FIELDS = SUPPORTED | {"messages", "tools", "max_completion_tokens", "chat_template_kwargs", "enable_thinking",
                           "reasoning_effort"}
CHAT_NEUTRAL = {**NEUTRAL, "tool_choice": lambda v: v in (None, "auto"), "parallel_tool_calls": lambda v: v in (None, True),
                "response_format": lambda v: v is None or v == {"type": "text"}, "top_logprobs": _zero,
                "modalities": lambda v: v is None or v == ["text"], "functions": _none, "function_call": _none,
                "audio": _none, "prediction": _none, "web_search_options": _none, "verbosity": _none}
COMPLETION_FIELDS = SUPPORTED | {"prompt"}
COMPLETION_NEUTRAL = {**NEUTRAL, "echo": lambda v: v in (None, False), "suffix": _empty,
                      "best_of": lambda v: v in (None, 1)}
ROLES = ("system", "developer", "user", "assistant", "tool")
TOOL_NAME = re.compile(r"^[^\x00-\x1f\x7f]+$")   # TRAJECT-Bench names hold spaces and colons: any printable text
SCHEMA_TYPES = {"string", "number", "integer", "boolean", "null", "array", "object"}


def check_fields(body: Any, fields: set[str], neutral: dict[str, Callable[[Any], bool]]) -> dict:
    """The body as a dict; a 400 for a non-object body, an unknown field or an unsupported value."""
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    if not isinstance(body.get("stream", False), (bool, type(None))):
        raise BadRequest("'stream' must be true or false")
    if not isinstance(body.get("stream_options") or {}, dict):
        raise BadRequest("'stream_options' must be an object")
    for key, value in body.items():
        if key in neutral:
            if not neutral[key](value):
                raise BadRequest(f"'{key}' = {_short(value)} is not supported by hpd serve (leave it out)")
        elif key not in fields:
            raise BadRequest(f"unknown field '{key}' (hpd serve accepts the OpenAI fields it can honour: "
                             f"{', '.join(sorted(fields))})")
    return body


def _short(value: Any, limit: int = 60) -> str:
    import json

    s = json.dumps(value, ensure_ascii=False, default=str)
    return s if len(s) <= limit else s[: limit - 3] + "..."


# ------------------------------------------------------------------------------------------ chat
def check_chat(body: Any) -> dict:
    """A checked ``/v1/chat/completions`` body (``reasoning_effort`` mapped to ``enable_thinking``)."""
    body = check_fields(body, CHAT_FIELDS, CHAT_NEUTRAL)
    check_messages(body.get("messages"))
    if body.get("tools") is not None:
        check_tools(body["tools"])
    if not isinstance(body.get("logprobs", False), (bool, type(None))):
        raise BadRequest("'logprobs' must be true or false")
    kw = body.get("chat_template_kwargs")
    if kw is not None and not isinstance(kw, dict):
        raise BadRequest("'chat_template_kwargs' must be an object")
    effort = body.get("reasoning_effort")
    if effort is not None:
        if not isinstance(effort, str):
            raise BadRequest("'reasoning_effort' must be a string")
        if "enable_thinking" not in body:
            body = {**body, "enable_thinking": effort not in ("none", "minimal")}
    return body


def check_messages(msgs: Any) -> None:
    if not isinstance(msgs, list) or not msgs:
        raise BadRequest("'messages' must be a non-empty list")
    for i, m in enumerate(msgs):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            raise BadRequest(f"{where} must be an object")
        if m.get("role") not in ROLES:
            raise BadRequest(f"{where}.role must be one of {', '.join(ROLES)}, not {_short(m.get('role'))}")
        _check_content(m.get("content"), f"{where}.content")
        if m["role"] == "tool" and not isinstance(m.get("tool_call_id"), (str, type(None))):
            raise BadRequest(f"{where}.tool_call_id must be a string")
        calls = m.get("tool_calls")
        if calls is not None:
            if m["role"] != "assistant" or not isinstance(calls, list):
                raise BadRequest(f"{where}.tool_calls must be a list on an assistant message")
            for k, tc in enumerate(calls):
                fn = tc.get("function") if isinstance(tc, dict) else None
                if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) \
                        or not isinstance(fn.get("arguments", ""), (str, dict)):
                    raise BadRequest(f"{where}.tool_calls[{k}] must be {{\"function\": {{\"name\": string, "
                                     f"\"arguments\": string}}}}")


def _check_content(content: Any, where: str) -> None:
    if content is None or isinstance(content, str):
        return
    if not isinstance(content, list):
        raise BadRequest(f"{where} must be a string, null or a list of parts")
    for j, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
            kind = part.get("type") if isinstance(part, dict) else None
            raise BadRequest(f"{where}[{j}] must be a text part {{\"type\": \"text\", \"text\": string}}"
                             + (f"; '{kind}' parts are not supported" if kind and kind != "text" else ""))


def check_tools(tools: Any) -> None:
    if not isinstance(tools, list):
        raise BadRequest("'tools' must be a list")
    seen: set[str] = set()
    for i, t in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(t, dict) or t.get("type") != "function" or not isinstance(t.get("function"), dict):
            raise BadRequest(f"{where} must be {{\"type\": \"function\", \"function\": {{...}}}}")
        fn = t["function"]
        name = fn.get("name")
        if not isinstance(name, str) or not TOOL_NAME.match(name):
            raise BadRequest(f"{where}.function.name must be a non-empty string without control characters, "
                             f"not {_short(name)}")
        if name in seen:
            raise BadRequest(f"{where}.function.name '{name}' is declared twice")
        seen.add(name)
        if not isinstance(fn.get("description", ""), (str, type(None))):
            raise BadRequest(f"{where}.function.description must be a string")
        params = fn.get("parameters")
        if params is not None:
            if not isinstance(params, dict):
                raise BadRequest(f"{where}.function.parameters must be a JSON Schema object")
            check_schema(params, f"{where}.function.parameters")


def check_schema(node: Any, where: str) -> None:
    """Shape checks on a JSON Schema (module doc); ``True``/``False`` schemas are allowed below the root."""
    if isinstance(node, bool):
        return
    if not isinstance(node, dict):
        raise BadRequest(f"{where} must be a JSON Schema object")
    types = node.get("type")
    for t in types if isinstance(types, list) else [types]:
        if t is not None and t not in SCHEMA_TYPES:
            raise BadRequest(f"{where}.type {_short(t)} is not a JSON Schema type ({', '.join(sorted(SCHEMA_TYPES))})")
    props = node.get("properties")
    if props is not None:
        if not isinstance(props, dict):
            raise BadRequest(f"{where}.properties must be an object")
        for k, sub in props.items():
            check_schema(sub, f"{where}.properties.{k}")
    req = node.get("required")
    if req is not None and not (isinstance(req, list) and all(isinstance(r, str) for r in req)):
        raise BadRequest(f"{where}.required must be a list of strings")
    if "enum" in node and not isinstance(node["enum"], list):
        raise BadRequest(f"{where}.enum must be a list")
    items = node.get("items")
    if items is not None:
        for k, sub in enumerate(items) if isinstance(items, list) else [(None, items)]:
            check_schema(sub, f"{where}.items" + ("" if k is None else f"[{k}]"))
    for key in ("anyOf", "oneOf", "allOf"):
        if key in node:
            if not isinstance(node[key], list) or not node[key]:
                raise BadRequest(f"{where}.{key} must be a non-empty list")
            for k, sub in enumerate(node[key]):
                check_schema(sub, f"{where}.{key}[{k}]")


# ------------------------------------------------------------------------------------------ completions
def check_completion(body: Any) -> tuple[dict, list[str]]:
    """A checked ``/v1/completions`` body and its prompts."""
    body = check_fields(body, COMPLETION_FIELDS, COMPLETION_NEUTRAL)
    prompts = body.get("prompt")
    if isinstance(prompts, str):
        prompts = [prompts]
    if not isinstance(prompts, list) or not prompts or not all(isinstance(p, str) for p in prompts):
        raise BadRequest("'prompt' must be a string or a list of strings")
    lp = body.get("logprobs")
    if lp is not None and (isinstance(lp, bool) or not isinstance(lp, int) or lp != 0):
        raise BadRequest("'logprobs' must be 0 (the sampled tokens' logprobs); top alternatives are not supported")
    return body, prompts


# ------------------------------------------------------------------------------------------ sampling
def _number(body: dict, name: str) -> float | None:
    v = body.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise BadRequest(f"'{name}' must be a number")
    return v


def sampling(body: dict, *, default_max_tokens: int, max_tokens_cap: int, max_tokens_limit: int | None) -> dict:
    """The policy's sampling arguments for a checked body. ``max_tokens`` (or ``max_completion_tokens``)
    above ``max_tokens_limit`` is a 400; within it, it is clamped to ``max_tokens_cap`` (Pi asks for up to
    32000 by default)."""
    n = _number(body, "n")
    n = 1 if n is None else n
    if n != int(n) or not 1 <= n <= 64:
        raise BadRequest("'n' must be an integer between 1 and 64")
    name = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    max_tokens = _number(body, name)
    if max_tokens is None:
        max_tokens = default_max_tokens if max_tokens_limit is None else min(default_max_tokens, max_tokens_limit)
    if max_tokens != int(max_tokens) or max_tokens < 1:
        raise BadRequest(f"'{name}' must be an integer >= 1")
    if max_tokens_limit is not None and max_tokens > max_tokens_limit:
        raise BadRequest(f"'{name}' = {int(max_tokens)} is over this server's limit of {max_tokens_limit} tokens")
    temperature = _number(body, "temperature")
    temperature = 1.0 if temperature is None else float(temperature)
    if temperature < 0:
        raise BadRequest("'temperature' must be >= 0")
    top_p = _number(body, "top_p")
    top_p = 1.0 if top_p is None else float(top_p)
    if not 0 < top_p <= 1:
        raise BadRequest("'top_p' must be in (0, 1]")
    top_k = _number(body, "top_k")
    seed = _number(body, "seed")
    if seed is not None and seed != int(seed):
        raise BadRequest("'seed' must be an integer")
    return {"n": int(n), "max_new_tokens": min(int(max_tokens), max_tokens_cap), "temperature": temperature,
            "top_p": top_p, "top_k": max(0, int(top_k or 0)), "seed": None if seed is None else int(seed),
            "logprobs": body.get("logprobs") is not None and body.get("logprobs") is not False}
