"""Preference pairs for the DPO baseline, built from a finished teach run (:mod:`hpd.teacher.read`).

One boundary of the teach run gives ``(context, chosen, rejected)`` pairs:

* **chosen**: the top-ranked verified candidate, i.e. the teach stage's own target when its source is
  ``teacher`` (:mod:`hpd.teacher.rank`); when no candidate was verified, the reference action, but only if it
  verifies on a fork of the boundary harness (:func:`hpd.teacher.verify.verify`, the teacher's own check).
  That check needs the boundary (``items``, e.g. :func:`hpd.teacher.boundaries.load_items` of the replay
  folder); without it such a boundary stays unpaired as ``reference_unchecked``, never paired on trust.
* **rejected**: every candidate the harness rejected, with its verdict (``reasons[0]`` is the reason code
  counted), in (attempt, index) order; identical actions once (tool-call ids ignored); candidates whose reason
  is in ``exclude_reasons`` (default ``teacher_error``: a failed teacher call, not an action) left out.

Boundaries without a pair are counted by why: ``no_verified_chosen`` (nothing verified and the reference does
not verify, or reference chosen is off), ``reference_unchecked`` (nothing verified and no boundary to check
the reference on), ``no_rejected`` (every candidate verified).

:func:`encode_pairs` tokenizes pairs with THE renderer (:class:`hpd.views.Renderer` over
:mod:`hpd.policy.chat`, the T view: native context -> action), prompt and completion each on its own, and
applies the training length policy once per pair, for its longer completion, so chosen and rejected always
share the same prompt ids.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

UNPAIRED = ("no_verified_chosen", "reference_unchecked", "no_rejected")
SOURCE_TEACHER, SOURCE_REFERENCE = "teacher", "reference"
DEFAULT_EXCLUDED = ("teacher_error",)


@dataclass(frozen=True)
class Pair:
    uid: str                       # "<boundary id>#a<attempt>c<index>" of the rejected candidate
    boundary_id: str
    task_uid: str
    context: dict                  # native context {"systemPrompt", "tools", "messages"}
    chosen: dict                   # assistant message
    chosen_source: str             # "teacher" | "reference"
    rejected: dict                 # assistant message
    reasons: tuple[str, ...]       # the rejected candidate's verdict reasons, in check order

    @property
    def reason(self) -> str:
        return self.reasons[0]


@dataclass
class PairSet:
    pairs: list[Pair]
    n_boundaries: int
    unpaired: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in UNPAIRED})
    excluded: Counter = field(default_factory=Counter)        # candidates left out, by why

    def summary(self) -> dict:
        """Counts for ``pairs.json`` / ``metrics.json``: pairs, reason codes, unpaired boundaries and why."""
        by_boundary = {p.boundary_id: p.chosen_source for p in self.pairs}
        return {
            "n_boundaries": self.n_boundaries,
            "n_pairs": len(self.pairs),
            "n_boundaries_paired": len(by_boundary),
            "chosen_source": {s: sum(1 for v in by_boundary.values() if v == s)
                              for s in (SOURCE_TEACHER, SOURCE_REFERENCE)},
            "rejection_reasons": _sorted(Counter(p.reason for p in self.pairs)),
            "rejection_reasons_all": _sorted(Counter(r for p in self.pairs for r in p.reasons)),
            "unpaired": {k: len(v) for k, v in self.unpaired.items()},
            "unpaired_boundaries": {k: v[:100] for k, v in self.unpaired.items() if v},
            "excluded_candidates": _sorted(self.excluded),
        }


def _sorted(c: Counter) -> dict:
    return dict(sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))


def message_key(msg: dict) -> str:
    """What makes two actions the same for pairing: their content blocks without tool-call ids."""
    blocks = [{k: v for k, v in b.items() if k != "id"} if isinstance(b, dict) else b for b in msg.get("content") or []]
    return json.dumps(blocks, sort_keys=True, ensure_ascii=False)


def reference_verifies(rec: dict, item: Any) -> bool:
    """The reference action of ``rec`` passes the teacher's verification on a fork of ``item``'s harness."""
    from hpd.teacher.verify import verify

    return verify(rec["reference"], item, item.restore()).ok


def choose(rec: dict, items: Mapping[str, Any] | None, reference_chosen: bool = True,
           check: Callable[[dict, Any], bool] = reference_verifies) -> tuple[dict | None, str]:
    """``(chosen message, source)``, or ``(None, why unpaired)`` (see the module docstring)."""
    if any(c["verdict"]["ok"] for c in rec["candidates"]):
        t = rec["target"]
        if not t or t.get("source") != SOURCE_TEACHER:
            raise ValueError(f"teach record {rec['boundary_id']}: verified candidates but target source "
                             f"{(t or {}).get('source')!r}, not 'teacher'")
        return t["message"], SOURCE_TEACHER
    if not reference_chosen:
        return None, "no_verified_chosen"
    item = (items or {}).get(rec["boundary_id"])
    if item is None:
        return None, "reference_unchecked"
    return (rec["reference"], SOURCE_REFERENCE) if check(rec, item) else (None, "no_verified_chosen")


def _rejected(rec: dict, chosen: dict, exclude: Sequence[str], limit: int | None, excluded: Counter) -> list[dict]:
    """The boundary's rejected candidates to pair, in (attempt, index) order (see the module docstring)."""
    seen, out = {message_key(chosen)}, []
    for c in sorted(rec["candidates"], key=lambda c: (c["attempt"], c["index"])):
        reasons = c["verdict"]["reasons"]
        if c["verdict"]["ok"]:
            continue
        if reasons[0] in exclude:
            excluded[reasons[0]] += 1
        elif message_key(c["message"]) in seen:
            excluded["duplicate_action"] += 1
        elif limit is not None and len(out) >= limit:
            excluded["over_max_rejected"] += 1
        else:
            seen.add(message_key(c["message"]))
            out.append(c)
    return out


def build_pairs(records: Sequence[dict], training: Mapping[str, dict], items: Mapping[str, Any] | None = None, *,
                reference_chosen: bool = True, exclude_reasons: Sequence[str] = DEFAULT_EXCLUDED,
                max_rejected: int | None = None, check: Callable[[dict, Any], bool] = reference_verifies) -> PairSet:
    """Pairs of every teacher record (boundary order). ``training``: the run's training records by boundary id
    (their ``context``); ``items``: boundary id -> :class:`hpd.teacher.item.TeachItem`, to verify references
    (and give the context of a boundary the teach run dropped)."""
    out = PairSet(pairs=[], n_boundaries=len(records))
    for rec in records:
        bid = rec["boundary_id"]
        chosen, source = choose(rec, items, reference_chosen, check)
        if chosen is None:
            out.unpaired[source].append(bid)
            continue
        rejected = _rejected(rec, chosen, exclude_reasons, max_rejected, out.excluded)
        if not rejected:
            out.unpaired["no_rejected"].append(bid)
            continue
        ctx = (training.get(bid) or {}).get("context") or getattr((items or {}).get(bid), "context", None)
        if ctx is None:
            raise ValueError(f"boundary {bid}: no context (no training record and no boundary item)")
        out.pairs += [Pair(uid=f"{bid}#a{c['attempt']}c{c['index']}", boundary_id=bid, task_uid=rec["task_uid"],
                           context=ctx, chosen=chosen, chosen_source=source, rejected=c["message"],
                           reasons=tuple(c["verdict"]["reasons"])) for c in rejected]
    return out


# ----------------------------------------------------------------------------------------------- tokens
@dataclass(frozen=True)
class PairExample:
    """A tokenized pair: two T-view examples with the same prompt ids. ``index`` is its row in the run's pair
    table (reference log-probs are looked up by it)."""

    index: int
    pair: Pair
    chosen: Any                    # hpd.views.ViewExample
    rejected: Any

    @property
    def uid(self) -> str:
        return self.pair.uid

    @property
    def n_tokens(self) -> int:
        return self.chosen.n_tokens + self.rejected.n_tokens


def _fit_prompt(renderer, ctx: dict, longest: int, max_length: int, policy: str) -> tuple[list[int], int] | None:
    """Prompt ids of ``ctx`` with the fewest oldest tool outputs omitted so that ``prompt + longest`` tokens fit
    ``max_length`` (:mod:`hpd.views.length_policy`: omitting one more never lengthens the prompt, so binary search)."""
    from hpd.views.length_policy import omit_tool_outputs, omittable_indices

    if longest >= max_length:
        return None

    def ids(k: int) -> list[int]:
        return renderer.encode(renderer.prompt(omit_tool_outputs(ctx, k) if k else ctx), "")[0]

    p0 = ids(0)
    if len(p0) + longest <= max_length:
        return p0, 0
    max_k = len(omittable_indices(ctx)) if policy == "drop_oldest_tool_outputs" else 0
    if max_k == 0 or len(ids(max_k)) + longest > max_length:
        return None
    lo, hi = 0, max_k
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if len(ids(mid)) + longest <= max_length else (mid, hi)
    return ids(hi), hi


def encode_pairs(pairs: Sequence[Pair], renderer, *, max_length: int, length_policy: str,
                 report=None) -> tuple[list[PairExample], Any]:
    """Tokenized pairs (input order; over-long ones skipped) and the :class:`hpd.views.LengthReport` (view T,
    one row per pair)."""
    from hpd.views import LengthReport, ViewExample

    report = report or LengthReport(max_length=max_length, policy=length_policy)
    st = report.stats("T")
    out: list[PairExample] = []
    for p in pairs:
        st.rows += 1
        c_ids = renderer.encode("", renderer.action(p.chosen))[1]
        r_ids = renderer.encode("", renderer.action(p.rejected))[1]
        fit = _fit_prompt(renderer, p.context, max(len(c_ids), len(r_ids)), max_length, length_policy)
        if fit is None:
            st.skipped_too_long += 1
            report.skipped_uids.setdefault("T", []).append(p.uid)
            continue
        prompt, k = fit
        ch = ViewExample("T", tuple(prompt), tuple(c_ids), uid=p.uid, trimmed=k)
        rj = ViewExample("T", tuple(prompt), tuple(r_ids), uid=p.uid, trimmed=k)
        st.kept += 1
        st.trimmed += int(k > 0)
        st.tool_outputs_omitted += k
        st.max_tokens = max(st.max_tokens, ch.n_tokens, rj.n_tokens)
        out.append(PairExample(len(out), p, ch, rj))
    return out, report
