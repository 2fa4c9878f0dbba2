"""Canonical call signatures and answer-text similarity used by verification and ranking.

The signature follows docs/traject-bench.md section 9.1: ``(canon_name, sorted canonical args)``,
computed by :mod:`hpd.bench.canon` (the replay executor's own canonicaliser), so "repeated call"
here and "exact" in the replay agree.

Token F1 is SQuAD-style (lowercase, punctuation -> space, drop a/an/the, bag of tokens), as
in docs/metrics.md; 0 when either side is empty, 1 when both are empty.
"""

from __future__ import annotations

import json
from typing import Any

from hpd.bench import canon as _bc
from hpd.eval.metrics import answer_tokens
from hpd.eval.metrics import token_f1 as metric_token_f1
from hpd.harness.messages import text_of, tool_calls_of

__all__ = ["canon_name", "canon_args", "signature", "tool_calls", "text_of", "token_f1"]


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
    """Canonical signature of one call: ``(canon_name, canon_args)`` (docs/traject-bench.md 9.1). Hashable."""
    return (canon_name(name), canon_args(args))


def tool_calls(msg: dict | None) -> list[dict]:
    """toolCall blocks of a Pi assistant message (``hpd.harness.messages.tool_calls_of``)."""
    return tool_calls_of(msg)


def token_f1(pred: str, ref: str) -> float:
    """``hpd.eval.metrics.token_f1``, except that two empty texts are a perfect match (ranking compares a
    candidate with a reference; the metric scores a prediction and gives an empty prediction 0)."""
    if not answer_tokens(pred) and not answer_tokens(ref):
        return 1.0
    return metric_token_f1(pred, ref)
