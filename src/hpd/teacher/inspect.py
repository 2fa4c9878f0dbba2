"""Inspector integration: the replay's boundary records plus this run's teacher candidates, verdicts
and chosen target (the optional slots of :class:`hpd.boundary.model.Boundary`), written as
``<out>/inspector.html`` by :func:`hpd.report.inspector.write_inspector`."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable


def merge_slots(boundary_records: Iterable[dict], teach_records: dict[str, dict]) -> Iterable[dict]:
    """Yield the replay records of the taught boundaries with ``candidates`` / ``verdicts`` / ``target``."""
    for r in boundary_records:
        t = teach_records.get(r.get("uid"))
        if t is None:
            continue
        r = dict(r)
        r["candidates"] = [{"attempt": c["attempt"], "index": c["index"], "text": c["text"], "message": c["message"],
                            "score_parts": c.get("score_parts")} for c in t["candidates"]]
        r["verdicts"] = [{"attempt": c["attempt"], "index": c["index"], **c["verdict"]} for c in t["candidates"]]
        r["target"] = t["target"] or {"dropped": True}
        yield r


def write_teach_inspector(boundaries_dir: str | Path, out: str | Path, records: list[dict], *,
                          max_tasks: int | None = 1000) -> Path:
    from hpd.boundary.store import iter_records
    from hpd.report.inspector import write_inspector

    by_id = {r["boundary_id"]: r for r in records}
    return write_inspector(boundaries_dir, Path(out) / "inspector.html", max_tasks=max_tasks,
                           records=merge_slots(iter_records(boundaries_dir), by_id))
