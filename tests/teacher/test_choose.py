"""hpd.teacher.choose: candidate teachers run one attempt on the same seeded probe sample; the higher
first-attempt acceptance wins (ties: the first listed); the report is written and a rerun resumes."""

import json
import random

import pytest

from hpd.teacher.boundaries import items_from_boundaries
from hpd.teacher.choose import choose_teacher, probe_sample
from hpd.teacher.proposal import GarbageTeacher, OracleTeacher
from hpd.teacher.run import TeachConfig


@pytest.fixture(scope="module")
def items(builtin_bench):
    from hpd.boundary import ReplayConfig, replay_task

    tasks = random.Random(1).sample([t for t in builtin_bench.tasks if all(s.scorable for s in t.steps)], 6)
    bs = [b for t in tasks for b in replay_task(t, builtin_bench, ReplayConfig(), keep_forks=True)]
    return items_from_boundaries(bs)


def test_probe_sample_is_seeded_and_keeps_input_order(items):
    a, b = probe_sample(items, 5, seed=3), probe_sample(items, 5, seed=3)
    assert [i.id for i in a] == [i.id for i in b] and len(a) == 5
    order = [it.id for it in items]
    assert [order.index(i.id) for i in a] == sorted(order.index(i.id) for i in a)
    assert len(items) > 5 and [i.id for i in probe_sample(items, 5, seed=4)] != [i.id for i in a]   # seed matters
    assert len(probe_sample(items, 10_000, seed=0)) == len(items)


def test_higher_first_attempt_acceptance_wins_and_report_is_written(items, tmp_path):
    cfg = TeachConfig(k=2, attempts=5, privilege="oracle", seed=0)
    made = []

    def make(t):
        def f():
            made.append(t.__class__.__name__)
            return t
        return f

    chosen, rep = choose_teacher({"garbage": make(GarbageTeacher()), "oracle": make(OracleTeacher())}, items, cfg,
                                 tmp_path, n_probe=6)
    assert chosen == "oracle" and made == ["GarbageTeacher", "OracleTeacher"]
    c = rep["candidates"]
    assert c["oracle"]["first_attempt_acceptance"] == 1.0 and c["garbage"]["first_attempt_acceptance"] == 0.0
    assert c["oracle"]["n_boundaries"] == 6 == rep["n_probe"] and rep["k"] == 2
    saved = json.loads((tmp_path / "teacher_choice.json").read_text())
    assert saved["chosen"] == "oracle" and set(saved["candidates"]) == {"garbage", "oracle"}
    for name in ("garbage", "oracle"):      # one attempt each: a normal teach folder, resumable
        d = json.loads((tmp_path / name / "diagnostics.json").read_text())
        assert len(d["coverage_by_attempt"]) == 1
    again, _ = choose_teacher({"garbage": make(GarbageTeacher()), "oracle": make(OracleTeacher())}, items, cfg,
                              tmp_path, n_probe=6)
    assert again == "oracle"


def test_ties_go_to_the_first_listed(items, tmp_path):
    cfg = TeachConfig(privilege="oracle")
    chosen, _ = choose_teacher({"b": OracleTeacher, "a": OracleTeacher}, items, cfg, tmp_path, n_probe=4)
    assert chosen == "b"
    with pytest.raises(ValueError):
        choose_teacher({}, items, cfg, tmp_path / "none")
