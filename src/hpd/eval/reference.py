"""The reference policy: gold actions through the harness, and its Action-Acc.

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

The episodes are run and scored like any policy's: :func:`hpd.eval.variant.evaluate_variant` (and
:func:`hpd.eval.rollout.run_rollouts` below it).
"""

from __future__ import annotations

from hpd.bench.episode import EpisodeState
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
        if perturb not in (None, *PERTURBATIONS):
            raise ValueError(f"unknown perturbation {perturb!r}; choose from {PERTURBATIONS}")
        self.perturb = perturb

    def describe(self) -> dict:
        return {"name": self.name, "perturb": self.perturb}

    def close(self) -> None:
        """Nothing to stop: no model."""

    def act(self, states: list[EpisodeState]) -> list[dict]:
        out = []
        for st in states:
            script = st.info.get("script")
            h = st.harness
            smol = hasattr(h, "tool_names")   # smolagents: its tool names, the final answer as a final_answer call
            if script is None:
                script = reference_actions(st.task, st.env.pool, self.perturb)
                if smol:
                    from hpd.harnesses.smolagents import reference_to_smolagents

                    script = [reference_to_smolagents(m, h.tool_names, final=i == len(script) - 1)
                              for i, m in enumerate(script)]
                st.info["script"] = script
            turn = h.turn_index if smol else sum(1 for m in h.messages if m.get("role") == "assistant")
            out.append(script[min(turn, len(script) - 1)])
        return out


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
