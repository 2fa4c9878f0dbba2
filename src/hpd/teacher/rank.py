"""Ranking verified candidates by similarity to the reference action.

Score of a candidate c against the reference r is the lexicographic triple
``(tool, args, text)`` (each in [0, 1]):

* ``tool``: multiset F1 of canonical tool names of c's calls vs r's calls (1 when both have no
  calls, i.e. two final turns; 0 when exactly one side has calls);
* ``args``: calls are paired greedily by name in source order, each pair scores the Jaccard
  overlap of canonical ``(key, value)`` items; the sum is divided by ``max(#c, #r)`` calls (1 when
  both have no calls);
* ``text``: SQuAD token F1 of the answer texts, for final turns only (reference has no calls);
  0 otherwise, so it never reorders tool-call candidates.

The best triple wins; ties break by candidate order ``(attempt, index)`` (deterministic). The
scalar ``score`` recorded as provenance is ``tool + args/10 + text/100`` (monotone in the
lexicographic order up to the rounding of ties; the triple is recorded as ``score_parts``).
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

from hpd.eval.metrics import multiset_f1

from .canon import canon_args, canon_name, signature, text_of, token_f1, tool_calls
from .types import Proposal


def _multiset_f1(a: list, b: list) -> float:
    """Multiset F1, with two empty sides a perfect match (two final turns)."""
    return 1.0 if not a and not b else multiset_f1(a, b)


def _jaccard(a: tuple, b: tuple) -> float:
    sa, sb = set(a), set(b)
    if not sa and not sb:
        return 1.0
    return len(sa & sb) / len(sa | sb)


def score_parts(candidate: dict, reference: dict) -> list[float]:
    cc, rc = tool_calls(candidate), tool_calls(reference)
    tool = _multiset_f1([canon_name(c.get("name", "")) for c in cc], [canon_name(c.get("name", "")) for c in rc])
    if not cc and not rc:
        args = 1.0
    elif not cc or not rc:
        args = 0.0
    else:
        unused = list(range(len(rc)))
        total = 0.0
        for c in cc:
            cn, ca = canon_name(c.get("name", "")), canon_args(c.get("arguments", {}))
            best, best_j = None, -1.0
            for j in unused:
                r = rc[j]
                if canon_name(r.get("name", "")) != cn:
                    continue
                s = _jaccard(ca, canon_args(r.get("arguments", {})))
                if s > best_j:
                    best, best_j = j, s
            if best is not None:
                unused.remove(best)
                total += best_j
        args = total / max(len(cc), len(rc))
    text = token_f1(text_of(candidate), text_of(reference)) if not rc and not cc else 0.0
    return [round(tool, 6), round(args, 6), round(text, 6)]


def scalar(parts: Sequence[float]) -> float:
    return round(parts[0] + parts[1] / 10 + parts[2] / 100, 6)


def rank(candidates: Sequence[Proposal], reference: dict) -> list[tuple[Proposal, list[float]]]:
    """Verified candidates sorted best first: by score triple desc, then (attempt, index) asc."""
    scored = [(p, score_parts(p.message, reference)) for p in candidates]
    scored.sort(key=lambda ps: (tuple(-x for x in ps[1]), ps[0].attempt, ps[0].index))
    return scored


def differences(candidate: dict, reference: dict) -> list[str]:
    """How a target differs from the reference: ``tool`` (tool-name multisets differ, incl.
    call vs final), ``args`` (same names, different canonical signatures), ``answer_text``
    (both final, normalised texts differ). Empty list = same action."""
    cc, rc = tool_calls(candidate), tool_calls(reference)
    if Counter(canon_name(c.get("name", "")) for c in cc) != Counter(canon_name(r.get("name", "")) for r in rc):
        return ["tool"]
    if cc or rc:
        cs = Counter(signature(c.get("name", ""), c.get("arguments", {})) for c in cc)
        rs = Counter(signature(r.get("name", ""), r.get("arguments", {})) for r in rc)
        return [] if cs == rs else ["args"]
    return [] if " ".join(text_of(candidate).split()) == " ".join(text_of(reference).split()) else ["answer_text"]
