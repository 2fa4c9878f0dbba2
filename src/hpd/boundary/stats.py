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
from typing import Iterable

from .record import Boundary


def shard_summary(tasks, boundaries_by_task: list[list[Boundary]]) -> dict:
    hist: Counter = Counter()
    by_kind: dict[str, Counter] = {}
    bkinds: Counter = Counter()
    issues: Counter = Counter()
    tokens: dict[str, list[int]] = {}
    methods: set[str] = set()
    n_b = nonc = unscor = 0
    for task, bs in zip(tasks, boundaries_by_task):
        hist[len(bs)] += 1
        by_kind.setdefault(task.kind, Counter())[len(bs)] += 1
        for b in bs:
            n_b += 1
            bkinds[b.kind] += 1
            meta = b.reference_meta
            if not meta.get("compliant", True):
                nonc += 1
                issues.update(meta.get("issues", []))
            if not meta.get("scorable", True):
                unscor += 1
            for p, d in b.documents.items():
                tokens.setdefault(p, []).append(d["n_tokens"])
                methods.add(d["token_method"])
    return {
        "tasks": [t.uid for t in tasks],
        "n_tasks": len(tasks),
        "n_boundaries": n_b,
        "n_boundaries_d2": sum(t.n_boundaries for t in tasks),
        "hist": {str(k): v for k, v in sorted(hist.items())},
        "hist_by_task_kind": {k: {str(n): c for n, c in sorted(v.items())} for k, v in sorted(by_kind.items())},
        "boundary_kinds": dict(sorted(bkinds.items())),
        "noncompliant": nonc,
        "issues": dict(sorted(issues.items())),
        "unscorable": unscor,
        "doc_tokens": tokens,
        "token_methods": sorted(methods),
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
    hist: Counter = Counter()
    by_kind: dict[str, Counter] = {}
    bkinds: Counter = Counter()
    issues: Counter = Counter()
    tokens: dict[str, list[int]] = {}
    methods: set[str] = set()
    n_t = n_b = d2 = nonc = unscor = 0
    for m in metas:
        n_t += m["n_tasks"]
        n_b += m["n_boundaries"]
        d2 += m["n_boundaries_d2"]
        nonc += m["noncompliant"]
        unscor += m["unscorable"]
        hist.update({int(k): v for k, v in m["hist"].items()})
        for k, v in m["hist_by_task_kind"].items():
            by_kind.setdefault(k, Counter()).update({int(n): c for n, c in v.items()})
        bkinds.update(m["boundary_kinds"])
        issues.update(m["issues"])
        for p, xs in m["doc_tokens"].items():
            tokens.setdefault(p, []).extend(xs)
        methods.update(m["token_methods"])
    return {
        "n_tasks": n_t,
        "n_boundaries": n_b,
        "n_boundaries_d2": d2,
        "matches_d2": n_b == d2,
        "boundaries_per_task": {**_hist_stats(hist),
                                "by_task_kind": {k: _hist_stats(v) for k, v in sorted(by_kind.items())}},
        "boundary_kinds": dict(sorted(bkinds.items())),
        "doc_tokens": {p: _dist(xs) for p, xs in tokens.items()},
        "token_method": ",".join(sorted(methods)) or None,
        "noncompliant_reference": {"n": nonc, "share": round(nonc / n_b, 6) if n_b else 0.0,
                                   "issues": dict(sorted(issues.items()))},
        "unscorable_reference": {"n": unscor, "share": round(unscor / n_b, 6) if n_b else 0.0},
    }
