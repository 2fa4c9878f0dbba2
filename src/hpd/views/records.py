"""Boundary records: the input of the view builder.

A record is a plain JSON dict (one line of a JSONL file), one per model-call boundary::

    {"uid": "<task uid>/b<k>",                   # unique id of the boundary
     "context": {"systemPrompt", "tools", "messages"},   # native context, Pi messages (Harness.context())
     "target": <assistant message>,               # teacher-verified target action (T, I views)
     "reference": <assistant message>,            # optional: the reference action (SFT baseline)
     "document": "<control document text>",       # optional: required by the I and R views
     "document_privilege": "plan",                # optional: the level of ``document`` (the teacher's)
     "documents": {"runtime": ..., "plan": ..., "oracle": ...}}   # optional: every level compiled

``data.target: "reference"`` in the train config trains T/I on ``reference`` instead of ``target``
(the SFT-on-ground-truth baseline is T only with reference targets). ``data.teacher_level`` checks
``document_privilege`` (:func:`check_privilege`); ``data.r_target_level`` makes the R view reconstruct
``documents[level]`` instead of ``document`` (:func:`documents_at`).
"""

from __future__ import annotations

import json
from pathlib import Path


class RecordError(ValueError):
    pass


def make_record(uid: str, context: dict | None, target: dict, *, reference: dict | None = None,
                document: str | None = None, document_privilege: str | None = None,
                documents: dict[str, str] | None = None, **meta) -> dict:
    """THE way a training record is built (teacher targets, the demo's SFT records): ``uid``, any ``meta``
    (``task_uid``, ``kind``, ``provenance``), ``context``, ``target``, ``reference``, ``document`` and its
    privilege, ``documents`` (level -> text, every level compiled); keys whose value is None are left out."""
    rec = {"uid": uid, **meta, "context": context, "target": target, "reference": reference, "document": document,
           "document_privilege": document_privilege if document is not None else None, "documents": documents or None}
    return {k: v for k, v in rec.items() if v is not None}


def validate_record(r: dict, i: int = 0) -> dict:
    if not isinstance(r, dict):
        raise RecordError(f"record {i}: not an object")
    ctx = r.get("context")
    if not isinstance(ctx, dict) or not isinstance(ctx.get("messages"), list):
        raise RecordError(f"record {i} ({r.get('uid', '?')}): 'context' must be an object with a 'messages' list")
    for key in ("target", "reference"):
        m = r.get(key)
        if m is not None and (not isinstance(m, dict) or m.get("role") != "assistant"):
            raise RecordError(f"record {i} ({r.get('uid', '?')}): {key!r} must be an assistant message")
    d = r.get("document")
    if d is not None and not isinstance(d, str):
        raise RecordError(f"record {i} ({r.get('uid', '?')}): 'document' must be a string")
    return r


def check_privilege(records: list[dict], level: str) -> None:
    """Every record's ``document_privilege`` is ``level`` (the teacher's level a config asks for); else a
    one-line :class:`RecordError` naming the first record that differs."""
    for i, r in enumerate(records):
        got = r.get("document_privilege")
        if got != level:
            raise RecordError(f"record {i} ({r.get('uid', '?')}): document_privilege is {got!r}, the config's "
                              f"data.teacher_level is {level!r} (teach with `hpd teach --privilege {level}`)")


def documents_at(records: list[dict], level: str) -> list[dict]:
    """Copies of ``records`` whose ``document`` is ``documents[level]``; a one-line :class:`RecordError` names
    the first record without that level."""
    out = []
    for i, r in enumerate(records):
        doc = (r.get("documents") or {}).get(level)
        if not isinstance(doc, str):
            raise RecordError(f"record {i} ({r.get('uid', '?')}): no documents[{level!r}] for data.r_target_level "
                              f"(records from `hpd teach` carry every level the replay compiled)")
        out.append(dict(r, document=doc, document_privilege=level))
    return out


def load_records(path: str | Path) -> list[dict]:
    """Read a JSONL file of boundary records, validating each; raises :class:`RecordError` with the line number."""
    p = Path(path)
    if not p.is_file():
        raise RecordError(f"records file not found: {p}")
    out = []
    with p.open() as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as exc:
                raise RecordError(f"{p}:{n}: invalid JSON ({exc.msg})") from None
            r.setdefault("uid", f"{p.name}:{n}")
            out.append(validate_record(r, n))
    return out
