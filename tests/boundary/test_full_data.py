"""A TRAJECT-Bench fact: every real task's boundary count == D2 and every document round-trips exactly (slow)."""

import pytest

from hpd.boundary import ReplayConfig, replay_task
from hpd.document import parse, render


@pytest.mark.slow
def test_all_tasks_d2_and_roundtrip(traject_bench):
    bench = traject_bench
    cfg = ReplayConfig()
    n_b = n_docs = 0
    for t in bench.tasks:
        bs = replay_task(t, bench, cfg)
        assert len(bs) == t.n_boundaries, t.uid
        n_b += len(bs)
        for b in bs:
            for p, d in b.documents.items():
                rec = parse(d["text"])
                assert rec.privilege == p and render(rec) == d["text"], (b.uid, p)
                n_docs += 1
    assert n_b == sum(t.n_boundaries for t in bench.tasks)
    assert n_docs == 3 * n_b
