"""AutoProbe: compile a Boundary's runtime state into a ControlDocument by probing the harness there.

``compile(boundary, harness_fork, privilege)`` reads the boundary's state snapshot
(:mod:`hpd.boundary.state`) and probes ``harness_fork`` (a Harness parked at that boundary; it is
forked again for every probe, so the caller's fork is never changed):

- **callable tools**: the tools the harness offers now (``fork.context()["tools"]``) and the argument
  names their JSON Schema requires;
- **termination**: a fork is stepped with a text-only final message; the run may end now iff that
  fork ends ``natural``. ``final_turn`` states what a compliant final turn looks like;
- **last batch**: each call of the previous turn with its outcome and, for errors, the kind and a
  value-free cause (Pi's validation paths, the replay environment's error class);
- **unused results**: earlier successful results no later call has drawn a value from;
- **reference progress** (plan+): remaining steps, whether each would repeat an executed call, where
  its argument values come from (:mod:`hpd.document.sources`), and whether ending now is complete;
- **next action** (oracle): the reference action itself; at a boundary whose reference action is a
  labelled defect, the correct action there (``reference_meta["clean_action"]``, :mod:`hpd.boundary.replay`).

Without a fork (e.g. compiling from stored shards) the tools come from the stored native context and
the end probe is replaced by its static equivalent (the tail is not an assistant message and no
queued message would start another turn); on replayed boundaries both give the same answer.
"""

from __future__ import annotations

from typing import Any

from hpd.harness.messages import assistant_message, text_of, tool_calls_of

from .schema import (
    PRIVILEGES,
    ActionCall,
    ArgSource,
    CallOutcome,
    ControlDocument,
    EndRule,
    NextAction,
    PlanStep,
    ResultRef,
    ToolSpec,
)
from .render import render
from .tokens import token_length

END_RULE = "a reply with no toolCall blocks ends the run"
FINAL_TURN = "one assistant message: the answer as non-empty text, no toolCall blocks"
FINAL_TURN_BLOCKED = "none: the harness would not end the run with the next reply"


def _get(b: Any, name: str):
    return b[name] if isinstance(b, dict) else getattr(b, name)


def probe_end(fork, *, consume: bool = False) -> bool:
    """Step a fork of ``fork`` (or ``fork`` itself when ``consume``) with the harness's finish action (Pi: a
    text-only reply; smolagents: a ``final_answer`` call, :meth:`hpd.harnesses.registry.HarnessSpec.finish_action`);
    True iff the run then ends by that rule (Pi ``natural``, smolagents ``final_answer``/``max_steps``)."""
    from hpd.harnesses.registry import get_harness, harness_name

    name = harness_name(fork)
    g = fork if consume else fork.fork()
    if name == "pi":
        g.step(assistant_message("(probe)"))
        return bool(g.done and g.end_reason == "natural")
    g.step(get_harness(name).finish_action("(probe)", g))
    return bool(g.done and g.end_reason in ("final_answer", "max_steps"))


def _static_end(state: dict) -> bool:
    h = state.get("harness", {})
    return h.get("tail_role") != "assistant" and not h.get("follow_up_queued") and not h.get("steering_queued")


def _tools(ctx_tools: list[dict]) -> list[ToolSpec]:
    out = []
    for t in ctx_tools or []:
        params = t.get("parameters") or {}
        req = params.get("required") or []
        out.append(ToolSpec(name=t.get("name", ""), required=[str(r) for r in req]))
    return out


def probe(boundary, harness_fork=None, *, consume_fork: bool = False) -> dict:
    """The privilege-independent probe results (shared by every level). ``consume_fork``: the caller
    no longer needs ``harness_fork``, so the end probe may step it instead of a fresh fork."""
    state = _get(boundary, "state")
    if harness_fork is not None:
        tools = harness_fork.context()["tools"]
        allowed = probe_end(harness_fork, consume=consume_fork)
    else:
        tools = _get(boundary, "context")["tools"]
        allowed = _static_end(state)
    return {"tools": _tools(tools), "allowed": allowed}


def compile_all(boundary, harness_fork=None, privileges=PRIVILEGES, *,
                consume_fork: bool = False) -> dict[str, ControlDocument]:
    """``{privilege: ControlDocument}`` for each requested level, probing the harness once."""
    pr = probe(boundary, harness_fork, consume_fork=consume_fork)
    state = _get(boundary, "state")
    hs = state["harness"]
    end_rule, final_turn = END_RULE, FINAL_TURN
    if str(hs.get("harness", "")).startswith("smolagents"):
        from hpd.harnesses.registry import get_harness

        spec = get_harness("smolagents")
        end_rule = spec.end_rule
        final_turn = (spec.final_turn if _get(boundary, "kind") != "forced_final_answer"
                      else "one assistant message: the answer as non-empty text (no tools are offered)")
    calls = state.get("calls", [])
    by_ord = {c["ordinal"]: c for c in calls}
    last = [by_ord[o] for o in state.get("last_batch", []) if o in by_ord]
    base = dict(
        kind=_get(boundary, "kind"),
        index=_get(boundary, "index"),
        turn=hs["turns_completed"],
        execution=hs["tool_execution"],
        turns_left=hs["turns_left"],
        tail=hs["tail_role"] or "none",
        tools=pr["tools"],
        last_batch=[
            CallOutcome(name=str(c["name"]), ok=c["ok"], error_kind=c["error_kind"], cause=c["cause"]) for c in last
        ],
        unused=[ResultRef(call=c["ordinal"], name=str(c["name"])) for c in calls if c["ok"] and not c["used"]],
        calls_made=len(calls),
        errors_made=sum(1 for c in calls if not c["ok"]),
        end=EndRule(allowed=pr["allowed"], rule=end_rule, final_turn=final_turn if pr["allowed"] else FINAL_TURN_BLOCKED),
    )
    ref = state.get("reference", {})
    plan = [
        PlanStep(
            step=s["step"] + 1, tool=s["tool"], callable=s["callable"], recorded=s["recorded"], repeat=s["repeat"],
            args=[ArgSource(name=n, source=src) for n, src in s["sources"].items()],
        )
        for s in ref.get("remaining_steps", [])
    ]
    out = {}
    for p in privileges:
        extra: dict = {}
        if p in ("plan", "oracle"):
            extra.update(steps_left=len(ref.get("remaining", [])), complete=bool(ref.get("end_complies")), plan=plan)
        if p == "oracle":
            extra["next_action"] = next_action(_clean_or_reference(boundary))
        out[p] = ControlDocument(privilege=p, **base, **extra)
    return out


def _clean_or_reference(boundary) -> dict:
    """The action the oracle states: the clean action at a labelled defect, else the reference action."""
    try:
        meta = _get(boundary, "reference_meta") or {}
    except (KeyError, AttributeError):
        meta = {}
    return meta.get("clean_action") or _get(boundary, "reference")


def next_action(msg: dict) -> NextAction:
    calls = tool_calls_of(msg)
    if calls:
        return NextAction(calls=[ActionCall(name=str(c.get("name")), arguments=dict(c.get("arguments") or {}))
                                 for c in calls])
    return NextAction(final=text_of(msg))


def compile(boundary, harness_fork=None, privilege: str = "runtime") -> ControlDocument:  # noqa: A001
    """Compile the document at one privilege level (see module docstring)."""
    if privilege not in PRIVILEGES:
        raise ValueError(f"unknown privilege {privilege!r} (expected one of {PRIVILEGES})")
    return compile_all(boundary, harness_fork, (privilege,))[privilege]


def document_entry(doc: ControlDocument, tokenizer=None) -> dict:
    """What a Boundary stores per level: the rendering and its length."""
    text = render(doc)
    n, method = token_length(text, tokenizer)
    return {"text": text, "n_tokens": n, "token_method": method, "n_chars": len(text)}
