"""Table-3-style diagnostics of a teach run, computed from the per-boundary records only (so a
resumed run reports exactly what an uninterrupted one does).

Keys of ``diagnostics.json`` (fractions in [0, 1]):

* ``n_boundaries``; ``n_targets``; ``n_teacher`` (targets from a verified teacher candidate);
  ``n_fallback`` (reference fallback); ``n_dropped``;
* ``candidates_per_attempt``: configured K; ``mean_candidates_per_attempt``: observed;
  ``n_candidates``; ``candidate_acceptance``: verified / all candidates;
* ``first_attempt_acceptance``: share of boundaries with >= 1 verified candidate at attempt 1;
* ``coverage_by_attempt``: list, entry a-1 = share of boundaries with a verified candidate by
  attempt a (cumulative), a = 1..N; ``attempts_to_full_coverage``: smallest a with coverage 1.0,
  else null; ``mean_attempts``: attempts used per boundary;
* ``rejection_reasons``: histogram of the first reason of each rejected candidate;
  ``rejection_reasons_all``: every reason counted;
* ``realizability``: over teacher targets, ``differs_from_reference`` (share whose action differs
  from the reference) and ``by`` (share per way: ``tool``, ``args``, ``answer_text``; ``same``);
* ``by_kind``: per boundary kind (``call`` / ``final`` by reference action): n, first-attempt
  acceptance, final coverage.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Sequence


def _frac(a: int, b: int) -> float:
    return round(a / b, 6) if b else 0.0


def diagnostics(records: Sequence[dict], cfg: Any) -> dict:
    n = len(records)
    N = int(getattr(cfg, "attempts", 5))
    acc = [r.get("accepted_attempt") for r in records]
    cov = [_frac(sum(1 for a in acc if a is not None and a <= k), n) for k in range(1, N + 1)]
    full = next((k for k, c in enumerate(cov, 1) if n and c >= 1.0), None)
    cands = [c for r in records for c in r.get("candidates", [])]
    n_att = sum(r.get("attempts_used", 0) for r in records)
    first: Counter = Counter()
    allr: Counter = Counter()
    for c in cands:
        rs = c["verdict"]["reasons"]
        if rs:
            first[rs[0]] += 1
            allr.update(rs)
    targets = [r["target"] for r in records if r.get("target")]
    teacher_t = [t for t in targets if t["source"] == "teacher"]
    ways: Counter = Counter()
    for t in teacher_t:
        if t["differs"]:
            ways.update(t["differs"])
        else:
            ways["same"] += 1
    by_kind = {}
    for kind in ("call", "final"):
        rs = [r for r in records if (r.get("is_final") and kind == "final") or (not r.get("is_final") and kind == "call")]
        if rs:
            by_kind[kind] = {
                "n": len(rs),
                "first_attempt_acceptance": _frac(sum(1 for r in rs if r.get("accepted_attempt") == 1), len(rs)),
                "coverage": _frac(sum(1 for r in rs if r.get("accepted_attempt") is not None), len(rs)),
            }
    return {
        "n_boundaries": n,
        "n_targets": len(targets),
        "n_teacher": len(teacher_t),
        "n_fallback": sum(1 for t in targets if t["source"] == "reference_fallback"),
        "n_dropped": sum(1 for r in records if r.get("target") is None),
        "candidates_per_attempt": int(getattr(cfg, "k", 0)),
        "mean_candidates_per_attempt": round(len(cands) / n_att, 4) if n_att else 0.0,
        "n_candidates": len(cands),
        "candidate_acceptance": _frac(sum(1 for c in cands if c["verdict"]["ok"]), len(cands)),
        "first_attempt_acceptance": cov[0] if cov else 0.0,
        "coverage_by_attempt": cov,
        "attempts_to_full_coverage": full,
        "mean_attempts": round(n_att / n, 4) if n else 0.0,
        "max_attempts": N,
        "rejection_reasons": dict(sorted(first.items(), key=lambda kv: (-kv[1], kv[0]))),
        "rejection_reasons_all": dict(sorted(allr.items(), key=lambda kv: (-kv[1], kv[0]))),
        "realizability": {
            "n": len(teacher_t),
            "differs_from_reference": _frac(sum(1 for t in teacher_t if t["differs"]), len(teacher_t)),
            "by": {w: _frac(ways.get(w, 0), len(teacher_t)) for w in ("tool", "args", "answer_text", "same")},
        },
        "by_kind": by_kind,
        "teacher": records[0].get("teacher") if records else None,
        "privilege": getattr(cfg, "privilege", None),
        "seed": getattr(cfg, "seed", None),
        "stop_at_first": getattr(cfg, "stop_at_first", None),
        "fallback": getattr(cfg, "fallback", None),
    }


def render_table(d: dict, console: Any = None) -> None:
    """Print the diagnostics as rich tables (Table-3 layout: per-attempt coverage, then reasons)."""
    from rich.console import Console
    from rich.table import Table

    con = console or Console()
    t = Table(title=f"Teacher proposals (teacher={d.get('teacher')}, privilege={d.get('privilege')}, K={d['candidates_per_attempt']})")
    t.add_column("metric")
    t.add_column("value", justify="right")
    t.add_row("boundaries", str(d["n_boundaries"]))
    t.add_row("candidates per attempt (K / observed)", f"{d['candidates_per_attempt']} / {d['mean_candidates_per_attempt']}")
    t.add_row("first-attempt acceptance", f"{100 * d['first_attempt_acceptance']:.2f}%")
    t.add_row("attempts to full coverage", str(d["attempts_to_full_coverage"] or f"not reached in {d['max_attempts']}"))
    t.add_row("mean attempts", f"{d['mean_attempts']:.2f}")
    t.add_row("candidate acceptance", f"{100 * d['candidate_acceptance']:.2f}%")
    t.add_row("targets: teacher / fallback / dropped", f"{d['n_teacher']} / {d['n_fallback']} / {d['n_dropped']}")
    rz = d["realizability"]
    t.add_row("targets differing from reference", f"{100 * rz['differs_from_reference']:.2f}%")
    t.add_row("  by tool / args / answer text", " / ".join(f"{100 * rz['by'][w]:.1f}%" for w in ("tool", "args", "answer_text")))
    con.print(t)
    c = Table(title="Cumulative coverage by attempt")
    c.add_column("attempt", justify="right")
    c.add_column("coverage", justify="right")
    for a, v in enumerate(d["coverage_by_attempt"], 1):
        c.add_row(str(a), f"{100 * v:.2f}%")
    con.print(c)
    if d["rejection_reasons"]:
        h = Table(title="Rejection reasons (first reason per rejected candidate)")
        h.add_column("reason")
        h.add_column("count", justify="right")
        h.add_column("all reasons", justify="right")
        for k, v in d["rejection_reasons"].items():
            h.add_row(k, str(v), str(d["rejection_reasons_all"].get(k, 0)))
        for k, v in d["rejection_reasons_all"].items():
            if k not in d["rejection_reasons"]:
                h.add_row(k, "0", str(v))
        con.print(h)


def plot_coverage(d: dict, path: str | Path) -> Path:
    """PNG of cumulative coverage by attempt (and first-attempt acceptance)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cov = d["coverage_by_attempt"]
    xs = list(range(1, len(cov) + 1))
    fig, ax = plt.subplots(figsize=(4.5, 3.2), dpi=120)
    ax.plot(xs, [100 * c for c in cov], marker="o")
    for x, c in zip(xs, cov):
        ax.annotate(f"{100 * c:.1f}", (x, 100 * c), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
    ax.set_xlabel("attempt")
    ax.set_ylabel("cumulative coverage (%)")
    ax.set_ylim(0, 105)
    ax.set_xticks(xs)
    ax.set_title(f"Teacher coverage (K={d['candidates_per_attempt']}, n={d['n_boundaries']})", fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path
