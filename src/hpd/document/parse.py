"""Read a ControlDocument rendering (:mod:`hpd.document.render`) back into the record.

- :func:`parse` is strict: the whole text must be one well-formed rendering; it returns a record equal
  to the one rendered (``parse(render(d)) == d`` for every compiled document, tested on every boundary)
  and raises :class:`DocumentParseError` (one line, with the line number) otherwise.
- :func:`parse_fields` is lenient (for R-view scoring of model output): each line is parsed on its
  own, lines that do not parse are skipped, and the result is a dict of the top-level fields that
  could be read. It never raises.
"""

from __future__ import annotations

import json
import re

from .schema import ControlDocument

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INT = re.compile(r"-?[0-9]+")
_HEADER = re.compile(r"<control-document v([0-9]+) privilege=(runtime|plan|oracle)>\Z")
_FOOTER = "</control-document>"
_DEC = json.JSONDecoder()


class DocumentParseError(ValueError):
    """The text is not a well-formed ControlDocument rendering."""


class _S:
    """A tiny scanner over one line."""

    def __init__(self, s: str):
        self.s, self.i = s, 0

    def done(self) -> bool:
        return self.i >= len(self.s)

    def peek(self, lit: str) -> bool:
        return self.s.startswith(lit, self.i)

    def lit(self, lit: str) -> None:
        if not self.s.startswith(lit, self.i):
            raise DocumentParseError(f"expected {lit!r} at column {self.i}: {self.s[self.i:self.i + 30]!r}")
        self.i += len(lit)

    def maybe(self, lit: str) -> bool:
        if self.s.startswith(lit, self.i):
            self.i += len(lit)
            return True
        return False

    def json(self):
        try:
            v, end = _DEC.raw_decode(self.s, self.i)
        except json.JSONDecodeError as e:
            raise DocumentParseError(f"bad JSON at column {self.i}: {e.msg}") from None
        self.i = end
        return v

    def string(self) -> str:
        if not self.peek('"'):
            raise DocumentParseError(f"expected a JSON string at column {self.i}")
        v = self.json()
        if not isinstance(v, str):
            raise DocumentParseError(f"expected a JSON string at column {self.i}")
        return v

    def ident(self) -> str:
        m = _IDENT.match(self.s, self.i)
        if not m:
            raise DocumentParseError(f"expected a name at column {self.i}: {self.s[self.i:self.i + 30]!r}")
        self.i = m.end()
        return m.group(0)

    def atom(self) -> str:
        return self.string() if self.peek('"') else self.ident()

    def int_(self) -> int:
        m = _INT.match(self.s, self.i)
        if not m:
            raise DocumentParseError(f"expected an integer at column {self.i}")
        self.i = m.end()
        return int(m.group(0))

    def opt_int(self) -> int | None:
        return None if self.maybe("none") else self.int_()

    def yn(self) -> bool:
        if self.maybe("yes"):
            return True
        if self.maybe("no"):
            return False
        raise DocumentParseError(f"expected yes/no at column {self.i}")

    def items(self, item) -> list:
        """``-`` or ``item ( | item)*`` to the end of the line."""
        if self.s[self.i:] == "-":
            self.i = len(self.s)
            return []
        out = [item(self)]
        while self.maybe(" | "):
            out.append(item(self))
        return out

    def end(self) -> None:
        if not self.done():
            raise DocumentParseError(f"unexpected text at column {self.i}: {self.s[self.i:self.i + 30]!r}")


# -- one parser per line; each returns the top-level fields it holds ----------------------------------


def _boundary(s: _S) -> dict:
    d = {"kind": s.atom()}
    s.lit(" index=")
    d["index"] = s.int_()
    s.lit(" turn=")
    d["turn"] = s.int_()
    s.lit(" execution=")
    d["execution"] = s.atom()
    s.lit(" tail=")
    d["tail"] = s.atom()
    s.lit(" turns_left=")
    d["turns_left"] = s.opt_int()
    return d


def _tool(s: _S) -> dict:
    name = s.string()
    s.lit("(")
    req = []
    if not s.maybe(")"):
        req.append(s.atom())
        while s.maybe(", "):
            req.append(s.atom())
        s.lit(")")
    return {"name": name, "required": req}


def _outcome(s: _S) -> dict:
    if s.maybe("ok "):
        return {"name": s.string(), "ok": True}
    s.lit("error ")
    d = {"name": s.string(), "ok": False}
    s.lit(" ")
    d["error_kind"] = s.atom()
    if s.peek(' "'):
        s.lit(" ")
        d["cause"] = s.string()
    return d


def _result_ref(s: _S) -> dict:
    s.lit("#")
    call = s.int_()
    s.lit(" ")
    return {"call": call, "name": s.string()}


def _calls(s: _S) -> dict:
    s.lit("made=")
    made = s.int_()
    s.lit(" errors=")
    return {"calls_made": made, "errors_made": s.int_()}


def _end(s: _S) -> dict:
    s.lit("allowed=")
    allowed = s.yn()
    s.lit(" rule=")
    rule = s.string()
    s.lit(" final=")
    return {"end": {"allowed": allowed, "rule": rule, "final_turn": s.string()}}


def _progress(s: _S) -> dict:
    s.lit("steps_left=")
    sl = s.opt_int()
    s.lit(" complete=")
    cp = None if s.maybe("none") else s.yn()
    return {"steps_left": sl, "complete": cp}


def _source(s: _S) -> str:
    if s.maybe("step:"):
        return f"step:{s.int_()}"
    return s.atom()


def _arg_source(s: _S) -> dict:
    name = s.atom()
    s.lit("<-")
    return {"name": name, "source": _source(s)}


def _plan_step(s: _S) -> dict:
    d = {"step": s.int_()}
    s.lit(" ")
    d["tool"] = s.string()
    s.lit(" callable=")
    d["callable"] = s.yn()
    s.lit(" recorded=")
    d["recorded"] = s.ident()
    s.lit(" repeat=")
    d["repeat"] = s.yn()
    s.lit(" args(")
    args = []
    if not s.maybe(")"):
        args.append(_arg_source(s))
        while s.maybe(", "):
            args.append(_arg_source(s))
        s.lit(")")
    d["args"] = args
    return d


def _action_part(s: _S) -> tuple[str, object]:
    if s.maybe("call "):
        name = s.string()
        s.lit(" ")
        args = s.json()
        if not isinstance(args, dict):
            raise DocumentParseError("call arguments must be a JSON object")
        return "call", {"name": name, "arguments": args}
    s.lit("final ")
    return "final", s.string()


def _next(s: _S) -> dict:
    if s.s[s.i:] == "none":
        s.i = len(s.s)
        return {"next_action": None}
    calls, final = [], None
    for kind, v in s.items(_action_part):
        if kind == "call":
            calls.append(v)
        else:
            final = v
    return {"next_action": {"calls": calls, "final": final}}


def _plan(s: _S) -> dict:
    if s.s[s.i:] == "none":
        s.i = len(s.s)
        return {"plan": None}
    return {"plan": s.items(_plan_step)}


_LINES = {
    "boundary": _boundary,
    "tools": lambda s: {"tools": s.items(_tool)},
    "last_batch": lambda s: {"last_batch": s.items(_outcome)},
    "unused": lambda s: {"unused": s.items(_result_ref)},
    "calls": _calls,
    "end": _end,
    "progress": _progress,
    "plan": _plan,
    "next": _next,
}
_ORDER = {"runtime": ["boundary", "tools", "last_batch", "unused", "calls", "end"]}
_ORDER["plan"] = _ORDER["runtime"] + ["progress", "plan"]
_ORDER["oracle"] = _ORDER["plan"] + ["next"]


def _line(key: str, body: str) -> dict:
    s = _S(body)
    d = _LINES[key](s)
    s.end()
    return d


def parse(text: str) -> ControlDocument:
    """Strictly parse one rendering; ``parse(render(doc)) == doc``."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise DocumentParseError("empty document")
    m = _HEADER.match(lines[0])
    if not m:
        raise DocumentParseError(f"line 1: expected '<control-document vN privilege=...>', got {lines[0][:60]!r}")
    privilege = m.group(2)
    order = _ORDER[privilege]
    if len(lines) != len(order) + 2 or lines[-1] != _FOOTER:
        raise DocumentParseError(
            f"expected {len(order) + 2} lines ending with {_FOOTER!r} for privilege={privilege}, got {len(lines)}"
        )
    fields: dict = {"version": int(m.group(1)), "privilege": privilege}
    for n, (key, line) in enumerate(zip(order, lines[1:-1]), start=2):
        if not line.startswith(key + ": "):
            raise DocumentParseError(f"line {n}: expected '{key}: ...', got {line[:40]!r}")
        try:
            fields.update(_line(key, line[len(key) + 2:]))
        except DocumentParseError as e:
            raise DocumentParseError(f"line {n} ({key}): {e}") from None
    try:
        return ControlDocument.model_validate(fields)
    except Exception as e:  # pydantic ValidationError -> one line
        raise DocumentParseError(f"invalid document: {str(e).splitlines()[0]}") from None


def parse_fields(text: str) -> dict:
    """Leniently read whatever top-level fields parse (model output for the R view); never raises.

    Returns a dict with a subset of the keys of ``ControlDocument.model_dump(mode="json")`` (nested
    values as plain JSON), plus ``privilege``/``version`` when the header line parses.
    """
    out: dict = {}
    if not isinstance(text, str):
        return out
    for line in text.split("\n"):
        line = line.strip()
        m = _HEADER.match(line)
        if m:
            out.setdefault("version", int(m.group(1)))
            out.setdefault("privilege", m.group(2))
            continue
        key, sep, body = line.partition(": ")
        if not sep or key not in _LINES:
            continue
        try:
            for k, v in _line(key, body).items():
                out.setdefault(k, v)
        except (DocumentParseError, RecursionError, ValueError):
            continue
    return out
