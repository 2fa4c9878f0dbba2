"""Records of the teach stage: Proposal (a candidate), Verdict (verification outcome), Target.

Definitions
-----------
* **Proposal**: one candidate action from the teacher at one boundary: the raw completion text
  (empty for scripted teachers that emit messages directly), the parsed Pi assistant message,
  and where it came from (attempt 1..N, candidate index 0..K-1 inside the attempt).
* **Verdict**: the harness's judgement of one proposal, checked on a fork of the boundary state
  (see :mod:`hpd.teacher.verify`). ``ok`` iff ``reasons`` is empty. ``reasons`` are
  machine-readable codes from :data:`REASONS`, in check order, without duplicates.
* **Target**: the chosen action for a boundary with provenance: ``source`` is ``"teacher"``
  (best verified proposal by :mod:`hpd.teacher.rank`) or ``"reference_fallback"`` (nothing verified
  after N attempts and the config says to fall back to the reference action, flagged).
  Boundaries whose config says ``drop`` get no Target (``target=None`` in the record).

All records are plain JSON-able dicts/dataclasses, because they go to JSONL shards.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# Machine-readable rejection reasons, in the order the verifier checks them.
TEACHER_ERROR = "teacher_error"        # the teacher call itself failed (stopReason error/aborted)
PARSE_ERROR = "parse_error"            # completion did not parse into a usable action
TRUNCATED = "truncated"                # stopReason "length": Pi refuses to execute its calls (v1.6)
UNKNOWN_TOOL = "unknown_tool"          # a called tool is not in the context's tool list
INVALID_ARGS = "invalid_args"          # the harness's (Pi's) argument validation, or the
                                       # environment's schema check, rejected the arguments
NO_RECORDED_RESPONSE = "no_recorded_response"  # replay env match level miss/global/... (not exact/near)
RECORDED_FAILURE = "recorded_failure"  # answered only by a recorded failure of an unscorable gold step
TOOL_ERROR = "tool_error"              # the tool threw / returned isError for another reason
REPEATED_CALL = "repeated_call"        # same canonical signature already executed in the episode
PREMATURE_END = "premature_end"        # ends the run while the contract does not allow it yet
EMPTY_ANSWER = "empty_answer"          # ends the run (allowed) but with an empty answer text

REASONS = (
    TEACHER_ERROR, PARSE_ERROR, TRUNCATED, UNKNOWN_TOOL, INVALID_ARGS, NO_RECORDED_RESPONSE, RECORDED_FAILURE, TOOL_ERROR,
    REPEATED_CALL, PREMATURE_END, EMPTY_ANSWER,
)

SOURCE_TEACHER = "teacher"
SOURCE_REFERENCE = "reference_fallback"


@dataclass
class Proposal:
    message: dict[str, Any]            # Pi assistant message (parse_action output)
    text: str = ""                     # raw completion text ("" for scripted teachers)
    attempt: int = 1                   # 1-based
    index: int = 0                     # candidate index inside the attempt (0..K-1)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Verdict:
    ok: bool
    reasons: list[str] = field(default_factory=list)
    # per tool call: {"name", "match", "is_error", "reason"}; match = replay match level or None
    calls: list[dict[str, Any]] = field(default_factory=list)
    detail: str = ""                   # short human-readable note (first failure)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Target:
    message: dict[str, Any]
    source: str                        # SOURCE_TEACHER | SOURCE_REFERENCE
    attempt: int | None = None         # None for the reference fallback
    index: int | None = None
    score: float | None = None
    score_parts: list[float] | None = None   # [tool-name sim, canonical-arg sim, answer-text F1]
    differs: list[str] = field(default_factory=list)  # subset of ["tool", "args", "answer_text"]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
