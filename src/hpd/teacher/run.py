"""The teach loop: proposals -> verification -> ranking -> Target, for many boundaries at once.

``teach(items, teacher, config, out_dir)`` keeps up to ``config.batch_boundaries`` boundaries in
flight. Each wave asks the teacher for the next attempt of every in-flight boundary in ONE call
(K candidates each, ``n=K``), verifies every candidate on a fork of that boundary's harness
(:mod:`hpd.teacher.verify`), and retires a boundary when an attempt yields >= 1 verified candidate
(``stop_at_first``, default) or after ``attempts`` attempts. A retired boundary's target is the
best verified candidate over its attempts (:mod:`hpd.teacher.rank`); with none, the reference
action flagged ``reference_fallback`` (``fallback="reference"``) or nothing (``"drop"``).

Determinism and resume: the seed of (boundary, attempt) is ``derive_seed(seed, id, attempt)``,
so a boundary's outcome does not depend on which boundaries share its waves; finished boundaries
go to append-only shards after every wave (:mod:`hpd.teacher.shards`), and a restarted run skips
them. A run killed at any point and restarted ends with exactly the targets of an uninterrupted
run (tests/teacher/test_resume.py). Caveat: with batched GPU/CPU sampling, float results can
depend on padding; backends that take a seed per prompt and sample per row keep this exact.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from . import rank as R
from .item import TeachItem
from .proposal import Request, derive_seed
from .shards import ShardStore, write_json_atomic
from .types import SOURCE_REFERENCE, SOURCE_TEACHER, Proposal, Target, Verdict
from .verify import verify

FALLBACKS = ("reference", "drop")


@dataclass
class TeachConfig:
    k: int = 2                      # candidates per attempt (paper: 2)
    attempts: int = 5               # max attempts N (paper: 5)
    stop_at_first: bool = True      # stop at the first attempt with >= 1 verified candidate
    fallback: str = "reference"     # "reference" (flagged) | "drop"
    privilege: str = "plan"         # control-document level shown to the teacher (I view)
    seed: int = 0
    batch_boundaries: int = 16      # boundaries in flight per teacher call (does not change results)

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError("k must be >= 1")
        if self.attempts < 1:
            raise ValueError("attempts must be >= 1")
        if self.fallback not in FALLBACKS:
            raise ValueError(f"fallback must be one of {FALLBACKS}, got {self.fallback!r}")
        if self.batch_boundaries < 1:
            raise ValueError("batch_boundaries must be >= 1")

    def result_fields(self) -> dict:
        """The fields that determine results (batch size does not)."""
        d = asdict(self)
        d.pop("batch_boundaries")
        return d


@dataclass(eq=False)
class _State:
    item: TeachItem
    order: int
    attempt: int = 0
    accepted: int | None = None
    cands: list[tuple[Proposal, Verdict]] = field(default_factory=list)
    base: Any = None


@dataclass
class TeachResult:
    records: list[dict]             # one per boundary, input order
    diagnostics: dict
    seconds: float = 0.0

    @property
    def targets(self) -> dict[str, dict | None]:
        return {r["boundary_id"]: r["target"] for r in self.records}


def config_hash(fields: dict) -> str:
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _finalize(s: _State, cfg: TeachConfig, teacher_name: str) -> dict:
    ref = s.item.reference
    verified = [p for p, v in s.cands if v.ok]
    ranked = R.rank(verified, ref)
    parts_by_key = {(p.attempt, p.index): parts for p, parts in ranked}
    target: Target | None
    if ranked:
        best, parts = ranked[0]
        target = Target(message=best.message, source=SOURCE_TEACHER, attempt=best.attempt, index=best.index,
                        score=R.scalar(parts), score_parts=parts, differs=R.differences(best.message, ref))
    elif cfg.fallback == "reference":
        target = Target(message=ref, source=SOURCE_REFERENCE, differs=[])
    else:
        target = None
    return {
        "boundary_id": s.item.id,
        "task_uid": s.item.task_uid,
        "kind": s.item.kind,
        "order": s.order,
        "is_final": s.item.is_final,
        "can_end": bool(s.item.can_end),
        "teacher": teacher_name,
        "privilege": cfg.privilege,
        "attempts_used": s.attempt,
        "accepted_attempt": s.accepted,
        "candidates": [
            {"attempt": p.attempt, "index": p.index, "text": p.text, "message": p.message,
             "verdict": v.to_dict(), "score_parts": parts_by_key.get((p.attempt, p.index))}
            for p, v in s.cands
        ],
        "reference": ref,
        "target": target.to_dict() if target else None,
        "dropped": target is None,
    }


def teach(items: Sequence[TeachItem], teacher: Any, config: TeachConfig | None = None,
          out_dir: str | Path | None = None, *, manifest: dict | None = None, overwrite: bool = False,
          on_wave: Callable[[int, int], None] | None = None) -> TeachResult:
    """Teach every item; returns records in input order (finished ones from shards included).

    ``on_wave(n_done, n_total)`` is called after each wave (progress bars, tests that kill)."""
    cfg = config or TeachConfig()
    t0 = time.perf_counter()
    ids = [it.id for it in items]
    if len(set(ids)) != len(ids):
        raise ValueError("boundary ids must be unique")
    store = None
    done: dict[str, dict] = {}
    if out_dir is not None:
        fields = {**cfg.result_fields(), "teacher": getattr(teacher, "name", type(teacher).__name__),
                  "boundaries": hashlib.sha256("\n".join(ids).encode()).hexdigest()[:16],
                  **((manifest or {}).get("result_fields") or {})}
        man = {**(manifest or {}), "config": asdict(cfg), "config_hash": config_hash(fields), "n_boundaries": len(ids)}
        store = ShardStore(out_dir)
        done = store.open(man, overwrite=overwrite)
        done = {k: v for k, v in done.items() if k in set(ids)}
    name = getattr(teacher, "name", type(teacher).__name__)
    queue = deque(_State(it, i) for i, it in enumerate(items) if it.id not in done)
    inflight: list[_State] = []
    fresh: dict[str, dict] = {}
    try:
        while queue or inflight:
            while queue and len(inflight) < cfg.batch_boundaries:
                inflight.append(queue.popleft())
            reqs = [Request(s.item, s.attempt + 1, cfg.k, derive_seed(cfg.seed, s.item.id, s.attempt + 1)) for s in inflight]
            props = teacher.propose(reqs)
            if len(props) != len(reqs):
                raise RuntimeError(f"teacher returned {len(props)} answers for {len(reqs)} requests")
            finished: list[_State] = []
            for s, ps in zip(inflight, props):
                s.attempt += 1
                if s.base is None:
                    s.base = s.item.restore()
                any_ok = False
                for j, p in enumerate(ps[: cfg.k]):
                    p.attempt, p.index = s.attempt, j
                    v = verify(p.message, s.item, s.base, text=p.text)
                    s.cands.append((p, v))
                    any_ok = any_ok or v.ok
                if any_ok and s.accepted is None:
                    s.accepted = s.attempt
                if (any_ok and cfg.stop_at_first) or s.attempt >= cfg.attempts:
                    finished.append(s)
            recs = [_finalize(s, cfg, name) for s in finished]
            for s in finished:
                s.base = None
            if store is not None:
                store.append(recs)
            for r in recs:
                fresh[r["boundary_id"]] = r
            gone = {id(s) for s in finished}
            inflight = [s for s in inflight if id(s) not in gone]
            if on_wave:
                on_wave(len(done) + len(fresh), len(items))
    finally:
        if store is not None:
            store.close()
    by_id = {**done, **fresh}
    records = [by_id[i] for i in ids]
    from .diagnostics import diagnostics
    diag = diagnostics(records, cfg)
    result = TeachResult(records=records, diagnostics=diag, seconds=time.perf_counter() - t0)
    if out_dir is not None:
        finish_outputs(Path(out_dir), result, items, cfg, manifest or {})
    return result


def training_record(rec: dict, item: TeachItem | None, privilege: str) -> dict | None:
    """A :mod:`hpd.views.records` record (uid, context, target, reference, document) or None (dropped)."""
    if rec.get("target") is None:
        return None
    out = {"uid": rec["boundary_id"], "task_uid": rec.get("task_uid", ""), "kind": rec.get("kind", ""),
           "target": rec["target"]["message"], "reference": rec["reference"],
           "provenance": {k: rec["target"].get(k) for k in ("source", "attempt", "index", "score", "score_parts", "differs")}}
    if item is not None:
        out["context"] = item.context
        doc = item.document(privilege)
        if doc:
            out["document"] = doc
            out["document_privilege"] = privilege
    return out


def finish_outputs(out: Path, result: TeachResult, items: Sequence[TeachItem], cfg: TeachConfig, manifest: dict) -> None:
    """targets.jsonl (training records, input order), diagnostics.json, coverage plot, manifest."""
    from .diagnostics import plot_coverage
    by_id = {it.id: it for it in items}
    tmp = out / "targets.jsonl.tmp"
    n = 0
    with tmp.open("w", encoding="utf-8") as f:
        for r in result.records:
            tr = training_record(r, by_id.get(r["boundary_id"]), cfg.privilege)
            if tr is not None:
                f.write(json.dumps(tr, sort_keys=True, ensure_ascii=False, default=str) + "\n")
                n += 1
    tmp.replace(out / "targets.jsonl")
    write_json_atomic(out / "diagnostics.json", result.diagnostics)
    plot_coverage(result.diagnostics, out / "coverage.png")
    mpath = out / "manifest.json"
    try:
        man = json.loads(mpath.read_text())
    except (OSError, json.JSONDecodeError):
        man = dict(manifest)
    man.update({"status": "complete", "n_targets": n, "outputs": ["targets.jsonl", "diagnostics.json", "coverage.png", "shards/"]})
    write_json_atomic(mpath, man)
