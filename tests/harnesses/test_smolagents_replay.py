"""Every task's reference through smolagents' ToolCallingAgent scores 1.000, like through Pi (hpd.eval.harness_replay)."""

import pytest

pytest.importorskip("smolagents")

from hpd.eval.harness_replay import replay_bench_smolagents, replay_reference_smolagents  # noqa: E402


def test_reference_through_smolagents_scores_one_on_the_builtin_benchmark(bench):
    rows, s = replay_bench_smolagents(bench)
    assert s["n_tasks"] == len(bench.tasks) == 120
    assert s["TS"] == s["Step-SR"] == s["Exact"] == s["RC"] == s["F1"] == 1.0
    assert s["match_levels"] == {"exact": s["n_scorable_steps"]}
    assert s["end_reasons"] == {"final_answer": 120}
    for r in rows:   # every reference turn is a valid smolagents action, the last one its final answer
        assert set(r["verdicts"][:-1]) <= {"calls"} and r["verdicts"][-1] == "finish"


def test_a_missing_final_answer_is_not_a_finish(bench):
    """The same reference without its final_answer call runs into max_steps: smolagents forces an answer, which
    is not a finish within budget (TS 0), and the calls still match."""
    t = next(t for t in bench.tasks if t.kind == "sequential")
    r = replay_reference_smolagents(t, bench, max_steps=len(t.scorable_steps))
    assert r["end_reason"] == "max_steps" and r["TS"] == 0.0 and r["Step-SR"] == 1.0


@pytest.mark.slow
def test_reference_through_smolagents_on_traject_bench(traject_bench):
    """A TRAJECT-Bench figure (docs/new-harness.md): the reference through smolagents on every real task."""
    rows, s = replay_bench_smolagents(traject_bench)
    assert s["n_tasks"] == len(traject_bench.tasks)
    assert s["TS"] == s["Step-SR"] == s["Exact"] == s["F1"] == 1.0
    assert s["end_reasons"] == {"final_answer": len(traject_bench.tasks)} and set(s["match_levels"]) == {"exact"}
    # smolagents' validation rejects some gold calls (parameters outside the catalog schema; an integer for a
    # ['number', 'string'] type): those turns are invalid_arguments and never reach the environment (RC < 1)
    rejected = {k for r in rows for k in r["verdicts"]} - {"calls", "finish"}
    assert rejected <= {"invalid_arguments"} and s["RC"] < 1.0
    assert s["match_levels"]["exact"] < s["n_scorable_steps"]
