"""JavaScript value semantics for JSON data, as Pi (V8) sees it: what our texts must match byte-for-byte.

- :func:`js_keys`: ``Object.keys`` order (array-index keys ascending first, then insertion order);
- :func:`js_number`: the one Python spelling of a JS number (an ``int`` exactly when ``String(n)`` has
  only digits, so ``1e3`` and ``1000.0`` are ``1000``; ``-0`` is ``0``); :func:`js_value` applies it to a
  whole JSON value (keys in ``Object.keys`` order) and :func:`js_json` is ``JSON.parse(JSON.stringify(v))``
  (non-finite numbers become ``None``);
- :func:`js_number_str`: ``String(n)`` for a JS number (a Python ``int`` is first rounded to a double, as
  ``Number(n)`` does);
- :func:`js_stringify`: ``JSON.stringify(v)`` / ``JSON.stringify(v, null, 2)``;
- :func:`js_to_number`: ``Number(string)``; :func:`js_strict_eq`: ``a === b``;
- :func:`js_json_parse`: ``JSON.parse`` with the ``SyntaxError`` messages of V8 (Node 20 / V8 11.3 wording);
- strings: :func:`js_string` (the one Python spelling of a JS string), :func:`utf16_units`,
  :func:`js_length` (``s.length``), :func:`js_slice` (``s.slice``), :func:`js_code_points`, :func:`js_trim`.

Strings. A JavaScript string is a sequence of UTF-16 code units; a Python ``str`` is a sequence of code points
and may hold surrogate code points (``"\\ud83d"``). hpd's spelling of a JS string (:func:`js_string`) joins every
high surrogate that is directly followed by a low one into its astral character, as JavaScript reads that pair,
and keeps the other (lone) surrogates as they are. So ``"\\ud83d" + "\\ude00"`` (two Python code points, e.g.
two ``\\uXXXX`` escapes or two streamed chunks) is ``"\\U0001F600"``, which is one JS character of
``.length`` 2. Every function here accepts either spelling and returns this one.
"""

from __future__ import annotations

import math
import re
from typing import Any

_DIGITS = "0123456789"
JS_WHITESPACE = "\t\n\x0b\x0c\r \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"


_SURROGATE = re.compile("[\ud800-\udfff]")
_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def _join_pair(m: re.Match) -> str:
    hi, lo = m.group()
    return chr(0x10000 + ((ord(hi) - 0xD800) << 10) + (ord(lo) - 0xDC00))


def _split_astral(m: re.Match) -> str:
    c = ord(m.group()) - 0x10000
    return chr(0xD800 + (c >> 10)) + chr(0xDC00 + (c & 0x3FF))


def js_string(s: str) -> str:
    """The one Python spelling of the JS string ``s``: each high surrogate directly followed by a low surrogate
    joined into its astral code point (``"\\ud83d\\ude00"`` -> ``"\\U0001F600"``); lone surrogates kept."""
    if not _SURROGATE.search(s):
        return s
    return _PAIR.sub(_join_pair, s)


def utf16_units(s: str) -> str:
    """``s`` with each astral character split into its two surrogates: one Python code point per UTF-16 code unit,
    so ``len``, indices and slices of the result are JavaScript's."""
    if not _ASTRAL.search(s):
        return s
    return _ASTRAL.sub(_split_astral, s)


def js_length(s: str) -> int:
    """``s.length``: UTF-16 code units (an astral character counts 2)."""
    return len(utf16_units(s))


def js_slice(s: str, start: int = 0, end: int | None = None) -> str:
    """``s.slice(start, end)`` by UTF-16 code units; a cut through a surrogate pair leaves a lone surrogate."""
    return js_string(utf16_units(s)[start:end])


def js_code_points(s: str) -> int:
    """The code points of ``s`` (pi-schema ``codePoints``, ``[...s].length``): a lone surrogate counts 1."""
    return len(js_string(s))


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def is_finite_number(v: Any) -> bool:
    return is_number(v) and (isinstance(v, int) or math.isfinite(v))


def is_integer(v: Any) -> bool:
    """``Number.isInteger``."""
    if not is_number(v):
        return False
    if isinstance(v, int):
        return True
    return math.isfinite(v) and float(v).is_integer()


def _is_index_key(k: str) -> bool:
    if not k or (len(k) > 1 and k[0] == "0") or not all(c in _DIGITS for c in k):
        return False
    return int(k) < 4294967295


def js_keys(d: dict) -> list:
    """``Object.keys(d)``: integer-like keys ascending, then the rest in insertion order."""
    idx = [k for k in d if isinstance(k, str) and _is_index_key(k)]
    if not idx:
        return list(d.keys())
    rest = [k for k in d if not (isinstance(k, str) and _is_index_key(k))]
    return sorted(idx, key=int) + rest


MAX_SAFE_INTEGER = 2**53


def _as_double(v: int) -> float:
    """``Number(v)`` for a Python int: the nearest double, or +-Infinity past the double range."""
    try:
        return float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf


def js_number(v: float | int) -> float | int:
    """The Python value of the JS number ``v``: an ``int`` exactly when ``String(v)`` is all digits
    (``1e3`` -> 1000, ``1.0`` -> 1, ``2**60`` -> 1152921504606847000), ``0`` for ``-0``, else the float
    (``1e21``, ``0.5``, NaN and +-Infinity stay floats). So Python's ``str``/``json.dumps`` of an int
    spell it as JavaScript does, and a value equals what a Python reader gets after ``JSON.stringify``."""
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        if -MAX_SAFE_INTEGER <= v <= MAX_SAFE_INTEGER:
            return v
        v = _as_double(v)
    if not math.isfinite(v):
        return v
    if v.is_integer():
        if -MAX_SAFE_INTEGER <= v <= MAX_SAFE_INTEGER:
            return int(v)
        s = js_number_str(v)
        return int(s) if "e" not in s else v
    return v


def js_value(v: Any) -> Any:
    """``v`` as JavaScript holds it: every number through :func:`js_number`, every string and object key through
    :func:`js_string`, keys in ``Object.keys`` order, tuples as arrays; anything that is not JSON data is
    returned unchanged."""
    if isinstance(v, str):
        return js_string(v)
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, (int, float)):
        return js_number(v)
    if isinstance(v, dict):
        d = {js_string(str(k)): x for k, x in v.items()}
        return {k: js_value(d[k]) for k in js_keys(d)}
    if isinstance(v, (list, tuple)):
        return [js_value(x) for x in v]
    return v


def js_json(v: Any) -> Any:
    """``JSON.parse(JSON.stringify(v))``: :func:`js_value` with non-finite numbers as ``None``; what a
    Python reader receives of ``v`` across Node (the bridge, an HTTP body)."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        d = {js_string(str(k)): x for k, x in v.items()}
        return {k: js_json(d[k]) for k in js_keys(d)}
    if isinstance(v, (list, tuple)):
        return [js_json(x) for x in v]
    return js_value(v)


def js_number_str(v: float | int) -> str:
    """``String(n)`` (ECMAScript Number::toString)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        if abs(v) <= MAX_SAFE_INTEGER:
            return str(v)
        v = _as_double(v)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    if v == 0:
        return "0"
    r = repr(float(v))
    sign = ""
    if r.startswith("-"):
        sign, r = "-", r[1:]
    # shortest round-trip digits and exponent
    if "e" in r:
        mant, exp = r.split("e")
        e = int(exp)
    else:
        mant, e = r, 0
    if "." in mant:
        ip, fp = mant.split(".")
    else:
        ip, fp = mant, ""
    digits = (ip + fp).lstrip("0")
    lead_zeros = len(ip + fp) - len((ip + fp).lstrip("0"))
    point = len(ip) + e - lead_zeros  # decimal point position relative to digits start
    digits = digits.rstrip("0") or "0"
    k, n = len(digits), point
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + digits
    ex = n - 1
    es = f"+{ex}" if ex >= 0 else f"-{-ex}"
    if k == 1:
        return sign + digits + "e" + es
    return sign + digits[0] + "." + digits[1:] + "e" + es


def _quote(s: str) -> str:
    """A JSON string literal as well-formed ``JSON.stringify`` writes it: ``\\b \\t \\n \\f \\r \\" \\\\``,
    other controls and lone surrogates as lower-case ``\\uXXXX``, everything else (astral characters too) as is."""
    out = ['"']
    for ch in js_string(s):
        o = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\b":
            out.append("\\b")
        elif ch == "\f":
            out.append("\\f")
        elif o < 0x20 or 0xD800 <= o <= 0xDFFF:
            out.append("\\u%04x" % o)
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def js_stringify(v: Any, indent: int | None = None, _level: int = 0) -> str:
    """``JSON.stringify(v, null, indent)`` for JSON-like Python values (non-finite numbers -> ``null``)."""
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if is_number(v):
        if isinstance(v, float) and not math.isfinite(v):
            return "null"
        return js_number_str(v)
    if isinstance(v, str):
        return _quote(v)
    if isinstance(v, (list, tuple)):
        if not v:
            return "[]"
        items = [js_stringify(x, indent, _level + 1) for x in v]
        if not indent:
            return "[" + ",".join(items) + "]"
        pad, inner = " " * (indent * _level), " " * (indent * (_level + 1))
        return "[\n" + ",\n".join(inner + i for i in items) + "\n" + pad + "]"
    if isinstance(v, dict):
        keys = js_keys(v)
        if not keys:
            return "{}"
        sep = ": " if indent else ":"
        items = [_quote(str(k)) + sep + js_stringify(v[k], indent, _level + 1) for k in keys]
        if not indent:
            return "{" + ",".join(items) + "}"
        pad, inner = " " * (indent * _level), " " * (indent * (_level + 1))
        return "{\n" + ",\n".join(inner + i for i in items) + "\n" + pad + "}"
    return _quote(str(v))


_DEC = re.compile(r"^[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)$")


def js_trim(s: str) -> str:
    """``s.trim()``: JavaScript's white space and line terminators (``\\ufeff`` is one; ``\\x1c``-``\\x1f`` and
    ``\\x85``, which Python's ``str.strip`` removes, are not)."""
    return js_string(s).strip(JS_WHITESPACE)


def js_to_number(s: str) -> float:
    """``Number(s)`` for a string (``NaN`` when it is not numeric)."""
    t = js_trim(s)
    if t == "":
        return 0
    if t in ("Infinity", "+Infinity"):
        return math.inf
    if t == "-Infinity":
        return -math.inf
    m = re.fullmatch(r"0([xX][0-9a-fA-F]+|[oO][0-7]+|[bB][01]+)", t)
    if m:
        base = {"x": 16, "o": 8, "b": 2}[m.group(1)[0].lower()]
        return int(m.group(1)[1:], base)
    if _DEC.match(t):
        return js_number(float(t))
    return math.nan


def js_strict_eq(a: Any, b: Any) -> bool:
    """``a === b`` for JSON-like values (objects/arrays compare by identity)."""
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        return a is b
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if is_number(a) and is_number(b):
        return a == b
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, str) and isinstance(b, str):
        return js_string(a) == js_string(b)
    return type(a) is type(b) and a == b


def js_deep_equal(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return set(a) == set(b) and all(js_deep_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(js_deep_equal(x, y) for x, y in zip(a, b))
    return js_strict_eq(a, b)


def js_type_name(v: Any) -> str:
    """pi-schema ``typeName``."""
    if v is None:
        return "null"
    if isinstance(v, list):
        return "array"
    if isinstance(v, bool):
        return "boolean"
    if is_number(v):
        if is_integer(v):
            return "integer"
        if isinstance(v, float) and not math.isfinite(v):
            return js_number_str(v)
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, dict):
        return "object"
    return "undefined"


# ---------------------------------------------------------------------------------------------- JSON.parse errors
class _ParseError(Exception):
    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def _token_desc(src: str, pos: int) -> str:
    if src in ("NaN", "Infinity", "undefined", "[object Object]"):
        return f'"{src}" is not valid JSON'
    ch = src[pos]
    return f"Unexpected token '{ch}', " + _context(src, pos) + " is not valid JSON"


def _context(src: str, pos: int) -> str:
    """V8 ``JsonParser::ReportUnexpectedToken`` context (kMaxContextCharacters = 10)."""
    n = len(src)
    if n < 21:
        return f'"{src}"'
    if pos < 10:
        return f'"{src[:pos + 10]}"...'
    if pos < n - 10:
        return f'..."{src[pos - 10:pos + 10]}"...'
    return f'..."{src[pos - 10:]}"'


class _V8JsonParser:
    """A JSON parser that fails with V8's (Node 20) ``JSON.parse`` messages. It reads the UTF-16 code units of
    the source (:func:`utf16_units`), so positions, the unexpected token (a lone surrogate for an astral
    character) and the quoted context are V8's; its strings are returned through :func:`js_string`."""

    WS = " \t\n\r"

    def __init__(self, src: str):
        self.s = utf16_units(src)
        self.i = 0

    def fail_token(self, pos: int) -> None:
        s = self.s
        if pos >= len(s):
            raise _ParseError("Unexpected end of JSON input")
        ch = s[pos]
        if ch in "0123456789-":
            raise _ParseError(f"Unexpected number in JSON at position {pos}")
        if ch == '"':
            raise _ParseError(f"Unexpected string in JSON at position {pos}")
        raise _ParseError(_token_desc(s, pos))

    def ws(self) -> None:
        while self.i < len(self.s) and self.s[self.i] in self.WS:
            self.i += 1

    def parse(self) -> Any:
        self.ws()
        v = self.value()
        self.ws()
        if self.i < len(self.s):
            raise _ParseError(f"Unexpected non-whitespace character after JSON at position {self.i}")
        return v

    def value(self) -> Any:
        s, i = self.s, self.i
        if i >= len(s):
            raise _ParseError("Unexpected end of JSON input")
        ch = s[i]
        if ch == "{":
            return self.obj()
        if ch == "[":
            return self.arr()
        if ch == '"':
            return self.string()
        if ch == "-" or ch in _DIGITS:
            return self.number()
        for lit, val in (("true", True), ("false", False), ("null", None)):
            if s.startswith(lit, i):
                self.i += len(lit)
                return val
            if ch == lit[0]:
                # V8 scans the literal char by char and reports the first mismatch
                j = i
                for c in lit:
                    if j >= len(s):
                        raise _ParseError("Unexpected end of JSON input")
                    if s[j] != c:
                        self.fail_token(j)
                    j += 1
        self.fail_token(i)

    def obj(self) -> dict:
        self.i += 1
        self.ws()
        if self.i < len(self.s) and self.s[self.i] == "}":
            self.i += 1
            return {}
        out = self.members()
        return {k: out[k] for k in js_keys(out)}

    def members(self) -> dict:
        s = self.s
        out: dict = {}
        first = True
        while True:
            self.ws()
            if self.i >= len(s) or s[self.i] != '"':
                if first:
                    raise _ParseError(f"Expected property name or '}}' in JSON at position {self.i}")
                raise _ParseError(f"Expected double-quoted property name in JSON at position {self.i}")
            k = self.string()
            self.ws()
            if self.i >= len(s) or s[self.i] != ":":
                if first:
                    raise _ParseError(f"Expected ':' after property name in JSON at position {self.i}")
                self.fail_token(self.i)
            self.i += 1
            self.ws()
            out[k] = self.value()
            self.ws()
            if self.i < len(s) and s[self.i] == ",":
                self.i += 1
                first = False
                continue
            if self.i < len(s) and s[self.i] == "}":
                self.i += 1
                return out
            raise _ParseError(f"Expected ',' or '}}' after property value in JSON at position {self.i}")

    def arr(self) -> list:
        s = self.s
        self.i += 1
        out: list = []
        self.ws()
        if self.i < len(s) and s[self.i] == "]":
            self.i += 1
            return out
        while True:
            self.ws()
            if self.i < len(s) and s[self.i] == "]":
                self.fail_token(self.i)
            out.append(self.value())
            self.ws()
            if self.i < len(s) and s[self.i] == ",":
                self.i += 1
                continue
            if self.i < len(s) and s[self.i] == "]":
                self.i += 1
                return out
            raise _ParseError(f"Expected ',' or ']' after array element in JSON at position {self.i}")

    def string(self) -> str:
        s = self.s
        start = self.i
        self.i += 1
        buf = []
        while True:
            if self.i >= len(s):
                raise _ParseError(f"Unterminated string in JSON at position {self.i}")
            c = s[self.i]
            if c == '"':
                self.i += 1
                return js_string("".join(buf))
            if c == "\\":
                if self.i + 1 >= len(s):
                    raise _ParseError("Unexpected end of JSON input")
                e = s[self.i + 1]
                m = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
                if e in m:
                    buf.append(m[e])
                    self.i += 2
                    continue
                if e == "u":
                    hx = s[self.i + 2:self.i + 6]
                    for j, hc in enumerate(hx):
                        if hc not in "0123456789abcdefABCDEF":
                            raise _ParseError(f"Bad Unicode escape in JSON at position {self.i + 2 + j}")
                    if len(hx) < 4:
                        raise _ParseError(f"Bad Unicode escape in JSON at position {len(s)}")
                    buf.append(chr(int(hx, 16)))
                    self.i += 6
                    continue
                if ord(e) > 0xFF:    # V8 reports a code unit past Latin-1 after a backslash as a token
                    self.fail_token(self.i + 1)
                raise _ParseError(f"Bad escaped character in JSON at position {self.i + 1}")
            if ord(c) < 0x20:
                raise _ParseError(f"Bad control character in string literal in JSON at position {self.i}")
            buf.append(c)
            self.i += 1
        _ = start

    def number(self) -> float:
        s = self.s
        start = self.i
        if s[self.i] == "-":
            self.i += 1
            if self.i >= len(s):
                raise _ParseError("No number after minus sign in JSON at position " + str(self.i))
            if not s[self.i] in _DIGITS:
                raise _ParseError(f"No number after minus sign in JSON at position {self.i}")
        if s[self.i] == "0":
            self.i += 1
            if self.i < len(s) and s[self.i] in _DIGITS:
                raise _ParseError(f"Unexpected number in JSON at position {self.i}")
        else:
            while self.i < len(s) and s[self.i] in _DIGITS:
                self.i += 1
        if self.i < len(s) and s[self.i] == ".":
            self.i += 1
            if self.i >= len(s):
                raise _ParseError(f"Unterminated fractional number in JSON at position {self.i}")
            if not s[self.i] in _DIGITS:
                raise _ParseError(f"Unterminated fractional number in JSON at position {self.i}")
            while self.i < len(s) and s[self.i] in _DIGITS:
                self.i += 1
        if self.i < len(s) and s[self.i] in "eE":
            self.i += 1
            if self.i < len(s) and s[self.i] in "+-":
                self.i += 1
            if self.i >= len(s) or not s[self.i] in _DIGITS:
                raise _ParseError(f"Exponent part is missing a number in JSON at position {self.i}")
            while self.i < len(s) and s[self.i] in _DIGITS:
                self.i += 1
        t = s[start:self.i]
        if len(t) < 16 and re.fullmatch(r"-?[0-9]+", t):
            return int(t)
        return js_number(float(t))


def js_json_parse(src: str) -> tuple[Any, str | None]:
    """``JSON.parse(src)`` -> ``(value, None)``, or ``(None, V8 error message)``; positions count UTF-16 code
    units, ``\\uD83D\\uDE00`` is one astral character and a lone ``\\uD800`` stays a lone surrogate."""
    try:
        return _V8JsonParser(src).parse(), None
    except _ParseError as e:
        return None, js_string(e.message)
    except RecursionError:
        return None, "Maximum call stack size exceeded"
