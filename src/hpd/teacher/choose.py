"""Choose a teacher by measurement: each candidate teacher runs ONE attempt (K proposals, the teach
config's sampling) on the same seeded probe sample of boundaries, and the one with the highest
first-attempt acceptance (share of boundaries with >= 1 harness-verified proposal) is chosen.

The paper's teacher is the student's base model reading the control document. A small model may copy a
document's next action better after a short I-view warm-up, so ``hpd demo`` measures both and reports the
two acceptances (``teacher_choice.json``). Ties go to the candidate listed first. Each probe is a normal
teach run folder (``<out>/<name>/``: shards, diagnostics, manifest), so a killed choice resumes.
"""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

from hpd.runfolder import write_json

from .item import TeachItem
from .run import TeachConfig, teach


def probe_sample(items: Sequence[TeachItem], n: int, seed: int) -> list[TeachItem]:
    """A seeded sample of ``n`` items (all of them when ``n >= len(items)``), in input order."""
    if n >= len(items):
        return list(items)
    keep = set(random.Random(f"teacher-probe/{seed}").sample(range(len(items)), n))
    return [it for i, it in enumerate(items) if i in keep]


def choose_teacher(candidates: dict[str, Callable[[], Any]], items: Sequence[TeachItem], cfg: TeachConfig,
                   out: str | Path, *, n_probe: int = 48, manifest: dict | None = None) -> tuple[str, dict]:
    """Probe every candidate (``name -> factory`` building the teacher) with one attempt on the same sample;
    returns ``(chosen name, report)`` and writes the report to ``<out>/teacher_choice.json``."""
    if not candidates:
        raise ValueError("no candidate teachers")
    out = Path(out)
    sample = probe_sample(items, n_probe, cfg.seed)
    one = replace(cfg, attempts=1)
    report: dict[str, dict] = {}
    for name, make in candidates.items():
        teacher = make()
        res = teach(sample, teacher, one, out / name, manifest={**(manifest or {}), "result_fields": {"probe": name}})
        d = res.diagnostics
        report[name] = {"first_attempt_acceptance": d["first_attempt_acceptance"],
                        "candidate_acceptance": d["candidate_acceptance"], "n_boundaries": d["n_boundaries"],
                        "rejection_reasons": d["rejection_reasons"], "seconds": round(res.seconds, 1),
                        "teacher": getattr(teacher, "name", name)}
        del teacher
    chosen = max(report, key=lambda k: (report[k]["first_attempt_acceptance"], -list(report).index(k)))
    doc = {"chosen": chosen, "rule": "highest first-attempt acceptance on the probe sample (ties: first listed)",
           "n_probe": len(sample), "k": cfg.k, "privilege": cfg.privilege, "candidates": report}
    write_json(out / "teacher_choice.json", doc)
    return chosen, doc
