"""Deterministic compact text rendering of a ControlDocument (the form the model reads and writes).

Grammar (one line per field group; lines appear in this order; ``|`` separates list items; an empty
list is ``-``; tool names, causes and texts are JSON strings; argument names are bare when they are
identifiers ``[A-Za-z_][A-Za-z0-9_]*`` and JSON strings otherwise; arguments are compact JSON objects
in their original key order; booleans are ``yes``/``no``; an unbounded budget is ``none``)::

    <control-document v1 privilege=plan>
    boundary: after_tool_batch index=2 turn=2 execution=sequential tail=toolResult turns_left=10
    tools: "Geo: lookup"(city, country) | "Maps: Search"(q) | "Clock: now"()
    last_batch: ok "Geo: lookup" | error "Maps: Search" validation "missing required argument: q"
    unused: #1 "Geo: lookup"
    calls: made=2 errors=1
    end: allowed=yes rule="..." final="..."
    progress: steps_left=1 complete=no                                   (plan, oracle)
    plan: 3 "Maps: Search" callable=yes recorded=ok repeat=no args(q<-step:1)   (plan, oracle)
    next: call "Maps: Search" {"q":"Paris"}                              (oracle; or: next: final "...")
    </control-document>

:func:`hpd.document.parse.parse` reads this back into an equal record (a test checks every boundary).
"""

from __future__ import annotations

import re

from hpd.harness.jsvalues import js_stringify

from .schema import ControlDocument

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def q(s: str) -> str:
    """A JSON string literal as ``JSON.stringify`` writes it (non-ASCII kept, so lengths stay honest)."""
    return js_stringify(s)


def atom(s: str) -> str:
    """Bare identifier when safe, else a JSON string."""
    return s if _IDENT.match(s) and s not in ("none", "yes", "no") else q(s)


def yn(b: bool) -> str:
    return "yes" if b else "no"


def jobj(v) -> str:
    """A JSON value as ``JSON.stringify`` writes it (JavaScript numbers and key order)."""
    return js_stringify(v)


_STEP_SRC = re.compile(r"step:[0-9]+\Z")


def _src(s: str) -> str:
    return s if _STEP_SRC.match(s) else atom(s)


def _items(parts: list[str]) -> str:
    return " | ".join(parts) if parts else "-"


_TOOLS_CACHE: dict[tuple, str] = {}


def _tools_line(tools) -> str:
    """``tools: ...`` (memoised: every boundary of an episode offers the same tools)."""
    key = tuple((t.name, tuple(t.required)) for t in tools)
    line = _TOOLS_CACHE.get(key)
    if line is None:
        if len(_TOOLS_CACHE) > 1024:
            _TOOLS_CACHE.clear()
        line = _TOOLS_CACHE[key] = "tools: " + _items([f"{q(n)}({', '.join(atom(a) for a in r)})" for n, r in key])
    return line


def render(doc: ControlDocument) -> str:
    """The one text rendering of ``doc`` (deterministic; ends with a newline)."""
    lines = [f"<control-document v{doc.version} privilege={doc.privilege}>"]
    tl = "none" if doc.turns_left is None else str(doc.turns_left)
    lines.append(
        f"boundary: {atom(doc.kind)} index={doc.index} turn={doc.turn} execution={atom(doc.execution)} "
        f"tail={atom(doc.tail)} turns_left={tl}"
    )
    lines.append(_tools_line(doc.tools))
    lb = []
    for c in doc.last_batch:
        if c.ok:
            lb.append(f"ok {q(c.name)}")
        else:
            s = f"error {q(c.name)} {atom(c.error_kind or 'tool_error')}"
            if c.cause is not None:
                s += f" {q(c.cause)}"
            lb.append(s)
    lines.append("last_batch: " + _items(lb))
    lines.append("unused: " + _items([f"#{r.call} {q(r.name)}" for r in doc.unused]))
    lines.append(f"calls: made={doc.calls_made} errors={doc.errors_made}")
    e = doc.end
    lines.append(f"end: allowed={yn(e.allowed)} rule={q(e.rule)} final={q(e.final_turn)}")
    if doc.privilege in ("plan", "oracle"):
        sl = "none" if doc.steps_left is None else str(doc.steps_left)
        cp = "none" if doc.complete is None else yn(doc.complete)
        lines.append(f"progress: steps_left={sl} complete={cp}")
        steps = []
        for p in doc.plan or []:
            args = ", ".join(f"{atom(a.name)}<-{_src(a.source)}" for a in p.args)
            steps.append(
                f"{p.step} {q(p.tool)} callable={yn(p.callable)} recorded={p.recorded} "
                f"repeat={yn(p.repeat)} args({args})"
            )
        lines.append("plan: " + ("none" if doc.plan is None else _items(steps)))
    if doc.privilege == "oracle":
        na = doc.next_action
        if na is None:
            lines.append("next: none")
        else:
            parts = [f"call {q(c.name)} {jobj(c.arguments)}" for c in na.calls]
            if na.final is not None:
                parts.append(f"final {q(na.final)}")
            lines.append("next: " + _items(parts))
    lines.append("</control-document>")
    return "\n".join(lines) + "\n"
