"""THE renderer and parser: one module for training, teacher prompts, rollouts and ``hpd serve``.

Format: Qwen3 (Hermes-style) through the official Qwen3 chat template for EVERY model
(:mod:`hpd.policy.template`: the tokenizer's own template is never used implicitly, since e.g.
SmolLM2's drops tools and tool calls). Tools go in the system prompt
(``<tools>...</tools>``), calls are ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``,
tool results are ``<tool_response>`` blocks inside a user turn, thinking is on or off per config.

Rendering (one path, two entries)::

    Pi context {"systemPrompt","tools","messages"}            (training, teacher, rollouts)
        -> pi_to_openai()     exactly what Pi 1.6's openai-completions provider sends (see below)
        -> template_messages() / template_tools()              <- OpenAI request (hpd serve)
        -> tokenizer.apply_chat_template(..., add_generation_prompt=True)

So a training prompt and the prompt ``hpd serve`` renders for the request the real Pi sends at the
same boundary are the same string, hence the same ids (tests/policy/test_token_equality.py).

The Pi -> OpenAI step is :func:`hpd.harness.wire.to_openai_messages` / ``to_openai_tools`` (owned by the
harness; Pi 1.6 ``convertMessages`` + ``transformMessages`` for a text-only, non-reasoning model: one
leading system message, assistant text joined, ``JSON.stringify`` arguments, tool results as ``tool``
messages, ``error``/``aborted`` turns dropped, orphan calls answered ``No result provided``). JSON
semantics (number printing, key order, ``JSON.parse`` errors) come from :mod:`hpd.harness.jsvalues`.

Normalisation of an OpenAI message list for the template (:func:`template_messages`), shared by both
paths: text-part lists are joined with ``"\\n"`` (as vLLM does for string-content templates);
``tool_calls[].function.arguments`` strings are parsed back into objects (so the template renders
them with ``tojson`` either way; a string that is not a JSON object is kept verbatim); reasoning in
``reasoning_content``/``reasoning``/``reasoning_text`` becomes ``reasoning_content``. Arguments and tool
schemas are put through a JavaScript ``JSON.stringify``/``JSON.parse`` round trip (``1.0`` -> ``1``,
integer-like keys first) so a Python-side context renders like the same context after it crossed the
Node bridge.

I view (document injection), our choice, configurable: by default the control document is appended
to the system prompt under :data:`DOC_HEADER` (``placement="system"``; with tools present the Qwen
template puts it before the ``# Tools`` block). ``placement="user"`` instead appends it as one extra
user message at the end of the history. The paper does not publish its injection format.

Completions: :func:`render_action` is the assistant turn exactly as the template renders it after the
generation prompt, ending with ``<|im_end|>`` (the end-of-turn token the model generates and stops on;
the template's trailing ``"\\n"`` belongs to the *next* prompt, so it is not part of the target). With
thinking off, thinking blocks in the action are dropped (the generation prompt already holds the
empty ``<think>\\n\\n</think>\\n\\n``); with thinking on, the completion starts with ``<think>``.

Parsing (:func:`parse_action`, never raises): text up to the first ``<|im_end|>``/``<|endoftext|>``;
a leading ``<think>...</think>`` (or text before a ``</think>``) becomes a thinking block
(``thinkingSignature="reasoning_content"``, the field ``hpd serve`` returns it in); every
``<tool_call>...</tool_call>`` (an unterminated one runs to the end of the text) whose body is a JSON
object with a non-empty string ``"name"`` becomes a toolCall block. Its arguments are handled like
Pi 1.6's ``parseToolCallArguments`` on the argument text our server would send (JSON.parse, then
Pi's ``repairJson``; empty -> ``{}``; anything but an object -> ``arguments: {}`` plus
``argumentsError = "<parse error>\\n\\nReceived arguments:\\n<text>"``, which hpd.harness turns into
``Invalid arguments for tool "<name>": ...``). When the body is not valid JSON but a ``"name"`` string
can be found, the call is kept with the raw text after ``"arguments":`` (minus the object's closing
brace) as its argument text, so it fails Pi's argument parse the same way. A body with no findable
name is NOT a call: it stays in the text (what vLLM's hermes parser does with unparseable calls), so
Pi treats the message as a final answer. Parse errors use V8's ``JSON.parse`` wording
(:func:`hpd.harness.jsvalues.js_json_parse`). Departure: vLLM's hermes parser would drop a call with broken JSON entirely instead of
salvaging its name. Ids are deterministic: ``f"{id_prefix}_{k}"`` (k = index within the message).
``stopReason`` is ``"length"`` when the generation was cut by the token limit, else ``"toolUse"``
when there is a call, else ``"stop"``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from hpd.harness import wire
from hpd.harness.jsvalues import js_json, js_json_parse, js_stringify
from hpd.harness.messages import (
    assistant_message,
    text as text_block,
    thinking as thinking_block,
    tool_call as tool_call_block,
    zero_usage,
)
from hpd.policy.template import protocol_template

DOC_HEADER = "# Runtime control document"
DOC_PLACEMENTS = ("system", "user")

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"
END_OF_TURN = "<|im_end|>"
STOP_STRINGS = ("<|im_end|>", "<|endoftext|>")

REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_text")


# --------------------------------------------------------------------------- JSON helpers (JS semantics)

def parse_json_with_repair(text: str) -> tuple[Any, str | None]:
    """pi-ai ``parseJsonWithRepair`` -> ``(value, error)``: V8 ``JSON.parse`` semantics and messages, one retry on
    ``repairJson(text)`` when that changes the text (the retry's error is the one reported, as in Pi)."""
    try:
        value, err = js_json_parse(text)
        if err is not None:
            repaired = wire.repair_json(text)
            if repaired != text:
                value, err = js_json_parse(repaired)
        return (None, err) if err is not None else (value, None)
    except RecursionError:
        return None, "Maximum call stack size exceeded"


def call_arguments(raw: str) -> tuple[dict, str | None]:
    """Pi 1.6 ``parseToolCallArguments`` on a call's complete argument text: ``(arguments, argumentsError)``."""
    try:
        r = wire.parse_tool_call_arguments(raw)
    except RecursionError:
        return {}, f"Maximum call stack size exceeded\n\nReceived arguments:\n{raw}"
    return r.get("arguments", {}), r.get("argumentsError")


# --------------------------------------------------------------------------- Pi context -> OpenAI messages

def pi_to_openai(ctx: dict) -> list[dict]:
    """OpenAI chat ``messages`` exactly as Pi 1.6's openai-completions provider builds them
    (:func:`hpd.harness.wire.to_openai_messages`, owned by the harness)."""
    return wire.to_openai_messages(ctx)


def openai_tools(tools: Iterable[dict] | None) -> list[dict]:
    """Pi ``Tool`` dicts (or OpenAI tool entries) -> OpenAI ``tools`` entries ``{type, function{name, description, parameters}}``."""
    out = []
    for t in tools or []:
        if isinstance(t, dict) and t.get("type") == "function" and isinstance(t.get("function"), dict):
            t = t["function"]
        if not isinstance(t, dict) and not hasattr(t, "name"):
            continue
        out.extend(wire.to_openai_tools([t]))
    return out


def _assistant_to_openai(msg: dict) -> dict | None:
    oai = wire.to_openai_messages({"messages": [{**msg, "stopReason": "stop"}]})
    return next((m for m in oai if m.get("role") == "assistant"), None)


# --------------------------------------------------------------------------- OpenAI messages -> template messages

def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return str(content)


def _template_arguments(arguments: Any) -> Any:
    if isinstance(arguments, str):
        if not arguments.strip():
            return {}
        parsed, err = parse_json_with_repair(arguments)
        return js_json(parsed) if err is None and isinstance(parsed, dict) else arguments
    if isinstance(arguments, dict):
        return js_json(arguments)
    return {} if arguments is None else arguments


def template_messages(messages: Iterable[dict]) -> list[dict]:
    """Normalise OpenAI chat messages for the chat template (the step shared by training and serving)."""
    out: list[dict] = []
    for m in messages or []:
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        if role == "developer":
            role = "system"
        if role in ("system", "user"):
            out.append({"role": role, "content": _content_text(m.get("content"))})
        elif role == "assistant":
            tm: dict = {"role": "assistant", "content": _content_text(m.get("content"))}
            for f in REASONING_FIELDS:
                if isinstance(m.get(f), str) and m.get(f):
                    tm["reasoning_content"] = m[f]
                    break
            calls = []
            for tc in m.get("tool_calls") or []:
                fn = (tc or {}).get("function") or {}
                calls.append({"type": "function", "function": {
                    "name": str(fn.get("name", "")), "arguments": _template_arguments(fn.get("arguments"))}})
            if calls:
                tm["tool_calls"] = calls
            out.append(tm)
        elif role == "tool":
            out.append({"role": "tool", "content": _content_text(m.get("content"))})
    return out


def template_tools(tools: Iterable[dict] | None) -> list[dict] | None:
    """OpenAI ``tools`` -> what the template gets (``strict`` and unknown keys dropped); ``None`` if empty."""
    out = [{"type": "function", "function": {**t["function"], "parameters": js_json(t["function"].get("parameters") or {})}}
           for t in openai_tools(tools)]
    return out or None


# --------------------------------------------------------------------------- rendering

def render_messages(tokenizer: Any, messages: list[dict], tools: list[dict] | None, *,
                    enable_thinking: bool = False, add_generation_prompt: bool = True,
                    template: str | None = None) -> str:
    """Render template messages (as text) with hpd's protocol template, the official Qwen3 template,
    whatever the tokenizer's own template is (:func:`hpd.policy.template.protocol_template`; an
    explicit ``template`` is checked first and refused if it would drop tools, calls or results)."""
    return tokenizer.apply_chat_template(
        messages, tools=tools or None, tokenize=False, add_generation_prompt=add_generation_prompt,
        enable_thinking=enable_thinking, chat_template=protocol_template(tokenizer, template),
    )


def inject_document(messages: list[dict], document: str, *, placement: str = "system",
                    header: str = DOC_HEADER) -> list[dict]:
    """The I view: ``messages`` (OpenAI shape) with the control document injected (see module doc)."""
    if placement not in DOC_PLACEMENTS:
        raise ValueError(f"unknown document placement {placement!r} (expected one of {DOC_PLACEMENTS})")
    block = f"{header}\n\n{document}" if header else document
    msgs = list(messages)
    if placement == "user":
        return msgs + [{"role": "user", "content": block}]
    if msgs and msgs[0].get("role") == "system":
        sys_text = _content_text(msgs[0].get("content"))
        msgs[0] = {**msgs[0], "content": f"{sys_text}\n\n{block}" if sys_text else block}
    else:
        msgs.insert(0, {"role": "system", "content": block})
    return msgs


def render_prompt(tokenizer: Any, ctx: dict, *, document: str | None = None, enable_thinking: bool = False,
                  doc_placement: str = "system", doc_header: str = DOC_HEADER) -> str:
    """A boundary's Pi context (``Harness.context()``) -> prompt text ending with the generation prompt.

    ``document`` (the I view) is injected per ``doc_placement`` (default: appended to the system prompt
    under ``doc_header``).
    """
    oai = pi_to_openai(ctx)
    if document is not None:
        oai = inject_document(oai, document, placement=doc_placement, header=doc_header)
    return render_messages(tokenizer, template_messages(oai), template_tools(ctx.get("tools")),
                           enable_thinking=enable_thinking)


def render_chat_request(tokenizer: Any, request: dict, *, enable_thinking: bool | None = None) -> str:
    """An OpenAI ``/v1/chat/completions`` request body -> prompt text (the ``hpd serve`` path).

    Thinking comes from ``chat_template_kwargs.enable_thinking`` (Pi's ``qwen-chat-template`` thinking
    format), else top-level ``enable_thinking`` (Pi's ``qwen`` format), else ``enable_thinking``
    (the server default).
    """
    kw = request.get("chat_template_kwargs") or {}
    if isinstance(kw, dict) and "enable_thinking" in kw:
        think = bool(kw["enable_thinking"])
    elif "enable_thinking" in request:
        think = bool(request["enable_thinking"])
    else:
        think = bool(enable_thinking)
    return render_messages(tokenizer, template_messages(request.get("messages") or []),
                           template_tools(request.get("tools")), enable_thinking=think)


def _eot(tokenizer: Any) -> str:
    return getattr(tokenizer, "eos_token", None) or END_OF_TURN


def render_action(tokenizer: Any, assistant_msg: dict, enable_thinking: bool = False) -> str:
    """The target completion for an assistant action: the template's rendering of that turn after the
    generation prompt, up to and including the end-of-turn token (see module doc)."""
    oai = _assistant_to_openai({**assistant_msg, "stopReason": "stop"})
    if oai is None:
        oai = {"role": "assistant", "content": None}
    tmsg = template_messages([oai])[0]
    if not enable_thinking:
        tmsg.pop("reasoning_content", None)
    head = [{"role": "user", "content": "."}]
    prompt = render_messages(tokenizer, head, None, enable_thinking=enable_thinking)
    full = render_messages(tokenizer, head + [tmsg], None, enable_thinking=enable_thinking,
                           add_generation_prompt=False)
    if not full.startswith(prompt):  # a template that is not prefix-stable for the last turn
        raise ValueError("chat template does not render the final assistant turn after its generation prompt")
    completion = full[len(prompt):]
    eot = _eot(tokenizer)
    cut = completion.rfind(eot)
    return completion[: cut + len(eot)] if cut >= 0 else completion + eot


def render_text_completion(tokenizer: Any, text: str) -> str:
    """A plain text target (R view: the control document) as a completion: ``text + <|im_end|>``."""
    return f"{text}{_eot(tokenizer)}"


def encode_example(tokenizer: Any, prompt: str, completion: str) -> tuple[list[int], list[int]]:
    """Token ids of a training example: ``(ids(prompt), ids(completion))``, each tokenized on its own.

    This is exactly what serving produces: the server tokenizes the rendered prompt, then the model
    appends its generated ids (the canonical tokenization of the completion when it generates the
    target). Tokenizing ``prompt + completion`` jointly could merge tokens across the boundary; we never
    do that.
    """
    p = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    c = tokenizer(completion, add_special_tokens=False)["input_ids"]
    return list(p), list(c)


# --------------------------------------------------------------------------- parsing

@dataclass
class ParsedCall:
    """One ``<tool_call>`` read from model output. ``raw_arguments`` is the argument text sent on the wire."""

    name: str
    arguments: dict
    arguments_error: str | None
    raw_arguments: str


@dataclass
class ParsedCompletion:
    """Generated text split into thinking, visible text and tool calls (see module doc)."""

    thinking: str = ""
    text: str = ""
    calls: list[ParsedCall] = field(default_factory=list)


_NAME_RE = re.compile(r'"name"\s*:\s*"((?:[^"\\]|\\.)*)"', re.S)
_ARGS_RE = re.compile(r'"arguments"\s*:\s*', re.S)


def _call_from_json(obj: Any) -> ParsedCall | None:
    if not isinstance(obj, dict):
        return None
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return None
    if "arguments" not in obj:
        raw = ""
    elif isinstance(obj["arguments"], str):
        raw = obj["arguments"]
    else:
        raw = js_stringify(obj["arguments"])
    args, err = call_arguments(raw)
    return ParsedCall(name=name, arguments=args, arguments_error=err, raw_arguments=raw)


def _salvage_call(body: str) -> ParsedCall | None:
    m = _NAME_RE.search(body)
    if not m:
        return None
    try:
        name = json.loads(f'"{m.group(1)}"')
    except ValueError:
        name = m.group(1)
    if not isinstance(name, str) or not name:
        return None
    a = _ARGS_RE.search(body, m.end()) or _ARGS_RE.search(body)
    raw = body[a.end():].rstrip() if a else ""
    if raw.endswith("}"):
        inner = raw[:-1].rstrip()
        args, err = call_arguments(inner)
        if err is None:
            return ParsedCall(name=name, arguments=args, arguments_error=None, raw_arguments=inner)
        args2, err2 = call_arguments(raw)
        if err2 is None:
            return ParsedCall(name=name, arguments=args2, arguments_error=None, raw_arguments=raw)
        return ParsedCall(name=name, arguments={}, arguments_error=err, raw_arguments=inner)
    args, err = call_arguments(raw)
    return ParsedCall(name=name, arguments=args, arguments_error=err, raw_arguments=raw)


def _parse_call_body(body: str) -> ParsedCall | None:
    s = body.strip()
    obj, err = parse_json_with_repair(s)
    if err is not None:
        return _salvage_call(s)
    return _call_from_json(obj)


def _split_thinking(text: str) -> tuple[str, str]:
    close = text.find(THINK_CLOSE)
    if close >= 0:
        head = text[:close]
        opened = head.find(THINK_OPEN)
        if opened >= 0:
            head = head[opened + len(THINK_OPEN):]
        return head.strip("\n"), text[close + len(THINK_CLOSE):].lstrip("\n")
    stripped = text.lstrip()
    if stripped.startswith(THINK_OPEN):  # unterminated thinking (cut by the token limit)
        return stripped[len(THINK_OPEN):].strip("\n"), ""
    return "", text


def _parse(text: str) -> ParsedCompletion:
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    for stop in STOP_STRINGS:
        i = text.find(stop)
        if i >= 0:
            text = text[:i]
    thinking, rest = _split_thinking(text)
    segments: list[str] = []
    calls: list[ParsedCall] = []
    pos = 0
    while True:
        i = rest.find(TOOL_CALL_OPEN, pos)
        if i < 0:
            segments.append(rest[pos:])
            break
        segments.append(rest[pos:i])
        start = i + len(TOOL_CALL_OPEN)
        j = rest.find(TOOL_CALL_CLOSE, start)
        end = len(rest) if j < 0 else j + len(TOOL_CALL_CLOSE)
        call = _parse_call_body(rest[start: len(rest) if j < 0 else j])
        if call is None:
            segments.append(rest[i:end])  # not a call: stays visible text
        else:
            calls.append(call)
        pos = end
        if j < 0:
            break
    if calls:
        body = "\n".join(s.strip("\n") for s in segments if s.strip())
    else:
        body = "".join(segments)
    return ParsedCompletion(thinking=thinking, text=body, calls=calls)


def parse_completion(text: Any) -> ParsedCompletion:
    """Split generated text into thinking / text / tool calls. Never raises."""
    try:
        return _parse(text)
    except Exception:  # pragma: no cover - defensive: model output must never crash a rollout
        return ParsedCompletion(text=text if isinstance(text, str) else "")


def stop_reason_for(parsed: ParsedCompletion, finish_reason: str | None = None) -> str:
    """Pi ``stopReason`` for a parsed completion (``length`` when cut by the token limit)."""
    if finish_reason == "length":
        return "length"
    return "toolUse" if parsed.calls else "stop"


def parsed_to_blocks(parsed: ParsedCompletion, *, id_prefix: str = "call") -> list[dict]:
    """Pi content blocks in the order Pi's provider builds them: thinking, text, toolCalls."""
    blocks: list[dict] = []
    if parsed.thinking:
        blocks.append(thinking_block(parsed.thinking, "reasoning_content"))
    if parsed.text:
        blocks.append(text_block(parsed.text))
    for k, c in enumerate(parsed.calls):
        blocks.append(tool_call_block(f"{id_prefix}_{k}", c.name, c.arguments, arguments_error=c.arguments_error))
    return blocks


def parse_action(text: Any, *, id_prefix: str = "call", finish_reason: str | None = None,
                 model: str = "hpd-policy", usage: dict | None = None, timestamp: int = 0) -> dict:
    """Generated text -> Pi assistant message (text, thinking and toolCall blocks). Never raises.

    ``finish_reason="length"`` (the generation hit ``max_new_tokens``) gives ``stopReason: "length"``.
    """
    try:
        parsed = parse_completion(text)
        return assistant_message(parsed_to_blocks(parsed, id_prefix=id_prefix),
                                 stop_reason_for(parsed, finish_reason), model=model,
                                 usage=usage if usage is not None else zero_usage(), timestamp=timestamp)
    except Exception:  # pragma: no cover - defensive
        return assistant_message([text_block(text if isinstance(text, str) else "")], "stop", model=model)


def to_openai_message(parsed: ParsedCompletion, *, id_prefix: str = "call") -> dict:
    """A parsed completion as an OpenAI chat-completion ``message`` (the ``hpd serve`` response).

    Tool-call argument text is the raw text the model wrote (re-serialised JSON when it parsed), so
    Pi's own ``parseToolCallArguments`` reaches the same ``arguments``/``argumentsError`` as
    :func:`parse_action`.
    """
    msg: dict = {"role": "assistant", "content": parsed.text or None}
    if parsed.thinking:
        msg["reasoning_content"] = parsed.thinking
    if parsed.calls:
        msg["tool_calls"] = [
            {"id": f"{id_prefix}_{k}", "type": "function",
             "function": {"name": c.name, "arguments": c.raw_arguments if c.arguments_error else
                          js_stringify(c.arguments)}}
            for k, c in enumerate(parsed.calls)
        ]
    return msg


def finish_reason_for(parsed: ParsedCompletion, truncated: bool) -> str:
    """OpenAI ``finish_reason``: ``length`` | ``tool_calls`` | ``stop``."""
    if truncated:
        return "length"
    return "tool_calls" if parsed.calls else "stop"
