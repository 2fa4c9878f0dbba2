"""Reading a finished evaluation folder (what :func:`hpd.eval.variant.evaluate_variant` wrote): its metrics and
its episodes with their transcripts. Other stages, and the rest of ``hpd.eval``, read evaluations through
this (``hpd.eval.variant`` re-exports both functions)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from hpd.runfolder import ShardLog, finished_manifest, read_json


def read_metrics(out: str | Path) -> dict:
    """The metrics of a FINISHED evaluation folder (what :func:`~hpd.eval.variant.evaluate_variant` wrote): a one-line
    ``RunFolderError`` when the folder has no ``metrics.json``, or when its manifest exists and is not
    ``complete`` (a stopped or running evaluation). Other stages read evaluations through this."""
    out = Path(out)
    finished_manifest(out, "evaluation")
    return read_json(out / "metrics.json", "evaluation metrics")


def transcripts(out: str | Path, uids: Sequence[str] | None = None, n: int = 3) -> list[dict]:
    """Episode rows WITH their transcripts (``messages``) from an evaluation folder's shard log: the rows of
    ``uids`` in that order (missing ones skipped), else the first ``n`` by uid."""
    folder = Path(out) / "shards"
    if not folder.is_dir():
        return []
    rows: dict[str, dict] = {}
    for r in ShardLog(folder, key="uid").iter_records():   # read only: a finished folder is never repaired
        rows.setdefault(r.get("uid"), r)
    keys = list(uids) if uids is not None else sorted(rows)[:n]
    return [rows[k] for k in keys if k in rows]
