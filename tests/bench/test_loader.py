import resource

import pytest

from hpd.bench.canon import canon_name, canon_value, signature, traject_normalize_value
from hpd.bench.catalog import json_type_of_param
from hpd.bench.loader import load_bench, resolve_data_dir


def test_mini_quirks(mini):
    uids = [t.uid for t in mini.tasks]
    assert "parallel/Zoology/simple_ver.json#0" in uids and "sequential/Zoology/traj_query.json#4" in uids
    assert mini.skipped == ["sequential/Zoology/sequence.json"]          # templates file is not tasks
    seq = mini.task("sequential/Zoology/traj_query.json#0")
    assert seq.kind == "sequential" and len(seq.steps) == 4                # read from `tool_list`
    assert seq.final_answer == "Wolf 0 lives in the forest." and seq.final_reason == "REASON-NOT-ANSWER"
    assert [s.status for s in seq.steps] == ["success", "failed", "success", "success"]
    assert [s.scorable for s in seq.steps] == [True, False, True, True]
    assert seq.meta["sequence_index"] == 0
    par = mini.task("parallel/Zoology/hard_ver.json#1")
    assert par.kind == "parallel" and par.difficulty == "hard" and par.domain == "Zoology"
    assert par.final_answer == "Lion1 lives in the savanna."
    lookup = par.steps[1]
    assert lookup.key == "animal db: habitat: lookup"                       # several ": " -> full-name identity
    assert lookup.arguments == {"id": "101"}                                 # `optional parameters` missing
    assert par.steps[3].key is None and not par.steps[3].scorable           # tool missing from catalog
    assert all(s.status == "success" for s in par.steps)                    # parallel: no status -> success


def test_alias_and_template_resolution(mini):
    c = mini.catalog
    assert c.resolve("Animal  DB:  Search") == "animal db: search"
    assert c.resolve("animaldb search") == "animal db: search"               # alnum alias
    assert c.resolve("Zoo API: /animals/123") == "zoo api: /animals/{id}"    # path template
    assert c.resolve("Nope: Nothing") is None


def test_catalog_schema_mapping(mini):
    assert [json_type_of_param(t) for t in ("STRING", "string", "NUMBER", "ENUM", "BOOLEAN", "DATE (YYYY-MM-DD)", "?")] \
        == ["string", "string", "number", "string", "boolean", "string", "string"]
    sch = mini.catalog.schema("geo: point")
    props = sch["properties"]
    assert sch["type"] == "object" and sch["required"] == ["lat", "lon"]
    assert props["when"]["type"] == "string" and "YYYY-MM-DD" in props["when"]["description"]
    assert props["kind"]["type"] == "string" and props["extra"]["type"] == "string"
    assert "default" not in props["lat"]                                     # example values are not defaults
    # gold sends lon as a string for a NUMBER: the type is widened so the reference validates
    assert props["lon"]["type"] == ["number", "string"] and props["lat"]["type"] == "number"
    s2 = mini.catalog.schema("animal db: search")
    assert s2["properties"]["wild"]["type"] == "boolean" and s2["required"] == ["q"]


def test_unknown_domain_and_env_var(mini_dir, monkeypatch):
    monkeypatch.setenv("HPD_TRAJECT_DIR", str(mini_dir))
    assert resolve_data_dir(None) == mini_dir.resolve()
    b = load_bench()
    assert b.domains == ["Zoology"] and len(b.tasks) == 13
    with pytest.raises(FileNotFoundError):
        resolve_data_dir(mini_dir / "nope")


def test_canonicalisation():
    assert canon_name("  Bybit: Contract  Info ") == canon_name("bybit: contract info")
    assert canon_value("10") == canon_value(10) == canon_value(10.0) == canon_value(" 10 ")
    assert canon_value("true") == canon_value(True) == canon_value("True") == canon_value("yes")
    assert canon_value("Paris") == canon_value("paris")
    assert canon_value("2024-1-5") == canon_value("2024-01-05")
    assert canon_value("Rome, IT") == canon_value("rome,italy")
    assert canon_value(1.23456789) == canon_value(1.234568)
    assert traject_normalize_value("Paris") != traject_normalize_value("paris")   # repo is case-sensitive
    assert signature("A: B", {"x": 1, "y": "", "z": None}) == signature("a:  b", {"x": "1"})
    assert canon_value([1, "A"]) == canon_value(["1", "a"]) == canon_value("[1, 'a']")
    assert canon_value({"b": 1, "a": "X"}) == canon_value({"a": "x", "b": "1"})


def test_real_data_loads_under_memory_budget(traject_bench):
    """A TRAJECT-Bench fact: the real data loads whole, with unique uids, in < 2 GB."""
    bench = traject_bench
    assert len(bench.tasks) > 0
    uids = [t.uid for t in bench.tasks]
    assert len(set(uids)) == len(uids) and all("#" in u for u in uids)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 < 2048
    # Travel/simple_ver (tool_list) if present
    tv = [t for t in bench.tasks if t.path == "sequential/Travel/simple_ver.json"]
    if tv:
        assert all(t.steps for t in tv)
    for t in bench.tasks:
        assert t.final_answer.strip() and t.scorable_steps
