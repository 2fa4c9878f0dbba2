"""The ControlDocument record: what the harness knows at one provider boundary, as typed data.

A ControlDocument is compiled (:mod:`hpd.document.compile`, "AutoProbe") from a Boundary's runtime
state by probing a fork of the harness at that boundary. It is versioned (:data:`DOC_VERSION`) and
has exactly one text rendering (:func:`hpd.document.render.render`) that parses back into an equal
record (:func:`hpd.document.parse.parse`).

Privilege levels (:data:`PRIVILEGES`) decide which fields are filled; every report names the level:

- ``runtime``: the harness contract and state only (boundary kind, turn, budget, callable tools with
  required arguments, last-batch outcomes with error kinds and causes, tool results not yet used,
  call counts, the termination rule and what a compliant final turn looks like). Nothing here needs
  the reference trajectory.
- ``plan``: adds the reference progress: remaining reference steps (tool, where each argument value
  comes from -- the query, the output of step k, the catalog default, or unknown -- but never the
  value), whether a step would repeat an executed call, and whether ending now would be complete.
- ``oracle``: adds the exact next reference action (calls with arguments, or the final answer).

Departure from the paper: the paper does not publish its document schema; this one follows the
state inventory of ``docs/pi-harness.md`` section 6 plus the reference-progress fields the issue asks for.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hpd.harness.jsvalues import js_json

#: Bump when the record or its rendering changes; shards and manifests record it.
DOC_VERSION = 1

Privilege = Literal["runtime", "plan", "oracle"]
PRIVILEGES: tuple[str, ...] = ("runtime", "plan", "oracle")

#: Why a call in the last batch failed (fixed vocabulary; see :func:`hpd.document.compile.error_kind_of`).
ERROR_KINDS: tuple[str, ...] = (
    "unknown_tool",  # name not in the tools the harness offers (Pi: "Tool X not found")
    "invalid_json",  # arguments did not parse (Pi 1.6 argumentsError)
    "validation",  # arguments failed the tool's JSON Schema (Pi: "Validation failed for tool ...")
    "truncated",  # the message hit the output-token limit; Pi 1.6 executes none of its calls
    "blocked",  # a beforeToolCall hook blocked it
    "aborted",  # the run was aborted
    "schema_error",  # the replay environment's schema check (docs/traject-bench.md 9.2 step 2)
    "no_recorded_response",  # the replay environment has no recorded output for these arguments
    "recorded_failure",  # the replayed output is a failure that was recorded in the data
    "tool_error",  # anything else the tool reported as an error
)


class _Rec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ToolSpec(_Rec):
    """A tool the harness would execute now: its exact name and the argument names its schema requires."""

    name: str
    required: list[str] = Field(default_factory=list)


class CallOutcome(_Rec):
    """One call of the previous assistant turn, as the harness resolved it."""

    name: str
    ok: bool
    error_kind: str | None = None  # one of ERROR_KINDS when not ok
    cause: str | None = None  # short, value-free explanation (never a reference value)


class ResultRef(_Rec):
    """An earlier successful tool result that no later call has drawn an argument value from yet."""

    call: int  # 1-based ordinal of the call in the run
    name: str


class EndRule(_Rec):
    """The termination contract at this boundary (Pi: a reply with no toolCall blocks ends the run)."""

    allowed: bool  # does the harness let the run end with the next reply?
    rule: str  # the structural rule, in words
    final_turn: str  # what a compliant final turn looks like


class ArgSource(_Rec):
    """Where a remaining reference step's argument value comes from (never the value itself).

    ``source`` is ``"query"``, ``"step:<k>"`` (output of reference step k, 1-based), ``"default"`` (the
    catalog's example/default value) or ``"unknown"``.
    """

    name: str
    source: str


class PlanStep(_Rec):
    """A reference step that has not been observed yet (plan and oracle levels)."""

    step: int  # 1-based reference step index
    tool: str
    callable: bool  # the tool is among the callable tools (False: off-catalog in the data)
    recorded: Literal["ok", "failed"]  # how the recorded execution went
    repeat: bool  # an identical call (same name and arguments) was already executed in this run
    args: list[ArgSource] = Field(default_factory=list)


class ActionCall(_Rec):
    """One call of the reference action; ``arguments`` are held as the document shows them (``JSON.stringify``
    then parse: ``7.2e16`` is the int ``72000000000000000``, see :func:`hpd.harness.jsvalues.js_json`)."""

    name: str
    arguments: dict

    @field_validator("arguments")
    @classmethod
    def _as_js(cls, v: dict) -> dict:
        return js_json(v)


class NextAction(_Rec):
    """The exact reference action at this boundary (oracle level): tool calls, or a final answer."""

    calls: list[ActionCall] = Field(default_factory=list)
    final: str | None = None  # the final-answer text when the action has no calls


class ControlDocument(_Rec):
    """A compiled, versioned description of the harness state at one provider boundary."""

    version: int = DOC_VERSION
    privilege: Privilege
    # -- runtime level -------------------------------------------------------------------------
    kind: str  # boundary kind: initial | after_tool_batch | after_steering | ...
    index: int  # boundary index within the episode (0-based)
    turn: int  # completed assistant turns so far
    execution: str  # harness tool execution mode: parallel | sequential
    turns_left: int | None  # model calls left in the budget (None: unbounded)
    tail: str  # role of the last message (user | toolResult | ...)
    tools: list[ToolSpec]
    last_batch: list[CallOutcome] = Field(default_factory=list)
    unused: list[ResultRef] = Field(default_factory=list)
    calls_made: int = 0
    errors_made: int = 0
    end: EndRule
    # -- plan level ----------------------------------------------------------------------------
    steps_left: int | None = None  # remaining reference steps (plan+)
    complete: bool | None = None  # would ending now cover every scorable reference step? (plan+)
    plan: list[PlanStep] | None = None
    # -- oracle level --------------------------------------------------------------------------
    next_action: NextAction | None = None

    @model_validator(mode="after")
    def _levels_consistent(self) -> "ControlDocument":
        """A record carries exactly the fields its privilege level allows (so levels cannot leak)."""
        if self.privilege == "runtime" and (
            self.steps_left is not None or self.complete is not None or self.plan is not None
        ):
            raise ValueError("a runtime-level document carries no reference progress or plan")
        if self.privilege != "oracle" and self.next_action is not None:
            raise ValueError(f"a {self.privilege}-level document carries no next action")
        return self
