"""A task's reference replayed through smolagents' ``ToolCallingAgent`` and scored with hpd's metrics.

The reference is the one hpd's Pi evaluation plays (:func:`hpd.eval.reference.reference_actions`: the
scorable gold calls, one message per call for a sequential task and one message with every call for a
parallel one, then the final answer as prose). Mapped onto smolagents' rules
(:func:`hpd.harnesses.smolagents.reference_to_smolagents`): calls keep their ids and get smolagents' tool
names; the final prose answer becomes one ``final_answer`` call with ``{"answer": <text>}`` (smolagents ends a
run only on that call). The tools are the task's :class:`~hpd.bench.replay.ReplayEnv` pool, the budget
``max_steps`` = reference turns + 2 (as the Pi replay's ``max_turns="auto"``).

Scoring (:func:`smolagents_prediction` -> :func:`hpd.eval.metrics.score_task`, the scorer of every hpd
episode): ``calls`` are the model's tool calls in order except ``final_answer``, with hpd's tool names;
``finished`` iff the run ended on a ``final_answer`` call (``end_reason == "final_answer"``) with a non-empty
answer, which is then the final answer (the forced answer after ``max_steps`` is not a finish within budget,
as Pi's ``max_turns`` end is not); ``protocol_failure`` iff the run ended on a generation error; the RC flag
of a turn is smolagents' verdict (:meth:`SmolagentsHarness.step_verdicts`) and, for calls, the executor's
schema check (``ToolPool.check``) as in :func:`hpd.eval.metrics.turn_valid`.

``python -c "from hpd.eval.harness_replay import main; main()" [DATA_DIR]`` prints the summary for a data
folder (TRAJECT-Bench's ``public_data``, or a built-in benchmark folder).
"""

from __future__ import annotations

import sys
from typing import Any

from hpd.eval import metrics as M


#: kept under its first name; the function lives beside Pi's ``prediction_from_messages`` in :mod:`hpd.eval.metrics`
smolagents_prediction = M.prediction_from_smolagents


def replay_reference_smolagents(task: Any, bench: Any, *, pool_k: int | None = 20,
                                max_steps: int | None = None) -> dict:
    """The reference of ``task`` through smolagents; the per-task metric row (+ ``end_reason``, match levels)."""
    from hpd.eval.reference import reference_actions
    from hpd.harnesses.smolagents import SmolagentsHarness, reference_to_smolagents

    env = bench.env(task, k=pool_k)
    actions = reference_actions(task, env.pool)
    h = SmolagentsHarness.start(task.query, env, max_steps=max_steps or len(actions) + 2)
    try:
        for i, a in enumerate(actions):
            if h.done:
                break
            h.step(reference_to_smolagents(a, h.tool_names, final=i == len(actions) - 1))
        row = M.score_task(task, smolagents_prediction(h, env.pool), env.pool)
        row["end_reason"] = h.end_reason
        row["match_levels"] = env.match_counts()
        row["verdicts"] = [v.kind for v in h.step_verdicts()]
        return row
    finally:
        h.close()


def replay_bench_smolagents(bench: Any, tasks: Any = None, *, pool_k: int | None = 20) -> tuple[list[dict], dict]:
    """Every task's reference through smolagents: ``(rows, summary)`` (summary as :func:`hpd.eval.rollout.summarize`)."""
    from hpd.eval.rollout import summarize

    rows = [replay_reference_smolagents(t, bench, pool_k=pool_k) for t in (bench.tasks if tasks is None else tasks)]
    return rows, summarize(rows)


def main(argv: list[str] | None = None) -> None:
    """Print the reference-through-smolagents summary of a data folder (default: TRAJECT-Bench's)."""
    import json

    from hpd.bench.loader import load_bench, resolve_data_dir

    argv = sys.argv[1:] if argv is None else argv
    data = resolve_data_dir(argv[0] if argv else None)
    bench = load_bench(data)
    rows, s = replay_bench_smolagents(bench)
    keys = ("n_tasks", "TS", "Step-SR", "Exact", "RC", "F1", "match_levels", "end_reasons")
    print(json.dumps({"data": str(data), **{k: s.get(k) for k in keys}}, indent=1))
    bad = [r["uid"] for r in rows if r["TS"] < 1.0]
    if bad:
        print(f"{len(bad)} tasks below TS 1: {bad[:20]}")
