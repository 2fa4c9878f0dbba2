"""Fidelity of the Python harness to the real Pi (issue 18 item 3): the same greedy model on the same real
TRAJECT-Bench tasks, once in ``hpd.harness`` (in process) and once in the pinned npm Pi through the bridge
against ``hpd serve`` (``hpd eval --harness pi``), gives identical transcripts (up to ids, clocks and usage),
identical rows and identical metrics.

The model for the 24-task check is :class:`gold_policy.GoldScriptPolicy`, a deterministic policy whose
completion is a function of the prompt only; its variants send unknown tools, schema-invalid arguments,
``length`` stops and never-ending episodes through both loops. The real random tiny Qwen3 (greedy) is checked
on 3 tasks too. Needs the real data (fails when ``CI`` is set and it is missing) and Node + the bridge."""

from __future__ import annotations

import json

import pytest

from gold_policy import GoldScriptPolicy
from pi_helpers import bridge_or_fail, normalized

MAX_TURNS = 4


def fidelity_tasks(bench, n_extra: int = 4) -> list:
    """One task per (kind, domain) with a query not seen before, then ``n_extra`` more sequential ones."""
    seen, first, extra = set(), {}, []
    for t in bench.tasks:
        if t.query in seen:
            continue
        if (t.kind, t.domain) not in first:
            first[(t.kind, t.domain)] = t
            seen.add(t.query)
        elif t.kind == "sequential" and len(extra) < n_extra and t.domain not in {x.domain for x in extra}:
            extra.append(t)
            seen.add(t.query)
    return [first[k] for k in sorted(first)] + extra


def _shard_rows(out) -> dict:
    from hpd.eval.variant import transcripts

    return {r["uid"]: r for r in transcripts(out, n=10_000)}


def _both(bench, tasks, inner, tmp_path, workers: int = 2, pool_k: int = 20):
    from hpd.eval.pi_rollout import PiHarnessPolicy
    from hpd.eval.variant import evaluate_variant

    py = evaluate_variant(bench, tasks, inner, tmp_path / "python", max_turns=MAX_TURNS, pool_k=pool_k)
    pi_pol = PiHarnessPolicy(serve_policy=inner.policy, temperature=0.0, max_new_tokens=inner.sampling["max_new_tokens"],
                             workers=workers, inner=inner, sessions_dir=tmp_path / "pi" / "sessions")
    pi = evaluate_variant(bench, tasks, pi_pol, tmp_path / "pi", max_turns=MAX_TURNS, pool_k=pool_k)
    return py, pi


def _assert_identical(py, pi, tmp_path, tasks):
    drop = ("rollout", "policy")
    assert {k: v for k, v in py.items() if k not in drop} == {k: v for k, v in pi.items() if k not in drop}
    assert pi["rollout"]["harness"] == "pi" and pi["rollout"]["new_rows"] == len(tasks)
    a, b = _shard_rows(tmp_path / "python"), _shard_rows(tmp_path / "pi")
    assert sorted(a) == sorted(b) == sorted(t.uid for t in tasks)
    for uid in a:
        ra, rb = dict(a[uid]), dict(b[uid])
        ma, mb = ra.pop("messages"), rb.pop("messages")
        assert ra == rb, uid
        assert normalized(ma) == normalized(mb), uid
    return b


@pytest.mark.slow
@pytest.mark.node
def test_python_harness_equals_real_pi_on_traject(traject_bench, tok, tmp_path):
    bridge_or_fail()
    from hpd.eval.rollout import ModelEpisodePolicy

    tasks = fidelity_tasks(traject_bench)
    assert len(tasks) >= 20 and {t.kind for t in tasks} == {"parallel", "sequential"}
    inner = ModelEpisodePolicy(GoldScriptPolicy(tok, tasks, traject_bench.catalog), temperature=0.0, max_new_tokens=512)
    py, pi = _both(traject_bench, tasks, inner, tmp_path)
    rows = _assert_identical(py, pi, tmp_path, tasks)

    # the check covers more than the happy path: both end reasons, Pi's own tool errors, a length stop
    assert set(pi["end_reasons"]) == {"natural", "max_turns"}
    assert pi["match_levels"].get("exact", 0) > 20 and 0 < pi["TS"] < 1
    msgs = [m for r in rows.values() for m in r["messages"]]
    errors = [m["content"][0]["text"] for m in msgs if m["role"] == "toolResult" and m["isError"]]
    assert any("not found" in e for e in errors) and any("Validation failed" in e for e in errors)
    assert any(m["role"] == "assistant" and m["stopReason"] == "length" for m in msgs)
    # the Pi session logs are the real Pi's transcripts, system message (prompt + tool declarations) first
    from hpd.eval.pi_rollout import session_name

    first = tasks[0]
    lines = (tmp_path / "pi" / "sessions" / session_name(first.uid)).read_text().splitlines()
    session = [json.loads(x) for x in lines]
    assert session[0]["role"] == "system" and session[0]["toolsAdded"]
    assert normalized(session[1:]) == normalized(rows[first.uid]["messages"])


@pytest.mark.slow
@pytest.mark.node
def test_python_harness_equals_real_pi_with_tiny_model(traject_bench, tiny_dir, tmp_path, one_torch_thread):
    bridge_or_fail()
    from hpd.eval.rollout import make_model_policy

    tasks = fidelity_tasks(traject_bench)[::8]   # 3 tasks, 5 tools each: short prompts for a CPU
    inner = make_model_policy(str(tiny_dir), max_new_tokens=12)
    py, pi = _both(traject_bench, tasks, inner, tmp_path, workers=1, pool_k=5)
    rows = _assert_identical(py, pi, tmp_path, tasks)
    assert all(r["generated_tokens"] > 0 for r in rows.values())
