"""The exact view schedule: which view each optimizer update trains.

Definitions
-----------
* An **update** is one optimizer step on one global batch drawn from ONE view.
* A **cycle** for integer weights ``w = {T: a, I: b, R: c}`` (reduced by their gcd) is a sequence of
  ``sum(w)`` updates in which each view appears exactly ``w[v]`` times, in a deterministic,
  interleaved order given by smooth weighted round-robin (ties broken in T, I, R order):
  1:1:1 -> ``T I R``; 5:1:5 -> ``T R T R I T R T R T R``; 1:0:0 -> ``T``.
* A **phase** repeats its cycle for ``updates`` updates (a trailing partial cycle is allowed and
  reported by :meth:`Schedule.counts`). Phases run one after another; the cycle position restarts at
  each phase. Staged ablations are several phases (T->I = phase {T:1} then phase {I:1}); joint
  ablations are one phase with several views (T+I = {T:1, I:1}).

The paper's "1:1:1 cycle, 60k updates = 20k rounds" is one phase ``{T:1, I:1, R:1}`` with
``updates: 60000``: updates 0,3,6,... train T, 1,4,7,... I, 2,5,8,... R; 20,000 complete cycles.
The view of update ``u`` is a pure function of ``u`` (:meth:`Schedule.view_at`), so resuming at
update ``u`` resumes the cycle exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce
from math import gcd

from hpd.views.examples import VIEWS


def cycle(weights: dict[str, int]) -> list[str]:
    """The deterministic interleaved cycle for integer view weights (see module doc)."""
    w = {v: int(weights.get(v, 0)) for v in VIEWS}
    if any(x < 0 for x in w.values()) or sum(w.values()) == 0:
        raise ValueError(f"view weights must be non-negative integers with a positive sum, got {weights}")
    g = reduce(gcd, [x for x in w.values() if x > 0])
    w = {v: x // g for v, x in w.items()}
    total = sum(w.values())
    cur = {v: 0 for v in VIEWS}
    out = []
    for _ in range(total):
        for v in VIEWS:
            cur[v] += w[v]
        pick = max(VIEWS, key=lambda v: (cur[v], -VIEWS.index(v)))
        cur[pick] -= total
        out.append(pick)
    return out


@dataclass(frozen=True)
class Phase:
    weights: dict[str, int]
    updates: int

    @property
    def cycle(self) -> list[str]:
        return cycle(self.weights)


class Schedule:
    """A list of phases; ``view_at(u)`` gives the view of global update ``u`` (0-based)."""

    def __init__(self, phases: list[Phase]) -> None:
        if not phases:
            raise ValueError("a schedule needs at least one phase")
        self.phases = phases
        self._cycles = [p.cycle for p in phases]
        self._starts = []
        s = 0
        for p in phases:
            if p.updates <= 0:
                raise ValueError(f"phase updates must be positive, got {p.updates}")
            self._starts.append(s)
            s += p.updates
        self.total = s

    def locate(self, u: int) -> tuple[int, int]:
        """(phase index, position within that phase's cycle) of update ``u``."""
        if not 0 <= u < self.total:
            raise IndexError(f"update {u} outside schedule of {self.total}")
        for i in range(len(self.phases) - 1, -1, -1):
            if u >= self._starts[i]:
                k = u - self._starts[i]
                return i, k % len(self._cycles[i])
        raise AssertionError

    def view_at(self, u: int) -> str:
        i, pos = self.locate(u)
        return self._cycles[i][pos]

    def views(self) -> list[str]:
        """Views used anywhere in the schedule, in T, I, R order."""
        used = {v for c in self._cycles for v in c}
        return [v for v in VIEWS if v in used]

    def counts(self) -> dict[str, int]:
        """Exact number of updates per view over the whole schedule."""
        out = {v: 0 for v in self.views()}
        for p, c in zip(self.phases, self._cycles):
            full, rest = divmod(p.updates, len(c))
            for v in c:
                out[v] += full
            for v in c[:rest]:
                out[v] += 1
        return out

    def describe(self) -> list[dict]:
        return [{"weights": {v: p.weights.get(v, 0) for v in VIEWS}, "updates": p.updates, "cycle": "".join(c),
                 "full_cycles": p.updates // len(c), "partial_cycle": p.updates % len(c)}
                for p, c in zip(self.phases, self._cycles)]
