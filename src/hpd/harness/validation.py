"""Tool-argument validation as Pi 1.6 does it (``pi-ai`` ``validateToolArguments`` over ``@earendil-works/pi-schema``
1.6.0 ``compile(schema, {formats, coerce: true}).parse``), with the same coercion and the same error texts.

Texts (what the model reads):

- ``argumentsError`` set (unparseable JSON): ``Invalid arguments for tool "<name>": <argumentsError>``;
- schema failure::

      Validation failed for tool "<name>":
        - <path>: <message>
      <blank line>
      Received arguments:
      <JSON.stringify(raw arguments, null, 2)>

  ``<path>`` is the JSON-Pointer of the failing value with ``/`` turned into ``.`` (``root`` when empty);
  messages are pi-schema's (``missing``, ``expected number, got string``, ``unknown field``,
  ``expected one of ["a","b"]``, ...).

Coercion (pi-schema ``Coercer``, three copy-on-write passes): (1) an optional property set to
``null`` whose schema rejects null is dropped; (2) TypeBox ``Value.Convert`` rules keyed on
``const``/``enum``/``anyOf``/``oneOf``/``allOf``/``type`` (``"3"`` -> 3, ``"3.7"`` -> 3 for integer,
``"true"`` -> true, a single value -> a one-item array, ...); (3) Ajv-style primitive coercion by
``type`` (also type arrays).

Supported schema keywords (what tool schemas, incl. TRAJECT-style ones, use) are the rows of :data:`KEYWORDS`,
one table that both :func:`check` and :func:`explain` read: ``type`` (string or list), ``enum``, ``const``,
string/number/array/object bounds (string lengths in code points), ``pattern`` (Python ``re`` on
:func:`_js_pattern`), ``format`` (``date``, ``date-time``, ``time``, ``email``, ``uuid``, ``ipv4``; other
formats pass), ``required``, ``properties``,
``patternProperties``, ``additionalProperties`` (bool or schema), ``propertyNames``, ``items`` (schema or
list) / ``prefixItems`` / ``additionalItems``, ``uniqueItems``, ``contains``, ``allOf``/``anyOf``/``oneOf``/``not``,
``if``/``then``/``else``. Departures (``docs/departures.md``): ``$ref``/``$defs``/``$dynamicRef``,
``unevaluated*``, ``dependent*`` are ignored (they accept), so a schema using them validates more loosely than
in Pi; a subschema that is not an object or boolean counts as ``true`` and a regex that does not compile is
ignored, where pi-schema refuses the schema and the call's result is its compile error (e.g. ``A schema must
be an object or a boolean, got 5``); ``pattern`` uses Python ``re`` after :func:`_js_pattern` (``.``, ``$``,
``\\s``, ``\\d``, ``\\w`` as in JavaScript), not a full JavaScript dialect (no ``\\u{...}``, ``(?<name>``, ``[^]``,
and no non-``u`` fallback, where JavaScript matches UTF-16 code units).
"""

from __future__ import annotations

import functools
import math
import re
from typing import Any, Callable, Iterator, NamedTuple

from hpd.harness.jsvalues import (
    is_finite_number,
    is_integer,
    is_number,
    JS_WHITESPACE,
    js_code_points,
    js_deep_equal,
    js_keys,
    js_number_str,
    js_strict_eq,
    js_string,
    js_stringify,
    js_to_number,
    js_trim,
    js_type_name,
)


class ToolArgumentsError(Exception):
    """Raised by :func:`validate_tool_arguments`; ``str(exc)`` is Pi's exact text."""


def validate_tool_arguments(tool: Any, call: dict) -> Any:
    """pi-ai ``validateToolArguments(tool, toolCall)``: the coerced arguments, or raise with Pi's text."""
    name = call.get("name")
    name_s = js_string(name) if isinstance(name, str) else js_stringify(name) if name is not None else "undefined"
    if call.get("argumentsError"):
        raise ToolArgumentsError(f'Invalid arguments for tool "{name_s}": {call["argumentsError"]}')
    raw = call.get("arguments")
    schema = tool.parameters if hasattr(tool, "parameters") else tool
    value = coerce(schema, _clone(raw))
    if check(schema, value):
        return value
    errors = explain(schema, value)
    lines = "\n".join(f"  - {format_path(e[0])}: {e[1]}" for e in errors)
    received = js_stringify(raw, 2) if raw is not None or "arguments" in call else "undefined"
    raise ToolArgumentsError(f'Validation failed for tool "{name_s}":\n{lines}\n\nReceived arguments:\n{received}')


def format_path(pointer: str) -> str:
    """pi-ai ``formatValidationPath``: ``/edits/0/oldText`` -> ``edits.0.oldText``; ``""`` -> ``root``."""
    if pointer == "":
        return "root"
    return ".".join(seg.replace("~1", "/").replace("~0", "~") for seg in pointer[1:].split("/"))


def _clone(v: Any) -> Any:
    """A copy of the arguments with every string and key in its JS spelling (:func:`js_string`), so that
    ``len``, comparisons and regular expressions see JavaScript's strings."""
    if isinstance(v, str):
        return js_string(v)
    if isinstance(v, dict):
        return {js_string(k) if isinstance(k, str) else k: _clone(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_clone(x) for x in v]
    return v


def _is_schema(x: Any) -> bool:
    return isinstance(x, dict)


def _is_obj(v: Any) -> bool:
    return isinstance(v, dict)


# =============================================================================================== value tests
TYPE_CHECKS = {
    "string": lambda v: isinstance(v, str),
    "number": is_finite_number,
    "integer": is_integer,
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "array": lambda v: isinstance(v, list),
    "object": _is_obj,
}


_FORMATS = {
    "date": re.compile(r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])\Z"),
    "date-time": re.compile(r"^[0-9]{4}-[0-9][0-9]-[0-9][0-9][Tt ][0-9][0-9]:[0-9][0-9]:[0-9][0-9](\.[0-9]+)?([Zz]|[+-][0-9][0-9](:?[0-9][0-9])?)\Z"),
    "time": re.compile(r"^[0-9][0-9]:[0-9][0-9]:[0-9][0-9](\.[0-9]+)?([Zz]|[+-][0-9][0-9](:?[0-9][0-9])?)?\Z"),
    "email": re.compile(r"^[a-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*@(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\Z", re.I | re.A),
    "uuid": re.compile(r"^(?:urn:uuid:)?[0-9a-f]{8}-(?:[0-9a-f]{4}-){3}[0-9a-f]{12}\Z", re.I | re.A),
    "ipv4": re.compile(r"^(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\Z"),
}


def _format_ok(fmt: Any, v: str) -> bool:
    rx = _FORMATS.get(fmt) if isinstance(fmt, str) else None
    if rx is None:
        return True
    if not rx.match(v):
        return False
    if fmt == "date":
        y, m, d = (int(x) for x in v.split("-"))
        leap = y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)
        days = [31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][m - 1]
        return d <= days
    return True


_JS_SPACE = "".join("\\u%04x" % ord(c) for c in JS_WHITESPACE)
_JS_CLASS_ESCAPES = {"s": _JS_SPACE}
_JS_ESCAPES = {"s": f"[{_JS_SPACE}]", "S": f"[^{_JS_SPACE}]"}
_JS_DOT = "[^\\n\\r\\u2028\\u2029]"


def _js_pattern(p: str) -> str:
    """A JavaScript ``u``-mode pattern as a Python one (compiled with ``re.ASCII``, so ``\\d``, ``\\w`` and
    ``\\b`` are ASCII as in JS): ``.`` stops at JS line terminators, ``$`` is the end of input only (Python's
    ``$`` also matches before a final ``\\n``), and ``\\s``/``\\S`` are JS white space."""
    out, i, in_class = [], 0, False
    while i < len(p):
        c = p[i]
        if c == "\\" and i + 1 < len(p):
            table = _JS_CLASS_ESCAPES if in_class else _JS_ESCAPES
            out.append(table.get(p[i + 1], p[i:i + 2]))
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        out.append(_JS_DOT if c == "." and not in_class else "\\Z" if c == "$" and not in_class else c)
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=1024)
def _regex(p: str):
    try:
        return re.compile(_js_pattern(p), re.A)
    except re.error:
        return None


def _pattern_schemas(k: str, pats: list) -> list:
    """The ``patternProperties`` schemas whose pattern matches key ``k``, in order (a pattern that does not compile
    matches nothing)."""
    return [s for p, s in pats if (rx := _regex(p)) is not None and rx.search(k)]


def _pattern_ok(p: Any, v: str) -> bool:
    rx = _regex(p) if isinstance(p, str) else None
    return True if rx is None else rx.search(js_string(v)) is not None


def _is_multiple(v: float, m: float) -> bool:
    if m == 0:
        return False
    q = v / m
    return math.isfinite(q) and abs(q - round(q)) < 1e-9


def _unique(v: list) -> bool:
    for i in range(len(v)):
        for j in range(i):
            if js_deep_equal(v[i], v[j]):
                return False
    return True


def _item_schema_at(schema: dict, i: int) -> Any:
    items = schema.get("items")
    if isinstance(items, list):
        return items[i] if i < len(items) else None
    pre = schema.get("prefixItems")
    if isinstance(pre, list) and i < len(pre):
        return pre[i]
    return items


# =============================================================================================== keywords
# One table serves both questions: :func:`check` (is the value valid?) stops at the first error a handler
# yields, :func:`explain` (pi-schema ``Explainer.errors``) collects them all. A handler yields the
# ``(JSON-pointer path, message)`` of each failure of its keyword(s), in pi-schema's Explainer order.
Error = tuple[str, str]


def check(node: Any, v: Any) -> bool:
    """Whether ``v`` is valid for the schema ``node`` (the compiled ``check`` of pi-schema, supported subset)."""
    return next(_errors(node, v, ""), None) is None


def explain(schema: Any, v: Any) -> list[Error]:
    """pi-schema ``Explainer.errors``: ``(path, message)`` per failing keyword, at least one."""
    return list(_errors(schema, v, "")) or [("", "invalid")]


def _errors(node: Any, v: Any, path: str) -> Iterator[Error]:
    """The failures of ``v`` under ``node``, lazily; a failed ``type`` ends the walk (as in pi-schema)."""
    if node is False:
        yield path, "no value is allowed here"
        return
    if not _is_schema(node):  # true, null and non-schemas accept
        return
    for kw in _rows(node):
        if kw.applies(v):
            failed = False
            for err in kw.errors(node, v, path):
                failed = True
                yield err
            if failed and kw.final:
                return


class Keyword(NamedTuple):
    names: tuple[str, ...]              # the schema keywords it reads (it runs only when the node has one)
    applies: Callable[[Any], bool]      # to which values (pi-schema: string / number / object / array / any)
    errors: Callable[[dict, Any, str], Iterator[Error]]
    final: bool = False                 # an error here ends the walk of this node


def _num(x: Any) -> bool:
    return is_number(x)


def _any(_v: Any) -> bool:
    return True


def _is_str(v: Any) -> bool:
    return isinstance(v, str)


def _is_list(v: Any) -> bool:
    return isinstance(v, list)


def _pointer(path: str, key: Any) -> str:
    return path + "/" + str(key).replace("~", "~0").replace("/", "~1")


def _list_values(values: list) -> str:
    if len(values) <= 20:
        return js_stringify(values)
    listed = js_stringify(values[:20])
    return f"{listed[:-1]}, ... and {len(values) - 20} more]"


# ---- in-place keywords
def _type(node: dict, v: Any, path: str) -> Iterator[Error]:
    t = node.get("type")
    if t is None:
        return
    types = t if isinstance(t, list) else [t]
    if not any(isinstance(x, str) and TYPE_CHECKS.get(x, _never)(v) for x in types):
        names = " or ".join(js_number_str(x) if is_number(x) else str(x) for x in types)
        yield path, f"expected {names}, got {js_type_name(v)}"


def _never(_v: Any) -> bool:
    return False


def _enum(node: dict, v: Any, path: str) -> Iterator[Error]:
    values = node.get("enum")
    if isinstance(values, list) and not any(js_deep_equal(v, e) for e in values):
        yield path, f"expected one of {_list_values(values)}"


def _const(node: dict, v: Any, path: str) -> Iterator[Error]:
    if "const" in node and not js_deep_equal(v, node["const"]):
        yield path, f"expected {js_stringify(node['const'])}"


# ---- size and number bounds (one factory per comparison; messages are pi-schema's)
def _size(v: Any) -> int:
    """Code points of a string (pi-schema ``codePoints``: an astral character counts 1), keys of an object,
    items of an array."""
    return js_code_points(v) if isinstance(v, str) else len(v)


def _at_least(key: str, unit: str) -> Callable[[dict, Any, str], Iterator[Error]]:
    def handler(node: dict, v: Any, path: str) -> Iterator[Error]:
        n = node.get(key)
        if _num(n) and _size(v) < n:
            yield path, f"expected at least {js_number_str(n)} {unit}"
    return handler


def _at_most(key: str, unit: str) -> Callable[[dict, Any, str], Iterator[Error]]:
    def handler(node: dict, v: Any, path: str) -> Iterator[Error]:
        n = node.get(key)
        if _num(n) and _size(v) > n:
            yield path, f"expected at most {js_number_str(n)} {unit}"
    return handler


def _bound(key: str, fails: Callable[[Any, Any], bool], word: str) -> Callable[[dict, Any, str], Iterator[Error]]:
    def handler(node: dict, v: Any, path: str) -> Iterator[Error]:
        b = node.get(key)
        if _num(b) and fails(v, b):
            yield path, f"expected {word} {js_number_str(b)}"
    return handler


def _multiple_of(node: dict, v: Any, path: str) -> Iterator[Error]:
    m = node.get("multipleOf")
    if _num(m) and not _is_multiple(v, m):
        yield path, f"expected a multiple of {js_number_str(m)}"


# ---- strings
def _pattern(node: dict, v: str, path: str) -> Iterator[Error]:
    p = node.get("pattern")
    if isinstance(p, str) and not _pattern_ok(p, v):
        yield path, f"expected to match {p}"


def _format(node: dict, v: str, path: str) -> Iterator[Error]:
    fmt = node.get("format")
    if isinstance(fmt, str) and not _format_ok(fmt, v):
        yield path, f"expected format {fmt}"


# ---- objects
def _properties_of(node: dict) -> dict:
    return node["properties"] if _is_schema(node.get("properties")) else {}


def _required(node: dict, v: dict, path: str) -> Iterator[Error]:
    req = node.get("required")
    for k in req if isinstance(req, list) else []:
        if isinstance(k, str) and k not in v:
            yield _pointer(path, k), "missing"


def _properties(node: dict, v: dict, path: str) -> Iterator[Error]:
    props = _properties_of(node)
    for k in js_keys(props):
        if k in v:
            yield from _errors(props[k], v[k], _pointer(path, k))


def _other_keys(node: dict, v: dict, path: str) -> Iterator[Error]:
    """``patternProperties``, ``additionalProperties`` and ``propertyNames``, key by key."""
    props = _properties_of(node)
    pats = list(node["patternProperties"].items()) if _is_schema(node.get("patternProperties")) else []
    add = node.get("additionalProperties")
    for k in js_keys(v):
        at = _pointer(path, k)
        matched = k in props
        for p, s in pats:
            rx = _regex(p)
            if rx is not None and rx.search(k):
                matched = True
                yield from _errors(s, v[k], at)
        if not matched and add is False:
            yield at, "unknown field"
        elif not matched and add is not None:
            yield from _errors(add, v[k], at)
        if "propertyNames" in node and not check(node["propertyNames"], k):
            yield at, "invalid property name"


# ---- arrays
def _items(node: dict, v: list, path: str) -> Iterator[Error]:
    """``items`` (schema or list) / ``prefixItems`` / ``additionalItems``."""
    items = node.get("items")
    if isinstance(items, list):
        pre, rest = items, node.get("additionalItems")
    else:
        pre = node.get("prefixItems") if isinstance(node.get("prefixItems"), list) else []
        rest = items
    for i, x in enumerate(v):
        s = pre[i] if i < len(pre) else rest
        if s is not None:
            yield from _errors(s, x, f"{path}/{i}")


def _unique_items(node: dict, v: list, path: str) -> Iterator[Error]:
    if node.get("uniqueItems") is True and not _unique(v):
        yield path, "expected unique items"


def _contains(node: dict, v: list, path: str) -> Iterator[Error]:
    if "contains" not in node:
        return
    lo = node["minContains"] if _num(node.get("minContains")) else 1
    hi = node["maxContains"] if _num(node.get("maxContains")) else math.inf
    c = sum(1 for x in v if check(node["contains"], x))
    if lo <= c <= hi:
        return
    if hi == math.inf:
        yield path, f"expected at least {js_number_str(lo)} matching {'item' if lo == 1 else 'items'}"
    elif lo == 0:
        yield path, f"expected at most {js_number_str(hi)} matching {'item' if hi == 1 else 'items'}"
    else:
        yield path, f"expected between {js_number_str(lo)} and {js_number_str(hi)} matching items"


# ---- applicators
def _all_of(node: dict, v: Any, path: str) -> Iterator[Error]:
    if isinstance(node.get("allOf"), list):
        for s in node["allOf"]:
            yield from _errors(s, v, path)


def _union(key: str, exactly_one: bool) -> Callable[[dict, Any, str], Iterator[Error]]:
    def handler(node: dict, v: Any, path: str) -> Iterator[Error]:
        branches = node.get(key)
        if not isinstance(branches, list):
            return
        matches = _count_matches(branches, v, stop_at=2 if exactly_one else 1)
        if matches == 1 or (not exactly_one and matches > 0):
            return
        if matches > 1:
            yield path, "matches more than one alternative"
        else:
            yield from _blame(branches, v, path)
    return handler


def _count_matches(branches: list, v: Any, stop_at: int) -> int:
    n = 0
    for s in branches:
        n += check(s, v)
        if n >= stop_at:
            break
    return n


def _blame(branches: list, v: Any, path: str) -> Iterator[Error]:
    """No branch matches: the branch the tag selects, else the one declaring most keys, then the deepest first error."""
    tag = _tag_of(branches)
    if tag is not None and _is_obj(v):
        key, values = tag
        idx = next((i for i, x in enumerate(values) if js_strict_eq(x, v.get(key, _MISSING))), -1)
        if idx < 0:
            yield _pointer(path, key), f"expected one of {_list_values(values)}"
        else:
            yield from _errors(branches[idx], v, path)
        return
    best = None
    for s in branches:
        errs = list(_errors(s, v, path))
        if not errs:
            continue
        declared = 0
        if _is_obj(v) and _is_schema(s) and _is_schema(s.get("properties")):
            declared = sum(1 for k in v if k in s["properties"])
        if best is None or declared > best[1] or (declared == best[1] and len(errs[0][0]) > len(best[0][0][0])):
            best = (errs, declared)
    yield from best[0] if best else [(path, "matches no alternative")]


def _not(node: dict, v: Any, path: str) -> Iterator[Error]:
    if "not" in node and check(node["not"], v):
        yield path, "must not match the schema in not"


def _if(node: dict, v: Any, path: str) -> Iterator[Error]:
    if "if" in node:
        yield from _errors(node.get("then") if check(node["if"], v) else node.get("else"), v, path)


# The keyword table, in pi-schema ``Explainer.walk`` order (the order of the error lines).
KEYWORDS: tuple[Keyword, ...] = (
    Keyword(("type",), _any, _type, final=True),
    Keyword(("enum",), _any, _enum),
    Keyword(("const",), _any, _const),
    Keyword(("minLength",), _is_str, _at_least("minLength", "characters")),
    Keyword(("maxLength",), _is_str, _at_most("maxLength", "characters")),
    Keyword(("pattern",), _is_str, _pattern),
    Keyword(("format",), _is_str, _format),
    Keyword(("minimum",), is_number, _bound("minimum", lambda a, b: a < b, ">=")),
    Keyword(("maximum",), is_number, _bound("maximum", lambda a, b: a > b, "<=")),
    Keyword(("exclusiveMinimum",), is_number, _bound("exclusiveMinimum", lambda a, b: a <= b, ">")),
    Keyword(("exclusiveMaximum",), is_number, _bound("exclusiveMaximum", lambda a, b: a >= b, "<")),
    Keyword(("multipleOf",), is_number, _multiple_of),
    Keyword(("required",), _is_obj, _required),
    Keyword(("properties",), _is_obj, _properties),
    Keyword(("patternProperties", "additionalProperties", "propertyNames"), _is_obj, _other_keys),
    Keyword(("minProperties",), _is_obj, _at_least("minProperties", "properties")),
    Keyword(("maxProperties",), _is_obj, _at_most("maxProperties", "properties")),
    Keyword(("items", "prefixItems", "additionalItems"), _is_list, _items),
    Keyword(("minItems",), _is_list, _at_least("minItems", "items")),
    Keyword(("maxItems",), _is_list, _at_most("maxItems", "items")),
    Keyword(("uniqueItems",), _is_list, _unique_items),
    Keyword(("contains", "minContains", "maxContains"), _is_list, _contains),
    Keyword(("allOf",), _any, _all_of),
    Keyword(("anyOf",), _any, _union("anyOf", exactly_one=False)),
    Keyword(("oneOf",), _any, _union("oneOf", exactly_one=True)),
    Keyword(("not",), _any, _not),
    Keyword(("if", "then", "else"), _any, _if),
)

_ROW_OF = {name: i for i, kw in enumerate(KEYWORDS) for name in kw.names}


def _rows(node: dict) -> list[Keyword]:
    """The table rows whose keywords ``node`` has, in table order."""
    return [KEYWORDS[i] for i in sorted({_ROW_OF[k] for k in node if k in _ROW_OF})]


_MISSING = object()

def _tag_of(branches: list):
    first = branches[0] if branches else None
    if not _is_schema(first) or not _is_schema(first.get("properties")):
        return None
    for key in js_keys(first["properties"]):
        values = []
        for s in branches:
            tag = s["properties"].get(key) if _is_schema(s) and _is_schema(s.get("properties")) else None
            values.append(tag["const"] if _is_schema(tag) and "const" in tag else _MISSING)
        if all(x is not _MISSING and not isinstance(x, (dict, list)) for x in values):
            if len({(type(x).__name__ if isinstance(x, bool) else "n" if is_number(x) else type(x).__name__, x) for x in values}) == len(values):
                return key, values
    return None


# =============================================================================================== coerce
def coerce(schema: Any, value: Any) -> Any:
    """pi-schema ``Coercer.coerce``: drop optional nulls, TypeBox conversion, primitive coercion by type."""
    v = _drop_optional_nulls(value, schema)
    v = _convert(schema, v, [])
    return _coerce_types(v, schema)


def _passes(node: Any, v: Any) -> bool:
    return check(node, v)


def _drop_optional_nulls(value: Any, schema: Any) -> Any:
    if not _is_schema(schema):
        return value
    if isinstance(value, list):
        out = None
        for i, item in enumerate(value):
            s = _item_schema_at(schema, i)
            nxt = item if s is None else _drop_optional_nulls(item, s)
            if nxt is not item:
                out = out or list(value)
                out[i] = nxt
        return value if out is None else out
    if not _is_obj(value):
        return value
    props_ok = _is_schema(schema.get("properties"))
    props = schema["properties"] if props_ok else {}
    pats = list(schema["patternProperties"].items()) if _is_schema(schema.get("patternProperties")) else []
    add = schema.get("additionalProperties") if _is_schema(schema.get("additionalProperties")) else None
    if not pats and add is None and not props_ok:
        return value
    req = set(schema["required"]) if isinstance(schema.get("required"), list) else set()
    out = None
    for k in js_keys(props):
        if k not in value:
            continue
        prop = props[k]
        is_ref = _is_schema(prop) and isinstance(prop.get("$ref"), str)
        if value[k] is None and k not in req and not is_ref and _passes(prop, None) is False:
            out = out if out is not None else dict(value)
            out.pop(k, None)
            continue
        nxt = _drop_optional_nulls(value[k], prop)
        cur = (out if out is not None else value).get(k)
        if nxt is not cur:
            out = out if out is not None else dict(value)
            out[k] = nxt
    if pats or add is not None:
        for k in js_keys(value):
            schemas = _pattern_schemas(k, pats)
            matched = k in props or bool(schemas)
            for s in schemas:
                src = out if out is not None else value
                if k in src:
                    nxt = _drop_optional_nulls(src[k], s)
                    if nxt is not src[k]:
                        out = out if out is not None else dict(value)
                        out[k] = nxt
            if not matched and add is not None:
                nxt = _drop_optional_nulls(value[k], add)
                if nxt is not value[k]:
                    out = out if out is not None else dict(value)
                    out[k] = nxt
    return value if out is None else out


# ---- TypeBox conversion (pass 2)
def _try_string(v: Any):
    if isinstance(v, bool):
        return ("true" if v else "false",)
    if is_finite_number(v):
        return (js_number_str(v),)
    if v is None:
        return ("null",)
    if isinstance(v, str):
        return (v,)
    return None


_MAX_SAFE = 2**53 - 1


def _norm_num(x: float) -> Any:
    if isinstance(x, float) and x.is_integer() and abs(x) <= _MAX_SAFE:
        return int(x)
    return x


def _big_of_string(s: str):
    if re.fullmatch(r"-?(0|[1-9][0-9]*)n", s):
        return int(s[:-1])
    if re.fullmatch(r"-?(0|[1-9][0-9]*)\.[0-9]+", s):
        return int(s.split(".")[0])
    if re.fullmatch(r"-?(0|[1-9][0-9]*)", s):
        return int(s)
    return None


def _try_number(v: Any):
    if isinstance(v, bool):
        return (1 if v else 0,)
    if is_finite_number(v):
        return (v,)
    if v is None:
        return (0,)
    if not isinstance(v, str):
        return None
    c = js_to_number(v)
    if isinstance(c, int) or math.isfinite(c):
        return (_norm_num(c),)
    low = v.lower()
    if low == "false":
        return (0,)
    if low == "true":
        return (1,)
    big = _big_of_string(v)
    if big is not None and -_MAX_SAFE <= big <= _MAX_SAFE:
        return (big,)
    return None


def _try_boolean(v: Any):
    if isinstance(v, bool):
        return (v,)
    if is_finite_number(v):
        return (False,) if v == 0 else (True,) if v == 1 else None
    if v is None:
        return (False,)
    if not isinstance(v, str):
        return None
    low = v.lower()
    if low == "false" or v == "0":
        return (False,)
    if low == "true" or v == "1":
        return (True,)
    return None


def _try_null(v: Any):
    if isinstance(v, bool):
        return (None,) if v is False else None
    if is_finite_number(v):
        return (None,) if v == 0 else None
    if v is None:
        return (None,)
    if not isinstance(v, str):
        return None
    low = v.lower()
    return (None,) if low in ("undefined", "null") or v in ("", "0") else None


def _or_value(r, v):
    return v if r is None else r[0]


def _convert_literal(lit: Any, v: Any) -> Any:
    if js_strict_eq(lit, v):
        return v
    if isinstance(lit, str):
        r = _try_string(v)
    elif isinstance(lit, bool):
        r = _try_boolean(v)
    elif is_number(lit):
        r = _try_number(v)
    else:
        r = None
    return r[0] if r is not None and js_strict_eq(r[0], lit) else v


def _convert(node: Any, v: Any, entered: list) -> Any:
    if not _is_schema(node):
        return v
    if isinstance(node.get("$ref"), str):
        return v  # $ref is not supported (see module docstring)
    if "const" in node:
        return _convert_literal(node["const"], v)
    if isinstance(node.get("enum"), list):
        vals = node["enum"]
        if any(js_strict_eq(m, v) for m in vals):
            return v
        for m in vals:
            cand = _convert_literal(m, v)
            if not js_strict_eq(cand, v) and _passes(node, cand):
                return cand
        return v
    for key in ("anyOf", "oneOf"):
        if isinstance(node.get(key), list):
            return _convert_union(node, node[key], v, entered)
    if isinstance(node.get("allOf"), list):
        nxt = v
        for m in node["allOf"]:
            nxt = _convert(m, nxt, entered)
        return _convert_members(node, nxt, entered)
    t = node.get("type")
    if t == "string":
        return _or_value(_try_string(v), v)
    if t == "number":
        return _or_value(_try_number(v), v)
    if t == "integer":
        r = _try_number(v)
        if r is None:
            return v
        x = r[0]
        return _norm_num(float(math.trunc(x))) if isinstance(x, float) else x
    if t == "boolean":
        return _or_value(_try_boolean(v), v)
    if t == "null":
        return _or_value(_try_null(v), v)
    if t == "array":
        return _convert_array(node, v, entered)
    if t == "object":
        return _convert_object(node, v, entered)
    if t is None:
        if "properties" in node or "patternProperties" in node:
            return _convert_object(node, v, entered)
        if "items" in node or "prefixItems" in node:
            return _convert_array(node, v, entered)
    return v


def _convert_members(node: dict, v: Any, entered: list) -> Any:
    if "properties" in node or "patternProperties" in node or "additionalProperties" in node:
        return _convert_object(node, v, entered)
    return v


def _convert_union(node: dict, branches: list, v: Any, entered: list) -> Any:
    if any(_passes(b, v) for b in branches):
        return _convert_members(node, v, entered)
    for b in branches:
        cand = _convert_members(node, _convert(b, v, entered), entered)
        if _passes(node, cand):
            return cand
    return _convert_members(node, v, entered)


def _convert_array(node: dict, v: Any, entered: list) -> Any:
    items = node.get("items")
    prefix = items if isinstance(items, list) else node.get("prefixItems") if isinstance(node.get("prefixItems"), list) else None
    if prefix is not None:
        if not isinstance(v, list):
            return v
        rest = None if isinstance(items, list) else items
        out = None
        for i, x in enumerate(v):
            s = prefix[i] if i < len(prefix) else rest
            nxt = x if s is None else _convert(s, x, entered)
            if nxt is not x:
                out = out or list(v)
                out[i] = nxt
        return v if out is None else out
    if isinstance(v, list):
        if items is None:
            return v
        out = None
        for i, x in enumerate(v):
            nxt = _convert(items, x, entered)
            if nxt is not x:
                out = out or list(v)
                out[i] = nxt
        return v if out is None else out
    if _is_schema(items):
        for n, val in entered:
            if n is items and (val is v or (not isinstance(v, (dict, list)) and js_strict_eq(val, v))):
                return [v]
        entered.append((items, v))
        try:
            return [_convert(items, v, entered)]
        finally:
            entered.pop()
    return [v]


def _convert_object(node: dict, v: Any, entered: list) -> Any:
    if not _is_obj(v):
        return v
    props = node["properties"] if _is_schema(node.get("properties")) else {}
    pats = list(node["patternProperties"].items()) if _is_schema(node.get("patternProperties")) else []
    add = node.get("additionalProperties") if _is_schema(node.get("additionalProperties")) else None
    out = None
    for k in js_keys(v):
        nxt = v[k]
        matched = k in props
        if matched:
            nxt = _convert(props[k], nxt, entered)
        for p, s in pats:
            rx = _regex(p)
            if rx is None or not rx.search(k):
                continue
            matched = True
            nxt = _convert(s, nxt, entered)
        if not matched and add is not None:
            nxt = _convert(add, nxt, entered)
        if nxt is not v[k]:
            out = out if out is not None else dict(v)
            out[k] = nxt
    return v if out is None else out


# ---- primitive coercion (pass 3)
def _types_of(schema: dict) -> list:
    t = schema.get("type")
    if isinstance(t, str):
        return [t]
    if isinstance(t, list):
        return [x for x in t if isinstance(x, str)]
    return []


def _matches_type(v: Any, t: str) -> bool:
    f = TYPE_CHECKS.get(t)
    return bool(f and f(v))


def _coerce_primitive(v: Any, t: str) -> Any:
    if t in ("number", "integer"):
        if v is None:
            return 0
        if isinstance(v, str) and js_trim(v) != "":
            parsed = js_to_number(v)
            if (t == "number" and (isinstance(parsed, int) or math.isfinite(parsed))) or (t == "integer" and is_integer(parsed)):
                return _norm_num(parsed)
        if isinstance(v, bool):
            return 1 if v else 0
        return v
    if t == "boolean":
        if v is None:
            return False
        if v == "true" or (is_number(v) and v == 1):
            return True
        if v == "false" or (is_number(v) and v == 0):
            return False
        return v
    if t == "string":
        if v is None:
            return ""
        if is_number(v) or isinstance(v, bool):
            if isinstance(v, float) and not math.isfinite(v):
                return js_number_str(v)
            return js_number_str(v) if not isinstance(v, bool) else ("true" if v else "false")
        return v
    if t == "null":
        return None if (v == "" or (is_number(v) and v == 0) or v is False) else v
    return v


def _coerce_types(v: Any, schema: Any) -> Any:
    if not _is_schema(schema):
        return v
    nxt = v
    if isinstance(schema.get("allOf"), list):
        for m in schema["allOf"]:
            nxt = _coerce_types(nxt, m)
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            nxt = _coerce_union(nxt, schema[key])
    types = _types_of(schema)
    matches_member = len(types) > 1 and any(_matches_type(nxt, t) for t in types)
    if types and not matches_member:
        for t in types:
            cand = _coerce_primitive(nxt, t)
            if not js_strict_eq(cand, nxt) and not (isinstance(cand, (dict, list)) and cand is nxt):
                nxt = cand
                break
    if "object" in types and _is_obj(nxt):
        nxt = _coerce_properties(nxt, schema)
    if "array" in types and isinstance(nxt, list):
        out = None
        for i, x in enumerate(nxt):
            s = _item_schema_at(schema, i)
            y = _coerce_types(x, s) if _is_schema(s) else x
            if y is not x:
                out = out or list(nxt)
                out[i] = y
        nxt = nxt if out is None else out
    return nxt


def _coerce_union(v: Any, branches: list) -> Any:
    if any(_passes(b, v) for b in branches):
        return v
    for b in branches:
        c = _coerce_types(v, b)
        if _passes(b, c):
            return c
    return v


def _coerce_properties(v: dict, schema: dict) -> dict:
    props = schema["properties"] if _is_schema(schema.get("properties")) else {}
    pats = list(schema["patternProperties"].items()) if _is_schema(schema.get("patternProperties")) else []
    add = schema.get("additionalProperties") if _is_schema(schema.get("additionalProperties")) else None
    out = None

    def cur() -> dict:
        return out if out is not None else v

    def put(k, nxt):
        nonlocal out
        if nxt is cur().get(k) and k in cur():
            return
        out = out if out is not None else dict(v)
        out[k] = nxt

    for k in js_keys(props):
        if k in v:
            put(k, _coerce_types(v[k], props[k]))
    for k in js_keys(v):
        schemas = _pattern_schemas(k, pats)
        matched = k in props or bool(schemas)
        for s in schemas:
            put(k, _coerce_types(cur()[k], s))
        if not matched and add is not None:
            put(k, _coerce_types(v[k], add))
    return cur()
