"""Runtime-state snapshots at provider boundaries, and the error-kind classifier.

:class:`Tracker` follows one episode (it is told every assistant message stepped into the harness)
and produces, at each boundary, the JSON snapshot stored as ``Boundary.state``::

    {"harness": {"pi", "turn_index", "turns_completed", "boundary_kind", "tool_execution", "max_turns",
                 "turns_left", "tail_role", "n_messages", "steering_queued", "follow_up_queued",
                 "aborted", "terminate_requested"},
     "calls": [{"ordinal", "turn", "id", "name", "arguments", "ok", "error_kind", "cause",
                "match", "served_step", "ref_step", "used"}],      # every executed call so far
     "last_batch": [ordinal, ...],                                 # calls of the previous turn
     "env": {"matches": {level: n}},                               # replay match levels so far
     "reference": {"n_steps", "n_turns", "turn", "observed", "remaining", "consumed",
                   "scorable_remaining", "unmatched_scorable", "end_complies",
                   "remaining_steps": [{"step", "tool", "callable", "recorded", "repeat", "sources"}]}}

Definitions:

- ``turns_left``: provider calls left in the budget including this one (``max_turns - turn_index``),
  ``None`` when unbounded. ``max_turns`` is hpd policy (Pi has no cap).
- ``used``: a successful tool result counts as used once a later call carries an argument value
  (string of >= 3 characters, or a number with >= 3 digits) that occurs in the result text. A
  heuristic: a value can be typed from the query and still occur in an output.
- ``observed``: reference steps whose call was issued by an earlier reference turn; ``consumed``:
  steps whose recorded output the replay environment served (match exact/near); ``end_complies``:
  no scorable reference step is left unissued (ending now covers the scorable reference plan).
  Steps are 0-based here (the document renders them 1-based). Steps labelled as injected defects
  (``reference[i]["defect"]``) are never pending: ``remaining`` lists the clean steps only.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from hpd import PI_PACKAGE, PI_VERSION
from hpd.document.sources import occurs_all
from hpd.harness.messages import tool_calls_of

_VALIDATION_LINE = re.compile(r"^\s+- (.*)$")


def result_text(res: dict) -> str:
    c = res.get("content")
    if isinstance(c, str):
        return c
    return "".join(b.get("text", "") for b in (c or []) if isinstance(b, dict) and b.get("type") == "text")


def classify_error(text: str, match: str | None, recorded_failed: bool = False) -> tuple[str, str]:
    """``(error_kind, cause)`` of an error tool result (kinds: :data:`hpd.document.schema.ERROR_KINDS`).

    ``cause`` is short and value-free: Pi's validation lines name paths, not values; the replay
    environment's texts never contain reference values (docs/traject-bench.md 9.2).
    """
    if match == "unknown_tool" or (match is None and text.startswith("Tool ") and text.endswith(" not found")):
        return "unknown_tool", "the tool is not among the callable tools"
    if match is None:
        if text.startswith("Invalid arguments for tool"):
            return "invalid_json", "the arguments are not a JSON object"
        if text.startswith("Validation failed for tool"):
            body = text.split("\n\nReceived arguments:", 1)[0]
            lines = [m.group(1) for ln in body.split("\n") if (m := _VALIDATION_LINE.match(ln))]
            return "validation", "schema: " + "; ".join(lines[:4]) if lines else "arguments fail the schema"
        if "was not executed: the response hit the output token limit" in text:
            return "truncated", "the message hit the output token limit; no call ran"
        if text == "Operation aborted":
            return "aborted", "the run was aborted"
        if text == "Tool execution was blocked":
            return "blocked", "a beforeToolCall hook blocked the call"
        return "tool_error", text[:120]
    if match == "schema_error":
        return "schema_error", text[:160]
    if match == "miss":
        return "no_recorded_response", "no recorded response for these arguments"
    if recorded_failed or text.startswith("ERROR:"):
        return "recorded_failure", "the recorded execution failed: " + text[:80]
    return "tool_error", text[:120]


def _probe_values(args: Any) -> list[Any]:
    out = []
    if isinstance(args, dict):
        for v in args.values():
            if isinstance(v, bool) or v is None:
                continue
            if isinstance(v, str) and len(v.strip()) >= 3:
                out.append(v)
            elif isinstance(v, (int, float)) and len(re.sub(r"\D", "", str(v))) >= 3:
                out.append(v)
    return out


def call_key(name: Any, args: Any) -> str:
    """Identity of a call for the repeat check: name + arguments with sorted keys."""
    import json

    try:
        a = json.dumps(args, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        a = repr(args)
    return f"{name}\x1f{a}"


class Tracker:
    """Follows one episode and snapshots its runtime state at each boundary (see module docstring).

    ``reference``: per reference step ``{"tool", "callable", "recorded", "scorable", "arguments",
    "sources"}``; ``ref_turns``: list of lists of step indices (the final turn is ``[]``).
    """

    def __init__(self, reference: list[dict], ref_turns: list[list[int]]):
        self.reference = reference
        self.ref_turns = ref_turns
        self.calls: list[dict] = []
        self._texts: list[str] = []  # casefolded result text per call (for the used check)
        self.last_batch: list[int] = []
        self.observed: list[int] = []
        self.consumed: set[int] = set()
        self.matches: Counter = Counter()
        self.executed_keys: set[str] = set()
        self.ref_turn = 0

    def observe_step(self, h, msg: dict, ref_steps: list[int] | None, env_calls_before: int) -> None:
        """Record the outcome of stepping ``msg`` into harness ``h`` (call after ``h.step(msg)``)."""
        results = {r.get("toolCallId"): r for r in h.last_tool_results}
        env_log = getattr(h.env, "calls", None)
        env_new = {}
        if isinstance(env_log, list):
            for e in env_log[env_calls_before:]:
                env_new[e.get("call_id")] = e
        calls = tool_calls_of(msg)
        turn = h.turns_completed - 1
        # the used check runs before this batch's results join the pool of earlier results
        for c in calls:
            for v in _probe_values(c.get("arguments")):
                for prev, text in zip(self.calls, self._texts):
                    if prev["ok"] and not prev["used"] and occurs_all(v, text):
                        prev["used"] = True
        batch = []
        for j, c in enumerate(calls):
            res = results.get(c.get("id"), {})
            env = env_new.get(c.get("id"))
            match = env.get("match") if env else None
            served = env.get("step") if env else None
            ref_step = ref_steps[j] if ref_steps is not None and j < len(ref_steps) else None
            ok = not res.get("isError", False)
            text = result_text(res)
            kind = cause = None
            if not ok:
                failed = served is not None and self.reference[served]["recorded"] == "failed"
                kind, cause = classify_error(text, match, failed)
            if match:
                self.matches[match] += 1
                if match in ("exact", "near") and served is not None:
                    self.consumed.add(served)
            ordinal = len(self.calls) + 1
            self.calls.append({
                "ordinal": ordinal, "turn": turn, "id": c.get("id"), "name": c.get("name"),
                "arguments": c.get("arguments"), "ok": ok, "error_kind": kind, "cause": cause,
                "match": match, "served_step": served, "ref_step": ref_step, "used": False,
            })
            self._texts.append(text.casefold() if ok else "")
            self.executed_keys.add(call_key(c.get("name"), c.get("arguments")))
            batch.append(ordinal)
        self.last_batch = batch
        if ref_steps is not None:
            self.observed.extend(ref_steps)
            self.ref_turn += 1

    def snapshot(self, h) -> dict:
        """The JSON state at the boundary ``h`` is parked at."""
        mt = h.config.max_turns
        msgs = h.transcript
        tail = msgs[-1].get("role") if msgs else None
        observed = set(self.observed)
        remaining = [i for i in range(len(self.reference)) if i not in observed and not self.reference[i].get("defect")]
        scorable_remaining = [i for i in remaining if self.reference[i]["scorable"]]
        unmatched = [i for i, r in enumerate(self.reference)
                     if r["scorable"] and i in observed and i not in self.consumed]
        rem_steps = []
        for i in remaining:
            r = self.reference[i]
            rem_steps.append({
                "step": i, "tool": r["tool"], "callable": r["callable"], "recorded": r["recorded"],
                "repeat": call_key(r["tool"], r["arguments"]) in self.executed_keys,
                "sources": r["sources"],
            })
        return {
            "harness": {
                "pi": f"{PI_PACKAGE}@{PI_VERSION}",
                "turn_index": h.turn_index,
                "turns_completed": h.turns_completed,
                "boundary_kind": h.boundary_kind,
                "tool_execution": h.config.tool_execution,
                "max_turns": mt,
                "turns_left": None if mt is None else mt - h.turn_index,
                "tail_role": tail,
                "n_messages": len(h.messages),
                "steering_queued": len(h.steering_queue.messages),
                "follow_up_queued": len(h.follow_up_queue.messages),
                "aborted": bool(h.aborted),
                "terminate_requested": False,
            },
            "calls": [dict(c) for c in self.calls],
            "last_batch": list(self.last_batch),
            "env": {"matches": dict(sorted(self.matches.items()))},
            "reference": {
                "n_steps": len(self.reference),
                "n_turns": len(self.ref_turns),
                "turn": self.ref_turn,
                "observed": sorted(observed),
                "remaining": remaining,
                "consumed": sorted(self.consumed),
                "scorable_remaining": scorable_remaining,
                "unmatched_scorable": unmatched,
                "end_complies": not scorable_remaining,
                "remaining_steps": rem_steps,
            },
        }


# --------------------------------------------------------------------------------------------- smolagents
#: smolagents verdict kind -> (error kind, cause) of the calls of a rejected step (classify_error reads Pi's texts)
_SMOL_ERRORS = {
    "unknown_tool": ("unknown_tool", "the tool is not among the callable tools"),
    "invalid_arguments": ("validation", "smolagents' argument validation rejected the call"),
    "parse_error": ("invalid_json", "smolagents found no tool call in the reply"),
    "rejected": ("tool_error", "smolagents rejected the step"),
}


class _Queue:
    messages: list = []


class _EnvWithIds:
    """The replay environment's call log with ``call_id`` filled in (smolagents' tools run without the call id):
    the entries a step added go, in order, to the executed calls of that step with the same hpd tool name."""

    def __init__(self, calls: list[dict]):
        self.calls = calls


class SmolagentsView:
    """What :class:`Tracker` reads of a harness, for a :class:`~hpd.harnesses.smolagents.SmolagentsHarness`.

    The mapping (smolagents has no Pi transcript): ``turn_index`` = model calls before this one;
    ``turns_completed`` = actions applied; ``max_turns`` = ``max_steps`` (smolagents then asks once more, the
    forced final answer); ``tool_execution`` = ``sequential`` (one tool worker, source order);
    ``transcript``/``messages`` = the boundary's request messages without the system message (what the model
    reads; tool outputs are user ``Observation:`` messages); no steering/follow-up queues. The last step's tool
    results: a call with a ``tool_output`` event is ok with that observation; any other call of the step failed
    with smolagents' step error (the error kind then comes from its verdict, :data:`_SMOL_ERRORS`). Calls carry
    hpd's tool names; ``final_answer`` is not a tool call here."""

    def __init__(self, h, env_calls_before: int = 0):
        self.h = h
        self._n0 = env_calls_before

    # --- Tracker.snapshot
    @property
    def turn_index(self) -> int:
        return len(self.h.boundaries) - 1

    @property
    def turns_completed(self) -> int:
        return sum(1 for b in self.h.boundaries if b.get("action") is not None)

    @property
    def boundary_kind(self):
        return self.h.boundary_kind

    @property
    def config(self):
        from types import SimpleNamespace

        return SimpleNamespace(max_turns=self.h._spec["max_steps"], tool_execution="sequential")

    @property
    def transcript(self) -> list[dict]:
        if self.h.done:
            return []
        return self.h.context()["messages"]

    messages = transcript
    steering_queue = _Queue()
    follow_up_queue = _Queue()
    aborted = False

    # --- Tracker.observe_step (call after h.step)
    def step_calls(self, msg: dict) -> list[dict]:
        """The tool calls of ``msg`` as the Tracker records them: hpd names, ``final_answer`` left out."""
        from hpd.harnesses.registry import get_harness

        return get_harness("smolagents").tool_calls(msg, self.h.tool_names)

    @property
    def last_tool_results(self) -> list[dict]:
        b = self.h.boundaries
        last_action = next((x["action"] for x in reversed(b) if x.get("action") is not None), None)
        if last_action is None:
            return []
        calls = self.step_calls(last_action)
        outs = {}
        # the tool outputs of the last step: events after the last model_call event before the current one
        ev = self.h.events
        idx = [i for i, e in enumerate(ev) if e.get("type") == "model_call"]
        lo = idx[-2] if (not self.h.done and len(idx) >= 2) else (idx[-1] if idx else 0)
        hi = idx[-1] if not self.h.done and idx else len(ev)
        for e in ev[lo:hi]:
            if e.get("type") == "tool_output":
                outs[e.get("id")] = e
        v = self.h.verdict()
        err = (v.reason or v.kind) if v is not None and v.kind != "calls" else ""
        res = []
        for c in calls:
            o = outs.get(c.get("id"))
            ok = o is not None
            body = str(o.get("observation") or "") if ok else (err or "the step failed")
            res.append({"role": "toolResult", "toolCallId": c.get("id"), "toolName": c.get("name"),
                        "content": [{"type": "text", "text": body}], "isError": not ok})
        return res

    @property
    def env(self):
        log = list(getattr(self.h.env, "calls", None) or [])
        new = [dict(e) for e in log[self._n0:]]
        b = self.h.boundaries
        last_action = next((x["action"] for x in reversed(b) if x.get("action") is not None), None)
        pending = list(new)
        for c in self.step_calls(last_action) if last_action else []:
            k = next((i for i, e in enumerate(pending) if e.get("name") == c.get("name")), None)
            if k is not None:
                pending.pop(k)["call_id"] = c.get("id")
        return _EnvWithIds(log[: self._n0] + new)

    def error_kind(self) -> tuple[str, str] | None:
        """(error kind, cause) for the failed calls of the last step, from smolagents' verdict; ``None`` when the
        step's failures are the tools' own (classified from the result text and match level)."""
        v = self.h.verdict()
        if v is None or v.valid:
            return None
        return _SMOL_ERRORS.get(v.kind, ("tool_error", (v.reason or v.kind)[:120]))


def smolagents_snapshot(tracker: "Tracker", h) -> dict:
    """:meth:`Tracker.snapshot` of a smolagents harness: the same layout; ``harness.pi`` is replaced by
    ``harness.harness`` (``smolagents@<version>``), and tool names (executed calls, remaining reference steps)
    are the names the model sees (:attr:`SmolagentsHarness.tool_names`; the tracker itself keeps hpd's)."""
    from hpd.harnesses.smolagents import SMOLAGENTS_VERSION

    st = tracker.snapshot(SmolagentsView(h))
    hs = st["harness"]
    del hs["pi"]
    st["harness"] = {"harness": f"smolagents@{SMOLAGENTS_VERSION}", **hs}
    names = h.tool_names
    for c in st["calls"]:
        c["name"] = names.get(c["name"], c["name"])
    for r in st["reference"]["remaining_steps"]:
        r["tool"] = names.get(r["tool"], r["tool"])
    return st


def smolagents_observe(tracker: "Tracker", h, msg: dict, ref_steps: list[int] | None, env_calls_before: int) -> None:
    """:meth:`Tracker.observe_step` for a smolagents harness (``final_answer`` is not recorded as a call; a
    rejected step's calls get the error kind of smolagents' verdict)."""
    view = SmolagentsView(h, env_calls_before)
    calls = view.step_calls(msg)
    tracker.observe_step(view, {**msg, "content": [{"type": "toolCall", **c} for c in calls]}, ref_steps,
                         env_calls_before)
    fix = view.error_kind()
    if fix is not None:
        for o in tracker.last_batch:
            c = tracker.calls[o - 1]
            if not c["ok"] and c["match"] is None:
                c["error_kind"], c["cause"] = fix
