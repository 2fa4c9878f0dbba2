"""OpenAI chat-completions wire format exactly as Pi 1.6's ``openai-completions`` provider
(``@earendil-works/pi-ai`` 1.6.0 ``api/openai-completions.js`` + ``transform-messages.js``) with its default
compat for a non-OpenAI host (vLLM/SGLang): no developer role, no ``strict``, no mid-conversation system
messages, text-only model.

Rendering (:func:`to_openai_messages`):

- system messages are collapsed into one leading ``{"role":"system","content": prompt}`` (skipped when
  the prompt is empty); tools go to the request's ``tools`` param (:func:`to_openai_tools`);
- user: string content as is; list content -> text parts (empty ones dropped, images as ``image_url``);
- assistant: ``content`` = non-blank text blocks joined with ``""`` (``None`` when there are none);
  thinking replayed in the field named by ``thinkingSignature`` (``reasoning_content`` | ``reasoning`` |
  ``reasoning_text``), joined with ``\\n``; ``tool_calls[].function.arguments = JSON.stringify(arguments)``;
  a message with neither content nor tool calls is skipped; ``error``/``aborted`` messages are dropped;
- toolResult: ``{"role":"tool","content": text blocks joined with "\\n" | "(no tool output)",
  "tool_call_id"}``, no ``isError``, no ``name``;
- a tool call left without a result (a user message follows, another assistant message follows, or the
  list ends) gets a synthetic result ``No result provided``.

Parsing (:func:`from_chat_completion`, :func:`from_sse_chunks`): content -> text block, reasoning fields
-> thinking block, ``tool_calls`` -> toolCall blocks (arguments through pi-ai ``parseToolCallArguments``:
``JSON.parse``, then ``repairJson``, else ``arguments: {}`` + ``argumentsError`` with V8's message),
``finish_reason`` mapping and usage mapping as Pi's. Never raises on model output.

Departures: a thinking block is replayed only when it carries a reasoning-field signature (same as
Pi when the message's provider/api/model equal the serving model's; Pi drops thinking of other models,
which needs the serving model and is up to the caller); ``reasoning_details`` signatures, images in
tool results for vision models and grammar tools are not handled.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from hpd.harness.jsvalues import js_json_parse, js_string, js_stringify, js_trim
from hpd.harness.messages import zero_usage

REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_text")
NON_VISION_TOOL_IMAGE = "(tool image omitted: model does not support images)"
NON_VISION_USER_IMAGE = "(image omitted: model does not support images)"


# ------------------------------------------------------------------------------------------ arguments
def _is_control(c: str) -> bool:
    return ord(c) <= 0x1F


def repair_json(s: str) -> str:
    """pi-ai ``repairJson``: inside strings, escape raw control characters and invalid backslashes."""
    out, in_str, i = [], False, 0
    valid_esc = set('"\\/bfnrtu')
    while i < len(s):
        c = s[i]
        if not in_str:
            out.append(c)
            if c == '"':
                in_str = True
            i += 1
            continue
        if c == '"':
            out.append(c)
            in_str = False
            i += 1
            continue
        if c == "\\":
            nxt = s[i + 1] if i + 1 < len(s) else None
            if nxt is None:
                out.append("\\\\")
                i += 1
                continue
            if nxt == "u":
                hx = s[i + 2:i + 6]
                if len(hx) == 4 and all(h in "0123456789abcdefABCDEF" for h in hx):
                    out.append("\\u" + hx)
                    i += 6
                    continue
                out.append("\\\\")
                i += 1
                continue
            if nxt in valid_esc:
                out.append("\\" + nxt)
                i += 2
                continue
            out.append("\\\\")
            i += 1
            continue
        if _is_control(c):
            out.append({"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(c, "\\u%04x" % ord(c)))
        else:
            out.append(c)
        i += 1
    return js_string("".join(out))


def parse_tool_call_arguments(text: Any) -> dict:
    """pi-ai ``parseToolCallArguments``: ``{"arguments": {...}}`` or ``{"arguments": {}, "argumentsError": ...}``."""
    if not isinstance(text, str) or not js_trim(text):
        return {"arguments": {}}
    text = js_string(text)
    value, err = js_json_parse(text)
    if err is not None:
        repaired = repair_json(text)
        if repaired != text:
            value, err2 = js_json_parse(repaired)
            if err2 is not None:
                err = err2
            else:
                err = None
    if err is None and not isinstance(value, dict):
        err = "Tool arguments must be a JSON object"
    if err is not None:
        return {"arguments": {}, "argumentsError": f"{err}\n\nReceived arguments:\n{text}"}
    return {"arguments": value}


# ------------------------------------------------------------------------------------------ rendering
def _sanitize(s: str) -> str:
    """pi-ai ``sanitizeSurrogates``: drop unpaired UTF-16 surrogates (a pair held as two Python code points is
    one character, as in JavaScript, and is kept)."""
    s = js_string(s)
    if not any(0xD800 <= ord(c) <= 0xDFFF for c in s):
        return s
    return "".join(c for c in s if not 0xD800 <= ord(c) <= 0xDFFF)


def _blank(s: Any) -> bool:
    """``!String(s).trim()`` for text fields (JavaScript's white space, not Python's)."""
    return not js_trim(str(s or ""))


def _text(c: Any) -> str:
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        return "".join(b.get("text", "") for b in c if isinstance(b, dict) and b.get("type") == "text")
    return ""


def _split_context(ctx: dict) -> tuple[str, list, list]:
    """(system prompt, tool declarations, non-system messages) from either context shape."""
    msgs = list(ctx.get("messages") or [])
    sys_parts, tools = [], {}
    if ctx.get("systemPrompt"):
        sys_parts.append(ctx["systemPrompt"])
    for t in ctx.get("tools") or []:
        tools[t["name"]] = {"name": t["name"], "description": t.get("description", ""), "parameters": t.get("parameters", {})}
    rest = []
    for m in msgs:
        if isinstance(m, dict) and m.get("role") == "system":
            txt = _text(m.get("content"))
            if txt:
                sys_parts.append(txt)
            for t in m.get("toolsRemoved") or []:
                tools.pop(t.get("name"), None)
            for t in m.get("toolsAdded") or []:
                tools[t["name"]] = t
        else:
            rest.append(m)
    return "\n\n".join(sys_parts), list(tools.values()), rest


def _transform(messages: list, model: dict | None = None) -> list:
    """pi-ai ``transformMessages``: drop error/aborted turns, synthesise orphan results; thinking of
    assistant messages from another model (provider/api/id differ from ``model``) is dropped."""
    result, pending, have = [], [], set()

    def close():
        nonlocal pending, have
        for tc in pending:
            if tc.get("id") not in have:
                result.append({"role": "toolResult", "toolCallId": tc.get("id"), "toolName": tc.get("name"),
                               "content": [{"type": "text", "text": "No result provided"}], "isError": True})
        pending, have = [], set()

    for m in messages:
        if not isinstance(m, dict):
            continue
        if m.get("content") is None:
            m = {**m, "content": []}
        role = m.get("role")
        if role == "assistant":
            close()
            if m.get("stopReason") in ("error", "aborted"):
                continue
            content = [b for b in m["content"] if isinstance(b, dict)]
            same = model is None or (m.get("provider") == model.get("provider") and m.get("api") == model.get("api", "openai-completions")
                                     and m.get("model") == model.get("id"))
            if not same:
                content = [b for b in content if b.get("type") != "thinking"]
            content = [b for b in content if not (b.get("type") == "thinking" and not b.get("redacted")
                                                    and not b.get("thinkingSignature") and _blank(b.get("thinking")))]
            calls = [b for b in content if b.get("type") == "toolCall"]
            if calls:
                pending, have = calls, set()
            result.append({**m, "content": content})
        elif role == "toolResult":
            have.add(m.get("toolCallId"))
            result.append(m)
        elif role == "user":
            close()
            result.append(m)
        else:
            result.append(m)
    close()
    return result


def _image_placeholder(content: list) -> list:
    out, prev = [], False
    for b in content:
        if isinstance(b, dict) and b.get("type") == "image":
            if not prev:
                out.append({"type": "text", "text": NON_VISION_TOOL_IMAGE})
            prev = True
            continue
        out.append(b)
        prev = isinstance(b, dict) and b.get("text") == NON_VISION_TOOL_IMAGE
    return out


def to_openai_messages(ctx: dict, model: dict | None = None) -> list[dict]:
    """A boundary context (``Harness.context()`` or ``provider_context()``) as Pi's chat-completions ``messages``.

    ``model`` (``{"provider", "api", "id"}``) is the serving model: as in Pi, thinking blocks of assistant
    messages produced by another model are not replayed. ``None`` treats every message as the same model's.
    """
    system, _tools, msgs = _split_context(ctx)
    params: list[dict] = []
    if system:
        params.append({"role": "system", "content": _sanitize(system)})
    items = _transform(msgs, model)
    i = 0
    while i < len(items):
        m = items[i]
        role = m.get("role")
        if role == "user":
            c = m.get("content")
            if isinstance(c, str):
                params.append({"role": "user", "content": _sanitize(c)})
            else:
                parts = []
                for b in c or []:
                    if not isinstance(b, dict):
                        continue
                    if b.get("type") == "text":
                        if b.get("text"):
                            parts.append({"type": "text", "text": _sanitize(b["text"])})
                    elif b.get("type") == "image":
                        parts.append({"type": "text", "text": NON_VISION_USER_IMAGE})
                if parts:
                    params.append({"role": "user", "content": parts})
        elif role == "assistant":
            blocks = m.get("content") or []
            texts = [_sanitize(b.get("text") or "") for b in blocks if b.get("type") == "text" and not _blank(b.get("text"))]
            out: dict = {"role": "assistant", "content": None}
            joined = "".join(texts)
            thinking = [b for b in blocks if b.get("type") == "thinking" and not _blank(b.get("thinking"))]
            if joined:
                out["content"] = joined
            if thinking:
                sig = thinking[0].get("thinkingSignature")
                if sig in REASONING_FIELDS:
                    out[sig] = js_string("\n".join(b.get("thinking", "") for b in thinking))
            calls = [b for b in blocks if b.get("type") == "toolCall"]
            if calls:
                out["tool_calls"] = [
                    {"id": c.get("id"), "type": "function",
                     "function": {"name": c.get("name"), "arguments": js_stringify(c.get("arguments"))}}
                    for c in calls
                ]
            if out["content"] is None and not calls:
                i += 1
                continue
            params.append(out)
        elif role == "toolResult":
            while i < len(items) and items[i].get("role") == "toolResult":
                t = items[i]
                content = _image_placeholder(t.get("content") or [])
                txt = "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
                has_images = any(isinstance(b, dict) and b.get("type") == "image" for b in content)
                body = txt if not _blank(txt) else "(see attached image)" if has_images else "(no tool output)"
                params.append({"role": "tool", "content": _sanitize(body), "tool_call_id": t.get("toolCallId")})
                i += 1
            continue
        i += 1
    return params


def to_openai_tools(tools: Iterable[Any]) -> list[dict]:
    """Pi's ``convertTools`` (no ``strict``: ``compat.supportsStrictMode`` is false for non-OpenAI hosts)."""
    out = []
    for t in tools:
        d = t if isinstance(t, dict) else {"name": t.name, "description": t.description, "parameters": t.parameters}
        out.append({"type": "function", "function": {"name": d["name"], "description": d.get("description", ""),
                                                     "parameters": d.get("parameters", {})}})
    return out


def to_openai_request(ctx: dict, model: str, *, provider: str | None = None, max_tokens: int = 8192, stream: bool = True) -> dict:
    """The request body (messages, tools, stream options) as Pi builds it for a text-only, non-reasoning model."""
    _s, tools, _m = _split_context(ctx)
    spec = None if provider is None else {"provider": provider, "api": "openai-completions", "id": model}
    body: dict = {"model": model, "messages": to_openai_messages(ctx, spec)}
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    body["store"] = False
    body["max_completion_tokens"] = max_tokens
    if tools:
        body["tools"] = to_openai_tools(tools)
    return body


# ------------------------------------------------------------------------------------------ parsing
def map_stop_reason(reason: Any) -> tuple[str, str | None]:
    """Pi ``mapStopReason``."""
    if reason is None:
        return "stop", None
    if reason in ("stop", "end"):
        return "stop", None
    if reason == "length":
        return "length", None
    if reason in ("function_call", "tool_calls"):
        return "toolUse", None
    return "error", f"Provider finish_reason: {reason}"


def parse_usage(raw: dict) -> dict:
    """Pi ``parseChunkUsage`` (cost 0: our models carry no price)."""
    def num(x):
        return x if isinstance(x, (int, float)) and not isinstance(x, bool) else 0

    prompt = num(raw.get("prompt_tokens")) or 0
    details = raw.get("prompt_tokens_details") or {}
    cache_read = details.get("cached_tokens")
    if cache_read is None:
        cache_read = raw.get("prompt_cache_hit_tokens")
    if cache_read is None:
        cache_read = raw.get("cached_tokens")
    cache_read = num(cache_read)
    cache_write = num(details.get("cache_write_tokens")) or 0
    inp = max(0, prompt - cache_read - cache_write)
    out = num(raw.get("completion_tokens")) or 0
    reasoning = num((raw.get("completion_tokens_details") or {}).get("reasoning_tokens")) or num(raw.get("reasoning_tokens")) or 0
    u = zero_usage()
    u.update({"input": inp, "output": out, "cacheRead": cache_read, "cacheWrite": cache_write, "reasoning": reasoning,
              "totalTokens": inp + out + cache_read + cache_write})
    u["cost"] = {**u.pop("cost"), "totalFromProvider": False}
    return u


def _sse_chunk(ch: Any) -> dict | None:
    """A parsed chunk from a chunk object or a ``data:`` line (None: nothing to read)."""
    if isinstance(ch, (str, bytes)):
        line = ch.decode("utf-8", "replace") if isinstance(ch, bytes) else ch   # TextDecoder: U+FFFD
        line = line.strip()
        if line.startswith("data:"):
            line = line[5:].strip()
        if not line or line == "[DONE]":
            return None
        ch = json.loads(line)
    return ch if isinstance(ch, dict) else None


class _SseMessage:
    """The assistant message Pi's streaming parser builds, chunk by chunk (:func:`from_sse_chunks`)."""

    def __init__(self, out: dict, model: str):
        self.out, self.model = out, model
        self.text_block = self.thinking_block = None
        self.by_index: dict = {}
        self.by_id: dict = {}
        self.raw_args: dict = {}
        self.has_finish = False

    def chunk(self, ch: dict) -> None:
        out = self.out
        if ch.get("id") and not out.get("responseId"):
            out["responseId"] = ch["id"]
        if isinstance(ch.get("model"), str) and ch["model"] and ch["model"] != self.model and not out.get("responseModel"):
            out["responseModel"] = ch["model"]
        if isinstance(ch.get("usage"), dict):
            out["usage"] = parse_usage(ch["usage"])
        choices = ch.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices else None
        if not isinstance(choice, dict):
            return
        if not ch.get("usage") and isinstance(choice.get("usage"), dict):
            out["usage"] = parse_usage(choice["usage"])
        if choice.get("finish_reason"):
            out["rawStopReason"] = choice["finish_reason"]
            sr, em = map_stop_reason(choice["finish_reason"])
            out["stopReason"] = sr
            if em:
                out["errorMessage"] = em
            self.has_finish = True
        delta = choice.get("delta") or choice.get("message")
        if isinstance(delta, dict):
            self.delta(delta)

    def delta(self, delta: dict) -> None:
        out = self.out
        field = next((f for f in REASONING_FIELDS if isinstance(delta.get(f), str) and delta[f]), None)
        if field:
            if self.thinking_block is None:
                self.thinking_block = {"type": "thinking", "thinking": "", "thinkingSignature": field}
                out["content"].append(self.thinking_block)
            self.thinking_block["thinking"] += delta[field]
        c = delta.get("content")
        if isinstance(c, str) and c:
            if self.text_block is None:
                self.text_block = {"type": "text", "text": ""}
                out["content"].append(self.text_block)
            self.text_block["text"] += c
        for tc in delta.get("tool_calls") or []:
            if isinstance(tc, dict):
                self.tool_call(tc)

    def tool_call(self, tc: dict) -> None:
        fn = tc.get("function") if isinstance(tc.get("function"), dict) else {}
        idx = tc.get("index") if isinstance(tc.get("index"), int) and not isinstance(tc.get("index"), bool) else None
        block = self.by_index.get(idx) if idx is not None else None
        if block is None and tc.get("id"):
            block = self.by_id.get(tc["id"])
        if block is None:
            block = {"type": "toolCall", "id": tc.get("id") or "", "name": fn.get("name") or "", "arguments": {}}
            self.raw_args[id(block)] = ""
            self.out["content"].append(block)
            if idx is not None:
                self.by_index[idx] = block
        if tc.get("id"):
            self.by_id[tc["id"]] = block
            if not block["id"]:
                block["id"] = tc["id"]
        if not block["name"] and fn.get("name"):
            block["name"] = fn["name"]
        if isinstance(fn.get("arguments"), str) and fn["arguments"]:
            self.raw_args[id(block)] += fn["arguments"]

    def finish(self) -> None:
        out = self.out
        for b, field in ((self.text_block, "text"), (self.thinking_block, "thinking")):
            if b is not None:
                b[field] = js_string(b[field])   # a pair split across two deltas is one character in JS
        for b in out["content"]:
            if b["type"] == "toolCall":
                b.update(parse_tool_call_arguments(self.raw_args.get(id(b), "")))
        if out["stopReason"] == "error":
            raise ValueError(out.get("errorMessage") or "Provider returned an error stop reason")
        if not self.has_finish or out["stopReason"] == "pending":
            raise ValueError("Stream ended without finish_reason")


def from_sse_chunks(chunks: Iterable[Any], *, model: str = "policy", provider: str = "hpd",
                    api: str = "openai-completions", timestamp: int = 0) -> dict:
    """Pi's streaming parser over parsed chat.completion.chunk objects (or ``data:`` lines) -> assistant message."""
    out: dict = {"role": "assistant", "content": [], "api": api, "provider": provider, "model": model,
                 "usage": zero_usage(), "stopReason": "pending", "timestamp": timestamp}
    msg = _SseMessage(out, model)
    try:
        for ch in chunks:
            ch = _sse_chunk(ch)
            if ch is not None:
                msg.chunk(ch)
        msg.finish()
    except Exception as exc:  # noqa: BLE001 - Pi turns every failure into an error message
        out["stopReason"] = "error"
        out["errorMessage"] = str(exc) if str(exc) else type(exc).__name__
    return out


def from_chat_completion(resp: Any, **kw: Any) -> dict:
    """A non-streaming ``chat.completion`` JSON (dict or text) as the assistant message Pi's stream would build."""
    try:
        if isinstance(resp, (str, bytes)):
            resp = json.loads(resp)
        if not isinstance(resp, dict):
            raise ValueError("response is not a JSON object")
        chunk = {k: v for k, v in resp.items() if k != "choices"}
        choices = []
        for ch in resp.get("choices") or []:
            if not isinstance(ch, dict):
                continue
            msg = dict(ch.get("message") or {})
            calls = []
            for i, tc in enumerate(msg.get("tool_calls") or []):
                if isinstance(tc, dict):
                    calls.append({**tc, "index": tc.get("index", i)})
            if calls:
                msg["tool_calls"] = calls
            choices.append({"index": ch.get("index", 0), "delta": msg, "finish_reason": ch.get("finish_reason")})
        chunk["choices"] = choices
        return from_sse_chunks([chunk], **kw)
    except Exception as exc:  # noqa: BLE001
        return from_sse_chunks([], **kw) | {"errorMessage": str(exc)}
