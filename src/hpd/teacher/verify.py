"""Harness verification of a teacher proposal, on a fork of the boundary state.

Checks, in this order (each failing check adds its code to ``Verdict.reasons``; all checks run
so the diagnostics see every problem, but ``reasons[0]`` is the first one in check order):

1. **parses** (``parse_error``): the candidate is an assistant message with usable content (a
   ``stopReason`` error/aborted message, i.e. a failed teacher call, is ``teacher_error``), no tool call whose argument text failed to parse
   (``argumentsError``, Pi 1.6), no leftover ``<tool_call>`` markup in the text (a call the model
   attempted but :func:`hpd.policy.chat.parse_action` could not read). ``stopReason`` ``length``
   gives ``truncated`` (Pi 1.6 refuses to execute calls of a length-truncated message).
2. **each tool exists** (``unknown_tool``): Pi's own lookup (exact, case-sensitive name in the
   context's tools; result text ``Tool <name> not found``), or the replay env's ``unknown_tool``.
3. **arguments validate** (``invalid_args``): Pi's validation as run by the harness (result text
   ``Validation failed for tool ...`` / ``Invalid arguments for tool ...``), or the replay env's
   TRAJECT schema check (match level ``schema_error``).
4. **recorded response** (``no_recorded_response``): the environment's match level for the call
   is ``exact`` or ``near``; ``miss``, ``global`` (another task's recording) or any other level is
   rejected; a call answered by a recorded *failure* of an unscorable gold step (TRAJECT
   sequential "ERROR: ..." steps) is ``recorded_failure``. Environments that log no match level (live simulated tools) accept any non-error
   result; an error result there is ``tool_error``.
5. **no repeat** (``repeated_call``): the call's canonical signature was already executed earlier
   in the episode (or earlier in the same candidate), unless the reference action at this boundary
   itself repeats it as scorable gold (TRAJECT has 87 sequential tasks with recorded identical
   repeats, and the gold is the gold). A reference the data marks unscorable here
   (``reference_meta["scorable"]`` false: a recorded failure, an off-catalog call, a labelled
   injected defect such as the built-in benchmark's ``repeat``) earns no exemption, so an injected
   identical repeat is rejected like any other.
6. **ends only when allowed**: a candidate without tool calls ends the run (Pi's structural
   termination). Allowed only when ``item.can_end`` (``premature_end``), and then with a non-empty
   answer text (``empty_answer``).

Steps 2-4 execute the candidate with ``fork.step(candidate)`` on a fork of the boundary harness,
so texts and semantics are exactly Pi's; nothing in the boundary state changes.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from . import types as T
from .canon import signature, text_of, tool_calls
from .item import TeachItem

OK_MATCHES = ("exact", "near")


def executed_signatures(messages: list[dict]) -> Counter:
    """Counter of canonical signatures of every tool call in assistant messages of a transcript."""
    c: Counter = Counter()
    for m in messages:
        if isinstance(m, dict) and m.get("role") == "assistant":
            for tc in tool_calls(m):
                c[signature(tc.get("name", ""), tc.get("arguments", {}))] += 1
    return c


def _result_text(res: dict) -> str:
    content = res.get("content")
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in (content or []) if isinstance(b, dict) and b.get("type") == "text")


def _match_level(res: dict, env_log_entry: Any) -> str | None:
    """Replay match level of one executed call: from the result's ``details`` (``match`` key) or
    from the environment's per-call log entry; None when the environment logs none."""
    det = res.get("details")
    if isinstance(det, dict):
        m = det.get("match")
        if isinstance(m, str):
            return m
    if isinstance(env_log_entry, dict):
        m = env_log_entry.get("match")
        if isinstance(m, str):
            return m
    if isinstance(env_log_entry, str):
        return env_log_entry
    return None


def _env_log(h: Any) -> list | None:
    env = getattr(h, "env", None)
    for name in ("match_log", "log", "calls"):
        log = getattr(env, name, None)
        if isinstance(log, list):
            return log
    return None


def _preflight_error(res: dict) -> bool:
    """Pi resolved the call before execute(): unknown tool or invalid arguments."""
    return bool(res.get("isError")) and _result_text(res).startswith(("Tool ", "Validation failed", "Invalid arguments"))


def _classify_call(res: dict | None, level: str | None) -> tuple[str | None, str]:
    """One executed call -> (reason code or None, note)."""
    if res is None:
        return T.TOOL_ERROR, "no tool result"
    txt = _result_text(res)
    if res.get("isError"):
        if txt.startswith("Tool ") and txt.endswith(" not found"):
            return T.UNKNOWN_TOOL, txt[:200]
        if txt.startswith("Validation failed for tool") or txt.startswith("Invalid arguments for tool"):
            return T.INVALID_ARGS, txt.splitlines()[0][:200]
        if txt.startswith('Tool call "') and "output token limit" in txt:
            return T.TRUNCATED, txt[:200]
    if level is not None:
        if level in OK_MATCHES:
            return None, level
        if level == "unknown_tool":
            return T.UNKNOWN_TOOL, level
        if level == "schema_error":
            return T.INVALID_ARGS, txt.splitlines()[0][:200] if txt else level
        return T.NO_RECORDED_RESPONSE, level
    if res.get("isError"):
        return T.TOOL_ERROR, txt[:200]
    return None, "ok"


def _execute(calls: list[dict], message: dict, item: TeachItem, base: Any, add) -> list[dict] | None:
    """Checks 2-4: step ``message`` on a fork of the boundary harness and classify each call's outcome;
    returns the per-call info, or None when the harness itself raised (recorded as a tool error)."""
    tool_names = {t.get("name") for t in (item.context.get("tools") or [])}
    for c in calls:
        if c.get("name") not in tool_names:
            add(T.UNKNOWN_TOOL, str(c.get("name"))[:80])
    g = base.fork()
    n0 = len(g.transcript)
    log0 = _env_log(g)
    l0 = len(log0) if log0 is not None else 0
    try:
        g.step(message)
    except Exception as exc:  # a harness bug must not kill the teach run; record it
        add(T.TOOL_ERROR, f"harness raised {type(exc).__name__}: {exc}"[:200])
        return None
    new = g.transcript[n0:]
    results = {m.get("toolCallId"): m for m in new if isinstance(m, dict) and m.get("role") == "toolResult"}
    log1 = _env_log(g)
    new_log = list(log1[l0:]) if log1 is not None else []
    by_id = {e.get("call_id"): e for e in new_log if isinstance(e, dict) and e.get("call_id") is not None}
    li = 0
    call_info: list[dict] = []
    for c in calls:
        res = results.get(c.get("id"))
        entry = by_id.get(c.get("id"))
        if entry is None and not by_id and res is not None and not _preflight_error(res):
            # a log without call ids: entries exist only for calls that reached execute(), in source order
            if li < len(new_log):
                entry = new_log[li]
                li += 1
        level = _match_level(res, entry) if res is not None else None
        code, note = _classify_call(res, level)
        if code is None and isinstance(entry, dict) and entry.get("scorable") is False and entry.get("is_error"):
            code, note = T.RECORDED_FAILURE, "answered by a recorded failure (unscorable step)"
        if code:
            add(code, note)
        call_info.append({"name": c.get("name"), "match": level, "is_error": bool(res and res.get("isError")), "reason": code})
    return call_info


def _repeated(calls: list[dict], item: TeachItem, call_info: list[dict], add) -> None:
    """Check 5: a call already executed earlier in the episode, beyond what the reference repeats here."""
    prior = executed_signatures(item.context.get("messages") or [])
    ref_meta = (item.meta or {}).get("reference_meta") or {}
    exempt = ref_meta.get("scorable", True) is not False
    ref_here = Counter(signature(c.get("name", ""), c.get("arguments", {}))
                       for c in (tool_calls(item.reference) if exempt else []))
    seen: Counter = Counter()
    for i, c in enumerate(calls):
        sig = signature(c.get("name", ""), c.get("arguments", {}))
        if prior[sig] + seen[sig] >= 1 and seen[sig] + 1 > ref_here[sig]:
            add(T.REPEATED_CALL, str(c.get("name"))[:80])
            call_info[i]["reason"] = call_info[i]["reason"] or T.REPEATED_CALL
        seen[sig] += 1


#: smolagents verdict kind -> reason code (hpd.harness.interface.VERDICT_KINDS)
_SMOL_REASONS = {"parse_error": T.PARSE_ERROR, "unknown_tool": T.UNKNOWN_TOOL, "invalid_arguments": T.INVALID_ARGS,
                 "length": T.TRUNCATED, "error": T.TEACHER_ERROR, "aborted": T.TEACHER_ERROR,
                 "rejected": T.INVALID_ARGS}


def _verify_smolagents(message: dict, item: TeachItem, base: Any, calls: list[dict], body: str,
                       reasons: list[str], notes: list[str], add) -> T.Verdict:
    """Checks 2-6 at a smolagents boundary, in smolagents' rules: the candidate is stepped into a fork of the
    boundary's agent and smolagents' verdict decides (:meth:`~hpd.harnesses.smolagents.SmolagentsHarness.verdict`:
    an unknown tool, arguments its validation rejects, a reply it finds no call in, ``final_answer`` next to
    other calls are rejected, with smolagents' text as the note); the calls it executed must then have a
    recorded response (check 4, the replay environment's match levels, in execution order) and not repeat an
    earlier call (check 5, against the calls the agent made before, :meth:`SmolagentsHarness.calls`). The run
    ends on a ``final_answer`` call (at the ``forced_final_answer`` boundary, on any reply): allowed only when
    ``item.can_end`` and with a non-empty answer (check 6)."""
    from hpd.harnesses.registry import get_harness

    spec = get_harness("smolagents")
    kind = getattr(base, "boundary_kind", None)
    finish = spec.is_finish(message, kind)
    g = base.fork()
    log = getattr(g.env, "calls", None)
    l0 = len(log) if isinstance(log, list) else 0
    try:
        g.step(message)
        v = g.verdict()
    except Exception as exc:  # a harness bug must not kill the teach run; record it
        add(T.TOOL_ERROR, f"harness raised {type(exc).__name__}: {exc}"[:200])
        return T.Verdict(ok=False, reasons=reasons, calls=[], detail="; ".join(notes)[:500])
    finally:
        close = getattr(g, "close", None)
        if callable(close):
            close()
    if v is not None and not v.valid:
        add(_SMOL_REASONS.get(v.kind, T.INVALID_ARGS), (v.reason or v.kind)[:200])
    names = base.tool_names
    back = {n: h for h, n in names.items()}
    real = [c for c in calls if c.get("name") != "final_answer"]
    new_log = list(log[l0:]) if isinstance(log, list) else []
    call_info: list[dict] = []
    for c in real:
        hname = back.get(c.get("name"), c.get("name"))
        k = next((i for i, e in enumerate(new_log) if isinstance(e, dict) and e.get("name") == hname), None)
        entry = new_log.pop(k) if k is not None else None
        level = entry.get("match") if entry else None
        code = None
        if entry is not None:
            if level not in OK_MATCHES:
                code = T.UNKNOWN_TOOL if level == "unknown_tool" else (
                    T.INVALID_ARGS if level == "schema_error" else T.NO_RECORDED_RESPONSE)
            elif entry.get("scorable") is False and entry.get("is_error"):
                code = T.RECORDED_FAILURE
            if code:
                add(code, str(level))
        call_info.append({"name": c.get("name"), "match": level, "is_error": entry is None or bool(entry.get("is_error")),
                          "reason": code})
    if v is not None and v.kind == "tool_error" and any(ci["match"] is None for ci in call_info):
        add(T.TOOL_ERROR, (v.reason or "")[:200])
    prior: Counter = Counter(signature(c["name"], c.get("arguments") or {}) for c in base.calls()
                             if not c["final_answer"])
    ref_meta = (item.meta or {}).get("reference_meta") or {}
    exempt = ref_meta.get("scorable", True) is not False
    ref_here = Counter(signature(back.get(c.get("name"), c.get("name")), c.get("arguments", {}))
                       for c in (tool_calls(item.reference) if exempt else []) if c.get("name") != "final_answer")
    seen: Counter = Counter()
    for i, c in enumerate(real):
        sig = signature(back.get(c.get("name"), c.get("name")), c.get("arguments", {}))
        if prior[sig] + seen[sig] >= 1 and seen[sig] + 1 > ref_here[sig]:
            add(T.REPEATED_CALL, str(c.get("name"))[:80])
            call_info[i]["reason"] = call_info[i]["reason"] or T.REPEATED_CALL
        seen[sig] += 1
    if finish:
        if not item.can_end:
            add(T.PREMATURE_END, "final answer before the contract allows ending")
        elif not spec.answer_of(message, kind).strip():
            add(T.EMPTY_ANSWER, "final answer with empty answer text")
    return T.Verdict(ok=not reasons, reasons=reasons, calls=call_info, detail="; ".join(notes)[:500])


def verify(message: dict | None, item: TeachItem, base: Any, *, text: str = "") -> T.Verdict:
    """Verify one candidate assistant message at ``item``'s boundary; ``base`` is the restored
    boundary Harness (it is forked, never stepped)."""
    reasons: list[str] = []
    notes: list[str] = []

    def add(code: str, note: str = "") -> None:
        if code not in reasons:
            reasons.append(code)
            notes.append(f"{code}: {note}" if note else code)

    # 1. parses
    if not isinstance(message, dict) or message.get("role") != "assistant" or not isinstance(message.get("content"), list):
        return T.Verdict(ok=False, reasons=[T.PARSE_ERROR], detail="not an assistant message")
    stop = message.get("stopReason")
    calls = tool_calls(message)
    if stop in ("error", "aborted"):
        add(T.TEACHER_ERROR, message.get("errorMessage", stop) or stop)
    if any("argumentsError" in c for c in calls):
        add(T.PARSE_ERROR, "tool call arguments are not a JSON object")
    body = text_of(message)
    if "<tool_call>" in body or "</tool_call>" in body:
        add(T.PARSE_ERROR, "unparsed <tool_call> markup in the text")
    if stop == "length":
        add(T.TRUNCATED, "stopReason length")
    call_info: list[dict] = []
    if hasattr(base, "step_verdicts"):   # smolagents' ToolCallingAgent (hpd.harnesses.smolagents)
        return _verify_smolagents(message, item, base, calls, body, reasons, notes, add)
    if calls:   # 2-5: execute on a fork of the boundary state, then look for repeated calls
        call_info = _execute(calls, message, item, base, add)
        if call_info is None:
            return T.Verdict(ok=False, reasons=reasons, calls=[], detail="; ".join(notes))
        _repeated(calls, item, call_info, add)
    elif not item.can_end:   # 6. ends the run
        add(T.PREMATURE_END, "no tool calls before the contract allows ending")
    elif not body.strip():
        add(T.EMPTY_ANSWER, "final turn with empty answer text")
    return T.Verdict(ok=not reasons, reasons=reasons, calls=call_info, detail="; ".join(notes)[:500])
