"""Metric definitions (docs/metrics.md), the reference policy and its perturbations, Action-Acc."""

import pytest

from hpd.eval import metrics as M
from hpd.eval.reference import ReferencePolicy, reference_action_acc
from hpd.eval.rollout import run_rollouts, summarize


def test_token_f1_and_inclusion_bug(mini):
    assert M.token_f1("The lion lives", "a lion lives!") == 1.0
    assert M.token_f1("", "x") == 0.0
    assert 0 < M.token_f1("lion lives in forest", "lion lives in savanna") < 1
    t = mini.task("sequential/Zoology/traj_query.json#0")     # Lookup twice -> the repo's duplicate bug
    gold_calls = [M.Call(s.tool, s.arguments) for s in t.steps]
    r = M.traject_repo_metrics(t, gold_calls)
    assert r["EM_TRAJECT"] == 1.0 and r["Inclusion"] == 1.0 and r["Inclusion_buggy"] == 0.75
    assert all(r["usage"])


def test_matching_algorithms():
    m = [[True, True], [True, False]]
    assert M.max_bipartite(m, 2) == 2
    assert M.lcs([[False, True], [True, False]], 2) == 1        # crossed order
    assert M.lcs([[True, False], [False, False], [False, True]], 2) == 2   # extra call in between allowed


def _run(bench, tasks, perturb=None):
    """The reference (or a perturbed one) through the one episode driver and scorer; no run folder."""
    rows, _ = run_rollouts(bench, tasks, ReferencePolicy(perturb), batch_size=256, keep_messages=False)
    return {r["uid"]: r for r in rows}, summarize(rows)


def test_reference_and_perturbations(mini):
    tasks = mini.tasks
    ref, s = _run(mini, tasks)
    for k in ("TS", "Step-SR", "Exact", "RC", "F1", "Step-SR_macro"):
        assert s[k] == 1.0, k
    assert s["Inclusion_buggy"] < 1.0 and s["n_tasks"] == 13
    drop, sd = _run(mini, tasks, "drop_call")
    assert sd["TS"] == 0.0 and sd["Exact"] == 0.0 and sd["Step-SR"] < 1.0
    assert sd["RC"] == 1.0 and sd["F1"] == 1.0                    # untouched by a missing call
    shuf, ss = _run(mini, tasks, "shuffle")
    for uid, r in shuf.items():
        if r["kind"] == "parallel":
            assert r["TS"] == r["Exact"] == r["Step-SR"] == 1.0   # order-free
        else:
            assert r["Exact"] == 0.0 and r["TS"] == 0.0 and r["Step-SR"] < 1.0
    assert ss["RC"] == 1.0 and ss["F1"] == 1.0


def test_rc_flags(mini):
    from hpd.harness.messages import assistant_message, text, tool_call
    t = mini.task("parallel/Zoology/simple_ver.json#0")
    pool = mini.pool(t)
    ok = assistant_message([tool_call("a", pool.display("animal db: search"), {"q": "x"})])
    assert M.turn_valid(ok, pool)
    assert not M.turn_valid(assistant_message([tool_call("a", "Nope", {})]), pool)
    assert not M.turn_valid(assistant_message([tool_call("a", pool.display("animal db: search"), {})]), pool)
    assert not M.turn_valid(assistant_message([text("  ")]), pool)
    assert M.turn_valid(assistant_message([text("answer")]), pool)
    assert not M.turn_valid(assistant_message([text("answer")], stop_reason="length"), pool)


def test_action_acc_boundaries(mini, bench):
    t = mini.task("sequential/Zoology/traj_query.json#1")
    bs = M.gold_boundaries(t)
    assert len(bs) == len(t.steps) + 1 and [b.dropped for b in bs] == [False, True, False, False, False]
    assert bs[2].history == t.steps[:2] and bs[2].target == [t.steps[2]] and bs[-1].kind == "finish"
    p = mini.task("parallel/Zoology/simple_ver.json#0")
    pb = M.gold_boundaries(p)
    assert len(pb) == 2 and len(pb[0].target) == 3 and pb[1].kind == "finish"
    pool = mini.pool(p)
    calls = [M.Call(pool.display(s.key), s.arguments) for s in pb[0].target]
    assert M.score_action(pb[0], calls, pool, True)["correct"]
    part = M.score_action(pb[0], calls[:2], pool, True)
    assert not part["correct"] and 0 < part["partial"] < 1
    assert M.score_action(pb[1], [], pool, True)["correct"] and not M.score_action(pb[1], calls, pool, True)["correct"]
    seqpool = mini.pool(t)
    wrong = [M.Call(seqpool.display("animal db: habitat: lookup"), {"id": 999})]
    sc = M.score_action(bs[2], wrong, seqpool, False)
    assert not sc["correct"] and sc["correct_name"]
    acc = reference_action_acc(bench, bench.tasks)
    n_d2 = sum(t.n_boundaries for t in bench.tasks)
    assert acc["Action-Acc"] == 1.0 and acc["n_boundaries"] + acc["n_dropped"] == n_d2


def test_reference_and_perturbations_on_builtin(bench):
    tasks = bench.tasks[::4]
    _, s = _run(bench, tasks)
    assert s["TS"] == s["Step-SR"] == s["Exact"] == s["RC"] == 1.0
    _, sd = _run(bench, tasks, "drop_call")
    assert sd["Step-SR"] < 1.0 and sd["Exact"] == 0.0 and sd["TS"] == 0.0 and sd["RC"] == 1.0 and sd["F1"] == 1.0
    rows, ss = _run(bench, tasks, "shuffle")
    par = [r for r in rows.values() if r["kind"] == "parallel"]
    seq = [r for r in rows.values() if r["kind"] == "sequential"]
    assert all(r["Exact"] == r["TS"] == r["Step-SR"] == 1.0 for r in par)
    assert seq and any(r["Exact"] == 0.0 and r["Step-SR"] < 1.0 for r in seq)
    assert ss["RC"] == 1.0 and ss["F1"] == 1.0


@pytest.mark.slow
def test_reference_every_task(traject_bench):
    """A TRAJECT-Bench fact: the reference scores 1.000 on every real task (the protocol is sound)."""
    _, s = _run(traject_bench, traject_bench.tasks)
    assert s["TS"] == s["Step-SR"] == s["Exact"] == s["RC"] == 1.0
    assert s["match_levels"] == {"exact": s["n_scorable_steps"]}
