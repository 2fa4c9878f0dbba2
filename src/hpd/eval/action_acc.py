"""Action-Acc of any policy on the gold-history boundary protocol (docs/metrics.md).

The contexts are the *native* contexts that boundary replay captures (``hpd.boundary.replay_task``): the
reference trajectory driven through the harness, so the history at boundary b is the gold history rendered
exactly as the harness renders it. Boundary b of the replay is gold boundary b of
:func:`hpd.eval.metrics.gold_boundaries` (same D2 grouping: parallel 2, sequential steps+1), and the policy's
action there is scored with :func:`hpd.eval.metrics.score_action`. The policy sees no control document.
"""

from __future__ import annotations

from typing import Callable, Sequence

from hpd.eval import metrics as M
from hpd.harness.messages import tool_calls_of

ActFn = Callable[[list[dict]], list[dict]]   # native contexts -> one assistant message each


def boundary_contexts(bench, tasks: Sequence, replay_config=None) -> list[tuple]:
    """``(task, gold_boundary, native_context)`` for every D2 boundary of ``tasks``."""
    from hpd.boundary import replay_task

    out = []
    for t in tasks:
        golds = M.gold_boundaries(t)
        bds = replay_task(t, bench, replay_config, compile_docs=False)
        if len(bds) != len(golds):
            raise RuntimeError(f"{t.uid}: replay gave {len(bds)} boundaries, the D2 protocol {len(golds)}")
        out.extend((t, g, b.context) for g, b in zip(golds, bds))
    return out


def _smolagents_action(bench, task, gold, msg: dict, pool, pool_k, full_domain: bool) -> dict:
    from hpd.harnesses.registry import get_harness

    spec = get_harness("smolagents")
    if gold.kind == "finish":
        ok = spec.is_finish(msg)
        return {"correct": ok, "correct_name": ok, "partial": float(ok)}
    names = spec.tool_names(bench.env(task, k=pool_k, full_domain=full_domain))
    back = {v: k for k, v in names.items()}
    calls = [M.Call(back.get(c.get("name"), c.get("name")), c.get("arguments")) for c in tool_calls_of(msg)]
    return M.score_action(gold, calls, pool, task.kind == "parallel")


def policy_act(episode_policy) -> ActFn:
    """The native act function of a :class:`hpd.eval.rollout.ModelEpisodePolicy` (same backend and
    sampling settings as its rollouts; one batched generate call per chunk)."""
    pol, sampling = episode_policy.policy, dict(episode_policy.sampling)

    def act(contexts: list[dict]) -> list[dict]:
        cands = pol.act(contexts, n=1, enable_thinking=episode_policy.enable_thinking,
                        seed=episode_policy.seed, **sampling)
        return [c[0].message for c in cands]

    return act


def action_acc(bench, items: list[tuple], act: ActFn, *, pool_k: int | None = 20, full_domain: bool = False,
               batch_size: int = 32, harness: str = "pi") -> dict:
    """Score ``act`` at every kept boundary of ``items`` (from :func:`boundary_contexts`).

    ``harness="smolagents"`` (contexts replayed through smolagents): a FINISH boundary is correct iff the action
    is smolagents' finish (one ``final_answer`` call); a call boundary scores the calls with hpd's tool names
    (a ``final_answer`` call stays a call, which matches no gold step)."""
    kept = [it for it in items if not it[1].dropped]
    scores, kinds = [], []
    for lo in range(0, len(kept), batch_size):
        chunk = kept[lo:lo + batch_size]
        msgs = act([ctx for _, _, ctx in chunk])
        for (task, gold, _), msg in zip(chunk, msgs):
            pool = bench.pool(task, pool_k, full_domain=full_domain)
            if harness == "smolagents":
                scores.append(_smolagents_action(bench, task, gold, msg, pool, pool_k, full_domain))
                kinds.append(gold.kind)
                continue
            calls = [M.Call(c["name"], c.get("arguments")) for c in tool_calls_of(msg)]
            scores.append(M.score_action(gold, calls, pool, task.kind == "parallel"))
            kinds.append(gold.kind)
    out = M.aggregate_actions(scores, len(items) - len(kept))
    # The split shows where accuracy comes from: any reply without a tool call is a correct FINISH, so a
    # model that never calls a tool still scores on the finish boundaries.
    for kind in ("calls", "finish"):
        sub = [s for s, k in zip(scores, kinds) if k == kind]
        out[f"Action-Acc_{kind}"] = sum(float(s["correct"]) for s in sub) / len(sub) if sub else 0.0
        out[f"n_boundaries_{kind}"] = len(sub)
    return out
