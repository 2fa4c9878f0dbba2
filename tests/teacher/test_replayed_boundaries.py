"""Verification on replayed boundaries of the built-in benchmark with the TRAJECT quirks (through the harness
+ ReplayEnv): recorded failures, a schema-invalid reference call and an off-catalog tool included."""

import random

import pytest

from hpd.bench.match import IGNORABLE

from hpd.teacher import types as T
from hpd.teacher.boundaries import items_from_boundaries
from hpd.teacher.proposal import GarbageTeacher, OracleTeacher, ReferencePerturbedTeacher
from hpd.teacher.run import TeachConfig, teach
from hpd.teacher.verify import verify


@pytest.fixture(scope="module")
def world(builtin_bench):
    from hpd.boundary import ReplayConfig, replay_task

    bench = builtin_bench
    rng = random.Random(0)
    par = [t for t in bench.tasks if t.kind == "parallel"]
    seq = [t for t in bench.tasks if t.kind == "sequential"]
    tasks = rng.sample(par, min(20, len(par))) + rng.sample(seq, min(30, len(seq)))
    tasks += [t for t in bench.tasks if any(not s.scorable for s in t.steps) and t not in tasks]   # the quirks
    cfg = ReplayConfig()
    bs = [b for t in tasks for b in replay_task(t, bench, cfg, keep_forks=True)]
    return bench, cfg, bs, items_from_boundaries(bs)


def test_reference_verifies_iff_the_replay_calls_it_compliant(world):
    _, _, bs, items = world
    n_bad = 0
    for b, it in zip(bs, items):
        v = verify(it.reference, it, it.restore())
        assert v.ok == bool(b.reference_meta["compliant"]), (b.uid, v, b.reference_meta)
        n_bad += not v.ok
    assert 0 < n_bad < len(bs)  # the quirks are not executable; most references are


def test_oracle_full_coverage_at_attempt_one_on_executable_boundaries(world):
    _, _, bs, items = world
    ok_items = [it for b, it in zip(bs, items) if b.reference_meta["compliant"]]
    res = teach(ok_items, OracleTeacher(), TeachConfig(privilege="oracle"))
    d = res.diagnostics
    assert d["first_attempt_acceptance"] == 1.0 and d["attempts_to_full_coverage"] == 1 and d["n_fallback"] == 0
    assert d["realizability"]["differs_from_reference"] == 0.0


def test_garbage_zero_coverage_everywhere(world):
    _, _, _, items = world
    res = teach(items, GarbageTeacher(), TeachConfig(attempts=3, seed=5))
    d = res.diagnostics
    assert d["coverage_by_attempt"] == [0.0, 0.0, 0.0] and d["n_fallback"] == len(items)


def test_one_changed_argument_rejected_with_the_right_reason(world):
    _, _, bs, items = world
    res = teach(items, ReferencePerturbedTeacher(), TeachConfig(attempts=1))
    seen = set()
    for b, r in zip(bs, res.records):
        v = r["candidates"][0]["verdict"]
        ref_args = (b.reference["content"][0].get("arguments") or {}) if not r["is_final"] else {}
        if not r["is_final"] and ref_args and all(k.lower() in IGNORABLE for k in ref_args):
            continue  # only ignorable arguments (limit, page, ...): a changed value is a legitimate near match
        assert not v["ok"], b.uid
        if not b.reference_meta["compliant"]:
            continue
        if r["is_final"]:
            assert v["reasons"] == [T.EMPTY_ANSWER]
            continue
        # the changed value either breaks the schema (Pi validation, or the env's TRAJECT schema check,
        # e.g. a DATE pattern) or leaves a well-formed call the recording does not cover; the reason
        # is pinned on the changed call (the first), every other call of the batch still replays
        calls = v["calls"]
        assert calls[0]["reason"] in (T.NO_RECORDED_RESPONSE, T.INVALID_ARGS), (b.uid, v)
        expect = T.NO_RECORDED_RESPONSE if calls[0]["match"] == "miss" else T.INVALID_ARGS
        assert calls[0]["match"] in ("miss", "schema_error", None)
        assert v["reasons"] == [expect] and calls[0]["reason"] == expect, (b.uid, v)
        assert all(c["match"] in ("exact", "near") and c["reason"] is None for c in calls[1:]), (b.uid, v)
        seen.add(expect)
    assert seen == {T.NO_RECORDED_RESPONSE, T.INVALID_ARGS}
