"""Where the control document enters the model's context (the I view).

The choice lives in ONE place, :func:`hpd.policy.chat.render_prompt` (``document=``,
``doc_placement=``, ``doc_header=``): by default the rendered document is appended to the system
prompt under the header ``# Runtime control document`` (``placement="system"``; the Qwen template
puts it before the ``# Tools`` block); ``placement="user"`` appends it as one extra user message at
the end of the history. Both are configurable per run; reports name the placement and the privilege.

:func:`inject` applies the same choice at the Pi-context level, for consumers that do not go through
a tokenizer (an API teacher reached over Pi's OpenAI-compatible wire). Pi messages in, Pi messages out.
"""

from __future__ import annotations

PLACEMENTS = ("system", "user")


def _header() -> str:
    try:
        from hpd.policy.chat import DOC_HEADER
    except Exception:  # pragma: no cover - the policy package is optional here
        return "# Runtime control document"
    return DOC_HEADER


def inject(ctx: dict, document: str, *, placement: str = "system", header: str | None = None) -> dict:
    """A copy of the Pi context ``ctx`` with ``document`` injected (see module docstring)."""
    if placement not in PLACEMENTS:
        raise ValueError(f"unknown document placement {placement!r} (expected one of {PLACEMENTS})")
    header = _header() if header is None else header
    block = f"{header}\n\n{document}" if header else document
    out = dict(ctx)
    if placement == "user":
        ts = 0
        if ctx.get("messages"):
            ts = int(ctx["messages"][-1].get("timestamp", 0) or 0)
        out["messages"] = list(ctx.get("messages", [])) + [{"role": "user", "content": block, "timestamp": ts}]
    else:
        sp = ctx.get("systemPrompt") or ""
        out["systemPrompt"] = f"{sp}\n\n{block}" if sp else block
    return out
