"""Canonicalisation of tool names and arguments, shared by the replay executor and the metrics.

Definitions (docs/traject-bench.md sec 9.1):

* ``canon_name(n)`` = whitespace collapsed, stripped, casefolded. Tool identity everywhere.
* ``alnum(n)`` = only ``[a-z0-9]`` of the casefolded name; used for alias resolution.
* ``traject_normalize_value(v)`` restates TRAJECT's ``utils/metrics.normalize_value``: ``ast.literal_eval``
  of ``str(v).strip()`` (fallback: the string), then for strings: ``\\s*,\\s*`` -> ``,`` and collapsed
  spaces; a 2-letter country code after a comma becomes the country name (``Rome, IT`` -> ``Rome,Italy``);
  ``YYYY-M-D`` dates are zero-padded; bool words (true/yes/on, false/no/off) become bools; digit strings
  become int, float-like strings float. Departure: the repo's country table is not public at the pinned
  commit; we ship a table of the common ISO codes (``_COUNTRIES``), so rare codes stay as written.
* ``canon_value(v)`` = ``traject_normalize_value`` plus: strings casefolded, numbers int if integral else
  ``round(x, 6)``, bools as ``"true"``/``"false"`` (so ``"true"``, ``True`` and ``"True"`` agree),
  lists/dicts as ``json.dumps(sort_keys=True)`` of their canonical items (string items normalised too).
* ``canon_args(args)`` drops ``None``/``""`` values and returns a sorted tuple of ``(name.strip(), canon_value)``.
* ``signature(name, args)`` = ``(canon_name(name), canon_args(args))``.
"""

from __future__ import annotations

import ast
import json
import math
import re
import string
import warnings
from functools import lru_cache
from typing import Any

_WS = re.compile(r"\s+")
_NON_ALNUM = re.compile(r"[^a-z0-9]")
_DATE = re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2})$")
_INT = re.compile(r"^[+-]?\d+$")
_FLOAT = re.compile(r"^[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?$")
_TRUE = {"true", "yes", "on"}
_FALSE = {"false", "no", "off"}

_COUNTRIES = {
    "US": "United States", "GB": "United Kingdom", "UK": "United Kingdom", "CA": "Canada", "AU": "Australia",
    "DE": "Germany", "FR": "France", "IT": "Italy", "ES": "Spain", "PT": "Portugal", "NL": "Netherlands",
    "BE": "Belgium", "CH": "Switzerland", "AT": "Austria", "SE": "Sweden", "NO": "Norway", "DK": "Denmark",
    "FI": "Finland", "IE": "Ireland", "PL": "Poland", "CZ": "Czech Republic", "GR": "Greece", "TR": "Turkey",
    "RU": "Russia", "UA": "Ukraine", "JP": "Japan", "CN": "China", "KR": "South Korea", "IN": "India",
    "SG": "Singapore", "HK": "Hong Kong", "TW": "Taiwan", "TH": "Thailand", "VN": "Vietnam", "ID": "Indonesia",
    "MY": "Malaysia", "PH": "Philippines", "NZ": "New Zealand", "BR": "Brazil", "AR": "Argentina",
    "MX": "Mexico", "CL": "Chile", "CO": "Colombia", "PE": "Peru", "ZA": "South Africa", "EG": "Egypt",
    "NG": "Nigeria", "KE": "Kenya", "MA": "Morocco", "AE": "United Arab Emirates", "SA": "Saudi Arabia",
    "IL": "Israel", "QA": "Qatar", "HU": "Hungary", "RO": "Romania", "IS": "Iceland", "HR": "Croatia",
}


def canon_name(name: str) -> str:
    """Tool identity: whitespace collapsed, stripped, casefolded."""
    return _WS.sub(" ", str(name)).strip().casefold()


def alnum(name: str) -> str:
    """Alias key: only ``[a-z0-9]`` of the casefolded name."""
    return _NON_ALNUM.sub("", str(name).casefold())


def _normalize_location(s: str) -> str:
    parts = s.split(",")
    return ",".join(_COUNTRIES.get(p, p) if len(p) == 2 and p.isupper() else p for p in parts)


def _literal(v: Any) -> Any:
    s = str(v).strip()
    # fast path: a string starting with a letter is a literal only if it is True/False/None
    if s and (s[0].isalpha() or s[0] == "_") and s not in ("True", "False", "None"):
        return str(v)
    try:
        with warnings.catch_warnings():   # model-written values like "1j2" make the parser warn on stderr
            warnings.simplefilter("ignore", SyntaxWarning)
            return ast.literal_eval(s)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return str(v)


def traject_normalize_value(v: Any) -> Any:
    """TRAJECT's ``normalize_value`` (see module docstring). Case-sensitive, like the repo."""
    v = _literal(v)
    if not isinstance(v, str):
        return v
    s = _WS.sub(" ", re.sub(r"\s*,\s*", ",", v)).strip()
    if "," in s:
        s = _normalize_location(s)
    m = _DATE.match(s)
    if m:
        return f"{m.group(1)}-{int(m.group(2)):02d}-{int(m.group(3)):02d}"
    low = s.lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    if _INT.match(s):
        return int(s)
    if _FLOAT.match(s):
        try:
            return float(s)
        except ValueError:  # pragma: no cover - regex guarantees parseable
            return s
    return s


def _canon_num(x: float) -> Any:
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return str(x)
    if float(x).is_integer() and abs(x) < 2**53:
        return int(x)
    return round(float(x), 6)


def _canon_item(x: Any) -> Any:
    if isinstance(x, str):
        return _canon_obj(traject_normalize_value(x))
    return _canon_obj(x)


def _canon_obj(v: Any) -> Any:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return _canon_num(v)
    if isinstance(v, str):
        return v.casefold()
    if isinstance(v, dict):
        return {str(k): _canon_item(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set)):
        return [_canon_item(x) for x in v]
    return str(v).casefold()


@lru_cache(maxsize=262144)
def _canon_scalar(v: Any, _t: type) -> Any:
    return _canon_value(v)


def canon_value(v: Any) -> Any:
    """Canonical hashable value (see module docstring)."""
    if isinstance(v, (str, int, float, bool)):
        return _canon_scalar(v, type(v))
    return _canon_value(v)


def _canon_value(v: Any) -> Any:
    v = traject_normalize_value(v)
    c = _canon_obj(v)
    if isinstance(c, (dict, list)):
        return json.dumps(c, sort_keys=True, ensure_ascii=False)
    return c


def is_empty(v: Any) -> bool:
    """Values dropped before comparison: ``None`` and the empty string."""
    return v is None or (isinstance(v, str) and v == "")


def canon_args(args: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """Sorted ``(name, canon_value)`` pairs, ``None``/``""`` dropped."""
    out = []
    for k, v in (args or {}).items():
        if is_empty(v):
            continue
        out.append((str(k).strip(), canon_value(v)))
    out.sort(key=lambda kv: (kv[0], repr(kv[1])))
    return tuple(out)


def signature(name: str, args: dict[str, Any]) -> tuple[str, tuple]:
    """``(canon_name(name), canon_args(args))``: the exact-match key of a call."""
    return (canon_name(name), canon_args(args))


_PUNCT = str.maketrans({c: " " for c in string.punctuation})


def loose_string(v: Any) -> Any:
    """Near-match form of a canonical string: punctuation stripped, comma-lists unordered."""
    if not isinstance(v, str):
        return v
    if "," in v:
        items = sorted(_WS.sub(" ", p.translate(_PUNCT)).strip() for p in v.split(","))
        return tuple(i for i in items if i)
    return _WS.sub(" ", v.translate(_PUNCT)).strip()
