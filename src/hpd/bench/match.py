"""Call-vs-gold-step matching shared by the replay executor and the metrics (docs/traject-bench.md sec 9.2).

* **exact**: ``signature(call) == signature(step)`` (``hpd.bench.canon``).
* **near**: same catalog tool and
  - every *essential* gold argument is present in the call with an equal value, where essential = non-empty
    gold args whose value differs from the catalog ``default`` and that are not an ignorable name
    (page, limit, offset, count, lang, language, locale, format, fmt, currency) with a default-like value;
  - every other non-empty call argument equals the gold value, or the catalog default, or is an ignorable
    name with a default-like value (so a call that asks for something else is not near);
  - equality: numbers within ``abs <= 1e-4`` for lat/lon-like names, else ``rel <= 1e-6``; strings after
    stripping punctuation, comma-lists unordered.
  Near is only tried against successful gold steps (recorded failures replay on exact only).
"""

from __future__ import annotations

import math
import re
from typing import Any

from hpd.bench.canon import canon_value, is_empty, loose_string

IGNORABLE = {"page", "limit", "offset", "count", "lang", "language", "locale", "format", "fmt", "currency"}
_DEFAULT_LIKE = {
    "page": {0, 1, "0", "1"}, "offset": {0, "0"},
    "lang": {"en", "en-us", "en_us"}, "language": {"en", "en-us", "en_us", "english"},
    "locale": {"en", "en-us", "en_us"}, "format": {"json"}, "fmt": {"json"}, "currency": {"usd"},
}
_GEO = re.compile(r"(^|_)(lat|lng|lon|long|latitude|longitude)($|_)|latitude|longitude", re.I)


def default_like(name: str, v: Any) -> bool:
    n = name.strip().lower()
    if n not in IGNORABLE:
        return False
    c = canon_value(v)
    allowed = _DEFAULT_LIKE.get(n)
    return True if allowed is None else c in allowed


def values_equal(name: str, a: Any, b: Any) -> bool:
    """Near-level value equality (see module docstring)."""
    ca, cb = canon_value(a), canon_value(b)
    if ca == cb:
        return True
    na = isinstance(ca, (int, float)) and not isinstance(ca, bool)
    nb = isinstance(cb, (int, float)) and not isinstance(cb, bool)
    if na and nb:
        if _GEO.search(name):
            return abs(ca - cb) <= 1e-4
        return math.isclose(ca, cb, rel_tol=1e-6, abs_tol=0.0)
    if isinstance(ca, str) and isinstance(cb, str):
        return loose_string(ca) == loose_string(cb)
    return False


def _catalog_defaults(tooldef) -> dict[str, Any]:
    out = {}
    if tooldef is None:
        return out
    for p in tooldef.required + tooldef.optional:
        if p.get("name") and not is_empty(p.get("default")):
            out.setdefault(str(p["name"]).strip(), p.get("default"))
    return out


def near_match(args: dict[str, Any], gold_args: dict[str, Any], tooldef=None) -> bool:
    """Whether call arguments ``args`` are near the gold step's ``gold_args`` (same tool assumed)."""
    defaults = _catalog_defaults(tooldef)
    gold = {str(k).strip(): v for k, v in gold_args.items() if not is_empty(v)}
    pred = {str(k).strip(): v for k, v in (args or {}).items() if not is_empty(v)}
    essential = {}
    for n, v in gold.items():
        if n in defaults and canon_value(v) == canon_value(defaults[n]):
            continue
        if default_like(n, v):
            continue
        essential[n] = v
    for n, v in essential.items():
        if n not in pred or not values_equal(n, pred[n], v):
            return False
    for n, v in pred.items():
        if n in essential:
            continue
        if n in gold and values_equal(n, v, gold[n]):
            continue
        if n in defaults and values_equal(n, v, defaults[n]):
            continue
        if default_like(n, v):
            continue
        return False
    return True


def match_level(key: str | None, args: dict[str, Any], sig: tuple, step, tooldef=None) -> str | None:
    """``"exact"``, ``"near"`` or None for one call (catalog ``key``, ``args``, precomputed ``sig``) vs a step."""
    if key is None or step.key != key:
        return None
    if sig == step.sig:
        return "exact"
    if step.status == "success" and near_match(args, step.arguments, tooldef):
        return "near"
    return None
