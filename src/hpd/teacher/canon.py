"""Canonical call signatures and answer-text similarity used by verification and ranking.

The signature follows traject-bench.md section 9.1: ``(canon_name, sorted canonical args)``,
computed by :mod:`hpd.bench.canon` (the replay executor's own canonicaliser), so "repeated call"
here and "exact" in the replay agree.

Token F1 is SQuAD-style (lowercase, punctuation -> space, drop a/an/the, bag of tokens), as
in traject-bench.md section 9.4; 0 when either side is empty, 1 when both are empty.
"""

from __future__ import annotations

import json
import re
import string
from collections import Counter
from typing import Any

from hpd.bench import canon as _bc


def canon_name(name: str) -> str:
    return _bc.canon_name(name)


def canon_args(args: Any) -> tuple:
    """hpd.bench's canonical args; a non-object argument value gets a sentinel key (never equal
    to a real call's args)."""
    if not isinstance(args, dict):
        return (("<non-object>", json.dumps(args, sort_keys=True, default=str)),)
    try:
        return _bc.canon_args(args)
    except Exception:  # pathological values: fall back to a JSON dump, still deterministic
        return (("<raw>", json.dumps(args, sort_keys=True, default=str)),)


def signature(name: str, args: Any) -> tuple:
    """Canonical signature of one call: ``(canon_name, canon_args)`` (traject-bench.md 9.1). Hashable."""
    return (canon_name(name), canon_args(args))


def tool_calls(msg: dict | None) -> list[dict]:
    """toolCall blocks of a Pi assistant message (robust to missing/odd content)."""
    if not msg:
        return []
    content = msg.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == "toolCall"]


def text_of(msg: dict | None) -> str:
    """Concatenated ``text`` blocks (thinking excluded) of an assistant message."""
    if not msg:
        return ""
    content = msg.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")


_PUNCT = re.compile("[" + re.escape(string.punctuation) + "]")
_ARTICLES = {"a", "an", "the"}


def _tokens(s: str) -> list[str]:
    s = _PUNCT.sub(" ", (s or "").lower())
    return [t for t in s.split() if t not in _ARTICLES]


def token_f1(pred: str, ref: str) -> float:
    p, r = _tokens(pred), _tokens(ref)
    if not p and not r:
        return 1.0
    if not p or not r:
        return 0.0
    common = sum((Counter(p) & Counter(r)).values())
    if common == 0:
        return 0.0
    prec, rec = common / len(p), common / len(r)
    return 2 * prec * rec / (prec + rec)
