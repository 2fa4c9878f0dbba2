"""Replay diagnostics: per-shard summaries and their aggregate (``<out>/replay_stats.json``).

Definitions:

- ``boundaries_per_task``: histogram ``{n: tasks}`` plus mean/min/max, overall and per task kind;
- ``doc_tokens[privilege]``: distribution (mean, p50, p90, p99, max) of the rendered document length,
  with ``token_method`` (``tokenizer`` = exact, ``estimate`` = :func:`hpd.document.tokens.estimate_tokens`);
- ``noncompliant_reference``: share of boundaries whose *reference* action is itself not compliant
  with the runtime contract, and why (``off_catalog`` tool missing from the catalog, ``recorded_failure``,
  ``validation`` / ``schema_error`` / ``no_recorded_response`` as the harness/environment answered it,
  ``empty_answer``); ``unscorable_reference``: boundaries whose reference calls include an unscorable
  step (dropped from Action-Acc, docs/metrics.md).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable

from .record import Boundary


@dataclass
class _Tally:
    """The counters a shard summary holds and the aggregate sums (one definition for both)."""
    hist: Counter = field(default_factory=Counter)
    by_kind: dict[str, Counter] = field(default_factory=dict)
    bkinds: Counter = field(default_factory=Counter)
    issues: Counter = field(default_factory=Counter)
    tokens: dict[str, list[int]] = field(default_factory=dict)
    methods: set[str] = field(default_factory=set)
    n_b: int = 0
    nonc: int = 0
    unscor: int = 0

    def add_boundary(self, b: Boundary) -> None:
        self.n_b += 1
        self.bkinds[b.kind] += 1
        meta = b.reference_meta
        if not meta.get("compliant", True):
            self.nonc += 1
            self.issues.update(meta.get("issues", []))
        if not meta.get("scorable", True):
            self.unscor += 1
        for p, d in b.documents.items():
            self.tokens.setdefault(p, []).append(d["n_tokens"])
            self.methods.add(d["token_method"])


def shard_summary(tasks, boundaries_by_task: list[list[Boundary]]) -> dict:
    t = _Tally()
    for task, bs in zip(tasks, boundaries_by_task):
        t.hist[len(bs)] += 1
        t.by_kind.setdefault(task.kind, Counter())[len(bs)] += 1
        for b in bs:
            t.add_boundary(b)
    return {
        "tasks": [x.uid for x in tasks],
        "n_tasks": len(tasks),
        "n_boundaries": t.n_b,
        "n_boundaries_d2": sum(x.n_boundaries for x in tasks),
        "hist": {str(k): v for k, v in sorted(t.hist.items())},
        "hist_by_task_kind": {k: {str(n): c for n, c in sorted(v.items())} for k, v in sorted(t.by_kind.items())},
        "boundary_kinds": dict(sorted(t.bkinds.items())),
        "noncompliant": t.nonc,
        "issues": dict(sorted(t.issues.items())),
        "unscorable": t.unscor,
        "doc_tokens": t.tokens,
        "token_methods": sorted(t.methods),
    }


def _dist(xs: list[int]) -> dict:
    if not xs:
        return {"n": 0}
    s = sorted(xs)

    def q(p: float) -> int:
        return s[min(len(s) - 1, int(p * (len(s) - 1) + 0.5))]

    return {"n": len(s), "mean": round(sum(s) / len(s), 2), "min": s[0], "p50": q(0.5), "p90": q(0.9),
            "p99": q(0.99), "max": s[-1]}


def _hist_stats(h: Counter) -> dict:
    n = sum(h.values())
    tot = sum(k * v for k, v in h.items())
    return {"tasks": n, "mean": round(tot / n, 3) if n else 0.0, "min": min(h) if h else 0, "max": max(h) if h else 0,
            "hist": {str(k): h[k] for k in sorted(h)}}


def aggregate(metas: Iterable[dict]) -> dict:
    """The run's diagnostics from its shard summaries (stable keys; see module docstring)."""
    t = _Tally()
    n_t = d2 = 0
    for m in metas:
        n_t += m["n_tasks"]
        t.n_b += m["n_boundaries"]
        d2 += m["n_boundaries_d2"]
        t.nonc += m["noncompliant"]
        t.unscor += m["unscorable"]
        t.hist.update({int(k): v for k, v in m["hist"].items()})
        for k, v in m["hist_by_task_kind"].items():
            t.by_kind.setdefault(k, Counter()).update({int(n): c for n, c in v.items()})
        t.bkinds.update(m["boundary_kinds"])
        t.issues.update(m["issues"])
        for p, xs in m["doc_tokens"].items():
            t.tokens.setdefault(p, []).extend(xs)
        t.methods.update(m["token_methods"])
    return {
        "n_tasks": n_t,
        "n_boundaries": t.n_b,
        "n_boundaries_d2": d2,
        "matches_d2": t.n_b == d2,
        "boundaries_per_task": {**_hist_stats(t.hist),
                                "by_task_kind": {k: _hist_stats(v) for k, v in sorted(t.by_kind.items())}},
        "boundary_kinds": dict(sorted(t.bkinds.items())),
        "doc_tokens": {p: _dist(xs) for p, xs in t.tokens.items()},
        "token_method": ",".join(sorted(t.methods)) or None,
        "noncompliant_reference": {"n": t.nonc, "share": round(t.nonc / t.n_b, 6) if t.n_b else 0.0,
                                   "issues": dict(sorted(t.issues.items()))},
        "unscorable_reference": {"n": t.unscor, "share": round(t.unscor / t.n_b, 6) if t.n_b else 0.0},
    }
