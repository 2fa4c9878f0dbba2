"""Replay through the harness: boundary counts (D2), state snapshots, documents, restore, determinism."""

import json

import pytest

from hpd.boundary import Boundary, ReplayConfig, replay_task, restore
from hpd.boundary.store import dumps
from hpd.document import compile, parse, render
from hpd.harness.messages import text_of, tool_calls_of


def test_counts_match_d2_and_kinds(bench, sample_tasks):
    for t in sample_tasks:
        bs = replay_task(t, bench)
        assert len(bs) == t.n_boundaries, t.uid
        assert [b.index for b in bs] == list(range(len(bs)))
        assert bs[0].kind == "initial" and all(b.kind == "after_tool_batch" for b in bs[1:])
        assert bs[-1].reference_meta["kind"] == "final" and not tool_calls_of(bs[-1].reference)
        assert text_of(bs[-1].reference) == t.final_answer
        # native context: the query is the first user message; tool results follow the reference calls
        msgs0 = bs[0].context["messages"]
        assert msgs0[0]["role"] == "user" and msgs0[0]["content"] == t.query
        for prev, cur in zip(bs, bs[1:]):
            m = cur.context["messages"]
            assert m[: len(prev.context["messages"])] == prev.context["messages"]
            assert m[len(prev.context["messages"])]["content"] == prev.reference["content"]
            assert [r["toolCallId"] for r in m[len(prev.context["messages"]) + 1:]] == \
                [c["id"] for c in tool_calls_of(prev.reference)]


def test_sequential_grouping_and_state(bench, sample_tasks):
    t = next(t for t in sample_tasks if t.kind == "sequential" and any(s.status == "failed" for s in t.steps))
    bs = replay_task(t, bench)
    for b in bs[:-1]:
        assert len(tool_calls_of(b.reference)) == 1
        ref = b.state["reference"]
        assert ref["observed"] == list(range(b.index))
        assert ref["remaining"] == list(range(b.index, len(t.steps)))
        assert b.state["harness"]["turns_left"] == len(t.steps) + 1 + 2 - b.index
        assert len(b.state["calls"]) == b.index
    failed = next(i for i, s in enumerate(t.steps) if s.status == "failed")
    assert bs[failed].reference_meta["compliant"] is False
    assert "recorded_failure" in bs[failed].reference_meta["issues"]
    assert bs[failed].reference_meta["scorable"] is False
    after = bs[failed + 1]
    last = [c for c in after.state["calls"] if c["ordinal"] in after.state["last_batch"]]
    assert len(last) == 1 and last[0]["ok"] is False and last[0]["error_kind"] is not None
    doc = parse(after.document_text("runtime"))
    assert doc.last_batch[0].ok is False and doc.last_batch[0].error_kind == last[0]["error_kind"]
    assert doc.errors_made >= 1


def test_parallel_state_and_end(bench, sample_tasks):
    t = next(t for t in sample_tasks if t.kind == "parallel" and all(s.scorable for s in t.steps))
    b0, b1 = replay_task(t, bench)
    assert len(tool_calls_of(b0.reference)) == len(t.steps)
    assert b0.state["reference"]["end_complies"] is False and b1.state["reference"]["end_complies"] is True
    assert b0.can_end is False and b1.can_end is True
    assert b1.state["reference"]["consumed"] == list(range(len(t.steps)))
    assert b1.state["env"]["matches"].get("exact", 0) + b1.state["env"]["matches"].get("near", 0) == len(t.steps)
    d0, d1 = parse(b0.document_text("plan")), parse(b1.document_text("plan"))
    assert d0.steps_left == len(t.steps) and d0.complete is False and len(d0.plan) == len(t.steps)
    assert d1.steps_left == 0 and d1.complete is True and d1.plan == []
    assert d1.end.allowed and [u.call for u in d1.unused] == list(range(1, len(t.steps) + 1))
    o0 = parse(b0.document_text("oracle"))
    assert [(c.name, c.arguments) for c in o0.next_action.calls] == \
        [(c["name"], c["arguments"]) for c in tool_calls_of(b0.reference)]
    assert parse(b1.document_text("oracle")).next_action.final == t.final_answer
    # plan level: sources but never the values
    for s in d0.plan:
        assert all(a.source in ("query", "default", "unknown") for a in s.args)
    assert "next:" not in b0.document_text("plan")


def test_documents_roundtrip_and_levels(bench, sample_tasks):
    for t in sample_tasks:
        for b in replay_task(t, bench):
            for p in ("runtime", "plan", "oracle"):
                d = b.documents[p]
                rec = parse(d["text"])
                assert rec.privilege == p and render(rec) == d["text"]
                assert d["n_chars"] == len(d["text"]) and d["n_tokens"] > 0 and d["token_method"] == "estimate"
            assert len(b.documents["runtime"]["text"]) < len(b.documents["plan"]["text"]) <= \
                len(b.documents["oracle"]["text"])


def test_restore_and_forks(bench, sample_tasks):
    cfg = ReplayConfig()
    for t in sample_tasks[::3]:
        bs = replay_task(t, bench, cfg, keep_forks=True)
        for b in bs:
            h = restore(b, bench, cfg)
            assert h.context() == b.context
            assert b.harness.context() == b.context
            # compile from the restored harness == compile from the fork taken during the replay
            assert compile(b, h, "oracle") == compile(b, b.harness, "oracle") == parse(b.document_text("oracle"))
            # stepping the reference on a fork reaches the next boundary (or the end)
            g = h.fork()
            g.step(b.reference)
            if b.index + 1 < len(bs):
                assert g.context() == bs[b.index + 1].context
            else:
                assert g.done and g.end_reason == "natural"
            assert h.context() == b.context  # the fork did not touch the restored harness


def test_restore_rejects_other_config(bench, sample_tasks):
    b = replay_task(sample_tasks[0], bench)[0]
    with pytest.raises(ValueError, match="config"):
        restore(b, bench, ReplayConfig(pool_k=10))


def test_deterministic_records(bench, sample_tasks):
    for t in sample_tasks[:8]:
        a = [dumps(b.to_record()) for b in replay_task(t, bench)]
        b = [dumps(b.to_record()) for b in replay_task(t, bench)]
        assert a == b
        r = json.loads(a[0])
        assert Boundary.from_record(r).to_record() == r


def test_grouping_config(bench, sample_tasks):
    t = next(t for t in sample_tasks if t.kind == "parallel")
    bs = replay_task(t, bench, ReplayConfig(parallel="one_per_turn"))
    assert len(bs) == len(t.steps) + 1
    with pytest.raises(ValueError):
        ReplayConfig(sequential="two")
