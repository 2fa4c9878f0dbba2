"""The one greedy token-budget batcher: consecutive items into batches that stay within a budget.

:func:`budget_batches` serves every place that cuts a list of sequences into forward passes: the hf backend's
generate micro-batches (:meth:`hpd.policy.backends.hf.HFPolicy.generate`: rows x (prompt + new tokens) x key/value
bytes within ``cache_gib``, at most ``batch_size`` rows) and the trainers' micro-batches
(:mod:`hpd.train.data`: packed rows and length-grouped padded rows; :mod:`hpd.train.prefix`: the tokens a
shared-prefix batch computes).

A batch's size is either the SUM of its items' sizes, less what each item shares with the item before it in the
same batch (``shared``: a prefix computed once), or with ``padded`` its number of rows times its largest item
(every row padded to the longest). Items keep their order; a batch is closed before the item that would take it
over ``budget`` (or past ``max_rows``), and an item over the budget on its own forms a batch alone.
"""

from __future__ import annotations

from collections.abc import Sequence


def budget_batches(sizes: Sequence[int], budget: int | None, *, padded: bool = False,
                   shared: Sequence[int] | None = None, max_rows: int | None = None) -> list[list[int]]:
    """Indices of ``sizes`` in greedy in-order batches of at most ``budget`` (None: no budget) and at most
    ``max_rows`` items (module doc: sum or ``padded`` size; ``shared[i]``: what item ``i`` shares with item
    ``i - 1`` when both are in one batch)."""
    batches: list[list[int]] = []
    cur: list[int] = []
    size = widest = 0
    for i, n in enumerate(sizes):
        if cur:
            grown = (len(cur) + 1) * max(widest, n) if padded else size + n - (shared[i] if shared is not None else 0)
            if (max_rows is not None and len(cur) >= max_rows) or (budget is not None and grown > budget):
                batches.append(cur)
                cur = []
        if not cur:
            grown, widest = n, 0
        cur.append(i)
        size, widest = grown, max(widest, n)
    if cur:
        batches.append(cur)
    return batches
