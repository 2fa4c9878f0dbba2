"""The Boundary record: one provider boundary of a reference replay.

A provider boundary is one ``streamFn`` call of the Pi loop (``docs/pi-harness.md`` section 6): the moment
the model is asked for the next assistant message. A :class:`Boundary` holds:

- ``uid`` (``"<task uid>/b<index>"``), ``task_uid``, ``index`` (0-based within the episode) and
  ``kind`` (``initial`` | ``after_tool_batch`` | ``after_steering`` | ``after_follow_up``);
- ``context``: the native context ``{"systemPrompt", "tools", "messages"}`` -- exactly
  ``Harness.context()`` at the boundary, i.e. what the model is given;
- ``state``: the runtime-state snapshot (plain JSON; layout in :mod:`hpd.boundary.state`): harness
  state (turn, budget, queues, tail), every executed call with its outcome and error kind, the last
  batch, environment match counts, and the reference progress (observed / remaining steps, consumed
  recorded outputs, whether ending now would comply);
- ``reference``: the reference assistant message at this boundary, and ``reference_meta``: which
  reference steps it issues, whether it is scorable, and whether it is itself compliant (``issues``
  lists why not: ``off_catalog``, ``recorded_failure``, ``schema_error``, ``unknown_tool``, ...);
- ``documents``: privilege level -> ``{"text", "n_tokens", "token_method", "n_chars"}`` (the record
  is ``hpd.document.parse(text)``; rendering and parsing are exact inverses);
- ``recipe``: how to re-create the live harness here (:func:`hpd.boundary.restore`): the task uid,
  the number of reference turns to re-drive and the replay config hash. ``harness`` (in memory only,
  never serialised) may hold a fork taken during the replay itself.

Later stages fill the optional slots ``candidates`` (teacher proposals), ``verdicts`` and ``target``;
the inspector shows them when present. Unknown keys in a stored record are kept in ``extra``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: The serialised field order (stable, so shards are byte-identical across runs).
RECORD_KEYS = (
    "uid", "task_uid", "index", "kind", "context", "state", "reference", "reference_meta",
    "documents", "recipe", "candidates", "verdicts", "target",
)


@dataclass(eq=False)
class Boundary:
    uid: str
    task_uid: str
    index: int
    kind: str
    context: dict
    state: dict
    reference: dict
    reference_meta: dict
    documents: dict = field(default_factory=dict)
    recipe: dict = field(default_factory=dict)
    candidates: list | None = None
    verdicts: list | None = None
    target: dict | None = None
    extra: dict = field(default_factory=dict)
    harness: Any = None  # in-memory fork at this boundary (not serialised)

    def document_text(self, privilege: str) -> str:
        """The rendered control document at ``privilege`` (KeyError if it was not compiled)."""
        return self.documents[privilege]["text"]

    def document(self, privilege: str):
        """The ControlDocument record at ``privilege`` (parsed back from its rendering)."""
        from hpd.document.parse import parse

        return parse(self.document_text(privilege))

    @property
    def can_end(self) -> bool:
        """Would ending the run now comply with the reference (every scorable step observed)?"""
        return bool(self.state.get("reference", {}).get("end_complies"))

    def to_record(self) -> dict:
        d = {k: getattr(self, k) for k in RECORD_KEYS}
        for k in ("candidates", "verdicts", "target"):
            if d[k] is None:
                del d[k]
        d.update(self.extra)
        return d

    @classmethod
    def from_record(cls, r: dict) -> "Boundary":
        known = {k: r[k] for k in RECORD_KEYS if k in r}
        extra = {k: v for k, v in r.items() if k not in RECORD_KEYS}
        return cls(**known, extra=extra)
