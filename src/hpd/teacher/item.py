"""TeachItem: what the teacher stage needs from one training boundary.

A thin adapter so the teach loop does not depend on the storage format of boundaries:

* ``id``: stable boundary id (used for per-boundary seeding and for resume);
* ``context``: the native context ``{"systemPrompt", "tools", "messages"}`` (Harness.context());
* ``reference``: the reference assistant message at this boundary;
* ``can_end``: whether the runtime contract lets the run end at this boundary (all required /
  scorable reference steps observed). Default when the boundary does not say: the reference
  action itself is a final turn (no tool calls);
* ``restore()``: a Harness positioned at this boundary (the verifier forks it per candidate);
* ``document(privilege)``: the control-document text at a privilege level
  (``runtime`` | ``plan`` | ``oracle``) for the I view;
* ``oracle_action``: the exact next action as the document at privilege ``oracle`` states it,
  when available (used by the scripted oracle teacher).

:func:`from_boundary` builds one from an :mod:`hpd.boundary` record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from .canon import tool_calls


@dataclass
class TeachItem:
    id: str
    context: dict
    reference: dict
    restore: Callable[[], Any]
    document: Callable[[str], str] = lambda privilege: ""
    can_end: bool | None = None
    task_uid: str = ""
    kind: str = ""
    oracle_action: Callable[[], dict | None] | None = None
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.can_end is None:
            self.can_end = not tool_calls(self.reference)

    @property
    def is_final(self) -> bool:
        """The reference action ends the run (no tool calls; at a smolagents boundary, whose replay marks its final
        turn ``reference_meta.kind == "final"``, the ``final_answer`` call)."""
        calls = tool_calls(self.reference)
        if calls and ((self.meta or {}).get("reference_meta") or {}).get("kind") == "final":
            return all(c.get("name") == "final_answer" for c in calls)
        return not calls
