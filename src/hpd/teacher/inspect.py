"""Inspector integration: the replay's boundary records plus this run's teacher candidates, verdicts
and chosen target (the optional slots of :class:`hpd.boundary.record.Boundary`). ``hpd teach`` (the command
layer, above the report layer) hands them to :func:`hpd.report.inspector.write_inspector`, which writes
``<out>/inspector.html``."""

from __future__ import annotations

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
