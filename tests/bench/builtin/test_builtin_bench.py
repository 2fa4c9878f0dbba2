"""hpd.bench.builtin: determinism, real execution, dependencies, TRAJECT layout, loader, env."""

from __future__ import annotations

import ast
import json
import re
import statistics
from collections import Counter
from pathlib import Path

import pytest

from hpd.bench.builtin import (BuiltinEnv, ToolInputError, build, domain_catalog, domains, execute,
                               generate)
from hpd.bench.builtin.registry import TRAJECT_TYPES

PAR_KEYS = ["query", "tool list", "trajectory_type", "tool count", "final_answer"]
PAR_STEP_KEYS = ["tool name", "tool description", "required parameters", "optional parameters", "executed_output"]
SEQ_KEYS = ["query", "final_answer", "tool list", "sequence_name", "sequence_description", "num_tools_used",
            "num_successful_tools", "domain", "executable", "generation_info"]
SEQ_STEP_KEYS = ["tool name", "tool description", "required parameters", "optional parameters", "execution_status",
                 "executed_output", "API name", "domain name", "parent tool name", "sequence_step",
                 "original_description"]
ADAPT_KEYS = ["adapt_parameter", "adapt_constraint", "adapt_reason"]
TOOL_KEYS = {"tool name", "parent tool name", "API name", "parent tool description", "tool description",
             "domain name", "required_parameters", "optional_parameters", "code", "output_info", "connected tools"}
NUM = re.compile(r"-?\d+(?:\.\d+)?")


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return generate(tmp_path_factory.mktemp("builtin") / "data", seed=0)


def _files(d: Path) -> dict[str, bytes]:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*.json"))}


def _tasks(d: Path):
    for f in sorted(d.glob("parallel/*/*.json")) + sorted(d.glob("sequential/*/*.json")):
        for i, e in enumerate(json.loads(f.read_text())):
            yield f.relative_to(d).as_posix(), i, e


def _args(step: dict) -> dict:
    return {p["name"]: p["value"] for p in step["required parameters"] + step["optional parameters"]}


def _scalars(obj):
    if isinstance(obj, dict):
        for v in obj.values():
            yield from _scalars(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _scalars(v)
    elif not isinstance(obj, bool) and obj is not None:
        yield obj


# ----------------------------------------------------------------------------- determinism

def test_same_seed_byte_identical_different_seed_differs(tmp_path):
    a = _files(generate(tmp_path / "a", seed=3, n_per_domain=10))
    b = _files(generate(tmp_path / "b", seed=3, n_per_domain=10))
    c = _files(generate(tmp_path / "c", seed=4, n_per_domain=10))
    assert a == b
    assert a.keys() == c.keys()
    task_files = [k for k in a if k.startswith(("parallel/", "sequential/"))]
    assert task_files and all(a[k] != c[k] for k in task_files)
    assert a["tools/Weather_tool.json"] == c["tools/Weather_tool.json"]      # catalogs do not depend on seed
    m = json.loads(a["builtin_manifest.json"])
    assert (m["seed"], m["generator_version"], m["world_seed"]) == (3, "1.0.0", 0)
    assert m["counts"] == {"parallel_simple": 40, "parallel_hard": 40, "sequential": 40, "tasks": 120}


def test_sizes_knobs_and_bad_input(tmp_path):
    d = generate(tmp_path / "x", seed=0, n_parallel=3, n_sequential=7, domains=["Math"])
    assert len(json.loads((d / "parallel/Math/simple_ver.json").read_text())) == 3
    assert len(json.loads((d / "sequential/Math/traj_query.json").read_text())) == 10    # rounded up to 5s
    assert not (d / "parallel/Weather").exists()
    with pytest.raises(ValueError, match="unknown built-in domain"):
        build(domains=["Nope"])


# ----------------------------------------------------------------------------- real execution

def test_every_recorded_output_reexecutes(data):
    n = 0
    for _, _, e in _tasks(data):
        for s in e["tool list"]:
            assert execute(s["tool name"], _args(s)) == s["executed_output"]
            n += 1
    assert n > 1000


def test_tools_really_compute_off_the_reference_path():
    assert ast.literal_eval(execute("Units: convert_length", {"value": 1, "from_unit": "km", "to_unit": "mi"}))[
        "result"] == 0.6214
    assert ast.literal_eval(execute("Units: convert_temperature", {"value": 212, "from_scale": "F",
                                                                   "to_scale": "C"}))["result"] == 100
    assert ast.literal_eval(execute("Calc: arithmetic", {"expression": "(2 + 3) * 4"}))["result"] == 20
    assert ast.literal_eval(execute("NumberTheory: gcd_lcm", {"a": 12, "b": "18"})) == {
        "a": 12, "b": 18, "gcd": 6, "lcm": 36}
    assert ast.literal_eval(execute("ShopAPI: apply_coupon", {"price": 200, "code": "save10"}))["final_price"] == 180
    st = ast.literal_eval(execute("GeoLookup: nearest_station", {"lat": 59.91, "lon": 10.75}))
    assert st["city"] == "Oslo"
    obs = ast.literal_eval(execute("StationData: observation", {"station_id": st["station_id"]}))
    assert obs["station_id"] == st["station_id"]
    assert ast.literal_eval(execute("WorldClock: local_time", {"city": "Mumbai", "utc_time": "10:00"}))[
        "local"] == "15:30"
    # coerced numeric strings give the same answer as numbers (the harness may pass either)
    assert execute("Calc: percentage", {"value": "80", "percent": "15"}) == execute(
        "Calc: percentage", {"value": 80, "percent": 15})


@pytest.mark.parametrize("name,args,msg", [
    ("Nope: tool", {}, "not found in available tools"),
    ("Calc: arithmetic", {}, "Missing required parameters: ['expression']"),
    ("Calc: arithmetic", {"expression": "1+1", "x": 1}, "unknown parameters ['x']"),
    ("Calc: percentage", {"value": "abc", "percent": 5}, "must be a number"),
    ("Units: convert_length", {"value": 1, "from_unit": "parsec", "to_unit": "m"}, "must be one of"),
    ("WeatherHub: sunrise_sunset", {"city": "Oslo", "date": "2025-13-01"}, "YYYY-MM-DD"),
    ("GeoLookup: city_coordinates", {"city": "Atlantis"}, "not found"),
    ("Calc: arithmetic", {"expression": "__import__('os')"}, "may only contain"),
    ("ShopAPI: apply_coupon", {"price": 10, "code": "FREE"}, "not valid"),
])
def test_invalid_input_raises_one_line_message(name, args, msg):
    with pytest.raises(ToolInputError) as ei:
        execute(name, args)
    assert msg in str(ei.value) and "\n" not in str(ei.value)


# ----------------------------------------------------------------------------- structure

def test_traject_layout_and_keys(data):
    doms = domains()
    assert sorted(p.name for p in (data / "parallel").iterdir()) == sorted(doms)
    for d in doms:
        assert {p.name for p in (data / "parallel" / d).iterdir()} == {"simple_ver.json", "hard_ver.json"}
        assert {p.name for p in (data / "sequential" / d).iterdir()} == {"traj_query.json"}
        tools = json.loads((data / "tools" / f"{d}_tool.json").read_text())
        assert 6 <= len(tools) <= 10
        assert any(t["domain name"] != d for t in tools)             # a mixed-domain distractor, as in TRAJECT
        for t in tools:
            assert set(t) == TOOL_KEYS
            assert t["tool name"] == f"{t['parent tool name']}: {t['API name']}"
            assert set(t["output_info"]) == {"output_info_summary", "output_format"}
            for p in t["required_parameters"] + t["optional_parameters"]:
                assert list(p) == ["name", "type", "description", "default"] and p["type"] in TRAJECT_TYPES
        names = {t["tool name"] for t in tools}
        simple = json.loads((data / "parallel" / d / "simple_ver.json").read_text())
        hard = json.loads((data / "parallel" / d / "hard_ver.json").read_text())
        assert len(simple) == len(hard) > 0
        for s, h in zip(simple, hard):
            for e in (s, h):
                assert list(e) == PAR_KEYS and e["trajectory_type"] == "parallel"
                assert isinstance(e["final_answer"], str) and e["final_answer"]
                assert e["tool count"] == len(e["tool list"]) and 2 <= len(e["tool list"]) <= 4
                for st in e["tool list"]:
                    assert list(st) == PAR_STEP_KEYS and st["tool name"] in names
                    assert all(list(p) == ["name", "value"] for p in st["required parameters"] + st["optional parameters"])
            assert s["tool list"] == h["tool list"]                    # twins share the trajectory
            assert s["query"] != h["query"] and s["final_answer"] != h["final_answer"]
        seq = json.loads((data / "sequential" / d / "traj_query.json").read_text())
        groups = Counter(e["generation_info"]["sequence_index"] for e in seq)
        assert set(groups.values()) == {5}
        for e in seq:
            assert list(e) == SEQ_KEYS and e["domain"] == d and e["executable"] is True
            assert set(e["final_answer"]) == {"answer", "reason"}
            assert e["num_tools_used"] == e["num_successful_tools"] == len(e["tool list"])
            assert 2 <= len(e["tool list"]) <= 4
            gi = e["generation_info"]
            assert set(gi) == {"domain_index", "sequence_index", "trajectory_index", "timestamp", "model"}
            assert re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}", gi["timestamp"])
            for k, st in enumerate(e["tool list"], 1):
                assert list(st)[:len(SEQ_STEP_KEYS)] == SEQ_STEP_KEYS
                assert set(st) - set(SEQ_STEP_KEYS) in (set(), set(ADAPT_KEYS))
                assert st["tool name"] in names and st["execution_status"] == "success"
                assert st["tool name"] == f"{st['parent tool name']}: {st['API name']}"
                ss = st["sequence_step"]
                assert set(ss) == {"step_number", "tool_name", "description", "param_for_next_tool",
                                   "original_description"}
                assert ss["step_number"] == k and ss["tool_name"] == st["tool name"]
        by_t: dict[int, list] = {}
        for e in seq:
            by_t.setdefault(e["generation_info"]["sequence_index"], []).append(e)
        for es in by_t.values():
            assert sorted(e["generation_info"]["trajectory_index"] for e in es) == [0, 1, 2, 3, 4]
            assert len({e["query"] for e in es}) == 5 and len({e["sequence_name"] for e in es}) == 1
        assert len({e["query"] for e in simple}) == len(simple)


def _dependency_ok(value, earlier_outputs: list[str]) -> bool:
    if isinstance(value, str):
        if any(repr(value) in o for o in earlier_outputs):
            return True
        nums = NUM.findall(value)                     # e.g. an expression built from an earlier number
        return bool(nums) and any(re.search(rf"(?<![\d.]){re.escape(nums[0])}(?![\d.])", o)
                                  for o in earlier_outputs)
    return any(re.search(rf"(?<![\d.]){re.escape(str(value))}(?![\d.])", o) for o in earlier_outputs)


def test_sequential_dependencies_hold(data):
    n_tasks = n_hidden = 0
    for _, _, e in _tasks(data):
        if "sequence_name" not in e:
            continue
        n_tasks += 1
        steps = e["tool list"]
        adapted = [(k, st) for k, st in enumerate(steps) if "adapt_parameter" in st]
        assert adapted and all(k > 0 for k, _ in adapted)
        hidden = False
        for k, st in adapted:
            args = _args(st)
            for p in st["adapt_parameter"].split(", "):
                earlier = [s["executed_output"] for s in steps[:k]]
                assert _dependency_ok(args[p], earlier), (e["query"], p, args[p])
                hidden |= str(args[p]) not in e["query"]
        n_hidden += hidden
        # param_for_next_tool names a parameter of the next step when set
        for a, b in zip(steps, steps[1:]):
            for p in filter(None, a["sequence_step"]["param_for_next_tool"].split(", ")):
                assert p in _args(b) or any(p in _args(s) for s in steps)
    assert n_tasks >= 100
    assert n_hidden / n_tasks >= 0.8          # the dependent value must usually come from a tool, not the query


def test_answers_mention_output_values(data):
    for _, _, e in _tasks(data):
        ans = e["final_answer"] if isinstance(e["final_answer"], str) else e["final_answer"]["answer"]
        steps = e["tool list"] if isinstance(e["final_answer"], str) else e["tool list"][-1:]
        for st in steps:
            vals = [str(v) for v in _scalars(ast.literal_eval(st["executed_output"]))]
            assert not vals or any(v in ans for v in vals), (ans, st["executed_output"])


def test_contexts_are_small(data):
    cats = {d: [t.json_schema() | {"name": t.name, "description": t.description} for t in domain_catalog(d)]
            for d in domains()}
    sizes, outs = [], []
    for rel, _, e in _tasks(data):
        sizes.append(len(e["query"]) + len(json.dumps(cats[rel.split("/")[1]])))
        outs += [len(s["executed_output"]) for s in e["tool list"]]
    assert statistics.median(sizes) < 4500            # ~1k tokens incl. chat framing (see report)
    assert statistics.median(outs) < 200 and max(outs) < 600


# ----------------------------------------------------------------------------- loader + env

def test_loads_through_bench_loader(data):
    from hpd.bench.loader import load_bench
    b = load_bench(data)
    assert not b.skipped and len(b.tasks) == 480
    assert Counter((t.kind, t.difficulty) for t in b.tasks) == {
        ("parallel", "simple"): 160, ("parallel", "hard"): 160, ("sequential", "traj_query"): 160}
    assert all(s.scorable for t in b.tasks for s in t.steps)
    t = next(t for t in b.tasks if t.kind == "sequential")
    env = b.env(t)
    for s in t.steps:                                 # the replay path serves the same recorded outputs
        r = env.execute(s.tool, s.arguments)
        assert (r["match"], r["text"]) == ("exact", s.output)


def test_builtin_env_in_the_harness(data):
    from hpd.bench.loader import load_bench
    from hpd.harness import Harness, assistant_message, text, tool_call, user_message
    b = load_bench(data)
    t = next(t for t in b.tasks if t.kind == "sequential" and t.steps[0].tool == "GeoLookup: city_coordinates")
    env = BuiltinEnv(t, bench=b)
    assert [x.name for x in env.tools()] == b.pool(t).names()          # same view as the replay path
    h = Harness.start(prompts=[user_message(t.query)], system_prompt="sys", env=env)
    gold = t.steps[0]
    other_city = "Lima" if gold.arguments["city"] != "Lima" else "Oslo"
    h.step(assistant_message([tool_call("c1", gold.tool, dict(gold.arguments)),
                              tool_call("c2", gold.tool, {"city": other_city}),
                              tool_call("c3", gold.tool, {"city": "Atlantis"})], stop_reason="toolUse"))
    res = h.last_tool_results
    assert res[0]["content"][0]["text"] == gold.output and not res[0]["isError"]
    assert not res[1]["isError"] and ast.literal_eval(res[1]["content"][0]["text"])["city"] == other_city
    assert res[2]["isError"] and "'Atlantis' not found" in res[2]["content"][0]["text"]
    assert [c["match"] for c in env.calls] == ["exact", "live", "error"]
    g = h.fork()
    g.step(assistant_message([text("done")], stop_reason="stop"))
    assert g.done and not h.done


def test_builtin_env_off_path_is_live():
    env = BuiltinEnv("Weather")
    names = [x.name for x in env.tools()]
    assert "WeatherHub: current_weather" in names and len(names) == len(domain_catalog("Weather"))
    tool = next(x for x in env.tools() if x.name == "GeoLookup: city_coordinates")
    out = tool.execute("id1", {"city": "Reykjavik"})
    assert ast.literal_eval(out["content"][0]["text"])["country"] == "Iceland"
    assert env.calls[-1]["match"] == "live"
    f = env.fork()
    f.execute("WeatherHub: air_quality", {"city": "Oslo"})
    assert len(f.calls) == 2 and len(env.calls) == 1
    r = env.execute("ShopAPI: apply_coupon", {"price": 1, "code": "SAVE10"})   # not in this env's tools
    assert r["match"] == "unknown_tool" and r["is_error"]
    with pytest.raises(ToolInputError):
        tool.execute("id2", {"city": "Atlantis"})
