"""The explicit length policy: no row is silently truncated or dropped.

An example longer than ``max_length`` tokens (prompt + completion) is handled by one of two policies:

* ``"drop_oldest_tool_outputs"`` (default): replace the content of whole tool outputs
  (``toolResult`` messages), oldest first, by :data:`OMITTED_MARKER` and re-render, until it fits;
  if it still does not fit with every tool output omitted, the row is skipped. An output whose text
  is not longer than the marker is left as it is (replacing it would lengthen the row), so the row
  never grows as more outputs are omitted, and the fewest omissions that fit are found by binary
  search (:func:`hpd.views.build._fit`).
* ``"skip"``: skip the row.

Never does the policy cut tokens from the middle of a message or from the completion (TRL's default
``truncation_mode="keep_start"`` can cut the completion away and then silently drops the row; see
docs/ml-stack.md section 3). Every trim and skip is counted in a :class:`LengthReport`, which the
trainer writes to ``length_report.json`` and the run manifest and prints at start.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field

POLICIES = ("drop_oldest_tool_outputs", "skip")
OMITTED_MARKER = "[tool output omitted to fit the training context length]"


@dataclass
class ViewLengthStats:
    rows: int = 0                 # records offered to this view
    kept: int = 0                 # examples produced (untouched + trimmed)
    trimmed: int = 0              # kept after omitting >= 1 tool output
    tool_outputs_omitted: int = 0 # total tool outputs replaced by the marker
    skipped_too_long: int = 0     # did not fit even after the policy
    skipped_missing: int = 0      # record lacks what the view needs (e.g. no document for I/R)
    max_tokens: int = 0           # longest kept example (tokens)


@dataclass
class LengthReport:
    max_length: int
    policy: str
    views: dict[str, ViewLengthStats] = field(default_factory=dict)
    skipped_uids: dict[str, list[str]] = field(default_factory=dict)

    def stats(self, view: str) -> ViewLengthStats:
        return self.views.setdefault(view, ViewLengthStats())

    def to_dict(self) -> dict:
        return {"max_length": self.max_length, "policy": self.policy,
                "views": {v: asdict(s) for v, s in self.views.items()},
                "skipped_uids": {v: u[:100] for v, u in self.skipped_uids.items()}}

    @property
    def any_loss(self) -> bool:
        return any(s.trimmed or s.skipped_too_long or s.skipped_missing for s in self.views.values())

    def summary(self) -> str:
        parts = []
        for v, s in self.views.items():
            parts.append(f"{v}: kept {s.kept}/{s.rows} (trimmed {s.trimmed}, {s.tool_outputs_omitted} tool outputs "
                         f"omitted; skipped {s.skipped_too_long} too long, {s.skipped_missing} missing; "
                         f"max {s.max_tokens} tok)")
        return f"length policy {self.policy!r} at max_length={self.max_length}: " + "; ".join(parts)


def tool_result_indices(ctx: dict) -> list[int]:
    return [i for i, m in enumerate(ctx.get("messages", [])) if m.get("role") == "toolResult"]


def _omittable(msg: dict) -> bool:
    """A tool output worth omitting: its text is longer than the marker that would replace it."""
    content = msg.get("content")
    if isinstance(content, str):
        return len(content) > len(OMITTED_MARKER)
    blocks = [b for b in content or [] if isinstance(b, dict)]
    if any(b.get("type") != "text" for b in blocks):   # e.g. an image: always worth omitting
        return True
    return sum(len(b.get("text", "")) for b in blocks) > len(OMITTED_MARKER)


def omittable_indices(ctx: dict) -> list[int]:
    """Message indices of the tool outputs the policy may omit, oldest first (those longer than the marker)."""
    msgs = ctx.get("messages", [])
    return [i for i in tool_result_indices(ctx) if _omittable(msgs[i])]


def omit_tool_outputs(ctx: dict, k: int) -> dict:
    """A copy of ``ctx`` whose ``k`` oldest omittable tool outputs (:func:`omittable_indices`) carry
    :data:`OMITTED_MARKER` instead of their content."""
    out = dict(ctx)
    msgs = list(ctx.get("messages", []))
    for i in omittable_indices(ctx)[:k]:
        m = copy.copy(msgs[i])
        m["content"] = [{"type": "text", "text": OMITTED_MARKER}]
        msgs[i] = m
    out["messages"] = msgs
    return out
