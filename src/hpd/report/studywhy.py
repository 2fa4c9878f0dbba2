"""Why a study's variants differ, from the registry alone: how each variant's episodes end, and what its teacher did.

Issue 35 asks the report to show, when HPD does not beat SFT, why: the teacher's acceptance, which defective
references it replaced and which fell back, and where the transcripts differ. The registry keeps no transcripts
(only slim per-task rows), so "where they differ" is told by how the episodes end:

* **behaviour** (:func:`behaviour_rows`), per (arm, defect rate, variant), pooled over its seeds, from each cell's
  ``tasks.jsonl``: episodes; the share that ends at the turn limit (:data:`TURN_LIMIT`: Pi's ``max_turns``,
  smolagents' ``max_steps``), i.e. the episode used its whole budget; the share that finished with an answer;
  turns and tool calls per episode; and call precision, Σ matched reference steps / Σ tool calls (how many of
  the calls made were the reference's);
* **teacher** (:func:`teacher_rows`), one row per cell that carries ``teacher.json``
  (:data:`hpd.report.registry.TEACHER_FILE`): the teacher chosen, first-attempt and candidate acceptance, mean
  attempts, the targets it gave (verified teacher actions, reference fallbacks) and the defective train references
  it replaced or fell back on. Cells registered before cells carried the file get it with ``hpd study
  attach-teacher``.
"""

from __future__ import annotations

from .registry import read_tasks, variant_groups

#: the end reasons of an episode that used its whole turn budget: Pi's loop (hpd.harness.loop) and smolagents'
#: (hpd.harnesses.smolagents.END_REASONS, which then makes its forced final-answer call)
TURN_LIMIT = ("max_turns", "max_steps")
#: behaviour keys of each row (stable)
BEHAVIOUR_KEYS = ("episodes", "at_turn_limit", "finished", "turns_per_episode", "calls_per_episode",
                  "call_precision")
#: teacher keys of each row (stable)
TEACHER_ROW_KEYS = ("teacher", "first_attempt_acceptance", "candidate_acceptance", "mean_attempts", "n_boundaries",
                    "n_teacher", "n_fallback", "n_defective", "defects_replaced", "defects_fell_back")


def behaviour(rows: list[dict]) -> dict:
    """:data:`BEHAVIOUR_KEYS` of a list of slim per-task rows (shares are fractions; None without rows)."""
    n = len(rows)
    if not n:
        return {k: (0 if k == "episodes" else None) for k in BEHAVIOUR_KEYS}
    calls = sum(int(r.get("n_calls") or 0) for r in rows)
    return {"episodes": n,
            "at_turn_limit": sum(r.get("end_reason") in TURN_LIMIT for r in rows) / n,
            "finished": sum(bool(r.get("finished")) for r in rows) / n,
            "turns_per_episode": sum(int(r.get("turns") or 0) for r in rows) / n,
            "calls_per_episode": calls / n,
            "call_precision": sum(int(r.get("matched") or 0) for r in rows) / calls if calls else None}


def behaviour_rows(cells: dict[str, dict]) -> list[dict]:
    """One row per (arm, defect rate, variant) with per-task rows (BFCL cells have none of these fields)."""
    out = []
    for (arm, rate, v), cs in variant_groups(cells).items():
        rows = [r for c in cs for r in read_tasks(c["folder"])]
        if rows and "end_reason" in rows[0]:
            out.append({"arm": arm, "defect_rate": rate, "variant": v, "seeds": [c["seed"] for c in cs],
                        **behaviour(rows)})
    return out


def teacher_row(doc: dict) -> dict:
    """:data:`TEACHER_ROW_KEYS` of a cell's ``teacher.json``."""
    diag, d = doc.get("teacher") or {}, doc.get("defects") or {}
    return {"teacher": diag.get("teacher"),
            "first_attempt_acceptance": diag.get("first_attempt_acceptance"),
            "candidate_acceptance": diag.get("candidate_acceptance"),
            "mean_attempts": diag.get("mean_attempts"), "n_boundaries": diag.get("n_boundaries"),
            "n_teacher": diag.get("n_teacher"), "n_fallback": diag.get("n_fallback"),
            "n_defective": d.get("n_defective"), "defects_replaced": d.get("replaced"),
            "defects_fell_back": d.get("fell_back")}


def teacher_rows(cells: dict[str, dict]) -> list[dict]:
    """One row per cell that carries ``teacher.json``, sorted by cell id."""
    return [{"cell": cid, **teacher_row(c["teacher"])} for cid, c in sorted(cells.items()) if c.get("teacher")]


def _f(x, fmt: str = ".3f") -> str:
    return "–" if x is None else format(x, fmt)


def _section(title: str, intro: str, header: tuple[str, ...], lines: list[str]) -> list[str]:
    return ["", f"## {title}", "", intro, "", "| " + " | ".join(header) + " |", "|---" * len(header) + "|", *lines]


def behaviour_markdown(rows: list[dict]) -> list[str]:
    lines = [f"| {r['arm']} | {100 * r['defect_rate']:.0f}% | {r['variant']} | {len(r['seeds'])} | {r['episodes']} | "
             f"{_f(r['at_turn_limit'])} | {_f(r['finished'])} | {_f(r['turns_per_episode'], '.2f')} | "
             f"{_f(r['calls_per_episode'], '.2f')} | {_f(r['call_precision'])} |" for r in rows]
    return _section("How the episodes end", "Pooled over seeds from the cells' per-task rows. At the turn limit: the "
                    "episode used its whole turn budget; call precision: matched reference steps per tool "
                    "call made.", ("arm", "defects", "variant", "seeds", "episodes", "at turn limit", "finished",
                                   "turns/episode", "calls/episode", "call precision"), lines)


def teacher_markdown(rows: list[dict]) -> list[str]:
    lines = [f"| {r['cell']} | {r['teacher']} | {_f(r['first_attempt_acceptance'])} | "
             f"{_f(r['candidate_acceptance'])} | {_f(r['mean_attempts'], '.2f')} | {r['n_teacher']} / "
             f"{r['n_fallback']} | {r['defects_replaced']} / {r['defects_fell_back']} of {r['n_defective']} |"
             for r in rows]
    return _section("What the teacher did", "Each cell's `teacher.json`: acceptance by the harness (Table 3), the "
                    "targets it gave, and the defective train references it replaced with a verified action or fell "
                    "back on.", ("cell", "teacher", "first-attempt acc.", "candidate acc.", "mean attempts",
                                 "targets: teacher / fallback", "defective: replaced / fell back"), lines)


def markdown_lines(doc: dict) -> list[str]:
    """The report's "Why they differ" sections (empty when the doc has neither table)."""
    return ((behaviour_markdown(doc["behaviour"]) if doc.get("behaviour") else [])
            + (teacher_markdown(doc["teacher"]) if doc.get("teacher") else []))
