import json

import pytest

from hpd.bench.split import leakage, make_split, r1_groups, select
from hpd.bench.stats import compute_stats

# docs/traject-bench.md sec 3.1: (par-simple, par-hard, seq traj_query, seq Travel simple_ver, mean steps par, mean
# steps seq, seq step success %) per domain; None = not given / absent.
DOC = {
    "Education": (200, 200, 200, 0, 6.57, 6.50, 87.5),
    "Email": (200, 200, 0, 0, 6.50, None, None),
    "Finance": (200, 200, 135, 0, 6.57, 5.67, 94.5),
    "Gaming": (200, 200, 185, 0, 6.56, 6.35, 69.6),
    "Mapping": (200, 200, 200, 0, 6.53, 6.45, 81.6),
    "Music": (200, 200, 200, 0, 6.50, 6.50, 89.3),
    "News_Media": (None, None, 180, 0, None, 6.39, 80.8),
    "Travel": (200, 200, 170, 200, 6.50, 6.53, 95.2),
    "Weather": (200, 200, 200, 0, 6.50, 6.50, 94.2),
    "eCommerce": (200, 200, 200, 0, 6.50, 6.50, 95.8),
}
# docs/traject-bench.md sec 2.3: catalog entries per tools file
DOC_TOOLS = {"Education": 89, "Email": 70, "Finance": 258, "Gaming": 84, "Mapping": 124, "Music": 137,
             "News_Media": 118, "Travel": 131, "Weather": 135, "eCommerce": 82}


def test_stats_agree_with_doc(traject_bench):
    """A TRAJECT-Bench fact: the counts of the real data are the documented ones."""
    bench = traject_bench
    st = compute_stats(bench)
    checked = 0
    for dom, row in st["tasks"].items():
        if dom not in DOC:
            continue
        ps, ph, sq, ts, mp, ms, ok = DOC[dom]
        pd = st["per_domain"][dom]
        if ps is not None and row.get("parallel/simple"):
            assert row["parallel/simple"] == ps and row["parallel/hard"] == ph
            assert abs(pd["mean_steps_parallel"] - mp) < 0.006
        assert row.get("sequential/traj_query", 0) == sq
        assert row.get("sequential/simple", 0) == ts
        if ms is not None and pd["mean_steps_sequential"] is not None:
            assert abs(pd["mean_steps_sequential"] - ms) < 0.006 and abs(pd["seq_step_success_pct"] - ok) < 0.06
        checked += 1
    assert checked == len(st["tasks"])                        # every present domain is a documented one
    for src, n in st["catalog"]["entries_per_file"].items():
        dom = src.split("/")[-1][: -len("_tool.json")]
        if dom in DOC_TOOLS:
            assert n == DOC_TOOLS[dom]
    assert st["boundaries_D2"] == sum(2 if t.kind == "parallel" else len(t.steps) + 1 for t in bench.tasks)
    assert st["scorable"]["tasks_without_scorable"] == 0


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """The built-in benchmark at the demo's default size (30 per domain and kind: 6 templates per domain, so
    10% of the groups is at least one in every stratum)."""
    from hpd.bench.builtin import generate
    from hpd.bench.loader import load_bench

    return load_bench(generate(tmp_path_factory.mktemp("big") / "data", seed=0, n_per_domain=30))


def test_split_leakage_free_and_deterministic(big):
    bench = big
    a = make_split(bench.tasks, seed=0)
    b = make_split(bench.tasks, seed=0)
    c = make_split(bench.tasks, seed=1)
    assert a["splits"] == b["splits"] and a["splits"]["test"] != c["splits"]["test"]
    assert all(v == 0 for v in a["leakage"].values()) and set(a["leakage"]) == {
        "query", "trajectory", "twin", "template", "tool_sequence"}
    assert 0.08 <= a["sizes"]["test_share"] <= 0.12
    assert a["sizes"]["train"] + a["sizes"]["test"] == len(bench.tasks)
    assert not set(a["splits"]["train"]) & set(a["splits"]["test"])
    # every (kind, domain) stratum holds round(10%) of its groups in test
    assert all(v["test_groups"] == round(0.1 * v["groups"]) for v in a["by_stratum"].values())
    strata = {(t.kind, t.domain) for t in select(bench.tasks, a, "test")}
    assert strata == {tuple(k.split("/")) for k, v in a["by_stratum"].items() if v["test_groups"]}
    assert len(strata) >= 6
    json.dumps(a)


def test_split_puts_every_real_stratum_in_test(traject_bench):
    """A TRAJECT-Bench fact: every (kind, domain) of the real data has enough groups for a test share."""
    a = make_split(traject_bench.tasks, seed=0)
    assert all(v == 0 for v in a["leakage"].values()) and 0.08 <= a["sizes"]["test_share"] <= 0.12
    strata = {(t.kind, t.domain) for t in select(traject_bench.tasks, a, "test")}
    assert strata == {(t.kind, t.domain) for t in traject_bench.tasks}


def test_leakage_check_detects_a_moved_twin(big):
    bench = big
    sp = make_split(bench.tasks, seed=0)
    test = set(sp["splits"]["test"])
    twin = next(u for u in test if u.startswith("parallel/") and "simple_ver" in u)
    test.discard(twin)                                        # its hard twin stays in test
    assert leakage(bench.tasks, test)["twin"] >= 1


def test_groups_keep_families_together(mini):
    groups = r1_groups(mini.tasks)
    uids = [[mini.tasks[i].uid for i in g] for g in groups]
    seq = [g for g in uids if g[0].startswith("sequential")]
    assert len(seq) == 1 and len(seq[0]) == 5                  # one template -> one group
    par = [g for g in uids if g[0].startswith("parallel")]
    assert all(len(g) == 2 for g in par) and len(par) == 4     # simple/hard twins
