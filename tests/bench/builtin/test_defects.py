"""hpd.bench.builtin.defects: labelled defective reference actions in the train split of the built-in
benchmark (rate, determinism, split, replay labels, verification, oracle document, metrics, accounting)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpd.bench.builtin import generate
from hpd.bench.builtin.defects import EXPECTED_REASON, KINDS, SCHEMA_VARIANTS, boundary_defect, defect_accounting
from hpd.bench.loader import load_bench
from hpd.bench.split import make_split

N, RATE = 30, 0.12


def _files(d: Path) -> dict[str, bytes]:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*.json"))}


def _entries(d: Path) -> dict[str, dict]:
    out = {}
    for f in sorted(d.glob("parallel/*/*.json")) + sorted(d.glob("sequential/*/*.json")):
        for i, e in enumerate(json.loads(f.read_text())):
            out[f"{f.relative_to(d).as_posix()}#{i}"] = e
    return out


def _task_kinds(t) -> list[str]:
    return [s.defect for s in t.steps if s.defect] + (["premature_finish"] if t.final_after is not None else [])


@pytest.fixture(scope="module")
def gen(tmp_path_factory):
    root = tmp_path_factory.mktemp("defects")
    clean = generate(root / "clean", seed=0, n_per_domain=N)
    dirty = generate(root / "dirty", seed=0, n_per_domain=N, defect_rate=RATE)
    return clean, dirty, load_bench(clean), load_bench(dirty)


@pytest.fixture(scope="module")
def sample(gen):
    """One defective train task per (task kind, defect kind), replayed with the demo's config."""
    from hpd.boundary import ReplayConfig, replay_task
    from hpd.teacher.boundaries import items_from_boundaries

    _, _, _, bench = gen
    picked = {}
    for t in bench.tasks:
        ks = _task_kinds(t)
        if ks:
            picked.setdefault((t.kind, ks[0]), t)
    cfg = ReplayConfig(pool_k=3, max_turns="auto")
    out = []
    for _, t in sorted(picked.items()):
        bs = replay_task(t, bench, cfg, keep_forks=True)
        out.append((t, bs, items_from_boundaries(bs)))
    return bench, cfg, out


# ----------------------------------------------------------------------------- data

def test_deterministic_and_default_is_clean(gen, tmp_path):
    clean, dirty, _, _ = gen
    again = generate(tmp_path / "again", seed=0, n_per_domain=N, defect_rate=RATE)
    assert _files(again) == _files(dirty)
    assert "defects" not in json.loads((clean / "builtin_manifest.json").read_text())
    assert not any("defect" in json.dumps(e) for e in _entries(clean).values())


def test_rate_kinds_and_manifest(gen):
    _, dirty, _, bench = gen
    m = json.loads((dirty / "builtin_manifest.json").read_text())["defects"]
    assert m["rate"] == RATE and m["seed"] == 0 and m["split"] == {"seed": 0, "test_frac": 0.1, "part": "train"}
    assert abs(m["share"] - RATE) <= 0.03
    assert set(m["by_kind"]) == set(KINDS) and all(m["by_kind"][k] > 0 for k in KINDS)
    assert all(m["schema_variants"][v] > 0 for v in SCHEMA_VARIANTS)
    # recount from the loaded data: one defective boundary per labelled task, over the train boundaries
    split = make_split(bench.tasks, seed=0)
    train = [t for t in bench.tasks if t.uid in set(split["splits"]["train"])]
    kinds = [k for t in train for k in _task_kinds(t)]
    assert len(kinds) == m["defective_boundaries"] == sum(m["by_kind"].values())
    assert sum(t.n_boundaries for t in train) == m["train_boundaries"]
    assert m["share"] == round(len(kinds) / m["train_boundaries"], 6)


def test_split_unchanged_and_held_out_tasks_clean(gen):
    clean, dirty, cb, db = gen
    sc, sd = make_split(cb.tasks, seed=0), make_split(db.tasks, seed=0)
    assert sd["splits"] == sc["splits"] and set(sd["leakage"].values()) == {0}
    test = set(sc["splits"]["test"])
    ce, de = _entries(clean), _entries(dirty)
    assert ce.keys() == de.keys()
    for uid in test:
        assert de[uid] == ce[uid], uid                 # held-out references are byte-for-byte the clean ones
    changed = {u for u in ce if ce[u] != de[u]}
    assert changed and not changed & test
    for t in db.tasks:                                  # defect steps are never scorable; clean steps are unchanged
        c = cb.task(t.uid)
        assert [s.sig for s in t.scorable_steps] == [s.sig for s in c.scorable_steps]
        assert all(not s.scorable for s in t.steps if s.defect)


def test_labels_in_the_data(gen):
    _, dirty, _, bench = gen
    ents = _entries(dirty)
    for t in bench.tasks:
        e = ents[t.uid]
        for s, raw in zip(t.steps, e["tool list"]):
            assert s.defect == (raw.get("defect") or {}).get("kind")
        if t.final_after is not None:
            assert e["defect"] == {"kind": "premature_finish", "final_after_steps": t.final_after}
            assert 1 <= t.final_after < len(t.steps) and t.n_boundaries == t.final_after + 1
        for s in t.steps:
            if s.defect == "tool_failure":
                assert s.status == "failed" and s.output.startswith("ERROR:") and s.key is not None
            elif s.defect == "off_catalog":
                assert s.key is None
            elif s.defect == "repeat":
                orig = [x for x in t.steps if x.sig == s.sig and not x.defect]
                assert orig and orig[0].index < s.index and orig[0].output == s.output


# ----------------------------------------------------------------------------- replay, documents, verification

def test_replay_labels_verification_and_oracle(sample):
    from hpd.teacher.canon import tool_calls
    from hpd.teacher.verify import verify

    _, _, out = sample
    seen = set()
    for t, bs, items in out:
        n_def = 0
        for b, it in zip(bs, items):
            k = boundary_defect(b)
            steps = b.reference_meta["steps"]
            want = next((t.steps[i].defect for i in steps if t.steps[i].defect), None)
            if not steps and t.final_after is not None:
                want = "premature_finish"
            assert k == want, b.uid
            v = verify(it.reference, it, it.restore())
            plan = b.document("plan").plan
            assert all(not t.steps[p.step - 1].defect for p in plan), b.uid     # defects are never pending
            if k is None:
                assert v.ok and b.reference_meta["compliant"] and "clean_action" not in b.reference_meta, b.uid
                continue
            n_def += 1
            seen.add((t.kind, k))
            assert not v.ok and v.reasons[0] == EXPECTED_REASON[k], (b.uid, v)
            assert not b.reference_meta["compliant"]
            clean = b.reference_meta["clean_action"]
            vc = verify(clean, it, it.restore())
            assert vc.ok, (b.uid, vc)
            na = b.document("oracle").next_action
            want_calls = [(c["name"], c["arguments"]) for c in tool_calls(clean)]
            assert [(c.name, c.arguments) for c in na.calls] == want_calls, b.uid
            if k == "premature_finish":   # the next pending clean call, while the reference answered
                assert want_calls and want_calls[0][1] == t.steps[t.final_after].call()["arguments"]
                assert not it.can_end
        assert n_def == 1, t.uid
    assert {k for _, k in seen} == set(KINDS)


def test_replay_continues_after_the_defect(sample):
    _, _, out = sample
    for t, bs, _ in out:
        if t.final_after is not None:                    # the episode ends with the early answer
            assert len(bs) == t.final_after + 1 and bs[-1].reference_meta["kind"] == "final"
            continue
        assert len(bs) == t.n_boundaries
        last = bs[-1].state
        calls = {c["ref_step"]: c for c in last["calls"]}
        for s in t.steps:
            c = calls.get(s.index) if t.kind == "sequential" else None
            if c is None:
                continue
            if s.defect == "repeat" or not s.defect:
                assert c["ok"], (t.uid, s.index, c)
            else:
                assert not c["ok"] and c["error_kind"], (t.uid, s.index, c)
        assert last["reference"]["end_complies"] and not last["reference"]["remaining"]


def test_unlabelled_recorded_repeat_stays_exempt(sample, tmp_path):
    """TRAJECT's recorded identical repeats (scorable gold) keep their exemption; only the label removes it."""
    from hpd.boundary import replay_task
    from hpd.teacher.boundaries import items_from_boundaries
    from hpd.teacher.verify import verify

    bench, cfg, out = sample
    t = next(t for t, _, _ in out if t.kind == "sequential" and "repeat" in _task_kinds(t))
    d = tmp_path / "data"
    for p in bench.data_dir.rglob("*.json"):
        q = d / p.relative_to(bench.data_dir)
        q.parent.mkdir(parents=True, exist_ok=True)
        q.write_bytes(p.read_bytes())
    rel, idx = t.uid.rsplit("#", 1)
    entries = json.loads((d / rel).read_text())
    for s in entries[int(idx)]["tool list"]:
        s.pop("defect", None)
    (d / rel).write_text(json.dumps(entries))
    b2 = load_bench(d)
    t2 = b2.task(t.uid)
    assert all(s.scorable for s in t2.steps)
    bs = replay_task(t2, b2, cfg, keep_forks=True)
    for b, it in zip(bs, items_from_boundaries(bs)):
        assert boundary_defect(b) is None
        assert verify(it.reference, it, it.restore()).ok, b.uid


# ----------------------------------------------------------------------------- metrics

def test_reference_metrics_score_against_the_clean_steps(gen, sample):
    from hpd.boundary.replay import start_replay
    from hpd.eval import metrics as M
    from hpd.eval.reference import ReferencePolicy
    from hpd.eval.rollout import run_rollouts, summarize

    cb = gen[2]
    bench, cfg, out = sample
    tasks = [t for t, _, _ in out]
    rows, _ = run_rollouts(bench, tasks, ReferencePolicy(), batch_size=64, keep_messages=False)
    s = summarize(rows)
    assert s["TS"] == s["Step-SR"] == s["Exact"] == 1.0
    for r in rows:
        assert r["n_scorable"] == len(cb.task(r["uid"]).scorable_steps)
    for t in tasks:   # the defective reference itself, as replayed, scored like a prediction
        h, _, plan = start_replay(t, bench, cfg)
        for msg in plan.messages:
            h.step(msg)
        row = M.score_task(t, M.prediction_from_messages(h.transcript, bench.pool(t, cfg.pool_k), h.end_reason),
                           bench.pool(t, cfg.pool_k))
        assert row["n_scorable"] == len(cb.task(t.uid).scorable_steps)
        assert row["matched"] == (t.final_after if t.final_after is not None else row["n_scorable"]), t.uid


# ----------------------------------------------------------------------------- accounting

def test_run_replay_of_train_tasks_and_accounting(gen, sample, tmp_path):
    from hpd.boundary import ReplayConfig, load_boundaries, run_replay

    _, dirty, _, bench = gen
    _, _, out = sample
    uids = [t.uid for t, _, _ in out] + [t.uid for t in bench.tasks if not _task_kinds(t)][:3]
    split = tmp_path / "split.json"
    split.write_text(json.dumps({"train": uids}))
    run_replay(dirty, tmp_path / "rep", ReplayConfig(pool_k=3, max_turns="auto"), split_file=split, split="train",
               bench=bench)
    bds = load_boundaries(tmp_path / "rep")
    by_uid = {b.uid: b for t, bs, _ in out for b in bs}
    for b in bds:
        assert boundary_defect(b) == (boundary_defect(by_uid[b.uid]) if b.uid in by_uid else None)
    acc = defect_accounting(bds)
    assert acc["n_boundaries"] == len(bds) and acc["n_defective"] == len(out)
    assert acc["share"] == len(out) / len(bds) and sum(acc["by_kind"].values()) == len(out)
    assert set(acc["by_kind"]) == set(KINDS) and "replaced" not in acc
    defective = [b for b in bds if boundary_defect(b)]
    targets = {defective[0].uid: {"target": {"source": "teacher"}, "dropped": False},
               defective[1].uid: {"target": {"source": "reference_fallback"}, "dropped": False},
               defective[2].uid: {"target": None, "dropped": True}}
    acc = defect_accounting(bds, targets)
    assert (acc["replaced"], acc["fell_back"], acc["dropped"]) == (1, 1, len(defective) - 2)
    k0 = boundary_defect(defective[0])
    assert acc["per_kind"][k0]["replaced"] == 1 and set(acc["per_kind"]) == set(KINDS)
    assert sum(v["n"] for v in acc["per_kind"].values()) == len(defective)


def test_oracle_teacher_replaces_every_defect(sample):
    from hpd.teacher.proposal import OracleTeacher
    from hpd.teacher.run import TeachConfig, teach

    _, _, out = sample
    bs = [b for _, bs, _ in out for b in bs]
    items = [it for _, _, its in out for it in its]
    res = teach(items, OracleTeacher(), TeachConfig(privilege="oracle", attempts=1))
    acc = defect_accounting(bs, {r["boundary_id"]: r for r in res.records})
    assert acc["n_defective"] == len(out) and acc["replaced"] == len(out)
    assert acc["fell_back"] == acc["dropped"] == 0
    assert all(v["replaced"] == v["n"] for v in acc["per_kind"].values())
