"""The reference policy: gold actions through the harness, and the evaluation driver.

Reference actions (scorable gold steps only; gold steps with tools outside the catalog cannot be called,
and failed gold steps are not achievable actions, docs/traject-bench.md sec 9.3):

* parallel task: one assistant message with every scorable gold call (source order), then one message with
  the reference final answer;
* sequential task: one assistant message per scorable gold call, in gold order, then the final answer
  (``final_answer["answer"]``).

Tool names are the pool's display names (the catalog entry the gold name resolves to); arguments are the
gold values with None/"" dropped. Call ids are ``ref_<turn>_<j>``.

``perturb`` (for tests of the metrics): ``"drop_call"`` removes the last scorable call; ``"shuffle"``
reverses the order of the calls of a sequential task (parallel tasks are left as is, they are order-free).

``evaluate(bench, tasks, policy)`` runs the episodes (``hpd.bench.episode.run_episodes``), scores each one
as it ends (``hpd.eval.metrics.score_task``; optional LLM judge) and returns ``(rows, summary)``.
"""

from __future__ import annotations

from typing import Any

from hpd.bench.episode import EpisodeState, run_episodes
from hpd.eval import metrics as M

PERTURBATIONS = ("drop_call", "shuffle")


def reference_calls(task, pool, perturb: str | None = None) -> list[dict]:
    calls = []
    for s in task.scorable_steps:
        calls.append({"name": pool.display(s.key), "arguments": s.call()["arguments"]})
    if perturb == "drop_call" and calls:
        calls = calls[:-1]
    elif perturb == "shuffle" and task.kind == "sequential":
        calls = calls[::-1]
    elif perturb not in (None, "drop_call", "shuffle"):
        raise ValueError(f"unknown perturbation {perturb!r}; choose from {PERTURBATIONS}")
    return calls


def reference_actions(task, pool, perturb: str | None = None) -> list[dict]:
    """The reference assistant messages of a task (see module docstring)."""
    from hpd.harness.messages import assistant_message, text, tool_call
    calls = reference_calls(task, pool, perturb)
    msgs = []
    if task.kind == "parallel":
        if calls:
            msgs.append(assistant_message([tool_call(f"ref_0_{j}", c["name"], c["arguments"])
                                           for j, c in enumerate(calls)]))
    else:
        for i, c in enumerate(calls):
            msgs.append(assistant_message([tool_call(f"ref_{i}_0", c["name"], c["arguments"])]))
    msgs.append(assistant_message([text(task.final_answer)]))
    return msgs


class ReferencePolicy:
    """Scripted policy replaying ``reference_actions`` (turn = number of assistant messages so far)."""

    name = "reference"

    def __init__(self, perturb: str | None = None):
        self.perturb = perturb

    def act(self, states: list[EpisodeState]) -> list[dict]:
        out = []
        for st in states:
            script = st.info.get("script")
            if script is None:
                script = st.info["script"] = reference_actions(st.task, st.env.pool, self.perturb)
            turn = sum(1 for m in st.harness.messages if m.get("role") == "assistant")
            out.append(script[min(turn, len(script) - 1)])
        return out


def evaluate(bench, tasks, policy, *, batch_size: int = 256, env_kwargs: dict | None = None,
             max_turns: int | None = 15, judge=None, keep_logs: bool = False) -> tuple[list[dict], dict]:
    """Run and score every task; returns per-task rows and the aggregate table (``metrics.aggregate``)."""
    rows: list[dict] = []

    def done(st: EpisodeState) -> bool:
        h = st.harness
        pred = M.prediction_from_messages(h.messages, st.env.pool, h.end_reason)
        jm = None
        if judge is not None:
            jm = judge.answer_match(st.task.query, st.task.final_answer, pred.final_answer)
        row = M.score_task(st.task, pred, st.env.pool, judge_match=jm)
        row["end_reason"] = h.end_reason
        row["match_levels"] = st.env.match_counts()
        if keep_logs:
            row["call_log"] = st.env.calls
        rows.append(row)
        return False

    run_episodes(bench, tasks, policy, batch_size=batch_size, env_kwargs=env_kwargs, max_turns=max_turns,
                 on_done=done)
    order = {t.uid: i for i, t in enumerate(tasks)}
    rows.sort(key=lambda r: order[r["uid"]])
    summary = M.aggregate(rows)
    levels: dict[str, int] = {}
    for r in rows:
        for k, v in r["match_levels"].items():
            levels[k] = levels.get(k, 0) + v
    summary["match_levels"] = dict(sorted(levels.items()))
    summary["end_reasons"] = _count(r["end_reason"] for r in rows)
    return rows, summary


def reference_action_acc(bench, tasks, pool_k: int | None = 20) -> dict:
    """Action-Acc of the reference itself over gold-history boundaries (a protocol sanity check: 1.0)."""
    scores, dropped = [], 0
    for t in tasks:
        pool = bench.pool(t, pool_k)
        for b in M.gold_boundaries(t):
            if b.dropped:
                dropped += 1
                continue
            calls = [M.Call(pool.display(s.key), s.call()["arguments"]) for s in b.target]
            scores.append(M.score_action(b, calls, pool, t.kind == "parallel"))
    return M.aggregate_actions(scores, dropped)


def _count(xs) -> dict[str, Any]:
    out: dict[str, int] = {}
    for x in xs:
        out[str(x)] = out.get(str(x), 0) + 1
    return dict(sorted(out.items()))
