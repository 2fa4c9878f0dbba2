"""Build T, I and R examples from boundary records with the one renderer.

* **T**  prompt = ``render_prompt(ctx)``;                         completion = ``render_action(target)``
* **I**  prompt = ``render_prompt(ctx, document=doc)``;           completion = ``render_action(target)``
* **R**  prompt = ``render_prompt(ctx + [user: instruction])``;   completion = ``render_text_completion(doc)``

Tokens come from ``encode_example(prompt, completion)``; loss falls only on the completion ids.
Over-long rows follow the explicit length policy of :mod:`hpd.views.length_policy` and are counted.
"""

from __future__ import annotations

from typing import Iterable

from .examples import VIEWS, ViewExample
from .length_policy import POLICIES, LengthReport, omit_tool_outputs, omittable_indices
from .render import Renderer

TARGET_SOURCES = ("teacher", "reference")


def _target_of(rec: dict, source: str) -> dict | None:
    return rec.get("target") if source == "teacher" else rec.get("reference")


def _fit(renderer: Renderer, view: str, ctx: dict, doc: str | None, completion: str, max_length: int,
         policy: str) -> tuple[list[int], list[int], int] | None:
    """Render+encode with the fewest oldest tool outputs omitted that fits ``max_length``.

    Returns (prompt_ids, completion_ids, n_omitted) or None. Only outputs longer than the marker are
    omitted (:func:`hpd.views.length_policy.omittable_indices`), so omitting one more never makes the row
    longer and the smallest fitting ``k`` is found by binary search: ~log2(n) renders instead of up to
    n + 1 (on long sequential contexts the linear scan was the slowest part of building views). A test
    checks the result against the linear scan."""
    max_k = len(omittable_indices(ctx)) if policy == "drop_oldest_tool_outputs" else 0
    cache: dict[int, tuple[list[int], list[int]]] = {}

    def encoded(k: int) -> tuple[list[int], list[int]]:
        if k not in cache:
            c_k = omit_tool_outputs(ctx, k) if k else ctx
            if view == "R":
                prompt = renderer.prompt(renderer.r_context(c_k))
            elif view == "I":
                prompt = renderer.prompt(c_k, document=doc)
            else:
                prompt = renderer.prompt(c_k)
            cache[k] = renderer.encode(prompt, completion)
        return cache[k]

    def fits(k: int) -> bool:
        p, c = encoded(k)
        return len(p) + len(c) <= max_length

    if len(encoded(0)[1]) >= max_length:   # the completion alone does not fit: no context trimming can help
        return None
    if fits(0):
        return (*encoded(0), 0)
    if max_k == 0 or not fits(max_k):
        return None
    lo, hi = 0, max_k             # invariant: lo does not fit, hi fits
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid
    return (*encoded(hi), hi)


def build_view(records: Iterable[dict], renderer: Renderer, view: str, *, max_length: int,
               length_policy: str = "drop_oldest_tool_outputs", target: str = "teacher",
               report: LengthReport | None = None, progress: bool = False) -> tuple[list[ViewExample], LengthReport]:
    """Examples of one view (record order kept) and the length report (updated in place if given).
    ``progress`` shows a tqdm bar over the records."""
    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r} (expected one of {VIEWS})")
    if length_policy not in POLICIES:
        raise ValueError(f"unknown length policy {length_policy!r} (expected one of {POLICIES})")
    if target not in TARGET_SOURCES:
        raise ValueError(f"unknown target source {target!r} (expected one of {TARGET_SOURCES})")
    report = report or LengthReport(max_length=max_length, policy=length_policy)
    st = report.stats(view)
    out: list[ViewExample] = []
    records = list(records)
    if progress:
        from tqdm.auto import tqdm

        records = tqdm(records, desc=f"building {view} view", unit="rec", dynamic_ncols=True, leave=False)
    for i, rec in enumerate(records):
        st.rows += 1
        uid = str(rec.get("uid", i))
        ctx = rec["context"]
        doc = rec.get("document")
        if view == "R":
            completion_src = doc
        else:
            completion_src = _target_of(rec, target)
        if completion_src is None or (view == "I" and doc is None):
            st.skipped_missing += 1
            report.skipped_uids.setdefault(view, []).append(uid)
            continue
        completion = renderer.text_completion(doc) if view == "R" else renderer.action(completion_src)
        fitted = _fit(renderer, view, ctx, doc, completion, max_length, length_policy)
        if fitted is None:
            st.skipped_too_long += 1
            report.skipped_uids.setdefault(view, []).append(uid)
            continue
        p, c, k = fitted
        ex = ViewExample(view=view, prompt_ids=tuple(p), completion_ids=tuple(c), uid=uid, trimmed=k)
        st.kept += 1
        st.trimmed += int(k > 0)
        st.tool_outputs_omitted += k
        st.max_tokens = max(st.max_tokens, ex.n_tokens)
        out.append(ex)
    return out, report


def build_views(records: list[dict], renderer: Renderer, views: Iterable[str] = VIEWS, *, max_length: int,
                length_policy: str = "drop_oldest_tool_outputs", target: str = "teacher",
                progress: bool = False) -> tuple[dict[str, list[ViewExample]], LengthReport]:
    """All requested views of ``records``: ``({view: [ViewExample]}, LengthReport)``."""
    report = LengthReport(max_length=max_length, policy=length_policy)
    out = {}
    for v in views:
        out[v], _ = build_view(records, renderer, v, max_length=max_length, length_policy=length_policy,
                               target=target, report=report, progress=progress)
    return out, report
