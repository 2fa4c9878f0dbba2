import json

import pytest

from hpd.bench.replay import MISS_TEXT, ReplayError


def _seq(mini, i=0):
    return mini.task(f"sequential/Zoology/traj_query.json#{i}")


def test_pool_deterministic_gold_first_class(mini, bench):
    t = mini.task("parallel/Zoology/simple_ver.json#0")
    p1, p2 = mini.pool(t, 20), mini.pool(t, 20)
    assert p1.keys == p2.keys and len(p1.keys) == 20 and len(set(p1.keys)) == 20
    gold = {s.key for s in t.steps if s.key}
    assert gold <= set(p1.keys) and "missing tool: gone" not in p1.keys
    other = mini.pool(mini.task("parallel/Zoology/simple_ver.json#1"), 20)
    assert set(other.keys) != set(p1.keys)                       # seeded per uid
    assert set(mini.pool(t, None).keys) == set(mini.catalog.domain_tools("Zoology"))  # full-domain option
    # the built-in benchmark (10 tools per domain): pools are k tools, same-domain distractors, deterministic
    rt = bench.tasks[0]
    rp = bench.pool(rt, 6)
    assert len(rp.keys) == 6 and rp.keys == bench.pool(rt, 6).keys
    dom = set(bench.catalog.domain_tools(rt.domain))
    assert all(k in dom or k in {s.key for s in rt.steps} for k in rp.keys)


def test_sequential_plan_never_shown(mini, bench):
    t = _seq(mini)
    shown = json.dumps(mini.pool(t).specs())
    assert "SECRET-PLAN" not in shown and "REASON-NOT-ANSWER" not in shown
    seq = [t for t in bench.tasks if t.kind == "sequential"][:200]
    for t in seq:
        shown = json.dumps(bench.pool(t).specs())
        for s in t.steps:
            if s.description and len(s.description) > 40:
                assert s.description not in shown


def test_exact_fifo_failure_and_fork(mini):
    t = _seq(mini, 0)
    env = mini.env(t)
    name = env.pool.display("animal db: habitat: lookup")
    r1 = env.execute(name, {"id": 7})
    r2 = env.execute(name, {"id": "7"})                          # identical after canonicalisation
    g = env.fork()
    r3 = env.execute(name, {"id": 7.0})
    assert (r1["text"], r2["text"], r3["text"]) == ("{'habitat': 'forest'}", "{'habitat': 'forest2'}", "{'habitat': 'forest2'}")
    assert [c["match"] for c in env.calls] == ["exact"] * 3 and [c["step"] for c in env.calls] == [2, 3, 3]
    assert len(g.calls) == 2 and g.execute(name, {"id": 7})["text"] == "{'habitat': 'forest2'}"
    assert len(env.calls) == 3                                   # fork did not touch the original
    f = env.execute(env.pool.display("geo: point"), {"lat": 9, "lon": 9})
    assert f["is_error"] and f["text"] == "ERROR: Failed after 5 attempts" and f["match"] == "exact"
    assert env.calls[-1]["scorable"] is False


def test_near_global_miss_unknown_schema(mini):
    t = mini.task("parallel/Zoology/simple_ver.json#0")
    env = mini.env(t)
    search = env.pool.display("animal db: search")
    r = env.execute(search, {"q": "LION0!", "limit": 5, "page": 1})      # punctuation/case, default-like page
    assert r["match"] == "exact" or r["match"] == "near"
    r = env.execute(search, {"q": "lion0", "page": 1})                  # limit dropped, page default-like
    assert r["match"] == "near" and r["text"] == "{'hits': ['lion0']}"
    point = env.pool.display("geo: point")
    assert env.execute(point, {"lat": 1.23457, "lon": -7.5})["match"] == "near"   # lat within 1e-4
    miss = env.execute(point, {"lat": 1.3, "lon": -7.5})
    assert miss["match"] == "miss" and miss["text"] == MISS_TEXT and miss["is_error"]
    miss2 = env.execute(search, {"q": "lion3"})                          # another task's call
    assert miss2["text"] == MISS_TEXT                                     # same text: nothing leaks
    genv = mini.env(t, allow_global=True)
    gl = genv.execute(search, {"q": "lion3", "limit": "5"})
    assert gl["match"] == "global" and gl["text"] == "{'hits': ['lion3']}"
    unk = env.execute("Animal DB: Serch", {"q": "x"})
    assert unk["match"] == "unknown_tool" and unk["text"].startswith("ERROR: Tool 'Animal DB: Serch' not found")
    assert "Animal DB: Search" in unk["text"]
    sch = env.execute(search, {"limit": 3})
    assert sch["match"] == "schema_error" and sch["text"] == "ERROR: Missing required parameters: ['q']"
    bad = env.execute(search, {"q": "lion0", "colour": "red"})
    assert bad["match"] == "schema_error" and "colour" in bad["text"] and "lion" not in bad["text"]
    typ = env.execute(point, {"lat": "north", "lon": 1})
    assert typ["match"] == "schema_error" and "lat" in typ["text"]
    lv = [c["match"] for c in env.calls]
    assert lv.count("miss") == 2 and "unknown_tool" in lv


def test_error_texts_never_reveal_gold_values(bench):
    for t in bench.tasks[::97]:
        env = bench.env(t)
        for s in t.scorable_steps:
            name = env.pool.display(s.key)
            wrong = {k: "zzzz-wrong" for k in s.arguments}
            r = env.execute(name, wrong)
            if r["is_error"]:
                for v in s.arguments.values():
                    if isinstance(v, str) and len(v) >= 4:
                        assert v not in r["text"]


def test_tools_raise_on_error_through_harness(mini):
    from hpd.harness import Harness, LoopConfig, assistant_message, tool_call, user_message, text
    t = mini.task("parallel/Zoology/simple_ver.json#2")
    env = mini.env(t)
    tools = env.tools()
    assert {x.name for x in tools} == set(env.pool.names())
    h = Harness.start(prompts=[user_message(t.query)], system_prompt="s", env=env, config=LoopConfig())
    search = env.pool.display("animal db: search")
    h.step(assistant_message([tool_call("a", search, {"q": "lion2", "limit": 5}),
                              tool_call("b", search, {"q": "nothing"})]))
    res = h.last_tool_results
    assert res[0]["isError"] is False and res[0]["content"][0]["text"] == "{'hits': ['lion2']}"
    assert res[1]["isError"] is True and res[1]["content"][0]["text"] == MISS_TEXT
    g = h.fork()
    assert g.env is not env and len(g.env.calls) == 2
    g.step(assistant_message([text("done")]))
    assert g.done and h.done is False
    with pytest.raises(ReplayError):
        tools[0].execute("x", {"bogus": 1})
