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
go to the append-only shard log ``<out>/shards/part-*.jsonl`` after every wave
(:class:`hpd.runfolder.ShardLog`), and a restarted run skips them; a folder holding a run of another
config hash is refused (:class:`ConfigMismatch`). A run killed at any point and restarted ends with exactly the targets of an uninterrupted
run (tests/teacher/test_resume.py). Caveat: with batched GPU/CPU sampling, float results can
depend on padding; backends that take a seed per prompt and sample per row keep this exact.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from hpd.document import PRIVILEGES
from hpd.runfolder import (RunFolderError, ShardLog, config_hash, finish_manifest, new_manifest, open_shards,
                           read_manifest, write_json, write_jsonl)

from . import rank as R
from .item import TeachItem
from .proposal import Request, derive_seed
from .types import SOURCE_REFERENCE, SOURCE_TEACHER, Proposal, Target, Verdict
from .verify import verify

FALLBACKS = ("reference", "drop")


class ConfigMismatch(RunFolderError):
    """The output folder holds a teach run of another config (never mixed)."""


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


class FinishedTeacher:
    """The teacher of a finished teach folder, known by its name only (the manifest's ``config.teacher``): given
    to :func:`teach`, every record is read back from the shards and the teacher is never called. A demo resumed
    from a teach folder restored from an archive uses it, so it does not build the teacher again (an ``i-warm``
    teacher's warm-up weights are not in the folder)."""

    def __init__(self, out_dir: str | Path):
        self.out = Path(out_dir)
        self.name = ((read_manifest(self.out) or {}).get("config") or {}).get("teacher")
        if not self.name:
            raise RunFolderError(f"{self.out / 'manifest.json'}: no config.teacher (not a teach run folder)")

    def propose(self, requests: list) -> list:
        raise RunFolderError(f"{self.out}: the teach run lacks {len(requests)} boundaries in its shards, and its "
                             f"teacher {self.name!r} is not built here; remove the folder's done.json to teach them")


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

    ``manifest``: what the caller adds to the run-folder manifest: ``command``, ``inputs``, ``seed`` and
    ``result_fields`` (extra config fields that decide the results, e.g. the teacher model) go to their
    schema keys, anything else is kept as extra keys. ``on_wave(n_done, n_total)`` is called after each
    wave (progress bars, tests that kill)."""
    cfg = config or TeachConfig()
    t0 = time.perf_counter()
    ids = [it.id for it in items]
    if len(set(ids)) != len(ids):
        raise ValueError("boundary ids must be unique")
    name = getattr(teacher, "name", type(teacher).__name__)
    log, done, man = None, {}, None
    if out_dir is not None:
        log, done, man = _open_run(Path(out_dir), cfg, name, ids, manifest or {}, overwrite)
    queue = deque(_State(it, i) for i, it in enumerate(items) if it.id not in done)
    inflight: list[_State] = []
    fresh: dict[str, dict] = {}
    try:
        while queue or inflight:
            while queue and len(inflight) < cfg.batch_boundaries:
                inflight.append(queue.popleft())
            finished = _wave(inflight, teacher, cfg)
            recs = [_finalize(s, cfg, name) for s in finished]
            for s in finished:
                s.base = None
            if log is not None:
                log.append(recs)
                # keep them as a resumed run reads them back: the demo trains HPD-T and HPD on these, and a fresh
                # and a resumed teach stage must give the same training text. Keys keep their insertion order, so a
                # tool call's arguments keep the order the teacher wrote them in, as Pi's JSON does
                recs = [ShardLog.as_read(r) for r in recs]
            for r in recs:
                fresh[r["boundary_id"]] = r
            gone = {id(s) for s in finished}
            inflight = [s for s in inflight if id(s) not in gone]
            if on_wave:
                on_wave(len(done) + len(fresh), len(items))
    finally:
        if log is not None:
            log.close()
    by_id = {**done, **fresh}
    records = [by_id[i] for i in ids]
    from .diagnostics import diagnostics
    diag = diagnostics(records, cfg)
    result = TeachResult(records=records, diagnostics=diag, seconds=time.perf_counter() - t0)
    if out_dir is not None:
        finish_outputs(Path(out_dir), result, items, cfg, man)
    return result


def _open_run(out: Path, cfg: TeachConfig, teacher_name: str, ids: list[str], extra: dict,
              overwrite: bool) -> tuple[ShardLog, dict[str, dict], dict]:
    """Check (or clear) the folder, write the running manifest; returns the log, finished records, manifest."""
    extra = dict(extra)
    fields = {**cfg.result_fields(), "teacher": teacher_name, "boundaries": config_hash(ids),
              **(extra.pop("result_fields", None) or {})}
    man = new_manifest(extra.pop("command", None), fields, inputs=extra.pop("inputs", None),
                       seed=extra.pop("seed", cfg.seed), **extra, batch_boundaries=cfg.batch_boundaries,
                       n_boundaries=len(ids))
    try:
        log = open_shards(out, man, what="a teach run", key="boundary_id", overwrite=overwrite)
    except RunFolderError as e:
        raise ConfigMismatch(str(e)) from None
    if overwrite:
        for f in ("targets.jsonl", "diagnostics.json"):
            (out / f).unlink(missing_ok=True)
    wanted = set(ids)
    done = {k: v for k, v in log.read().items() if k in wanted}
    write_json(out / "manifest.json", {**man, "n_done_at_open": len(done)})
    return log, done, man


def _wave(inflight: list[_State], teacher: Any, cfg: TeachConfig) -> list[_State]:
    """One teacher call for the next attempt of every in-flight boundary; verify each candidate on a fork of
    its boundary; returns the states that are finished."""
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
    return finished


def training_record(rec: dict, item: TeachItem | None, privilege: str) -> dict | None:
    """The :mod:`hpd.views.records` record of a teacher record (``None`` when the boundary was dropped)."""
    from hpd.views.records import make_record

    if rec.get("target") is None:
        return None
    doc = item.document(privilege) if item is not None else None
    docs = {p: d for p in PRIVILEGES if item is not None and (d := item.document(p))}
    return make_record(rec["boundary_id"], item.context if item is not None else None, rec["target"]["message"],
                       reference=rec["reference"], document=doc or None, document_privilege=privilege,
                       documents=docs,
                       task_uid=rec.get("task_uid", ""), kind=rec.get("kind", ""),
                       provenance={k: rec["target"].get(k)
                                   for k in ("source", "attempt", "index", "score", "score_parts", "differs")})


def finish_outputs(out: Path, result: TeachResult, items: Sequence[TeachItem], cfg: TeachConfig,
                   manifest: dict) -> None:
    """targets.jsonl (training records, input order), diagnostics.json, coverage plot, manifest."""
    from .diagnostics import plot_coverage
    by_id = {it.id: it for it in items}
    rows = [tr for r in result.records if (tr := training_record(r, by_id.get(r["boundary_id"]), cfg.privilege))]
    write_jsonl(out / "targets.jsonl", rows)
    write_json(out / "diagnostics.json", result.diagnostics, sort_keys=True)
    plot_coverage(result.diagnostics, out / "coverage.png")
    man = read_manifest(out) or dict(manifest)
    write_json(out / "manifest.json", finish_manifest(
        man, n_targets=len(rows), outputs=["targets.jsonl", "diagnostics.json", "coverage.png", "shards/"]))
