"""Where a reference step's argument values come from (plan level of the control document).

``arg_sources(query, steps, defaults)`` labels every non-empty argument of every reference step with
one source, tried in this order:

1. ``"default"``: the value equals the tool's catalog example/default value for that argument;
2. ``"query"``: the value occurs in the user query;
3. ``"step:<k>"``: the value occurs in the recorded output of an *earlier* reference step k (1-based;
   the latest such step wins, since chains feed forward);
4. ``"unknown"``: none of the above (TRAJECT has many under-specified hard queries, docs/traject-bench.md 3.4).

"Occurs" is a case-insensitive match of the value's text form (numbers via ``repr``-free ``str``,
booleans as ``true``/``false``, lists/dicts element-wise: every element must occur). Values shorter
than 3 characters (``"1"``, ``"en"``) must match as a whole token (``\\b`` boundaries), so they do not
match inside unrelated numbers or words. Values are searched, never shown: the label is all the
document carries.
"""

from __future__ import annotations

import re
from typing import Any, Iterable


def _texts(v: Any) -> list[str] | None:
    """Text forms to search for a value (None: the value is empty and has no source)."""
    if v is None:
        return None
    if isinstance(v, bool):
        return ["true" if v else "false"]
    if isinstance(v, (int, float)):
        if isinstance(v, float) and v.is_integer():
            return [str(int(v))]
        return [str(v)]
    if isinstance(v, str):
        s = v.strip()
        return [s] if s else None
    if isinstance(v, (list, tuple)):
        out: list[str] = []
        for x in v:
            t = _texts(x)
            if t:
                out.extend(t)
        return out or None
    if isinstance(v, dict):
        return _texts(list(v.values()))
    return [str(v)]


def _occurs(needle: str, hay: str) -> bool:
    n = needle.casefold()
    if len(n) < 3:
        return re.search(r"(?<![\w.])" + re.escape(n) + r"(?![\w.])", hay) is not None
    return n in hay


def occurs_all(v: Any, hay_cf: str) -> bool:
    """Every text form of ``v`` occurs in the casefolded haystack ``hay_cf``."""
    ts = _texts(v)
    return bool(ts) and all(_occurs(t, hay_cf) for t in ts)


def _eq_default(v: Any, d: Any) -> bool:
    if d is None:
        return False
    if isinstance(v, str) and isinstance(d, str):
        return v.strip().casefold() == d.strip().casefold()
    if isinstance(v, bool) or isinstance(d, bool):
        return v is d or str(v).casefold() == str(d).casefold()
    if isinstance(v, (int, float)) or isinstance(d, (int, float)):
        try:
            return float(v) == float(d)
        except (TypeError, ValueError):
            return False
    return v == d


def arg_sources(
    query: str,
    steps: Iterable[tuple[dict, str]],
    defaults: Iterable[dict] | None = None,
    *,
    chain: bool = True,
) -> list[dict[str, str]]:
    """Per step, ``{arg name: source}`` for its non-empty arguments (see module docstring).

    ``steps``: ``(arguments, recorded_output)`` per reference step in order; ``defaults``: per step the
    tool's ``{arg name: catalog default}`` (or None); ``chain=False`` (parallel tasks, whose calls are
    issued together) skips step 3.
    """
    steps = list(steps)
    defaults = list(defaults) if defaults is not None else [None] * len(steps)
    q = (query or "").casefold()
    outs = [(o or "").casefold() for _, o in steps]
    result: list[dict[str, str]] = []
    for k, ((args, _), dflt) in enumerate(zip(steps, defaults)):
        srcs: dict[str, str] = {}
        for name, v in (args or {}).items():
            if _texts(v) is None:
                continue
            if dflt and name in dflt and _eq_default(v, dflt[name]):
                srcs[name] = "default"
            elif occurs_all(v, q):
                srcs[name] = "query"
            else:
                src = "unknown"
                for j in range(k - 1, -1, -1) if chain else ():
                    if occurs_all(v, outs[j]):
                        src = f"step:{j + 1}"
                        break
                srcs[name] = src
        result.append(srcs)
    return result
