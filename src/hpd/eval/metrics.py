"""HPD metrics for TRAJECT-Bench-shaped tasks: pure functions (docs/metrics.md; docs/traject-bench.md sec 6, 9.3).

Notation: ``S`` = the task's *scorable* gold steps (tool resolves into the catalog AND status ``success``);
``C`` = the predicted calls, i.e. every tool call the policy attempted in the episode, in order (executed or
rejected by the harness). A call *matches* a gold step iff its replay level would be ``exact`` or ``near``
(``hpd.bench.match``; the call's name is resolved within the episode pool, so calls naming a tool that is
not offered never match).

* **Matching.** Parallel tasks: maximum bipartite (multiset) matching, order-free. Sequential tasks:
  order-consistent matching, the LCS of ``C`` and ``S`` under the match relation (extra calls in between,
  e.g. retries, are allowed).
* **Step-SR** = ``sum_tasks |matched S| / sum_tasks |S|`` (micro, key ``Step-SR``); also the mean of the
  per-task ratios (``Step-SR_macro``). Diagnostics: ``Step-SR@name`` (tool-name-only matching: the
  multiset-correct fix of TRAJECT Inclusion) and ``call_precision`` = ``sum |matched| / sum |C|``.
* **Exact** (strict trajectory success): parallel: ``|C| == |S|`` and every call matched (the multisets
  agree); sequential: ``|C| == |S|`` and ``C[i]`` matches ``S[i]`` for every i (no extras, no omissions, same
  order). Departure from the note's "normalised signature" wording: a ``near`` match counts, consistently
  with Step-SR.
* **TS** (task success) = 1 iff (1) every step of ``S`` is matched (extras allowed), (2) the episode ended
  with a non-empty final answer through the finish action (an assistant message without tool calls,
  ``stopReason == "stop"``) within the turn budget, (3) no unrecoverable protocol failure (end reason
  ``error``/``aborted``). ``TS_judge`` additionally requires the LLM judge's ``match`` (``hpd.eval.judge``),
  ``TS_grounded`` additionally requires evidence recall >= 0.5.
* **F1** = SQuAD token F1 between the predicted final answer and the reference (``final_answer`` for
  parallel, ``final_answer["answer"]`` for sequential; never ``reason``): lowercase, punctuation -> space,
  drop a/an/the, whitespace split, bag-of-tokens precision/recall; 0 if the prediction is empty. Mean over
  tasks.
* **RC** (runtime compliance, per model turn) = 1 iff the assistant message is exactly one protocol-valid
  action: either a tool call / parallel batch in which every call names a pool tool, has JSON-object
  arguments and passes the executor's schema check (``ToolPool.check``), with ``stopReason`` not ``length``;
  or a finish action (no tool calls, non-empty text, ``stopReason == "stop"``). RC = micro mean over all
  turns of all tasks; ``RC_episode`` = share of episodes terminated via finish within budget.
* **Repo-comparable** (exact, case-sensitive tool names, over the *full* gold list, like TRAJECT's
  ``utils/metrics.py``): ``EM_TRAJECT`` = set equality (parallel) / list equality (sequential) of names;
  ``Inclusion`` = ``sum_n min(#gt(n), #pred(n)) / max(1, len(gt))`` (duplicate-count bug fixed: gold-vs-gold
  is 1); ``Inclusion_buggy`` = the repo's ``|set(gt) & set(pred)| / max(1, len(gt))``; ``Usage``: for each
  name in ``set(gt) & set(pred)``, the first gold and first predicted occurrences have equal normalised
  parameter lists (``traject_normalize_value``, None/"" dropped). Departure: predicted calls carry one
  argument object, so the gold required/optional lists are merged before comparing. ``Usage`` is
  micro-averaged over compared tools, ``Usage_macro`` over tasks with >= 1 compared tool.
* **Action-Acc** (gold-history boundaries, see ``gold_boundaries``): mean correctness over kept boundaries.
  Call boundary (sequential b < n): correct iff the action has exactly one call and it matches the target
  step; ``@name`` variant compares the canonical name only. Parallel b = 0: strict = the call multiset
  matches the scorable gold multiset (``|C| == |S|``, all matched); partial = call-level F1. FINISH boundary:
  correct iff the action has no tool call. Boundaries whose target is an unscorable step are dropped and
  counted (``n_dropped``).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

from hpd.bench.canon import is_empty, signature, traject_normalize_value
from hpd.bench.match import match_level

# --------------------------------------------------------------------------------------------------
# predictions


@dataclass
class Call:
    name: str
    arguments: Any
    turn: int = 0


@dataclass
class Prediction:
    """What a policy did in one episode (everything the metrics need)."""

    calls: list[Call] = field(default_factory=list)
    final_answer: str = ""
    finished: bool = False            # finish action within budget
    protocol_failure: bool = False    # unrecoverable: end reason error/aborted
    turn_valid: list[bool] = field(default_factory=list)   # RC flag per model turn


def turn_valid(msg: dict, pool) -> bool:
    """RC flag of one assistant message (see module docstring)."""
    calls = [b for b in msg.get("content") or [] if isinstance(b, dict) and b.get("type") == "toolCall"]
    stop = msg.get("stopReason")
    if not calls:
        txt = "".join(b.get("text", "") for b in msg.get("content") or [] if isinstance(b, dict)
                      and b.get("type") == "text") if isinstance(msg.get("content"), list) else str(msg.get("content") or "")
        return stop == "stop" and bool(txt.strip())
    if stop in ("length", "error", "aborted"):
        return False
    for c in calls:
        if c.get("argumentsError") is not None or not isinstance(c.get("arguments"), dict):
            return False
        key = pool.by_name.get(c.get("name"))
        if key is None or pool.check(key, c["arguments"]) is not None:
            return False
    return True


def prediction_from_messages(messages: list[dict], pool, end_reason: str | None) -> Prediction:
    """Build a ``Prediction`` from a harness transcript (Pi messages) and the run's ``end_reason``."""
    p = Prediction()
    turn = 0
    last = None
    for m in messages:
        if m.get("role") != "assistant":
            continue
        for b in m.get("content") or []:
            if isinstance(b, dict) and b.get("type") == "toolCall":
                p.calls.append(Call(str(b.get("name")), b.get("arguments"), turn))
        p.turn_valid.append(turn_valid(m, pool))
        turn += 1
        last = m
    if last is not None and end_reason == "natural":
        has_calls = any(isinstance(b, dict) and b.get("type") == "toolCall" for b in last.get("content") or [])
        txt = "".join(b.get("text", "") for b in last.get("content") or [] if isinstance(b, dict) and b.get("type") == "text")
        if not has_calls and last.get("stopReason") == "stop" and txt.strip():
            p.final_answer = txt
            p.finished = True
    p.protocol_failure = end_reason in ("error", "aborted")
    return p


def prediction_from_smolagents(h: Any, pool) -> Prediction:
    """A finished :class:`~hpd.harnesses.smolagents.SmolagentsHarness` run -> what the metrics need (a harness
    whose finish is a tool call): ``calls`` are the model's tool calls in order except ``final_answer``, with
    hpd's tool names; ``finished`` iff the run ended on a ``final_answer`` call (``end_reason ==
    "final_answer"``) with a non-empty answer, which is then the final answer: ``final_answer``'s argument
    (the forced answer after ``max_steps`` is not a finish within budget, as Pi's ``max_turns`` end is not);
    ``protocol_failure`` iff the run ended on a generation error; a turn's RC flag is smolagents' verdict of it
    and, for calls, the executor's schema check (``ToolPool.check``) as in :func:`turn_valid`."""
    p = Prediction()
    calls = h.calls()
    for c in calls:
        if not c["final_answer"]:
            p.calls.append(Call(str(c["name"]), c["arguments"], c["turn"]))
    for turn, v in enumerate(h.step_verdicts()):
        ok = v.valid
        for c in calls:
            if c["turn"] == turn and not c["final_answer"]:
                key = pool.by_name.get(c["name"])
                ok = ok and isinstance(c["arguments"], dict) and key is not None and pool.check(key, c["arguments"]) is None
        p.turn_valid.append(ok)
    answer = "" if h.final_answer is None else str(h.final_answer)
    if h.end_reason == "final_answer" and answer.strip():
        p.final_answer, p.finished = answer, True
    p.protocol_failure = h.end_reason == "error"
    return p


# --------------------------------------------------------------------------------------------------
# matching


def _call_key(call: Call, pool) -> str | None:
    return pool.key_of(call.name) if isinstance(call.name, str) else None


def compat_matrix(calls: list[Call], steps: list, pool) -> list[list[bool]]:
    """``M[i][j]`` = call i matches scorable step j (exact or near)."""
    cat = pool.catalog
    out = []
    for c in calls:
        key = _call_key(c, pool)
        args = c.arguments if isinstance(c.arguments, dict) else None
        if key is None or args is None:
            out.append([False] * len(steps))
            continue
        sig = signature(key, args)
        out.append([match_level(key, args, sig, s, cat[key]) in ("exact", "near") for s in steps])
    return out


def max_bipartite(m: list[list[bool]], n_right: int) -> int:
    """Size of a maximum matching (Kuhn's algorithm); rows = calls, columns = steps."""
    owner = [-1] * n_right

    def augment(i: int, seen: list[bool]) -> bool:
        for j in range(n_right):
            if m[i][j] and not seen[j]:
                seen[j] = True
                if owner[j] < 0 or augment(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    return sum(1 for i in range(len(m)) if augment(i, [False] * n_right))


def lcs(m: list[list[bool]], n_right: int) -> int:
    """Length of the longest order-consistent matching (LCS under the relation ``m``)."""
    n = len(m)
    dp = [[0] * (n_right + 1) for _ in range(n + 1)]
    for i in range(1, n + 1):
        for j in range(1, n_right + 1):
            dp[i][j] = dp[i - 1][j - 1] + 1 if m[i - 1][j - 1] else max(dp[i - 1][j], dp[i][j - 1])
    return dp[n][n_right]


def _name_matrix(calls: list[Call], steps: list, pool) -> list[list[bool]]:
    """Name-only relation: the call's pool key equals the step's catalog key."""
    keys = [_call_key(c, pool) for c in calls]
    return [[k is not None and k == s.key for s in steps] for k in keys]


# --------------------------------------------------------------------------------------------------
# answers

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans({c: " " for c in string.punctuation})


def answer_tokens(s: str) -> list[str]:
    s = (s or "").lower().translate(_PUNCT)
    return _ARTICLES.sub(" ", s).split()


def multiset_f1(pred: list, ref: list) -> float:
    """F1 of two multisets (bags): 0 if either is empty or nothing is shared."""
    if not pred or not ref:
        return 0.0
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    prec, rec = common / len(pred), common / len(ref)
    return 2 * prec * rec / (prec + rec)


def token_f1(pred: str, ref: str) -> float:
    """SQuAD-style bag-of-tokens F1 (see module docstring); 0 if the prediction is empty."""
    return multiset_f1(answer_tokens(pred), answer_tokens(ref))


_NUM = re.compile(r"-?\d+(?:\.\d+)?")
_ENT = re.compile(r"\b[A-Z][A-Za-z]{3,}\b")


def evidence_set(task) -> set[str]:
    """Numbers and capitalised words (>= 4 letters) in both the gold answer and the scorable gold outputs."""
    outs = " ".join(s.output for s in task.steps if s.scorable)
    fa = task.final_answer
    cand = set(_NUM.findall(fa)) | set(_ENT.findall(fa))
    return {c for c in cand if c in outs}


def evidence_recall(task, pred_answer: str) -> float:
    ev = evidence_set(task)
    if not ev:
        return 1.0
    return sum(1 for e in ev if e in (pred_answer or "")) / len(ev)


# --------------------------------------------------------------------------------------------------
# repo-comparable (TRAJECT utils/metrics.py)


def _norm_params(args: dict) -> list:
    items = [(str(k).strip(), traject_normalize_value(v)) for k, v in (args or {}).items() if not is_empty(v)]
    return sorted(((k, repr(v)) for k, v in items))


def traject_repo_metrics(task, calls: list[Call]) -> dict:
    """EM_TRAJECT, Inclusion (fixed), Inclusion_buggy and the Usage list (see module docstring)."""
    gt = [s.tool for s in task.steps]
    pr = [c.name for c in calls if isinstance(c.name, str)]
    em = (gt == pr) if task.kind == "sequential" else (set(gt) == set(pr))
    cg, cp = Counter(gt), Counter(pr)
    inc = sum(min(cg[n], cp[n]) for n in cg) / max(1, len(gt))
    inc_bug = len(set(gt) & set(pr)) / max(1, len(gt))
    usage = []
    for n in sorted(set(gt) & set(pr)):
        g = next(s for s in task.steps if s.tool == n)
        p = next(c for c in calls if c.name == n)
        pargs = p.arguments if isinstance(p.arguments, dict) else {}
        usage.append(_norm_params(g.arguments) == _norm_params(pargs))
    return {"EM_TRAJECT": float(em), "Inclusion": inc, "Inclusion_buggy": inc_bug, "usage": usage}


# --------------------------------------------------------------------------------------------------
# per task and aggregate


def score_task(task, pred: Prediction, pool, *, judge_match: bool | None = None) -> dict:
    """All per-task metrics of one episode (see module docstring)."""
    S = task.scorable_steps
    C = pred.calls
    m = compat_matrix(C, S, pool)
    if task.kind == "parallel":
        matched = max_bipartite(m, len(S))
        matched_name = max_bipartite(_name_matrix(C, S, pool), len(S))
        exact = len(C) == len(S) and matched == len(S)
    else:
        matched = lcs(m, len(S))
        matched_name = lcs(_name_matrix(C, S, pool), len(S))
        exact = len(C) == len(S) and all(m[i][i] for i in range(len(S)))
    all_matched = matched == len(S)
    ts = all_matched and pred.finished and not pred.protocol_failure
    ev = evidence_recall(task, pred.final_answer)
    row = {
        "uid": task.uid, "kind": task.kind, "domain": task.domain, "difficulty": task.difficulty,
        "n_scorable": len(S), "n_calls": len(C), "matched": matched, "matched_name": matched_name,
        "Step-SR": matched / len(S) if S else 1.0,
        "Exact": float(exact), "TS": float(ts),
        "TS_grounded": float(ts and ev >= 0.5), "evidence_recall": ev,
        "F1": token_f1(pred.final_answer, task.final_answer),
        "turns": len(pred.turn_valid), "valid_turns": sum(pred.turn_valid),
        "finished": pred.finished, "protocol_failure": pred.protocol_failure,
    }
    if judge_match is not None:
        row["judge_match"] = bool(judge_match)
        row["TS_judge"] = float(all_matched and pred.finished and not pred.protocol_failure and judge_match)
    row.update(traject_repo_metrics(task, C))
    return row


def _mean(xs: Iterable[float]) -> float:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else 0.0


def aggregate(rows: list[dict]) -> dict:
    """Aggregate per-task rows into the metric table (stable keys; fractions in [0, 1])."""
    n_s = sum(r["n_scorable"] for r in rows)
    n_c = sum(r["n_calls"] for r in rows)
    turns = sum(r["turns"] for r in rows)
    usage_all = [u for r in rows for u in r["usage"]]
    out = {
        "TS": _mean(r["TS"] for r in rows),
        "F1": _mean(r["F1"] for r in rows),
        "Step-SR": (sum(r["matched"] for r in rows) / n_s) if n_s else 0.0,
        "Step-SR_macro": _mean(r["Step-SR"] for r in rows),
        "Step-SR@name": (sum(r["matched_name"] for r in rows) / n_s) if n_s else 0.0,
        "call_precision": (sum(r["matched"] for r in rows) / n_c) if n_c else 0.0,
        "RC": (sum(r["valid_turns"] for r in rows) / turns) if turns else 0.0,
        "RC_episode": _mean(float(r["finished"]) for r in rows),
        "Exact": _mean(r["Exact"] for r in rows),
        "TS_grounded": _mean(r["TS_grounded"] for r in rows),
        "evidence_recall": _mean(r["evidence_recall"] for r in rows),
        "EM_TRAJECT": _mean(r["EM_TRAJECT"] for r in rows),
        "Inclusion": _mean(r["Inclusion"] for r in rows),
        "Inclusion_buggy": _mean(r["Inclusion_buggy"] for r in rows),
        "Usage": _mean(float(u) for u in usage_all),
        "Usage_macro": _mean(_mean(float(u) for u in r["usage"]) for r in rows if r["usage"]),
        "n_tasks": len(rows),
        "n_scorable_steps": n_s,
        "n_calls": n_c,
        "n_turns": turns,
    }
    judged = [r for r in rows if "TS_judge" in r]
    if judged:
        out["TS_judge"] = _mean(r["TS_judge"] for r in judged)
        out["judge_match"] = _mean(float(r["judge_match"]) for r in judged)
    return out


# --------------------------------------------------------------------------------------------------
# Action-Acc: gold-history boundary protocol


@dataclass
class GoldBoundary:
    """One Action-Acc boundary. ``history`` = gold steps already taken (with recorded outputs, failed ones
    included); ``target`` = gold steps to emit next (scorable only; one for a sequential call boundary, the
    whole scorable set for parallel b=0), empty for a FINISH boundary. ``dropped`` = the target is an
    unscorable gold step (not scored, counted)."""

    uid: str
    b: int
    kind: str                 # "calls" | "finish"
    history: list
    target: list
    dropped: bool = False


def gold_boundaries(task) -> list[GoldBoundary]:
    """D2 boundaries of a task: parallel b=0 (all calls in one turn) and b=1 (FINISH); sequential b=0..n
    (target gold call b+1, or FINISH at b=n) with the gold history ``steps[:b]``."""
    if task.kind == "parallel":
        return [GoldBoundary(task.uid, 0, "calls", [], task.scorable_steps),
                GoldBoundary(task.uid, 1, "finish", list(task.steps), [])]
    out = []
    for b, s in enumerate(task.steps):
        out.append(GoldBoundary(task.uid, b, "calls", task.steps[:b], [s] if s.scorable else [],
                                dropped=not s.scorable))
    out.append(GoldBoundary(task.uid, len(task.steps), "finish", list(task.steps), []))
    return out


def score_action(boundary: GoldBoundary, calls: list[Call], pool, parallel: bool) -> dict:
    """Score one action (its tool calls; ``[]`` = finish) at a gold boundary (see module docstring)."""
    if boundary.kind == "finish":
        ok = not calls
        return {"correct": ok, "correct_name": ok, "partial": float(ok)}
    S = boundary.target
    m = compat_matrix(calls, S, pool)
    if parallel:
        matched = max_bipartite(m, len(S))
        mn = max_bipartite(_name_matrix(calls, S, pool), len(S))
        prec = matched / len(calls) if calls else 0.0
        rec = matched / len(S) if S else 0.0
        f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
        return {"correct": len(calls) == len(S) and matched == len(S),
                "correct_name": len(calls) == len(S) and mn == len(S), "partial": f1}
    ok = len(calls) == 1 and m[0][0]
    okn = len(calls) == 1 and _name_matrix(calls, S, pool)[0][0]
    return {"correct": ok, "correct_name": okn, "partial": float(ok)}


def aggregate_actions(scores: list[dict], n_dropped: int) -> dict:
    """``Action-Acc``, ``Action-Acc@name``, ``Action-Acc_partial`` over kept boundaries."""
    return {
        "Action-Acc": _mean(float(s["correct"]) for s in scores),
        "Action-Acc@name": _mean(float(s["correct_name"]) for s in scores),
        "Action-Acc_partial": _mean(s["partial"] for s in scores),
        "n_boundaries": len(scores),
        "n_dropped": n_dropped,
    }
